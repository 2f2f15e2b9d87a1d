"""End-to-end estimator latency through DDS: publisher process -> estimator process -> subscriber process.

* publisher (multiprocessing, spawn): replays follower ``na_msgs/ArmState`` + ``JointCommand`` at
  60 Hz (the paper's control rate, Sec. IV-H), stamped with the wall clock at publish time; the frames
  come from episode bags (``--bag``) resampled to the rate, or from a synthetic, plausible arm motion;
* estimator: the installed ``estimator`` executable in its own process, on an ONNX model
  (``--model``; default: the paper-sized network with random weights, normalised with statistics
  of the replayed frames, exported into a temporary directory);
* subscriber (multiprocessing, spawn): receipt time of each ``/estimator/estimate`` minus its
  header stamp (= the ArmState's publish time) -> p50/p99/max, plus the estimator's counters from
  ``/diagnostics`` (refused inputs) and the estimates lost against the states published.

All three run on a private ``ROS_DOMAIN_ID`` with localhost-only discovery and stop by themselves;
nothing is left running (cleanup in ``finally``).

    python src/na_estimator/benchmarks/bench_dds_latency.py                   # 60 s, synthetic motion
    python src/na_estimator/benchmarks/bench_dds_latency.py --bag /tmp/bags   # replay generated episodes
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from na_common import topics
from na_common.ament import find_executable
from na_common.dds_transport import use_udp_transport
from na_common.machine import machine_line

DEFAULT_ESTIMATOR = find_executable("na_estimator", "estimator")
ARM_TOPIC = topics.FOLLOWER_ARM_STATE
COMMAND_TOPIC = topics.FOLLOWER_COMMAND
ESTIMATE_TOPIC = topics.ESTIMATE
MODEL_BENCH = Path(__file__).resolve().parents[2] / "na_training" / "benchmarks" / "bench_model_latency.py"
CONTROL_RATE_HZ = 60.0           # the paper's control rate (Sec. IV-H: "above the 60 Hz control rate")
QUEUE_DEPTH = 10                 # the estimator's own QoS depth (reliable)
NOMINAL_VOLTAGE_V = 12.0         # XM430-W350 nominal supply (datasheet: 10.0-14.8 V, 12 V recommended)
FRAME_KEYS = ("position", "velocity", "current", "pwm", "input_voltage", "temperature", "goal_position",
              "gripper_slide", "goal_gripper_slide", "command", "command_slide")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- replayed frames
def synthetic_frames(count: int, rate: float, seed: int = 0) -> dict[str, np.ndarray]:
    """Plausible follower telemetry: slow sinusoidal teleoperation within the joint limits, the
    follower lagging its command by 30 ms, currents that grow with the load, 12 V, 34-38 degC."""
    from na_description import load_spec

    spec = load_spec()
    rng = np.random.default_rng(seed)
    n = spec.n_motors
    lower, upper = spec.servo_angle_limits()
    centre = (lower + upper) / 2.0
    amplitude = np.minimum(0.35 * (upper - lower) / 2.0, 0.6)
    period = np.array([7.0, 5.0, 6.0, 4.0, 8.0])[:n]
    phase = rng.uniform(0.0, 2.0 * np.pi, n)
    t = np.arange(count)[:, None] / rate

    def pose(time_s: np.ndarray) -> np.ndarray:
        return centre + amplitude * np.sin(2.0 * np.pi * time_s / period + phase)

    lag_s = 0.03
    command = pose(t)
    position = pose(t - lag_s) + rng.normal(0.0, 0.0015, (count, n))        # ~1 encoder tick of noise
    velocity = (amplitude * 2.0 * np.pi / period * np.cos(2.0 * np.pi * (t - lag_s) / period + phase)
                + rng.normal(0.0, 0.02, (count, n)))
    current = (0.08 + 0.35 * np.abs(np.sin(position + 0.5)) * np.sign(np.cos(position))
               + rng.normal(0.0, 0.01, (count, n)))
    gripper = next(k for k, j in enumerate(spec.joints) if j.type == "gripper")
    slide = spec.gripper.angle_to_slide(position[:, gripper])
    return {
        "position": position, "velocity": velocity, "current": current,
        "pwm": np.clip(current / 1.5, -1.0, 1.0),
        "input_voltage": NOMINAL_VOLTAGE_V + rng.normal(0.0, 0.03, (count, n)),
        "temperature": 34.0 + np.arange(n)[None, :] * 1.0 + 0.5 * t / max(t[-1, 0], 1.0),
        "goal_position": command, "gripper_slide": np.asarray(slide, float),
        "goal_gripper_slide": np.asarray(spec.gripper.angle_to_slide(command[:, gripper]), float),
        "command": command, "command_slide": np.asarray(spec.gripper.angle_to_slide(command[:, gripper]), float),
    }


def bag_frames(path: Path, rate: float) -> dict[str, np.ndarray]:
    """Follower states and the latest command before each, from one episode bag or a directory of
    them, resampled to ``rate`` (latest state at or before each tick) and concatenated."""
    from na_common import episode_bag as eb

    episodes = [path] if (path / "metadata.yaml").is_file() else eb.list_episodes(path)
    if not episodes:
        raise FileNotFoundError(f"{path}: no episode bags (episode_NNNNNN directories) found")
    parts: list[dict[str, np.ndarray]] = []
    for episode in episodes:
        states: list[tuple[int, Any]] = []
        commands: list[tuple[int, Any]] = []
        with eb.EpisodeReader(episode) as reader:
            for topic, _, msg in reader.messages([ARM_TOPIC, COMMAND_TOPIC]):
                stamp = eb.stamp_to_ns(msg.header.stamp)
                (states if topic == ARM_TOPIC else commands).append((stamp, msg))
        if not states or not commands:
            raise ValueError(f"{episode}: needs both {ARM_TOPIC} and {COMMAND_TOPIC} messages")
        state_stamps = np.array([s for s, _ in states])
        command_stamps = np.array([s for s, _ in commands])
        ticks = np.arange(state_stamps[0], state_stamps[-1], int(1e9 / rate))
        picked = np.searchsorted(state_stamps, ticks, side="right") - 1
        first_command = command_stamps[0]
        picked = picked[state_stamps[picked] >= first_command]
        if not len(picked):
            continue
        chosen = [states[k][1] for k in picked]
        chosen_commands = [commands[k][1] for k in
                           np.searchsorted(command_stamps, state_stamps[picked], side="right") - 1]
        parts.append({
            "position": np.array([m.position for m in chosen]), "velocity": np.array([m.velocity for m in chosen]),
            "current": np.array([m.current for m in chosen]), "pwm": np.array([m.pwm for m in chosen]),
            "input_voltage": np.array([m.input_voltage for m in chosen]),
            "temperature": np.array([m.temperature for m in chosen]),
            "goal_position": np.array([m.goal_position for m in chosen]),
            "gripper_slide": np.array([m.gripper_slide for m in chosen]),
            "goal_gripper_slide": np.array([m.goal_gripper_slide for m in chosen]),
            "command": np.array([m.position for m in chosen_commands]),
            "command_slide": np.array([m.gripper_slide for m in chosen_commands]),
        })
    if not parts:
        raise ValueError(f"{path}: no follower state follows a command")
    return {key: np.concatenate([p[key] for p in parts]) for key in FRAME_KEYS}


def feature_stats(frames: dict[str, np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Normalisation statistics of the replayed frames, through the shared feature code."""
    from na_description import load_spec
    from na_description.features import FeatureStats, compute_features

    spec = load_spec()
    features = compute_features(frames["command"], frames["position"][:, : spec.n_arm], frames["gripper_slide"],
                                frames["current"], frames["velocity"], frames["input_voltage"],
                                frames["temperature"], spec=spec)
    stats = FeatureStats.fit(np.asarray(features), spec)
    return stats.mean, stats.std


# ---------------------------------------------------------------- the publisher process
def publisher_main(frames: dict[str, np.ndarray], rate: float, ticks: int, published, result_queue,
                   reliability: str = "reliable") -> None:
    """Publish ``ticks`` JointCommand + ArmState pairs at ``rate``, each stamped at publish time."""
    import rclpy
    from rclpy.qos import QoSProfile

    from na_description import load_spec
    from na_estimator.estimator_node import RELIABILITY
    from na_msgs.msg import ArmState, JointCommand

    spec = load_spec()
    rclpy.init()
    node = rclpy.create_node("bench_state_publisher")
    try:
        qos = QoSProfile(depth=QUEUE_DEPTH, reliability=RELIABILITY[reliability])
        pub_command = node.create_publisher(JointCommand, COMMAND_TOPIC, qos)
        pub_state = node.create_publisher(ArmState, ARM_TOPIC, qos)
        deadline = time.monotonic() + 30.0
        while (pub_state.get_subscription_count() < 1 or pub_command.get_subscription_count() < 1):
            if time.monotonic() > deadline:
                result_queue.put({"error": "the estimator did not subscribe to the replayed topics within 30 s"})
                return
            time.sleep(0.02)
        state = ArmState(role=ArmState.ROLE_FOLLOWER, name=spec.joint_names,
                         hardware_error=[0] * spec.n_motors, stale=[False] * spec.n_motors)
        state.header.frame_id = spec.base_frame
        command = JointCommand(name=spec.joint_names)
        n_frames = len(frames["position"])
        period = 1.0 / rate
        lateness: list[float] = []
        stamps: list[int] = []
        skipped = 0
        start = time.monotonic() + 0.1
        for k in range(ticks):
            scheduled = start + k * period
            pause = scheduled - time.monotonic()
            if pause > 0:
                time.sleep(pause)
            late = time.monotonic() - scheduled
            if late >= period:
                # Like the drivers' loop (na_driver.loop_timing): a slot that passed entirely while this
                # process was stalled is skipped, not sent in a burst.
                skipped += 1
                continue
            lateness.append(late)
            i = k % n_frames
            command.header.stamp.sec, command.header.stamp.nanosec = divmod(time.time_ns(), 1_000_000_000)
            command.position = frames["command"][i].tolist()
            command.gripper_slide = float(frames["command_slide"][i])
            pub_command.publish(command)
            for key in ("position", "velocity", "current", "pwm", "input_voltage", "temperature", "goal_position"):
                setattr(state, key, frames[key][i].tolist())
            state.gripper_slide = float(frames["gripper_slide"][i])
            state.goal_gripper_slide = float(frames["goal_gripper_slide"][i])
            state.bus_cycle_duration = 0.003
            # Stamped last, right before its own publish: the figure starts when the state is published, not when
            # this process began the tick (publishing the command before it takes 0.1-0.35 ms here).
            stamp_ns = time.time_ns()
            state.header.stamp.sec, state.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
            pub_state.publish(state)
            stamps.append(stamp_ns)
            with published.get_lock():
                published.value += 1
        span = (stamps[-1] - stamps[0]) * 1e-9 if len(stamps) > 1 else 0.0
        late_ms = np.asarray(lateness or [np.nan]) * 1e3
        result_queue.put({"published": len(stamps), "stamps": np.asarray(stamps, dtype=np.int64), "skipped": skipped,
                          "rate_hz": (len(stamps) - 1) / span if span > 0 else float("nan"),
                          "late_p99_ms": float(np.percentile(late_ms, 99)), "late_max_ms": float(late_ms.max())})
    except KeyboardInterrupt:
        pass
    except Exception:
        if rclpy.ok():
            raise
        # else: the context was shut down by a signal (the parent stopping this process): exit quietly
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


# ---------------------------------------------------------------- the subscriber process
def subscriber_main(ready, stop, received, result_queue, executor_kind: str = "events") -> None:
    """Measure publish -> estimate latency until ``stop``; then wait for one more /diagnostics."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from na_common.ros_node import make_executor
    from na_msgs.msg import ActuatorEstimate

    rclpy.init()
    node = rclpy.create_node("bench_estimate_subscriber")
    latencies: list[int] = []
    inference: list[float] = []
    stamps: list[int] = []
    diagnostics: dict[str, Any] = {"values": None, "received_at": 0.0}

    def on_estimate(msg: ActuatorEstimate) -> None:
        now = time.time_ns()
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        latencies.append(now - stamp)
        inference.append(msg.inference_latency)
        stamps.append(stamp)
        with received.get_lock():
            received.value += 1

    def on_diagnostics(msg: DiagnosticArray) -> None:
        for status in msg.status:
            if status.name == "estimator":
                diagnostics["values"] = {kv.key: kv.value for kv in status.values}
                diagnostics["received_at"] = time.monotonic()

    try:
        node.create_subscription(ActuatorEstimate, ESTIMATE_TOPIC, on_estimate,
                                 QoSProfile(depth=100, reliability=ReliabilityPolicy.RELIABLE))
        node.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, on_diagnostics, 10)
        executor = make_executor(node.context, executor_kind)
        executor.add_node(node)
        while not stop.is_set():
            executor.spin_once(timeout_sec=0.05)
            if (not ready.is_set() and diagnostics["values"] is not None
                    and node.count_publishers(ESTIMATE_TOPIC) >= 1):
                ready.set()
        stopped_at = time.monotonic()
        while diagnostics["received_at"] < stopped_at and time.monotonic() < stopped_at + 3.0:
            executor.spin_once(timeout_sec=0.05)
        result_queue.put({"latency_ns": np.asarray(latencies, dtype=np.int64),
                          "inference_s": np.asarray(inference), "stamps": np.asarray(stamps, dtype=np.int64),
                          "unique": len(set(stamps)),
                          "diagnostics": diagnostics["values"] or {},
                          "final_diagnostics": diagnostics["received_at"] >= stopped_at})
    except KeyboardInterrupt:
        pass
    except Exception:
        if rclpy.ok():
            raise
        # else: the context was shut down by a signal (the parent stopping this process): exit quietly
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


# ---------------------------------------------------------------- orchestration
@dataclass
class Processes:
    estimator: subprocess.Popen | None = None
    subscriber: mp.Process | None = None
    publisher: mp.Process | None = None

    def stop_all(self) -> None:
        for process in (self.publisher, self.subscriber):
            if process is not None and process.is_alive():
                process.join(2.0)           # normally already finishing: it has handed over its result
            if process is not None and process.is_alive():
                process.terminate()
                process.join(5.0)
                if process.is_alive():
                    process.kill()
                    process.join(2.0)
        if self.estimator is not None and self.estimator.poll() is None:
            self.estimator.send_signal(signal.SIGINT)
            try:
                self.estimator.wait(10.0)
            except subprocess.TimeoutExpired:
                self.estimator.kill()
                self.estimator.wait(5.0)


def _get(result_queue, process: mp.Process, what: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return result_queue.get(timeout=0.2)
        except Exception:  # queue.Empty
            if not process.is_alive() and result_queue.empty():
                raise RuntimeError(f"the {what} process exited (code {process.exitcode}) without a result") from None
    raise RuntimeError(f"no result from the {what} process within {timeout:.0f} s")


def _log_tail(path: Path, lines: int = 15) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def prepare_model(args, frames: dict[str, np.ndarray], work: Path) -> tuple[Path, str]:
    """``--model``, or the paper-sized network with random weights exported by ``na-train export``'s code:
    normalised with statistics of the replayed frames, its variants checked on windows of those frames (the
    estimator picks among the accepted ones at start-up)."""
    if args.model:
        if not args.model.is_file():
            raise FileNotFoundError(f"model file not found: {args.model}")
        return args.model, str(args.model)
    from na_description.features import history_windows

    log("exporting the paper-sized network (random weights, normalised on the replayed frames) ...")
    start = time.perf_counter()
    mean, std = feature_stats(frames)
    windows = history_windows(replayed_features(frames), mean)[:: max(1, len(frames["position"]) // 512)]
    stats_npz = work / "export_stats.npz"
    np.savez(stats_npz, mean=mean, std=std, windows=windows)
    done = subprocess.run([sys.executable, str(MODEL_BENCH), "--export-only", str(work), "--stats-npz", str(stats_npz)],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"exporting the paper-sized network failed: {done.stderr.strip()[-2000:]}")
    exported = json.loads(done.stdout.strip().splitlines()[-1])
    accepted = ", ".join(exported["accepted"])
    log(f"  exported in {time.perf_counter() - start:.1f} s (package: {accepted})")
    return Path(exported["path"]), f"paper-sized NeuralActuator, random weights (ONNX package: {accepted})"


def replayed_features(frames: dict[str, np.ndarray]) -> np.ndarray:
    from na_description import load_spec
    from na_description.features import compute_features

    spec = load_spec()
    return np.asarray(compute_features(frames["command"], frames["position"][:, : spec.n_arm], frames["gripper_slide"],
                                       frames["current"], frames["velocity"], frames["input_voltage"],
                                       frames["temperature"], spec=spec))


@dataclass
class Config:
    executor: str
    reliability: str

    @property
    def label(self) -> str:
        return f"{self.executor} executor, {self.reliability} QoS"


def run_config(args, config: Config, frames: dict[str, np.ndarray], model_path: Path, work: Path,
               ticks: int) -> tuple[dict, dict]:
    """One replay against a fresh estimator process; returns the publisher's and the subscriber's results."""
    context = mp.get_context("spawn")
    processes = Processes()
    estimator_log = work / f"estimator_{config.executor}_{config.reliability}.log"
    try:
        results = context.Queue()
        ready, stop = context.Event(), context.Event()
        published, received = context.Value("q", 0), context.Value("q", 0)
        with estimator_log.open("w") as handle:
            processes.estimator = subprocess.Popen(
                [str(args.estimator), "--ros-args", "-p", f"model_path:={model_path}",
                 "-p", f"intra_op_threads:={args.threads}", "-p", f"inference_variant:={args.variant}",
                 "-p", f"executor:={config.executor}",
                 "-p", f"input_reliability:={config.reliability}"],
                stdout=handle, stderr=subprocess.STDOUT, start_new_session=True)
        processes.subscriber = context.Process(target=subscriber_main,
                                               args=(ready, stop, received, results, args.subscriber_executor),
                                               name="bench-subscriber")
        processes.subscriber.start()
        log(f"[{config.label}] waiting for the estimator (domain {args.domain_id}) ...")
        deadline = time.monotonic() + args.startup_timeout
        while not ready.wait(0.2):
            if processes.estimator.poll() is not None:
                raise RuntimeError(f"the estimator exited with code {processes.estimator.returncode}:\n"
                                   f"{_log_tail(estimator_log)}")
            if not processes.subscriber.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the estimator did not come up within {args.startup_timeout:.0f} s:\n"
                                   f"{_log_tail(estimator_log)}")
        processes.publisher = context.Process(target=publisher_main,
                                              args=(frames, args.rate, ticks, published, results, config.reliability),
                                              name="bench-publisher")
        processes.publisher.start()
        log(f"[{config.label}] replaying {ticks} states at {args.rate:g} Hz for {args.seconds:g} s ...")
        next_report = time.monotonic() + 10.0
        while processes.publisher.is_alive():
            processes.publisher.join(0.5)
            if time.monotonic() >= next_report:
                next_report += 10.0
                log(f"  published {published.value}/{ticks} states, received {received.value} estimates")
        publisher_result = _get(results, processes.publisher, "publisher", 5.0)
        if "error" in publisher_result:
            raise RuntimeError(publisher_result["error"])
        # Drain: wait until the estimates stop arriving (at most 5 s).
        drain_end, last, last_change = time.monotonic() + 5.0, -1, time.monotonic()
        while time.monotonic() < drain_end and received.value < publisher_result["published"]:
            if received.value != last:
                last, last_change = received.value, time.monotonic()
            elif time.monotonic() - last_change > 1.0:
                break
            time.sleep(0.05)
        stop.set()
        subscriber_result = _get(results, processes.subscriber, "subscriber", 10.0)
    finally:
        processes.stop_all()
    return publisher_result, subscriber_result


def run(args: argparse.Namespace) -> str:
    os.environ["ROS_DOMAIN_ID"] = str(args.domain_id)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    use_udp_transport()
    os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
    ticks = round(args.seconds * args.rate)
    if args.bag:
        log(f"reading follower states and commands from {args.bag} ...")
        frames = bag_frames(args.bag, args.rate)
        source = f"{args.bag} ({len(frames['position'])} frames at {args.rate:g} Hz, looped)"
    else:
        frames = synthetic_frames(ticks, args.rate, args.seed)
        source = "synthetic teleoperation-like motion"
    if args.estimator is None or not args.estimator.is_file():
        raise FileNotFoundError(f"estimator executable not found: {args.estimator} (run ./scripts/bootstrap.sh)")
    configs = [Config(e, r) for e in args.executor.split(",") for r in args.reliability.split(",")]
    reports = []
    with tempfile.TemporaryDirectory(prefix="na_bench_dds_") as tmp:
        work = Path(tmp)
        model_path, model_text = prepare_model(args, frames, work)
        for config in configs:
            publisher, subscriber = run_config(args, config, frames, model_path, work, ticks)
            reports.append(Result(config, publisher, subscriber))
            log(reports[-1].summary())
    return format_report(args, source, model_text, reports)


REFUSALS = ("stale_input", "future_stamp", "out_of_order", "invalid_input", "stale_servo", "bad_names", "no_command",
            "invalid_output")


@dataclass
class Result:
    config: Config
    publisher: dict
    subscriber: dict

    def latencies_ms(self) -> tuple[np.ndarray, np.ndarray]:
        """(every published state's latency, inf where no estimate came back; the delivered ones only)."""
        published = self.publisher["stamps"]
        received = dict(zip(self.subscriber["stamps"].tolist(), self.subscriber["latency_ns"].tolist(), strict=True))
        every = np.array([received.get(stamp, np.inf) for stamp in published.tolist()], dtype=float) * 1e-6
        return every, every[np.isfinite(every)]

    def counts(self) -> dict[str, Any]:
        diagnostics = self.subscriber["diagnostics"]
        published = self.publisher["published"]
        _, delivered = self.latencies_ms()
        refused = {k: int(diagnostics[k]) for k in REFUSALS if k in diagnostics}
        return {"published": published, "estimated": len(delivered), "refused": refused,
                "refused_total": sum(refused.values()),
                "lost": published - len(delivered) - sum(refused.values()),
                "estimator_counted": int(diagnostics.get("estimates", -1)),
                "never_arrived": int(diagnostics.get("missed_inputs", -1))}

    def summary(self) -> str:
        every, _ = self.latencies_ms()
        c = self.counts()
        p50, p99 = (np.percentile(every, q, method="inverted_cdf") for q in (50, 99))
        return (f"[{self.config.label}] p50 {p50:.2f} ms, p99 {p99:.2f} ms "
                f"over all {c['published']} published ({c['estimated']} estimated, {c['refused_total']} refused, "
                f"{c['lost']} lost)")


def format_report(args, source: str, model_text: str, results: list[Result]) -> str:
    def pct(values: np.ndarray, q: float) -> str:
        # an observed value (no interpolation), so an infinitely late state shows as inf, not nan
        return f"{np.percentile(values, q, method='inverted_cdf'):.2f}" if len(values) else "n/a"

    header = (f"{'configuration':<40}{'p50 ms':>8}{'p99 ms':>8}{'max ms':>8}   "
              f"{'published':>9}{'estimated':>10}{'refused':>8}{'lost':>6}   {'delivered p50/p99 ms':>21}"
              f"   {'inference p50/p99 ms':>21}")
    lines = [
        f"End-to-end through DDS ({os.environ.get('RMW_IMPLEMENTATION')}, domain {args.domain_id}, localhost): "
        f"ArmState publish -> /estimator/estimate received, {args.seconds:g} s at {args.rate:g} Hz per "
        f"configuration; publisher, estimator and subscriber are three processes on this machine",
        f"states: {source}",
        f"model: {model_text}; ONNX Runtime intra-op threads {args.threads}; subscriber executor "
        f"{args.subscriber_executor}",
        f"machine: {machine_line()}",
        "percentiles over EVERY published state: a state without an estimate (refused or lost) counts as "
        "infinitely late (inf), so refusals and losses show in the tail instead of being left out",
        "",
        header,
        "-" * len(header),
    ]
    for result in results:
        every, delivered = result.latencies_ms()
        c = result.counts()
        inference = result.subscriber["inference_s"] * 1e3
        lines.append(f"{result.config.label:<40}{pct(every, 50):>8}{pct(every, 99):>8}{pct(every, 100):>8}   "
                     f"{c['published']:>9}{c['estimated']:>10}{c['refused_total']:>8}{c['lost']:>6}   "
                     f"{pct(delivered, 50) + ' / ' + pct(delivered, 99):>21}   "
                     f"{pct(inference, 50) + ' / ' + pct(inference, 99):>21}")
    lines.append("")
    for result in results:
        c, publisher = result.counts(), result.publisher
        refused = ", ".join(f"{k} {v}" for k, v in c["refused"].items()) or "? (no estimator counters)"
        lines.append(f"{result.config.label}: refused by reason: {refused}; the estimator counted "
                     f"{c['estimator_counted']} estimates and {c['never_arrived']} states that never reached it "
                     f"(stamp gaps); publisher mean rate {publisher['rate_hz']:.2f} Hz, "
                     f"{publisher['skipped']} slots skipped while it was stalled, tick lateness p99 "
                     f"{publisher['late_p99_ms']:.2f} ms"
                     + ("" if result.subscriber["final_diagnostics"] else
                        " (no /diagnostics after the run: counters may be short)"))
    lines.append("lost = published - estimated - refused: overwritten in a depth-10 queue while a process was "
                 "stalled, or lost in transport")
    lines.append("")
    lines.append("inside the estimator (its /diagnostics, estimated-on states): stamp -> callback (transport and "
                 "executor in), callback -> estimate published (conversion, features, window, inference, message)")
    for result in results:
        d = result.subscriber["diagnostics"]
        lines.append(f"  {result.config.label:<40} stamp->callback p50/p99 {d.get('arrival_p50_ms', '?')}/"
                     f"{d.get('arrival_p99_ms', '?')} ms; callback->published {d.get('handling_p50_ms', '?')}/"
                     f"{d.get('handling_p99_ms', '?')} ms; inference {d.get('latency_p50_ms', '?')}/"
                     f"{d.get('latency_p99_ms', '?')} ms")
        lines.append(f"  {'':<40} {d.get('variant_choice', 'inference variant ?')}")
    return "\n".join(lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="End-to-end estimator latency through real DDS: a publisher process replays follower ArmState "
                    "+ JointCommand, the installed estimator runs in its own process, a subscriber process "
                    "measures publish -> /estimator/estimate latency (p50/p99/max) and losses.",
        epilog="Runs on a private ROS_DOMAIN_ID, localhost only, over UDP on the loopback as the suite's nodes do "
               "(na_common.dds_transport; FASTDDS_BUILTIN_TRANSPORTS=DEFAULT keeps Fast DDS's shared memory); every "
               "process it starts is stopped before it exits.")
    parser.add_argument("--seconds", type=float, default=60.0, help="replay duration in s (default 60)")
    parser.add_argument("--rate", type=float, default=CONTROL_RATE_HZ,
                        help=f"ArmState rate in Hz (default {CONTROL_RATE_HZ:g}, the paper's control rate)")
    parser.add_argument("--bag", type=Path, help="an episode bag, or a directory of them (na-sim generate / "
                                                 "na-record), to replay instead of synthetic motion")
    parser.add_argument("--model", type=Path, help="exported ONNX model package (default: paper-sized, random "
                                                   "weights)")
    parser.add_argument("--threads", type=int, default=1, help="the estimator's intra_op_threads (default 1)")
    parser.add_argument("--variant", default="auto",
                        help="the estimator's inference_variant (default auto: its own choice on this machine)")
    parser.add_argument("--executor", default="events",
                        help="the estimator's executor parameter; a comma list runs each (events,single_threaded)")
    parser.add_argument("--reliability", default="reliable",
                        help="QoS reliability of the replayed topics and the estimator's inputs; a comma list runs "
                             "each (reliable,best_effort)")
    parser.add_argument("--subscriber-executor", default="events", choices=("events", "single_threaded"),
                        help="executor of the measuring subscriber (default events)")
    parser.add_argument("--estimator", type=Path, default=DEFAULT_ESTIMATOR,
                        help=f"estimator executable (default: {DEFAULT_ESTIMATOR})")
    parser.add_argument("--domain-id", type=int, default=101 + os.getpid() % 100,
                        help="private ROS_DOMAIN_ID (default: 101 + pid %% 100; tests use 1-100)")
    parser.add_argument("--startup-timeout", type=float, default=60.0,
                        help="s to wait for the estimator to come up (default 60)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic motion")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # A plain `kill` must still run the cleanup in run()'s finally: turn SIGTERM into SystemExit.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    if args.seconds <= 0 or args.rate <= 0 or args.threads < 1:
        print("bench_dds_latency: error: --seconds and --rate must be positive, --threads at least 1",
              file=sys.stderr)
        return 2
    if not 0 <= args.domain_id <= 232:
        print(f"bench_dds_latency: error: --domain-id {args.domain_id} is outside 0-232", file=sys.stderr)
        return 2
    try:
        print(run(args))
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        print(f"bench_dds_latency: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("bench_dds_latency: interrupted; every process it started was stopped", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
