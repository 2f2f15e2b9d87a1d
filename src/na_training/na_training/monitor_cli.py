"""``na-train monitor``: the condition monitor over recorded episodes, per episode and motor.

Runs the exported model causally over every episode of a NAD (the estimator's history windows), feeds its
per-frame condition scores to the monitor (``na_common.condition_monitor``) and reports, per episode, the
supervised motor's final state (the robot spec's condition joint: the only motor whose condition head is
trained on labels), when it was decided degraded, and how many episodes were decided within ``--within``
seconds; over the nominal episodes (every task, pushes and payloads too), the false alarms per 10 min of
operation, counted as ``na-train compare`` counts them. With ``--reference`` it also runs the wear monitor
(``na_training.wear``) on every motor: the torque each joint needs to move, against a healthy arm's.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import NamedTuple

import numpy as np

from na_common.condition_monitor import STATE_NAMES, run_evidence, run_monitor
from na_description.wear import WearReference
from na_training.baselines.compare import OnnxPredictor, resolve_model
from na_training.condition_levels import ALARM_PERIOD_S, add_monitor_arguments, monitor_settings
from na_training.episode import NOMINAL, RESTRICTED
from na_training.nad import SPLITS, load_usable, read_info, robot_spec
from na_training.wear import WearEvidence

DESCRIPTION = __doc__.split("\n\n")[1]


def wear_reference(reference: Path, predictor: OnnxPredictor, spec, out: Path) -> WearEvidence:
    """The wear monitor from a saved reference (a JSON file) or fitted on a healthy arm's NAD (its train split;
    saved to ``out``/wear_reference.json for the next run)."""
    if reference.is_file():
        return WearEvidence(spec, WearReference.load(reference))
    reference_spec = robot_spec(read_info(reference), None)
    if reference_spec.name != spec.name:
        raise ValueError(f"the reference NAD {reference} is for robot '{reference_spec.name}', the episodes are "
                         f"'{spec.name}'")
    wear = WearEvidence(spec)
    train = load_usable(reference, "train", [])
    print(f"na-train monitor: fitting the wear reference on {len(train)} episodes of {reference}", file=sys.stderr,
          flush=True)
    fitted = wear.fit([(e, predictor(e)["contact_prob"]) for e in train])
    out.mkdir(parents=True, exist_ok=True)
    fitted.save(out / "wear_reference.json")
    return wear


def wear_decisions(reference: WearReference, state: np.ndarray, decided: np.ndarray) -> dict:
    """Final wear state per motor and the first decision on any motor (s from the first frame)."""
    names = reference.joint_names
    final = state[-1] if len(state) else np.zeros(len(names), dtype=int)
    at = decided[np.isfinite(decided)]
    return {"states": {j: STATE_NAMES[s] if m else "not monitored"
                       for j, s, m in zip(names, final, reference.monitored, strict=True)},
            "degraded_motors": [j for j, t in zip(names, decided, strict=True) if np.isfinite(t)],
            "degraded_at_s": float(at.min()) if at.size else None}


class RecordedExcess(NamedTuple):
    """One episode's wear excess with what the whole-recording run reports about it."""

    index: int                    # recording order
    name: str
    task: str
    nominal: bool                 # labelled nominal (the condition experiment's restriction absent)
    time_s: np.ndarray
    excess: np.ndarray


def continuous_wear(wear: WearEvidence, sequences: list[RecordedExcess], nominal_only: bool = False) -> dict:
    """The wear monitor run once over every episode in recording order (or only those labelled nominal), never reset
    (as on a live arm, where wear does not heal between episodes): its decisions, the operating time until them, and
    the episode in which the first one fell, so that a decision in a restricted episode is not read as a healthy
    arm's false alarm."""
    chosen = sorted((s for s in sequences if s.nominal or not nominal_only), key=lambda s: s.index)
    times, excess, starts, elapsed = [], [], [], 0.0
    for recorded in chosen:
        if len(recorded.time_s):
            starts.append((elapsed, recorded))
            times.append(recorded.time_s - recorded.time_s[0] + elapsed)
            excess.append(recorded.excess)
            elapsed = float(times[-1][-1]) + wear.reference.settings.max_frame_s
    reference = wear.reference
    n = len(reference.joint_names)
    evidence, state, decided = np.zeros((0, n)), np.zeros((0, 0), dtype=int), np.full(n, np.nan)
    if times:
        evidence, state, decided = run_evidence(wear.monitor(), np.concatenate(times), np.concatenate(excess))
    peak = evidence.max(axis=0) if len(evidence) else np.zeros(n)
    result = {"operation_s": elapsed, "nominal_only": nominal_only,
              **wear_decisions(reference, state, decided), "decided_in": None,
              # how close a motor came: its largest evidence as a share of its degraded threshold
              "largest_evidence_of_threshold": {joint: float(peak[k] / reference.degraded[k])
                                                for k, joint in enumerate(reference.joint_names)
                                                if reference.monitored[k]}}
    if result["degraded_at_s"] is not None:
        start, recorded = [item for item in starts if item[0] <= result["degraded_at_s"]][-1]
        result["decided_in"] = {"episode": recorded.name, "task": recorded.task, "nominal": recorded.nominal,
                                "after_s": result["degraded_at_s"] - start}
    return result


def monitor_episodes(nad: Path, model: Path, out: Path, splits: tuple[str, ...], within_s: float,
                     settings, robot: str | None = None, reference: Path | None = None) -> dict:
    """Per-episode monitor results of the NAD's ``splits``; writes monitor.json and monitor.md to ``out``."""
    spec = robot_spec(read_info(nad), robot)
    predictor = OnnxPredictor(resolve_model(model, out), spec)
    wear = wear_reference(reference, predictor, spec, out) if reference is not None else None
    supervised = spec.joint_names.index(spec.condition_joint)
    rows = []
    skipped: list[str] = []
    wear_sequences: list[RecordedExcess] = []
    for split in splits:
        for episode in load_usable(nad, split, skipped):
            outputs = predictor(episode)
            condition = np.asarray(outputs["condition"], dtype=float)
            _, state, decided = run_monitor(episode.time, condition, settings, outputs["contact_prob"])
            rows.append({"episode": episode.name, "split": split, "task": episode.task,
                         "condition_label": episode.condition_label,
                         "state": STATE_NAMES[state[-1][supervised]],
                         "degraded_at_s": None if not np.isfinite(decided[supervised]) else float(decided[supervised]),
                         "unsupervised_states": {j: STATE_NAMES[s] for k, (j, s) in
                                                 enumerate(zip(spec.joint_names, state[-1], strict=True))
                                                 if k != supervised},
                         "nominal": episode.is_nominal,
                         "duration_s": float(episode.time[-1] - episode.time[0])})
            if wear is not None:
                excess = wear.excess(episode, outputs["contact_prob"])
                _, wear_state, wear_decided = run_evidence(wear.monitor(), episode.time, excess)
                rows[-1]["wear"] = wear_decisions(wear.reference, wear_state, wear_decided)
                wear_sequences.append(RecordedExcess(episode.index, episode.name, episode.task,
                                                     episode.is_nominal, episode.time, excess))
    report = {"nad": str(nad), "model": str(model), "settings": asdict(settings),
              "supervised_joint": spec.condition_joint, "episodes": rows, "skipped": skipped,
              "summary": summarise(rows, within_s)}
    if wear is not None:
        report["wear_reference"] = str(reference)
        report["wear_summary"] = summarise([{**r, "degraded_at_s": r["wear"]["degraded_at_s"]} for r in rows],
                                           within_s)
        report["wear_continuous"] = continuous_wear(wear, wear_sequences)
        report["wear_continuous_nominal"] = continuous_wear(wear, wear_sequences, nominal_only=True)
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


def _settings_sentence(report: dict) -> str:
    settings = report.get("settings")
    return f" Settings: {', '.join(f'{k} {v}' for k, v in settings.items())}." if settings else ""


def markdown(report: dict) -> str:
    supervised = report["supervised_joint"]
    lines = ["# Condition monitor per episode", "",
             f"The decision is the supervised motor's ({supervised}); the model's condition head is trained on its "
             "labels only, so the other motors' scores are not decided on." + _settings_sentence(report), "",
             f"| episode | task | label | {supervised} | degraded at (s) |", "|---|---|---|---|---|"]
    for r in report["episodes"]:
        label = {NOMINAL: "nominal", RESTRICTED: "restricted"}.get(r["condition_label"], "–")
        at = "–" if r["degraded_at_s"] is None else f"{r['degraded_at_s']:.1f}"
        lines.append(f"| {r['episode']} | {r['task']} | {label} | {r['state']} | {at} |")
    lines += summary_lines(report["summary"], supervised,
                           "false alarms where the recorded arm is healthy; the label is the condition joint's "
                           "restriction, so a worn arm's episodes are labelled nominal too")
    if "wear_summary" in report:
        lines += wear_markdown(report)
    lines.append("")
    return "\n".join(lines)


def summary_lines(s: dict, motors: str, nominal_meaning: str) -> list[str]:
    """The counts of a :func:`summarise` summary: episodes degraded on ``motors``, and those labelled nominal."""
    lines = ["", f"{s['degraded']} of {s['episodes']} episodes degraded on {motors}, {s['degraded_within_s']} "
             f"within {s['within_s']:g} s."]
    if s["nominal_episodes"]:
        rate = s["false_alarms_per_10_min"]
        lines.append(f"Episodes labelled nominal decided degraded: {s['false_alarms']} of {s['nominal_episodes']} "
                     f"({s['nominal_s'] / 60:.1f} min), " + (f"{rate:.2f} per 10 min" if rate is not None else "n/a")
                     + f" ({nominal_meaning}).")
    return lines


def wear_markdown(report: dict) -> list[str]:
    """The wear monitor's section: every motor per episode, then the counts."""
    rows = report["episodes"]
    names = list(rows[0]["wear"]["states"]) if rows else []
    lines = ["", "## Wear monitor (every motor)", "",
             f"Reference: {report['wear_reference']}. A motor is degraded once the torque it needs against its "
             "motion has stayed above the reference arm's long enough (na_training/wear.py).", "",
             "| episode | task | " + " | ".join(names) + " | degraded at (s) |",
             "|---|---|" + "---|" * len(names) + "---|"]
    for r in rows:
        at = r["wear"]["degraded_at_s"]
        lines.append(f"| {r['episode']} | {r['task']} | " + " | ".join(r["wear"]["states"].values())
                     + f" | {'–' if at is None else f'{at:.1f}'} |")
    lines += summary_lines(report["wear_summary"], "at least one motor",
                           "false alarms if the recorded arm is healthy, detections if it is worn")
    lines += [continuous_line(report["wear_continuous"], "every episode in recording order"),
              continuous_line(report["wear_continuous_nominal"],
                              "the episodes labelled nominal only (a healthy arm's false alarm, if any)")]
    return lines


def continuous_line(c: dict, which: str) -> str:
    """One sentence on a whole-recording run: when it decided, and in which episode."""
    line = f"One monitor over {which}, never reset ({c['operation_s'] / 60:.1f} min): "
    if c["degraded_at_s"] is None:
        shares = c["largest_evidence_of_threshold"]
        if not shares:                          # no motor monitored
            return line + "never degraded."
        closest = max(shares, key=shares.get)
        return line + f"never degraded (largest evidence {shares[closest]:.2f} of its threshold, on {closest})."
    where = c["decided_in"]
    label = "nominal" if where["nominal"] else "restricted"
    return line + (f"degraded after {c['degraded_at_s']:.1f} s of operation on {', '.join(c['degraded_motors'])}, "
                   f"{where['after_s']:.1f} s into episode {where['episode']} ({where['task']}, {label}).")


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
    parser.add_argument("--reference", type=Path, default=None,
                        help="also run the wear monitor on every motor against a healthy arm: the NAD the model was "
                             "trained on (its train split is fitted and saved as OUT/wear_reference.json) or such a "
                             "saved wear_reference.json")
    add_monitor_arguments(parser)
    parser.set_defaults(handler=run_monitor_cli)
    return parser


def run_monitor_cli(args: argparse.Namespace) -> int:
    for path, what in ((args.nad, "NAD directory"), (args.model, "model"), (args.reference, "wear reference")):
        if path is not None and not Path(path).exists():
            print(f"na-train monitor: error: {what} {path} does not exist", file=sys.stderr)
            return 2
    splits = SPLITS if args.split == "all" else (args.split,)
    try:
        report = monitor_episodes(args.nad, args.model, args.out, splits, args.within, monitor_settings(args),
                                  args.robot, args.reference)
    except (ValueError, FileNotFoundError) as err:
        print(f"na-train monitor: error: {err}", file=sys.stderr)
        return 2
    print((args.out / "monitor.md").read_text())
    return 0 if report["episodes"] else 2
