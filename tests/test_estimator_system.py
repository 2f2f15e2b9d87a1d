"""The estimator on the simulated rig with a model trained in the test setup: generated payload and push
episodes -> NAD -> MJX training -> ONNX (na-train export's variant choice) -> the estimator process beside
the rig, arm drivers and teleop (separate processes, real DDS).

Scored against the rig's ground truth and informed trivial predictors (``na_bringup.live_eval``): in a payload
phase (a mass not among the training payloads) and a push phase, the force must beat both always-zero and the
training-mean force, and in the push phase the contact decision must beat the best constant answer. Then probes
go to the running estimator over DDS -- stale by age, from the future (an hour, 0.3 s), out of order, NaN/inf
-- and its /diagnostics counters must show each arrived and was refused, none came back as an estimate, and the
real states after them are still estimated on (a future stamp once stopped every later estimate)."""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

from na_bringup.demo import Demo, build_parser
from na_bringup.live_eval import LiveScore, score_live
from na_bringup.live_integrity import IntegrityWatch, describe
from na_bringup.sim_graph import launched, ros_env, sim_rig

LIVE_PAYLOAD_GRAMS = 400.0     # not among the training payloads (200, 300, 500 g)
PUSH_TASK = "push_px"          # trained on push_px/push_nx and nopush_px (another seed live)
TRAIN_TASKS = ["payload", "free", "push_px", "push_nx", "nopush_px"]
TRAIN_STEPS = 800           # the demo's default
LIVE_SECONDS = 12.0
DRILL_SECONDS = 6.0            # each attempt of the fault drill's phase
# Margins a working estimator meets with room. Measured with 800 steps (and 900): payload force 0.51 x the better
# constant (0.44), push force 0.82 x (0.76); contact accuracy above the best constant answer by 24 points in the
# payload phase, 14-19 in the push phase (18). The push force is the weakest: the small CI model finds the push
# direction and the contact but under-estimates the magnitude.
FORCE_MARGIN = {"payload": 0.8, "push": 0.95}   # force MAE below this x the better of always-zero and training mean
CONTACT_MARGIN = {"payload": 0.10, "push": 0.05}  # contact accuracy at least this above the best constant answer,
CONTACT_CEILING = 0.98                            # or at least this where the truth leaves the constant less room
PROBES_PER_KIND = 4
PROBE_ROUNDS = 8
# The estimator's input queue keeps the last 10 states. In a probe round they arrive at 100 Hz plus a probe every
# 30 ms, about 133 a second, so 10 fill in 75 ms: while the estimator answers each state within this of its stamp
# its queue never overflowed, and every probe reached it.
PROBE_LATENESS_LIMIT_S = 0.07
SWAPPED_DATASET_ID = "adapted-on-the-rig"
SWAP_GAP_LIMIT_S = 0.25        # a quarter of the 1 s after which a policy stops on a silent estimator
DIAGNOSTICS_TIMEOUT = 10.0


def _stamp_ns(msg) -> int:
    return msg.header.stamp.sec * 10**9 + msg.header.stamp.nanosec


@dataclass
class Diagnostics:
    """The estimator's latest /diagnostics values and when they arrived (monotonic)."""

    values: dict[str, str] = field(default_factory=dict)
    received: float = -math.inf

    def on_message(self, msg) -> None:
        for status in msg.status:
            if status.name == "estimator":
                self.values = {kv.key: kv.value for kv in status.values}
                self.received = time.monotonic()

    def count(self, key: str) -> int:
        return int(self.values[key])


def training_mean_force(nad: Path) -> np.ndarray:
    """The informed constant: mean force label over the valid frames of the train split."""
    from na_training.nad import load_nad

    forces, valid = [], []
    for episode in load_nad(nad, "train"):
        forces.append(episode.force)
        valid.append(np.all(episode.force_valid, axis=1))
    force, ok = np.concatenate(forces), np.concatenate(valid)
    return force[ok].mean(axis=0)


class LivePhases:
    """The estimator live on the rig, phase by phase, with the demo's building blocks and a probe node."""

    def __init__(self, demo: Demo, model: Path, live) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from rclpy.context import Context

        from na_bringup.live_monitor import LiveMonitor
        from na_common import topics
        from na_common.ros_node import make_executor
        from na_msgs.msg import ActuatorEstimate, ArmState

        self.demo, self.model, self.live = demo, model, live
        self.context = Context()
        rclpy.init(context=self.context)
        self.monitor = LiveMonitor(self.context)
        self.diagnostics = Diagnostics()
        self.monitor.node.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.on_message, 10)
        self.executor = make_executor(self.context)
        self.executor.add_node(self.monitor.node)
        self.graphs: tuple = ()
        self.probe_voids: list[str] = []
        # Every follower state this test hears (its own probes too) and every estimate with when it arrived (ns).
        self.heard_states: list[int] = []
        self.heard_estimates: list[tuple[int, int]] = []
        node = self.monitor.node
        node.create_subscription(ArmState, topics.FOLLOWER_ARM_STATE,
                                 lambda msg: self.heard_states.append(_stamp_ns(msg)), 100)
        node.create_subscription(ActuatorEstimate, topics.ESTIMATE, lambda msg: self.heard_estimates.append(
            (_stamp_ns(msg), node.get_clock().now().nanoseconds)), 100)
        self.probe_stamps: set[int] = set()
        self.last_probe_ns = 0

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.monitor.node.destroy_node()
        rclpy.shutdown(context=self.context)

    def spin_until(self, condition, timeout: float, what: str) -> None:
        self.demo._spin_until(self.executor, condition, timeout, what, self.graphs)

    def run(self, task: str, grams: float, seconds: float, probes) -> dict[str, np.ndarray]:
        from na_bringup.live_monitor import Recording

        name = f"{task}_{grams:g}g" if grams else task
        log_dir = self.demo.logs / f"live_{name}"
        with sim_rig(self.demo.out / "sim", log_dir, task=task, payload_grams=grams,
                     seed=self.demo.args.seed + 1) as (rig, _info, _port), \
                launched("teleop.launch.xml", {"sim": "true", "sim_dir": str(self.demo.out / "sim")}, log_dir,
                         env=ros_env()) as teleop, \
                launched("estimator.launch.xml", {"model": str(self.model)}, log_dir, env=ros_env()) as estimator:
            self.graphs = (rig, teleop, estimator)
            monitor = self.monitor
            monitor.watch = IntegrityWatch(estimate_gap_limit_s=1.0)
            before = len(monitor.all_estimate_stamps)
            self.spin_until(lambda: monitor.watch.ready(monitor.now()) and len(monitor.all_estimate_stamps) - before
                            > 60, 120.0, f"a steady graph with estimates during {task}")
            monitor.recording, monitor.active = Recording(), True
            window, begin = monitor.now(), time.monotonic()
            self.spin_until(lambda: time.monotonic() - begin > seconds, seconds + 30.0, task)
            monitor.active = False
            end = monitor.now()
            self.spin_until(lambda: monitor.now() > end + 1.2, 10.0, "the drivers' last diagnostics")
            faults = monitor.watch.faults_since(window, end + 1.2)
            if faults:
                self.live.void(f"the {task} phase ran on an unsound rig: {describe(faults)}", window, end)
            if probes is not None:
                probes(self)
        return monitor.recording.arrays()

    # -- probes -------------------------------------------------------------------------------------------
    def fresh_diagnostics(self) -> Diagnostics:
        """Counters published after this call (the estimator publishes them every diagnostics_period)."""
        after = time.monotonic()
        self.spin_until(lambda: self.diagnostics.received > after, DIAGNOSTICS_TIMEOUT, "a fresh /diagnostics")
        return Diagnostics(dict(self.diagnostics.values), self.diagnostics.received)

    def probe_campaign(self) -> None:
        """Probe rounds until one in which the estimator kept up: in a round where it left a real follower state
        without an estimate, or answered one later than PROBE_LATENESS_LIMIT_S, its 10-deep input queue may have
        overflowed and dropped probes (or it refused late probes as stale), so its counters do not count the
        probes; such a round is noted and run again, at most PROBE_ROUNDS in all."""
        for _ in range(PROBE_ROUNDS):
            self.heard_states.clear()
            self.heard_estimates.clear()
            start_ns = self.monitor.node.get_clock().now().nanoseconds
            self.probe_report = self.probe_round()
            end_ns = self.monitor.node.get_clock().now().nanoseconds
            behind = self.fell_behind(start_ns, self.last_probe_ns, end_ns)
            if behind is None:
                return
            self.probe_voids.append(behind)

    def fell_behind(self, start_ns: int, last_probe_ns: int, end_ns: int) -> str | None:
        """Why the estimator may have missed a probe in the round from ``start_ns`` to ``end_ns``, or None."""
        estimated = {stamp for stamp, _ in self.heard_estimates}
        real = [stamp for stamp in self.heard_states
                if start_ns <= stamp <= last_probe_ns and stamp not in self.probe_stamps]
        missed = [stamp for stamp in real if stamp not in estimated]
        if missed:
            return f"{len(missed)} of {len(real)} follower states in a probe round were not estimated"
        worst = max((arrived - stamp for stamp, arrived in self.heard_estimates if start_ns <= stamp <= end_ns),
                    default=0) * 1e-9
        if worst > PROBE_LATENESS_LIMIT_S:
            return f"an estimate arrived {worst * 1e3:.0f} ms after its state's stamp in a probe round"
        return None

    def probe_round(self) -> tuple[dict[str, int], dict[str, int], int]:
        import copy

        from builtin_interfaces.msg import Time

        from na_common.stamps import split_ns
        from na_msgs.msg import JointCommand

        monitor = self.monitor
        command_pub = monitor.node.create_publisher(JointCommand, "/follower/command", 10)
        self.spin_until(lambda: monitor.last_state is not None and command_pub.get_subscription_count() > 0, 10.0,
                        "a follower state and the estimator's command subscription")
        before = self.fresh_diagnostics()
        sent: dict[str, list[tuple[int, int]]] = {}

        def ours(state) -> bool:
            return any((state.header.stamp.sec, state.header.stamp.nanosec) in stamps for stamps in sent.values())

        def send(kind: str, offset_s: float | None = None, **fields) -> None:
            if offset_s is None:
                # The monitor hears this test's own probes too: duplicate a real state, not the probe sent last
                # (a copy of the 0.3 s-ahead probe is refused as future_stamp, not as out_of_order).
                self.spin_until(lambda: not ours(monitor.last_state), 5.0, "a real follower state")
            msg = copy.deepcopy(monitor.last_state)
            if offset_s is None:                            # a duplicate of the newest state: out of order
                stamp = msg.header.stamp
            else:
                sec, nanosec = split_ns(monitor.node.get_clock().now().nanoseconds + int(offset_s * 1e9))
                stamp = Time(sec=sec, nanosec=nanosec)
            msg.header.stamp = stamp
            for key, value in fields.items():
                setattr(msg, key, value)
            monitor.state_pub.publish(msg)
            if offset_s is not None:
                sent.setdefault(kind, []).append((stamp.sec, stamp.nanosec))
            pause = time.monotonic()
            self.spin_until(lambda: time.monotonic() - pause > 0.03, 5.0, "the probe")

        def send_command_from_the_future() -> None:
            """A hostile sender's pair: a command an hour ahead goes with the state an hour ahead (the goal is the
            follower's own position, so the follower's driver, which also listens, holds still)."""
            sec, nanosec = split_ns(monitor.node.get_clock().now().nanoseconds + 3600 * 10**9)
            command = JointCommand(name=list(monitor.last_state.name), position=list(monitor.last_state.position))
            command.header.stamp = Time(sec=sec, nanosec=nanosec)
            command_pub.publish(command)
            sent.setdefault("future_command", []).append((sec, nanosec))

        nan5, inf5 = [float("nan")] * 5, [float("inf")] * 5
        for _ in range(PROBES_PER_KIND):
            send_command_from_the_future()
            send("stale_input", -0.5)
            send("future_stamp", 3600.0)
            send("future_stamp", 0.3)
            send("out_of_order")
            # 5 ms ahead (within the future tolerance): after any real state already sent, so only the values fail
            send("invalid_input", 0.005, current=nan5)
            send("invalid_input", 0.005, input_voltage=inf5)
            send("invalid_input", 0.005, gripper_slide=float("-inf"))
        self.probe_stamps = {sec * 10**9 + nanosec for stamps in sent.values() for sec, nanosec in stamps}
        self.last_probe_ns = monitor.node.get_clock().now().nanoseconds
        real_before = len(monitor.all_estimate_stamps)
        self.spin_until(lambda: len(monitor.all_estimate_stamps) >= real_before + 50, 10.0,
                        "estimates of real states after the probes")
        after = self.fresh_diagnostics()
        delta = {key: after.count(key) - before.count(key)
                 for key in ("stale_input", "future_stamp", "out_of_order", "invalid_input")}
        return (delta, {kind: len(stamps) for kind, stamps in sent.items()},
                sum(1 for stamps in sent.values() for s in stamps if s in monitor.all_estimate_stamps))


    def model_swap(self) -> None:
        """``~/reload`` of a new model (another dataset id in its metadata) while the rig runs: the estimates go on
        across the swap and /diagnostics names the new model afterwards (the live flow of ``na-train adapt``)."""
        import onnx
        from rcl_interfaces.msg import Parameter as ParameterMsg
        from rcl_interfaces.msg import ParameterType, ParameterValue
        from rcl_interfaces.srv import SetParameters
        from std_srvs.srv import Trigger

        from na_bringup.live_monitor import Recording

        adapted = onnx.load(str(self.model))
        for prop in adapted.metadata_props:
            if prop.key == "dataset_id":
                prop.value = SWAPPED_DATASET_ID
        new_model = self.model.with_name("adapted.onnx")
        onnx.save(adapted, str(new_model))
        node, monitor = self.monitor.node, self.monitor
        set_parameters = node.create_client(SetParameters, "/estimator/set_parameters")
        reload = node.create_client(Trigger, "/estimator/reload")
        self.spin_until(lambda: set_parameters.service_is_ready() and reload.service_is_ready(), 10.0,
                        "the estimator's parameter and reload services")
        phase_recording = monitor.recording                 # the phase's own record is scored by the caller
        monitor.recording, monitor.active = Recording(), True
        begin = time.monotonic()
        self.spin_until(lambda: time.monotonic() - begin > 1.0, 5.0, "estimates before the swap")
        value = ParameterValue(type=ParameterType.PARAMETER_STRING, string_value=str(new_model))
        result = self.call(set_parameters, SetParameters.Request(parameters=[ParameterMsg(name="model_path",
                                                                                          value=value)]))
        assert result.results[0].successful, result.results[0].reason
        swap_at = node.get_clock().now().nanoseconds / 1e9
        answer = self.call(reload, Trigger.Request())
        assert answer.success, answer.message
        begin = time.monotonic()
        self.spin_until(lambda: time.monotonic() - begin > 1.5, 5.0, "estimates after the swap")
        monitor.active = False
        stamps = np.sort(np.asarray(monitor.recording.estimate_stamps))
        monitor.recording = phase_recording
        before = stamps[stamps < swap_at]
        across = stamps[(stamps >= before[-1]) & (stamps < swap_at + 0.5)] if before.size else stamps[:0]
        self.swap_report = (float(np.max(np.diff(across))) if across.size > 1 else math.inf,
                            float(np.max(np.diff(before))) if before.size > 1 else math.inf,
                            int(np.sum(stamps > swap_at)), self.fresh_diagnostics().values, str(new_model))

    def call(self, client, request):
        future = client.call_async(request)
        self.spin_until(future.done, 15.0, f"the service {client.srv_name}")
        return future.result()


@pytest.mark.system
@pytest.mark.slow
def test_trained_estimator_beats_trivial_predictors_live_and_refuses_every_probe(tmp_path, capsys, live) -> None:
    args: argparse.Namespace = build_parser().parse_args([
        "--out", str(tmp_path / "run"), "--episodes", "2", "--train-steps", str(TRAIN_STEPS),
        "--live-seconds", str(LIVE_SECONDS), "--quick"])
    demo = Demo(args, tasks=TRAIN_TASKS, payloads="200,300,500")
    demo.logs.mkdir(parents=True)
    nad = demo.convert([demo.generate()])
    model = demo.export(demo.train(nad), nad)
    constant = training_mean_force(nad)
    phases = LivePhases(demo, model, live)
    try:
        payload = live.run(lambda: phases.run("go_up_stay", LIVE_PAYLOAD_GRAMS, LIVE_SECONDS,
                                              LivePhases.probe_campaign), "the live payload phase")
        push = live.run(lambda: phases.run(PUSH_TASK, 0.0, LIVE_SECONDS, LivePhases.model_swap),
                        "the live push phase")
    finally:
        phases.close()
    # Fault drill: the demo's live phase with the follower's bus silenced for 1 s halfway through the first
    # attempt; that attempt must be void (the follower's silence named), never scored, and the phase run again.
    demo.inject_trip, demo.live_phases = True, (("go_up_stay", LIVE_PAYLOAD_GRAMS),)
    demo.args.live_seconds = DRILL_SECONDS
    drilled = demo.estimate_live(model, constant)
    with capsys.disabled():
        print(f"\nfault drill: void attempts {demo.voided}")
    assert [(v["phase"], v["attempt"]) for v in demo.voided] == [("go_up_stay_400g", 1)]
    assert "follower" in demo.voided[0]["reason"], demo.voided[0]["reason"]
    assert list(drilled) == ["go_up_stay_400g"] and drilled["go_up_stay_400g"][0].estimates > 100
    scores: dict[str, LiveScore] = {}
    for name, data in (("payload", payload), ("push", push)):
        np.savez(demo.out / f"live_{name}.npz", **data)          # for a look after a failure
        scores[name] = score_live(data["estimate_stamps"], data["estimate_force"], data["estimate_contact"],
                                  data["inference_latency"], data["receive_delay"], data["truth_stamps"],
                                  data["truth_force"], constant_force=constant)
    delta, sent, estimated_probes = phases.probe_report
    with capsys.disabled():
        print(f"\ntraining-mean force {np.round(constant, 3).tolist()} N; probes sent {sent}, counter deltas {delta}; "
              f"probe rounds run again: {phases.probe_voids}")
        for name, score in scores.items():
            print(f"{name}:\n  " + "\n  ".join(score.lines()))

    for name, score in scores.items():
        assert score.matched > 0.9 * score.estimates > 500, name
        baseline = min(score.zero_force_mae, score.constant_force_mae)
        assert score.force_mae < FORCE_MARGIN[name] * baseline, \
            f"{name}: force MAE {score.force_mae:.3f} N does not beat {FORCE_MARGIN[name]} x {baseline:.3f} N"
        # A phase whose truth is (almost) one class all along (a held payload) leaves no room for a margin.
        required_contact = min(score.constant_contact_accuracy + CONTACT_MARGIN[name], CONTACT_CEILING)
        assert score.contact_accuracy >= required_contact, \
            f"{name}: contact accuracy {score.contact_accuracy:.3f}, constant {score.constant_contact_accuracy:.3f}"
    # Every probe arrived and was refused on its own branch; none became an estimate; real states went on.
    assert len(phases.probe_voids) < PROBE_ROUNDS, f"the estimator paused in every probe round: {phases.probe_voids}"
    assert delta["future_stamp"] == sent["future_stamp"] + sent["future_command"] == 3 * PROBES_PER_KIND
    assert delta["invalid_input"] == sent["invalid_input"] == 3 * PROBES_PER_KIND     # (driver-stale: stale_servo)
    assert delta["stale_input"] >= sent["stale_input"] == PROBES_PER_KIND
    assert delta["out_of_order"] == PROBES_PER_KIND      # the duplicates only: no refused stamp poisoned the history
    assert estimated_probes == 0
    # The model swap: estimates on either side of it; from the last estimate before the swap to 0.5 s after
    # it, no gap between estimated state stamps longer than SWAP_GAP_LIMIT_S: the new model loads (and its
    # inference variants are timed, about a second) beside the running one, so a reload that blocked estimation
    # fails this, while the machine's load only stretches the gap (measured 12 ms across the swap and 12 ms in
    # the second before on a lightly loaded machine; 72 ms at load average ~10; 77 ms against 18 ms of jitter
    # with a CPU-bound process beside the suite). /diagnostics names the new model and its dataset.
    swap_gap, jitter_gap, after_swap, diagnostics, new_model = phases.swap_report
    with capsys.disabled():
        print(f"model swap: largest gap {swap_gap * 1e3:.0f} ms across it, {jitter_gap * 1e3:.0f} ms in the second "
              f"before; {after_swap} estimates after it")
    assert after_swap > 50
    assert swap_gap <= SWAP_GAP_LIMIT_S, f"estimates paused {swap_gap * 1e3:.0f} ms at the swap"
    assert diagnostics["model"] == new_model and diagnostics["dataset_id"] == SWAPPED_DATASET_ID
