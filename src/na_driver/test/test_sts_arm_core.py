"""Arm driver core running an SO-101 (Feetech STS3215) against the na_sim STS emulator, real scservo_sdk on a pty."""

from __future__ import annotations

import functools
import time

import numpy as np
import pytest

from na_description import load_spec
from na_driver.arm_config import ConfigError, build_config, default_parameters
from na_driver.arm_core import ArmDriverCore, StartupError
from na_driver.loop_timing import DeadlineLoop
from na_driver.serial_bus import BusError
from na_driver.sts_bus import StsBus
from na_sim.bus_process import DEFAULT_PRIORITY as BUS_PRIORITY  # the rig's emulated servos' SCHED_FIFO priority
from na_sim.emulator_process import EmulatorProcess
from na_sim.faults import DxlFaultInjector, DxlFaults

SPEC = load_spec("so101")
# The STS3215 memory table (Feetech, docs/REFERENCES.md STS3215), written here, not imported from the driver.
ADDRESS = {"return_delay_time": 7, "p_coefficient": 21, "d_coefficient": 22, "i_coefficient": 23,
           "protection_current": 28, "homing_offset": 31, "operating_mode": 33, "torque_enable": 40,
           "goal_position": 42, "lock": 55, "present_position": 56, "present_velocity": 58, "present_load": 60,
           "present_voltage": 62, "present_temperature": 63, "status": 65, "moving": 66, "present_current": 69}
SIZE = {"return_delay_time": 1, "p_coefficient": 1, "d_coefficient": 1, "i_coefficient": 1, "protection_current": 2,
        "homing_offset": 2, "operating_mode": 1, "torque_enable": 1, "goal_position": 2, "lock": 1,
        "present_position": 2, "present_velocity": 2, "present_load": 2, "present_voltage": 1,
        "present_temperature": 1, "status": 1, "moving": 1, "present_current": 2}
SIGN_BIT = {"homing_offset": 11, "goal_position": 15, "present_position": 15, "present_velocity": 15,
            "present_load": 10, "present_current": 15}
STEPS_PER_REV, CENTER_STEP = 4096, 2048
RAD_S_PER_VELOCITY_UNIT = 2 * np.pi / STEPS_PER_REV       # 1 step/s
LOAD_FULL_SCALE = 1000                                    # 0.1 % units
AMP_PER_CURRENT_UNIT = 6.5e-3
VOLT_PER_VOLTAGE_UNIT = 0.1
STATUS_OVERLOAD = 1 << 5


def put(regs, name: str, value: int) -> None:
    """Store a register's raw bytes (sign-magnitude where the table says so), bypassing the codec under test."""
    bit = SIGN_BIT.get(name)
    word = (abs(value) | (1 << bit)) if bit is not None and value < 0 else value
    regs.store_block(ADDRESS[name], word.to_bytes(SIZE[name], "little"))


def raw(regs, name: str) -> int:
    word = int.from_bytes(regs.read(ADDRESS[name], SIZE[name]), "little")
    bit = SIGN_BIT.get(name)
    return -(word & ~(1 << bit)) if bit is not None and word & (1 << bit) else word


@pytest.fixture
def make_core(make_core):
    """The conftest factory for the so101 spec: ``make_core(port, role="follower", **params)``."""
    return functools.partial(make_core, robot_spec="so101")


def set_state(servos, shift: int) -> dict[str, list[int]]:
    """A distinct present state per servo (negative velocity, load and current on some); returns the raw values."""
    state: dict[str, list[int]] = {name: [] for name in ("present_position", "present_velocity", "present_load",
                                                          "present_voltage", "present_temperature",
                                                          "present_current")}
    for k, regs in enumerate(servos):
        values = {"present_position": 1500 + 150 * k + shift, "present_velocity": (-1) ** k * (40 + 7 * k + shift),
                  "present_load": (-1) ** (k + 1) * (120 + 30 * k + shift), "present_voltage": 118 + k + shift % 3,
                  "present_temperature": 30 + k + shift % 5, "present_current": (-1) ** k * (60 + 9 * k + shift)}
        for name, value in values.items():
            put(regs, name, value)
            state[name].append(value)
    return state


def test_the_so101_spec_selects_the_feetech_bus(make_core) -> None:
    core, _ = make_core("/dev/null-na")
    assert isinstance(core.bus, StsBus) and core.config.family.name == "STS3215"
    assert core.config.servo_ids == (1, 2, 3, 4, 5, 6)


def test_so101_defaults_and_family_checks() -> None:
    defaults = default_parameters(SPEC)
    assert defaults["operating_mode"] == "position" and defaults["bus_watchdog_ms"] == 0.0
    assert defaults["position_p_gain"] == [16] * 6 and defaults["position_d_gain"] == [32] * 6
    assert defaults["current_limit"] == [pytest.approx(500 * AMP_PER_CURRENT_UNIT)] * 6
    with pytest.raises(ConfigError, match="bus_watchdog_ms"):
        build_config({"port": "/dev/x", "role": "follower", "robot_spec": "so101", "bus_watchdog_ms": 100.0})
    with pytest.raises(ConfigError, match=r"operating_mode.*STS3215"):
        build_config({"port": "/dev/x", "role": "follower", "robot_spec": "so101",
                      "operating_mode": "extended_position"})
    with pytest.raises(ConfigError, match="baud_rate"):
        build_config({"port": "/dev/x", "role": "follower", "robot_spec": "so101", "baud_rate": 3_000_000})
    with pytest.raises(ValueError, match="read_mode"):
        ArmDriverCore(build_config({"port": "/dev/x", "role": "leader", "robot_spec": "so101"}), read_mode="fast")


def test_wrong_model_is_refused(emulated_so101, make_core) -> None:
    emulator, servos = emulated_so101()
    servos[2].store_block(3, (1020).to_bytes(2, "little"))           # an XM430 model number on ID 3
    core, _ = make_core(emulator.port_path)
    with pytest.raises(StartupError, match=r"ID 3 reports model number 1020.*777"):
        core.start()


def test_follower_start_writes_eeprom_unlocked_locks_again_keeps_homing_and_holds_pose(emulated_so101,
                                                                                       make_core) -> None:
    emulator, servos = emulated_so101()
    for k, regs in enumerate(servos):
        put(regs, "return_delay_time", 250)
        put(regs, "operating_mode", 1)                                # velocity: must become position (0)
        put(regs, "homing_offset", -300 + 100 * k)                    # the arm's calibration: kept
        put(regs, "present_position", 1800 + 50 * k)
        put(regs, "goal_position", 2600)                              # a stale goal must not be kept
    core, log = make_core(emulator.port_path, position_p_gain=[10, 11, 12, 13, 14, 15], current_limit=2.6)
    core.start()
    try:
        for k, regs in enumerate(servos):
            assert raw(regs, "torque_enable") == 1
            assert raw(regs, "goal_position") == 1800 + 50 * k           # goal := present: no jump
            assert raw(regs, "return_delay_time") == 0 and raw(regs, "operating_mode") == 0
            assert raw(regs, "p_coefficient") == 10 + k and raw(regs, "d_coefficient") == 32
            assert raw(regs, "i_coefficient") == 0
            assert raw(regs, "protection_current") == 400                # 2.6 A / 6.5 mA
            assert raw(regs, "homing_offset") == -300 + 100 * k
            assert raw(regs, "lock") == 1                                 # locked again
        assert "torque on" in log.text() and "[-300, -200" not in log.text()
        assert "{1: -300, 2: -200, 3: -100, 4: 0, 5: 100, 6: 200}" in log.text()
    finally:
        core.shutdown()
    assert all(raw(regs, "torque_enable") == 0 for regs in servos)       # torque off on stop
    for k, regs in enumerate(servos):                                     # written unlocked: saved in EEPROM
        regs.power_cycle()
        assert raw(regs, "p_coefficient") == 10 + k and raw(regs, "return_delay_time") == 0
        assert raw(regs, "operating_mode") == 0 and raw(regs, "protection_current") == 400


def test_leader_start_turns_torque_off_and_writes_nothing_that_matches(emulated_so101, make_core) -> None:
    emulator, servos = emulated_so101()
    for regs in servos:
        put(regs, "p_coefficient", 16)
        put(regs, "torque_enable", 1)
    core, _ = make_core(emulator.port_path, role="leader")
    core.start()
    core.shutdown()
    assert all(raw(regs, "torque_enable") == 0 for regs in servos)
    assert emulator.stats["write"] == 6                                  # only the torque-off writes


def test_decode_of_every_field_follows_the_registers(emulated_so101, make_core, fresh_cycle) -> None:
    emulator, servos = emulated_so101()
    core, _ = make_core(emulator.port_path, role="leader")
    core.start()
    try:
        for shift in (0, 23):                                            # moving values: a stale one cannot pass
            state = set_state(servos, shift)
            sample = fresh_cycle(core)
            assert not any(sample.stale) and sample.name == SPEC.joint_names
            for k, joint in enumerate(SPEC.joints):
                d = joint.drive_direction
                angle = (state["present_position"][k] - CENTER_STEP) * 2 * np.pi / STEPS_PER_REV
                assert sample.position[k] == pytest.approx(d * angle + joint.homing_offset)
                assert sample.velocity[k] == pytest.approx(d * state["present_velocity"][k] * RAD_S_PER_VELOCITY_UNIT)
                assert sample.load[k] == pytest.approx(d * state["present_load"][k] / LOAD_FULL_SCALE)
                assert sample.pwm[k] == pytest.approx(d * state["present_load"][k] / LOAD_FULL_SCALE)
                assert sample.current[k] == pytest.approx(d * state["present_current"][k] * AMP_PER_CURRENT_UNIT)
                assert sample.input_voltage[k] == pytest.approx(state["present_voltage"][k] * VOLT_PER_VOLTAGE_UNIT)
                assert sample.temperature[k] == state["present_temperature"][k]
            assert sample.hardware_error.tolist() == [0] * 6
            assert sample.gripper_slide == pytest.approx(sample.position[5])     # the jaw: identity map
    finally:
        core.shutdown()


def test_goals_are_sync_written_to_the_goal_registers_and_clamped(emulated_so101, make_core) -> None:
    emulator, servos = emulated_so101()
    core, _ = make_core(emulator.port_path)
    core.start()
    try:
        for goal in ([0.3, -0.4, 0.5, -0.6, 1.0, 0.8], [-0.2, 0.6, -1.1, 0.7, -2.0, 0.1]):
            core.set_command(list(reversed(goal)), list(reversed(SPEC.joint_names)))     # names in any order
            sample = core.cycle()
            expected = [CENTER_STEP + round(j.drive_direction * (q - j.homing_offset) * STEPS_PER_REV / (2 * np.pi))
                        for q, j in zip(goal, SPEC.joints, strict=True)]
            assert [raw(regs, "goal_position") for regs in servos] == expected
            assert np.allclose(sample.goal_position, goal, atol=2 * np.pi / STEPS_PER_REV)
        core.set_command([5.0, 0, 0, 0, 0, 0])                                     # beyond shoulder_pan's limit
        core.cycle()
        upper = CENTER_STEP + round(SPEC.joints[0].upper * STEPS_PER_REV / (2 * np.pi))
        assert raw(servos[0], "goal_position") == upper and core.clamped_commands == 1
    finally:
        core.shutdown()


def test_a_servo_that_stops_answering_goes_stale_then_trips_the_follower(emulated_so101, make_core) -> None:
    error_timeout = 0.2
    emulator, servos = emulated_so101()
    core, log = make_core(emulator.port_path, error_timeout=error_timeout)
    core.start()
    stall_from = emulator.elapsed_s + 0.1
    emulator.injector = DxlFaultInjector(DxlFaults(stall_servo_id=4, stall_window_s=(stall_from, 600.0)))
    try:
        samples = []
        deadline = time.monotonic() + 10.0
        while core.torque_enabled and time.monotonic() < deadline:
            samples.append(core.cycle())
            time.sleep(0.01)                                             # pacing a 100 Hz loop
        assert not core.torque_enabled, log.text()
        stale_at = next(s.stamp for s in samples if s.stale[3])
        last_fresh = max(s.stamp for s in samples if not s.stale[3])
        assert last_fresh < stale_at and samples[-1].stamp - last_fresh > error_timeout   # stale first, then the trip
        assert all(s.stale.tolist() == [False, False, False, True, False, False] for s in samples if s.stamp > stale_at)
        errors = log.text(min_level=2)
        assert "servo 4 (wrist_flex): no valid reply" in errors and "follower tripped, torque off" in errors
        assert "not confirmed by servo(s) [4]" in errors                 # the silent servo cannot acknowledge it
        assert [raw(regs, "torque_enable") for k, regs in enumerate(servos) if k != 3] == [0] * 5
        with pytest.raises(BusError, match="reboot first"):
            core.set_torque(True)
    finally:
        core.shutdown()


def test_status_bits_trip_the_follower_and_say_why(emulated_so101, make_core, fresh_cycle) -> None:
    emulator, servos = emulated_so101()
    core, log = make_core(emulator.port_path)
    core.start()
    try:
        fresh_cycle(core)
        put(servos[2], "status", STATUS_OVERLOAD)
        sample = fresh_cycle(core)
        assert sample.hardware_error[2] == STATUS_OVERLOAD and not core.torque_enabled
        assert all(raw(regs, "torque_enable") == 0 for regs in servos)
        errors = log.text(min_level=2)
        assert "servo 3 (elbow_flex): hardware error: overload" in errors
        with pytest.raises(BusError, match="still reports a hardware error after the reboot: overload"):
            core.reboot_tripped()                                        # the bit stays: no torque
        assert all(raw(regs, "torque_enable") == 0 for regs in servos)
    finally:
        core.shutdown()


def test_corrupted_and_dropped_replies_are_counted_and_never_published(emulated_so101, make_core) -> None:
    emulator, servos = emulated_so101()
    state = set_state(servos, 5)
    core, _ = make_core(emulator.port_path, role="leader", bus_retries=2)
    core.start()
    emulator.injector = DxlFaultInjector(DxlFaults(corrupt_byte_rate=0.01, drop_status_rate=0.02, seed=3))
    try:
        # a deadline with room for the retries (the loop's own is 90 % of its period)
        samples = [core.cycle(deadline=time.monotonic() + 0.1) for _ in range(150)]
    finally:
        core.shutdown()
    expected = (np.array(state["present_position"]) - CENTER_STEP) * 2 * np.pi / STEPS_PER_REV
    fresh = [(s, k) for s in samples for k in range(6) if not s.stale[k]]
    # A corrupted reply whose one-byte checksum still held is data to any driver (about 1 in 256 corruptions of
    # two bytes or more): the emulator records it, and a value it explains is not the driver's fault.
    unseen = [(u.servo_id, u.time) for u in emulator.undetected]
    wrong = [(s, k) for s, k in fresh if s.position[k] != pytest.approx(expected[k])
             and not any(sid == servos[k].servo_id and s.stamp - s.bus_cycle_duration <= at <= s.stamp
                         for sid, at in unseen)]
    assert wrong == []
    counters = core.bus.counters
    assert counters.crc_errors > 0 and counters.timeouts > 0 and samples[-1].crc_errors == counters.crc_errors
    assert len(fresh) > 0.9 * 6 * len(samples)                            # retries recover most faults


def test_the_core_runs_an_so101_at_100_hz(make_core) -> None:
    """The emulator in its own process with real-time priority where the OS allows it, as on the simulated rig:
    real servos answer within their Return Delay whatever the host does. In this process the bus thread would
    wait for the driver's thread to let go of the interpreter lock, and a loaded machine would be measured, not
    the driver."""
    positions = [1500 + 150 * k for k in range(len(SPEC.servo_ids))]
    with EmulatorProcess(SPEC.servo_ids, family="sts3215", wire_time=True, priority=BUS_PRIORITY,
                         registers={"present_position": positions}) as emulator:
        core, _ = make_core(emulator.port_path, role="leader", reply_timeout=0.004)
        core.start()
        samples = []
        loop = DeadlineLoop(0.01, lambda: samples.append(core.cycle()))
        try:
            loop.start()
            time.sleep(2.0)                         # the loop runs on its own thread; a fixed span
            loop.stop()
        finally:
            core.shutdown()
    assert loop.error is None
    # Lower bounds with margin for a loaded 2-core machine; exact rates belong to a benchmark.
    assert len(samples) >= 0.8 * 200, f"{len(samples)} cycles in 2 s"
    fresh = [s for s in samples if not any(s.stale)]
    assert len(fresh) >= 0.8 * len(samples), f"{len(fresh)} of {len(samples)} cycles fresh"
    expected = (np.array(positions) - CENTER_STEP) * 2 * np.pi / STEPS_PER_REV
    assert all(np.allclose(s.position, expected) for s in fresh)
    assert np.median([s.bus_cycle_duration for s in samples]) < 0.01
