"""Every message of some topics of a bag as CDR bytes, without deserialising any: MCAP files are read
straight (``na_common.mcap_raw``), other storage (sqlite3, file-compressed bags) through rosbags."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from rosbags.highlevel import AnyReader, AnyReaderError
from rosbags.interfaces import MessageDefinitionFormat

from na_common.episode_bag.layout import EpisodeBagError, read_rosbag2_info, topic_summaries
from na_common.episode_bag.messages import ROS2MSG, bag_fielddefs, typestore
from na_common.mcap_raw import McapError, Schema, read_mcap_messages


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
