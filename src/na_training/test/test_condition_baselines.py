"""Condition baselines (paper Sec. IV-G): windows, the 20 features, the three classifiers, no test leakage."""

from __future__ import annotations

import numpy as np
import pytest

from na_training.baselines.condition import (
    FEATURE_NAMES,
    RF_DEPTH,
    RF_TREES,
    CurrentThresholdClassifier,
    WindowSet,
    build_windows,
    episode_level,
    evaluate_condition_baselines,
    make_condition_baselines,
    window_features,
    window_starts,
)
from na_training.episode import NOMINAL, RESTRICTED
from na_training.synthetic import SyntheticActuator, synthetic_episode

ACTUATOR = SyntheticActuator(slope=np.array([1.7, 1.8, 1.6, 1.9]), offset=np.array([0.02, -0.03, 0.01, 0.0]))
JOINT3 = 2


@pytest.fixture(scope="module")
def condition_windows() -> tuple[WindowSet, WindowSet]:
    """Rubber-band-like spring on joint3 in every second episode; 3 s of 0.017 s frames, noisy current."""
    episodes = [synthetic_episode(176, seed=s, actuator=ACTUATOR, current_noise=0.02,
                                  restriction_stiffness=0.6 if s % 2 else 0.0, episode_id=f"ep{s}")
                for s in range(12)]
    assert {e.condition_label for e in episodes} == {NOMINAL, RESTRICTED}
    return build_windows(episodes[:8], JOINT3), build_windows(episodes[8:], JOINT3)


def test_windows_are_64_frames_with_50_percent_overlap():
    starts = window_starts(200)
    np.testing.assert_array_equal(starts, [0, 32, 64, 96, 128])
    assert window_starts(63).size == 0
    np.testing.assert_array_equal(window_starts(10, size=4, overlap=0.75), np.arange(7))
    with pytest.raises(ValueError, match="overlap"):
        window_starts(100, overlap=1.0)


def test_window_features_count_and_values():
    assert len(FEATURE_NAMES) == 20 == len(set(FEATURE_NAMES))
    n, dt = 64, 0.02
    time = np.arange(n)[None, :] * dt
    ramp = 0.1 + 2.0 * time                                        # A, rising 2 A/s
    tone = 0.3 * np.sin(2 * np.pi * 8 * np.arange(n) / n)[None, :]    # 8 cycles over the window
    velocity = np.full((1, n), 0.2)
    goal = np.zeros((1, n))
    position = np.full((1, n), -0.1)
    features = window_features(np.vstack([ramp, tone]), np.vstack([velocity, velocity]),
                               np.vstack([position, position]), np.vstack([goal, goal]), np.vstack([time, time]))
    assert features.shape == (2, 20)
    f = dict(zip(FEATURE_NAMES, features[0], strict=True))
    assert f["current_trend"] == pytest.approx(2.0)
    assert f["current_rate_abs_mean"] == pytest.approx(2.0)
    assert f["tracking_error_abs_mean"] == pytest.approx(0.1) and f["tracking_error_std"] == pytest.approx(0.0)
    assert f["acceleration_abs_mean"] == pytest.approx(0.0)
    assert f["current_half_asymmetry"] == pytest.approx(2.0 * 32 * dt)
    assert f["current_in_motion"] == pytest.approx(np.mean(ramp))
    assert f["power_estimate"] == pytest.approx(0.2 * np.mean(ramp))
    tone_f = dict(zip(FEATURE_NAMES, features[1], strict=True))
    # a pure tone at 8/(64·0.02 s) = 6.25 Hz: all power above the 2 Hz split, entropy near zero
    assert tone_f["low_high_power_ratio"] < 1e-6 and tone_f["spectral_entropy"] < 0.05
    assert tone_f["dominant_frequency_power"] == pytest.approx(0.3 ** 2 * 64 / 4, rel=1e-6)
    assert f["spectral_entropy"] > tone_f["spectral_entropy"]


def test_classifiers_separate_restricted_from_nominal(condition_windows):
    train, test = condition_windows
    assert len(train) > 0 and len(test) > 0 and 0 < test.restricted.mean() < 1
    results = evaluate_condition_baselines(train, test)
    assert set(results) == {"Threshold", "SVM (RBF)", "Random Forest"}
    for name, metrics in results.items():
        assert metrics["accuracy"] >= 0.9, name
        assert metrics["auc"] >= 0.9, name
        assert metrics["samples"] == len(test)
        # episode level by majority of windows: the four test episodes (ep8..ep11), two of each condition
        assert metrics["episode"]["episodes"] == 4, name
        assert metrics["episode"]["misclassified"] == 0, name


def test_episode_level_is_the_majority_of_an_episodes_windows():
    windows = WindowSet(np.zeros((5, 20)), np.zeros(5), np.array([True, True, True, False, False]),
                        np.array(["a", "a", "a", "b", "b"], dtype=object), np.arange(5))
    result = episode_level(windows, np.array([True, False, False, True, True]))
    # a (restricted) has 1 of 3 windows positive -> nominal (a miss); b (nominal) has 2 of 2 -> restricted
    assert result["episodes"] == 2 and result["misclassified"] == 2 and result["accuracy"] == 0.0


def test_paper_hyper_parameters():
    _, svm, forest = make_condition_baselines(seed=3)
    assert svm.pipeline.named_steps["classify"].kernel == "rbf"
    rf = forest.pipeline.named_steps["classify"]
    assert (rf.n_estimators, rf.max_depth) == (RF_TREES, RF_DEPTH) == (200, 15)


def test_standardisation_uses_training_windows_only(condition_windows):
    train, test = condition_windows
    for method in make_condition_baselines()[1:]:
        method.fit(train)
        scaler = method.pipeline.named_steps["scale"]
        np.testing.assert_allclose(scaler.mean_, train.features.mean(axis=0))
        np.testing.assert_allclose(scaler.scale_, np.where(train.features.std(0) > 0, train.features.std(0), 1.0))
        scores = method.score(test)
        # an extreme, shifted test set must not move the scores of the original test windows
        shifted = WindowSet(np.vstack([test.features, test.features * 50 + 100]),
                            np.concatenate([test.abs_current_mean] * 2), np.concatenate([test.restricted] * 2),
                            np.concatenate([test.episode_ids] * 2), np.concatenate([test.starts] * 2))
        np.testing.assert_allclose(method.score(shifted)[: len(test)], scores)
        np.testing.assert_allclose(scaler.mean_, train.features.mean(axis=0))


def test_threshold_is_chosen_on_training_windows():
    train = WindowSet(np.zeros((4, 20)), np.array([0.1, 0.2, 0.5, 0.6]), np.array([0, 0, 1, 1], bool),
                      np.array(["a"] * 4, dtype=object), np.arange(4))
    classifier = CurrentThresholdClassifier()
    report = classifier.fit(train)
    assert 0.2 < report["threshold_A"] < 0.5 and report["train_accuracy"] == 1.0
    probe = WindowSet(np.zeros((2, 20)), np.array([0.3, 0.45]), np.array([0, 1], bool),
                      np.array(["b"] * 2, dtype=object), np.arange(2))
    assert list(classifier.predict(probe)) == [probe.abs_current_mean[0] > report["threshold_A"],
                                               probe.abs_current_mean[1] > report["threshold_A"]]


def test_single_condition_training_set_is_refused(condition_windows):
    train, _ = condition_windows
    only_nominal = WindowSet(train.features[~train.restricted], train.abs_current_mean[~train.restricted],
                             train.restricted[~train.restricted], train.episode_ids[~train.restricted],
                             train.starts[~train.restricted])
    with pytest.raises(ValueError, match="single condition"):
        make_condition_baselines()[1].fit(only_nominal)
