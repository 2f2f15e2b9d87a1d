"""Repair of episode bags whose writer was killed (SIGKILL, power loss) before it finished.

Such a bag has its sidecar (``complete=false``) and an MCAP file without summary, footer and
end magic, possibly ending in a half-written record; rosbag2 readers refuse it. The repair keeps
every complete record: it copies the MCAP up to the end of its last complete top-level record
(so up to the last chunk the recorder flushed), appends a Data End record, a footer without
summary and the end magic (readers then scan the file, MCAP specification), writes the rosbag2
``metadata.yaml`` and marks the episode ``recovered``. The original file is kept as
``*.mcap.partial`` so that nothing is lost.

An episode that cannot be repaired (an empty or garbled MCAP, an unreadable sidecar, a folder the
writer died in before it wrote anything) is moved aside to ``episode_NNNNNN.unreadable`` with the
reason, so that it never blocks a recorder's start-up, nothing is deleted, and its number is not
reused.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from na_common.episode_bag.layout import (
    SET_ASIDE_SUFFIX,
    SIDECAR_NAME,
    EpisodeBagError,
    fsync_path,
    list_episodes,
    write_json_atomic,
)
from na_common.episode_bag.metadata import metadata_to_custom_data, validate_metadata

MCAP_MAGIC = b"\x89MCAP0\r\n"
OP_HEADER, OP_FOOTER, OP_CHUNK, OP_DATA_END = 0x01, 0x02, 0x06, 0x0F
OP_SCHEMA, OP_CHANNEL, OP_MESSAGE = 0x03, 0x04, 0x05


def _last_complete_offset(data: bytes) -> int:
    """Offset just past the last complete top-level record (0 when the header is incomplete)."""
    if not data.startswith(MCAP_MAGIC):
        raise EpisodeBagError("not an MCAP file (bad magic)")
    offset, end = len(MCAP_MAGIC), len(data)
    good = 0
    while offset + 9 <= end:
        opcode = data[offset]
        (length,) = struct.unpack_from("<Q", data, offset + 1)
        record_end = offset + 9 + length
        if record_end > end or opcode in (OP_FOOTER, OP_DATA_END):
            break
        offset = record_end
        good = offset
    return good


def _scan_chunks(data: bytes, end: int) -> tuple[dict[int, tuple[str, str]], dict[int, list[int]]]:
    """Channels (id -> topic, type) and log times per channel from the (uncompressed) chunks."""
    schemas: dict[int, str] = {}
    channels: dict[int, tuple[str, str]] = {}
    times: dict[int, list[int]] = {}
    offset = len(MCAP_MAGIC)
    while offset < end:
        opcode = data[offset]
        (length,) = struct.unpack_from("<Q", data, offset + 1)
        body = data[offset + 9: offset + 9 + length]
        offset += 9 + length
        if opcode != OP_CHUNK:
            continue
        (name_len,) = struct.unpack_from("<I", body, 28)
        compression = body[32: 32 + name_len].decode()
        if compression:
            raise EpisodeBagError(f"chunk compression '{compression}' is not supported by the repair")
        (records_len,) = struct.unpack_from("<Q", body, 32 + name_len)
        records = body[40 + name_len: 40 + name_len + records_len]
        pos = 0
        while pos + 9 <= len(records):
            op = records[pos]
            (rec_len,) = struct.unpack_from("<Q", records, pos + 1)
            rec = records[pos + 9: pos + 9 + rec_len]
            pos += 9 + rec_len
            if op == OP_SCHEMA:
                (sid,) = struct.unpack_from("<H", rec, 0)
                (n,) = struct.unpack_from("<I", rec, 2)
                schemas[sid] = rec[6: 6 + n].decode()
            elif op == OP_CHANNEL:
                cid, sid = struct.unpack_from("<HH", rec, 0)
                (n,) = struct.unpack_from("<I", rec, 4)
                channels[cid] = (rec[8: 8 + n].decode(), schemas.get(sid, ""))
            elif op == OP_MESSAGE:
                cid, _seq, log_time = struct.unpack_from("<HIQ", rec, 0)
                times.setdefault(cid, []).append(log_time)
    return channels, times


def _rosbag2_metadata(mcap_name: str, channels: dict[int, tuple[str, str]], times: dict[int, list[int]],
                      custom: dict[str, str]) -> dict:
    stamps = [t for ts in times.values() for t in ts]
    start, stop = (min(stamps), max(stamps)) if stamps else (0, 0)
    count = len(stamps)
    topics = [{"message_count": len(times.get(cid, [])),
               "topic_metadata": {"name": topic, "offered_qos_profiles": [], "serialization_format": "cdr",
                                  "type": msgtype, "type_description_hash": ""}}
              for cid, (topic, msgtype) in sorted(channels.items())]
    return {"rosbag2_bagfile_information": {
        "compression_format": "", "compression_mode": "", "custom_data": custom,
        "duration": {"nanoseconds": stop - start},
        "files": [{"duration": {"nanoseconds": stop - start}, "message_count": count, "path": mcap_name,
                   "starting_time": {"nanoseconds_since_epoch": start}}],
        "message_count": count, "relative_file_paths": [mcap_name], "ros_distro": "rosbags",
        "starting_time": {"nanoseconds_since_epoch": start}, "storage_identifier": "mcap",
        "topics_with_message_count": topics, "version": 9}}


def recover_episode(path: str | Path) -> Path:
    """Make an interrupted episode bag readable up to its last complete chunk; returns its path."""
    path = Path(path)
    sidecar = path / SIDECAR_NAME
    if not sidecar.is_file():
        raise EpisodeBagError(f"{path}: no {SIDECAR_NAME}; not an episode bag")
    if (path / "metadata.yaml").is_file():
        return path                       # finished (or already repaired)
    try:
        meta = validate_metadata(json.loads(sidecar.read_text()))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise EpisodeBagError(f"{sidecar}: not readable JSON ({err})") from None
    files = sorted(path.glob("*.mcap"))
    if len(files) != 1:
        raise EpisodeBagError(f"{path}: expected one .mcap file to repair, found {len(files)}")
    mcap = files[0]
    data = mcap.read_bytes()
    end = _last_complete_offset(data)
    if end == 0:
        raise EpisodeBagError(f"{mcap}: not even the MCAP header was written; nothing to recover")
    channels, times = _scan_chunks(data, end)
    partial = mcap.with_name(mcap.name + ".partial")
    repaired = mcap.with_name(mcap.name + ".repairing")
    with repaired.open("wb") as stream:
        stream.write(data[:end])
        stream.write(struct.pack("<BQI", OP_DATA_END, 4, 0))
        stream.write(struct.pack("<BQQQI", OP_FOOTER, 20, 0, 0, 0))
        stream.write(MCAP_MAGIC)
        stream.flush()
    mcap.rename(partial)
    repaired.rename(mcap)
    fsync_path(mcap)
    stamps = [t for ts in times.values() for t in ts]
    meta["complete"] = False
    meta["stop_stamp"] = max(stamps) if stamps else meta.get("start_stamp")
    custom = metadata_to_custom_data(meta)
    custom["recovered"] = "true"
    (path / "metadata.yaml").write_text(yaml.safe_dump(_rosbag2_metadata(mcap.name, channels, times, custom)))
    fsync_path(path / "metadata.yaml")
    content = json.loads(sidecar.read_text())
    content.update({"complete": False, "recovered": True, "stop_stamp": meta["stop_stamp"],
                    "topics": {topic: {"type": msgtype, "count": len(times.get(cid, []))}
                               for cid, (topic, msgtype) in channels.items()}})
    write_json_atomic(sidecar, content)
    return path


@dataclass
class RepairReport:
    """What a start-up repair did: episodes made readable, and episodes moved aside (new path, reason)."""

    repaired: list[Path] = field(default_factory=list)
    set_aside: list[tuple[Path, str]] = field(default_factory=list)

    def warnings(self) -> list[str]:
        return ([f"recovered an interrupted episode (marked incomplete): {path}" for path in self.repaired]
                + [f"set aside an unreadable episode as {path}: {reason}" for path, reason in self.set_aside])


def set_aside(episode: Path) -> Path:
    """Rename ``episode_NNNNNN`` to ``episode_NNNNNN.unreadable`` (``.unreadable.2``... if taken)."""
    target = episode.with_name(episode.name + SET_ASIDE_SUFFIX)
    k = 1
    while target.exists():
        k += 1
        target = episode.with_name(f"{episode.name}{SET_ASIDE_SUFFIX}.{k}")
    episode.rename(target)
    fsync_path(episode.parent)
    return target


def recover_incomplete_episodes(out_dir: str | Path) -> RepairReport:
    """Repair every unfinished episode under ``out_dir`` (no rosbag2 metadata); set aside those that cannot be."""
    report = RepairReport()
    for episode in list_episodes(out_dir):
        if (episode / "metadata.yaml").is_file():
            continue
        try:
            if not (episode / SIDECAR_NAME).is_file():
                raise EpisodeBagError("no episode metadata was written (the writer died while starting)")
            report.repaired.append(recover_episode(episode))
        except (EpisodeBagError, OSError) as err:
            report.set_aside.append((set_aside(episode), str(err)))
    return report
