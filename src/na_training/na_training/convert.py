"""``na-train convert``: rosbag2 episode bags -> Neural Actuation Dataset v1.

Per episode: read the follower, leader, command, F/T, grasp and (simulated rig) truth streams,
align them to the follower samples (or to a uniform grid with ``--rate``/``--frame-period``) by
header stamp, make the force/contact/condition labels (``labels.py``) and write one Parquet file.
Alignment rules (defaults in ``na_training/config/convert.yaml``):

* command and leader: the latest sample at or before the frame, at most 15 ms old;
* F/T: mean of the samples within +-5 ms of the frame, per channel (no sample -> label invalid);
* ``/episode/grasp`` and ``/sim/truth/contact`` (``std_msgs/Bool``, no header): the latest state
  at or before the frame by bag time, false before the first message;
* ``/sim/truth/wrench``: nearest sample within 15 ms;
* resampling: follower values are linearly interpolated between the bracketing samples (hardware
  error bits and stale flags are taken from the earlier one); a bracket wider than 50 ms marks
  the frame misaligned.

Frames before every required stream has started or after one has ended are dropped; interior
frames that miss a tolerance are kept, flagged ``aligned = false`` and counted in the report.

Episodes whose metadata marks them void (the recorder saw an arm driver trip or a bus go silent:
``void``, ``void_reason``) are left out, named with their reason and listed under ``void`` in the
report; ``keep_void`` (``--keep-void``) converts them, listed under ``void_kept``.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from na_common import topics as suite_topics
from na_common.config_files import ConfigFileError, resolve_config
from na_description.spec import JointNameError, joint_order, robot_option_help
from na_description.yaml_file import load_yaml_mapping
from na_training import CONFIG_DIR, align, labels
from na_training.align import NS_PER_S, AlignmentError
from na_training.cdr_columns import CdrError, MessageGroup, message_groups
from na_training.labels import LabelError, fixture_from_mapping
from na_training.nad import (
    AXES,
    OPTIONAL_ARM_STATE_JOINT_FIELDS,
    Column,
    NadError,
    NadWriter,
    build_columns,
    write_episode_table,
)
from na_training.progress import ItemProgress
from na_training.workers import OrderedWorkers, available_cpus

if TYPE_CHECKING:
    from na_common.episode_bag import RawMessages

# Built-in defaults; na_training/config/convert.yaml repeats them with comments (a test keeps both equal).
DEFAULT_CONFIG: dict[str, Any] = {
    "topics": {
        "follower": suite_topics.FOLLOWER_ARM_STATE,
        "leader": suite_topics.LEADER_ARM_STATE,
        "command": suite_topics.FOLLOWER_COMMAND,
        "ft": suite_topics.FT_WRENCH,
        "grasp": suite_topics.GRASP,
        "truth_wrench": suite_topics.TRUTH_WRENCH,
        "truth_contact": suite_topics.TRUTH_CONTACT,
    },
    "require_leader": True,
    "tolerance": {
        "command_s": 0.015,
        "leader_s": 0.015,
        "ft_half_window_s": 0.005,
        "truth_s": 0.015,
        "follower_gap_s": 0.05,
    },
    "fixture": {"position": [0.22, 0.0, 0.06], "rpy": [0.0, 0.0, 0.0]},
    "tare": {"force": [0.0, 0.0, 0.0], "initial_seconds": 0.0},
    "contact_threshold_n": 0.5,
    "payload_valid_channels": ["x", "y", "z"],
    "split_seed": 0,
    "metadata_defaults": None,
}

# Role -> message type, through the one topic table.
EXPECTED_TYPES = {role: suite_topics.EPISODE_TOPICS[topic] for role, topic in DEFAULT_CONFIG["topics"].items()}


class ConvertError(RuntimeError):
    """A bag or configuration cannot be converted; the message names the bag and the reason."""


# ----------------------------------------------------------------------------------------- config

# Sections taken as given (the fixture may carry the rig's extra keys, e.g. half_size_m).
_FREE_FORM_KEYS = ("fixture", "metadata_defaults")


def _merge(base: dict[str, Any], override: Mapping[str, Any], where: str) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if key not in base:
            raise ConvertError(f"{where}: unknown key '{key}' (known: {', '.join(sorted(base))})")
        if key in _FREE_FORM_KEYS:
            merged[key] = copy.deepcopy(value)
        elif isinstance(base[key], dict) and isinstance(value, Mapping):
            merged[key] = _merge(base[key], value, f"{where}.{key}")
        else:
            merged[key] = value
    return merged


def load_config(path: str | Path | None = None) -> dict[str, Any]:
    """Converter configuration: the built-in defaults, overridden by a YAML file when given."""
    if path is None:
        return copy.deepcopy(DEFAULT_CONFIG)
    try:
        config_path = resolve_config(path, CONFIG_DIR, "converter config")
    except ConfigFileError as err:
        raise ConvertError(str(err)) from None
    raw = load_yaml_mapping(config_path, ConvertError, "converter config")
    return _merge(DEFAULT_CONFIG, raw, str(config_path))


def validate_config(config: Mapping[str, Any]) -> None:
    """Reject configuration values that would silently produce wrong labels."""
    for key, value in config["tolerance"].items():
        if not isinstance(value, int | float) or not np.isfinite(value) or value < 0:
            raise ConvertError(f"config tolerance.{key} must be a non-negative number of seconds, got {value!r}")
    threshold = config["contact_threshold_n"]
    if not isinstance(threshold, int | float) or not np.isfinite(threshold) or threshold < 0:
        raise ConvertError(f"config contact_threshold_n must be a non-negative number, got {threshold!r}")
    unknown = set(config["payload_valid_channels"]) - set(AXES)
    if unknown:
        raise ConvertError(f"config payload_valid_channels: unknown axes {sorted(unknown)} (use x, y, z)")
    tare = config["tare"]
    if len(tare["force"]) != 3 or not float(tare["initial_seconds"]) >= 0:
        raise ConvertError("config tare: force needs three values and initial_seconds must be >= 0")
    try:
        fixture_from_mapping(config["fixture"], "config fixture")
    except LabelError as err:
        raise ConvertError(str(err)) from err


# ----------------------------------------------------------------------------------------- bag input

@dataclass
class Stream:
    """One topic's samples: stamps (ns, sorted) and named value arrays (first axis = samples)."""

    stamps: np.ndarray
    values: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.stamps)


ARM_VECTOR_FIELDS = ("position", "velocity", "goal_position", "current", "pwm", "input_voltage", "temperature")
# Per-joint fields a servo family may leave empty (XM430 has no Present Load) or a bag's older message
# definition may lack: NaN when absent.
ARM_OPTIONAL_VECTOR_FIELDS = tuple(OPTIONAL_ARM_STATE_JOINT_FIELDS)
ARM_FLAG_FIELDS: dict[str, type] = {"hardware_error": np.uint8, "stale": bool}   # empty sequence -> zeros
ARM_SCALAR_FIELDS = ("gripper_slide", "goal_gripper_slide", "bus_cycle_duration")


def _joint_order(group: MessageGroup, joint_names: Sequence[str], what: str) -> tuple[np.ndarray, int]:
    """Indices that put a group's per-joint values in ``joint_names`` order (the suite's one name mapping,
    :func:`na_description.spec.joint_order`), and the count its messages must carry."""
    names = list(group.string("name"))
    if not names:                  # unnamed messages carry the joints in the robot's order
        return np.arange(len(joint_names), dtype=np.int64), len(joint_names)
    try:
        order = joint_order(names, joint_names, allow_extra=True)   # extra servos' values are left out
    except JointNameError as err:
        raise ConvertError(f"{what}: message {group.first}: {err}") from None
    return order.astype(np.int64), len(names)


def _arm_state_group(group: MessageGroup, joint_names: Sequence[str], what: str) -> dict[str, np.ndarray]:
    order, expected = _joint_order(group, joint_names, what)
    values: dict[str, np.ndarray] = {}
    for key in ARM_VECTOR_FIELDS:
        vector = group.number(key)
        if vector.shape[1] != expected:
            raise ConvertError(f"{what}: message {group.first} field {key} has {vector.shape[1]} values, expected "
                               f"{expected}")
        values[key] = vector[:, order].astype(np.float64, copy=False)
    for key in ARM_OPTIONAL_VECTOR_FIELDS:
        vector = group.number(key) if key in group.layout.numbers else np.zeros((len(group.indices), 0))
        if vector.shape[1] not in (0, expected):
            raise ConvertError(f"{what}: message {group.first} field {key} has {vector.shape[1]} values, expected "
                               f"{expected} (or none)")
        values[key] = vector[:, order].astype(np.float64) if vector.shape[1] else \
            np.full((len(group.indices), len(joint_names)), np.nan)
    for key, dtype in ARM_FLAG_FIELDS.items():
        flags = group.number(key)
        if flags.shape[1] not in (0, expected):
            raise ConvertError(f"{what}: message {group.first} field {key} has {flags.shape[1]} values, expected "
                               f"{expected} (or none)")
        values[key] = flags[:, order].astype(dtype) if flags.shape[1] else \
            np.zeros((len(group.indices), len(joint_names)), dtype=dtype)
    for key in ARM_SCALAR_FIELDS:
        values[key] = group.number(key).astype(np.float64, copy=False)
    return values


def _command_group(group: MessageGroup, joint_names: Sequence[str], what: str) -> dict[str, np.ndarray]:
    order, expected = _joint_order(group, joint_names, what)
    position = group.number("position")
    if position.shape[1] != expected:
        raise ConvertError(f"{what}: message {group.first} has {position.shape[1]} positions, expected {expected}")
    return {"position": position[:, order].astype(np.float64, copy=False),
            "gripper_slide": group.number("gripper_slide").astype(np.float64, copy=False)}


def _wrench_group(group: MessageGroup) -> dict[str, np.ndarray]:
    force = np.stack([group.number(f"wrench.force.{a}") for a in AXES], axis=1)
    return {"force": force.astype(np.float64, copy=False)}


def _bool_group(group: MessageGroup) -> dict[str, np.ndarray]:
    return {"data": group.number("data").astype(np.float64)}


def _header_stamps(group: MessageGroup) -> np.ndarray:
    return group.number("header.stamp.sec").astype(np.int64) * NS_PER_S + group.number("header.stamp.nanosec")


def _scatter(groups: Sequence[MessageGroup], parts: Sequence[dict[str, np.ndarray]], count: int,
             empty: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-group values put back in message order (``empty``: zero-length arrays of the right shapes)."""
    if len(groups) == 1:
        return dict(parts[0])
    out: dict[str, np.ndarray] = {}
    for key, template in empty.items():
        out[key] = np.empty((count, *template.shape[1:]), dtype=template.dtype)
        for group, values in zip(groups, parts, strict=True):
            out[key][group.indices] = values[key]
    return out


def _empty_values(role: str, n_joints: int) -> dict[str, np.ndarray]:
    """Zero-length value arrays of a role (a topic that has no messages)."""
    if role in ("follower", "leader"):
        empty = {key: np.zeros((0, n_joints)) for key in ARM_VECTOR_FIELDS + ARM_OPTIONAL_VECTOR_FIELDS}
        empty.update({key: np.zeros((0, n_joints), dtype=dtype) for key, dtype in ARM_FLAG_FIELDS.items()})
        empty.update({key: np.zeros(0) for key in ARM_SCALAR_FIELDS})
        return empty
    if role == "command":
        return {"position": np.zeros((0, n_joints)), "gripper_slide": np.zeros(0)}
    if EXPECTED_TYPES[role] == suite_topics.BOOL_TYPE:
        return {"data": np.zeros(0)}
    return {"force": np.zeros((0, 3))}


def _decode_groups(role: str, groups: Sequence[MessageGroup], joint_names: Sequence[str], what: str
                   ) -> list[dict[str, np.ndarray]]:
    """Each group's values; the first group (so the first message) that breaks a rule raises."""
    if role in ("follower", "leader"):
        return [_arm_state_group(g, joint_names, what) for g in groups]
    if role == "command":
        return [_command_group(g, joint_names, what) for g in groups]
    if EXPECTED_TYPES[role] == suite_topics.BOOL_TYPE:
        return [_bool_group(g) for g in groups]
    return [_wrench_group(g) for g in groups]


@dataclass
class BagContents:
    path: Path
    metadata: dict[str, Any]
    streams: dict[str, Stream]
    topic_counts: dict[str, int]


def _bag_metadata(path: Path, config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bag's rosbag2 metadata and its episode metadata (or the config's ``metadata_defaults``)."""
    from na_common.episode_bag import EpisodeBagError, episode_metadata, read_rosbag2_info
    from na_common.episode_bag.layout import SIDECAR_NAME

    if not (path / "metadata.yaml").is_file():
        raise ConvertError(f"{path}: not a rosbag2 directory (no metadata.yaml)")
    try:
        info = read_rosbag2_info(path)
        metadata = episode_metadata(path, info)
    except EpisodeBagError as err:
        raise ConvertError(str(err)) from err       # names the file
    if metadata is not None:
        return info, metadata
    defaults = config.get("metadata_defaults")
    if not defaults:
        raise ConvertError(f"{path}: no episode metadata (no custom_data in metadata.yaml, no {SIDECAR_NAME}); "
                           "set metadata_defaults in the converter config to convert plain rosbag2 bags")
    return info, dict(defaults)


def _check_robot(path: Path, recorded: Any, robot: str) -> None:
    """Refuse a bag whose metadata names another robot than ``robot`` (the spec name converted for)."""
    from na_description import SpecError, load_spec

    if not recorded:               # recorders before the robot key: the joint names still have to match
        return
    try:
        same = load_spec(str(recorded)).name == robot
    except SpecError:
        same = False
    if not same:
        raise ConvertError(f"{path}: the bag was recorded with robot '{recorded}', this conversion is for "
                           f"'{robot}' (give --robot {recorded})")


def read_bag(path: str | Path, config: Mapping[str, Any], joint_names: Sequence[str],
             robot: str | None = None) -> BagContents:
    """Read the streams the converter needs from one rosbag2 directory (MCAP or sqlite3); with ``robot`` (a
    spec name), a bag whose metadata names another robot is refused.

    Messages are not deserialised one by one: their CDR bytes are read as columns
    (``na_training.cdr_columns``), which gives the values rosbags' deserialiser gives.
    """
    from na_common.episode_bag import EpisodeBagError, read_raw_messages, topic_summaries, validate_metadata

    path = Path(path)
    info, metadata = _bag_metadata(path, config)
    try:
        metadata = validate_metadata(metadata)
        summaries = topic_summaries(info)
    except (EpisodeBagError, KeyError, TypeError, ValueError) as err:
        raise ConvertError(f"{path}: {err}") from err
    if robot is not None:
        _check_robot(path, metadata.get("robot"), robot)
    available = {name: t.msgtype for name, t in summaries.items()}
    counts = {name: t.count for name, t in summaries.items()}
    if sum(counts.values()) == 0:
        raise ConvertError(f"{path}: the bag is empty (no messages)")
    wanted, required = _wanted_streams(path, metadata, config, available)
    for role, topic in wanted.items():
        if available[topic] != EXPECTED_TYPES[role]:
            raise ConvertError(f"{path}: topic {topic} has type {available[topic]!r}, expected "
                               f"{EXPECTED_TYPES[role]}")
    try:
        raw = read_raw_messages(path, sorted(set(wanted.values())), info)
    except EpisodeBagError as err:
        raise ConvertError(str(err)) from err
    silent = [f"{wanted[role]} ({role})" for role in required if not len(raw[wanted[role]])]
    if silent:
        raise ConvertError(f"{path}: no messages on required topic(s) {', '.join(silent)}")
    streams = {role: _to_stream(role, raw[topic], path, joint_names) for role, topic in wanted.items()}
    return BagContents(path=path, metadata=metadata, streams=streams, topic_counts=counts)


def _wanted_streams(path: Path, metadata: Mapping[str, Any], config: Mapping[str, Any],
                    available: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Role -> topic of the streams to read, and the roles that are required."""
    topics = config["topics"]
    required = ["follower", "command"] + (["leader"] if config["require_leader"] else [])
    source = metadata["force_source"]
    if source == "ft_sensor":
        required.append("ft")
    elif source == "payload":
        required.append("grasp")
    missing = [f"{topics[r]} ({r})" for r in required if topics[r] not in available]
    if missing:
        present = ", ".join(sorted(available)) or "none"
        raise ConvertError(f"{path}: missing topic(s) {', '.join(missing)} for force_source={source}; "
                           f"topics present: {present}")
    optional = [r for r in ("leader", "ft", "grasp", "truth_wrench", "truth_contact")
                if r not in required and topics[r] in available]
    return {role: topics[role] for role in required + optional}, required


def _to_stream(role: str, raw: RawMessages, path: Path, joint_names: Sequence[str]) -> Stream:
    from na_common.episode_bag import EpisodeBagError

    what = f"{path}: {raw.topic}"
    try:
        # The definition stored in the bag: bags recorded before a message changed still decode (fields
        # they lack, e.g. ArmState.load, are not read here).
        groups = message_groups(raw, raw.fielddefs())
    except (CdrError, EpisodeBagError) as err:
        raise ConvertError(f"{what}: cannot decode messages ({err})") from err
    parts = _decode_groups(role, groups, joint_names, what)
    values = _scatter(groups, parts, len(raw), _empty_values(role, len(joint_names)))
    if EXPECTED_TYPES[role] == suite_topics.BOOL_TYPE:
        # std_msgs/Bool has no header: the bag (record) time is its stamp.
        stamps = raw.log_times.astype(np.int64)
    else:
        stamps = np.zeros(len(raw), dtype=np.int64)
        for group in groups:
            stamps[group.indices] = _header_stamps(group)
    try:
        align.check_monotonic(stamps, what, strict=role == "follower")
    except AlignmentError as err:
        raise ConvertError(str(err)) from err
    return Stream(stamps=stamps, values=values)


# ----------------------------------------------------------------------------------------- alignment

@dataclass
class EpisodeFrames:
    """Aligned frames of one episode plus what the report says about it."""

    data: dict[str, np.ndarray]
    report: dict[str, Any]
    has_truth: bool


def _ns(seconds: float) -> int:
    return round(float(seconds) * NS_PER_S)


def _follower_at(follower: Stream, targets: np.ndarray, resampled: bool, gap_ns: int
                 ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    if not resampled:
        return dict(follower.values), np.ones(len(targets), dtype=bool)
    out = {}
    for key, values in follower.values.items():
        if key in ("hardware_error", "stale"):
            index = np.searchsorted(follower.stamps, targets, side="right") - 1
            out[key] = values[np.clip(index, 0, None)]
        else:
            out[key] = align.interpolate_linear(follower.stamps, values, targets)
    return out, align.bracket_gap(follower.stamps, targets) <= gap_ns


def align_episode(contents: BagContents, config: Mapping[str, Any], joint_names: Sequence[str],
                  period_ns: int | None, effort_signal: str, condition_joint: str) -> EpisodeFrames:
    """Align one bag's streams to frames and make the labels (``effort_signal`` and ``condition_joint``: the
    robot spec's; a frame is valid only where its effort signal is finite)."""
    path, streams = contents.path, contents.streams
    tol = config["tolerance"]
    follower = streams["follower"]
    if len(follower) == 0:
        raise ConvertError(f"{path}: no messages on {config['topics']['follower']} (nothing to align to)")
    resampled = period_ns is not None
    targets = (align.uniform_grid(follower.stamps[0], follower.stamps[-1], period_ns) if resampled
               else follower.stamps.copy())
    state, follower_ok = _follower_at(follower, targets, resampled, _ns(tol["follower_gap_s"]))

    checks = {"follower": follower_ok}
    command = streams["command"]
    command_position, checks["command"] = align.hold_within(command.stamps, command.values["position"], targets,
                                                            _ns(tol["command_s"]))
    command_slide, _ = align.hold_within(command.stamps, command.values["gripper_slide"], targets,
                                         _ns(tol["command_s"]))
    n = len(joint_names)
    if "leader" in streams:
        leader = streams["leader"]
        leader_position, leader_ok = align.hold_within(leader.stamps, leader.values["position"], targets,
                                                       _ns(tol["leader_s"]))
        leader_slide, _ = align.hold_within(leader.stamps, leader.values["gripper_slide"], targets,
                                            _ns(tol["leader_s"]))
        if config["require_leader"]:
            checks["leader"] = leader_ok
    else:
        leader_position, leader_slide = np.full((len(targets), n), np.nan), np.full(len(targets), np.nan)

    # Drop the head and tail where a required stream has not started or has ended.
    started = np.logical_and.reduce(list(checks.values()))
    if not started.any():
        raise ConvertError(f"{path}: no frame where every required stream ({', '.join(checks)}) is within "
                           "tolerance; check the stamps and the tolerance section of the config")
    first, last = int(np.argmax(started)), len(started) - int(np.argmax(started[::-1])) - 1
    keep = slice(first, last + 1)
    targets = targets[keep]
    aligned = started[keep]

    frames: dict[str, np.ndarray] = {"stamp_ns": targets, "time": (targets - targets[0]) / NS_PER_S}
    for k, j in enumerate(joint_names):
        frames[f"command_position_{j}"] = command_position[keep, k]
        frames[f"leader_position_{j}"] = leader_position[keep, k]
        for key in ("position", "velocity", "goal_position", "current", "pwm", "input_voltage", "temperature",
                    "hardware_error", "stale", *ARM_OPTIONAL_VECTOR_FIELDS):
            frames[f"{key}_{j}"] = state[key][keep, k]
    frames["command_gripper_slide"] = command_slide[keep]
    frames["leader_gripper_slide"] = leader_slide[keep]
    for key in ("gripper_slide", "goal_gripper_slide", "bus_cycle_duration"):
        frames[key] = state[key][keep]

    stale = state["stale"][keep].any(axis=1)
    hardware_error = state["hardware_error"][keep].any(axis=1)
    if not np.isfinite(state[effort_signal][keep]).any():
        raise ConvertError(f"{path}: the follower ArmState carries no {effort_signal} values, which this robot's "
                           f"model reads as effort (a bag of another robot? see --robot)")
    numeric = np.concatenate([state[k][keep].reshape(len(targets), -1) for k in
                              ("position", "velocity", effort_signal, "input_voltage", "temperature",
                               "gripper_slide")], axis=1)
    non_finite = ~np.isfinite(numeric).all(axis=1) | ~np.isfinite(command_position[keep]).all(axis=1)
    frames["aligned"] = aligned
    frames["frame_valid"] = aligned & ~stale & ~hardware_error & ~non_finite

    force_report = _label_frames(frames, contents, config, targets, condition_joint)
    has_truth = _truth_frames(frames, streams, config, targets)

    misaligned = {name: int((~ok[keep]).sum()) for name, ok in checks.items()}
    report = {
        "follower_samples": len(follower),
        "frames": len(targets),
        "dropped_head": first,
        "dropped_tail": len(started) - last - 1,
        "misaligned": int((~aligned).sum()),
        "misaligned_by_stream": misaligned,
        "invalid_stale": int(stale.sum()),
        "invalid_hardware_error": int(hardware_error.sum()),
        "invalid_non_finite": int(non_finite.sum()),
        "invalid_frames": int((~frames["frame_valid"]).sum()),
        **force_report,
    }
    return EpisodeFrames(data=frames, report=report, has_truth=has_truth)


def _label_frames(frames: dict[str, np.ndarray], contents: BagContents, config: Mapping[str, Any],
                  targets: np.ndarray, condition_joint: str) -> dict[str, Any]:
    meta, streams, path = contents.metadata, contents.streams, contents.path
    t = len(targets)
    source = meta["force_source"]
    try:
        labels.check_force_source(source)
        condition = labels.condition_labels(meta["condition"], condition_joint)
        if source == "ft_sensor":
            fixture = fixture_from_mapping(meta["fixture"], f"{path}: metadata fixture") \
                if meta.get("fixture") else fixture_from_mapping(config["fixture"], "config fixture")
            ft = streams["ft"]
            tare = np.asarray(config["tare"]["force"], dtype=np.float64)
            initial = float(config["tare"]["initial_seconds"])
            if initial > 0 and len(ft):
                window = ft.stamps <= ft.stamps[0] + _ns(initial)
                tare = tare + np.nanmean(ft.values["force"][window], axis=0)
            sensor, valid = align.window_mean(ft.stamps, ft.values["force"], targets,
                                              _ns(config["tolerance"]["ft_half_window_s"]))
            force = labels.ft_force_label(np.where(valid, sensor, 0.0), fixture.rotation, tare)
            # A rotated channel mixes sensor channels: it is valid only if all of them were.
            valid = np.repeat(valid.all(axis=1, keepdims=True), 3, axis=1)
            contact = labels.contact_from_force(force, valid, float(config["contact_threshold_n"]))
        elif source == "payload":
            grasp = align.hold_state(streams["grasp"].stamps, streams["grasp"].values["data"], targets, 0.0) > 0.5
            force = labels.payload_force_label(grasp, float(meta["payload_grams"]))
            channels = set(config["payload_valid_channels"])      # checked by validate_config
            valid = np.tile([a in channels for a in AXES], (t, 1))
            contact = grasp
        else:
            force, valid, contact = np.zeros((t, 3)), np.ones((t, 3), dtype=bool), np.zeros(t, dtype=bool)
    except LabelError as err:
        raise ConvertError(f"{path}: {err}") from err
    force = np.where(valid, force, np.nan)
    for k, a in enumerate(AXES):
        frames[f"force_{a}"] = force[:, k]
        frames[f"force_valid_{a}"] = valid[:, k]
    frames["contact"] = contact
    frames[f"condition_{condition_joint}"] = np.full(t, condition[condition_joint])
    return {"force_invalid": int((~valid).any(axis=1).sum()), "contact_frames": int(contact.sum())}


def _truth_frames(frames: dict[str, np.ndarray], streams: Mapping[str, Stream], config: Mapping[str, Any],
                  targets: np.ndarray) -> bool:
    if "truth_wrench" not in streams and "truth_contact" not in streams:
        return False
    t = len(targets)
    if "truth_wrench" in streams:
        wrench = streams["truth_wrench"]
        force, ok = align.nearest_within(wrench.stamps, wrench.values["force"], targets,
                                         _ns(config["tolerance"]["truth_s"]))
    else:
        force, ok = np.full((t, 3), np.nan), np.zeros(t, dtype=bool)
    for k, a in enumerate(AXES):
        frames[f"truth_force_{a}"] = force[:, k]
    if "truth_contact" in streams:
        contact = streams["truth_contact"]
        frames["truth_contact"] = align.hold_state(contact.stamps, contact.values["data"], targets, 0.0) > 0.5
    else:
        frames["truth_contact"] = np.zeros(t, dtype=bool)
    frames["truth_valid"] = ok
    return True


def _add_missing_truth(frames: dict[str, np.ndarray]) -> None:
    t = len(frames["time"])
    for a in AXES:
        frames[f"truth_force_{a}"] = np.full(t, np.nan)
    frames["truth_contact"] = np.zeros(t, dtype=bool)
    frames["truth_valid"] = np.zeros(t, dtype=bool)


# ----------------------------------------------------------------------------------------- driver

def expand_bag_paths(paths: Sequence[str | Path]) -> list[Path]:
    """Bag directories from the arguments: a bag itself, or a folder of bags (one level), sorted."""
    bags: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise ConvertError(f"bag path not found: {path}")
        if (path / "metadata.yaml").is_file():
            bags.append(path)
            continue
        children = sorted(p for p in path.iterdir() if p.is_dir() and (p / "metadata.yaml").is_file()) \
            if path.is_dir() else []
        if not children:
            raise ConvertError(f"{path}: neither a rosbag2 directory (metadata.yaml) nor a folder of them")
        bags.extend(children)
    unique = sorted(set(bags), key=lambda p: p.as_posix())
    if not unique:
        raise ConvertError("no bags given")
    return unique


@dataclass
class ConvertResult:
    out: Path
    episodes: int
    frames: int
    skipped: list[dict[str, str]]
    report: dict[str, Any]
    void: list[dict[str, Any]] = field(default_factory=list)   # void episodes left out: source_bag, episode, reason
    messages: int = 0              # messages in the converted and skipped bags, every topic
    seconds: float = 0.0           # wall-clock time of the conversion


def default_jobs() -> int:
    """Worker processes ``convert`` uses unless told: one per CPU this process may use."""
    return available_cpus()


@dataclass(frozen=True)
class EpisodeJob:
    """What converting one bag needs besides the bag (sent to every worker task; picklable)."""

    config: dict[str, Any]
    robot: str
    joint_names: list[str]
    period_ns: int | None
    effort_signal: str
    condition_joint: str
    with_truth: bool
    columns: list[Column]
    keep_void: bool = False


@dataclass
class BagOutcome:
    """One converted bag (its episode file staged at ``staged``), or why it could not be converted."""

    path: Path
    row: dict[str, Any] | None = None
    report: dict[str, Any] | None = None
    native_dt_ns: float | None = None
    staged: Path | None = None
    error: str | None = None
    void: str | None = None          # the episode is void (the recorded reason) and was left out
    void_kept: str | None = None     # the episode is void (the recorded reason) and was converted (keep_void)


def convert_bag(job: EpisodeJob, path: Path, staged: Path) -> BagOutcome:
    """Read, align and label one bag and write its episode file to ``staged`` (runs in a worker)."""
    from na_common.episode_bag.metadata import void_reason

    try:
        if not job.keep_void and (reason := void_reason(_bag_metadata(path, job.config)[1])) is not None:
            return BagOutcome(path, void=reason)          # left out before any message is read
        contents = read_bag(path, job.config, job.joint_names, job.robot)
        frames = align_episode(contents, job.config, job.joint_names, job.period_ns, job.effort_signal,
                               job.condition_joint)
    except ConvertError as err:
        return BagOutcome(path, error=str(err))
    if job.with_truth and not frames.has_truth:
        _add_missing_truth(frames.data)
    write_episode_table(staged, job.columns, frames.data)
    stamps = frames.data["stamp_ns"]
    return BagOutcome(path, row=_episode_row(contents, frames, job.condition_joint), report=frames.report,
                      staged=staged, native_dt_ns=float(np.median(np.diff(stamps))) if len(stamps) > 1 else None,
                      void_kept=void_reason(contents.metadata))


def _outcome(path: Path, result: Any) -> BagOutcome:
    """A task's outcome; a worker that died or failed unexpectedly stops the run with the bag's name."""
    try:
        return result()
    except BrokenProcessPool as err:
        raise ConvertError(f"{path}: the worker process converting this bag died ({err})") from err
    except Exception as err:
        raise ConvertError(f"{path}: conversion failed ({type(err).__name__}: {err})") from err


def convert(bags: Sequence[str | Path], out: str | Path, *, config: Mapping[str, Any] | None = None,
            rate_hz: float | None = None, seed: int | None = None, overwrite: bool = False,
            skip_bad: bool = False, progress: bool = True, jobs: int | None = None,
            robot: str | None = None, keep_void: bool = False) -> ConvertResult:
    """Convert episode bags to a NAD at ``out`` (written atomically; nothing is written on error).

    ``jobs`` worker processes convert the bags (default: one per CPU); the dataset is the same
    byte for byte whatever their number. ``robot``: the arm the bags were recorded with (a shipped spec
    name such as ``so101``, or a spec path; default the OpenManipulator-X). Episodes marked void are left
    out (``ConvertResult.void``, the report's ``void``) unless ``keep_void``.
    """
    from na_description import SpecError, load_spec

    started = time.perf_counter()
    config = copy.deepcopy(dict(config) if config is not None else DEFAULT_CONFIG)
    validate_config(config)
    try:
        spec = load_spec(robot)
    except SpecError as exc:
        raise ConvertError(f"--robot: {exc}") from None
    if rate_hz is not None and (not np.isfinite(rate_hz) or rate_hz <= 0):
        raise ConvertError(f"--rate must be a positive number of Hz, got {rate_hz}")
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ConvertError(f"--jobs must be at least 1, got {jobs}")
    split_seed = int(config["split_seed"] if seed is None else seed)
    paths = expand_bag_paths(bags)
    with OrderedWorkers(min(jobs, len(paths))) as workers:
        recorded = _recorded_topics_of(paths, workers)
        truth_topics = {config["topics"]["truth_wrench"], config["topics"]["truth_contact"]}
        with_truth = any(truth_topics & set(topics) for topics in recorded)
        optional = ("load",) if spec.effort_signal == "load" else ()
        columns = build_columns(spec.joint_names, [spec.condition_joint], with_truth, optional)
        job = EpisodeJob(config=config, robot=spec.name, joint_names=list(spec.joint_names), with_truth=with_truth,
                         columns=columns, effort_signal=spec.effort_signal, condition_joint=spec.condition_joint,
                         period_ns=round(NS_PER_S / rate_hz) if rate_hz is not None else None, keep_void=keep_void)
        writer = NadWriter(out, columns, overwrite=overwrite)
        try:
            converted = _convert_all(paths, recorded, job, writer, workers, skip_bad=skip_bad, progress=progress)
            report = {"episodes": converted.reports, "skipped": converted.skipped,
                      "incomplete": converted.incomplete, "void": converted.void, "void_kept": converted.void_kept,
                      "totals": _totals(converted.reports)}
            writer.finish(_dataset_info(spec, job, rate_hz, converted.native_dt_ns), report, split_seed)
        except BaseException:
            workers.close()          # no worker may still write into the folder that is removed
            writer.abort()
            raise
    return ConvertResult(out=Path(out), episodes=len(converted.reports), frames=report["totals"]["frames"],
                         skipped=converted.skipped, report=report, messages=sum(sum(t.values()) for t in recorded),
                         seconds=time.perf_counter() - started, void=converted.void)


@dataclass
class _Converted:
    """What the bags gave: report rows of the episodes, skipped bags, native frame steps (ns)."""

    reports: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    native_dt_ns: list[float] = field(default_factory=list)
    incomplete: list[dict[str, Any]] = field(default_factory=list)   # episodes whose recording did not finish
    void: list[dict[str, Any]] = field(default_factory=list)         # void episodes left out
    void_kept: list[dict[str, Any]] = field(default_factory=list)    # void episodes converted (keep_void)


def _convert_all(paths: Sequence[Path], recorded: Sequence[Mapping[str, int]], job: EpisodeJob, writer: NadWriter,
                 workers: OrderedWorkers, *, skip_bad: bool, progress: bool) -> _Converted:
    """Convert every bag in the workers and take their episodes in bag order."""
    done = _Converted()
    shown = ItemProgress("convert", len(paths), "bag", enabled=progress)
    try:
        tasks = [(job, path, writer.staged_path(k)) for k, path in enumerate(paths)]
        for k, result in enumerate(workers.run(convert_bag, tasks)):
            outcome = _outcome(paths[k], result)
            shown.advance(sum(recorded[k].values()), skipped=outcome.error is not None or outcome.void is not None)
            if outcome.void is not None:
                done.void.append({"source_bag": paths[k].as_posix(), "episode": paths[k].name,
                                  "reason": outcome.void})
                continue
            if outcome.error is not None:
                if not skip_bad:
                    raise ConvertError(outcome.error)
                done.skipped.append({"source_bag": paths[k].as_posix(), "error": outcome.error})
                continue
            index = writer.add_staged_episode(outcome.row, outcome.staged)
            done.reports.append({"episode_index": index, "source_bag": paths[k].as_posix(), **outcome.report})
            if not outcome.row["complete"]:
                done.incomplete.append({"episode_index": index, "source_bag": paths[k].as_posix(),
                                        "recovered": outcome.row["recovered"]})
            if outcome.void_kept is not None:
                done.void_kept.append({"episode_index": index, "source_bag": paths[k].as_posix(),
                                       "reason": outcome.void_kept})
            if outcome.native_dt_ns is not None:
                done.native_dt_ns.append(outcome.native_dt_ns)
    finally:
        shown.close()
    if not done.reports:
        raise ConvertError("no episode could be converted" + "".join(f"\n  {s['error']}" for s in done.skipped)
                           + "".join(f"\n  {v['source_bag']}: void: {v['reason']} (--keep-void converts it)"
                                     for v in done.void))
    return done


def _dataset_info(spec: Any, job: EpisodeJob, rate_hz: float | None, native_dt_ns: Sequence[float]
                  ) -> dict[str, Any]:
    """meta/info.json fields the converter knows (the writer adds the schema, splits and columns)."""
    period_ns = job.period_ns
    frame_period = period_ns / NS_PER_S if period_ns else (float(np.median(native_dt_ns)) / NS_PER_S
                                                           if native_dt_ns else None)
    columns = job.columns
    return {
        "robot": spec.name,
        "base_frame": spec.base_frame,
        "joint_names": job.joint_names,
        "condition_joints": [job.condition_joint],
        "effort_signal": job.effort_signal,
        "resampled": period_ns is not None,
        "rate_hz": (1.0 / frame_period) if frame_period else None,
        "frame_period_s": frame_period,
        "force_label": {"frame": spec.base_frame, "unit": "N",
                        "convention": "force the environment exerts on the robot at the tool point"},
        "feature_columns": [c.name for c in columns if c.group in
                            ("command", "leader", "proprioception", "telemetry")],
        "label_columns": [c.name for c in columns if c.group == "label"],
        "evaluation_columns": [c.name for c in columns if c.group == "evaluation"],
        "converter": {"config": job.config, "rate_hz": rate_hz},
    }


def _recorded_topics_of(paths: Sequence[Path], workers: OrderedWorkers, batch: int = 32) -> list[dict[str, int]]:
    """:func:`_recorded_topics` of every bag, read by the workers in batches."""
    batches = [(list(paths[k:k + batch]),) for k in range(0, len(paths), batch)]
    recorded: list[dict[str, int]] = []
    for (some,), result in zip(batches, workers.run(_recorded_topics_batch, batches), strict=True):
        try:
            recorded.extend(result())
        except BrokenProcessPool as err:
            raise ConvertError(f"the worker process reading the metadata of {some[0]} ... {some[-1]} died "
                               f"({err})") from err
    return recorded


def _recorded_topics_batch(paths: Sequence[Path]) -> list[dict[str, int]]:
    return [_recorded_topics(path) for path in paths]


def _recorded_topics(path: Path) -> dict[str, int]:
    """Message count of each topic that has messages, from a bag's metadata.yaml (no message is read)."""
    from na_common.episode_bag import EpisodeBagError, read_rosbag2_info, topic_summaries

    try:
        return {name: t.count for name, t in topic_summaries(read_rosbag2_info(path)).items() if t.count > 0}
    except (OSError, EpisodeBagError, KeyError, TypeError, ValueError):
        return {}          # read_bag reports the broken metadata with its reason


def _episode_row(contents: BagContents, frames: EpisodeFrames, condition_joint: str) -> dict[str, Any]:
    """The episodes.parquet fields of one converted bag."""
    meta = contents.metadata
    n_frames = len(frames.data["time"])
    return {
        "episode_id": str(meta.get("episode_id", contents.path.name)),
        "task": meta["task"],
        "task_instance": meta["task_instance"],
        "payload_grams": float(meta["payload_grams"]),
        "force_source": meta["force_source"],
        "condition": meta["condition"],
        "condition_label": labels.condition_labels(meta["condition"], condition_joint)[condition_joint],
        "frame_count": n_frames,
        "duration_s": float(frames.data["time"][-1]) if n_frames else 0.0,
        "source_bag": contents.path.as_posix(),
        "source": meta.get("source", ""),
        "seed": None if meta.get("seed") is None else int(meta["seed"]),
        "operator": meta.get("operator", ""),
        "notes": meta.get("notes", ""),
        "complete": bool(meta.get("complete", True)),
        "recovered": bool(meta.get("recovered", False)),
    }


REPORT_FIELDS = ("follower_samples", "frames", "dropped_head", "dropped_tail", "misaligned", "invalid_frames",
                 "force_invalid", "contact_frames")


def _totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return {key: int(sum(row[key] for row in rows)) for key in REPORT_FIELDS}


def format_report(report: Mapping[str, Any]) -> str:
    """The per-episode report as a fixed-width text table."""
    header = ("episode", *REPORT_FIELDS)
    rows = [[str(r["episode_index"])] + [str(r[k]) for k in REPORT_FIELDS] for r in report["episodes"]]
    rows.append(["total"] + [str(report["totals"][k]) for k in REPORT_FIELDS])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines += [f"skipped {s['source_bag']}: {s['error']}" for s in report["skipped"]]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------- CLI

def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not np.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive, got {text}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


EPILOG = ("Frames are the follower samples (or a uniform grid when resampling). Defaults "
          "(na_training/config/convert.yaml): command and leader latest sample at most 15 ms old, F/T mean within "
          "+-5 ms, grasp latest state. Labels: F/T force -R(f - tare) in the base frame, payload "
          "[0, 0, -m g] while grasped. Splits 8:1:1 per task instance. Output: DIR/meta/{info.json,"
          "episodes.parquet,report.json}, DIR/data/episode_NNNNNN.parquet. Exit status 2 on a bad bag "
          "or option (nothing is written).")


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.epilog = EPILOG
    parser.add_argument("bags", nargs="+", metavar="BAG",
                        help="episode bag directories (rosbag2 MCAP or sqlite3), or folders holding them")
    parser.add_argument("--out", required=True, metavar="NAD", help="output dataset directory")
    timing = parser.add_mutually_exclusive_group()
    timing.add_argument("--rate", type=_positive_float, metavar="HZ",
                        help="resample to a uniform rate (default: keep the follower samples)")
    timing.add_argument("--frame-period", type=_positive_float, metavar="S",
                        help="resample to frames of S seconds (e.g. 0.017, the paper's frame)")
    parser.add_argument("--config", metavar="YAML",
                        help="converter config (fixture, tare, tolerances; a file or the shipped name 'convert')")
    parser.add_argument("--robot", help=robot_option_help() + "; a bag of another arm is refused")
    parser.add_argument("--seed", type=int, help="split seed (default: split_seed of the config, 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    parser.add_argument("--skip-bad", action="store_true",
                        help="skip bags that cannot be converted (listed in the report) instead of stopping")
    parser.add_argument("--keep-void", action="store_true",
                        help="also convert episodes whose metadata marks them void (the recorder saw an arm driver "
                             "trip or a bus go silent); by default they are left out, each named with its reason")
    parser.add_argument("--jobs", type=_positive_int, metavar="N",
                        help="bags converted in N worker processes (default: one per CPU, here "
                             f"{default_jobs()}); the dataset does not depend on N")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress (a bar on a terminal, a line every 10 s in a log) and no report table")
    parser.set_defaults(handler=run_convert)
    return parser


def add_convert_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``convert`` on an ``argparse`` subparsers object (used by ``na-train``)."""
    parser = subparsers.add_parser(
        "convert", help="convert episode bags to a NAD v1 dataset",
        description="Convert rosbag2 episode bags into the Neural Actuation Dataset (NAD v1): align the "
                    "streams to the follower samples, make force/contact/condition labels, split 8:1:1 per "
                    "task instance and write Parquet plus meta/ (info, episodes, report).")
    return configure_parser(parser)


def run_convert(args: argparse.Namespace) -> int:
    """Run a parsed ``convert`` command; returns the exit status."""
    try:
        config = load_config(args.config)
        rate = 1.0 / args.frame_period if args.frame_period else args.rate
        result = convert(args.bags, args.out, config=config, rate_hz=rate, seed=args.seed,
                         overwrite=args.overwrite, skip_bad=args.skip_bad, progress=not args.quiet, jobs=args.jobs,
                         robot=args.robot, keep_void=args.keep_void)
    except (ConvertError, NadError, LabelError) as err:
        print(f"na-train convert: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(format_report(result.report))
    for void in result.void:
        print(f"skipped {void['episode']} ({void['source_bag']}): void: {void['reason']} (--keep-void converts it)")
    print(f"wrote {result.out}: {result.episodes} episodes, {result.frames} frames"
          + (f", {len(result.skipped)} bag(s) skipped" if result.skipped else "")
          + (f", {len(result.void)} void episode(s) left out" if result.void else "")
          + f" ({result.messages:,} messages in {result.seconds:.1f} s)")
    for episode in result.report["incomplete"]:
        how = "recovered after its recorder was killed" if episode["recovered"] else "stopped before it finished"
        print(f"note: episode {episode['episode_index']} ({episode['source_bag']}) is incomplete ({how}); it is "
              "kept, marked complete=false in meta/episodes.parquet", file=sys.stderr)
    for void in result.report["void_kept"]:
        print(f"note: episode {void['episode_index']} ({void['source_bag']}) is void ({void['reason']}); it is kept "
              "(--keep-void), listed under void_kept in meta/report.json", file=sys.stderr)
    return 0


def main_convert(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m na_training.convert BAGS... --out NAD``."""
    parser = configure_parser(argparse.ArgumentParser(
        prog="na-train convert", description="Convert rosbag2 episode bags into a NAD v1 dataset."))
    return run_convert(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main_convert())


__all__ = ["DEFAULT_CONFIG", "ConvertError", "add_convert_parser", "convert", "format_report", "load_config",
           "main_convert", "read_bag"]
