"""``na-train monitor``: the condition monitor over recorded episodes, per episode and motor.

Runs the exported model causally over every episode of a NAD (the estimator's history windows), feeds its
per-frame condition scores to the monitor (``na_common.condition_monitor``) and reports, per episode, the
supervised motor's final state (the robot spec's condition joint: the only motor whose condition head is
trained on labels), when it was decided degraded, and how many episodes were decided within ``--within``
seconds; over the nominal episodes (every task, pushes and payloads too), the false alarms per 10 min of
operation, counted as ``na-train compare`` counts them.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np

from na_common.condition_monitor import STATE_NAMES, run_monitor
from na_training.baselines.compare import OnnxPredictor, resolve_model
from na_training.condition_levels import ALARM_PERIOD_S, add_monitor_arguments, monitor_settings
from na_training.episode import NOMINAL, RESTRICTED
from na_training.nad import SPLITS, load_usable, read_info, robot_spec

DESCRIPTION = __doc__.split("\n\n")[1]


def monitor_episodes(nad: Path, model: Path, out: Path, splits: tuple[str, ...], within_s: float,
                     settings, robot: str | None = None) -> dict:
    """Per-episode monitor results of the NAD's ``splits``; writes monitor.json and monitor.md to ``out``."""
    spec = robot_spec(read_info(nad), robot)
    predictor = OnnxPredictor(resolve_model(model, out), spec)
    supervised = spec.joint_names.index(spec.condition_joint)
    rows = []
    skipped: list[str] = []
    for split in splits:
        for episode in load_usable(nad, split, skipped):
            condition = np.asarray(predictor(episode)["condition"], dtype=float)
            _, state, decided = run_monitor(episode.time, condition, settings)
            rows.append({"episode": episode.name, "split": split, "task": episode.task,
                         "condition_label": episode.condition_label,
                         "state": STATE_NAMES[state[-1][supervised]],
                         "degraded_at_s": None if not np.isfinite(decided[supervised]) else float(decided[supervised]),
                         "unsupervised_states": {j: STATE_NAMES[s] for k, (j, s) in
                                                 enumerate(zip(spec.joint_names, state[-1], strict=True))
                                                 if k != supervised},
                         "nominal": episode.is_nominal,
                         "duration_s": float(episode.time[-1] - episode.time[0])})
    report = {"nad": str(nad), "model": str(model), "settings": asdict(settings),
              "supervised_joint": spec.condition_joint, "episodes": rows, "skipped": skipped,
              "summary": summarise(rows, within_s)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "monitor.json").write_text(json.dumps(report, indent=2) + "\n")
    (out / "monitor.md").write_text(markdown(report))
    return report


def summarise(rows: list[dict], within_s: float) -> dict:
    """Episodes decided degraded (and within ``within_s``); false alarms: nominal episodes decided degraded, per
    10 min of nominal operation."""
    degraded = [r for r in rows if r["degraded_at_s"] is not None]
    nominal = [r for r in rows if r["nominal"]]
    nominal_s = sum(r["duration_s"] for r in nominal)
    alarms = sum(r["degraded_at_s"] is not None for r in nominal)
    return {"episodes": len(rows), "degraded": len(degraded),
            "degraded_within_s": sum(r["degraded_at_s"] <= within_s for r in degraded), "within_s": within_s,
            "nominal_episodes": len(nominal), "nominal_s": nominal_s, "false_alarms": alarms,
            "false_alarms_per_10_min": alarms * ALARM_PERIOD_S / nominal_s if nominal_s > 0 else None}


def markdown(report: dict) -> str:
    supervised = report["supervised_joint"]
    lines = ["# Condition monitor per episode", "",
             f"The decision is the supervised motor's ({supervised}); the model's condition head is trained on its "
             "labels only, so the other motors' scores are not decided on.", "",
             f"| episode | task | label | {supervised} | degraded at (s) |", "|---|---|---|---|---|"]
    for r in report["episodes"]:
        label = {NOMINAL: "nominal", RESTRICTED: "restricted"}.get(r["condition_label"], "–")
        at = "–" if r["degraded_at_s"] is None else f"{r['degraded_at_s']:.1f}"
        lines.append(f"| {r['episode']} | {r['task']} | {label} | {r['state']} | {at} |")
    s = report["summary"]
    lines += ["", f"{s['degraded']} of {s['episodes']} episodes degraded on {supervised}, {s['degraded_within_s']} "
              f"within {s['within_s']:g} s."]
    if s["nominal_episodes"]:
        rate = s["false_alarms_per_10_min"]
        lines.append(f"Episodes labelled nominal decided degraded: {s['false_alarms']} of {s['nominal_episodes']} "
                     f"({s['nominal_s'] / 60:.1f} min), "
                     + (f"{rate:.2f} per 10 min" if rate is not None else "n/a")
                     + " (false alarms where the recorded arm is healthy; the label is the condition joint's "
                       "restriction, so a worn arm's episodes are labelled nominal too).")
    lines.append("")
    return "\n".join(lines)


def add_monitor_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("monitor", help="run the condition monitor over a NAD's episodes",
                                   description=DESCRIPTION)
    parser.add_argument("--nad", required=True, type=Path, help="NAD v1 dataset directory")
    parser.add_argument("--model", required=True, type=Path, help="exported model.onnx or a training run directory")
    parser.add_argument("--robot", default=None, help="robot (default: the NAD's; given, it must match it)")
    parser.add_argument("--split", choices=("all", *SPLITS), default="all", help="episodes to run (default: all)")
    parser.add_argument("--within", type=float, default=60.0,
                        help="count episodes decided degraded within this many seconds (default: %(default)s)")
    parser.add_argument("--out", type=Path, default=Path("monitor_out"), help="output directory (default: %(default)s)")
    add_monitor_arguments(parser)
    parser.set_defaults(handler=run_monitor_cli)
    return parser


def run_monitor_cli(args: argparse.Namespace) -> int:
    for path, what in ((args.nad, "NAD directory"), (args.model, "model")):
        if not Path(path).exists():
            print(f"na-train monitor: error: {what} {path} does not exist", file=sys.stderr)
            return 2
    splits = SPLITS if args.split == "all" else (args.split,)
    try:
        report = monitor_episodes(args.nad, args.model, args.out, splits, args.within, monitor_settings(args),
                                  args.robot)
    except (ValueError, FileNotFoundError) as err:
        print(f"na-train monitor: error: {err}", file=sys.stderr)
        return 2
    print((args.out / "monitor.md").read_text())
    return 0 if report["episodes"] else 2
