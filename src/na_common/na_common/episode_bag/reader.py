"""Reading one episode bag (MCAP or sqlite3 rosbag2) message by message, deserialised through the type store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from rosbags.highlevel import AnyReader, AnyReaderError

from na_common.episode_bag.layout import SIDECAR_NAME, EpisodeBagError, TopicSummary, read_rosbag2_info
from na_common.episode_bag.messages import typestore
from na_common.episode_bag.metadata import episode_metadata


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
