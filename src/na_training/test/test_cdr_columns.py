"""Columnar CDR decoding (``na_training.cdr_columns``) against rosbags' deserialiser, message by message."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from na_common import episode_bag as eb
from na_training.cdr_columns import CdrError, message_groups

JOINTS = ["joint1", "joint2", "joint3", "joint4", "gripper"]


def _msg(msgtype: str, **fields: Any) -> Any:
    return eb.message_class(msgtype)(**fields)


def _arm_state(k: int, names: list[str], *, errors: int | None = None, stale: int | None = None) -> Any:
    n = len(names)
    q = np.linspace(-1.0, 1.0, n) * (k + 1) / 7.0
    return _msg(eb.ARM_STATE, header=eb.make_header(1_000_000_000 * k + 17 * k, "world"), role="follower", name=names,
                position=q, gripper_slide=0.001 * k, goal_gripper_slide=-0.5, velocity=q * 3, goal_position=q + 1e-9,
                current=-q, pwm=np.full(n, 0.25), load=np.zeros(0), input_voltage=np.full(n, 12.0 - k),
                temperature=q * 40,
                hardware_error=(np.arange(n if errors is None else errors) * k % 256).astype(np.uint8),
                stale=(np.arange(n if stale is None else stale) + k) % 2 == 0, timeout_errors=k, crc_errors=2 * k,
                partial_errors=3, dropped_cycles=2**32 - 1 - k, bus_cycle_duration=1e-3 * k)


def _raw_messages(msgtype: str, messages: list[Any], *, little_endian: bool = True) -> eb.RawMessages:
    """Messages serialised by rosbags, laid out with gaps in one buffer as a bag reader returns them."""
    blobs = [bytes(eb.typestore().serialize_cdr(m, msgtype, little_endian=little_endian)) for m in messages]
    gap = b"\xee" * 13
    offsets, at = [], len(gap)
    for blob in blobs:
        offsets.append(at)
        at += len(blob) + len(gap)
    buffer = np.frombuffer(gap + gap.join(blobs) + gap, dtype=np.uint8)
    return eb.RawMessages(topic="/t", msgtype=msgtype, log_times=np.arange(len(blobs), dtype=np.int64),
                          buffer=buffer, offsets=np.asarray(offsets, dtype=np.int64),
                          sizes=np.asarray([len(b) for b in blobs], dtype=np.int64))


def _resolve(message: Any, path: str) -> Any:
    value = message
    for part in path.split("."):
        name, *index = re.fullmatch(r"(\w+)(?:\[(\d+)\])?", part).groups()
        value = getattr(value, name)
        if index[0] is not None:
            value = value[int(index[0])]
    return value


def _assert_groups_match(msgtype: str, messages: list[Any], **kwargs: Any) -> int:
    """Every field of every message equals rosbags' deserialised value; returns the number of groups."""
    raw = _raw_messages(msgtype, messages, **kwargs)
    groups = message_groups(raw, eb.typestore().fielddefs)
    assert sorted(np.concatenate([g.indices for g in groups]).tolist()) == list(range(len(messages)))
    assert [g.first for g in groups] == sorted(g.first for g in groups)
    for group in groups:
        columns = {path: group.number(path) for path in group.layout.numbers}
        for row, index in enumerate(group.indices.tolist()):
            expected = eb.typestore().deserialize_cdr(raw.message(index), msgtype)
            for path, column in columns.items():
                value = _resolve(expected, path)
                want = np.asarray(value)
                got = column[row]
                assert got.shape == want.shape and np.array_equal(got, want), (index, path, got, want)
                if isinstance(value, np.ndarray):           # sequences and arrays keep their element type
                    assert got.dtype == value.dtype.newbyteorder("="), (index, path, got.dtype, value.dtype)
            for path, value in group.layout.strings.items():
                assert value == _resolve(expected, path), (index, path)
    return len(groups)


def test_uniform_topic_is_one_group() -> None:
    assert _assert_groups_match(eb.ARM_STATE, [_arm_state(k, JOINTS) for k in range(50)]) == 1


def test_messages_that_differ_get_their_own_groups_in_order() -> None:
    messages = [_arm_state(k, JOINTS) for k in range(12)]
    messages[3] = _arm_state(3, ["gripper", "joint1", "joint2", "joint3", "joint4"])    # same size, other names
    messages[5] = _arm_state(5, JOINTS, errors=0, stale=0)                                # empty flag sequences
    messages[8] = _arm_state(8, [*JOINTS, "extra"])                                       # longer
    messages[9] = _arm_state(9, ["gripper", "joint1", "joint2", "joint3", "joint4"])
    assert _assert_groups_match(eb.ARM_STATE, messages) == 4


def test_big_endian_messages() -> None:
    assert _assert_groups_match(eb.ARM_STATE, [_arm_state(k, JOINTS) for k in range(5)], little_endian=False) == 1


def test_empty_sequences_nested_types_and_fixed_arrays() -> None:
    states = [_msg(eb.JOINT_STATE, header=eb.make_header(k, "base"), name=JOINTS[:k % 3],
                   position=np.arange(k % 3, dtype=float), velocity=np.zeros(0), effort=np.full(k % 3, 0.5))
              for k in range(9)]
    assert _assert_groups_match(eb.JOINT_STATE, states) == 3
    key_value = "diagnostic_msgs/msg/KeyValue"
    diagnostics = [_msg("diagnostic_msgs/msg/DiagnosticArray", header=eb.make_header(k, ""), status=[
        _msg("diagnostic_msgs/msg/DiagnosticStatus", level=k % 3, name=f"servo{j}", message="ok",
             hardware_id="xm430", values=[_msg(key_value, key="t", value=str(k))] * j) for j in range(2)])
        for k in range(4)]
    assert _assert_groups_match("diagnostic_msgs/msg/DiagnosticArray", diagnostics) == 4
    pose = [_msg("geometry_msgs/msg/PoseWithCovarianceStamped", header=eb.make_header(k, "map"), pose=_msg(
        "geometry_msgs/msg/PoseWithCovariance", pose=_msg(
            "geometry_msgs/msg/Pose", position=_msg("geometry_msgs/msg/Point", x=1.0 * k, y=2.0, z=3.0),
            orientation=_msg("geometry_msgs/msg/Quaternion", x=0.0, y=0.0, z=0.0, w=1.0)),
        covariance=np.arange(36, dtype=float) * k)) for k in range(3)]
    assert _assert_groups_match("geometry_msgs/msg/PoseWithCovarianceStamped", pose) == 1
    flags = [_msg(eb.BOOL, data=k % 2 == 1) for k in range(6)]
    assert _assert_groups_match(eb.BOOL, flags) == 1


def test_short_message_and_unknown_encoding_are_errors() -> None:
    raw = _raw_messages(eb.ARM_STATE, [_arm_state(0, JOINTS)])
    short = eb.RawMessages(topic="/t", msgtype=eb.ARM_STATE, log_times=raw.log_times, buffer=raw.buffer,
                           offsets=raw.offsets, sizes=raw.sizes - 40)
    with pytest.raises(CdrError, match="message 0: message ends at byte"):
        message_groups(short, eb.typestore().fielddefs)
    xcdr2 = np.frombuffer(b"\x00\x07\x00\x00" + b"\x00" * 8, dtype=np.uint8)
    odd = eb.RawMessages(topic="/t", msgtype=eb.BOOL, log_times=np.zeros(1, np.int64), buffer=xcdr2,
                         offsets=np.zeros(1, np.int64), sizes=np.array([12]))
    with pytest.raises(CdrError, match="not plain CDR"):
        message_groups(odd, eb.typestore().fielddefs)
