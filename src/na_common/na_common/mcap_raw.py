"""Raw message records of an MCAP file, without deserialising a message (numpy, no ROS).

Reads the whole file, walks its top-level records and returns, per channel, where each message's
bytes lie and its log time. A chunk whose message index records (written after every chunk by
rosbags and the rosbag2 recorder) account for every record in it is read with numpy in one go;
any other chunk (no index, schema or channel records inside) and messages outside chunks are
walked record by record. Chunks are decompressed (lz4, zstd) and their CRC checked, as rosbags
does. Message order is that of rosbags' reader: log time, then chunk position in the file, then
position in the chunk.

MCAP records: opcode (1 byte), length (uint64 little endian), body. A Message body is
channel id (uint16), sequence (uint32), log time (uint64), publish time (uint64), data. A Schema
body is id (uint16), name, encoding (strings: uint32 length + UTF-8), data (uint32 length + bytes); a
Channel body is id (uint16), schema id (uint16, 0: none), topic, message encoding, metadata. Each
channel's schema (e.g. the ``ros2msg`` definition its writer stored) comes with its messages.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

MAGIC = b"\x89MCAP0\r\n"
OP_FOOTER, OP_SCHEMA, OP_CHANNEL, OP_MESSAGE, OP_CHUNK, OP_MESSAGE_INDEX = 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
RECORD_HEAD = 9                     # opcode + uint64 length
MESSAGE_HEAD = RECORD_HEAD + 22     # + channel id, sequence, log time, publish time


class McapError(ValueError):
    """The file is not a readable MCAP file; the message says what is wrong and where."""


@dataclass(frozen=True)
class Schema:
    """A Schema record: the message type name, its encoding (``ros2msg``, ``ros2idl``, ...) and definition."""

    name: str
    encoding: str
    text: str                # the schema data as UTF-8 text ("" when the writer stored none)


@dataclass
class ChannelMessages:
    """Messages of one channel: ``buffer[offsets[k]:offsets[k] + sizes[k]]`` recorded at ``log_times[k]``."""

    topic: str
    log_times: np.ndarray    # int64, ns
    offsets: np.ndarray      # int64, into McapMessages.buffer
    sizes: np.ndarray        # int64
    ranks: np.ndarray        # int64, place of each message in the file, counted over every channel
    schema: Schema | None = None     # the channel's schema; None when it has none (schema id 0)


@dataclass
class _Catalog:
    """Channel and schema records met while walking the file."""

    topics: dict[int, str] = field(default_factory=dict)          # channel id -> topic
    channel_schema: dict[int, int] = field(default_factory=dict)  # channel id -> schema id
    schemas: dict[int, Schema] = field(default_factory=dict)      # schema id -> schema

    def schema_of(self, channel: int) -> Schema | None:
        return self.schemas.get(self.channel_schema.get(channel, 0))


@dataclass
class McapMessages:
    """Every message of an MCAP file by channel id, the bytes they point into, and the channel topics."""

    buffer: np.ndarray                                   # uint8: the file, then decompressed chunks
    channels: dict[int, ChannelMessages] = field(default_factory=dict)


def _decompressor(name: str) -> Callable[[memoryview], bytes]:
    if name == "lz4":
        from lz4.frame import decompress
        return decompress
    if name == "zstd":
        try:
            from compression import zstd  # Python >= 3.14
        except ImportError:
            from backports import zstd  # what rosbags uses before 3.14
        return zstd.decompress
    raise McapError(f"unsupported chunk compression {name!r}")


@dataclass
class _Chunk:
    start: int                               # file offset of the chunk record (named in errors)
    data: np.ndarray                         # uncompressed records
    in_file: int | None = None               # file offset of ``data`` when the chunk is stored uncompressed
    base: int = 0                            # offset of ``data`` in the final buffer
    index: dict[int, np.ndarray] = field(default_factory=dict)   # channel -> offsets in data


@dataclass
class _Parts:
    """Message locations gathered while walking the file, merged per channel at the end."""

    channel: list[np.ndarray] = field(default_factory=list)
    log_time: list[np.ndarray] = field(default_factory=list)
    offset: list[np.ndarray] = field(default_factory=list)     # into the final buffer
    size: list[np.ndarray] = field(default_factory=list)
    place: list[np.ndarray] = field(default_factory=list)      # file offset of the record or of its chunk
    within: list[np.ndarray] = field(default_factory=list)     # offset inside the chunk (0 outside chunks)

    def add(self, channel: np.ndarray, log_time: np.ndarray, offset: np.ndarray, size: np.ndarray,
            place: np.ndarray, within: np.ndarray) -> None:
        for name, values in zip(("channel", "log_time", "offset", "size", "place", "within"),
                                (channel, log_time, offset, size, place, within), strict=True):
            getattr(self, name).append(np.asarray(values, dtype=np.int64))


def _string(data: bytes | memoryview, at: int) -> tuple[str, int]:
    (length,) = struct.unpack_from("<I", data, at)
    return bytes(data[at + 4: at + 4 + length]).decode(), at + 4 + length


def _parse_chunk(data: memoryview, body: int, body_end: int) -> _Chunk:
    """The chunk record whose body is ``data[body:body_end]``, decompressed (a stored chunk stays a view
    of the file and remembers where)."""
    start = body - RECORD_HEAD
    if body_end - body < 40:
        raise McapError(f"chunk record at byte {start} is too short")
    _, _, uncompressed_size, crc = struct.unpack_from("<QQQI", data, body)
    compression, at = _string(data, body + 28)
    (compressed_size,) = struct.unpack_from("<Q", data, at)
    at += 8
    if at + compressed_size > body_end:
        raise McapError(f"chunk at byte {start}: compressed data exceeds its record")
    stored = data[at: at + compressed_size]
    try:
        raw = stored if compression == "" else _decompressor(compression)(stored)
    except McapError:
        raise
    except Exception as err:           # each decompressor raises its own error type
        raise McapError(f"chunk at byte {start}: cannot decompress {compression} data ({err})") from err
    if len(raw) != uncompressed_size:
        raise McapError(f"chunk at byte {start}: {len(raw)} bytes after decompression, expected {uncompressed_size}")
    if crc and zlib.crc32(raw) != crc:
        raise McapError(f"chunk at byte {start}: checksum mismatch")
    return _Chunk(start=start, data=np.frombuffer(raw, dtype=np.uint8), in_file=at if compression == "" else None)


def _parse_message_index(body: memoryview) -> tuple[int, np.ndarray]:
    """(channel id, offsets of its messages in the chunk) from a Message Index record."""
    channel, length = struct.unpack_from("<HI", body, 0)
    if length % 16 or 6 + length > len(body):
        raise McapError(f"message index of channel {channel}: {length} bytes of records do not fit its record")
    pairs = np.frombuffer(body, dtype="<u8", count=length // 8, offset=6).reshape(-1, 2)
    return channel, pairs[:, 1].astype(np.int64)


def _gather(data: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """``data[o:o + width]`` for every offset (all within ``data``), as rows of one uint8 array."""
    return sliding_window_view(data, width)[offsets]


def _indexed_messages(chunk: _Chunk, where: str, catalog: _Catalog) -> tuple[np.ndarray, ...] | None:
    """Channel, log time, data offset and size of every message of ``chunk`` from its message index,
    or None when the index does not account for every message record of the chunk.

    The indexed records are checked (Message opcode, channel, lengths that do not overlap) and the
    bytes between them walked record by record: they may hold schema and channel records only.
    """
    if not chunk.index:
        return None
    offsets = np.sort(np.concatenate(list(chunk.index.values())))
    n = len(chunk.data)
    if not len(offsets) or offsets[0] < 0 or offsets[-1] + MESSAGE_HEAD > n:
        return None
    head = _gather(chunk.data, offsets, MESSAGE_HEAD)
    length = np.ascontiguousarray(head[:, 1:9]).view("<u8")[:, 0]
    if (head[:, 0] != OP_MESSAGE).any() or (length < 22).any() or (length > n).any():
        return None
    ends = offsets + RECORD_HEAD + length.astype(np.int64)
    if ends[-1] > n or (ends[:-1] > offsets[1:]).any():
        return None
    channel = np.ascontiguousarray(head[:, 9:11]).view("<u2")[:, 0].astype(np.int64)
    owner = np.concatenate([np.full(len(v), c) for c, v in chunk.index.items()])
    if not np.array_equal(channel[np.searchsorted(offsets, np.concatenate(list(chunk.index.values())))], owner):
        return None
    if not _gaps_hold_no_message(chunk.data, offsets, ends, f"{where} chunk at byte {chunk.start}", catalog):
        return None
    log_time = np.ascontiguousarray(head[:, 15:23]).view("<u8")[:, 0].astype(np.int64)
    return channel, log_time, offsets + MESSAGE_HEAD, ends - offsets - MESSAGE_HEAD


def _gaps_hold_no_message(data: np.ndarray, starts: np.ndarray, ends: np.ndarray, where: str,
                          catalog: _Catalog) -> bool:
    """True when the bytes around the records ``[starts, ends)`` are whole records without a message."""
    gap_starts = np.concatenate([[0], ends])
    gap_ends = np.concatenate([starts, [len(data)]])
    view = memoryview(data)
    for lo, hi in zip(gap_starts[gap_ends > gap_starts].tolist(), gap_ends[gap_ends > gap_starts].tolist(),
                      strict=True):
        try:
            if len(_scan(view, lo, hi, where, catalog)[0]):
                return False
        except McapError:
            return False
    return True


def _walk_records(data: memoryview, begin: int, end: int, where: str, on_record: Callable[[int, int, int], None]
                  ) -> None:
    """Call ``on_record(opcode, body_start, body_end)`` for every record in ``data[begin:end]``."""
    at = begin
    while at < end:
        if at + RECORD_HEAD > end:
            raise McapError(f"{where}: truncated record at byte {at}")
        opcode = data[at]
        (length,) = struct.unpack_from("<Q", data, at + 1)
        body_end = at + RECORD_HEAD + length
        if body_end > end:
            raise McapError(f"{where}: record at byte {at} runs past the end ({length} bytes)")
        on_record(opcode, at + RECORD_HEAD, body_end)
        if opcode == OP_FOOTER:
            return
        at = body_end


def _scan(data: memoryview, begin: int, end: int, where: str, catalog: _Catalog,
          chunks: list[_Chunk] | None = None) -> tuple[np.ndarray, ...]:
    """Record-by-record walk of ``data[begin:end]``: channel, log time, data offset and size of each
    message; channel and schema records go to ``catalog``; at the top level (``chunks`` given) chunks
    and their message index records are collected."""
    channel, log_time, offset, size = [], [], [], []

    def on_record(opcode: int, body: int, body_end: int) -> None:
        if opcode == OP_MESSAGE:
            if body_end - body < 22:
                raise McapError(f"{where}: message record at byte {body - RECORD_HEAD} is too short")
            cid, _, stamp = struct.unpack_from("<HIQ", data, body)
            channel.append(cid)
            log_time.append(stamp)
            offset.append(body + 22)
            size.append(body_end - body - 22)
        elif opcode == OP_CHANNEL:
            cid, schema_id = struct.unpack_from("<HH", data, body)
            catalog.topics[cid] = _string(data, body + 4)[0]
            catalog.channel_schema[cid] = schema_id
        elif opcode == OP_SCHEMA:
            (sid,) = struct.unpack_from("<H", data, body)
            name, at = _string(data, body + 2)
            encoding, at = _string(data, at)
            (length,) = struct.unpack_from("<I", data, at)
            if at + 4 + length > body_end:
                raise McapError(f"{where}: schema record at byte {body - RECORD_HEAD}: data exceeds its record")
            text = bytes(data[at + 4: at + 4 + length]).decode()
            if sid:
                catalog.schemas[sid] = Schema(name=name, encoding=encoding, text=text)
        elif opcode == OP_CHUNK and chunks is not None:
            chunks.append(_parse_chunk(data, body, body_end))
        elif opcode == OP_MESSAGE_INDEX and chunks:
            cid, offsets = _parse_message_index(data[body:body_end])
            chunks[-1].index[cid] = offsets

    _walk_records(data, begin, end, where, on_record)
    return tuple(np.asarray(v, dtype=np.int64) for v in (channel, log_time, offset, size))


def read_mcap_messages(path: str | Path) -> McapMessages:
    """Every message of the MCAP file at ``path`` (see the module docstring)."""
    path = Path(path)
    raw = path.read_bytes()
    if not raw.startswith(MAGIC):
        raise McapError(f"{path.name}: not an MCAP file (bad magic)")
    if len(raw) < 2 * len(MAGIC) or not raw.endswith(MAGIC):
        raise McapError(f"{path.name}: no end magic: the file is truncated or its writer did not finish")
    try:
        return _read(raw, path.name)
    except (struct.error, UnicodeDecodeError, ValueError) as err:    # McapError is a ValueError
        if isinstance(err, McapError):
            raise
        raise McapError(f"{path.name}: malformed record ({type(err).__name__}: {err})") from err


def _read(raw: bytes, where: str) -> McapMessages:
    catalog = _Catalog()
    chunks: list[_Chunk] = []
    parts = _Parts()
    channel, log_time, offset, size = _scan(memoryview(raw), len(MAGIC), len(raw) - len(MAGIC), where, catalog, chunks)
    parts.add(channel, log_time, offset, size, place=offset, within=np.zeros_like(offset))
    # The buffer: the file (stored chunks are read in place), then the decompressed chunks.
    buffers = [np.frombuffer(raw, dtype=np.uint8)]
    base = len(raw)
    for chunk in chunks:
        if chunk.in_file is not None:
            chunk.base = chunk.in_file
        else:
            chunk.base = base
            base += len(chunk.data)
            buffers.append(chunk.data)
        _chunk_messages(chunk, where, catalog, parts)
    buffer = np.concatenate(buffers) if len(buffers) > 1 else buffers[0]
    return McapMessages(buffer=buffer, channels=_by_channel(parts, catalog, where))


def _chunk_messages(chunk: _Chunk, where: str, catalog: _Catalog, parts: _Parts) -> None:
    located = _indexed_messages(chunk, where, catalog)
    if located is None:
        view = memoryview(chunk.data)
        located = _scan(view, 0, len(view), f"{where} chunk at byte {chunk.start}", catalog)
    channel, log_time, offset, size = located
    parts.add(channel, log_time, offset + chunk.base, size, place=np.full_like(offset, chunk.start), within=offset)


def _by_channel(parts: _Parts, catalog: _Catalog, where: str) -> dict[int, ChannelMessages]:
    if not parts.channel:
        return {}
    channel = np.concatenate(parts.channel)
    log_time = np.concatenate(parts.log_time)
    offset = np.concatenate(parts.offset)
    size = np.concatenate(parts.size)
    # File order: chunk by chunk, then inside the chunk; within a channel: log time, then file order,
    # the order rosbags yields.
    rank = np.empty(len(channel), dtype=np.int64)
    rank[np.lexsort((np.concatenate(parts.within), np.concatenate(parts.place)))] = np.arange(len(channel))
    order = np.lexsort((rank, log_time, channel))
    channel, log_time, offset, size, rank = channel[order], log_time[order], offset[order], size[order], rank[order]
    bounds = np.flatnonzero(np.diff(channel)) + 1
    out: dict[int, ChannelMessages] = {}
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(channel)], strict=True):
        cid = int(channel[lo])
        if cid not in catalog.topics:
            raise McapError(f"{where}: messages on channel {cid}, which has no channel record")
        out[cid] = ChannelMessages(topic=catalog.topics[cid], log_times=log_time[lo:hi], offsets=offset[lo:hi],
                                   sizes=size[lo:hi], ranks=rank[lo:hi], schema=catalog.schema_of(cid))
    return out
