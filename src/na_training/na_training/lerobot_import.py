"""``na-train import-lerobot``: a LeRobot dataset (format v3, or v2) -> Neural Actuation Dataset v1.

Per frame, matched to the robot spec's joints by motor name through every naming LeRobot datasets use
(``lerobot_names``), never by position:

* ``observation.state`` positions -> follower ``position_<joint>`` (joint-side rad; the gripper's 0..100 as the
  servo angle), ``action`` positions -> ``command_position_*`` and ``goal_position_*`` (LeRobot writes the action as
  Goal Position);
* Present Load, current, velocity, PWM, voltage, temperature where recorded (``<motor>.load`` in the state or
  features of their own) -> the NAD's SI columns; velocity otherwise from finite differences, voltage and
  temperature otherwise the neutral :data:`NEUTRAL_VOLTAGE_V` / :data:`NEUTRAL_TEMPERATURE_C`;
* ``observation.force`` / ``observation.contact`` (written by ``na-train export-lerobot``) -> force labels;
  otherwise none (force NaN and invalid, contact false, force_source ``none``).

Units (``lerobot_units``) are taken from the command line, from ``meta/info.json`` or the value names, else told
from the values, and always reported; values that fit more than one unit are refused in one line. Nothing is
written unless every episode converts (the NAD writer stages the output and moves it into place).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from na_common.episode_bag import NOMINAL_CONDITION
from na_description import RobotSpec
from na_description.spec import robot_option_help
from na_training import labels
from na_training.lerobot_format import LeRobotFormatError, data_files, read_episode_rows, read_tasks
from na_training.lerobot_layout import (
    NEUTRAL_TEMPERATURE_C,
    NEUTRAL_VOLTAGE_V,
    Layout,
    LeRobotImportError,
    Units,
    decide_units,
    read_layout,
    statements,
)
from na_training.lerobot_read import EpisodeSource, read_all_episodes
from na_training.lerobot_robots import CONTACT_FEATURE, FORCE_FEATURE, FORCE_VALID_FEATURE
from na_training.lerobot_units import (
    Calibration,
    LeRobotUnitsError,
    load_calibration,
    signal_to_si,
    to_joint_positions,
)
from na_training.nad import AXES, NadError, NadWriter, build_columns
from na_training.progress import ItemProgress

JOINT_UNIT_CHOICES = ("auto", "degrees", "range", "steps")
LOAD_UNIT_CHOICES = ("auto", "permille", "percent", "fraction", "raw")
TASK_FALLBACK = "lerobot"
EPISODE_META = {"task_instance": str, "payload_grams": float, "force_source": str, "condition": str,
                "operator": str, "notes": str, "source": str, "episode_id": str}


# ----------------------------------------------------------------------------------------- frames

def episode_frames(source: EpisodeSource, layout: Layout, units: Units, where: str) -> dict[str, np.ndarray]:
    """The NAD frame columns of one episode (see the module docstring for what is mapped and filled)."""
    spec, t = layout.spec, len(source.timestamp)
    if t < 2:
        raise LeRobotImportError(f"{where}: {t} frame(s); velocity needs at least 2")
    time_s = source.timestamp - source.timestamp[0]
    if not np.all(np.diff(time_s) > 0):
        raise LeRobotImportError(f"{where}: timestamps do not increase with frame_index")
    try:
        position = to_joint_positions(source.values["position"], spec, units.joint, units.calibration)
        command = to_joint_positions(source.values["command"], spec, units.joint, units.calibration)
        recorded = {signal: signal_to_si(signal, source.values[signal], unit, spec)
                    for signal, (unit, _) in units.telemetry.items()}
    except LeRobotUnitsError as err:
        raise LeRobotImportError(f"{where}: {err}") from None
    n = spec.n_motors
    per_joint = {"position": position, "goal_position": command,
                 "velocity": recorded.get("velocity", np.gradient(position, time_s, axis=0)),
                 "current": recorded.get("current", np.full((t, n), np.nan)),
                 "pwm": recorded.get("pwm", np.full((t, n), np.nan)),
                 "input_voltage": recorded.get("input_voltage", np.full((t, n), NEUTRAL_VOLTAGE_V)),
                 "temperature": recorded.get("temperature", np.full((t, n), NEUTRAL_TEMPERATURE_C)),
                 "hardware_error": np.zeros((t, n), dtype=np.uint8), "stale": np.zeros((t, n), dtype=bool)}
    if spec.effort_signal == "load":
        per_joint["load"] = recorded["load"]
    frames: dict[str, np.ndarray] = {"time": time_s, "stamp_ns": np.rint(source.timestamp * 1e9).astype(np.int64)}
    for k, joint in enumerate(spec.joint_names):
        frames[f"command_position_{joint}"] = command[:, k]
        frames[f"leader_position_{joint}"] = np.full(t, np.nan)
        for name, array in per_joint.items():
            frames[f"{name}_{joint}"] = array[:, k]
    gripper = n - 1
    frames["gripper_slide"] = spec.gripper.angle_to_slide(position[:, gripper])
    frames["command_gripper_slide"] = spec.gripper.angle_to_slide(command[:, gripper])
    frames["goal_gripper_slide"] = frames["command_gripper_slide"]
    frames["leader_gripper_slide"] = np.full(t, np.nan)
    frames["bus_cycle_duration"] = np.full(t, np.nan)
    numeric = np.concatenate([position, per_joint["velocity"], per_joint[spec.effort_signal],
                              per_joint["input_voltage"], per_joint["temperature"], command,
                              frames["gripper_slide"][:, None]], axis=1)
    frames["aligned"] = np.ones(t, dtype=bool)
    frames["frame_valid"] = np.isfinite(numeric).all(axis=1)
    _force_frames(frames, source, layout.force, t)
    condition = labels.condition_labels(NOMINAL_CONDITION, spec.condition_joint)
    frames[f"condition_{spec.condition_joint}"] = np.full(t, condition[spec.condition_joint])
    return frames


def _force_frames(frames: dict[str, np.ndarray], source: EpisodeSource, recorded: bool, t: int) -> None:
    """Force labels from an export's ``observation.force`` (N, base frame) with its validity and contact."""
    force = source.values.get(FORCE_FEATURE) if recorded else None
    valid = source.values.get(FORCE_VALID_FEATURE) if recorded else None
    for a, axis in enumerate(AXES):
        ok = (valid[:, a] > 0.5) if valid is not None else np.zeros(t, dtype=bool)
        frames[f"force_valid_{axis}"] = ok if force is not None else np.zeros(t, dtype=bool)
        frames[f"force_{axis}"] = np.where(ok, force[:, a], np.nan) if force is not None else np.full(t, np.nan)
    contact = source.values.get(CONTACT_FEATURE) if recorded else None
    frames["contact"] = contact[:, 0] > 0.5 if contact is not None else np.zeros(t, dtype=bool)


# ----------------------------------------------------------------------------------------- driver

@dataclass
class ImportResult:
    out: Path
    episodes: int
    frames: int
    invalid_frames: int
    seconds: float
    statements: list[str]


def _calibration(spec: RobotSpec, path: str | Path | None, robot_id: str | None,
                 folder: str | Path | None) -> Calibration | None:
    try:
        return load_calibration(spec, path, robot_id, folder)
    except LeRobotUnitsError as err:
        raise LeRobotImportError(str(err)) from None


def import_lerobot(dataset: str | Path, out: str | Path, *, robot: str | None = None, seed: int = 0,
                   overwrite: bool = False, joint_units: str = "auto", load_units: str = "auto",
                   calibration: str | Path | None = None, robot_id: str | None = None,
                   calibration_dir: str | Path | None = None, progress: bool = True) -> ImportResult:
    """Import a LeRobot v3 (or v2) dataset into a NAD at ``out`` (atomically: nothing is written on error)."""
    started = time.perf_counter()
    root = Path(dataset)
    try:
        info, layout = read_layout(root, robot)
        spec = layout.spec
        ranges = _calibration(spec, calibration, robot_id, calibration_dir)
        tasks = read_tasks(root)
        rows = read_episode_rows(root)
        extra = [k for k in (FORCE_FEATURE, FORCE_VALID_FEATURE, CONTACT_FEATURE) if layout.force and
                 k in info["features"]]
        episodes = read_all_episodes(data_files(root, layout.version), layout.signals, extra, rows, root)
    except LeRobotFormatError as err:
        raise LeRobotImportError(str(err)) from None
    if layout.total_episodes is not None and layout.total_episodes != len(episodes):
        raise LeRobotImportError(f"{root}: meta/info.json says {layout.total_episodes} episodes, the data files hold "
                                 f"{len(episodes)}")
    units = decide_units(info, layout, episodes, joint_units, load_units, ranges)
    report_lines = statements(info, layout, units)
    columns = build_columns(spec.joint_names, [spec.condition_joint], with_truth=False,
                            optional_fields=("load",) if spec.effort_signal == "load" else ())
    writer = NadWriter(out, columns, overwrite=overwrite)
    shown = ItemProgress("import-lerobot", len(episodes), "episode", enabled=progress, what="frames")
    reports: list[dict[str, Any]] = []
    try:
        for source in episodes:
            frames = episode_frames(source, layout, units, f"{root}: episode {source.lerobot_index}")
            row = _episode_row(root, layout, source, tasks.get(source.task_index, TASK_FALLBACK),
                               rows.get(source.lerobot_index, {}), frames)
            nad_index = writer.add_episode(row, frames)
            reports.append({"episode_index": nad_index, "lerobot_episode_index": source.lerobot_index,
                            "frames": row["frame_count"], "invalid_frames": int((~frames["frame_valid"]).sum()),
                            "force_invalid": int((~np.stack([frames[f"force_valid_{a}"] for a in AXES])).any(
                                axis=0).sum()),
                            "contact_frames": int(frames["contact"].sum())})
            shown.advance(row["frame_count"])
        totals = {key: int(sum(r[key] for r in reports)) for key in ("frames", "invalid_frames", "force_invalid")}
        writer.finish(_dataset_info(spec, layout, columns, units, report_lines, root),
                      {"episodes": reports, "skipped": [], "incomplete": [], "totals": totals, "units": report_lines},
                      seed)
    except BaseException:
        writer.abort()
        raise
    finally:
        shown.close()
    return ImportResult(out=Path(out), episodes=len(reports), frames=totals["frames"],
                        invalid_frames=totals["invalid_frames"], seconds=time.perf_counter() - started,
                        statements=report_lines)


def _episode_row(root: Path, layout: Layout, source: EpisodeSource, task: str, meta: Mapping[str, Any],
                 frames: Mapping[str, np.ndarray]) -> dict[str, Any]:
    """The NAD episodes.parquet row; metadata an export carried (operator, payload, condition, ...) is kept."""
    carried = {k: cast(meta[k]) for k, cast in EPISODE_META.items() if meta.get(k) is not None}
    condition = carried.get("condition", NOMINAL_CONDITION)
    spec = layout.spec
    try:
        label = labels.condition_labels(condition, spec.condition_joint)[spec.condition_joint]
    except (KeyError, ValueError, labels.LabelError):
        condition, label = NOMINAL_CONDITION, 1.0
    frames[f"condition_{spec.condition_joint}"][:] = label
    force_source = carried.get("force_source", "none") if layout.force else "none"
    return {
        "episode_id": carried.get("episode_id", f"lerobot_{source.lerobot_index:06d}"),
        "task": task,
        "task_instance": carried.get("task_instance", task),
        "payload_grams": carried.get("payload_grams", 0.0),
        "force_source": force_source,
        "condition": condition,
        "condition_label": label,
        "frame_count": len(frames["time"]),
        "duration_s": float(frames["time"][-1]),
        "source_bag": root.as_posix(),
        "source": (f"{carried['source']} via " if "source" in carried else "")
        + f"lerobot {layout.version} episode {source.lerobot_index}",
        "seed": int(meta["seed"]) if meta.get("seed") is not None else None,
        "operator": carried.get("operator", ""),
        "notes": carried.get("notes", "imported from a LeRobot dataset" + ("" if layout.force else
                                                                             ": no force labels")),
        "complete": bool(meta.get("complete", True)),
        "recovered": False,
    }


def _dataset_info(spec: RobotSpec, layout: Layout, columns: Sequence[Any], units: Units, lines: list[str],
                  root: Path) -> dict[str, Any]:
    """meta/info.json fields (the same keys the bag converter writes, its ``converter`` entry saying how)."""
    return {
        "robot": spec.name,
        "base_frame": spec.base_frame,
        "joint_names": spec.joint_names,
        "condition_joints": [spec.condition_joint],
        "effort_signal": spec.effort_signal,
        "resampled": False,
        "rate_hz": layout.fps,
        "frame_period_s": 1.0 / layout.fps,
        "force_label": {"frame": spec.base_frame, "unit": "N",
                        "convention": "force the environment exerts on the robot at the tool point"},
        "feature_columns": [c.name for c in columns if c.group in ("command", "leader", "proprioception", "telemetry")],
        "label_columns": [c.name for c in columns if c.group == "label"],
        "evaluation_columns": [c.name for c in columns if c.group == "evaluation"],
        "converter": {
            "name": "lerobot_import",
            "source": {"format": "LeRobot", "codebase_version": layout.version, "robot_type": layout.robot_type,
                       "fps": layout.fps, "dataset": root.name},
            "joint_units": units.joint,
            "joint_units_reason": units.joint_reason,
            "calibration": units.calibration is not None,
            "telemetry_units": {s: how for s, (_, how) in units.telemetry.items()},
            "statements": lines,
            "not_recorded": ["leader_position", "bus_cycle_duration",
                             *(s for s in ("current", "pwm") if s not in units.telemetry)],
        },
    }


# ----------------------------------------------------------------------------------------- CLI

DESCRIPTION = ("Import a LeRobot dataset (format v3.x or v2.x, e.g. recorded with lerobot-record on an SO-101) into "
               "a NAD v1 that na-train fit and compare read. Motors are matched by name in any naming "
               "(shoulder_pan.pos, main_shoulder_pan, motor_1..6, joint_0..5) and order; positions -> joint radians, "
               "the action -> command, Present Load (and current, velocity, voltage, temperature where recorded) -> "
               "SI columns. Every unit taken is printed; splits 8:1:1 per task.")
EPILOG = ("Joint units: --joint-units, else meta/info.json, else told from the values (beyond +-100: degrees; with a "
          "calibration, beyond a motor's half-range: range units); values that fit both are refused. robot_type "
          "spellings so100, so-100, so101, so101_follower, so_follower are the SO-101. Exit status 2 with a one-line "
          "reason on a dataset that cannot be imported (nothing is written). Mapping and units: "
          "src/na_training/LEROBOT.md.")


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.epilog = EPILOG
    parser.add_argument("dataset", metavar="DATASET", help="LeRobot dataset directory (meta/info.json, data/)")
    parser.add_argument("--out", required=True, metavar="NAD", help="output dataset directory")
    parser.add_argument("--robot", help=robot_option_help("default: the arm the dataset's robot_type names"))
    parser.add_argument("--joint-units", choices=JOINT_UNIT_CHOICES, default="auto",
                        help="how the arm joints were normalised: degrees (LeRobot's use_degrees), range (-100..100 of "
                             "the calibrated range; needs the calibration), steps (raw encoder), or auto (default: "
                             "meta/info.json or the values). The gripper is 0..100")
    parser.add_argument("--load-units", choices=LOAD_UNIT_CHOICES, default="auto",
                        help="Present Load unit when the names do not say: permille (LeRobot's register value, 0.1 %%),"
                             " percent, fraction, raw (undecoded sign bit 10); auto (default) tells it from the values")
    calibration = parser.add_argument_group("calibration")
    calibration.add_argument("--calibration", metavar="JSON",
                             help="the follower's LeRobot calibration file (range_min/range_max per motor), or the "
                                  "folder holding it with --robot-id")
    calibration.add_argument("--robot-id", "--calibration-id", metavar="ID",
                             help="find the calibration by LeRobot robot id: <dir>/robots/so_follower/ID.json (or "
                                  "the older so101_follower/, so100_follower/)")
    calibration.add_argument("--calibration-dir", metavar="DIR",
                             help="LeRobot's calibration folder for --robot-id (default $HF_LEROBOT_CALIBRATION, "
                                  "else ~/.cache/huggingface/lerobot/calibration)")
    parser.add_argument("--seed", type=int, default=0, help="split seed (default 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output NAD")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress (a bar on a terminal, a line every 10 s in a log)")
    parser.set_defaults(handler=run_import)
    return parser


def add_import_lerobot_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``import-lerobot`` on ``na-train``'s subparsers."""
    parser = subparsers.add_parser("import-lerobot", help="import a LeRobot dataset (v3, v2) into a NAD",
                                   description=DESCRIPTION)
    return configure_parser(parser)


def run_import(args: argparse.Namespace) -> int:
    try:
        result = import_lerobot(args.dataset, args.out, robot=args.robot, seed=args.seed, overwrite=args.overwrite,
                                joint_units=args.joint_units, load_units=args.load_units,
                                calibration=args.calibration, robot_id=args.robot_id,
                                calibration_dir=args.calibration_dir, progress=not args.quiet)
    except (LeRobotImportError, NadError) as err:
        print(f"na-train import-lerobot: error: {err}", file=sys.stderr)
        return 2
    for line in result.statements:
        print(line)
    print(f"wrote {result.out}: {result.episodes} episodes, {result.frames} frames ({result.invalid_frames} invalid) "
          f"({result.seconds:.1f} s)")
    return 0


__all__ = ["LeRobotImportError", "add_import_lerobot_parser", "import_lerobot", "to_joint_positions"]
