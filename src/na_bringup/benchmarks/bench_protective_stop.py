"""The protective stop on the simulated rig: reaction time, peak contact force with and without it, false stops.

Runs the whole graph as a user would (``na-sim rig`` with a looping push task, the teleop launch file with the
protective stop switched on through a parameter file written for the run, the estimator launch file with
``--model``), and watches from a node of its own:

* every press of the tool against the fixture, from the rig's ground truth (``/sim/truth/contact``; contact
  runs closer than ``MERGE_GAP_S`` are one press): onset, the moment the true contact force first reached the
  stop's threshold, the press' peak true force (``/sim/truth/wrench``) and its sustained force (mean true |F|
  from 0.3 to 1.0 s after onset; 0 where contact had ended);
* the follower's commands (``/follower/command``): the stop holds the follower by sending no more commands, so
  the last command before a gap of ``STOP_GAP_S`` inside a press is the follower's last moving command.
  Reaction = that command's arrival - the press' onset (and - the true threshold crossing);
* the teleop's ``/diagnostics`` status: a protective stop is released through ``~/release_protective_stop``
  ``RELEASE_AFTER_S`` after it latched (the scripted leader has retreated by then, or the stop trips again).

``--no-stop`` runs the same presses with the stop off (peak force without it). ``--nominal TASK:GRAMS ...``
runs nominal teleoperation instead (no fixture) and counts protective stops (false stops). A run in which a
servo went silent, a driver tripped for another reason than the follower's own overload protection, or the rig
fell behind is void and says so (the demo's integrity watch); an overload trip of the follower is what pushing
into the fixture can do, and is reported as such. The figures are over the first ``--pushes`` presses whose true
force reached the stop's threshold.

    python src/na_bringup/benchmarks/bench_protective_stop.py --model demo_output/model.onnx --axes px py
    python src/na_bringup/benchmarks/bench_protective_stop.py --model demo_output/model.onnx --axes px py --no-stop
    python src/na_bringup/benchmarks/bench_protective_stop.py --model demo_output/model.onnx \
        --nominal pick_place:500 go_up_stay:500 lean_extend:0 --seconds 200
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from na_bringup.live_integrity import IntegrityWatch, describe
from na_bringup.paths import config_file
from na_bringup.sim_graph import GraphError, launched, ros_env, sim_rig
from na_common import topics
from na_common.dds_transport import use_udp_transport
from na_common.diagnostics import ERROR, PROTECTIVE_STOP_PART, split_status_name
from na_common.machine import machine_line

MERGE_GAP_S = 0.3           # contact runs closer than this are one press
STOP_GAP_S = 0.15           # no follower command for this long inside a press: the follower is held
SUSTAINED_FROM_S, SUSTAINED_TO_S = 0.3, 1.0   # the press' sustained force: mean true |F| over this span after onset
HOLD_HORIZON_S = 1.0        # a hold is looked for up to this long after a press ends
RELEASE_AFTER_S = 3.0       # a latched stop is released this long after the teleop reported it
READY_TIMEOUT_S = 120.0


@dataclass
class Observations:
    contact: list[tuple[float, bool]] = field(default_factory=list)
    force: list[tuple[float, float, float]] = field(default_factory=list)   # true |F| (N), and as the stop sees it
    commands: list[float] = field(default_factory=list)
    estimate: list[tuple[float, float]] = field(default_factory=list)   # estimated force as the stop sees it
    raw: list[tuple[float, float]] = field(default_factory=list)        # the same of force_raw (before the gate)
    stops: list[float] = field(default_factory=list)          # teleop status first seen in a protective stop
    overload: list[str] = field(default_factory=list)         # the follower's servos tripped on overload


def presses(obs: Observations, threshold: float = 1.0) -> list[dict]:
    """Presses from the truth, each with its onset, true threshold crossing, peak force and the follower's last
    command before a hold (None: the follower was not held)."""
    runs: list[list[float]] = []
    for t, touching in obs.contact:
        if touching:
            if runs and t - runs[-1][1] <= MERGE_GAP_S:
                runs[-1][1] = t
            else:
                runs.append([t, t])
    force_t = np.array([t for t, _, _ in obs.force]) if obs.force else np.zeros(0)
    force_v = np.array([f for _, f, _ in obs.force]) if obs.force else np.zeros(0)
    force_w = np.array([w for _, _, w in obs.force]) if obs.force else np.zeros(0)
    commands = np.array(obs.commands)
    out = []
    for onset, end in runs:
        inside = (force_t >= onset) & (force_t <= end)
        peak = float(force_v[inside].max()) if inside.any() else float("nan")
        above = force_t[inside & (force_w >= threshold)]
        crossing = float(above[0]) if above.size else None
        held = None
        near = commands[(commands >= onset - STOP_GAP_S) & (commands <= end + HOLD_HORIZON_S)]
        gaps = np.flatnonzero(np.diff(near) > STOP_GAP_S) if near.size > 1 else np.zeros(0, dtype=int)
        candidates = [float(near[g]) for g in gaps]
        if near.size and (end + HOLD_HORIZON_S) - near[-1] > STOP_GAP_S:
            candidates.append(float(near[-1]))        # no command after it within the horizon
        candidates = [c for c in candidates if c >= onset - STOP_GAP_S and c <= end + STOP_GAP_S]
        if candidates:
            held = candidates[0]
        estimate_crossing = _first_crossing(obs.estimate, onset - STOP_GAP_S, end, threshold)
        raw_crossing = _first_crossing(obs.raw, onset - STOP_GAP_S, end, threshold)
        late = (force_t >= onset + SUSTAINED_FROM_S) & (force_t <= onset + SUSTAINED_TO_S)
        sustained = float(force_v[late].mean()) if late.any() else float("nan")
        out.append({"onset": onset, "end": end, "peak_n": peak, "sustained_n": sustained,
                    "threshold_crossing": crossing,
                    "estimate_crossing": estimate_crossing,
                    "estimate_lag_s": None if estimate_crossing is None or crossing is None
                    else estimate_crossing - crossing,
                    "raw_lag_s": None if raw_crossing is None or crossing is None else raw_crossing - crossing,
                    "last_command": held,
                    "reaction_from_onset_s": None if held is None else held - onset,
                    "reaction_from_crossing_s": None if held is None or crossing is None else held - crossing})
    return out


def _first_crossing(series: list[tuple[float, float]], start: float, end: float, threshold: float) -> float | None:
    """Time of the first sample in [start, end] at or above ``threshold``."""
    return next((t for t, v in series if start <= t <= end and v >= threshold), None)


def _watched(args: argparse.Namespace, force: tuple[float, float, float]) -> float:
    """The force as the stop compares it, over its threshold's scale: magnitude / threshold, or the largest
    |axis| / axis threshold (unwatched axes left out); 1 = at the threshold."""
    if args.mode == "magnitude":
        return float(np.linalg.norm(force)) / args.threshold
    return max((abs(f) / t for f, t in zip(force, args.axis_thresholds, strict=True) if t > 0), default=0.0)


def teleop_config(robot: str, enabled: bool, args: argparse.Namespace, folder: Path) -> Path:
    """The robot's shipped teleop parameter file with the protective stop set as asked."""
    name = "teleop.yaml" if robot == "omx_x" else f"{robot}_teleop.yaml"
    data = yaml.safe_load(config_file(name).read_text())
    params = data["/**"]["ros__parameters"]
    params.update({"protective_stop_enabled": enabled, "protective_stop_mode": args.mode,
                   "protective_stop_threshold": args.threshold,
                   "protective_stop_axis_thresholds": [float(v) for v in args.axis_thresholds],
                   "protective_stop_hysteresis": args.hysteresis, "protective_stop_min_duration": args.min_duration})
    path = folder / name
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def watch_graph(args: argparse.Namespace, task: str, grams: float, seconds: float, enabled: bool,
                work: Path, seed: int) -> tuple[Observations, list[str]]:
    """One live run of ``task``; the observations and the faults that void it."""
    import rclpy
    from geometry_msgs.msg import WrenchStamped
    from rclpy.context import Context
    from std_msgs.msg import Bool
    from std_srvs.srv import Trigger

    from na_bringup.live_monitor import GraphWatch, status_level
    from na_common.ros_node import make_executor
    from na_msgs.msg import ActuatorEstimate, JointCommand

    robot = {"robot": args.robot}
    logs = work / "logs" / f"{task}_{grams:g}g_{'stop' if enabled else 'nostop'}"
    config = teleop_config(args.robot, enabled, args, work)
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bench_protective_stop", context=context)
    obs = Observations()
    clock = time.monotonic
    node.create_subscription(Bool, topics.TRUTH_CONTACT, lambda m: obs.contact.append((clock(), bool(m.data))), 100)
    def on_truth(m) -> None:
        force = (m.wrench.force.x, m.wrench.force.y, m.wrench.force.z)
        obs.force.append((clock(), float(np.linalg.norm(force)), _watched(args, force)))
    node.create_subscription(WrenchStamped, topics.TRUTH_WRENCH, on_truth, 100)
    node.create_subscription(JointCommand, topics.FOLLOWER_COMMAND, lambda m: obs.commands.append(clock()), 100)
    node.create_subscription(WrenchStamped, topics.ESTIMATED_FORCE, lambda m: obs.estimate.append(
        (clock(), _watched(args, (m.wrench.force.x, m.wrench.force.y, m.wrench.force.z)))), 100)
    node.create_subscription(ActuatorEstimate, topics.ESTIMATE, lambda m: obs.raw.append(
        (clock(), _watched(args, (m.force_raw.x, m.force_raw.y, m.force_raw.z)))), 100)

    def on_status(_stamp: float, status) -> None:
        stopped = split_status_name(status.name)[1] == PROTECTIVE_STOP_PART and status_level(status) == ERROR
        if stopped and (not obs.stops or clock() - obs.stops[-1] > RELEASE_AFTER_S):
            obs.stops.append(clock())
    release = node.create_client(Trigger, "/teleop/release_protective_stop")
    watch = GraphWatch(node, IntegrityWatch(), on_status=on_status)
    executor = make_executor(context)
    executor.add_node(node)
    options = f"--loop-task --task-seed {seed}"
    teleop_args = {"sim": "true", "sim_dir": str(work / "sim"), "teleop_config": str(config), **robot}
    try:
        with sim_rig(work / "sim", logs, task=task, payload_grams=grams, seed=seed, robot=args.robot,
                     options=options) as (rig, _info, _port), \
                launched("teleop.launch.xml", teleop_args, logs, env=ros_env()) as teleop, \
                launched("estimator.launch.xml", {"model": str(args.model), **robot}, logs, env=ros_env()) as est:
            graphs = (rig, teleop, est)
            deadline = clock() + READY_TIMEOUT_S
            while not watch.watch.ready(node.get_clock().now().nanoseconds * 1e-9):
                _spin(executor, graphs, deadline, "a steady graph")
            window = node.get_clock().now().nanoseconds * 1e-9
            for series in (obs.contact, obs.force, obs.commands, obs.estimate, obs.raw, obs.stops):
                series.clear()
            end = clock() + seconds
            released = 0
            while clock() < end:
                _spin(executor, graphs, end + 30, task)
                due = [s for s in obs.stops[released:] if clock() - s >= RELEASE_AFTER_S]
                if due and release.service_is_ready():
                    release.call_async(Trigger.Request())
                    released += len(due)
            found = watch.watch.faults_since(window)
            # The follower's own overload protection tripping is what pressing into the fixture can do (an
            # outcome of the push, kept); any other fault (a silent bus, the rig behind wall time) voids the run.
            obs.overload = [str(f) for f in found if _is_overload(f)]
            rest = [f for f in found if not _is_overload(f)]
            faults = [describe(rest)] if rest else []
    finally:
        executor.shutdown()
        node.destroy_node()
        rclpy.shutdown(context=context)
    return obs, faults


def _is_overload(fault) -> bool:
    return "follower" in fault.source and "overload" in fault.reason


def _spin(executor, graphs, deadline: float, what: str) -> None:
    for graph in graphs:
        graph.check_alive()
    if time.monotonic() > deadline:
        raise TimeoutError(f"waited too long for {what}")
    executor.spin_once(timeout_sec=0.02)


def summarize(all_presses: list[dict], enabled: bool, limit: int) -> dict:
    """Figures over the first ``limit`` pushes: presses whose true force reached the stop's threshold (touches
    below it, such as the follower settling back against the fixture after a release, are not pushes)."""
    pushes = [p for p in all_presses if p["threshold_crossing"] is not None][:limit]
    peaks = np.array([p["peak_n"] for p in pushes], dtype=float)
    sustained = np.array([p["sustained_n"] for p in pushes], dtype=float)
    held = [p for p in pushes if p["last_command"] is not None]
    onset = np.array([p["reaction_from_onset_s"] for p in held], dtype=float)
    crossing = np.array([p["reaction_from_crossing_s"] for p in held if p["reaction_from_crossing_s"] is not None])
    return {"stop": enabled, "presses": len(all_presses), "pushes": len(pushes), "held": len(held),
            "peak_n": {"mean": float(np.nanmean(peaks)) if peaks.size else None,
                       "median": float(np.nanmedian(peaks)) if peaks.size else None},
            "sustained_n": {"mean": float(np.nanmean(sustained)) if sustained.size else None,
                            "span_s": [SUSTAINED_FROM_S, SUSTAINED_TO_S]},
            "reaction_from_onset_s": _percentiles(onset), "reaction_from_crossing_s": _percentiles(crossing),
            "estimate_lag_s": _percentiles(np.array([p["estimate_lag_s"] for p in pushes
                                                     if p["estimate_lag_s"] is not None])),
            "raw_lag_s": _percentiles(np.array([p["raw_lag_s"] for p in pushes if p["raw_lag_s"] is not None])),
            "estimate_missed": sum(p["estimate_crossing"] is None for p in pushes)}


def _percentiles(values: np.ndarray) -> dict | None:
    if not values.size:
        return None
    return {"p50": float(np.percentile(values, 50)), "p95": float(np.percentile(values, 95)),
            "max": float(values.max()), "n": int(values.size)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, required=True, help="exported model.onnx of the robot")
    parser.add_argument("--robot", default="omx_x", help="omx_x (default) or so101")
    parser.add_argument("--axes", nargs="+", default=["px", "py"], help="push axes (push_<axis> tasks)")
    parser.add_argument("--pushes", type=int, default=20, help="presses to collect in all (default 20)")
    parser.add_argument("--seconds", type=float, default=90.0,
                        help="seconds per push axis (or per --nominal task) (default 90)")
    parser.add_argument("--no-stop", action="store_true", help="the same presses with the protective stop off")
    parser.add_argument("--nominal", nargs="+", default=None, metavar="TASK:GRAMS",
                        help="nominal teleoperation instead of pushes: count false stops")
    parser.add_argument("--mode", default="axis", choices=("axis", "magnitude"))
    parser.add_argument("--threshold", type=float, default=20.0, help="magnitude threshold (N)")
    parser.add_argument("--axis-thresholds", nargs=3, type=float, default=[3.0, 3.0, 8.0],
                        help="per-axis thresholds x y z (N); z above a 500 g payload's weight (default 3 3 8)")
    parser.add_argument("--hysteresis", type=float, default=1.0)
    parser.add_argument("--min-duration", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=100, help="task seed of the first run (default 100)")
    parser.add_argument("--out", type=Path, default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if not args.model.is_file():
        print(f"bench_protective_stop: error: model {args.model} does not exist", file=sys.stderr)
        return 2
    args.model = args.model.resolve()
    os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    use_udp_transport()
    print(machine_line(), flush=True)
    enabled = not args.no_stop
    runs = [(t.split(":")[0], float(t.split(":")[1]) if ":" in t else 0.0) for t in args.nominal] \
        if args.nominal else [(f"push_{a}", 0.0) for a in args.axes]
    from na_description import load_spec
    from na_sim.tasks import PAYLOAD_TASKS, TaskError, check_task_name
    spec = load_spec(None if args.robot == "omx_x" else args.robot)
    for task, grams in runs:                          # every run checked before the first starts
        try:
            check_task_name(task, spec)
            if grams > 0 and task not in PAYLOAD_TASKS:
                raise TaskError(f"task '{task}' takes no payload (payload tasks: {', '.join(PAYLOAD_TASKS)})")
        except TaskError as err:
            print(f"bench_protective_stop: error: {err}", file=sys.stderr)
            return 2
    results, all_presses, voids, stops, nominal_s = [], [], [], 0, 0.0
    with tempfile.TemporaryDirectory(prefix="bench_pstop_") as tmp:
        for k, (task, grams) in enumerate(runs):
            try:
                obs, faults = watch_graph(args, task, grams, args.seconds, enabled, Path(tmp), args.seed + k)
            except (GraphError, TimeoutError) as err:      # a process of the graph died: that run is void
                obs, faults = Observations(), [str(err).splitlines()[0]]
            found = presses(obs)
            line = {"task": task, "grams": grams, "presses": len(found), "stops": len(obs.stops),
                    "overload_trips": obs.overload[:1], "void": faults}
            print(json.dumps(line), flush=True)
            results.append({**line, "press_list": found})
            if args.out:                                 # kept after every run: a later failure loses nothing
                args.out.write_text(json.dumps({"summary": None, "runs": results}, indent=2) + "\n")
            if faults:
                voids.append(task)
                continue
            all_presses += found
            stops += len(obs.stops)
            nominal_s += args.seconds
    summary = {"machine": machine_line(), "robot": args.robot, "mode": args.mode,
               "thresholds": args.axis_thresholds if args.mode == "axis" else args.threshold, "void_runs": voids}
    if args.nominal:
        summary.update({"nominal_s": nominal_s, "false_stops": stops})
    else:
        summary.update(summarize(all_presses, enabled, args.pushes))
    print(json.dumps(summary, indent=2))
    if args.out:
        args.out.write_text(json.dumps({"summary": summary, "runs": results}, indent=2) + "\n")
    return 1 if voids else 0


if __name__ == "__main__":
    raise SystemExit(main())
