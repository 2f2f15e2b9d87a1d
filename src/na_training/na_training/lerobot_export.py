"""``na-train export-lerobot``: recorded episode bags or a NAD of either arm -> a LeRobot v3.0 dataset.

Bags are first converted to a NAD with ``na-train convert``'s own code at the export's frame rate (uniform frames,
labels from the F/T sensor or the payload); a NAD is taken as it is, or resampled when its frames are not uniform
at an integer rate. Each NAD episode becomes one LeRobot episode, its task text the episode's task, its metadata
(episode id, task instance, operator, payload, condition, force source, split, ...) columns of
``meta/episodes``. Features (mapping and units: ``src/na_training/LEROBOT.md``):

* ``observation.state`` / ``action``: ``<motor>.pos`` in LeRobot's units (degrees or -100..100 range mode for the
  joints, 0..100 for the gripper), the follower's position and the command sent to it;
* per-motor telemetry the servos give: ``observation.velocity`` (``<motor>.vel_deg_s``), ``observation.load``
  (``.load_pct``), ``observation.current`` (``.current_mA``), ``observation.pwm`` (``.pwm_pct``),
  ``observation.voltage`` (``.voltage_V``), ``observation.temperature`` (``.temperature_degC``);
* where an F/T sensor or a payload gave force labels: ``observation.force`` (``force.x_N`` ..., base frame),
  ``observation.force_valid``, ``observation.contact``; where the estimator ran during a recording:
  ``observation.force_estimate`` and ``observation.contact_estimate``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from na_description import RobotSpec, SpecError, load_spec
from na_description.spec import robot_option_help
from na_training.episode import Episode
from na_training.lerobot_frames import (
    episode_features,
    has_force_labels,
    read_estimates,
    recorded_channels,
    resample_columns,
)
from na_training.lerobot_robots import (
    CONTACT_FEATURE,
    ESTIMATE_CONTACT_FEATURE,
    ESTIMATE_CONTACT_NAMES,
    ESTIMATE_FORCE_FEATURE,
    EXPORT_ROBOT_TYPE,
    FORCE_FEATURE,
    FORCE_NAMES,
    FORCE_VALID_FEATURE,
    FORCE_VALID_NAMES,
    channels_for,
)
from na_training.lerobot_units import Calibration, LeRobotUnitsError, load_calibration
from na_training.lerobot_writer import LeRobotWriteError, LeRobotWriter
from na_training.nad import NadError, load_nad, read_info, robot_spec
from na_training.progress import ItemProgress

EPISODE_META = ("episode_id", "task_instance", "payload_grams", "force_source", "condition", "split", "operator",
                "notes", "source", "source_bag", "seed", "complete", "recovered")
EXPORT_JOINT_UNITS = ("degrees", "range")


class LeRobotExportError(ValueError):
    """The sources cannot be exported; the message names the problem."""


@dataclass
class ExportResult:
    out: Path
    episodes: int
    frames: int
    fps: int
    features: list[str]
    statements: list[str]
    seconds: float


def _is_nad(path: Path) -> bool:
    return (path / "meta" / "info.json").is_file() and (path / "meta" / "episodes.parquet").is_file()


def default_fps(spec: RobotSpec) -> int:
    """The integer frame rate nearest the spec's frame period (SO-101 30, OpenManipulator-X 59)."""
    return max(1, round(1.0 / spec.frame_period))


def _bag_robot(sources: Sequence[Path]) -> str | None:
    """The robot the first bag's episode metadata names (None when it names none)."""
    from na_common.episode_bag import EpisodeBagError, episode_metadata, read_rosbag2_info
    from na_training.convert import expand_bag_paths

    try:
        first = expand_bag_paths(sources)[0]
        meta = episode_metadata(first, read_rosbag2_info(first)) or {}
    except (EpisodeBagError, OSError, ValueError, RuntimeError):
        return None
    return str(meta.get("robot") or "") or None


def _convert_bags(sources: Sequence[Path], nad: Path, robot: str | None, fps: int | None, config: str | None,
                  jobs: int | None, progress: bool) -> tuple[RobotSpec, int]:
    """Bags -> a NAD at ``nad`` with the converter, on a uniform grid of the export's frame rate."""
    from na_training.convert import ConvertError, convert, load_config
    from na_training.labels import LabelError

    try:
        spec = load_spec(robot or _bag_robot(sources))
    except SpecError as err:
        raise LeRobotExportError(f"--robot: {err}") from None
    fps = fps or default_fps(spec)
    try:
        convert(sources, nad, config=load_config(config), rate_hz=float(fps), robot=spec.name, jobs=jobs,
                progress=progress)
    except (ConvertError, LabelError) as err:
        raise LeRobotExportError(str(err)) from None
    return spec, fps


def _nad_rate(info: dict[str, Any], fps: int | None) -> tuple[int, int | None]:
    """The export fps of a NAD and the resampling period (ns) its frames need, None when they are already on it."""
    rate = info.get("rate_hz")
    integer = rate is not None and info.get("resampled") and abs(rate - round(rate)) < 1e-6 * rate
    target = fps or (round(rate) if rate else None)
    if not target:
        raise LeRobotExportError("the NAD states no frame rate; give --fps")
    return int(target), None if integer and round(rate) == target else round(1e9 / target)


def _calibration(spec: RobotSpec, path: str | Path | None, robot_id: str | None,
                 folder: str | Path | None) -> Calibration | None:
    try:
        return load_calibration(spec, path, robot_id, folder)
    except LeRobotUnitsError as err:
        raise LeRobotExportError(str(err)) from None


def export_lerobot(sources: Sequence[str | Path], out: str | Path, *, robot: str | None = None,
                   fps: int | None = None, joint_units: str = "degrees", calibration: str | None = None,
                   robot_id: str | None = None, calibration_dir: str | None = None, config: str | None = None,
                   jobs: int | None = None, max_file_mb: float = 100.0, overwrite: bool = False,
                   progress: bool = True) -> ExportResult:
    """Export bags (or one NAD) to a LeRobot v3.0 dataset at ``out``; nothing is written on error."""
    started = time.perf_counter()
    paths = [Path(s) for s in sources]
    if not paths:
        raise LeRobotExportError("no bags or NAD given")
    if joint_units not in EXPORT_JOINT_UNITS:
        raise LeRobotExportError(f"--joint-units must be one of {', '.join(EXPORT_JOINT_UNITS)}")
    if fps is not None and fps < 1:
        raise LeRobotExportError(f"--fps must be a whole number of frames per second, at least 1, got {fps}")
    nads = [p for p in paths if _is_nad(p)]
    if nads and (len(paths) > 1):
        raise LeRobotExportError("give either one NAD or episode bags, not both or several NADs")
    with tempfile.TemporaryDirectory(prefix="na_export_lerobot_") as scratch:
        from_bags = not nads
        if from_bags:
            spec, fps = _convert_bags(paths, Path(scratch) / "nad", robot, fps, config, jobs, progress)
            nad = Path(scratch) / "nad"
        else:
            nad = nads[0]
        try:
            info = read_info(nad)
            if not from_bags:
                spec = robot_spec(info, robot)
            episodes = load_nad(nad)
        except NadError as err:
            raise LeRobotExportError(str(err)) from None
        fps, period_ns = (fps, None) if from_bags else _nad_rate(info, fps)
        return _write(episodes, spec, info, out, fps=fps, period_ns=period_ns, joint_units=joint_units,
                      calibration=_calibration(spec, calibration, robot_id, calibration_dir), from_bags=from_bags,
                      max_file_mb=max_file_mb, overwrite=overwrite, progress=progress, started=started)


def _write(episodes: list[Episode], spec: RobotSpec, info: dict[str, Any], out: str | Path, *, fps: int,
           period_ns: int | None, joint_units: str, calibration: Calibration | None, from_bags: bool,
           max_file_mb: float, overwrite: bool, progress: bool, started: float) -> ExportResult:
    if not episodes:
        raise LeRobotExportError("the NAD holds no episodes")
    if joint_units == "range" and calibration is None:
        raise LeRobotExportError("--joint-units range needs the arm's LeRobot calibration (--calibration or "
                                 "--robot-id)")
    if period_ns is not None:
        episodes = [replace(ep, columns=resample_columns(ep.columns, period_ns)) for ep in episodes]
    channels = recorded_channels(episodes, channels_for(spec))
    with_force = has_force_labels(episodes)
    estimates = [read_estimates(Path(ep.meta["source_bag"]), ep.columns["stamp_ns"]) if from_bags else None
                 for ep in episodes]
    motors = spec.joint_names
    features = {"observation.state": [f"{m}.pos" for m in motors], "action": [f"{m}.pos" for m in motors]}
    features.update({c.feature: [f"{m}{c.suffix}" for m in motors] for c in channels})
    if with_force:
        features.update({FORCE_FEATURE: FORCE_NAMES, FORCE_VALID_FEATURE: FORCE_VALID_NAMES,
                         CONTACT_FEATURE: ["contact"]})
    if any(e is not None for e in estimates):
        features.update({ESTIMATE_FORCE_FEATURE: FORCE_NAMES, ESTIMATE_CONTACT_FEATURE: ESTIMATE_CONTACT_NAMES})
    try:
        writer = LeRobotWriter(out, features, fps, overwrite=overwrite, max_file_mb=max_file_mb)
    except LeRobotWriteError as err:
        raise LeRobotExportError(str(err)) from None
    shown = ItemProgress("export-lerobot", len(episodes), "episode", enabled=progress, what="frames")
    filled: dict[str, int] = {}
    try:
        for ep, estimate in zip(episodes, estimates, strict=True):
            if estimate is None and ESTIMATE_FORCE_FEATURE in features:
                estimate = {ESTIMATE_FORCE_FEATURE: np.zeros((len(ep), 3)),
                            ESTIMATE_CONTACT_FEATURE: np.zeros((len(ep), 3))}
            frames = episode_features(ep, spec, channels, joint_units, calibration, with_force, estimate)
            for key, count in frames.filled.items():
                filled[key] = filled.get(key, 0) + count
            meta = {key: ep.meta.get(key) for key in EPISODE_META if key in ep.meta}
            writer.add_episode(frames.values, str(ep.meta["task"]), meta)
            shown.advance(len(ep))
        statements = _statements(spec, fps, period_ns, joint_units, calibration, channels, with_force,
                                 ESTIMATE_FORCE_FEATURE in features, filled)
        writer.finish(EXPORT_ROBOT_TYPE.get(spec.name, spec.name),
                      {"neural_actuator": _provenance(spec, info, from_bags, joint_units, calibration, channels,
                                                      statements)})
    except BaseException:
        writer.abort()
        raise
    finally:
        shown.close()
    return ExportResult(out=Path(out), episodes=len(episodes), frames=sum(len(e) for e in episodes), fps=fps,
                        features=list(features), statements=statements, seconds=time.perf_counter() - started)


def _statements(spec: RobotSpec, fps: int, period_ns: int | None, joint_units: str, calibration: Calibration | None,
                channels: Sequence[Any], with_force: bool, with_estimates: bool, filled: dict[str, int]) -> list[str]:
    lines = [f"robot {spec.name} as LeRobot robot_type {EXPORT_ROBOT_TYPE.get(spec.name, spec.name)}, {fps} fps"
             + (" (NAD resampled to it)" if period_ns else ""),
             f"observation.state / action: <motor>.pos, joints in LeRobot {joint_units}"
             + (f" about the calibrated ranges of {calibration.path}" if calibration else " about step 2048")
             + ", gripper 0..100 of " + ("the calibrated range" if calibration else "the spec's jaw limits"),
             "telemetry: " + ", ".join(f"{c.feature} (<motor>{c.suffix})" for c in channels)]
    if calibration is not None:
        lines += calibration.warnings
    lines.append("force: observation.force (N, base frame, 0 where invalid), observation.force_valid, "
                 "observation.contact" if with_force else "no force labels in these episodes")
    if with_estimates:
        lines.append("estimator: observation.force_estimate (N, base frame), observation.contact_estimate")
    if filled:
        lines.append("non-finite values held from the previous frame: " +
                     ", ".join(f"{k} {v}" for k, v in sorted(filled.items())))
    return lines


def _provenance(spec: RobotSpec, info: dict[str, Any], from_bags: bool, joint_units: str,
                calibration: Calibration | None, channels: Sequence[Any], statements: list[str]) -> dict[str, Any]:
    """The ``neural_actuator`` entry of meta/info.json: what was exported and in which units (the importer reads
    ``joint_units`` from it)."""
    return {"exporter": "na-train export-lerobot", "robot": spec.name, "source": "bags" if from_bags else "nad",
            "nad_dataset_id": info.get("dataset_id"), "joint_units": joint_units,
            "calibration": str(calibration.path) if calibration else None,
            "position_rule": "degrees: (steps - middle) * 360 / 4095; range: -100..100 of [range_min, range_max]; "
                             "gripper: 0..100",
            "channels": {c.feature: f"{c.nad_unit} x {c.scale:g}" for c in channels},
            "force_frame": spec.base_frame, "statements": statements}


# ----------------------------------------------------------------------------------------- CLI

DESCRIPTION = ("Export recorded episode bags (or a NAD) of either arm to a LeRobot v3.0 dataset that "
               "LeRobotDataset(repo_id, root=DATASET) opens: observation.state and action as <motor>.pos in "
               "LeRobot's units, per-motor velocity, load or current, voltage and temperature with their units in the "
               "names, and the force labels and estimator outputs where the recording has them.")
EPILOG = ("Bags are converted at the export's fps with na-train convert's rules (labels, alignment); the SO-101 is "
          "exported as so101_follower with LeRobot's motor names, the OpenManipulator-X as open_manipulator_x with "
          "joint1..joint4, gripper. Exit status 2 with a one-line reason on bad input (nothing is written). Mapping "
          "and units: src/na_training/LEROBOT.md.")


def add_export_lerobot_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``export-lerobot`` on ``na-train``'s subparsers."""
    parser = subparsers.add_parser("export-lerobot", help="export bags or a NAD to a LeRobot v3 dataset",
                                   description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("sources", nargs="+", metavar="BAGS_OR_NAD",
                        help="episode bag directories or folders of them, or one NAD directory")
    parser.add_argument("--out", required=True, metavar="DATASET", help="output LeRobot dataset directory")
    parser.add_argument("--robot", help=robot_option_help("default: the bags' or the NAD's robot"))
    parser.add_argument("--fps", type=int, help="frame rate (default: the nearest whole rate to the robot's frame "
                                                "period, SO-101 30, OpenManipulator-X 59; a NAD keeps its rate)")
    parser.add_argument("--joint-units", choices=EXPORT_JOINT_UNITS, default="degrees",
                        help="LeRobot's joint normalisation: degrees (use_degrees, the default) or range (-100..100, "
                             "needs the calibration)")
    calibration = parser.add_argument_group("calibration")
    calibration.add_argument("--calibration", metavar="JSON",
                             help="the arm's LeRobot calibration file (or its folder, with --robot-id): positions "
                                  "about its calibrated ranges")
    calibration.add_argument("--robot-id", "--calibration-id", metavar="ID",
                             help="find the calibration by LeRobot robot id in LeRobot's calibration folder")
    calibration.add_argument("--calibration-dir", metavar="DIR",
                             help="LeRobot's calibration folder for --robot-id (default as LeRobot's)")
    parser.add_argument("--config", metavar="YAML", help="converter config for bags (see na-train convert)")
    parser.add_argument("--jobs", type=int, metavar="N", help="bag conversion worker processes (default: one per CPU)")
    parser.add_argument("--max-file-mb", type=float, default=100.0, metavar="MB",
                        help="start a new data file once one would pass this size (LeRobot's default 100)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output dataset")
    parser.add_argument("--quiet", action="store_true", help="no progress lines")
    parser.set_defaults(handler=run_export_lerobot)
    return parser


def run_export_lerobot(args: argparse.Namespace) -> int:
    try:
        result = export_lerobot(args.sources, args.out, robot=args.robot, fps=args.fps, joint_units=args.joint_units,
                                calibration=args.calibration, robot_id=args.robot_id,
                                calibration_dir=args.calibration_dir, config=args.config, jobs=args.jobs,
                                max_file_mb=args.max_file_mb, overwrite=args.overwrite, progress=not args.quiet)
    except (LeRobotExportError, NadError) as err:
        print(f"na-train export-lerobot: error: {err}", file=sys.stderr)
        return 2
    for line in result.statements:
        print(line)
    print(f"wrote {result.out}: {result.episodes} episodes, {result.frames} frames at {result.fps} fps "
          f"({result.seconds:.1f} s)")
    return 0


__all__ = ["LeRobotExportError", "add_export_lerobot_parser", "export_lerobot"]
