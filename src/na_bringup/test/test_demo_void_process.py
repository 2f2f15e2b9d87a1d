"""The demo's live phases: a process of the graph that exits voids the attempt, which is run again (bounded), and a
phase whose every attempt is void ends the demo with an error naming the process; no score is printed for it."""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pytest

from na_bringup.demo import Demo, DemoError
from na_bringup.sim_graph import GraphError

pytestmark = pytest.mark.node


def held_300_g_phase() -> dict[str, np.ndarray]:
    """A phase's recording: 5 s of estimates of 0 N while the rig's truth is a held 300 g (2.943 N down)."""
    stamps = np.arange(0.0, 5.0, 1 / 60)
    return {"estimate_stamps": stamps, "estimate_force": np.zeros((stamps.size, 3)),
            "estimate_contact": np.zeros(stamps.size), "inference_latency": np.full(stamps.size, 2e-4),
            "receive_delay": np.full(stamps.size, 1e-3), "truth_stamps": stamps,
            "truth_force": np.tile([0.0, 0.0, -2.943], (stamps.size, 1))}


def test_an_exited_process_voids_each_attempt_and_the_phase_fails_after_three(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    args = argparse.Namespace(out=str(tmp_path / "demo"), robot="so101", seed=3, live_seconds=5.0)
    demo = Demo(args, live_phases=(("push_px", 0.0),))
    calls: list[Path] = []

    def driver_exits(executor, monitor, model, task, grams, log_dir):
        calls.append(log_dir)
        raise GraphError(f"follower_arm exited with code 1 (log {log_dir}/follower_arm.log):\n  StartupError: "
                         "servo ID(s) 1 did not answer a ping")

    monkeypatch.setattr(Demo, "_live_phase_graph", lambda self, *a: driver_exits(*a))
    with pytest.raises(DemoError, match=r"every one of 3 attempts of the live phase push_px was void"):
        demo.estimate_live(tmp_path / "model.onnx")
    assert [v["attempt"] for v in demo.voided] == [1, 2, 3]
    assert all(v["phase"] == "push_px" and "follower_arm exited with code 1" in v["reason"] for v in demo.voided)
    assert [p.name for p in calls] == ["live_push_px", "live_push_px_attempt2", "live_push_px_attempt3"]
    out = capsys.readouterr().out
    assert out.count("VOID push_px") == 3 and "force MAE" not in out


def test_an_attempt_after_a_void_one_is_scored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = argparse.Namespace(out=str(tmp_path / "demo"), robot="omx_x", seed=3, live_seconds=5.0)
    demo = Demo(args, live_phases=(("go_up_stay", 300.0),))
    data = held_300_g_phase()
    attempts: list[int] = []

    def first_exits(*_):
        attempts.append(1)
        if len(attempts) == 1:
            raise GraphError("estimator exited with code 1 (log x):\n  tail")
        return data, [], 20

    monkeypatch.setattr(Demo, "_live_phase_graph", lambda self, *a: first_exits(*a))
    results = demo.estimate_live(tmp_path / "model.onnx")
    assert [(v["phase"], v["attempt"]) for v in demo.voided] == [("go_up_stay_300g", 1)]
    assert list(results) == ["go_up_stay_300g"]
    assert results["go_up_stay_300g"][0].force_mae == pytest.approx(2.943 / 3, abs=1e-6)  # mean over x, y, z


def test_teleop_holding_the_follower_voids_a_live_phase() -> None:
    """The teleop node ('/teleop', teleop.launch.xml) reports ERROR while its overload guard holds the follower;
    a live phase watched as the demo watches it is void from then on, and a WARN (leader stale) is not."""
    from na_bringup.demo import live_phase_watch

    watch = live_phase_watch()
    watch.diagnostic(1.0, "/teleop", 1, "leader stale: follower holds its last goal")
    assert watch.faults_since(0.0) == []
    watch.diagnostic(2.0, "/teleop", 2, "overload stop (follower joint 'elbow_flex'); call ~/enable true to resume")
    faults = watch.faults_since(0.0)
    assert [(f.source, f.at) for f in faults] == [("/teleop", 2.0)] and "overload stop" in faults[0].reason
    assert watch.faults_since(2.5) == []


def test_a_graph_that_never_settles_voids_the_attempt_and_names_what_was_seen(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A leader whose servos never give a valid reply keeps the graph from a steady window: the attempt is void
    (not the whole demo ended), the reason says what the watch saw, and the next attempt is scored."""
    import na_bringup.demo as demo_module

    monkeypatch.setattr(demo_module, "READY_TIMEOUT_S", 0.3)
    args = argparse.Namespace(out=str(tmp_path / "demo"), robot="omx_x", seed=3, live_seconds=5.0)
    demo = Demo(args, live_phases=(("go_up_stay", 300.0),))
    data = held_300_g_phase()
    calls: list[str] = []

    def graph(self, executor, monitor, model, task, grams, log_dir):
        calls.append(log_dir.name)
        if len(calls) == 1:
            for k in range(100):                  # 1 s of states: the leader's five servos stale in every one
                monitor.watch.arm_state("leader", 50.0 + 0.01 * k, [True] * 5)
                monitor.watch.arm_state("follower", 50.0 + 0.01 * k, [False] * 5)
            self._wait_until_steady(executor, monitor, (), f"{task} with estimates")
        return data, [], 20

    monkeypatch.setattr(Demo, "_live_phase_graph", graph)
    results = demo.estimate_live(tmp_path / "model.onnx")
    assert calls == ["live_go_up_stay_300g", "live_go_up_stay_300g_attempt2"]
    assert [(v["phase"], v["attempt"]) for v in demo.voided] == [("go_up_stay_300g", 1)]
    reason = demo.voided[0]["reason"]
    assert "not steady within 0.3 s" in reason and "leader arm" in reason and "without a valid reply" in reason
    assert list(results) == ["go_up_stay_300g"]
