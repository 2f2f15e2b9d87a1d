"""The Panda's training settings (the NeuralActuator paper's Franka runs): vertical force only, per-joint pose
weights, checked against the losses written out by hand here."""

from __future__ import annotations

import numpy as np
import pytest

from na_description import load_spec
from na_training.config import ConfigError, LossConfig, config_from_dict, for_robot, load_config
from na_training.losses import head_losses, pose_losses


def _huber(x: np.ndarray, beta: float) -> np.ndarray:
    a = np.abs(x)
    return np.where(a < beta, 0.5 * a ** 2 / beta, a - 0.5 * beta)


def test_the_shipped_panda_recipe_has_the_papers_franka_settings() -> None:
    config = for_robot(load_config("panda"), load_spec("panda"))
    assert config.curriculum == ((0, 128),)
    assert config.loss.force_channels == ("z",) and config.loss.force_beta == 0.15
    assert config.loss.joint_weights == (1.0, 1.0, 1.0, 1.0, 1.5, 2.0, 1.5)
    assert config.loss.velocity_weight > 0 and config.loss.gripper_weight == 0.0
    assert config.sim.replay_gripper and load_config("panda_xyz").sim.replay_gripper
    assert not load_config("cpu").sim.replay_gripper


def test_the_panda_recipe_that_supervises_xyz_offsets_the_command_and_the_papers_keeps_the_target() -> None:
    assert load_config("panda_xyz").sim.position_control == "offset"
    assert load_config("panda").sim.position_control == "absolute"
    with pytest.raises(ConfigError, match="position_control must be one of"):
        config_from_dict({"sim": {"position_control": "relative"}})


def test_joint_weights_must_fit_the_arm_and_force_channels_must_be_axes() -> None:
    with pytest.raises(ConfigError, match="joint_weights has 3 values for the 7 arm joints of panda"):
        for_robot(config_from_dict({"loss": {"joint_weights": [1, 2, 3]}}), load_spec("panda"))
    with pytest.raises(ConfigError, match="force_channels must name some of x, y, z"):
        config_from_dict({"loss": {"force_channels": ["w"]}})


def test_vertical_force_loss_ignores_the_lateral_channels() -> None:
    rng = np.random.default_rng(0)
    label = np.zeros((5, 3))
    label[:, 2] = -2.94
    predicted = label + rng.normal(0, 0.3, (5, 3))
    outputs = {"force": predicted, "contact_logit": np.zeros((5, 1)), "condition_logit": np.zeros((5, 8))}
    labels = {"force": label, "force_valid": np.ones((5, 3)), "condition_mask": np.zeros(5), "condition": np.ones(5)}
    config = LossConfig(force_channels=("z",), force_beta=0.15, nonzero_force_weight=1.0)
    parts = head_losses(outputs, labels, None, config, 0)
    assert float(parts["force"]) == pytest.approx(np.mean(_huber(predicted[:, 2] - label[:, 2], 0.15)), rel=1e-5)


def test_pose_loss_weights_joints_by_their_normalised_weights() -> None:
    rng = np.random.default_rng(1)
    qpos, target = rng.normal(0, 1, (2, 4, 8)), rng.normal(0, 1, (2, 4, 8))
    weights = np.array([1, 1, 1, 1, 1.5, 2, 1.5])
    parts = pose_losses(qpos, target, 7, 1.0, tuple(weights))
    per_joint = _huber(qpos[..., :7] - target[..., :7], 1.0).mean(axis=(0, 1))
    assert float(parts["arm"]) == pytest.approx(np.sum(per_joint * weights) / np.sum(weights), rel=1e-5)
