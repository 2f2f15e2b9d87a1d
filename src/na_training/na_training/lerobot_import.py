"""``na-train import-lerobot``: a LeRobot dataset (format v3) -> Neural Actuation Dataset v1.

SO-101 owners record with LeRobot; this module turns such a dataset into a NAD that ``na-train fit``
and ``na-train compare`` read like a converted one (format: docs/REFERENCES.md, LeRobot dataset).
Per frame, matched to the robot spec's joints by motor name (``shoulder_pan.pos`` ...), never by
position:

* ``observation.state`` ``<motor>.pos`` -> follower ``position_<joint>`` (joint-side rad; the gripper
  as the spec's jaw coordinate, ``gripper_slide``); ``action`` ``<motor>.pos`` -> ``command_position_*``
  (and ``goal_position_*``: LeRobot writes the action as Goal Position);
* Present Load (``<motor>.load`` in ``observation.state``, or a feature ``observation.load`` /
  ``observation.effort`` named by motor) in the register's 0.1 % units -> ``load_<joint>`` as a
  signed fraction of full output;
* velocity: finite differences of the position over the recorded timestamps;
* voltage (0.1 V units) and temperature (degC) from ``<motor>.voltage`` / ``<motor>.temperature``
  where recorded, else the neutral :data:`NEUTRAL_VOLTAGE_V` / :data:`NEUTRAL_TEMPERATURE_C`;
* no force labels (force NaN and invalid, contact false, force_source ``none``), condition nominal.

Positions come in LeRobot's normalised units: degrees about the middle of the calibrated range
(``--joint-units degrees``, LeRobot's ``use_degrees``), or -100..100 of that range (``range``, which
needs the arm's calibration file); the gripper is always 0..100 of its range. Nothing is written
unless every episode converts (the NAD writer stages the output and moves it into place).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from na_common.episode_bag import NOMINAL_CONDITION
from na_description import RobotSpec, SpecError, load_spec, sts3215
from na_description.spec import JointNameError, joint_order, robot_option_help
from na_training import labels
from na_training.nad import AXES, NadError, NadWriter, build_columns
from na_training.progress import ItemProgress

SUPPORTED_VERSION = "v3"                 # codebase_version major accepted
STATE_KEY, ACTION_KEY = "observation.state", "action"
LOAD_FEATURES = ("observation.load", "observation.effort")
POSITION_SUFFIX = ".pos"
# LeRobot robot_type values accepted for a suite robot (the SO-100/SO-101 follower class records "so_follower").
LEROBOT_ROBOT_TYPES: dict[str, tuple[str, ...]] = {"so101": ("so101_follower", "so_follower", "so101")}
NEUTRAL_VOLTAGE_V = 12.0                 # the spec's 12 V STS3215 supply, as the simulated rig runs it
NEUTRAL_TEMPERATURE_C = 25.0             # room temperature, the simulated rig's ambient
JOINT_UNITS = ("degrees", "range")
TASK_FALLBACK = "lerobot"


class LeRobotImportError(ValueError):
    """The dataset cannot be imported; the message says exactly what is missing or wrong."""


# ----------------------------------------------------------------------------------------- units

@dataclass(frozen=True)
class MotorRange:
    """One motor of a LeRobot calibration file: the calibrated range (steps after homing) and drive mode."""

    range_min: float
    range_max: float
    drive_mode: int


def read_calibration(path: str | Path, spec: RobotSpec) -> dict[str, MotorRange]:
    """A LeRobot calibration JSON (``{motor: {range_min, range_max, drive_mode, ...}}``) by spec joint."""
    try:
        raw = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise LeRobotImportError(f"calibration {path}: cannot read ({err})") from None
    if not isinstance(raw, dict):
        raise LeRobotImportError(f"calibration {path}: expected an object keyed by motor name")
    try:
        joint_order(list(raw), spec.joint_names, spec.name)
    except JointNameError as err:
        raise LeRobotImportError(f"calibration {path}: {err}") from None
    ranges = {}
    for joint in spec.joint_names:
        entry = raw[joint]
        try:
            motor = MotorRange(float(entry["range_min"]), float(entry["range_max"]), int(entry.get("drive_mode", 0)))
        except (KeyError, TypeError, ValueError) as err:
            raise LeRobotImportError(f"calibration {path}: motor {joint}: needs range_min, range_max ({err})") from None
        if motor.range_max <= motor.range_min:
            raise LeRobotImportError(f"calibration {path}: motor {joint}: range_max must exceed range_min")
        ranges[joint] = motor
    return ranges


def to_joint_positions(values: np.ndarray, spec: RobotSpec, joint_units: str,
                       calibration: Mapping[str, MotorRange] | None) -> np.ndarray:
    """LeRobot positions ``[T, n]`` (spec order) -> joint-side angles (rad; gripper: servo angle).

    ``degrees``: steps = deg * 4095 / 360 + middle of the range (2048 without a calibration: LeRobot's
    calibration centres each range there, which the spec takes as joint zero). ``range``: -100..100 of
    the calibrated range. The gripper's 0..100 is a share of its calibrated range, or without a
    calibration of the spec's jaw range. Steps -> servo angle -> joint angle through the spec.
    """
    values = np.asarray(values, dtype=np.float64)
    if joint_units not in JOINT_UNITS:
        raise LeRobotImportError(f"unknown joint units {joint_units!r} (choose from {', '.join(JOINT_UNITS)})")
    if joint_units == "range" and calibration is None:
        raise LeRobotImportError("joint values in LeRobot's -100..100 range mode cannot be converted to radians "
                                 "without the arm's calibration file (--calibration FILE)")
    max_step = sts3215.STEPS_PER_REV - 1
    steps = np.empty_like(values)
    jaw_from_share: np.ndarray | None = None
    for k, joint in enumerate(spec.joints):
        v = values[:, k]
        motor = calibration[joint.name] if calibration is not None else None
        if joint.type == "gripper":
            if motor is None:      # share of the spec's jaw range (slide coordinate)
                jaw_from_share = joint.lower + v / 100.0 * (joint.upper - joint.lower)
                steps[:, k] = np.nan
                continue
            share = (100.0 - v if motor.drive_mode else v) / 100.0
            steps[:, k] = motor.range_min + share * (motor.range_max - motor.range_min)
        elif joint_units == "degrees":
            middle = sts3215.POSITION_CENTER if motor is None else (motor.range_min + motor.range_max) / 2.0
            steps[:, k] = v * max_step / 360.0 + middle
        else:
            share = ((-v if motor.drive_mode else v) + 100.0) / 200.0
            steps[:, k] = motor.range_min + share * (motor.range_max - motor.range_min)
    angles = spec.servo_to_joint(sts3215.steps_to_rad(steps))
    if jaw_from_share is not None:
        angles[:, spec.n_motors - 1] = spec.gripper.slide_to_angle(jaw_from_share)
    return angles


# ----------------------------------------------------------------------------------------- layout

@dataclass(frozen=True)
class Signal:
    """Where one per-motor signal sits: the feature (Parquet column) and the index of each spec joint in it."""

    feature: str
    index: np.ndarray


@dataclass(frozen=True)
class Layout:
    """What ``meta/info.json`` says about a dataset, checked against the robot spec."""

    version: str
    fps: float
    robot_type: str
    position: Signal
    command: Signal
    load: Signal
    voltage: Signal | None
    temperature: Signal | None
    total_episodes: int | None


def _names(info: Mapping[str, Any], key: str) -> list[str]:
    feature = info["features"].get(key)
    if not isinstance(feature, Mapping):
        return []
    names = feature.get("names")
    if isinstance(names, Mapping) and len(names) == 1:       # older {"motors": [...]} form
        names = next(iter(names.values()))
    return [str(n) for n in names] if isinstance(names, list) else []


def _find(info: Mapping[str, Any], key: str, suffixes: Sequence[str], spec: RobotSpec,
          required: bool) -> Signal | None:
    """The entries of feature ``key`` named ``<motor><suffix>``, in spec order; None when it has none."""
    names = _names(info, key)
    for suffix in suffixes:
        motors = [n[: len(n) - len(suffix)] for n in names if n.endswith(suffix)] if suffix else \
            [n for n in names if "." not in n]
        if not motors:
            continue
        try:
            order = joint_order(motors, spec.joint_names, spec.name)
        except JointNameError as err:
            raise LeRobotImportError(f"feature {key!r} ({'<motor>' + suffix}): {err}") from None
        positions = [k for k, n in enumerate(names) if (n.endswith(suffix) if suffix else "." not in n)]
        return Signal(key, np.asarray(positions)[order])
    if required:
        raise LeRobotImportError(f"feature {key!r} has no entries named <motor>{suffixes[0]} (names: {names})")
    return None


def read_layout(root: Path, spec: RobotSpec) -> Layout:
    """``meta/info.json`` of a LeRobot dataset, checked: version, robot, fps, position/action/load names."""
    info_path = root / "meta" / "info.json"
    if not info_path.is_file():
        raise LeRobotImportError(f"{root} is not a LeRobot dataset (no meta/info.json)")
    try:
        info = json.loads(info_path.read_text())
    except json.JSONDecodeError as err:
        raise LeRobotImportError(f"{info_path}: invalid JSON ({err})") from None
    version = str(info.get("codebase_version", ""))
    if version.split(".")[0] != SUPPORTED_VERSION:
        raise LeRobotImportError(f"{info_path}: codebase_version {version or 'missing'} is not supported "
                                 f"(this importer reads {SUPPORTED_VERSION}.x)")
    robot_type = str(info.get("robot_type") or "")
    accepted = LEROBOT_ROBOT_TYPES.get(spec.name, ())
    if not accepted:
        raise LeRobotImportError(f"no LeRobot robot type is known for robot {spec.name!r} (importable: "
                                 f"{', '.join(LEROBOT_ROBOT_TYPES)})")
    if robot_type not in accepted:
        raise LeRobotImportError(f"{info_path}: robot_type {robot_type or 'missing'!r} is not the {spec.name} "
                                 f"(expected one of {', '.join(accepted)}; see --robot)")
    fps = float(info.get("fps") or 0)
    if fps <= 0 or abs(1.0 / fps - spec.frame_period) > 1e-6:
        raise LeRobotImportError(f"{info_path}: fps {info.get('fps')} does not match {spec.name}'s frame period "
                                 f"{spec.frame_period:.6g} s (the model steps its simulator at that period)")
    features = info.get("features")
    if not isinstance(features, Mapping):
        raise LeRobotImportError(f"{info_path}: no features")
    for key in (STATE_KEY, ACTION_KEY):
        if key not in features:
            raise LeRobotImportError(f"{info_path}: no {key!r} feature (needed for the follower "
                                     f"{'position' if key == STATE_KEY else 'command'})")
    position = _find(info, STATE_KEY, (POSITION_SUFFIX,), spec, required=True)
    command = _find(info, ACTION_KEY, (POSITION_SUFFIX,), spec, required=True)
    load = _find(info, STATE_KEY, (".load",), spec, required=False)
    for key in LOAD_FEATURES:
        if load is None and key in features:
            load = _find(info, key, (".load", ".effort", ""), spec, required=True)
    if load is None:
        raise LeRobotImportError(f"{info_path}: no Present Load column ({STATE_KEY} entries <motor>.load or a "
                                 f"feature {' / '.join(LOAD_FEATURES)}), which the {spec.name} model reads as effort")
    voltage = _find(info, STATE_KEY, (".voltage",), spec, required=False) or \
        (_find(info, "observation.voltage", ("",), spec, required=True) if "observation.voltage" in features else None)
    temperature = _find(info, STATE_KEY, (".temperature",), spec, required=False) or \
        (_find(info, "observation.temperature", ("",), spec, required=True)
         if "observation.temperature" in features else None)
    total = info.get("total_episodes")
    return Layout(version=version, fps=fps, robot_type=robot_type, position=position, command=command, load=load,
                  voltage=voltage, temperature=temperature, total_episodes=None if total is None else int(total))


def read_tasks(root: Path) -> dict[int, str]:
    """task_index -> task text from ``meta/tasks.parquet`` (or ``meta/tasks.jsonl``); empty when neither exists."""
    parquet, jsonl = root / "meta" / "tasks.parquet", root / "meta" / "tasks.jsonl"
    if parquet.is_file():
        rows = pq.read_table(parquet).to_pylist()
        text_key = next((k for k in ("task", "__index_level_0__") if rows and k in rows[0]), None)
        if text_key is None:
            return {}
        return {int(r["task_index"]): str(r[text_key]) for r in rows}
    if jsonl.is_file():
        rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
        return {int(r["task_index"]): str(r["task"]) for r in rows}
    return {}


def data_files(root: Path) -> list[Path]:
    files = sorted((root / "data").glob("chunk-*/file-*.parquet"))
    if not files:
        raise LeRobotImportError(f"{root}: no data files (data/chunk-*/file-*.parquet)")
    return files


# ----------------------------------------------------------------------------------------- frames

def _matrix(table: pa.Table, key: str, path: Path) -> np.ndarray:
    """A list column ``[T, width]`` as float64."""
    if key not in table.column_names:
        raise LeRobotImportError(f"{path}: no column {key!r}")
    column = table.column(key).combine_chunks()
    if not (pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type)
            or pa.types.is_large_list(column.type)):
        raise LeRobotImportError(f"{path}: column {key!r} is not a vector per frame")
    flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
    if len(column) and flat.size % len(column):
        raise LeRobotImportError(f"{path}: column {key!r} has rows of different lengths")
    return flat.reshape(len(column), -1) if len(column) else flat.reshape(0, 0)


def _pick(matrix: np.ndarray, signal: Signal, path: Path) -> np.ndarray:
    if matrix.shape[1] <= int(signal.index.max()):
        raise LeRobotImportError(f"{path}: column {signal.feature!r} has {matrix.shape[1]} values per frame, fewer "
                                 "than its names in meta/info.json")
    return matrix[:, signal.index]


@dataclass
class EpisodeSource:
    """One LeRobot episode's raw frames (spec order, LeRobot units), sorted by frame_index."""

    lerobot_index: int
    task_index: int
    timestamp: np.ndarray
    values: dict[str, np.ndarray]


def read_episodes(path: Path, layout: Layout) -> list[EpisodeSource]:
    """The episodes of one data file (v3 keeps many per file)."""
    signals = {name: s for name, s in (("position", layout.position), ("command", layout.command),
                                       ("load", layout.load), ("voltage", layout.voltage),
                                       ("temperature", layout.temperature)) if s is not None}
    needed = ["episode_index", "frame_index", "timestamp"]
    present = pq.read_schema(path).names
    missing = [c for c in needed if c not in present]
    if missing:
        raise LeRobotImportError(f"{path}: no column(s) {', '.join(missing)}")
    wanted = needed + sorted({s.feature for s in signals.values()}) + ["task_index"]
    table = pq.read_table(path, columns=[c for c in wanted if c in present])    # images etc. are not read
    matrices = {key: _matrix(table, key, path) for key in {s.feature for s in signals.values()}}
    values = {name: _pick(matrices[s.feature], s, path) for name, s in signals.items()}
    episode = table.column("episode_index").to_numpy().astype(np.int64)
    frame = table.column("frame_index").to_numpy().astype(np.int64)
    stamp = table.column("timestamp").to_numpy().astype(np.float64)
    task = table.column("task_index").to_numpy().astype(np.int64) if "task_index" in table.column_names else \
        np.zeros(len(episode), dtype=np.int64)
    episodes = []
    for index in np.unique(episode):
        rows = np.flatnonzero(episode == index)
        rows = rows[np.argsort(frame[rows], kind="stable")]
        episodes.append(EpisodeSource(int(index), int(task[rows[0]]), stamp[rows],
                                      {name: v[rows] for name, v in values.items()}))
    return episodes


def episode_frames(source: EpisodeSource, spec: RobotSpec, joint_units: str,
                   calibration: Mapping[str, MotorRange] | None, where: str) -> dict[str, np.ndarray]:
    """The NAD frame columns of one episode (see the module docstring for what is mapped and filled)."""
    t = len(source.timestamp)
    if t < 2:
        raise LeRobotImportError(f"{where}: {t} frame(s); velocity needs at least 2")
    time_s = source.timestamp - source.timestamp[0]
    if not np.all(np.diff(time_s) > 0):
        raise LeRobotImportError(f"{where}: timestamps do not increase with frame_index")
    position = to_joint_positions(source.values["position"], spec, joint_units, calibration)
    command = to_joint_positions(source.values["command"], spec, joint_units, calibration)
    load_units = source.values["load"]
    finite_load = np.abs(load_units[np.isfinite(load_units)])
    if finite_load.size and finite_load.max() > sts3215.DUTY_FULL_SCALE:
        raise LeRobotImportError(f"{where}: Present Load values beyond +-{sts3215.DUTY_FULL_SCALE} (0.1 % units): "
                                 "not the signed register value")
    velocity = np.gradient(position, time_s, axis=0)
    voltage = sts3215.voltage_units_to_volt(source.values["voltage"]) if "voltage" in source.values else \
        np.full((t, spec.n_motors), NEUTRAL_VOLTAGE_V)
    temperature = source.values.get("temperature", np.full((t, spec.n_motors), NEUTRAL_TEMPERATURE_C))
    per_joint = {"position": position, "velocity": velocity, "goal_position": command,
                 "current": np.full((t, spec.n_motors), np.nan), "pwm": np.full((t, spec.n_motors), np.nan),
                 "input_voltage": voltage, "temperature": temperature,
                 "hardware_error": np.zeros((t, spec.n_motors), dtype=np.uint8),
                 "stale": np.zeros((t, spec.n_motors), dtype=bool),
                 "load": sts3215.load_units_to_fraction(load_units)}
    frames: dict[str, np.ndarray] = {"time": time_s, "stamp_ns": np.rint(source.timestamp * 1e9).astype(np.int64)}
    for k, joint in enumerate(spec.joint_names):
        frames[f"command_position_{joint}"] = command[:, k]
        frames[f"leader_position_{joint}"] = np.full(t, np.nan)
        for name, array in per_joint.items():
            frames[f"{name}_{joint}"] = array[:, k]
    gripper = spec.n_motors - 1
    frames["gripper_slide"] = spec.gripper.angle_to_slide(position[:, gripper])
    frames["command_gripper_slide"] = spec.gripper.angle_to_slide(command[:, gripper])
    frames["goal_gripper_slide"] = frames["command_gripper_slide"]
    frames["leader_gripper_slide"] = np.full(t, np.nan)
    frames["bus_cycle_duration"] = np.full(t, np.nan)
    numeric = np.concatenate([position, velocity, per_joint["load"], voltage, temperature, command,
                              frames["gripper_slide"][:, None]], axis=1)
    frames["aligned"] = np.ones(t, dtype=bool)
    frames["frame_valid"] = np.isfinite(numeric).all(axis=1)
    for a in AXES:
        frames[f"force_{a}"] = np.full(t, np.nan)
        frames[f"force_valid_{a}"] = np.zeros(t, dtype=bool)
    frames["contact"] = np.zeros(t, dtype=bool)
    condition = labels.condition_labels(NOMINAL_CONDITION, spec.condition_joint)
    frames[f"condition_{spec.condition_joint}"] = np.full(t, condition[spec.condition_joint])
    return frames


# ----------------------------------------------------------------------------------------- driver

@dataclass
class ImportResult:
    out: Path
    episodes: int
    frames: int
    invalid_frames: int
    seconds: float


def _episode_files(files: Sequence[Path]) -> dict[int, list[int]]:
    """LeRobot episode index -> the data files (positions in ``files``) that hold its frames."""
    holders: dict[int, list[int]] = {}
    for k, path in enumerate(files):
        column = pq.read_table(path, columns=["episode_index"]).column("episode_index") \
            if "episode_index" in pq.read_schema(path).names else None
        if column is None:
            raise LeRobotImportError(f"{path}: no column episode_index")
        for index in np.unique(column.to_numpy()):
            holders.setdefault(int(index), []).append(k)
    return holders


def _merge(parts: Sequence[EpisodeSource]) -> EpisodeSource:
    if len(parts) == 1:
        return parts[0]
    # Parts come in file order; frames are re-sorted by time (frame_index order within a file).
    stamp = np.concatenate([p.timestamp for p in parts])
    order = np.argsort(stamp, kind="stable")
    values = {k: np.concatenate([p.values[k] for p in parts])[order] for k in parts[0].values}
    return EpisodeSource(parts[0].lerobot_index, parts[0].task_index, stamp[order], values)


def import_lerobot(dataset: str | Path, out: str | Path, *, robot: str | None = "so101", seed: int = 0,
                   overwrite: bool = False, joint_units: str = "degrees", calibration: str | Path | None = None,
                   progress: bool = True) -> ImportResult:
    """Import a LeRobot v3 dataset into a NAD at ``out`` (atomically: nothing is written on error)."""
    started = time.perf_counter()
    root = Path(dataset)
    try:
        spec = load_spec(robot)
    except SpecError as err:
        raise LeRobotImportError(f"--robot: {err}") from None
    layout = read_layout(root, spec)
    ranges = read_calibration(calibration, spec) if calibration is not None else None
    if joint_units == "range" and ranges is None:
        to_joint_positions(np.zeros((0, spec.n_motors)), spec, joint_units, None)     # raises the one-line error
    tasks = read_tasks(root)
    files = data_files(root)
    holders = _episode_files(files)
    if layout.total_episodes is not None and layout.total_episodes != len(holders):
        raise LeRobotImportError(f"{root}: meta/info.json says {layout.total_episodes} episodes, the data files hold "
                                 f"{len(holders)}")
    columns = build_columns(spec.joint_names, [spec.condition_joint], with_truth=False, optional_fields=("load",))
    writer = NadWriter(out, columns, overwrite=overwrite)
    shown = ItemProgress("import-lerobot", len(holders), "episode", enabled=progress, what="frames")
    reports: list[dict[str, Any]] = []
    pending: dict[int, list[EpisodeSource]] = {}
    try:
        last_file = {index: max(ks) for index, ks in holders.items()}
        for k, path in enumerate(files):
            for part in read_episodes(path, layout):
                pending.setdefault(part.lerobot_index, []).append(part)
            for index in sorted(i for i, last in last_file.items() if last == k):
                source = _merge(pending.pop(index))
                where = f"{root}: episode {index}"
                frames = episode_frames(source, spec, joint_units, ranges, where)
                task = tasks.get(source.task_index, TASK_FALLBACK)
                row = _episode_row(root, layout, source, task, frames, spec)
                nad_index = writer.add_episode(row, frames)
                invalid = int((~frames["frame_valid"]).sum())
                reports.append({"episode_index": nad_index, "lerobot_episode_index": index,
                                "frames": row["frame_count"], "invalid_frames": invalid,
                                "force_invalid": row["frame_count"], "contact_frames": 0})
                shown.advance(row["frame_count"])
        totals = {key: int(sum(r[key] for r in reports)) for key in ("frames", "invalid_frames", "force_invalid")}
        writer.finish(_dataset_info(spec, layout, columns, joint_units, ranges is not None, root),
                      {"episodes": reports, "skipped": [], "incomplete": [], "totals": totals}, seed)
    except BaseException:
        writer.abort()
        raise
    finally:
        shown.close()
    return ImportResult(out=Path(out), episodes=len(reports), frames=totals["frames"],
                        invalid_frames=totals["invalid_frames"], seconds=time.perf_counter() - started)


def _episode_row(root: Path, layout: Layout, source: EpisodeSource, task: str, frames: Mapping[str, np.ndarray],
                 spec: RobotSpec) -> dict[str, Any]:
    n = len(frames["time"])
    return {
        "episode_id": f"lerobot_{source.lerobot_index:06d}",
        "task": task,
        "task_instance": task,
        "payload_grams": 0.0,
        "force_source": "none",
        "condition": NOMINAL_CONDITION,
        "condition_label": labels.condition_labels(NOMINAL_CONDITION, spec.condition_joint)[
            spec.condition_joint],
        "frame_count": n,
        "duration_s": float(frames["time"][-1]),
        "source_bag": root.as_posix(),
        "source": f"lerobot {layout.version} episode {source.lerobot_index}",
        "seed": None,
        "operator": "",
        "notes": "imported from a LeRobot dataset: no force labels",
        "complete": True,
        "recovered": False,
    }


def _dataset_info(spec: RobotSpec, layout: Layout, columns: Sequence[Any], joint_units: str, calibrated: bool,
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
            "joint_units": joint_units,
            "calibration": calibrated,
            "gripper": "0..100 share of the calibrated range" if calibrated else
                       "0..100 share of the spec's jaw range (no calibration given)",
            "velocity": "finite differences of the position (central inside, one-sided at the ends)",
            "load": f"{layout.load.feature}, 0.1 % units -> signed fraction",
            "input_voltage": layout.voltage.feature if layout.voltage else f"not recorded: {NEUTRAL_VOLTAGE_V} V",
            "temperature": layout.temperature.feature if layout.temperature else
            f"not recorded: {NEUTRAL_TEMPERATURE_C} degC",
            "not_recorded": ["leader_position", "current", "pwm", "bus_cycle_duration"],
            "labels": "no force labels (NaN, invalid), contact false, condition nominal",
        },
    }


# ----------------------------------------------------------------------------------------- CLI

DESCRIPTION = ("Import a LeRobot dataset (format v3.x, e.g. recorded with lerobot-record on an SO-101) into a "
               "NAD v1 that na-train fit and compare read: observation.state <motor>.pos -> follower position, "
               "action <motor>.pos -> command, Present Load -> load_<joint> (signed fraction); velocity from "
               "finite differences; voltage/temperature from <motor>.voltage/.temperature if recorded, else "
               f"{NEUTRAL_VOLTAGE_V:g} V / {NEUTRAL_TEMPERATURE_C:g} degC; no force labels, condition nominal; "
               "splits 8:1:1 per task.")
EPILOG = ("Motors are matched to the robot's joints by name. Load is accepted as observation.state entries "
          "<motor>.load or a feature observation.load / observation.effort named by motor, in the register's "
          "0.1 % units (+-1000 = full output). Exit status 2 with a one-line reason on a dataset that cannot be "
          "imported (nothing is written).")


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.epilog = EPILOG
    parser.add_argument("dataset", metavar="DATASET", help="LeRobot dataset directory (meta/info.json, data/)")
    parser.add_argument("--out", required=True, metavar="NAD", help="output dataset directory")
    parser.add_argument("--robot", default="so101", help=robot_option_help("default: so101"))
    parser.add_argument("--joint-units", choices=JOINT_UNITS, default="degrees",
                        help="how the arm joints were normalised when recording: 'degrees' (LeRobot's "
                             "use_degrees, the default) or 'range' (-100..100 of the calibrated range; needs "
                             "--calibration). The gripper is always 0..100")
    parser.add_argument("--calibration", metavar="JSON",
                        help="the follower's LeRobot calibration file (range_min/range_max per motor): exact "
                             "conversion; without it degrees are taken about the servo centre and the gripper's "
                             "0..100 spans the spec's jaw range")
    parser.add_argument("--seed", type=int, default=0, help="split seed (default 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output NAD")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress (a bar on a terminal, a line every 10 s in a log)")
    parser.set_defaults(handler=run_import)
    return parser


def add_import_lerobot_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``import-lerobot`` on ``na-train``'s subparsers."""
    parser = subparsers.add_parser("import-lerobot", help="import a LeRobot v3 dataset into a NAD",
                                   description=DESCRIPTION)
    return configure_parser(parser)


def run_import(args: argparse.Namespace) -> int:
    try:
        result = import_lerobot(args.dataset, args.out, robot=args.robot, seed=args.seed, overwrite=args.overwrite,
                                joint_units=args.joint_units, calibration=args.calibration, progress=not args.quiet)
    except (LeRobotImportError, NadError) as err:
        print(f"na-train import-lerobot: error: {err}", file=sys.stderr)
        return 2
    print(f"wrote {result.out}: {result.episodes} episodes, {result.frames} frames ({result.invalid_frames} invalid), "
          f"velocity from finite differences, no force labels ({result.seconds:.1f} s)")
    return 0


__all__ = ["LeRobotImportError", "add_import_lerobot_parser", "import_lerobot", "read_calibration",
           "to_joint_positions"]
