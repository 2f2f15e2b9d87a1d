"""SO-101 description: FK and orientation against the URDF chain written out here, Jacobian against
finite differences, mass against the URDF, the spec (IDs 1-6, limits, efforts) and loading by name."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from na_description import SpecError, load_spec
from na_description.model import Kinematics, load_model

# The public SO-101 URDF (SO-ARM100, Simulation/SO101/so101_new_calib.urdf), typed in independently
# of the MJCF: (joint, origin xyz, origin rpy); every joint turns about its child frame's z axis.
URDF_CHAIN = [
    ("shoulder_pan", (0.0388353, -8.97657e-09, 0.0624), (3.14159, 4.18253e-17, -3.14159)),
    ("shoulder_lift", (-0.0303992, -0.0182778, -0.0542), (-1.5708, -1.5708, 0.0)),
    ("elbow_flex", (-0.11257, -0.028, 1.73763e-16), (-3.63608e-16, 8.74301e-16, 1.5708)),
    ("wrist_flex", (-0.1349, 0.0052, 3.62355e-17), (4.02456e-15, 8.67362e-16, -1.5708)),
    ("wrist_roll", (5.55112e-17, -0.0611, 0.0181), (1.5708, 0.0486795, 3.14159)),
]
GRIPPER_FRAME = ((-0.0079, -0.000218121, -0.0981274), (0.0, 3.14159, 0.0))   # fixed joint on gripper_link
URDF_LINK_MASSES = {"base_link": 0.147, "shoulder_link": 0.100006, "upper_arm_link": 0.103,
                    "lower_arm_link": 0.104, "wrist_link": 0.079, "gripper_link": 0.087,
                    "moving_jaw_so101_v1_link": 0.012}
URDF_LIMITS = [(-1.91986, 1.91986), (-1.74533, 1.74533), (-1.69, 1.69), (-1.65806, 1.65806),
               (-2.74385, 2.84121), (-0.174533, 1.74533)]


def rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """URDF rpy: R = Rz(yaw) Ry(pitch) Rx(roll)."""
    cr, sr, cp, sp, cy, sy = np.cos(roll), np.sin(roll), np.cos(pitch), np.sin(pitch), np.cos(yaw), np.sin(yaw)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    ry = np.array([[cp, 0, sp], [0, 1, 0], [-sp, 0, cp]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    return rz @ ry @ rx


def rot_z(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def urdf_tool_pose(q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tool frame (position, rotation) from the URDF joint table, homogeneous transforms by hand."""
    rot, pos = np.eye(3), np.zeros(3)
    for (_, xyz, angles), angle in zip(URDF_CHAIN, q, strict=True):
        pos = pos + rot @ np.array(xyz)
        rot = rot @ rpy(*angles) @ rot_z(angle)
    xyz, angles = GRIPPER_FRAME
    return pos + rot @ np.array(xyz), rot @ rpy(*angles)


POSES = [
    np.zeros(5),
    np.array([0.5, -0.3, 0.4, 0.2, 1.0]),
    np.array([-1.2, 0.8, -0.9, 1.1, -2.0]),
    np.array([1.8, -1.6, 1.6, -1.5, 2.7]),
    np.array([-0.4, 1.7, -1.2, 0.6, 0.3]),
]


@pytest.fixture(scope="module")
def kinematics() -> Kinematics:
    return Kinematics(load_spec("so101"))


@pytest.mark.parametrize("q", POSES)
def test_tool_fk_matches_urdf_chain(kinematics: Kinematics, q: np.ndarray) -> None:
    position, _ = urdf_tool_pose(q)
    error = np.linalg.norm(kinematics.tool_position(q) - position)
    assert error < 1e-6, f"FK differs from the URDF chain by {error * 1e3:.4f} mm"


@pytest.mark.parametrize("q", POSES)
def test_tool_orientation_matches_urdf_chain(kinematics: Kinematics, q: np.ndarray) -> None:
    _, rotation = urdf_tool_pose(q)
    kinematics.tool_position(q)
    site = mujoco.mj_name2id(kinematics.model, mujoco.mjtObj.mjOBJ_SITE, "tool")
    np.testing.assert_allclose(kinematics.data.site_xmat[site].reshape(3, 3), rotation, atol=1e-6)


def test_home_pose_reaches_forward(kinematics: Kinematics) -> None:
    # All joints at the middle of their ranges: the arm reaches ~0.39 m forward at ~0.23 m height.
    np.testing.assert_allclose(kinematics.tool_position(np.zeros(5)), urdf_tool_pose(np.zeros(5))[0], atol=1e-9)
    assert kinematics.tool_position(np.zeros(5)) == pytest.approx([0.3914, 0.0, 0.2265], abs=1e-3)


@pytest.mark.parametrize("q", POSES)
def test_jacobian_matches_finite_differences(kinematics: Kinematics, q: np.ndarray) -> None:
    jac = kinematics.tool_jacobian(q)
    assert jac.shape == (3, 5)
    eps = 1e-6
    numeric = np.column_stack([
        (kinematics.tool_position(q + eps * e) - kinematics.tool_position(q - eps * e)) / (2 * eps)
        for e in np.eye(5)
    ])
    np.testing.assert_allclose(jac, numeric, atol=1e-7)


def test_masses_equal_the_urdf() -> None:
    model = load_model("so101")
    for body, mass in URDF_LINK_MASSES.items():
        name = "moving_jaw_link" if body.startswith("moving_jaw") else body
        assert model.body_mass[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, name)] == pytest.approx(mass)
    assert model.body_mass.sum() == pytest.approx(sum(URDF_LINK_MASSES.values()), abs=1e-9)


def test_spec_ids_limits_and_efforts_reach_the_model() -> None:
    spec = load_spec("so101")
    model = load_model(spec)
    assert spec.name == "so101"
    assert spec.servo_ids == [1, 2, 3, 4, 5, 6]
    assert spec.joint_names == ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    assert spec.n_arm == 5 and spec.servo_model == "STS3215" and spec.servo_model_number == 777
    for joint, limits in zip(spec.joints, URDF_LIMITS, strict=True):
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, joint.name)
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint.name)
        assert (joint.lower, joint.upper) == limits
        assert tuple(model.jnt_range[jid]) == limits and model.jnt_limited[jid]
        assert tuple(model.actuator_ctrlrange[aid]) == (-joint.effort, joint.effort)
    assert np.all(spec.effort_bounds > 2.94)                   # above the STS3215's 12 V stall torque
    assert model.opt.timestep * 5 == pytest.approx(spec.frame_period)
    assert spec.frame_period == pytest.approx(1 / 30)


def test_gripper_is_the_jaw_hinge_with_an_identity_map() -> None:
    spec = load_spec("so101")
    angles = np.array([0.1, -0.2, 0.3, 0.4, 0.5, 1.2])
    np.testing.assert_allclose(spec.to_sim_coordinates(angles), angles)
    lower, upper = spec.servo_angle_limits()
    assert (lower[5], upper[5]) == pytest.approx((-0.174533, 1.74533))
    kin = Kinematics("so101")
    jaw = mujoco.mj_name2id(kin.model, mujoco.mjtObj.mjOBJ_BODY, "moving_jaw_link")
    kin.tool_position(np.zeros(6))
    closed = kin.data.xmat[jaw].reshape(3, 3).copy()
    kin.tool_position(np.array([0, 0, 0, 0, 0, 1.0]))
    turned = kin.data.xmat[jaw].reshape(3, 3)
    assert np.degrees(np.arccos((np.trace(closed.T @ turned) - 1) / 2)) == pytest.approx(np.degrees(1.0))


def test_load_by_name_and_the_default_stays_open_manipulator_x() -> None:
    assert load_spec().name == "open_manipulator_x"
    assert load_spec("open_manipulator_x").name == "open_manipulator_x"
    assert load_model().nu == 5 and load_model("so101").nu == 6
    assert load_spec("omx_x") == load_spec()          # the launch argument's short name
    with pytest.raises(SpecError, match=r"unknown robot 'so102' \(known: open_manipulator_x, panda, so101"):
        load_spec("so102")


def test_arm_hangs_still_under_gravity_with_torque_off() -> None:
    model = load_model("so101")
    data = mujoco.MjData(model)
    for _ in range(600):                                       # 4 s, no input: limits and damping only
        mujoco.mj_step(model, data)
    assert np.all(np.isfinite(data.qpos))
    assert np.all(data.qpos >= model.jnt_range[:, 0] - 0.05) and np.all(data.qpos <= model.jnt_range[:, 1] + 0.05)
