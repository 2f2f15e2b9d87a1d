"""The simulated rig: MuJoCo follower driven by the servo models, kinematic leader, payload,
F/T fixture, Joint 3 restriction, ground truth and the real-time runner."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from na_common.fixture import FixturePose
from na_description import xm430
from na_description.model import Kinematics
from na_sim.realtime_runner import RealtimeRunner
from na_sim.rig import CONDITION_NOMINAL, GRAVITY, Rig
from na_sim.rig_config import RigConfig, RigConfigError

FRAME = 0.017     # s, one data frame (spec frame period)


def make_rig(seed: int = 0, pose=None) -> Rig:
    rig = Rig(seed=seed)
    if pose is not None:
        rig.reset(seed, pose=pose)
    rig.configure_follower()
    return rig


def follower_current(rig: Rig) -> np.ndarray:
    return xm430.current_units_to_amp([r.get("present_current") for r in rig.follower_registers])


def sinusoid_goals(pose0: np.ndarray, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds / FRAME))[:, None] * FRAME
    amplitude = np.array([0.6, 0.5, 0.5, 0.6, 0.5])
    frequency = np.array([0.35, 0.45, 0.55, 0.65, 0.4])
    return pose0 + amplitude * np.sin(2 * np.pi * frequency * t)


def run_goals(rig: Rig, goals: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Track the goal rows frame by frame; returns (measured current A, servo torque, tracking error)."""
    currents, torques, errors = [], [], []
    for goal in goals:
        rig.set_follower_goal(goal)
        truth = rig.step(FRAME)
        currents.append(follower_current(rig))
        torques.append(truth.servo_torque)
        errors.append(goal - truth.joint_position)
    return np.array(currents), np.array(torques), np.array(errors)


def test_follower_tracks_a_step_and_settles():
    rig = make_rig()
    rig.advance(0.3)
    goal = np.array(rig.config.initial_pose) + np.array([0.3, 0.2, -0.2, 0.3, 0.3])
    rig.set_follower_goal(goal)
    errors = []
    for _ in range(int(1.0 / FRAME)):
        errors.append(np.abs(goal - rig.step(FRAME).joint_position))
    errors = np.array(errors)
    print("step 0.2-0.3 rad: |error| after 0.1 s", np.round(errors[5], 3), "after 1 s", np.round(errors[-1], 4))
    assert np.all(errors[0] > 0.05)                  # it had to move
    assert np.all(errors[-1] < 0.03)                 # settled within 0.03 rad (P-only, gravity sag)
    assert np.all(errors[-10:].max(axis=0) < 0.03)


def test_linear_current_to_torque_fit_leaves_large_residuals():
    """The paper's premise: tau = Kt*i + b is a poor map on these servos."""
    rig = make_rig()
    rig.advance(0.3)
    currents, torques, errors = run_goals(rig, sinusoid_goals(np.array(rig.config.initial_pose), 4.0))
    r2 = []
    for j in range(5):
        design = np.c_[currents[:, j], np.ones(len(currents))]
        coef, *_ = np.linalg.lstsq(design, torques[:, j], rcond=None)
        residual = torques[:, j] - design @ coef
        r2.append(1.0 - residual.var() / torques[:, j].var())
    print("R² of a linear current->torque fit per joint:", np.round(r2, 3))
    print("RMS tracking error per joint (rad):", np.round(np.sqrt(np.mean(errors ** 2, axis=0)), 4))
    assert np.all(np.array(r2[1:4]) < 0.9)
    assert np.all(np.std(torques[:, 1:4], axis=0) > 0.05)      # the joints were really loaded
    assert np.all(np.sqrt(np.mean(errors ** 2, axis=0)) < 0.2)  # and tracked the goals


def hold_current(rig: Rig, seconds: float = 1.0) -> np.ndarray:
    rig.advance(seconds)
    samples = []
    for _ in range(40):
        rig.step(FRAME)
        samples.append(follower_current(rig))
    return np.mean(samples, axis=0)


def test_payload_raises_holding_current_of_joints_2_to_4():
    rig = make_rig()
    empty = hold_current(rig)
    rig.set_payload(0.3)
    loaded = hold_current(rig)
    print("holding current (A) without payload", np.round(empty, 3), "with 300 g", np.round(loaded, 3))
    assert np.all(np.abs(loaded[1:4]) > np.abs(empty[1:4]) + 0.05)
    truth = rig.truth
    assert truth.grasp and truth.payload_kg == pytest.approx(0.3)
    np.testing.assert_allclose(truth.force_base, [0.0, 0.0, -0.3 * GRAVITY], atol=1e-9)
    rig.set_payload(None)
    assert not rig.truth.grasp and rig.truth.payload_kg == 0.0        # the truth follows at once
    np.testing.assert_allclose(rig.truth.force_base, 0.0, atol=1e-9)
    np.testing.assert_allclose(rig.step().force_base, 0.0, atol=1e-9)
    with pytest.raises(ValueError):
        rig.set_payload(-0.1)


def test_unseen_payload_mass_scales_the_load():
    rig = make_rig()
    rig.set_payload(0.15)                 # masses outside the 100-500 g training set work alike
    light = hold_current(rig)
    rig.set_payload(0.45)
    heavy = hold_current(rig)
    print(f"joint 3 holding current: 150 g {light[2]:.3f} A, 450 g {heavy[2]:.3f} A")
    assert np.abs(heavy[2]) > np.abs(light[2]) + 0.05


def test_restricted_joint3_draws_more_current_on_the_same_trajectory():
    goals = sinusoid_goals(np.array([0.0, -0.6, 0.6, 0.3, 0.0]), 3.0)
    results = {}
    for restricted in (False, True):
        rig = make_rig(pose=goals[0])
        rig.set_joint3_restriction(restricted)
        rig.advance(0.3)
        currents, _, _ = run_goals(rig, goals)
        results[restricted] = np.mean(np.abs(currents[:, 2]))
        assert rig.truth.condition == ("restricted_joint3" if restricted else CONDITION_NOMINAL)
    print(f"joint 3 mean |current|: nominal {results[False]:.3f} A, restricted {results[True]:.3f} A")
    assert results[True] > results[False] * 1.2


def test_overload_trip_on_a_blocked_joint_and_reboot_recovers():
    rig = make_rig()
    rig.advance(0.2)
    goal = np.array(rig.config.initial_pose)
    goal[1] = -2.3                                   # far past the joint 2 limit (-1.5 rad): stalls there
    rig.set_follower_goal(goal)
    regs = rig.follower_registers[1]
    rig.advance(1.0)
    assert regs.get("hardware_error_status") == 0
    rig.advance(1.5)
    print("joint 2 blocked for 2.5 s:", xm430.decode_hardware_error(regs.get("hardware_error_status")))
    assert regs.get("hardware_error_status") & xm430.HW_ERROR_OVERLOAD
    assert regs.get("torque_enable") == 0
    assert all(r.get("torque_enable") == 1 for k, r in enumerate(rig.follower_registers) if k != 1)
    regs.reboot()
    rig.step()
    assert regs.get("hardware_error_status") == 0
    rig.configure_follower()
    rig.advance(0.2)
    assert regs.get("torque_enable") == 1 and regs.get("hardware_error_status") == 0


def test_overheating_trip_from_the_temperature_limit():
    rig = make_rig()
    regs = rig.follower_registers[2]
    regs.set("temperature_limit", regs.get("present_temperature") - 2)
    rig.advance(0.05)
    assert regs.get("hardware_error_status") & xm430.HW_ERROR_OVERHEATING
    assert regs.get("torque_enable") == 0


@pytest.mark.parametrize("push", ["-z", "+x"])
def test_pushing_the_fixture_gives_truth_force_and_matching_sensor_wrench(push):
    pose = np.array([0.0, 0.2, 0.1, 0.9, 0.0])
    rig = make_rig(pose=pose)
    kin = Kinematics()
    settled = rig.advance(0.5).joint_position[:4]       # the arm sags a little under gravity first
    tool = kin.tool_position(settled)
    axis, sign = "xyz".index(push[1]), (1.0 if push[0] == "+" else -1.0)
    rpy = [0.0, 0.0, 0.4]
    rotation = FixturePose((0.0, 0.0, 0.0), tuple(rpy)).rotation
    direction = sign * rotation[:, axis]                # push direction in the base frame
    standoff = rig.config.fixture_half_size[axis] + rig.config.tool_collider_radius
    rig.set_fixture({"position": (tool + (standoff + 0.005) * direction).tolist(), "rpy": rpy})
    touch, face_direction = rig.fixture_face(push)
    np.testing.assert_allclose(face_direction, direction, atol=1e-12)
    np.testing.assert_allclose(touch, tool + 0.005 * direction, atol=1e-9)
    assert not rig.step(FRAME).contact
    # Command the tool 2.5 cm past its position along the push direction.
    dq = np.linalg.lstsq(kin.tool_jacobian(settled), 0.025 * direction, rcond=None)[0]
    rig.set_follower_goal(np.r_[settled + dq, 0.0])
    truth = rig.advance(1.0)
    print(f"push {push}: truth force (base) {np.round(truth.force_base, 2)} N, "
          f"sensor wrench {np.round(truth.sensor_wrench, 3)}")
    assert truth.contact
    assert truth.force_base @ direction < -1.0                   # the fixture pushes back on the tool
    assert sign * truth.sensor_wrench[axis] > 1.0                # the tool pushes the sensor along the push
    np.testing.assert_allclose(truth.force_base, -rig.fixture.rotation @ truth.sensor_wrench[:3], atol=1e-9)
    np.testing.assert_allclose(truth.contact_force_base, truth.force_base, atol=1e-12)   # no payload
    rig.set_follower_goal(np.r_[settled, 0.0])
    assert wait_steps(rig, lambda t: not t.contact, seconds=1.0)


def wait_steps(rig: Rig, condition, seconds: float) -> bool:
    return any(condition(rig.step(FRAME)) for _ in range(int(seconds / FRAME)))


def test_fixture_pose_is_validated_and_removable():
    rig = make_rig()
    with pytest.raises(RigConfigError):
        rig.set_fixture({"position": [0.1, 0.2]})
    rig.set_fixture({"position": [0.2, 0.0, 0.05], "rpy": [0, 0, 0]})
    assert rig.truth.fixture == rig.fixture and rig.step().fixture is not None
    rig.set_fixture(None)
    assert rig.truth.fixture is None and rig.step().fixture is None and not rig.truth.contact
    with pytest.raises(RuntimeError):
        rig.fixture_face("+x")


def test_leader_registers_follow_the_operator_pose_with_torque_off():
    rig = make_rig()
    spec = rig.spec
    start = np.array(rig.config.initial_pose)
    for k in range(30):
        pose = start + 0.01 * k * np.array([1.0, -1.0, 1.0, 0.5, 2.0])
        rig.set_leader_pose(pose)
        rig.step(FRAME)
    registers = rig.leader_registers
    positions = np.array([r.get("present_position") for r in registers])
    expected = xm430.rad_to_pulses(spec.joint_to_servo(pose))
    assert np.all(np.abs(positions - expected) <= 2)
    velocity = xm430.velocity_units_to_rad_s([r.get("present_velocity") for r in registers])
    np.testing.assert_allclose(velocity, 0.01 / FRAME * np.array([1.0, -1.0, 1.0, 0.5, 2.0]), atol=0.08)
    currents = xm430.current_units_to_amp([r.get("present_current") for r in registers])
    assert np.all(np.abs(currents) < 0.03)
    assert all(r.get("torque_enable") == 0 for r in registers)
    with pytest.raises(ValueError):
        rig.set_leader_pose([0.0, 0.1])


def test_reset_keeps_register_setup_and_restores_the_pose():
    rig = make_rig()
    rig.set_follower_goal(np.array(rig.config.initial_pose) + 0.2)
    rig.set_payload(0.2)
    rig.set_joint3_restriction(True)
    rig.advance(0.5)
    rig.reset(5)
    assert rig.truth.time == 0.0 and rig.truth.payload_kg == 0.0 and rig.truth.condition == CONDITION_NOMINAL
    np.testing.assert_allclose(rig.truth.joint_position, rig.config.initial_pose, atol=1e-9)
    assert all(r.get("torque_enable") == 1 and r.get("operating_mode") == 4 for r in rig.follower_registers)
    goals = [r.get("goal_position") for r in rig.follower_registers]
    presents = [r.get("present_position") for r in rig.follower_registers]
    assert np.all(np.abs(np.subtract(goals, presents)) <= 1)
    before = rig.step(FRAME).joint_position
    assert np.all(np.abs(before - rig.config.initial_pose) < 0.02)   # no jump after the reset


def test_rig_config_rejects_bad_files(tmp_path):
    bad = tmp_path / "rig.yaml"
    servo = RigConfig.from_yaml().servo_config
    bad.write_text(f"servo_config: {servo}\ntimestep_s: 0.5\n")
    with pytest.raises(RigConfigError, match="timestep"):
        RigConfig.from_yaml(bad)
    bad.write_text("servo_config: nowhere.yaml\n")
    with pytest.raises(RigConfigError, match=r"servo config 'nowhere\.yaml'"):
        RigConfig.from_yaml(bad)
    with pytest.raises(RigConfigError, match="not found"):
        RigConfig.from_yaml(tmp_path / "missing.yaml")
    bad.write_text(f"servo_config: {servo}\npayload: {{radius: 0.02}}\n")
    with pytest.raises(RigConfigError, match="radius"):
        RigConfig.from_yaml(bad)


def test_realtime_runner_tracks_the_monotonic_clock_while_registers_are_served(wait_for):
    rig = make_rig()
    reads = []
    stop = threading.Event()

    def bus_thread():     # the emulator's side: reads the follower block under each servo's lock
        while not stop.is_set():
            reads.append([r.read(xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH) for r in rig.follower_registers])
            rig.set_leader_pose(rig.config.initial_pose)
            time.sleep(0.002)

    reader = threading.Thread(target=bus_thread, daemon=True)
    runner = RealtimeRunner(rig)
    wall_start, sim_start = time.monotonic(), rig.time
    runner.start()
    reader.start()
    try:
        assert wait_for(lambda: rig.time - sim_start >= 0.4, timeout=5.0)
        wall = time.monotonic() - wall_start
        simulated = rig.time - sim_start
    finally:
        runner.stop()
        stop.set()
        reader.join(1.0)
    print(f"real-time runner: {simulated:.3f} s simulated in {wall:.3f} s wall, {runner.steps} steps")
    assert runner.error is None and not runner.running
    # No drift: simulated time (plus any time skipped after a stall of a busy machine) is wall time.
    assert abs(simulated + runner.skipped * runner.period - wall) < 0.15
    assert len(reads) > 10
    decoded = xm430.decode_state_block(reads[-1][1])
    assert abs(decoded.input_voltage - 12.0) < 0.5


def test_gripper_squeezes_a_held_object():
    rig = make_rig()
    spec = rig.spec
    pose = np.array(rig.config.initial_pose)
    pose[4] = float(spec.gripper.slide_to_angle(0.012))          # open
    rig.set_follower_goal(pose)
    rig.advance(0.8)
    rig.set_payload(0.2)
    pose[4] = float(spec.gripper.slide_to_angle(0.0015))         # close past the object (stop at 3 mm)
    rig.set_follower_goal(pose)
    rig.advance(0.8)
    held = rig.data.qpos[rig._qpos[4]]
    squeeze = abs(follower_current(rig)[4])
    rig.set_payload(None)
    rig.advance(0.8)
    released = abs(follower_current(rig)[4])
    print(f"gripper: stops at slide {held * 1e3:.2f} mm, squeeze {squeeze:.3f} A, released {released:.3f} A")
    assert held == pytest.approx(rig.config.grasp_stop_slide, abs=0.001)
    assert squeeze > released + 0.1
    assert rig.follower_registers[4].get("hardware_error_status") == 0


def test_supply_sag_fault_sets_the_input_voltage_bit():
    rig = make_rig()
    rig.set_supply_voltage(9.0)                                   # below Min Voltage Limit (9.5 V)
    rig.advance(0.1)
    registers = rig.follower_registers
    assert all(r.get("hardware_error_status") & xm430.HW_ERROR_INPUT_VOLTAGE for r in registers)
    assert all(r.get("present_input_voltage") <= 91 for r in registers)
    rig.set_supply_voltage(12.0)
    rig.advance(0.1)
    assert all(r.get("hardware_error_status") == 0 for r in registers)   # not latched: not in Shutdown
    with pytest.raises(ValueError):
        rig.set_supply_voltage(float("nan"))


def test_reset_keeps_the_follower_stiff_and_latched_errors_latched():
    rig = make_rig()
    rig.reset(3)
    rig.set_follower_goal(np.array(rig.config.initial_pose) + np.array([0.0, 0.3, 0.0, 0.0, 0.0]))
    rig.advance(0.6)
    assert abs(rig.truth.joint_position[1] - (rig.config.initial_pose[1] + 0.3)) < 0.03   # torque still on
    regs = rig.follower_registers[2]
    regs.set("temperature_limit", 10)
    rig.advance(0.05)
    assert regs.get("hardware_error_status") & xm430.HW_ERROR_OVERHEATING
    regs.set("temperature_limit", 80)                 # cause gone, but the trip stays latched ...
    rig.reset(4)
    rig.advance(0.05)
    assert regs.get("hardware_error_status") & xm430.HW_ERROR_OVERHEATING and regs.get("torque_enable") == 0
    regs.reboot()                                     # ... until a Reboot
    rig.configure_follower()
    rig.advance(0.05)
    assert regs.get("hardware_error_status") == 0 and regs.get("torque_enable") == 1


def test_same_seed_same_rig_and_different_seed_different_noise():
    def run(seed: int) -> list[bytes]:
        rig = make_rig(seed)
        goals = sinusoid_goals(np.array(rig.config.initial_pose), 0.5)
        out = []
        for goal in goals:
            rig.set_follower_goal(goal)
            rig.step(FRAME)
            out.append(b"".join(r.read(xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)
                                for r in rig.follower_registers))
        return out

    first, again, other = run(1), run(1), run(2)
    assert first == again
    assert first != other


def test_multi_turn_clear_hook_moves_the_position_frame_by_whole_turns():
    rig = make_rig()
    regs = rig.follower_registers[0]
    regs.set("goal_position", regs.get("present_position") + 4096 + 200)   # one turn and a bit (joint 1)
    rig.advance(2.0)
    before = regs.get("present_position")
    assert before > 4096
    rig.on_clear(regs)
    after = regs.get("present_position")
    # whole turns, within the one pulse that the position sensor's noise (drawn again at each store) can add
    assert 0 <= after < 4096 and min((before - after) % 4096, (after - before) % 4096) <= 1
    joint1 = rig.truth.joint_position[0]
    rig.advance(0.5)                                   # the goal moved with the frame: no jump
    assert abs(rig.truth.joint_position[0] - joint1) < 0.02


def test_step_without_register_exchange_keeps_registers_until_the_next_exchange():
    rig = make_rig()
    regs = rig.follower_registers[1]
    goal = np.array(rig.config.initial_pose) + np.array([0.0, 0.3, 0.0, 0.0, 0.0])
    rig.set_follower_goal(goal)
    rig.step(FRAME)                                     # goals read here
    frozen = regs.read(xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)
    for _ in range(20):
        rig.step(FRAME, registers=False)                # physics runs on, registers untouched
    assert regs.read(xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH) == frozen
    rig.step(FRAME)
    present = xm430.pulses_to_rad(regs.get("present_position"))
    assert abs(present - goal[1]) < 0.05 and abs(rig.truth.joint_position[1] - goal[1]) < 0.05


@pytest.mark.parametrize("rig_config", ["sim_rig", "sim_rig_so101"])
def test_a_held_payload_loads_the_joints_as_a_point_mass_at_the_tool_site(rig_config):
    """The joint torques a 400 g grasp adds equal J(tool site)^T (0, 0, m g), computed on the robot's own MJCF
    (no rig edits) at the same pose: the payload's mass sits at the tool, not beyond it."""
    import mujoco

    from na_description.model import load_model

    rig = Rig(RigConfig.from_yaml(rig_config), seed=0)
    spec = rig.spec
    q = np.array(rig.config.initial_pose, dtype=float) + 0.2 * np.array([1, -1, 1, 1, 0, 0][:spec.n_motors])
    rig.reset(0, pose=q)
    dofs = rig._dof_slice

    def bias(mass_kg: float | None) -> np.ndarray:
        rig.set_payload(mass_kg)
        mujoco.mj_forward(rig.model, rig.data)
        return rig.data.qfrc_bias[dofs][:spec.n_arm].copy()

    added = bias(0.4) - bias(None)
    model = load_model(spec)
    data = mujoco.MjData(model)
    data.qpos[:] = rig.data.qpos[rig._qpos_slice]
    mujoco.mj_forward(model, data)
    jacobian = np.zeros((3, model.nv))
    mujoco.mj_jacSite(model, data, jacobian, None, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.tool_site))
    expected = 0.4 * 9.81 * jacobian[2, :spec.n_arm]
    assert np.abs(expected).max() > 0.1
    np.testing.assert_allclose(added, expected, atol=0.01 * np.abs(expected).max())
