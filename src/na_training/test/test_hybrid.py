"""The hybrid recipe's pure parts: recorded windows as the live estimator builds them, the direct head
losses, the step schedule, inverse-dynamics torque labels, progress lines, the MLP baseline."""

import io
from dataclasses import replace

import numpy as np
import pytest

from na_description import load_spec
from na_description.features import HistoryWindow
from na_training.batches import DataError
from na_training.config import ConfigError, HybridConfig, LossConfig, config_from_dict
from na_training.inverse_dynamics import InverseDynamics
from na_training.losses import supervised_losses
from na_training.progress import StepProgress
from na_training.synthetic import TORQUE_PER_AMP
from na_training.windows import RecordedWindows


def test_recorded_windows_are_the_live_estimators_windows(synthetic_episodes):
    episode = synthetic_episodes[0]
    pad = episode.features().mean(axis=0)
    data = RecordedWindows([episode], pad, history_length=9, label_shift=0)
    live = HistoryWindow(pad, length=9)
    expected = np.stack([live.push(frame) for frame in episode.features()])   # one frame at a time, as the node
    assert len(data) == len(episode)
    np.testing.assert_allclose(data.arrays["windows"], expected.astype(np.float32))
    np.testing.assert_array_equal(data.arrays["force"], episode.force.astype(np.float32))


def test_labels_are_shifted_and_windows_over_invalid_frames_are_dropped(synthetic_episodes):
    episode = synthetic_episodes[1]
    frame_valid = np.ones(len(episode), bool)
    frame_valid[50] = False
    episode = replace(episode, columns={**episode.columns, "frame_valid": frame_valid})
    data = RecordedWindows([episode], episode.features()[0], history_length=9, label_shift=2)
    frames = data.arrays["frame"]
    # frames 50..58 see frame 50 in their window; 48 has its label at 50; the last two have no label
    for gone in (48, 50, 54, 58, len(episode) - 2, len(episode) - 1):
        assert gone not in frames
    assert 47 in frames and 59 in frames
    np.testing.assert_array_equal(data.arrays["force"][frames == 47][0], episode.force[49].astype(np.float32))
    with pytest.raises(DataError, match="label_shift"):
        RecordedWindows([episode], episode.features()[0], 9, label_shift=-1)


def test_gate_target_is_the_contact_label_when_recorded(synthetic_episodes):
    episode = synthetic_episodes[0]
    contact = np.zeros(len(episode), bool)
    contact[20:40] = True
    force = np.zeros(len(episode))
    force[60:90] = -2.0
    episode = replace(episode, columns={**episode.columns, "contact": contact, "force_z": force})
    by_label = RecordedWindows([episode], episode.features()[0], 9, gate_rule="contact")
    by_force = RecordedWindows([episode], episode.features()[0], 9, gate_rule="force_threshold",
                               contact_threshold=0.01)
    np.testing.assert_array_equal(by_label.arrays["contact"], contact)
    np.testing.assert_array_equal(by_force.arrays["contact"], np.linalg.norm(episode.force, axis=1) > 0.01)


def test_supervised_losses_follow_their_formulas():
    rng = np.random.default_rng(0)
    n = 6
    force = rng.normal(size=(n, 3))
    force[:2] = 0.0
    batch = {"force": force, "force_valid": np.ones((n, 3), bool), "contact": np.r_[0, 0, 1, 1, 1, 0].astype(bool),
             "condition": np.r_[1, 1, 0, 0, 1, 1].astype(float), "condition_mask": np.r_[1, 1, 1, 1, 0, 0] > 0,
             "torque": rng.normal(size=(n, 5)), "torque_valid": np.ones(n, bool)}
    batch["force_valid"][5, 2] = False
    outputs = {"force": rng.normal(size=(n, 3)), "contact_logit": rng.normal(size=(n, 1)),
               "condition_logit": rng.normal(size=(n, 5)), "torque_surrogate": rng.normal(size=(n, 5))}
    config = LossConfig(force_weight=30.0, gate_weight=1.0, condition_weight=100.0, force_beta=0.15,
                        nonzero_force_weight=5.0, contact_threshold=0.01)
    bounds = np.array([4.0, 4.0, 4.0, 4.0, 1.5])
    total, parts = supervised_losses(outputs, batch, config, condition_channel=2, torque_weight=10.0,
                                     effort_bounds=bounds)

    def huber(e, beta):
        return np.where(np.abs(e) < beta, 0.5 * e**2 / beta, np.abs(e) - 0.5 * beta)

    def bce(logit, y):
        p = 1.0 / (1.0 + np.exp(-logit))
        return -(y * np.log(p) + (1 - y) * np.log(1 - p))

    valid = batch["force_valid"].astype(float)
    weight = np.where(np.linalg.norm(force * valid, axis=1) > 0.01, 5.0, 1.0)[:, None]
    expected_force = np.sum(weight * valid * huber(outputs["force"] - force, 0.15)) / valid.sum()
    expected_gate = np.mean(bce(outputs["contact_logit"][:, 0], batch["contact"]))
    expected_condition = np.mean(bce(outputs["condition_logit"][:4, 2], batch["condition"][:4]))
    expected_torque = np.mean(huber((outputs["torque_surrogate"] - batch["torque"]) / bounds, 0.05))
    np.testing.assert_allclose(float(parts["force"]), expected_force, rtol=1e-5)
    np.testing.assert_allclose(float(parts["gate"]), expected_gate, rtol=1e-5)
    np.testing.assert_allclose(float(parts["condition"]), expected_condition, rtol=1e-5)
    np.testing.assert_allclose(float(parts["torque"]), expected_torque, rtol=1e-5)
    np.testing.assert_allclose(float(total), 30 * expected_force + expected_gate + 100 * expected_condition
                               + 10 * expected_torque, rtol=1e-5)


def test_class_balanced_condition_loss_gives_each_class_its_share():
    logits = np.array([[0.0, 0.0, 2.0, 0, 0], [0, 0, -1.0, 0, 0], [0, 0, 0.5, 0, 0], [0, 0, 3.0, 0, 0]])
    label = np.array([1.0, 1.0, 1.0, 0.0])             # three nominal frames, one restricted
    batch = {"force": np.zeros((4, 3)), "force_valid": np.ones((4, 3), bool), "contact": np.zeros(4, bool),
             "condition": label, "condition_mask": np.ones(4, bool)}
    outputs = {"force": np.zeros((4, 3)), "contact_logit": np.zeros((4, 1)), "condition_logit": logits}
    bce = np.log1p(np.exp(-logits[:, 2])) * label + np.log1p(np.exp(logits[:, 2])) * (1 - label)
    for share, expected in ((0.0, bce.mean()), (0.5, 0.5 * bce[:3].mean() + 0.5 * bce[3]),
                            (0.7, 0.3 * bce[:3].mean() + 0.7 * bce[3])):
        _, parts = supervised_losses(outputs, batch, LossConfig(condition_restricted_share=share), 2)
        np.testing.assert_allclose(float(parts["condition"]), expected, rtol=1e-5)


def test_augmentation_offsets_whole_windows_of_the_named_channels_only():
    from na_description.features import feature_names
    from na_training.windows import augment_offsets

    names = feature_names(load_spec())
    windows = np.zeros((64, 9, len(names)), np.float32)
    batch = {"windows": windows.copy()}
    augment_offsets(batch, np.random.default_rng(0), {"temperature": 3.0, "voltage": 0.0}, names)
    changed = [k for k in range(len(names)) if np.any(batch["windows"][:, :, k] != 0)]
    assert [names[k] for k in changed] == [n for n in names if n.startswith("temperature.")]
    shifted = batch["windows"][:, :, changed]
    assert np.all(shifted == shifted[:, :1, :])          # one offset per window and channel
    assert np.abs(shifted).max() <= 3.0 and shifted.std() > 1.0


def test_hybrid_schedule():
    hybrid = HybridConfig(rollout_every=3, rollout_start=4, torque_weight=2.0, torque_steps=6)
    assert [s for s in range(14) if hybrid.has_rollout(s)] == [4, 7, 10, 13]
    assert [hybrid.torque_weight_at(s) for s in (0, 5, 6, 100)] == [2.0, 2.0, 0.0, 0.0]
    assert not any(HybridConfig(rollout_every=0).has_rollout(s) for s in range(10))
    assert HybridConfig(torque_weight=1.0).torque_weight_at(10**6) == 1.0


def test_recipe_and_gate_target_errors_are_one_line():
    with pytest.raises(ConfigError, match="recipe must be one of"):
        config_from_dict({"recipe": "hybird"})
    with pytest.raises(ConfigError, match="gate_target"):
        config_from_dict({"recipe": "hybrid", "hybrid": {"gate_target": "contacts"}})
    with pytest.raises(ConfigError, match="unknown key"):
        config_from_dict({"hybrid": {"batchsize": 3}})


def test_inverse_dynamics_recovers_the_torques_that_made_the_motion(synthetic_episodes):
    episode = synthetic_episodes[0]
    inverse = InverseDynamics(load_spec())
    labels = inverse.episode_torques(episode)
    applied = episode.effort * TORQUE_PER_AMP          # the synthetic arm was driven by exactly these
    inner = slice(5, len(episode) - 5)
    arm = np.s_[:, :4]
    error = labels[inner][arm] - applied[inner][arm]
    # a smoothed fit of a 4-substep semi-implicit Euler motion: a few percent of the torque range
    assert np.sqrt(np.mean(error**2)) < 0.05 * np.ptp(applied[inner][arm])
    gap = episode.qpos.copy()
    gap[100] = np.nan                                   # an invalid frame splits the trajectory; 5 frames alone
    gap[5] = np.nan
    split = inverse.torques(gap)
    assert np.isnan(split[100]).all() and np.isnan(split[:5]).all() and np.isfinite(split[6:100]).all()
    with pytest.raises(ValueError, match="odd"):
        InverseDynamics(load_spec(), window=4)


def test_progress_prints_plain_lines_without_a_terminal():
    stream = io.StringIO()
    progress = StepProgress(10, enabled=True, stream=stream, period_s=0.0)
    progress.note("compiling the rollout step (horizon 32, batch 16) ...")
    for step in range(1, 11):
        progress.update(step, {"loss": "1.0"})
    progress.close()
    text = stream.getvalue()
    assert "\r" not in text
    assert text.splitlines()[0] == "compiling the rollout step (horizon 32, batch 16) ..."
    assert text.splitlines()[-1].startswith("step 10/10: loss 1.0")
    quiet = io.StringIO()
    StepProgress(10, enabled=False, stream=quiet).update(10, {"loss": 1})
    assert quiet.getvalue() == ""


def test_mlp_baseline_is_deterministic_and_learns(synthetic_episodes):
    from na_training.baselines.mlp import MLPConfig, MLPForce

    def with_force(episode):       # a learnable label: linear in the current frame's currents
        force = {"force_x": episode.effort[:, 0], "force_y": np.zeros(len(episode)),
                 "force_z": -2.0 * episode.effort[:, 1]}
        return replace(episode, columns={**episode.columns, **force})

    train = [with_force(e) for e in synthetic_episodes[:2]]
    episode = train[0]
    config = MLPConfig(hidden=32, steps=300, batch_size=128, seed=3)
    first, second = MLPForce(config), MLPForce(config)
    first.fit(train)
    second.fit(train)
    a, b = first.predict_features(episode.features()), second.predict_features(episode.features())
    np.testing.assert_array_equal(a, b)
    assert a.shape == (len(episode), 3)
    zero = np.mean(np.abs(episode.force))
    assert np.mean(np.abs(a - episode.force)) < 0.5 * zero      # fits its training data far better than zero
    other = MLPForce(MLPConfig(hidden=32, steps=300, batch_size=128, seed=4))
    other.fit(train)
    assert not np.array_equal(other.predict_features(episode.features()), a)
