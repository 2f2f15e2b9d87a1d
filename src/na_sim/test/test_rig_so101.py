"""The simulated rig with the SO-101 (STS3215 servos): config/spec pairing, registers, and physics
checked against oracles from the arm's masses and the STS3215 datasheet."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from na_description import load_spec, sts3215
from na_description.model import load_model
from na_sim.rig import Rig
from na_sim.rig_config import RigConfig, RigConfigError
from na_sim.sts_registers import StsServoRegisters

STRETCHED = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.3])    # arm horizontal, straight forward
LIFT = 1                                                # shoulder_lift in spec order
STALL_TORQUE = 2.94      # N·m at 12 V, STS3215 datasheet (30 kgf·cm)
GRAVITY = 9.81


@pytest.fixture(scope="module")
def config() -> RigConfig:
    return RigConfig.from_yaml("sim_rig_so101")


def lift_gravity_torque(payload_kg: float = 0.0) -> float:
    """|torque| gravity puts on shoulder_lift in the stretched pose, from the link masses and centres of
    mass of the SO-101 model (subtree mass times lever arm) plus a point payload at the tool site."""
    spec = load_spec("so101")
    model = load_model(spec)
    data = mujoco.MjData(model)
    mujoco.mj_forward(model, data)
    body = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_BODY, "upper_arm_link")
    joint = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, "shoulder_lift")
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.tool_site)
    axis_x = data.xanchor[joint][0]
    arm = model.body_subtreemass[body] * (data.subtree_com[body][0] - axis_x)
    return GRAVITY * (arm + payload_kg * (data.site_xpos[site][0] - axis_x))


def held_load(config: RigConfig, *, payload_kg: float | None = None, torque: bool = True,
              seconds: float = 1.0) -> np.ndarray:
    """Mean Present Load (signed fraction) per servo over ``seconds`` after settling in the stretched pose."""
    rig = Rig(config, seed=3)
    rig.reset(3, pose=STRETCHED)
    rig.configure_follower(torque=torque)
    rig.set_payload(payload_kg)
    rig.advance(1.0)
    frame = rig.spec.frame_period
    loads = []
    for _ in range(round(seconds / frame)):
        rig.advance(frame)
        loads.append([regs.get("present_load") for regs in rig.follower_registers])
    return np.mean(sts3215.load_units_to_fraction(loads), axis=0)


def test_config_names_its_robot_and_a_mismatch_is_one_line(config, tmp_path):
    assert config.robot == "so101" and config.servo_family == "sts3215"
    spec = load_spec("so101")
    assert round(spec.frame_period / config.timestep_s) == 5           # paper's SO-101 setting: 5 substeps
    assert abs(spec.frame_period / config.timestep_s - 5) < 1e-9
    with pytest.raises(RigConfigError, match="rig config is for robot 'so101', the spec is 'open_manipulator_x'"):
        Rig(config, spec=load_spec())
    with pytest.raises(RigConfigError) as err:
        Rig(RigConfig.from_yaml(), spec=spec)
    assert "\n" not in str(err.value)
    bad = tmp_path / "rig.yaml"
    bad.write_text("base: sim_rig_so101.yaml\ninitial_pose: [0, 0, 0, 0, 0]\n")
    with pytest.raises(RigConfigError, match="initial_pose needs 6 values"):
        RigConfig.from_yaml(bad)
    bad.write_text("base: sim_rig_so101.yaml\nservo_config: servo_xm430.yaml\n")
    with pytest.raises(RigConfigError, match="XM430-W350 servos, but robot 'so101' has STS3215"):
        RigConfig.from_yaml(bad)
    bad.write_text("base: sim_rig_so101.yaml\nfollower_setup: {operating_mode: 4}\n")
    with pytest.raises(RigConfigError, match="sts3215 position mode"):
        RigConfig.from_yaml(bad)


def test_registers_are_sts3215_tables_configured_like_the_follower(config):
    rig = Rig(config, seed=0)
    rig.configure_follower()
    spec = rig.spec
    assert [r.servo_id for r in rig.follower_registers] == spec.servo_ids == [1, 2, 3, 4, 5, 6]
    assert all(isinstance(r, StsServoRegisters) for r in (*rig.leader_registers, *rig.follower_registers))
    gains = spec.position_gains
    for regs in rig.follower_registers:
        assert regs.get("p_coefficient") == gains["p"] and regs.get("d_coefficient") == gains["d"]
        assert regs.get("i_coefficient") == gains["i"] and regs.get("operating_mode") == 0
        assert regs.get("torque_enable") == sts3215.TORQUE_ON
    rig.set_follower_goal(np.array(config.initial_pose) + 0.2)
    steps = [r.get("goal_position") for r in rig.follower_registers]
    expected = np.rint((np.array(config.initial_pose) + 0.2) * 4096 / (2 * np.pi) + 2048)   # 4096 steps/turn
    np.testing.assert_array_equal(steps, expected)
    assert rig.family.gain_registers[0] == "p_coefficient"


def test_follower_tracks_a_step_with_sts_firmware(config):
    rig = Rig(config, seed=0)
    rig.configure_follower()
    rig.advance(0.3)
    goal = np.array(config.initial_pose) + np.array([0.3, 0.25, -0.25, 0.3, 0.3, 0.3])
    rig.set_follower_goal(goal)
    first = np.abs(goal - rig.advance(rig.spec.frame_period).joint_position)
    last = np.abs(goal - rig.advance(1.5).joint_position)
    assert np.all(first > 0.1)
    assert np.all(last < 0.03)
    present = sts3215.steps_to_rad([r.get("present_position") for r in rig.follower_registers])
    np.testing.assert_allclose(present, rig.truth.joint_position, atol=0.01)


def test_holding_shoulder_lift_against_gravity_reads_the_expected_load(config):
    """Present Load is the drive duty: holding a static torque never needs more than torque / stall torque
    (the gears' friction may help), and it pushes toward decreasing position (gravity tips the stretched
    arm toward increasing shoulder_lift, the tool down)."""
    tau = lift_gravity_torque()
    assert 0.4 < tau < 0.7                                   # ~0.39 kg of arm at ~0.14 m
    load = held_load(config)
    assert load[LIFT] < 0                                    # sign: against gravity
    assert 0.1 * tau / STALL_TORQUE < -load[LIFT] < 1.2 * tau / STALL_TORQUE


def test_payload_raises_the_shoulder_lift_load(config):
    empty, loaded = held_load(config), held_load(config, payload_kg=0.5)
    tau = lift_gravity_torque(0.5)
    assert loaded[LIFT] < 0 and -loaded[LIFT] > 2.0 * -empty[LIFT]
    assert -loaded[LIFT] < 1.2 * tau / STALL_TORQUE


def test_load_reads_zero_with_torque_off(config):
    load = held_load(config, torque=False, seconds=0.5)
    np.testing.assert_array_equal(load, 0.0)


def test_elbow_restriction_draws_more_elbow_load(config):
    def elbow_load(restricted: bool) -> float:
        rig = Rig(config, seed=2)
        rig.reset(2, pose=STRETCHED)
        rig.configure_follower()
        rig.set_restriction(restricted)
        rig.advance(1.0)
        return float(sts3215.load_units_to_fraction(rig.follower_registers[2].get("present_load")))

    spec = load_spec("so101")
    assert spec.joint_names.index(spec.condition_joint) == 2             # elbow_flex, servo 3
    rig = Rig(config, seed=2)
    rig.set_restriction(True)
    assert rig.truth.condition == "restricted_elbow_flex"
    assert abs(elbow_load(True)) > abs(elbow_load(False)) + 0.01


def test_a_held_joint_sits_still_between_physics_steps(config):
    """Stretched out with 500 g, the pitch joints settle: their speed does not flip sign above 0.05 rad/s from one
    physics step to the next (explicitly integrated, the gear's efficiency switch made them reverse at every step,
    0.14-0.30 rad/s RMS)."""
    rig = Rig(config, seed=3)
    rig.reset(3, pose=STRETCHED)
    rig.configure_follower()
    rig.set_payload(0.5)
    rig.advance(2.0)
    speeds = np.array([rig.step().joint_velocity[1:4] for _ in range(150)])     # 1 s of physics steps
    fast = np.abs(speeds) > 0.05
    reversals = (np.sign(speeds[1:]) != np.sign(speeds[:-1])) & fast[1:] & fast[:-1]
    assert reversals.mean(axis=0).max() < 0.02
    assert np.sqrt(np.mean(np.square(speeds), axis=0)).max() < 0.1
