"""One topic's messages decoded into a :class:`Stream`: header stamps and value arrays, read as columns from
the CDR bytes (``na_training.cdr_columns``), per-joint values put in the robot spec's joint order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from na_common import topics as suite_topics
from na_common.episode_bag.layout import EpisodeBagError
from na_common.episode_bag.raw import RawMessages
from na_description.spec import JointNameError, joint_order
from na_training import align
from na_training.align import NS_PER_S, AlignmentError
from na_training.cdr_columns import CdrError, MessageGroup, message_groups
from na_training.convert.config import EXPECTED_TYPES, ConvertError
from na_training.nad import AXES, OPTIONAL_ARM_STATE_JOINT_FIELDS


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


def to_stream(role: str, raw: RawMessages, path: Path, joint_names: Sequence[str]) -> Stream:
    """The ``role``'s messages of one bag as a :class:`Stream` (stamps checked to run forward)."""
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
