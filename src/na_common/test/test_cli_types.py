"""The counts and durations the command-line tools take: accepted values pass through, others are one-line errors."""

import argparse

import pytest

from na_common.cli_types import positive_float, positive_int


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tool", exit_on_error=False)
    parser.add_argument("--jobs", type=positive_int)
    parser.add_argument("--seconds", type=positive_float)
    return parser


def test_whole_numbers_from_one_and_finite_numbers_above_zero_pass() -> None:
    args = _parser().parse_args(["--jobs", "3", "--seconds", "0.25"])
    assert (args.jobs, args.seconds) == (3, 0.25)


@pytest.mark.parametrize("option, text, says", [
    ("--jobs", "0", "must be at least 1"),
    ("--jobs", "-2", "must be at least 1"),
    ("--jobs", "2.5", "not a whole number"),
    ("--seconds", "0", "above 0"),
    ("--seconds", "-1", "above 0"),
    ("--seconds", "inf", "finite"),
    ("--seconds", "nan", "finite"),
    ("--seconds", "soon", "not a number"),
])
def test_other_values_are_refused_naming_the_option(option: str, text: str, says: str) -> None:
    with pytest.raises(argparse.ArgumentError) as refused:
        _parser().parse_args([option, text])
    assert option in str(refused.value) and says in str(refused.value)
    assert "\n" not in str(refused.value)
