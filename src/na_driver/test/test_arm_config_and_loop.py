"""Arm driver parameters (validation, defaults from the robot spec) and the deadline loop."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from na_bringup.paths import config_file
from na_description import load_spec
from na_description.spec import ROBOTS_DIR
from na_driver.arm_config import ConfigError, build_config, default_parameters
from na_driver.loop_timing import DeadlineLoop, RollingStats

SPEC = load_spec()


def test_defaults_come_from_the_robot_spec() -> None:
    config = build_config({"port": "/dev/ttyUSB0", "role": "follower"})
    assert list(config.servo_ids) == SPEC.servo_ids and list(config.joint_names) == SPEC.joint_names
    assert config.baud_rate == SPEC.baud_rate and config.loop_rate == 100.0
    assert config.position_p_gain == (SPEC.position_gains["p"],) * 5
    assert (config.temperature_warning, config.temperature_trip) == (55.0, 60.0)
    assert config.bus_watchdog_ms == 100.0
    assert build_config({"port": "p", "role": "follower", "bus_watchdog_ms": 0}).bus_watchdog_ms == 0.0   # off
    assert config.operating_mode == 4 and config.gripper_index == 4     # extended position, as the rig
    assert set(default_parameters()) >= {"port", "role", "robot_spec", "error_timeout"}


FORMER_ROBOT_FACT_PARAMETERS = ("servo_ids", "joint_names", "homing_offsets", "drive_directions",
                                "gripper_angle_points", "gripper_slide_points")


def test_robot_facts_are_not_driver_parameters() -> None:
    assert not set(default_parameters()) & set(FORMER_ROBOT_FACT_PARAMETERS)


@pytest.mark.parametrize("name", FORMER_ROBOT_FACT_PARAMETERS)
def test_an_old_parameter_file_setting_a_robot_fact_is_refused_naming_the_spec(name: str) -> None:
    with pytest.raises(ConfigError, match=rf"{name}.*robot spec"):
        build_config({"port": "p", "role": "leader", name: [1, 1, 1, 1, 1]})


def write_spec(tmp_path: Path, **joint_changes: dict) -> Path:
    """The shipped spec with some joint fields changed, e.g. ``joint1={"servo_id": 1}``."""
    raw = yaml.safe_load((ROBOTS_DIR / "open_manipulator_x.yaml").read_text())
    raw["mjcf"] = str(ROBOTS_DIR / raw["mjcf"])
    for joint in raw["joints"]:
        joint.update(joint_changes.get(joint["name"], {}))
    path = tmp_path / "my_arm.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_another_arm_comes_from_its_robot_spec(tmp_path: Path) -> None:
    path = write_spec(tmp_path, joint1={"servo_id": 1, "homing_offset": 0.1, "drive_direction": -1})
    config = build_config({"port": "p", "role": "leader", "robot_spec": str(path)})
    assert config.servo_ids == (1, 12, 13, 14, 15)
    assert config.robot_spec.servo_to_joint([0.5, 0, 0, 0, 0])[0] == pytest.approx(-0.4)   # -1 * 0.5 + 0.1


@pytest.mark.parametrize(("params", "named"), [
    ({"port": " "}, "port"),
    ({"role": "master"}, "role"),
    ({"baud_rate": 12345}, "baud_rate"),
    ({"robot_spec": "/no/such/spec.yaml"}, "robot_spec"),
    ({"operating_mode": "torque"}, "operating_mode"),
    ({"loop_rate": 0}, "loop_rate"),
    ({"position_p_gain": [800, 800, 800, 800, 99999]}, "position_p_gain"),
    ({"current_limit": 5.0}, "current_limit"),
    ({"return_delay_us": 3}, "return_delay_us"),
    ({"temperature_warning": 65.0}, "temperature"),
    ({"error_timeout": -1}, "error_timeout"),
    ({"baud_rte": 57600}, "baud_rte"),
    ({"bus_watchdog_ms": 10.0}, "bus_watchdog_ms"),          # below one 20 ms unit
    ({"bus_watchdog_ms": 2600.0}, "bus_watchdog_ms"),        # above 127 units
    ({"thread_priority": 100}, "thread_priority"),
])
def test_bad_parameters_are_named(params: dict, named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        build_config({"port": "/dev/ttyUSB0", "role": "follower", **params})


def test_operating_mode_by_name_or_number_and_scalars_broadcast() -> None:
    config = build_config({"port": "p", "role": "leader", "operating_mode": "extended_position",
                           "position_d_gain": 50, "current_limit": 1.0})
    assert config.operating_mode == 4 and config.position_d_gain == (50,) * 5 and config.current_limit == (1.0,) * 5
    assert build_config({"port": "p", "role": "leader", "operating_mode": 5}).operating_mode == 5


def test_a_robot_spec_with_an_out_of_range_servo_id_is_refused(tmp_path: Path) -> None:
    path = write_spec(tmp_path, gripper={"servo_id": 300})
    with pytest.raises(ConfigError, match=r"robot_spec.*300"):
        build_config({"port": "p", "role": "leader", "robot_spec": str(path)})


def test_deadline_loop_keeps_its_schedule_and_counts_dropped_cycles() -> None:
    calls: list[float] = []
    slow = threading.Event()

    def step() -> None:
        calls.append(time.monotonic())
        if len(calls) == 20:
            slow.set()
            time.sleep(0.035)      # this cycle overruns 3.5 periods of 10 ms

    loop = DeadlineLoop(0.01, step)
    loop.start()
    deadline = time.monotonic() + 5.0
    while len(calls) < 60 and time.monotonic() < deadline:
        time.sleep(0.005)
    loop.stop()
    assert loop.error is None and slow.is_set()
    assert loop.dropped_cycles >= 2                 # the 35 ms cycle swallowed at least two whole slots
    # No drift: every start stays on the grid t0 + k * period (a sleep(period) loop would slide off it).
    starts = np.array(calls[:60]) - calls[0]
    off_grid = np.abs(starts - np.round(starts / 0.01) * 0.01)
    assert np.median(off_grid) < 0.0015
    assert loop.periods.percentile(50) == pytest.approx(0.01, abs=0.002)


def test_deadline_loop_reports_a_failing_step() -> None:
    errors: list[BaseException] = []

    def step() -> None:
        raise RuntimeError("bus exploded")

    loop = DeadlineLoop(0.01, step, on_error=errors.append)
    loop.start()
    deadline = time.monotonic() + 2.0
    while not errors and time.monotonic() < deadline:
        time.sleep(0.005)
    assert errors and "bus exploded" in str(errors[0]) and not loop.running


def test_rolling_stats() -> None:
    stats = RollingStats(size=3)
    assert stats.percentile(50) != stats.percentile(50)        # NaN before any sample
    for value in (5.0, 1.0, 2.0, 3.0):
        stats.add(value)
    assert len(stats) == 3 and stats.percentile(50) == 2.0


@pytest.mark.parametrize("name", ["leader_arm.yaml", "follower_arm.yaml"])
def test_shipped_parameter_files_are_valid(name: str) -> None:
    path = config_file(name)
    params = yaml.safe_load(path.read_text())["/**"]["ros__parameters"]
    config = build_config(params)
    assert config.role == name.split("_")[0]
    if config.is_follower:
        assert config.position_d_gain == (1000, 800, 500, 300, 0)  # the authors' follower gains
                                                                   # (docs/REFERENCES.md, Authors' setup)



@pytest.mark.parametrize("name", ["so101_leader_arm.yaml", "so101_follower_arm.yaml"])
def test_shipped_so101_parameter_files_are_valid(name: str) -> None:
    params = yaml.safe_load(config_file(name).read_text())["/**"]["ros__parameters"]
    config = build_config(params)
    assert config.role == name.split("_")[1] and config.family.name == "STS3215" and config.n_servos == 6
    assert config.bus_watchdog_ms == 0 and config.operating_mode == 0          # position mode, no watchdog
    assert config.position_p_gain == (16,) * 6                                 # LeRobot's P Coefficient (the spec)

def test_run_histogram_percentiles_over_the_whole_run() -> None:
    from na_driver.loop_timing import RunHistogram

    histogram = RunHistogram(bin_width=1e-5, limit=0.1)
    assert histogram.percentile(99) != histogram.percentile(99)     # NaN before any value
    values = [0.000105] * 980 + [0.002105] * 15 + [0.5] * 5            # 5 outliers beyond the histogram's range
    for value in values:
        histogram.add(value)
    assert histogram.percentile(50) == pytest.approx(0.00011)       # upper edge of the 10 us bin
    assert histogram.percentile(99) == pytest.approx(0.00211)
    assert histogram.percentile(99.9) == 0.5 and histogram.max == 0.5
    assert histogram.share_at_most(0.001) == pytest.approx(0.98)


def test_deadline_loop_counts_on_time_cycles_over_the_whole_run() -> None:
    calls: list[float] = []

    def step() -> None:
        calls.append(time.monotonic())
        if len(calls) % 25 == 0:
            time.sleep(0.025)      # every 25th cycle overruns by 1.5 periods: it and the skipped slot are late

    loop = DeadlineLoop(0.01, step)
    loop.start()
    deadline = time.monotonic() + 10.0
    while len(calls) < 200 and time.monotonic() < deadline:
        time.sleep(0.01)
    loop.stop()
    run = loop.run
    assert run.slots == loop.cycles + loop.dropped_cycles and run.step_time.count == loop.cycles
    assert run.on_time <= run.slots - len(calls) // 25                # each overrun cost at least its own slot
    assert run.period_error.count == loop.cycles - 1
    assert run.period_error.max >= 0.015 and run.summary()["period_error_max_ms"] >= 15.0


def test_deadline_loop_asks_for_real_time_priority_and_warns_when_refused(monkeypatch) -> None:
    import os

    calls, warnings = [], []

    def refuse(pid: int, policy: int, param) -> None:
        calls.append((pid, policy, param.sched_priority))
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(os, "sched_setscheduler", refuse)
    ran = threading.Event()
    loop = DeadlineLoop(0.01, ran.set, priority=40, on_warning=warnings.append)
    loop.start()
    assert ran.wait(5.0)
    loop.stop()
    assert calls == [(0, os.SCHED_FIFO, 40)] and not loop.realtime       # this thread only (pid 0)
    assert len(warnings) == 1 and "no real-time priority 40" in warnings[0] and loop.error is None
    quiet = DeadlineLoop(0.01, lambda: None, on_warning=warnings.append)   # priority 0: nothing asked
    quiet.start()
    quiet.stop()
    assert len(calls) == 1 and len(warnings) == 1
    with pytest.raises(ValueError, match="priority"):
        DeadlineLoop(0.01, lambda: None, priority=100)
