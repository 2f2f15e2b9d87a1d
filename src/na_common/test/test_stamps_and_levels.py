"""Diagnostic levels (the diagnostic_msgs numbers) and the monotonic -> node-clock stamp mapping."""

from __future__ import annotations

import pytest

from na_common.diagnostics import ERROR, OK, STALE, WARN, Level
from na_common.stamps import clock_ns_at, split_ns, stamp_seconds


def test_levels_are_the_diagnostic_status_bytes() -> None:
    from diagnostic_msgs.msg import DiagnosticStatus

    assert bytes([OK]) == DiagnosticStatus.OK
    assert bytes([WARN]) == DiagnosticStatus.WARN
    assert bytes([ERROR]) == DiagnosticStatus.ERROR
    assert bytes([STALE]) == DiagnosticStatus.STALE
    assert len(Level) == 4


def test_a_monotonic_instant_lands_its_age_before_the_clock_reading() -> None:
    # read 0.25 s ago on the monotonic clock; the node clock reads 1_700_000_000.5 s now
    assert clock_ns_at(100.25, 100.5, 1_700_000_000_500_000_000) == 1_700_000_000_250_000_000
    assert clock_ns_at(7.0, 7.0, 123) == 123                       # happening now: the clock reading itself
    assert clock_ns_at(2.0, 1.0, 5_000_000_000) == 6_000_000_000   # a (clock-jitter) future instant stays after


def test_nanoseconds_split_and_join_like_a_time_message() -> None:
    assert split_ns(1_500_000_001) == (1, 500_000_001)
    assert split_ns(999_999_999) == (0, 999_999_999)

    class Stamp:
        sec, nanosec = 12, 250_000_000

    assert stamp_seconds(Stamp()) == pytest.approx(12.25)
