"""na-demo: the whole suite end to end on the simulated rig, on this CPU.

1. generate training episodes offline (na-sim generate);
2. record one episode live through the real ROS path: rig -> arm drivers -> teleop -> recorder;
3. convert every bag to NAD (na-train convert);
4. train a small NeuralActuator through MJX (na-train fit, na_training/config/train/demo.yaml; for another
   robot demo_<robot>.yaml when shipped, e.g. demo_so101.yaml);
5. export it to ONNX (na-train export);
6. score it beside the classical observers on the NAD's held-out test split (na-train compare);
7. run the estimator live on the rig during a scripted payload episode and a push episode;
8. plot estimated against true force and print a summary (force MAE beside always-zero and the
   training-mean force, contact accuracy, latency, and the classical observers of stage 6).

--robot so101 runs every stage on the simulated SO-101 (Feetech STS3215 servos on Protocol 0 emulators).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from na_bringup.live_eval import LiveScore, score_live
from na_bringup.live_integrity import Fault, IntegrityWatch, describe
from na_bringup.sim_graph import GraphError, launched, ros_env, sim_rig
from na_common import topics
from na_common.dds_transport import use_udp_transport
from na_common.diagnostics import TELEOP_STATUS

STAGES = 8
PROGRESS_PERIOD_S = 10.0
DEMO_CONFIG = "demo"                # na_training/na_training/config/train/demo.yaml (demo_<robot>.yaml if shipped)
GENERATED_TASKS = ["free", "payload", "push", "nopush"]
LIVE_PHASES = (("go_up_stay", 300.0), ("push_px", 0.0))
STALE_PROBES = 20                   # follower states re-sent 0.5 s late per phase; none may be estimated
MAX_LIVE_ATTEMPTS = 3               # a void live phase or recording is run again at most this often in all
READY_TIMEOUT_S = 120.0             # for the graph to stream a steady window (processes start slowly on 2 cores)
ESTIMATE_GAP_LIMIT_S = 1.0          # the estimator paused longer (the policy's estimator_timeout): the phase is void
DIAGNOSTICS_SETTLE_S = 1.2          # drivers publish /diagnostics once a second: wait for the last word
INJECTED_SILENCE_S = 1.0            # --inject-trip: how long the rig silences the follower's bus (na-sim rig, SIGUSR1)


class DemoError(RuntimeError):
    """A stage failed; the message says which and where its log is."""


class NotSteadyError(DemoError):
    """The graph did not stream a steady window in time: the attempt is void (``fault`` says what was seen)."""

    def __init__(self, message: str, fault: Fault) -> None:
        super().__init__(message)
        self.fault = fault


class Demo:
    def __init__(self, args: argparse.Namespace, *, tasks: list[str] | None = None,
                 payloads: str = "100,300,500", live_phases: tuple[tuple[str, float], ...] = LIVE_PHASES) -> None:
        self.args = args
        self.out = Path(args.out).resolve()
        self.logs = self.out / "logs"
        self.started = time.monotonic()
        self.stage = 0
        self.tasks = tasks or GENERATED_TASKS
        self.payloads = payloads
        self.live_phases = live_phases
        self.stale_injected = 0
        self.stale_estimated = 0
        self.voided: list[dict] = []        # void live phases and recordings: phase, attempt, reason, faults
        self.inject_trip = bool(getattr(args, "inject_trip", False))
        from na_description import load_spec

        self.spec = load_spec(args.robot)
        self.robot = {"robot": args.robot}          # the launch files' robot argument

    def training_config(self) -> str:
        """The robot's demo training config: demo_<robot>.yaml when shipped, else demo.yaml."""
        from na_common.config_files import shipped_names
        from na_training import TRAIN_CONFIG_DIR

        own = f"{DEMO_CONFIG}_{self.spec.name}"
        return own if own in shipped_names(TRAIN_CONFIG_DIR) else DEMO_CONFIG

    def say(self, text: str) -> None:
        print(f"[demo {self.stage}/{STAGES} {time.monotonic() - self.started:6.0f}s] {text}", flush=True)

    def begin(self, text: str) -> None:
        self.stage += 1
        self.say(text)

    def run(self, name: str, command: list[str], *, metrics: Path | None = None) -> None:
        """Run a CLI stage with its output in logs/NAME.log; with ``metrics`` (a metrics.jsonl being
        written), print the latest training step every few seconds."""
        log = self.logs / f"{name}.log"
        with log.open("w") as handle:
            process = subprocess.Popen(command, stdout=handle, stderr=subprocess.STDOUT)
            while True:
                try:
                    code = process.wait(timeout=PROGRESS_PERIOD_S)
                    break
                except subprocess.TimeoutExpired:
                    if metrics is not None:
                        self._report_metrics(metrics)
        if code != 0:
            tail = "\n    ".join(log.read_text(errors="replace").splitlines()[-20:])
            raise DemoError(f"'{' '.join(command)}' failed with exit code {code} (log {log}):\n    {tail}")

    def _report_metrics(self, metrics: Path) -> None:
        lines = metrics.read_text().splitlines() if metrics.is_file() else []
        if not lines:
            self.say("compiling the MJX rollout ...")
            return
        last = json.loads(lines[-1])
        self.say(f"step {last.get('step')}: loss {last.get('loss', float('nan')):.3f}, "
                 f"force MAE {last.get('force_mae', float('nan')):.3f} N, "
                 f"{last.get('frames_per_s', 0):.0f} frames/s (horizon {last.get('horizon')})")

    # -- stages --------------------------------------------------------------------------------
    def generate(self) -> Path:
        out = self.out / "bags" / "generated"
        self.begin(f"generating {self.args.episodes} offline episode(s) per task of {', '.join(self.tasks)}")
        command = ["na-sim", "generate", "--robot", self.args.robot, "--tasks", *self.tasks,
                   "--episodes", str(self.args.episodes),
                   "--payloads", self.payloads, "--seed", str(self.args.seed), "--out", str(out), "--no-progress"]
        if self.args.quick:
            command += ["--quick", "--max-seconds", "12"]
        self.run("generate", command)
        self.say(f"wrote {len(list(out.glob('episode_*')))} bags to {out}")
        return out

    def record_live(self) -> Path:
        """One live episode through the recorder; an attempt during which the rig was not sound is discarded and
        recorded again (at most ``MAX_LIVE_ATTEMPTS`` times)."""
        out = self.out / "bags" / "live"
        seconds = self.args.live_seconds
        self.begin(f"recording {seconds:.0f} s live: simulated rig -> arm drivers -> teleop -> recorder "
                   "(pick_place 200 g)")
        for attempt in range(1, MAX_LIVE_ATTEMPTS + 1):
            faults = self._record_live_attempt(out, attempt)
            if not faults:
                return out
            self._void("live_record", attempt, faults)
        raise DemoError(f"every one of {MAX_LIVE_ATTEMPTS} live recordings was void; logs in {self.logs}")

    def _record_live_attempt(self, out: Path, attempt: int) -> list[Fault]:
        """Record one episode; the faults that void it (then it is discarded), else []."""
        import rclpy
        from rclpy.context import Context

        from na_bringup.live_monitor import LiveMonitor
        from na_common.ros_node import make_executor
        from na_msgs.msg import EpisodeInfo
        from na_msgs.srv import DiscardEpisode, StartEpisode, StopEpisode

        seconds = self.args.live_seconds
        log_dir = self.logs / ("live_record" if attempt == 1 else f"live_record_attempt{attempt}")
        context = Context()
        rclpy.init(context=context)
        monitor = LiveMonitor(context)
        node = monitor.node
        start = node.create_client(StartEpisode, f"{topics.RECORDER_NODE}/start")
        stop = node.create_client(StopEpisode, f"{topics.RECORDER_NODE}/stop")
        discard = node.create_client(DiscardEpisode, f"{topics.RECORDER_NODE}/discard")
        executor = make_executor(context)
        executor.add_node(node)
        started = False
        try:
            with sim_rig(self.out / "sim", log_dir, task="pick_place", payload_grams=200.0,
                         seed=self.args.seed, robot=self.args.robot) as (rig_graph, info, ft_port), \
                    launched("collect.launch.xml", {"sim": "true", "sim_dir": str(self.out / "sim"),
                                                     "ft_port": str(ft_port), "output_dir": str(out), **self.robot},
                             log_dir, env=ros_env()) as graph:
                graphs = (rig_graph, graph)
                self._wait_until_steady(executor, monitor, graphs, "the arm drivers and the recorder services",
                                        extra=start.service_is_ready)
                info_msg = EpisodeInfo(task="pick_place", payload_grams=200.0, force_source="payload",
                                       condition="nominal", operator_name="na-demo", notes="live demo episode")
                result = self._call(executor, start, StartEpisode.Request(info=info_msg), graphs)
                if not result.success:
                    raise DemoError(f"the recorder refused to start: {result.message}")
                started = True
                window = monitor.now()
                self._run_window(executor, monitor, graphs, seconds, "the episode", info)
                faults = monitor.watch.faults_since(window)
                if faults:
                    result = self._call(executor, discard, DiscardEpisode.Request(), graphs)
                    self.say(f"discarded the episode ({result.message})")
                    return faults
                result = self._call(executor, stop, StopEpisode.Request(), graphs)
                if not result.success:
                    raise DemoError(f"the recorder could not stop the episode: {result.message}")
                for line in result.message.splitlines():
                    self.say(line)
                return []
        except NotSteadyError as exc:       # raised before the recorder started: nothing was recorded
            return [exc.fault]
        except GraphError as exc:
            if started:     # the recorder stopped with the graph: its episode cannot be told apart from a good one
                raise DemoError(f"a process of the graph exited while the live episode was being recorded, which "
                                f"leaves that episode among the bags in {out}: {exc}") from exc
            return [process_died(monitor.now(), exc)]
        finally:
            executor.shutdown()
            node.destroy_node()
            rclpy.shutdown(context=context)

    def _wait_until_steady(self, executor, monitor, graphs, what: str, extra=lambda: True) -> None:
        """Until both arms have streamed a steady window with no fault (and ``extra()``); else
        :class:`NotSteadyError`, naming the faults the watch saw meanwhile (a servo that never answered, say)."""
        try:
            self._spin_until(executor, lambda: monitor.watch.ready(monitor.now()) and extra(), READY_TIMEOUT_S,
                             f"a steady graph ({what})", graphs)
        except DemoError as exc:            # the timeout (a process that exits raises GraphError)
            seen = monitor.watch.faults
            reason = f"not steady within {READY_TIMEOUT_S:g} s" + (f": {describe(seen)}" if seen else "")
            raise NotSteadyError(str(exc), Fault(monitor.now(), "graph", reason)) from exc

    def _run_window(self, executor, monitor, graphs, seconds: float, what: str, rig_info: dict) -> None:
        """Spin for ``seconds`` (with ``--inject-trip``, silence the follower's bus halfway through the first
        attempt), then long enough for the drivers' once-a-second diagnostics to report what happened."""
        begin = time.monotonic()
        if self.inject_trip:
            self._spin_until(executor, lambda: time.monotonic() - begin > seconds / 2, seconds + 30, what, graphs)
            os.kill(int(rig_info["pid"]), signal.SIGUSR1)
            self.say(f"--inject-trip: silenced the follower's bus for {INJECTED_SILENCE_S:.0f} s")
            self.inject_trip = False
        self._spin_until(executor, lambda: time.monotonic() - begin > seconds, seconds + 30, what, graphs)
        monitor.active = False
        settle = time.monotonic()
        self._spin_until(executor, lambda: time.monotonic() - settle > DIAGNOSTICS_SETTLE_S, 10.0,
                         "the last diagnostics", graphs)

    def _void(self, phase: str, attempt: int, faults: list[Fault]) -> None:
        reason = describe(faults)
        self.voided.append({"phase": phase, "attempt": attempt, "reason": reason,
                            "faults": [str(f) for f in faults]})
        self.say(f"VOID {phase} (attempt {attempt}): {reason}; running it again")

    def _spin_until(self, executor, condition, timeout: float, what: str, graphs) -> None:
        """Spin ``executor`` until ``condition()``; fail early if a process of ``graphs`` died."""
        deadline = time.monotonic() + timeout
        while not condition():
            for graph in graphs:
                graph.check_alive()
            if time.monotonic() > deadline:
                raise DemoError(f"waited {timeout:.0f} s for {what}; logs in {self.logs}")
            executor.spin_once(timeout_sec=0.05)

    def _call(self, executor, client, request, graphs):
        future = client.call_async(request)
        self._spin_until(executor, future.done, 30.0, f"the service {client.srv_name}", graphs)
        return future.result()

    def convert(self, bags: list[Path]) -> Path:
        nad = self.out / "nad"
        period = self.spec.frame_period
        self.begin(f"converting all bags to NAD (frames of {period:.4g} s, the {self.spec.name} frame)")
        self.run("convert", ["na-train", "convert", *map(str, bags), "--out", str(nad), "--frame-period", repr(period),
                             "--robot", self.args.robot, "--seed", str(self.args.seed), "--overwrite", "--quiet"])
        info = json.loads((nad / "meta" / "info.json").read_text())
        self.say(f"NAD at {nad} ({info.get('dataset_id', '')})")
        return nad

    def train(self, nad: Path) -> Path:
        from na_training.config import load_config

        run_dir = self.out / "train"
        config = self.training_config()
        steps = self.args.train_steps or load_config(config).steps
        self.begin(f"training a small model through MJX on the CPU ({steps} steps, config {config})")
        self.run("train", ["na-train", "fit", "--config", config, "--nad", str(nad), "--out", str(run_dir),
                           "--steps", str(steps), "--seed", str(self.args.seed), "--no-resume", "--quiet"],
                 metrics=run_dir / "metrics.jsonl")
        return run_dir

    def export(self, run_dir: Path, nad: Path) -> Path:
        model = self.out / "model.onnx"
        self.begin("exporting to ONNX and checking it against JAX")
        self.run("export", ["na-train", "export", str(run_dir), "--out", str(model), "--nad", str(nad)])
        for line in (self.logs / "export.log").read_text().splitlines():
            if line.startswith("wrote"):
                self.say(line)
        return model

    def compare_classical(self, model: Path, nad: Path) -> dict:
        """The exported model beside the classical observers on the NAD's test split (na-train compare)."""
        out = self.out / "compare"
        self.begin("comparing with the classical observers on the NAD's held-out test split")
        self.run("compare", ["na-train", "compare", "--nad", str(nad), "--model", str(model), "--out", str(out),
                             "--no-mlp", "--seed", str(self.args.seed)])
        results = json.loads((out / "comparison.json").read_text())
        for line in comparison_lines(results):
            self.say(line)
        return results

    def training_mean_force(self, nad: Path) -> np.ndarray:
        """Mean force label of the training split: the constant predictor the live score shows."""
        from na_training.nad import load_nad

        forces = [episode.force[episode.force_valid.all(axis=1)] for episode in load_nad(nad, "train")]
        stacked = np.concatenate(forces) if forces else np.zeros((0, 3))
        return stacked.mean(axis=0) if len(stacked) else np.zeros(3)

    def estimate_live(self, model: Path, constant_force: np.ndarray | None = None
                      ) -> dict[str, tuple[LiveScore, dict[str, np.ndarray]]]:
        """Score the estimator per live phase; also checks that stale states give no estimate. A phase during
        which the rig was not sound is void: never scored, run again (at most ``MAX_LIVE_ATTEMPTS`` times)."""
        import rclpy
        from rclpy.context import Context

        from na_bringup.live_monitor import LiveMonitor
        from na_common.ros_node import make_executor

        phases = self.live_phases
        self.begin("running the estimator live on the rig: "
                   + ", ".join(f"{task} ({grams:g} g)" if grams else task for task, grams in phases))
        context = Context()
        rclpy.init(context=context)
        monitor = LiveMonitor(context)
        executor = make_executor(context)
        executor.add_node(monitor.node)
        results: dict[str, tuple[LiveScore, dict[str, np.ndarray]]] = {}
        try:
            for task, grams in phases:
                name = f"{task}_{grams:g}g" if grams else task
                for attempt in range(1, MAX_LIVE_ATTEMPTS + 1):
                    data, faults, sent = self._live_phase(executor, monitor, model, task, grams, name, attempt)
                    if faults:
                        self._void(name, attempt, faults)
                        continue
                    score = score_live(data["estimate_stamps"], data["estimate_force"], data["estimate_contact"],
                                       data["inference_latency"], data["receive_delay"], data["truth_stamps"],
                                       data["truth_force"], constant_force=constant_force)
                    results[name] = (score, data)
                    self.say(f"{name}: force MAE {score.force_mae:.3f} N (zero {score.zero_force_mae:.3f} N), "
                             f"{score.estimates} estimates; {sent} stale states injected")
                    break
                else:
                    raise DemoError(f"every one of {MAX_LIVE_ATTEMPTS} attempts of the live phase {name} was void "
                                    f"(last: {self.voided[-1]['reason']}); logs in {self.logs}")
            self.stale_estimated = monitor.stale_estimated()
            self.stale_injected = len(monitor.injected)
        finally:
            executor.shutdown()
            monitor.node.destroy_node()
            rclpy.shutdown(context=context)
        return results

    def _live_phase(self, executor, monitor, model: Path, task: str, grams: float, name: str,
                    attempt: int) -> tuple[dict[str, np.ndarray], list[Fault], int]:
        """One attempt of a live phase: (recorded estimates and truth, faults that void it, stale probes sent); a
        process of the graph that exits (a driver that could not start, say) or a graph that never streams a
        steady window voids the attempt."""
        from na_bringup.live_monitor import Recording

        log_dir = self.logs / (f"live_{name}" if attempt == 1 else f"live_{name}_attempt{attempt}")
        monitor.watch = live_phase_watch()
        monitor.recording = Recording()
        try:
            return self._live_phase_graph(executor, monitor, model, task, grams, log_dir)
        except GraphError as exc:
            monitor.active = False
            return monitor.recording.arrays(), [process_died(monitor.now(), exc)], 0
        except NotSteadyError as exc:
            monitor.active = False
            return monitor.recording.arrays(), [exc.fault], 0

    def _live_phase_graph(self, executor, monitor, model: Path, task: str, grams: float,
                          log_dir: Path) -> tuple[dict[str, np.ndarray], list[Fault], int]:
        with sim_rig(self.out / "sim", log_dir, task=task, payload_grams=grams,
                     seed=self.args.seed + 1, robot=self.args.robot) as (rig_graph, info, _port), \
                launched("teleop.launch.xml", {"sim": "true", "sim_dir": str(self.out / "sim"), **self.robot},
                         log_dir, env=ros_env()) as teleop, \
                launched("estimator.launch.xml", {"model": str(model), **self.robot}, log_dir,
                         env=ros_env()) as estimator:
            graphs = (rig_graph, teleop, estimator)
            before = len(monitor.all_estimate_stamps)
            self._wait_until_steady(executor, monitor, graphs, f"{task} with estimates",
                                    extra=lambda: len(monitor.all_estimate_stamps) - before > 60)
            window = monitor.now()
            monitor.active = True
            self._run_window(executor, monitor, graphs, self.args.live_seconds, task, info)
            faults = monitor.watch.faults_since(window)
            sent = monitor.inject_stale(STALE_PROBES)
            settle = time.monotonic()
            self._spin_until(executor, lambda s=settle: time.monotonic() - s > 1.0, 10.0, "stale probes", graphs)
        return monitor.recording.arrays(), faults, sent

    def plot(self, results: dict[str, tuple[LiveScore, dict[str, np.ndarray]]]) -> Path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        self.begin("plotting estimated against true force")
        folder = self.out / "plots"
        folder.mkdir(parents=True, exist_ok=True)
        for name, (score, data) in results.items():
            t0 = data["truth_stamps"].min()
            fig, axes = plt.subplots(3, 1, figsize=(10, 7), sharex=True)
            for k, (axis, axis_name) in enumerate(zip(axes, "xyz", strict=True)):
                axis.plot(data["truth_stamps"] - t0, data["truth_force"][:, k], ".", ms=1, label="rig ground truth")
                axis.plot(data["estimate_stamps"] - t0, data["estimate_force"][:, k], ".", ms=1, label="estimator")
                axis.set_ylabel(f"F{axis_name} (N)")
            axes[0].legend(loc="upper right", markerscale=8)
            axes[-1].set_xlabel("time (s)")
            fig.suptitle(f"Estimator live on the simulated rig, {name}: force MAE {score.force_mae:.2f} N "
                         f"(always zero: {score.zero_force_mae:.2f} N)")
            fig.tight_layout()
            fig.savefig(folder / f"live_{name}.png", dpi=100)
            plt.close(fig)
        return folder


def live_phase_watch() -> IntegrityWatch:
    """What voids a live estimation phase: a fault of the graph (trip, silent bus, rig behind), the estimator
    pausing, or teleop holding the follower (its overload guard or a protective stop: the arm then no longer
    plays the scripted task, so the phase measures something else)."""
    return IntegrityWatch(estimate_gap_limit_s=ESTIMATE_GAP_LIMIT_S, voiding_statuses=(TELEOP_STATUS,))


def process_died(at: float, error: GraphError) -> Fault:
    """The fault of a graph process that exited (first line of the error: which process, its code and its log)."""
    return Fault(at=at, source="graph", reason=str(error).splitlines()[0].rstrip(":"))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="na-demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="demo_output",
                        help="output directory (default ./demo_output; an earlier demo's output there is "
                             "replaced, any other folder is refused)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated episodes and the training")
    parser.add_argument("--episodes", type=int, default=8,
                        help="generated episodes per task (default 8: the live phases play motions the training never "
                             "saw, and with 4 the SO-101's live push was still 70-78 %% of always-zero's error; "
                             "src/na_training/TRAINING.md)")
    parser.add_argument("--train-steps", type=int, default=None,
                        help="training steps (default: the robot's demo training config's, 800 for demo.yaml and "
                             "1600 for demo_so101.yaml)")
    parser.add_argument("--live-seconds", type=float, default=20.0,
                        help="seconds of live recording and of each live estimation phase (default 20)")
    parser.add_argument("--quick", action="store_true", help="shorter generated episodes (for CI)")
    parser.add_argument("--robot", default="omx_x",
                        help="the simulated arm: omx_x (OpenManipulator-X, default) or so101 (SO-101)")
    parser.add_argument("--inject-trip", action="store_true",
                        help="fault drill: silence the follower's bus for 1 s halfway through the first live "
                             "window, which trips the follower; that attempt is reported void and run again")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        demo = Demo(args)
    except ValueError as exc:             # an unknown --robot
        print(f"[demo] {exc}", file=sys.stderr)
        return 2
    if demo.out.exists():
        # Replace only what an earlier demo wrote (never a folder the user keeps other data in).
        if not demo.out.is_dir() or (any(demo.out.iterdir()) and not (demo.out / "logs").is_dir()):
            print(f"[demo] {demo.out} exists and is not the output of an earlier demo; choose another --out",
                  file=sys.stderr)
            return 2
        shutil.rmtree(demo.out)
    demo.logs.mkdir(parents=True)
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    use_udp_transport()   # for this process and every node it starts
    try:
        generated = demo.generate()
        live = demo.record_live()
        nad = demo.convert([generated, live])
        run_dir = demo.train(nad)
        model = demo.export(run_dir, nad)
        comparison = demo.compare_classical(model, nad)
        results = demo.estimate_live(model, demo.training_mean_force(nad))
        plots = demo.plot(results)
    except (DemoError, GraphError, ValueError) as exc:
        print(f"[demo] FAILED at stage {demo.stage}/{STAGES}: {exc}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        print("[demo] interrupted", file=sys.stderr)
        return 130
    summary = write_summary(demo, results, model=model, nad=nad, plots=plots, comparison=comparison)
    print(f"\n=== NeuralActuator demo summary (simulated {demo.spec.name} rig) ===")
    for name, (score, _) in results.items():
        print(f"  {name}:")
        for line in score.lines():
            print(f"    {line}")
    print("  held-out test split of the NAD (na-train compare, same metrics for every method):")
    for line in comparison_lines(comparison):
        print(f"    {line}")
    print(f"  stale states injected {demo.stale_injected}, turned into estimates {demo.stale_estimated}")
    print(f"  void live attempts (run again): {len(demo.voided)}"
          + "".join(f"\n    {v['phase']} attempt {v['attempt']}: {v['reason']}" for v in demo.voided))
    print(f"  model {model}\n  bags  {demo.out / 'bags'}\n  NAD   {nad}\n  plots {plots}\n"
          f"  summary {demo.out / 'summary.json'}  ({summary['seconds']:.0f} s in all)")
    if demo.stale_estimated:
        print("[demo] FAILED: the estimator published estimates from stale input", file=sys.stderr)
        return 1
    return 0


def comparison_lines(results: dict) -> list[str]:
    """The model's force MAE and false-contact rate beside the classical observers' (na-train compare)."""
    from na_training.baselines.compare import LEARNED

    force = results.get("force_mae", {})
    false_contact = results.get("false_contact_rate", {})
    lines = []
    for name in sorted(force, key=lambda method: (method != LEARNED, force[method]["avg"])):
        rate = false_contact.get(name)
        contact = "" if rate is None else f", false contact {rate * 100:.1f} % of no-contact frames"
        lines.append(f"{name:<15} force MAE {force[name]['avg']:.3f} N{contact}")
    ratio = results.get("best_classical_to_learned_force_mae")
    if ratio is not None:
        lines.append(f"best classical / {LEARNED} force MAE = {ratio:.2f}")
    return lines


def write_summary(demo: Demo, results: dict[str, tuple[LiveScore, dict]], *, model: Path, nad: Path,
                  plots: Path, comparison: dict | None = None) -> dict:
    phases = {name: {"force_mae_n": s.force_mae, "zero_force_mae_n": s.zero_force_mae,
                     "training_mean_force_mae_n": s.constant_force_mae,
                     "contact_accuracy": s.contact_accuracy,
                     "constant_contact_accuracy": s.constant_contact_accuracy,
                     "estimates": s.estimates, "matched": s.matched,
                     "inference_latency_ms": {"p50": s.inference_p50_ms, "p99": s.inference_p99_ms},
                     "state_to_estimate_latency_ms": {"p50": s.end_to_end_p50_ms, "p99": s.end_to_end_p99_ms}}
              for name, (s, _) in results.items()}
    held_out = None if comparison is None else {
        "force_mae_n": {k: v["avg"] for k, v in comparison.get("force_mae", {}).items()},
        "false_contact_rate": comparison.get("false_contact_rate", {}),
        "best_classical_to_learned_force_mae": comparison.get("best_classical_to_learned_force_mae")}
    summary = {"robot": demo.spec.name, "phases": phases, "held_out_comparison": held_out,
               "stale_injected": demo.stale_injected, "stale_estimated": demo.stale_estimated,
               "voided": demo.voided,
               "model": str(model), "bags": str(demo.out / "bags"), "nad": str(nad), "plots": str(plots),
               "seconds": round(time.monotonic() - demo.started, 1)}
    (demo.out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    return summary


if __name__ == "__main__":
    sys.exit(main())
