"""The message types of episode bags: a ROS 2 Jazzy ``rosbags`` type store with the ``na_msgs`` types read
from their ``.msg`` files (installed share directory, ``NA_MSGS_DIR``, or ``src/na_msgs/msg``), the
definitions a bag stores for its topics, and building, stamping and (de)serialising messages."""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path
from typing import Any

from rosbags.typesys import Stores, TypesysError, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from na_common import ament, topics
from na_common.episode_bag.layout import EpisodeBagError
from na_common.mcap_raw import Schema

NA_MSGS_PACKAGE = "na_msgs"

# Message types of the episode topics (docs/INTERFACES.md "Topics"), spelled once in na_common.topics.
ARM_STATE = topics.ARM_STATE_TYPE
JOINT_COMMAND = topics.JOINT_COMMAND_TYPE
JOINT_STATE = topics.JOINT_STATE_TYPE
WRENCH_STAMPED = topics.WRENCH_STAMPED_TYPE
BOOL = topics.BOOL_TYPE


def _msg_dir_candidates() -> list[Path]:
    """Where the na_msgs ``.msg`` files may live: override, the installed package, this source tree."""
    candidates: list[Path] = []
    if override := os.environ.get("NA_MSGS_DIR"):
        candidates.append(Path(override))
    if (share := ament.package_share(NA_MSGS_PACKAGE)) is not None:
        candidates.append(share / "msg")
    # A checkout without an install space (e.g. the training image): src/na_msgs/msg beside this package.
    candidates.append(Path(__file__).resolve().parents[3] / NA_MSGS_PACKAGE / "msg")
    return candidates


def find_na_msgs_dir() -> Path:
    """The first directory holding the na_msgs ``.msg`` files (raises when there is none)."""
    for candidate in _msg_dir_candidates():
        if candidate.is_dir() and any(candidate.glob("*.msg")):
            return candidate
    searched = "\n  ".join(str(c) for c in _msg_dir_candidates())
    raise EpisodeBagError(f"cannot find the na_msgs .msg files; searched:\n  {searched}\n"
                          "set NA_MSGS_DIR or source .venv/na_env.sh")


@lru_cache(maxsize=1)
def typestore() -> Typestore:
    """ROS 2 Jazzy type store with every ``na_msgs/msg/*`` type registered."""
    store = get_typestore(Stores.ROS2_JAZZY)
    types: dict = {}
    for msg_file in sorted(find_na_msgs_dir().glob("*.msg")):
        types.update(get_types_from_msg(msg_file.read_text(), f"{NA_MSGS_PACKAGE}/msg/{msg_file.stem}"))
    store.register(types)
    return store


# A bag stores the definition of each topic's type as its writer knew it (MCAP Schema records, rosbag2
# message definitions): "ros2msg" text, the type's own definition first, then each type it uses after
# a line of 80 '=' and a "MSG: pkg/Type" (or "pkg/msg/Type") line. Decoding with that definition
# reads bags recorded before a message changed (e.g. a field added to na_msgs/ArmState).
ROS2MSG = "ros2msg"


@lru_cache(maxsize=32)
def schema_typestore(msgtype: str, text: str) -> Typestore:
    """ROS 2 Jazzy type store holding the types of one ``ros2msg`` definition (``text``, of ``msgtype``)
    as given there: where the definition differs from a Jazzy type, the definition wins."""
    try:
        types = get_types_from_msg(text.replace("\r\n", "\n"), msgtype)
    except TypesysError as err:
        raise EpisodeBagError(f"cannot parse the stored definition of {msgtype}: {err}") from err
    store = get_typestore(Stores.ROS2_JAZZY)
    for name in types.keys() & store.fielddefs.keys():
        del store.fielddefs[name]
        store.types.pop(name, None)
    store.cache.clear()
    store.register(types)
    return store


def bag_fielddefs(msgtype: str, schema: Schema | None) -> Mapping[str, Any]:
    """The field definitions to decode a bag's ``msgtype`` messages with: those of the bag's stored
    ``ros2msg`` definition, else (none stored, another encoding) the installed ones (:func:`typestore`)."""
    if schema is None or schema.encoding != ROS2MSG or not schema.text.strip():
        return typestore().fielddefs
    return schema_typestore(msgtype, schema.text).fielddefs


def message_class(msgtype: str) -> type:
    """The message class of ``msgtype`` (e.g. ``"na_msgs/msg/ArmState"``) for building messages."""
    try:
        return typestore().types[msgtype]
    except KeyError:
        raise EpisodeBagError(f"unknown message type '{msgtype}' (not in ROS 2 Jazzy or na_msgs)") from None


def has_header(msgtype: str) -> bool:
    """True when the first field of ``msgtype`` is a ``std_msgs/Header`` (its stamp can be read raw)."""
    fields = typestore().fielddefs[msgtype][1]
    return bool(fields) and fields[0][0] == "header" and fields[0][1][1] == "std_msgs/msg/Header"


def cdr_header_stamp_ns(raw: bytes | memoryview) -> int:
    """The header stamp (ns) of a CDR-serialised message whose first field is a Header, without
    deserialising it: after the 4-byte encapsulation come int32 sec and uint32 nanosec."""
    order = "little" if raw[1] == 1 else "big"
    return int.from_bytes(raw[4:8], order, signed=True) * 1_000_000_000 + int.from_bytes(raw[8:12], order)


def make_time(stamp_ns: int):
    """``builtin_interfaces/msg/Time`` from integer nanoseconds."""
    sec, nanosec = divmod(int(stamp_ns), 1_000_000_000)
    return message_class("builtin_interfaces/msg/Time")(sec=sec, nanosec=nanosec)


def stamp_to_ns(stamp) -> int:
    """Nanoseconds of a ``builtin_interfaces/msg/Time``."""
    return int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)


def make_header(stamp_ns: int, frame_id: str = ""):
    """``std_msgs/msg/Header`` with the given stamp (ns) and frame."""
    return message_class("std_msgs/msg/Header")(stamp=make_time(stamp_ns), frame_id=frame_id)


def serialize(message, msgtype: str) -> bytes:
    return bytes(typestore().serialize_cdr(message, msgtype))


def deserialize(raw: bytes, msgtype: str):
    return typestore().deserialize_cdr(raw, msgtype)
