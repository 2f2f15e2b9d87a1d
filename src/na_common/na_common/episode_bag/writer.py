"""Writing one episode bag: a rosbag2 MCAP directory named as the rosbag2 recorder names it, with the
episode metadata in ``metadata.yaml``'s ``custom_data`` and in the sidecar, which is written first."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.rosbag2.storage_mcap import McapWriter

from na_common.episode_bag.layout import (
    SIDECAR_NAME,
    EpisodeBagError,
    fsync_path,
    next_episode_id,
    write_json_atomic,
)
from na_common.episode_bag.messages import message_class, serialize, typestore
from na_common.episode_bag.metadata import metadata_to_custom_data, validate_metadata


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
        write_json_atomic(self.sidecar_path, content)

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
            fsync_path(file)
        fsync_path(self.path / "metadata.yaml")
        self._write_sidecar()
        fsync_path(self.out_dir)
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
