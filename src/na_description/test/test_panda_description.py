"""The Panda's spec and MJCF against figures published for the robot, not against the files' own numbers."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from na_description import load_spec
from na_description.model import Kinematics, load_model

READY = np.array([0.0, -np.pi / 4, 0.0, -3 * np.pi / 4, 0.0, np.pi / 2, np.pi / 4])


def test_panda_spec_has_seven_arm_joints_a_gripper_and_torque_as_effort() -> None:
    spec = load_spec("panda")
    assert spec.n_arm == 7 and spec.n_motors == 8 and spec.gripper_index == 7
    assert spec.effort_signal == "load"
    # Franka's published torque limits: 87 N·m on joints 1-4, 12 N·m on 5-7.
    assert spec.effort_bounds[:7].tolist() == [87.0] * 4 + [12.0] * 3
    # Joint 4 never straightens (its range is negative) and joint 6 is mostly positive.
    assert spec.upper[3] < 0 and spec.lower[5] < 0 < spec.upper[5]


def test_ready_pose_puts_the_hand_tcp_where_franka_documents_it() -> None:
    # Franka's ready pose: flange at x = 0.307 m, z = 0.590 m above the base, pointing down; the Franka
    # Hand's TCP is 0.1034 m further along the flange axis.
    kin = Kinematics("panda")
    assert kin.tool_position(READY) == pytest.approx([0.307, 0.0, 0.590 - 0.1034], abs=2e-3)
    # All joints at zero: the arm stands straight up, flange at 0.333 + 0.316 + 0.384 - 0.107 over the
    # base after the 0.088 m offset of joint 7 (the hand points down).
    assert kin.tool_position(np.zeros(7)) == pytest.approx([0.088, 0.0, 1.033 - 0.107 - 0.1034], abs=2e-3)


def test_position_actuators_take_joint_targets_and_are_force_limited() -> None:
    spec = load_spec("panda")
    model = load_model(spec)
    assert np.allclose(model.actuator_ctrlrange[:, 0], spec.lower)
    assert np.allclose(model.actuator_ctrlrange[:, 1], spec.upper)
    assert np.allclose(model.actuator_forcerange[:, 1], spec.effort_bounds)
    # The whole arm (links 0-7, Gaz et al.) plus the 0.73 kg hand: about 18 kg as Franka's datasheet says.
    total = sum(model.body_mass[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, f"panda_link{k}")]
                for k in range(8))
    assert 16.5 < total + 0.73 < 18.5
