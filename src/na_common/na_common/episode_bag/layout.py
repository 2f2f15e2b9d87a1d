"""Where an episode bag's pieces lie on disk: the episode folders and their numbers, the sidecar, the
rosbag2 ``metadata.yaml`` and its topic list, and the fsync'd writes that keep a killed recording readable."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SIDECAR_NAME = "episode.json"
EPISODE_DIR_PATTERN = re.compile(r"^episode_(\d{6})$")
# Episodes set aside as unreadable keep their number (``episode_000003.unreadable``): never reused.
SET_ASIDE_SUFFIX = ".unreadable"
NUMBERED_DIR_PATTERN = re.compile(r"^episode_(\d{6})(?:\.unreadable(?:\.\d+)?)?$")


class EpisodeBagError(RuntimeError):
    """An episode bag cannot be written or read; the message says what and where."""


def next_episode_id(out_dir: Path) -> int:
    """One more than the largest episode number used in ``out_dir``, set-aside episodes included (1 when empty)."""
    numbers = [int(m.group(1)) for p in out_dir.iterdir() if (m := NUMBERED_DIR_PATTERN.match(p.name))] \
        if out_dir.is_dir() else []
    return max(numbers, default=0) + 1


def list_episodes(out_dir: str | Path) -> list[Path]:
    """The ``episode_NNNNNN`` directories in ``out_dir``, in number order."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise EpisodeBagError(f"episode directory not found: {out_dir}")
    return sorted(p for p in out_dir.iterdir() if p.is_dir() and EPISODE_DIR_PATTERN.match(p.name))


def json_default(value: Any) -> Any:
    """numpy scalars and arrays as plain JSON numbers and lists."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"episode metadata value {value!r} ({type(value).__name__}) is not JSON-serialisable")


def fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json_atomic(path: Path, content: Mapping[str, Any]) -> None:
    """Write JSON through a temporary file, fsync it and rename it over ``path``."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as stream:
        json.dump(content, stream, indent=2, sort_keys=True, default=json_default)
        stream.write("\n")
        stream.flush()
        os.fsync(stream.fileno())
    tmp.replace(path)
    fsync_path(path.parent)


# ---- rosbag2 metadata.yaml ------------------------------------------------------------------
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


@dataclass(frozen=True)
class TopicSummary:
    name: str
    msgtype: str
    count: int


def topic_summaries(info: Mapping[str, Any]) -> dict[str, TopicSummary]:
    """Topic name -> type and message count, from rosbag2 metadata (as rosbags' reader reports them)."""
    out: dict[str, TopicSummary] = {}
    for entry in info.get("topics_with_message_count") or []:
        topic = entry["topic_metadata"]
        out[topic["name"]] = TopicSummary(topic["name"], topic.get("type") or "", int(entry.get("message_count", 0)))
    return out
