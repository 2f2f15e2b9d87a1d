"""Counting the follower states that never reached the estimator, from the gaps between stamps."""

from __future__ import annotations

import numpy as np

from na_estimator.input_gaps import InputGaps


def stream(gaps: InputGaps, stamps) -> list[int]:
    return [gaps.observe(float(t)) for t in stamps]


def test_a_steady_stream_has_no_gap() -> None:
    gaps = InputGaps()
    rng = np.random.default_rng(0)
    stamps = np.cumsum(0.01 + rng.uniform(-0.002, 0.002, 500))      # 100 Hz with 2 ms of jitter
    assert sum(stream(gaps, stamps)) == 0 and gaps.gaps == 0
    assert abs(gaps.period - 0.01) < 0.001


def test_states_dropped_from_a_full_queue_are_counted() -> None:
    gaps = InputGaps()
    before = np.arange(1, 101) * 0.01                  # 100 states at 100 Hz
    after = 1.0 + 0.25 + np.arange(50) * 0.01          # the next received state is 250 ms on: 24 lost
    counts = stream(gaps, np.concatenate([before, after]))
    assert counts[100] == 24 and sum(counts) == 24
    assert gaps.gaps == 1 and abs(gaps.longest_gap - 0.25) < 1e-9


def test_the_period_is_learnt_at_any_rate() -> None:
    gaps = InputGaps()
    period = 1 / 60
    stamps = np.arange(1, 61) * period
    stamps = np.concatenate([stamps, stamps[-1] + period * np.arange(4, 34)])   # 3 states skipped once
    assert sum(stream(gaps, stamps)) == 3


def test_duplicates_and_late_states_are_not_gaps() -> None:
    gaps = InputGaps()
    stamps = list(np.arange(1, 31) * 0.01)
    stamps += [stamps[-1], stamps[-3], stamps[-1] + 0.01]    # a duplicate, a late one, then on time again
    assert sum(stream(gaps, stamps)) == 0


def test_nothing_is_counted_before_the_period_is_known() -> None:
    gaps = InputGaps()
    assert stream(gaps, [0.0, 0.01, 0.5, 0.51]) == [0, 0, 0, 0]
    assert gaps.period is None


def test_a_long_pause_does_not_become_the_period() -> None:
    gaps = InputGaps()
    stamps = np.concatenate([np.arange(1, 21) * 0.01, 0.2 + 0.05 * np.arange(1, 4), 0.35 + np.arange(1, 21) * 0.01])
    counts = stream(gaps, stamps)
    assert sum(counts) == 3 * 4 and gaps.gaps == 3          # each of the three 50 ms spacings lost 4 states
    assert abs(gaps.period - 0.01) < 1e-9
