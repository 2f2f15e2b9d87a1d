"""Scoring the live estimator: hand-built stamps and forces with hand-computed expected figures."""

from __future__ import annotations

import numpy as np
import pytest

from na_bringup.live_eval import match_nearest, score_live


def test_nearest_match_within_tolerance_and_none_beyond():
    reference = np.array([0.0, 0.10, 0.20, 0.30])
    query = np.array([0.004, 0.096, 0.151, 0.40, -0.05])
    # 0.004 -> 0.0; 0.096 -> 0.10; 0.151 -> 0.20 is 0.049 away (> 0.02) -> none; 0.40 and -0.05 -> none
    assert match_nearest(query, reference, tolerance=0.02).tolist() == [0, 1, -1, -1, -1]
    assert match_nearest(np.array([0.2]), np.array([]), 0.02).tolist() == [-1]
    assert match_nearest(np.array([0.21]), np.array([0.2]), 0.02).tolist() == [0]


def _scored(**kwargs):
    truth_stamps = np.array([0.30, 0.10, 0.20, 0.00])      # unsorted on purpose
    truth_force = np.array([[0.0, 0.0, -3.0], [0.0, 0.0, 0.0], [1.0, 0.0, -2.0], [0.0, 0.0, 0.0]])
    estimate_stamps = np.array([0.001, 0.101, 0.199, 0.302, 0.9])   # the last has no truth near it
    estimate_force = np.array([[0.0, 0.0, 0.3], [0.0, 0.0, 0.0], [1.0, 0.0, -1.0], [0.0, 0.0, -3.0],
                               [9.0, 9.0, 9.0]])
    estimate_contact = np.array([False, True, True, True, True])
    latency = np.array([1e-3, 2e-3, 3e-3, 4e-3, 5e-3])
    return score_live(estimate_stamps, estimate_force, estimate_contact, latency, latency * 2, truth_stamps,
                      truth_force, **kwargs)


def test_score_against_hand_computed_figures():
    score = _scored(constant_force=np.array([0.0, 0.0, -1.0]))
    assert (score.estimates, score.matched) == (5, 4)
    # |errors| over the 4 matched estimates x 3 components: 0.3 + 0 + 1.0 + 0 = 1.3 over 12 values
    assert score.force_mae == pytest.approx(1.3 / 12)
    # always-zero: |truth| = 0 + 0 + (1 + 2) + 3 = 6 over 12
    assert score.zero_force_mae == pytest.approx(6.0 / 12)
    # constant [0, 0, -1]: z errors 1, 1, 1, 2 and x error 1 at t=0.2 -> 6 over 12
    assert score.constant_force_mae == pytest.approx(6.0 / 12)
    # truth contact (|f| > 0.5): F, F, T, T; estimated F, T, T, T -> 3 of 4; best constant answer 2 of 4
    assert score.contact_accuracy == pytest.approx(0.75)
    assert score.constant_contact_accuracy == pytest.approx(0.5)
    assert score.inference_p50_ms == pytest.approx(3.0)
    assert score.end_to_end_p50_ms == pytest.approx(6.0)
    assert any("training-mean force" in line for line in score.lines())


def test_without_a_constant_predictor_it_is_left_out():
    score = _scored()
    assert np.isnan(score.constant_force_mae)
    assert not any("training-mean" in line for line in score.lines())


def test_no_matching_truth_is_an_error():
    with pytest.raises(ValueError, match="no estimate could be matched"):
        score_live(np.array([5.0]), np.zeros((1, 3)), np.array([False]), np.array([1e-3]), np.array([1e-3]),
                   np.array([0.0]), np.zeros((1, 3)))
