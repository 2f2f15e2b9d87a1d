"""Reading one episode bag for the converter: its metadata (or the config's defaults), the topics its
force source needs and their messages as streams (:class:`~na_training.convert.streams.Stream`); finding the bags."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from na_common.episode_bag.layout import SIDECAR_NAME, EpisodeBagError, read_rosbag2_info, topic_summaries
from na_common.episode_bag.metadata import episode_metadata, validate_metadata
from na_common.episode_bag.raw import read_raw_messages
from na_description import SpecError, load_spec
from na_training.convert.config import EXPECTED_TYPES, ConvertError
from na_training.convert.streams import Stream, to_stream


@dataclass
class BagContents:
    path: Path
    metadata: dict[str, Any]
    streams: dict[str, Stream]
    topic_counts: dict[str, int]


def bag_metadata(path: Path, config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The bag's rosbag2 metadata and its episode metadata (or the config's ``metadata_defaults``)."""
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
    path = Path(path)
    info, metadata = bag_metadata(path, config)
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
    streams = {role: to_stream(role, raw[topic], path, joint_names) for role, topic in wanted.items()}
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


def recorded_topics(path: Path) -> dict[str, int]:
    """Message count of each topic that has messages, from a bag's metadata.yaml (no message is read)."""
    try:
        return {name: t.count for name, t in topic_summaries(read_rosbag2_info(path)).items() if t.count > 0}
    except (OSError, EpisodeBagError, KeyError, TypeError, ValueError):
        return {}          # read_bag reports the broken metadata with its reason


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
