"""na-policy: help for every subcommand, and one-line refusals of bad input before anything starts."""

from __future__ import annotations

import pytest

from na_policy.cli import main


@pytest.mark.parametrize("command", [[], ["demos"], ["train"], ["eval"]])
def test_help(command, capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([*command, "--help"])
    assert exit_info.value.code == 0
    assert "usage: na-policy" in capsys.readouterr().out


def test_missing_inputs_are_named(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit, match="no proprio policy at"):
        main(["eval", "--model", str(tmp_path / "m.onnx"), "--policies", str(tmp_path)])
    with pytest.raises(SystemExit, match="estimator model not found"):
        main(["demos", "--model", str(tmp_path / "m.onnx"), "--out", str(tmp_path)])
    with pytest.raises(SystemExit, match="--demos must be >= 1"):
        main(["demos", "--model", str(tmp_path / "m.onnx"), "--demos", "0"])
    assert main(["train", "--demos", str(tmp_path), "--out", str(tmp_path)]) == 1
    assert "no episode_* bag directories" in capsys.readouterr().err
