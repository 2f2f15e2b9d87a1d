"""Episode bags: one rosbag2 directory (MCAP) per recorded episode, plus its metadata.

The one implementation of the layout in docs/INTERFACES.md ("Episode bags"), shared by the
live recorder node, ``na-sim generate`` and the bag -> NAD converter. ROS-free: bag I/O and
message (de)serialisation go through ``rosbags`` with a ROS 2 Jazzy type store to which the
``na_msgs`` types are added from their ``.msg`` files.

Layout::

    OUT/episode_000001/
      episode_000001_0.mcap   rosbag2 MCAP
      metadata.yaml           rosbag2 metadata; custom_data holds the episode metadata
      episode.json            the same metadata (sidecar, written first, updated on close)
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import yaml
from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.interfaces import MessageDefinitionFormat
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import McapWriter
from rosbags.typesys import Stores, TypesysError, get_types_from_msg, get_typestore
from rosbags.typesys.store import Typestore

from na_common import ament, topics
from na_common.mcap_raw import McapError, Schema, read_mcap_messages

NA_MSGS_PACKAGE = "na_msgs"
SIDECAR_NAME = "episode.json"
EPISODE_DIR_PATTERN = re.compile(r"^episode_(\d{6})$")
# Episodes set aside as unreadable keep their number (``episode_000003.unreadable``): never reused.
SET_ASIDE_SUFFIX = ".unreadable"
NUMBERED_DIR_PATTERN = re.compile(r"^episode_(\d{6})(?:\.unreadable(?:\.\d+)?)?$")

FORCE_SOURCES = ("none", "payload", "ft_sensor")
# An episode's motor condition: "nominal", or "restricted_<joint>" (that joint mechanically restricted, e.g.
# restricted_joint3 on the OpenManipulator-X, restricted_elbow_flex on the SO-101).
CONDITION_PATTERN = re.compile(r"^(nominal|restricted_[a-z][a-z0-9_]*)$")
CONDITION_FORMS = "nominal or restricted_<joint>"
NOMINAL_CONDITION = "nominal"


def restricted_condition(joint: str) -> str:
    """The ``condition`` of an episode whose ``joint`` is mechanically restricted (``restricted_<joint>``)."""
    return f"restricted_{joint}"


SOURCES = ("live", "generated")

# Integrity of a live episode (written by the recorder from /diagnostics): ``faults`` lists every driver or
# estimator ERROR/STALE status seen during the episode (a list of dicts, see docs/INTERFACES.md); ``void`` is
# true when an arm driver tripped or its bus or a servo went silent, with ``void_reason`` the first such fault.
FAULTS_KEY = "faults"
VOID_KEY = "void"
VOID_REASON_KEY = "void_reason"

# Episode metadata keys (docs/INTERFACES.md) and the Python type each holds.
STRING_KEYS = ("task", "force_source", "condition", "operator", "notes", "source", "task_instance", "robot",
               VOID_REASON_KEY)
INT_KEYS = ("episode_id", "start_stamp", "stop_stamp", "seed")
FLOAT_KEYS = ("payload_grams",)
BOOL_KEYS = ("complete", VOID_KEY)
REQUIRED_KEYS = ("task", "payload_grams", "force_source", "condition", "source")

# Message types of the episode topics (docs/INTERFACES.md "Topics"), spelled once in na_common.topics.
ARM_STATE = topics.ARM_STATE_TYPE
JOINT_COMMAND = topics.JOINT_COMMAND_TYPE
JOINT_STATE = topics.JOINT_STATE_TYPE
WRENCH_STAMPED = topics.WRENCH_STAMPED_TYPE
BOOL = topics.BOOL_TYPE


class EpisodeBagError(RuntimeError):
    """An episode bag cannot be written or read; the message says what and where."""


# ---- type store ---------------------------------------------------------------------------
def _msg_dir_candidates() -> list[Path]:
    """Where the na_msgs ``.msg`` files may live: override, the installed package, this source tree."""
    candidates: list[Path] = []
    if override := os.environ.get("NA_MSGS_DIR"):
        candidates.append(Path(override))
    if (share := ament.package_share(NA_MSGS_PACKAGE)) is not None:
        candidates.append(share / "msg")
    # A checkout without an install space (e.g. the training image): src/na_msgs/msg beside this package.
    candidates.append(Path(__file__).resolve().parents[2] / NA_MSGS_PACKAGE / "msg")
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


# ---- metadata -----------------------------------------------------------------------------
def task_instance_id(task: str, payload_grams: float, condition: str) -> str:
    """The unit of the 8:1:1 split: task + payload + condition, e.g. ``pick_place_200g_nominal``."""
    grams = f"{payload_grams:g}"
    return f"{task}_{grams}g_{condition}"


def void_reason(metadata: Mapping[str, Any]) -> str | None:
    """Why an episode's metadata marks it void (a driver tripped or a bus went silent), or None when it does not."""
    if not metadata.get(VOID_KEY):
        return None
    return str(metadata.get(VOID_REASON_KEY) or "marked void (no reason recorded)")


def validate_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Check the keys and values of episode metadata and fill the optional ones."""
    missing = [k for k in REQUIRED_KEYS if k not in metadata]
    if missing:
        raise EpisodeBagError(f"episode metadata lacks required keys: {', '.join(missing)}")
    meta = dict(metadata)
    for key, allowed in (("force_source", FORCE_SOURCES), ("source", SOURCES)):
        if meta[key] not in allowed:
            raise EpisodeBagError(f"episode metadata '{key}' = {meta[key]!r}; expected one of {', '.join(allowed)}")
    if not CONDITION_PATTERN.match(str(meta["condition"])):
        raise EpisodeBagError(f"episode metadata 'condition' = {meta['condition']!r}; expected {CONDITION_FORMS}")
    try:
        meta["payload_grams"] = float(meta["payload_grams"])
    except (TypeError, ValueError):
        raise EpisodeBagError(f"episode metadata 'payload_grams' = {meta['payload_grams']!r} is not a number") from None
    if not math.isfinite(meta["payload_grams"]) or meta["payload_grams"] < 0:
        raise EpisodeBagError(f"episode metadata 'payload_grams' must be >= 0, got {meta['payload_grams']}")
    meta.setdefault("operator", "")
    meta.setdefault("notes", "")
    meta.setdefault("seed", None)
    meta.setdefault("task_instance", task_instance_id(meta["task"], meta["payload_grams"], meta["condition"]))
    for key in STRING_KEYS:
        if key in meta:                    # ``robot`` is optional (recordings without it name no robot)
            meta[key] = str(meta[key])
    if VOID_KEY in meta:
        meta[VOID_KEY] = bool(meta[VOID_KEY])
    if not isinstance(meta.get(FAULTS_KEY, []), list):
        raise EpisodeBagError(f"episode metadata '{FAULTS_KEY}' must be a list, got {meta[FAULTS_KEY]!r}")
    try:
        metadata_to_custom_data(meta)
    except (TypeError, ValueError) as err:
        raise EpisodeBagError(f"episode metadata cannot be stored: {err}") from None
    return meta


def _json_default(value: Any) -> Any:
    """numpy scalars and arrays as plain JSON numbers and lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"episode metadata value {value!r} ({type(value).__name__}) is not JSON-serialisable")


def _to_json(value: Any) -> str:
    return json.dumps(value, default=_json_default)


def metadata_to_custom_data(metadata: Mapping[str, Any]) -> dict[str, str]:
    """Flatten metadata to rosbag2 ``custom_data`` strings: strings as they are, the rest as JSON."""
    return {key: value if isinstance(value, str) else _to_json(value) for key, value in metadata.items()}


def metadata_from_custom_data(custom: Mapping[str, str]) -> dict[str, Any]:
    """Inverse of :func:`metadata_to_custom_data` (known keys get their type back)."""
    meta: dict[str, Any] = {}
    for key, text in custom.items():
        if key in STRING_KEYS:
            meta[key] = text
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        if key in INT_KEYS and value is not None:
            value = int(value)
        elif key in FLOAT_KEYS:
            value = float(value)
        elif key in BOOL_KEYS:
            value = bool(value)
        meta[key] = value
    return meta


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_json_atomic(path: Path, content: Mapping[str, Any]) -> None:
    """Write JSON through a temporary file, fsync it and rename it over ``path``."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as stream:
        json.dump(content, stream, indent=2, sort_keys=True, default=_json_default)
        stream.write("\n")
        stream.flush()
        os.fsync(stream.fileno())
    tmp.replace(path)
    _fsync_path(path.parent)


def next_episode_id(out_dir: Path) -> int:
    """One more than the largest episode number used in ``out_dir``, set-aside episodes included (1 when empty)."""
    numbers = [int(m.group(1)) for p in out_dir.iterdir() if (m := NUMBERED_DIR_PATTERN.match(p.name))] \
        if out_dir.is_dir() else []
    return max(numbers, default=0) + 1


# ---- writer -------------------------------------------------------------------------------
class _Rosbag2NamedMcapWriter(McapWriter):
    """MCAP storage file named as the rosbag2 recorder names it: ``<bag>_0.mcap``."""

    def __init__(self, path: Path, compression) -> None:
        super().__init__(path, compression)
        target = path / f"{path.name}_0.mcap"
        self.path.rename(target)          # the open handle keeps writing to the renamed file
        self.path = target


class _EpisodeRosbagWriter(Writer):
    STORAGE_PLUGINS: ClassVar = {**Writer.STORAGE_PLUGINS, StoragePlugin.MCAP: _Rosbag2NamedMcapWriter}


class EpisodeWriter:
    """Writes one episode bag under ``out_dir`` (``out_dir/episode_NNNNNN/``).

    ``metadata`` holds the episode keys of docs/INTERFACES.md; ``episode_id`` picks the number
    (default: the next free one). The sidecar is written (``complete=false``) before any
    message, so an interrupted recording still says what it was.
    """

    def __init__(self, out_dir: str | Path, metadata: Mapping[str, Any]) -> None:
        self.out_dir = Path(out_dir)
        if self.out_dir.exists() and not self.out_dir.is_dir():
            raise EpisodeBagError(f"output path {self.out_dir} exists and is not a directory")
        meta = validate_metadata(metadata)
        episode_id = meta.get("episode_id")
        episode_id = next_episode_id(self.out_dir) if episode_id is None else int(episode_id)
        if not 0 <= episode_id <= 999_999:
            raise EpisodeBagError(f"episode_id must be 0 ... 999999, got {episode_id}")
        meta["episode_id"] = episode_id
        self.path = self.out_dir / f"episode_{episode_id:06d}"
        if self.path.exists():
            raise EpisodeBagError(f"{self.path} exists already; not overwriting a recorded episode")
        self.out_dir.mkdir(parents=True, exist_ok=True)
        meta.setdefault("start_stamp", None)
        meta["stop_stamp"] = None
        meta["complete"] = False
        self.metadata = meta
        self._counts: dict[str, int] = {}
        self._types: dict[str, str] = {}
        self._connections: dict[str, Any] = {}
        self._first_stamp: int | None = None
        self._last_stamp: int | None = None
        self._writer = _EpisodeRosbagWriter(self.path, version=9, storage_plugin=StoragePlugin.MCAP)
        self._writer.open()
        self._closed = False
        self._write_sidecar()

    @property
    def sidecar_path(self) -> Path:
        return self.path / SIDECAR_NAME

    def _write_sidecar(self) -> None:
        content = dict(self.metadata)
        content["topics"] = {name: {"type": self._types[name], "count": self._counts[name]} for name in self._types}
        _write_json_atomic(self.sidecar_path, content)

    def update_metadata(self, values: Mapping[str, Any]) -> None:
        """Add or change episode metadata while recording (e.g. a fault seen): the sidecar says it at once, so a
        recording that is killed keeps it; ``close`` writes it into metadata.yaml too."""
        self._check_open()
        self.metadata = validate_metadata({**self.metadata, **values})
        self._write_sidecar()

    def add_topic(self, name: str, msgtype: str) -> None:
        """Register a topic before writing to it (type must be known to the type store)."""
        self._check_open()
        if name in self._connections:
            if self._types[name] != msgtype:
                raise EpisodeBagError(f"topic {name} already added with type {self._types[name]}, not {msgtype}")
            return
        message_class(msgtype)
        self._connections[name] = self._writer.add_connection(name, msgtype, typestore=typestore())
        self._types[name] = msgtype
        self._counts[name] = 0

    def write(self, topic: str, stamp_ns: int, message) -> None:
        """Serialise and write one message; ``stamp_ns`` is the bag (receive/record) time."""
        self._check_open()
        if topic not in self._connections:
            raise EpisodeBagError(f"topic {topic} was not added to {self.path} (call add_topic first)")
        try:
            raw = serialize(message, self._types[topic])
        except Exception as err:  # rosbags raises several types for a malformed message
            raise EpisodeBagError(f"cannot serialise a message for {topic} as {self._types[topic]}: {err}") from err
        self._record(topic, int(stamp_ns), raw)

    def write_raw(self, topic: str, stamp_ns: int, raw_cdr: bytes) -> None:
        """Write an already CDR-serialised message (e.g. from an rclpy ``raw=True`` subscription)."""
        self._check_open()
        if topic not in self._connections:
            raise EpisodeBagError(f"topic {topic} was not added to {self.path} (call add_topic first)")
        self._record(topic, int(stamp_ns), bytes(raw_cdr))

    def _record(self, topic: str, stamp_ns: int, raw: bytes) -> None:
        if stamp_ns < 0:
            raise EpisodeBagError(f"negative stamp {stamp_ns} on {topic}")
        self._writer.write(self._connections[topic], stamp_ns, raw)
        self._counts[topic] += 1
        self._first_stamp = stamp_ns if self._first_stamp is None else min(self._first_stamp, stamp_ns)
        self._last_stamp = stamp_ns if self._last_stamp is None else max(self._last_stamp, stamp_ns)

    @property
    def counts(self) -> dict[str, int]:
        return dict(self._counts)

    def flush(self) -> None:
        """Write the open MCAP chunk and fsync it, so a killed writer loses nothing before this point
        (``na_common.bag_repair`` makes such a bag readable again)."""
        self._check_open()
        storage = self._writer.storage
        if storage is None:
            return
        if storage.chunk.bio.tell():
            storage.close_chunk()
        storage.bio.flush()
        os.fsync(storage.bio.fileno())

    def close(self, complete: bool = True, stop_stamp_ns: int | None = None) -> Path:
        """Finish the bag: metadata.yaml with custom_data, final sidecar, fsync. Returns the bag path."""
        if self._closed:
            return self.path
        meta = self.metadata
        if meta.get("start_stamp") is None:
            meta["start_stamp"] = self._first_stamp
        meta["stop_stamp"] = int(stop_stamp_ns) if stop_stamp_ns is not None else self._last_stamp
        meta["complete"] = bool(complete)
        for key, value in metadata_to_custom_data(meta).items():
            self._writer.set_custom_data(key, value)
        self._writer.close()
        self._closed = True
        for file in self.path.glob("*.mcap"):
            _fsync_path(file)
        _fsync_path(self.path / "metadata.yaml")
        self._write_sidecar()
        _fsync_path(self.out_dir)
        return self.path

    def abort(self) -> None:
        """Stop without finishing (the bag stays incomplete; the sidecar says complete=false)."""
        if not self._closed:
            self._writer.abort()
            self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise EpisodeBagError(f"episode bag {self.path} is closed")

    def __enter__(self) -> EpisodeWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close(complete=True)
        else:
            # Keep what was recorded, marked incomplete.
            self.close(complete=False)


# ---- reader -------------------------------------------------------------------------------
@dataclass(frozen=True)
class TopicSummary:
    name: str
    msgtype: str
    count: int


class EpisodeReader:
    """Reads one episode bag (MCAP or sqlite3 rosbag2) written by :class:`EpisodeWriter` or ros2 bag.

    Use as a context manager or call :meth:`close`.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if not self.path.is_dir():
            raise EpisodeBagError(f"episode bag directory not found: {self.path}")
        if not (self.path / "metadata.yaml").is_file():
            has_storage = any(self.path.glob("*.mcap")) or any(self.path.glob("*.db3"))
            reason = ("it has no metadata.yaml: its writer did not finish (killed mid-episode); the recorder "
                      "repairs such episodes when it next starts on their folder") if has_storage \
                else "it holds no rosbag2 bag (no metadata.yaml)"
            raise EpisodeBagError(f"cannot open episode bag {self.path}: {reason}")
        self.metadata = self._read_metadata()
        try:
            self._reader = AnyReader([self.path], default_typestore=typestore())
            self._reader.open()
        except (AnyReaderError, OSError, ValueError, KeyError) as err:
            detail = f"its storage file is truncated or corrupt ({err})" if "magic" in str(err).lower() else err
            raise EpisodeBagError(f"cannot open episode bag {self.path}: {detail}") from err
        self._open = True
        known = self._reader.typestore.fielddefs
        unknown = sorted({c.msgtype for c in self._reader.connections if c.msgtype not in known})
        if unknown:
            self.close()
            raise EpisodeBagError(f"episode bag {self.path} holds messages of unknown types: {', '.join(unknown)}")

    def _read_metadata(self) -> dict[str, Any]:
        meta = episode_metadata(self.path, read_rosbag2_info(self.path))
        if meta is None:
            raise EpisodeBagError(f"episode bag {self.path} has no episode metadata (no custom_data, no "
                                  f"{SIDECAR_NAME})")
        return meta

    @property
    def topics(self) -> dict[str, TopicSummary]:
        """Topic name -> type and message count."""
        return {name: TopicSummary(name, info.msgtype or "", info.msgcount)
                for name, info in self._reader.topics.items()}

    @property
    def start_time(self) -> int:
        return self._reader.start_time

    @property
    def end_time(self) -> int:
        return self._reader.end_time

    def messages(self, topics: str | list[str] | None = None) -> Iterator[tuple[str, int, Any]]:
        """Yield ``(topic, bag stamp ns, message)`` in stamp order, for all or the named topics."""
        if isinstance(topics, str):
            topics = [topics]
        connections = list(self._reader.connections)
        if topics is not None:
            missing = sorted(set(topics) - {c.topic for c in connections})
            if missing:
                raise EpisodeBagError(f"episode bag {self.path} has no topic(s) {', '.join(missing)}")
            connections = [c for c in connections if c.topic in topics]
        for connection, stamp, raw in self._reader.messages(connections=connections):
            yield connection.topic, stamp, self._reader.deserialize(raw, connection.msgtype)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._reader.close()

    def __enter__(self) -> EpisodeReader:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()


# ---- rosbag2 metadata and raw messages (no deserialisation) -------------------------------
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml when built in: ~3x faster


def read_rosbag2_info(path: str | Path) -> dict[str, Any]:
    """The ``rosbag2_bagfile_information`` mapping of a bag's ``metadata.yaml``."""
    meta_yaml = Path(path) / "metadata.yaml"
    try:
        info = yaml.load(meta_yaml.read_text(), Loader=_YAML_LOADER)["rosbag2_bagfile_information"]
    except (yaml.YAMLError, KeyError, TypeError) as err:
        reason = " ".join(str(err).split())          # YAML errors span lines; the message is one line
        raise EpisodeBagError(f"{meta_yaml} is not rosbag2 metadata: {reason}") from err
    if not isinstance(info, dict):
        raise EpisodeBagError(f"{meta_yaml} is not rosbag2 metadata: rosbag2_bagfile_information is not a mapping")
    return info


def episode_metadata(path: str | Path, info: Mapping[str, Any]) -> dict[str, Any] | None:
    """Episode metadata of a bag: its ``custom_data``, else its sidecar, else None."""
    custom = info.get("custom_data") or {}
    if custom:
        return metadata_from_custom_data(custom)
    sidecar = Path(path) / SIDECAR_NAME
    if not sidecar.is_file():
        return None
    try:
        meta = json.loads(sidecar.read_text())
    except json.JSONDecodeError as err:
        raise EpisodeBagError(f"{sidecar} is not valid JSON: {err}") from err
    meta.pop("topics", None)
    return meta


def topic_summaries(info: Mapping[str, Any]) -> dict[str, TopicSummary]:
    """Topic name -> type and message count, from rosbag2 metadata (as rosbags' reader reports them)."""
    out: dict[str, TopicSummary] = {}
    for entry in info.get("topics_with_message_count") or []:
        topic = entry["topic_metadata"]
        out[topic["name"]] = TopicSummary(topic["name"], topic.get("type") or "", int(entry.get("message_count", 0)))
    return out


@dataclass(frozen=True)
class RawMessages:
    """One topic's messages as CDR bytes, in bag-time order (ties in recording order): message ``k``
    is ``buffer[offsets[k]:offsets[k] + sizes[k]]``, recorded at bag time ``log_times[k]`` (ns).
    ``schema``: the message definition stored in the bag for the topic (None when there is none)."""

    topic: str
    msgtype: str
    log_times: np.ndarray    # int64
    buffer: np.ndarray       # uint8, shared by the topics of one bag
    offsets: np.ndarray      # int64
    sizes: np.ndarray        # int64
    schema: Schema | None = None

    def fielddefs(self) -> Mapping[str, Any]:
        """Field definitions to decode these messages with (:func:`bag_fielddefs`)."""
        return bag_fielddefs(self.msgtype, self.schema)

    def __len__(self) -> int:
        return len(self.offsets)

    def message(self, k: int) -> bytes:
        start = int(self.offsets[k])
        return self.buffer[start:start + int(self.sizes[k])].tobytes()


def read_raw_messages(path: str | Path, names: Collection[str], info: Mapping[str, Any] | None = None
                      ) -> dict[str, RawMessages]:
    """Every message of the named topics as CDR bytes, without deserialising any.

    MCAP bags are read straight from their files (``na_common.mcap_raw``); other storage (sqlite3,
    file-compressed bags) goes through rosbags. The order is the one :meth:`EpisodeReader.messages`
    yields. ``info`` is the bag's rosbag2 metadata when already read.
    """
    path = Path(path)
    info = read_rosbag2_info(path) if info is None else info
    summaries = topic_summaries(info)
    missing = sorted(set(names) - set(summaries))
    if missing:
        raise EpisodeBagError(f"episode bag {path} has no topic(s) {', '.join(missing)}")
    try:
        if info.get("storage_identifier") == "mcap" and not info.get("compression_mode"):
            located = _raw_from_mcap(path, info, set(names))
        else:
            located = _raw_from_rosbags(path, set(names))
    except (McapError, OSError) as err:
        raise EpisodeBagError(f"cannot read episode bag {path}: {err}") from err
    buffer, per_topic, schemas = located
    out = {}
    for name in names:
        log_times, offsets, sizes = per_topic.get(name, _NO_MESSAGES)
        out[name] = RawMessages(topic=name, msgtype=summaries[name].msgtype, log_times=log_times, buffer=buffer,
                                offsets=offsets, sizes=sizes, schema=schemas.get(name))
    return out


_NO_MESSAGES = (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))


_Located = tuple[np.ndarray, np.ndarray, np.ndarray]      # log times, offsets, sizes of one topic's messages


def _raw_from_mcap(path: Path, info: Mapping[str, Any], names: set[str]
                   ) -> tuple[np.ndarray, dict[str, _Located], dict[str, Schema]]:
    buffers: list[np.ndarray] = []
    found: dict[str, list[tuple[np.ndarray, ...]]] = {}
    schemas: dict[str, Schema] = {}
    base = 0
    for number, name in enumerate(info.get("relative_file_paths") or []):
        read = read_mcap_messages(path / name)
        for channel in read.channels.values():
            if channel.topic in names:
                found.setdefault(channel.topic, []).append((
                    channel.log_times, channel.offsets + base, channel.sizes,
                    np.full(len(channel.ranks), number), channel.ranks))
                if channel.schema is not None:
                    _add_schema(schemas, channel.topic, channel.schema, path)
        buffers.append(read.buffer)
        base += len(read.buffer)
    buffer = np.concatenate(buffers) if len(buffers) > 1 else buffers[0] if buffers else np.zeros(0, np.uint8)
    return buffer, {topic: _merge_in_order(parts) for topic, parts in found.items()}, schemas


def _add_schema(schemas: dict[str, Schema], topic: str, schema: Schema, path: Path) -> None:
    """Record ``topic``'s stored definition; its channels (in several files) must agree on it."""
    have = schemas.setdefault(topic, schema)
    if have != schema:
        raise EpisodeBagError(f"cannot read episode bag {path}: topic {topic} is stored with two different "
                              f"message definitions ({have.name}, {schema.name})")


def _merge_in_order(parts: list[tuple[np.ndarray, ...]]) -> _Located:
    """One topic's messages from several channels or files: by log time, then file, then place in the file."""
    log_times, offsets, sizes, files, ranks = (np.concatenate(v) for v in zip(*parts, strict=True))
    order = np.lexsort((ranks, files, log_times))
    return log_times[order], offsets[order], sizes[order]


def _raw_from_rosbags(path: Path, names: set[str]) -> tuple[np.ndarray, dict[str, _Located], dict[str, Schema]]:
    found: dict[str, tuple[list[int], list[bytes]]] = {}
    schemas: dict[str, Schema] = {}
    try:
        with AnyReader([path], default_typestore=typestore()) as reader:
            connections = [c for c in reader.connections if c.topic in names]
            for c in connections:
                if c.msgdef.format == MessageDefinitionFormat.MSG and c.msgdef.data.strip():
                    _add_schema(schemas, c.topic, Schema(name=c.msgtype, encoding=ROS2MSG, text=c.msgdef.data), path)
            for connection, stamp, raw in reader.messages(connections=connections):
                times, data = found.setdefault(connection.topic, ([], []))
                times.append(stamp)
                data.append(bytes(raw))
    except (AnyReaderError, ValueError, KeyError) as err:
        raise EpisodeBagError(f"cannot read episode bag {path}: {type(err).__name__}: {err}") from err
    chunks = [raw for _, data in found.values() for raw in data]
    sizes = np.array([len(raw) for raw in chunks], dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64) if len(sizes) else sizes
    buffer = np.frombuffer(b"".join(chunks), dtype=np.uint8)
    out, at = {}, 0
    for topic, (times, data) in found.items():
        k = len(data)
        out[topic] = (np.asarray(times, dtype=np.int64), starts[at:at + k], sizes[at:at + k])
        at += k
    return buffer, out, schemas


def list_episodes(out_dir: str | Path) -> list[Path]:
    """The ``episode_NNNNNN`` directories in ``out_dir``, in number order."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise EpisodeBagError(f"episode directory not found: {out_dir}")
    return sorted(p for p in out_dir.iterdir() if p.is_dir() and EPISODE_DIR_PATTERN.match(p.name))
