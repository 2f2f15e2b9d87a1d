"""Feature contract: layout, vectorised == one-frame path, normalisation, history window."""

from types import SimpleNamespace

import numpy as np
import pytest

from na_description import features as feat
from na_description import load_spec


def _random_episode(rng: np.random.Generator, frames: int) -> dict[str, np.ndarray]:
    spec = load_spec()
    n = spec.n_motors
    position = rng.uniform(-1.0, 1.0, (frames, n))
    return {
        "goal_position": position + rng.normal(0, 0.05, (frames, n)),
        "position": position,
        "gripper_slide": spec.gripper.angle_to_slide(position[:, -1]),
        "current": rng.normal(0, 0.3, (frames, n)),
        "velocity": rng.normal(0, 0.5, (frames, n)),
        "input_voltage": rng.uniform(11.5, 12.2, (frames, n)),
        "temperature": rng.uniform(30, 45, (frames, n)).round(),
    }


def test_layout_matches_facts_feature_set():
    assert feat.NUM_FEATURES == 36 == len(feat.FEATURE_UNITS)
    assert len(set(feat.FEATURE_NAMES)) == feat.NUM_FEATURES
    assert feat.FEATURE_NAMES[0] == "goal_position.joint1" and feat.FEATURE_NAMES[-1] == "finger_error"
    assert set(feat.SIMULATED_FEATURES) == {n for n in feat.FEATURE_NAMES if n.split(".")[0] in
                                         ("position", "finger_slide", "velocity", "tracking_error", "finger_error")}
    floors = feat.std_floors()
    assert floors[feat.FEATURE_NAMES.index("current.joint3")] == 10.0
    assert floors[feat.FEATURE_NAMES.index("finger_slide")] == 1.0


def test_vectorised_equals_one_frame_path():
    rng = np.random.default_rng(1)
    episode = _random_episode(rng, 50)
    batch = feat.episode_features(episode)
    assert batch.shape == (50, 36)
    for t in range(50):
        state = SimpleNamespace(position=list(episode["position"][t]), gripper_slide=float(episode["gripper_slide"][t]),
                                current=list(episode["current"][t]), velocity=list(episode["velocity"][t]),
                                input_voltage=list(episode["input_voltage"][t]),
                                temperature=list(episode["temperature"][t]))
        one = feat.frame_features(state, episode["goal_position"][t])
        np.testing.assert_array_equal(one, batch[t])


def test_units_and_derived_features():
    rng = np.random.default_rng(2)
    episode = _random_episode(rng, 3)
    x = feat.episode_features(episode)
    names = feat.FEATURE_NAMES
    np.testing.assert_allclose(x[:, names.index("current.joint2")], episode["current"][:, 1] * 1000.0)
    np.testing.assert_allclose(x[:, names.index("finger_slide")], episode["gripper_slide"] * 1000.0)
    goal_slide = load_spec().gripper.angle_to_slide(episode["goal_position"][:, 4]) * 1000.0
    np.testing.assert_allclose(x[:, names.index("goal_finger_slide")], goal_slide)
    np.testing.assert_allclose(x[:, names.index("finger_error")], goal_slide - episode["gripper_slide"] * 1000.0)
    np.testing.assert_allclose(x[:, names.index("tracking_error.joint4")],
                               episode["goal_position"][:, 3] - episode["position"][:, 3])


def test_bad_input_is_rejected_with_a_clear_error():
    rng = np.random.default_rng(3)
    episode = _random_episode(rng, 4)
    episode["current"] = episode["current"][:, :4]
    with pytest.raises(feat.FeatureError, match="current"):
        feat.episode_features(episode)
    with pytest.raises(feat.FeatureError, match="missing"):
        feat.episode_features({"position": np.zeros((2, 5))})


def test_stats_floor_clip_and_round_trip():
    rng = np.random.default_rng(4)
    x = feat.episode_features(_random_episode(rng, 200))
    x[:, feat.FEATURE_NAMES.index("temperature.joint1")] = 40.0       # constant channel -> floor
    stats = feat.FeatureStats.fit([x[:100], x[100:]])
    assert stats.std[feat.FEATURE_NAMES.index("temperature.joint1")] == 1.0
    z = stats.normalise(x)
    assert np.all(np.abs(z) <= feat.NORMALISED_CLIP)
    far = x[0].copy()
    far[feat.FEATURE_NAMES.index("current.joint1")] = 1e9
    assert stats.normalise(far)[feat.FEATURE_NAMES.index("current.joint1")] == feat.NORMALISED_CLIP
    again = feat.FeatureStats.from_dict(stats.to_dict())
    np.testing.assert_array_equal(again.mean, stats.mean)
    with pytest.raises(feat.FeatureError):
        feat.FeatureStats.fit(np.full((3, 36), np.nan))


def test_history_window_pads_with_mean_frame_and_matches_vectorised_windows():
    rng = np.random.default_rng(5)
    x = feat.episode_features(_random_episode(rng, 20))
    pad = x.mean(axis=0)
    windows = feat.history_windows(x, pad)
    assert windows.shape == (20, feat.HISTORY_LENGTH, 36)
    np.testing.assert_array_equal(windows[0, :-1], np.broadcast_to(pad, (8, 36)))
    np.testing.assert_array_equal(windows[3, -4:], x[:4])
    np.testing.assert_array_equal(windows[3, :-4], np.broadcast_to(pad, (5, 36)))
    history = feat.HistoryWindow(pad)
    for t in range(20):
        np.testing.assert_array_equal(history.push(x[t], stamp=t * 0.017), windows[t])


def test_history_window_resets_on_gap():
    pad = np.zeros(36)
    history = feat.HistoryWindow(pad, max_gap=0.05)
    for t in range(12):
        history.push(np.full(36, t + 1.0), stamp=t * 0.017)
    assert history.resets == 0
    window = history.push(np.full(36, 99.0), stamp=11 * 0.017 + 0.5)     # 0.5 s gap
    assert history.resets == 1
    np.testing.assert_array_equal(window[:-1], 0.0)
    np.testing.assert_array_equal(window[-1], 99.0)
    window = history.push(np.full(36, 100.0), stamp=11 * 0.017 + 0.4)    # time went backwards
    assert history.resets == 2 and np.all(window[:-1] == 0.0)
