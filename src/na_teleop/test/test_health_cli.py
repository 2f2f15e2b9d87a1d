"""na-health on small episode bags written here: report contents, plots, bad input (one line, exit 2, nothing
written). Oracles are the figures the bags were written with (XM430-W350 stall current 2.3 A by hand)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from na_common import episode_bag as eb
from na_teleop.health_cli import main

NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]
T0 = 1_700_000_000_000_000_000
N = 50


def write_bag(out_dir, *, robot="open_manipulator_x", arm_states=True, condition=True, names=NAMES,
              estimate_contact: float | None = None):
    """``estimate_contact``: also record /estimator/estimate (condition 0.2 on joint3, this contact probability)."""
    writer = eb.EpisodeWriter(out_dir, {"task": "push", "payload_grams": 0, "force_source": "none",
                                        "condition": "nominal", "source": "generated", "seed": 1,
                                        "operator": "tester", "robot": robot})
    arm_cls = eb.message_class(eb.ARM_STATE)
    cond_cls = eb.message_class("na_msgs/msg/MotorCondition")
    writer.add_topic("/follower/command", eb.JOINT_COMMAND)
    if arm_states:
        writer.add_topic("/follower/arm_state", eb.ARM_STATE)
    if condition:
        writer.add_topic("/estimator/condition", "na_msgs/msg/MotorCondition")
    if estimate_contact is not None:
        writer.add_topic("/estimator/estimate", "na_msgs/msg/ActuatorEstimate")
        estimate_cls = eb.message_class("na_msgs/msg/ActuatorEstimate")
        vector_cls = eb.message_class("geometry_msgs/msg/Vector3")
    cmd_cls = eb.message_class(eb.JOINT_COMMAND)
    for k in range(N):
        stamp = T0 + k * 10_000_000
        writer.write("/follower/command", stamp, cmd_cls(header=eb.make_header(stamp), name=NAMES,
                                                         position=np.zeros(5), gripper_slide=0.0))
        if arm_states:
            # joint2 draws 2.07 A (90 % of 2.3 A) in the second half; joint4 reports overload (bit 5) at k = 40.
            current = np.array([0.1, 2.07 if k >= N // 2 else 0.5, 0.3, 0.2, 0.1])
            errors = np.array([0, 0, 0, 32 if k == 40 else 0, 0], dtype=np.uint8)
            writer.write("/follower/arm_state", stamp, arm_cls(
                header=eb.make_header(stamp, "world"), role="follower", name=names, position=np.zeros(5),
                gripper_slide=0.0, goal_gripper_slide=0.0, velocity=np.zeros(5), goal_position=np.zeros(5),
                current=current, pwm=np.zeros(5), load=np.zeros(0), input_voltage=np.full(5, 12.0),
                temperature=np.full(5, 30.0 + k * 0.2), hardware_error=errors, stale=np.zeros(5, dtype=bool),
                timeout_errors=0, crc_errors=0, partial_errors=0, dropped_cycles=0, bus_cycle_duration=0.002))
        if condition and k % 2 == 0:
            writer.write("/estimator/condition", stamp + 1, cond_cls(header=eb.make_header(stamp + 1), name=NAMES,
                                                                    score=np.array([1.0, 1.0, 0.3, 1.0, 1.0])))
        if estimate_contact is not None:
            writer.write("/estimator/estimate", stamp + 2, estimate_cls(
                header=eb.make_header(stamp + 2), name=NAMES, torque_surrogate=np.zeros(5),
                force_raw=vector_cls(x=0.0, y=0.0, z=0.0), force=vector_cls(x=0.0, y=0.0, z=0.0),
                contact_probability=estimate_contact, in_contact=estimate_contact > 0.5,
                condition=np.array([1.0, 1.0, 0.2, 1.0, 1.0]), inference_latency=0.0, window_fill=9))
    writer.close()
    return eb.list_episodes(out_dir)[-1]


def test_report_of_an_episode_with_margins_error_bits_and_condition(tmp_path, capsys) -> None:
    bag = write_bag(tmp_path / "bags")
    out = tmp_path / "report"
    assert main([str(tmp_path / "bags"), "--out", str(out), "--robot", "open_manipulator_x"]) == 0
    assert "[1/1]" in capsys.readouterr().err
    summary = json.loads((out / f"{bag.name}.json").read_text())
    motors = {m["joint"]: m for m in summary["motors"]}
    assert summary["level"] == "ERROR" and summary["condition_recorded"]
    assert motors["joint4"]["level"] == "ERROR" and motors["joint4"]["hardware_errors"] == ["overload"]
    assert motors["joint4"]["hardware_error_states"] == 1
    assert motors["joint2"]["level"] == "WARN" and motors["joint2"]["near_stall_share"] == pytest.approx(0.5)
    assert motors["joint2"]["effort_margin_min"] == pytest.approx(1 - 2.07 / 2.3)
    assert motors["joint3"]["level"] == "WARN" and motors["joint3"]["condition_mean"] == pytest.approx(0.3)
    assert motors["joint1"]["level"] == "OK"
    assert motors["joint1"]["temperature_max_c"] == pytest.approx(30.0 + (N - 1) * 0.2)
    assert (out / f"{bag.name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| joint4 | ERROR |" in (out / "summary.md").read_text()


@pytest.mark.parametrize("case, message", [
    ("not_a_bag", "not an episode bag"),
    ("no_arm_states", "no arm states"),
    ("other_robot", "not 'so101'"),
])
def test_bad_input_is_one_line_and_exit_2_with_nothing_written(tmp_path, capsys, case, message) -> None:
    if case == "not_a_bag":
        (tmp_path / "bags").mkdir()
        (tmp_path / "bags" / "notes.txt").write_text("hello")
        path, extra = tmp_path / "bags", []
    elif case == "no_arm_states":
        path, extra = write_bag(tmp_path / "bags", arm_states=False), []
    else:
        path, extra = write_bag(tmp_path / "bags"), ["--robot", "so101"]
    out = tmp_path / "report"
    assert main([str(path), "--out", str(out), *extra]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("na-health: ") and message in err[0]
    assert not out.exists()


def test_the_condition_monitor_over_recorded_scores_decides_degraded() -> None:
    from na_description import load_spec
    from na_teleop.health_report import EpisodeSeries, summarise

    spec = load_spec("open_manipulator_x")
    t = np.arange(700) * 0.01                   # 7 s of 100 Hz states
    n = spec.n_motors
    scores = np.ones((700, n))
    scores[100:, 2] = 0.0                        # joint3 looks restricted from 1 s on
    series = EpisodeSeries("ep", Path("ep"), spec, t, np.full((700, n), 30.0), np.zeros((700, n)),
                           np.zeros((700, n), dtype=int), condition_time=t, condition=scores)
    motors = {m["joint"]: m for m in summarise(series)["motors"]}
    assert motors["joint3"]["monitor_state"] == "degraded" and motors["joint3"]["level"] == "WARN"
    # the shipped monitor: evidence grows by (1 - 0) - 0.4 = 0.6 s per s, degraded at 1 s of it: 1 s + 1 / 0.6 s
    assert motors["joint3"]["monitor_degraded_at_s"] == pytest.approx(1.0 + 1.0 / 0.6, abs=0.02)
    assert any("monitor: degraded" in r for r in motors["joint3"]["reasons"])
    assert "monitor_state" not in motors["joint1"] and motors["joint1"]["level"] == "OK"


def test_scores_recorded_while_the_model_saw_contact_add_no_evidence() -> None:
    """The same restricted-looking scores as above, but every estimate in contact: the monitor stays nominal."""
    from na_description import load_spec
    from na_teleop.health_report import EpisodeSeries, summarise

    spec = load_spec("open_manipulator_x")
    t = np.arange(700) * 0.01
    n = spec.n_motors
    scores = np.ones((700, n))
    scores[100:, 2] = 0.0
    contact = np.where(np.arange(700) >= 100, 0.9, 0.0)
    series = EpisodeSeries("ep", Path("ep"), spec, t, np.full((700, n), 30.0), np.zeros((700, n)),
                           np.zeros((700, n), dtype=int), condition_time=t, condition=scores,
                           condition_contact=contact)
    motors = {m["joint"]: m for m in summarise(series)["motors"]}
    assert motors["joint3"]["monitor_state"] == "nominal"


def test_the_report_reads_scores_and_contact_from_the_estimate_when_the_bag_has_it(tmp_path) -> None:
    from na_teleop.health_report import read_episode

    series = read_episode(write_bag(tmp_path / "bags", estimate_contact=0.8))
    assert series.condition_contact is not None and np.allclose(series.condition_contact, 0.8)
    assert len(series.condition_contact) == N and np.allclose(series.condition[:, 2], 0.2)
    only_scores = read_episode(write_bag(tmp_path / "other"))
    assert only_scores.condition_contact is None and np.allclose(only_scores.condition[:, 2], 0.3)
