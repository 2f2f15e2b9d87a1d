"""Robot description: FK against the URDF chain by hand, Jacobian against finite
differences, mass against the URDF, spec validation and MuJoCo options."""

from __future__ import annotations

import re

import mujoco
import numpy as np
import pytest

from na_description import SpecError, load_spec
from na_description.model import Kinematics, load_model

# URDF numbers (docs/REFERENCES.md, OpenManipulator-X, older xacro with joint1 at z = 0.017 m), typed in independently
# of the MJCF so that the test can catch a wrong origin or axis there.
URDF_LINK_MASSES = [0.079119962, 0.098406837, 0.13850917, 0.13274562, 0.14327573, 0.001, 0.001]
J1 = np.array([0.012, 0.0, 0.017])
J2 = np.array([0.0, 0.0, 0.0595])
J3 = np.array([0.024, 0.0, 0.128])
J4 = np.array([0.124, 0.0, 0.0])
TOOL = np.array([0.126, 0.0, 0.0])


def rot_z(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def rot_y(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def urdf_tool_position(q: np.ndarray) -> np.ndarray:
    """Chain of homogeneous transforms written out from the URDF joint table."""
    rot, pos = np.eye(3), np.zeros(3)
    for origin, axis_rot, angle in ((J1, rot_z, q[0]), (J2, rot_y, q[1]), (J3, rot_y, q[2]), (J4, rot_y, q[3])):
        pos = pos + rot @ origin
        rot = rot @ axis_rot(angle)
    return pos + rot @ TOOL


POSES = [
    np.zeros(4),
    np.array([0.5, -0.3, 0.4, 0.2]),
    np.array([-1.2, 0.8, -0.9, 1.1]),
    np.array([2.5, -1.4, 1.3, -1.6]),
    np.array([-3.0, 1.2, 0.1, 1.9]),
]


@pytest.fixture(scope="module")
def kinematics() -> Kinematics:
    return Kinematics()


@pytest.mark.parametrize("q", POSES)
def test_tool_fk_matches_urdf_chain(kinematics: Kinematics, q: np.ndarray) -> None:
    error = np.linalg.norm(kinematics.tool_position(q) - urdf_tool_position(q))
    assert error < 0.5e-3, f"FK differs from the URDF chain by {error * 1e3:.3f} mm"


def test_home_pose_reaches_forward(kinematics: Kinematics) -> None:
    # All joints at zero: the arm is an inverted L, tool at x = 0.012+0.024+0.124+0.126.
    np.testing.assert_allclose(kinematics.tool_position(np.zeros(4)), [0.286, 0.0, 0.2045], atol=1e-9)


@pytest.mark.parametrize("q", POSES)
def test_jacobian_matches_finite_differences(kinematics: Kinematics, q: np.ndarray) -> None:
    jac = kinematics.tool_jacobian(q)
    eps = 1e-6
    numeric = np.column_stack([
        (kinematics.tool_position(q + eps * e) - kinematics.tool_position(q - eps * e)) / (2 * eps)
        for e in np.eye(4)
    ])
    np.testing.assert_allclose(jac, numeric, atol=1e-7)


def test_total_mass_equals_urdf_sum() -> None:
    model = load_model()
    assert model.body_mass.sum() == pytest.approx(sum(URDF_LINK_MASSES), abs=1e-9)


def test_spec_limits_and_effort_bounds_reach_the_model() -> None:
    spec = load_spec()
    model = load_model(spec)
    assert spec.servo_ids == [11, 12, 13, 14, 15]
    assert spec.joint_names == ["joint1", "joint2", "joint3", "joint4", "gripper"]
    for joint in spec.joints:
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, joint.name)
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint.name)
        assert tuple(model.actuator_ctrlrange[aid]) == (-joint.effort, joint.effort)
        assert tuple(model.jnt_range[jid]) == (joint.lower, joint.upper)
    assert list(spec.effort_bounds) == [5.0, 5.0, 5.0, 5.0, 1.5]
    assert model.opt.timestep == pytest.approx(0.00425)
    assert 4 * model.opt.timestep == pytest.approx(spec.frame_period)


def test_differentiable_options_switch_off_contacts_and_constraints() -> None:
    model = load_model(contacts=False, constraints=False)
    assert model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONTACT
    assert model.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    assert not load_model().opt.disableflags & mujoco.mjtDisableBit.mjDSBL_CONSTRAINT


def test_joint_limit_holds_with_constraints_on() -> None:
    model = load_model()
    data = mujoco.MjData(model)
    data.ctrl[2] = -5.0  # drive joint3 hard against its lower limit
    for _ in range(2000):
        mujoco.mj_step(model, data)
    assert data.qpos[2] > -1.5 - 0.05


def test_gripper_map_round_trip_and_endpoints() -> None:
    grip = load_spec().gripper
    assert grip.angle_to_slide(-1.52) == pytest.approx(0.019)
    assert grip.angle_to_slide(0.92) == pytest.approx(-0.01)
    angles = np.linspace(-1.6, 1.0, 7)
    np.testing.assert_allclose(grip.slide_to_angle(grip.angle_to_slide(angles)), angles)


def test_bad_spec_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(SpecError, match="not found"):
        load_spec(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmjcf: x.xml\njoints:\n  - {name: j, servo_id: 1, type: revolute, lower: 1, upper: 0,"
                   " effort: 1}\nservo: {}\ngripper: {}\n")
    with pytest.raises(SpecError, match="lower limit"):
        load_spec(bad)


def test_servo_joint_conversions_round_trip() -> None:
    spec = load_spec()
    angles = np.array([0.3, -0.2, 1.0, -1.0, 0.5])
    np.testing.assert_allclose(spec.joint_to_servo(spec.servo_to_joint(angles)), angles)
    sim = spec.to_sim_coordinates(angles)
    np.testing.assert_allclose(sim[:4], angles[:4])
    assert sim[4] == pytest.approx(float(spec.gripper.angle_to_slide(0.5)))


def test_values_named_in_another_order_come_back_in_spec_order() -> None:
    spec = load_spec()
    names = ["gripper", "joint3", "joint1", "joint4", "joint2"]
    values = {"joint1": 1.0, "joint2": 2.0, "joint3": 3.0, "joint4": 4.0, "gripper": 5.0}
    assert list(spec.index_of(names)) == [2, 4, 1, 3, 0]
    np.testing.assert_array_equal(spec.reorder(names, [values[n] for n in names], "position"), [1, 2, 3, 4, 5])
    np.testing.assert_array_equal(spec.reorder(spec.joint_names, [1, 2, 3, 4, 5]), [1, 2, 3, 4, 5])


@pytest.mark.parametrize(("names", "problem"), [
    (["joint1", "joint2", "joint3", "joint4", "gripper", "wrist"], "unknown ['wrist']"),
    (["joint1", "joint2", "joint3", "gripper"], "missing ['joint4']"),
    (["joint1", "joint2", "joint3", "joint4", "gripper", "joint2"], "duplicated ['joint2']"),
    ([], "missing ['joint1', 'joint2', 'joint3', 'joint4', 'gripper']"),
])
def test_names_that_do_not_match_the_spec_are_refused_saying_how(names, problem) -> None:
    from na_description import JointNameError

    with pytest.raises(JointNameError, match=re.escape(problem)):
        load_spec().index_of(names)


def test_arrays_of_another_length_than_the_names_are_refused() -> None:
    from na_description import JointNameError

    names = ["joint1", "joint2", "joint3", "joint4"]
    with pytest.raises(JointNameError, match="position has 5 values for 4 joint names"):
        load_spec().reorder(names, [0.0] * 5, "position")
    with pytest.raises(JointNameError, match="current has 4 values for 5 joint names"):
        load_spec().reorder(load_spec().joint_names, [0.0] * 4, "current")
