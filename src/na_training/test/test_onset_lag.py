"""Contact-onset lag on synthetic presses whose crossing times are set by construction."""

from __future__ import annotations

import numpy as np
import pytest

from na_training.onset_lag import lag_summary, press_lags

DT = 0.01


def _press_episode(lags_s: list[float | None], seconds: float = 12.0):
    """Presses of 0.8 s every 3 s: the true force steps to 6 N one frame after contact starts; the estimate ramps
    to 6 N and reaches 3 N ``lag`` after the true crossing (None: the estimate stays at 1 N)."""
    time = np.arange(0.0, seconds, DT)
    contact = np.zeros(len(time), dtype=bool)
    truth = np.zeros((len(time), 3))
    estimate = np.zeros((len(time), 3))
    for k, lag in enumerate(lags_s):
        start = round((1.0 + 3.0 * k) / DT)
        end = start + round(0.8 / DT)
        contact[start:end] = True
        truth[start + 1:end, 1] = -6.0                    # along -y: the magnitude is what counts
        if lag is None:
            estimate[start:end, 1] = -1.0
        else:
            cross = start + 1 + round(lag / DT)
            ramp = np.clip((np.arange(len(time)) - cross) / 10.0 * 3.0 + 3.0, 0.0, 6.0)
            estimate[start:end, 1] = -ramp[start:end]
    return time, contact, truth, estimate


def test_lag_is_the_time_between_the_two_crossings():
    time, contact, truth, estimate = _press_episode([0.05, 0.12, 0.20])
    lags = press_lags(time, contact, truth, estimate, threshold_n=3.0)
    assert [round(p.lag_s, 3) for p in lags] == [0.05, 0.12, 0.20]
    assert [round(p.true_crossing_s, 3) for p in lags] == [1.01, 4.01, 7.01]
    summary = lag_summary(lags)
    assert summary["presses"] == 3 and summary["missed"] == 0
    assert summary["p50_ms"] == pytest.approx(120.0, abs=0.5)
    assert summary["max_ms"] == pytest.approx(200.0, abs=0.5)


def test_an_estimate_that_never_crosses_is_a_miss_and_weak_presses_do_not_count():
    time, contact, truth, estimate = _press_episode([0.05, None])
    weak_start = round(8.0 / DT)
    contact[weak_start:weak_start + 50] = True
    truth[weak_start:weak_start + 50, 0] = 2.0              # below the threshold: not a press that counts
    lags = press_lags(time, contact, truth, estimate, threshold_n=3.0)
    assert len(lags) == 2 and lags[1].lag_s is None
    assert lag_summary(lags)["missed"] == 1


def test_contact_runs_closer_than_the_merge_gap_are_one_press():
    time, contact, truth, estimate = _press_episode([0.05])
    gap = round(1.3 / DT)
    contact[gap:gap + 5] = False                            # a 50 ms flicker inside the 0.8 s press
    assert len(press_lags(time, contact, truth, estimate, threshold_n=3.0)) == 1


def test_an_estimate_ahead_of_the_truth_gives_a_negative_lag():
    time, contact, truth, estimate = _press_episode([0.0])
    start = round(1.0 / DT)
    estimate[start - 3:start, 1] = -4.0                     # crosses 30 ms before contact starts
    (press,) = press_lags(time, contact, truth, estimate, threshold_n=3.0)
    assert press.lag_s == pytest.approx(-0.04, abs=1e-9)
