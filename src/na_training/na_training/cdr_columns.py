"""Columns of many CDR messages of one type, read with numpy straight from their bytes.

Deserialising messages one by one builds a Python object per message and per field; a recorded
topic, though, repeats one layout: the same strings (frame, joint names) and the same sequence
lengths in every message, so every field sits at the same byte offset. :func:`message_groups`
walks one message field by field to find that layout (CDR as rosbags reads it: each primitive
aligned to its size from the start of the payload, strings and sequence lengths as uint32, a
sequence's elements aligned only when there are any), then takes every message of the same size
whose layout-deciding bytes (encapsulation, every length, every string) are those of the first
as a group whose fields are read for all its messages at once. Messages that differ start groups
of their own, so any recording is read exactly; the common case is one group per topic.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

if TYPE_CHECKING:
    from na_common.episode_bag import RawMessages

ENCAPSULATION = 4                  # bytes before the CDR payload: representation id and options
# Primitive type -> numpy type code (byte order added per message) and size.
PRIMITIVES: dict[str, str] = {
    "bool": "u1", "byte": "u1", "char": "u1", "octet": "u1", "int8": "i1", "uint8": "u1", "int16": "i2",
    "uint16": "u2", "int32": "i4", "uint32": "u4", "int64": "i8", "uint64": "u8", "float32": "f4", "float64": "f8",
}
BASE, NAME, ARRAY, SEQUENCE = 1, 2, 3, 4     # rosbags Nodetype values


class CdrError(ValueError):
    """A message does not hold what its type says (too short, unknown encoding or type)."""


@dataclass(frozen=True)
class Number:
    """A primitive field: byte offset in the message, numpy type code, element count (None: scalar)."""

    offset: int
    code: str
    count: int | None
    boolean: bool = False


@dataclass
class Layout:
    """Where each field of one message lies, its strings, and the bytes that decide the layout."""

    size: int
    order: str                                                       # "<" or ">"
    numbers: dict[str, Number] = field(default_factory=dict)         # "header.stamp.sec" -> Number
    strings: dict[str, str | list[str]] = field(default_factory=dict)
    deciding: list[tuple[int, int]] = field(default_factory=list)    # (start, length) byte ranges

    def deciding_positions(self) -> np.ndarray:
        spans = [np.arange(start, start + length) for start, length in [(0, ENCAPSULATION), *self.deciding]]
        return np.concatenate(spans)


class _Walker:
    """Walks one serialised message along its type definition, filling a :class:`Layout`."""

    def __init__(self, raw: bytes, fielddefs: Mapping[str, Any]) -> None:
        if len(raw) < ENCAPSULATION or raw[0] != 0 or raw[1] not in (0, 1):
            raise CdrError(f"not plain CDR (encapsulation {raw[:ENCAPSULATION].hex() or 'missing'})")
        self.raw = raw
        self.fielddefs = fielddefs
        self.layout = Layout(size=len(raw), order="<" if raw[1] == 1 else ">")
        self.pos = ENCAPSULATION

    def _align(self, size: int) -> None:
        self.pos = ENCAPSULATION + -(-(self.pos - ENCAPSULATION) // size) * size

    def _take(self, size: int) -> int:
        start = self.pos
        if start + size > len(self.raw):
            raise CdrError(f"message ends at byte {len(self.raw)}, a field needs bytes {start}..{start + size}")
        self.pos += size
        return start

    def _uint32(self) -> int:
        self._align(4)
        start = self._take(4)
        self.layout.deciding.append((start, 4))
        return struct.unpack_from(self.layout.order + "I", self.raw, start)[0]

    def _string(self) -> str:
        length = self._uint32()
        start = self._take(length)
        self.layout.deciding.append((start, length))
        return self.raw[start:start + max(length - 1, 0)].decode(errors="replace")

    def _primitives(self, path: str, typename: str, count: int | None) -> None:
        code = PRIMITIVES[typename]
        size = int(code[1])
        if count != 0:              # an empty sequence is not aligned (rosbags, Fast CDR)
            self._align(size)
        start = self._take(size * (count if count is not None else 1))
        self.layout.numbers[path] = Number(start, code, count, typename == "bool")

    def walk(self, msgtype: str, prefix: str = "") -> Layout:
        try:
            fields = self.fielddefs[msgtype][1]
        except KeyError:
            raise CdrError(f"unknown message type {msgtype!r}") from None
        for name, (nodetype, details) in fields:
            self._field(prefix + name, nodetype, details)
        return self.layout

    def _field(self, path: str, nodetype: int, details: Any) -> None:
        if nodetype == NAME:
            self.walk(details, path + ".")
        elif nodetype == BASE:
            self._base(path, details[0], None)
        else:
            (element_type, element), bound = details
            count = bound if nodetype == ARRAY else self._uint32()
            if element_type == BASE and element[0] != "string":
                self._base(path, element[0], count)
            elif element_type == BASE:
                self.layout.strings[path] = [self._string() for _ in range(count)]
            else:
                for k in range(count):
                    self._field(f"{path}[{k}]", element_type, element)

    def _base(self, path: str, typename: str, count: int | None) -> None:
        if typename == "string":
            self.layout.strings[path] = self._string()
        elif typename in PRIMITIVES:
            self._primitives(path, typename, count)
        else:
            raise CdrError(f"field {path} has type {typename!r}, which this reader does not support")


def message_layout(raw: bytes, msgtype: str, fielddefs: Mapping[str, Any]) -> Layout:
    """The layout of one serialised message of ``msgtype`` (``fielddefs``: a rosbags typestore's)."""
    return _Walker(raw, fielddefs).walk(msgtype)


@dataclass
class MessageGroup:
    """Messages of one topic that share a layout: their indices (in topic order) and their bytes."""

    indices: np.ndarray          # int64, increasing
    layout: Layout
    rows: np.ndarray             # uint8 [len(indices), layout.size]

    @property
    def first(self) -> int:
        """Index of the group's first message (the one its layout was read from)."""
        return int(self.indices[0])

    def number(self, path: str) -> np.ndarray:
        """A primitive field for every message: ``[m]`` for a scalar, ``[m, count]`` for an array or
        sequence (native byte order; bool as numpy bool)."""
        try:
            spec = self.layout.numbers[path]
        except KeyError:
            raise CdrError(f"no primitive field {path!r} (fields: {', '.join(self.layout.numbers)})") from None
        width = int(spec.code[1]) * (1 if spec.count is None else spec.count)
        block = np.ascontiguousarray(self.rows[:, spec.offset:spec.offset + width])
        values = block.view(self.layout.order + spec.code)
        values = values != 0 if spec.boolean else values.astype(spec.code, copy=False)
        return values[:, 0] if spec.count is None else values

    def string(self, path: str) -> str | list[str]:
        """A string (or string sequence) field; one value for the whole group."""
        return self.layout.strings[path]


def message_groups(raw: RawMessages, fielddefs: Mapping[str, Any]) -> list[MessageGroup]:
    """The messages of ``raw`` in groups of one layout, in order of their first message."""
    groups: list[MessageGroup] = []
    remaining = np.arange(len(raw), dtype=np.int64)
    while remaining.size:
        first = int(remaining[0])
        try:
            layout = message_layout(raw.message(first), raw.msgtype, fielddefs)
        except CdrError as err:
            raise CdrError(f"message {first}: {err}") from None
        same_size = remaining[raw.sizes[remaining] == layout.size]
        rows = _rows(raw, same_size, layout.size)
        deciding = layout.deciding_positions()
        match = (rows[:, deciding] == rows[0, deciding]).all(axis=1)
        group = MessageGroup(indices=same_size[match], layout=layout, rows=rows[match])
        groups.append(group)
        remaining = np.setdiff1d(remaining, group.indices, assume_unique=True)
    return groups


def _rows(raw: RawMessages, indices: np.ndarray, size: int) -> np.ndarray:
    """The bytes of the given messages (all ``size`` long) as rows of one array."""
    if size == 0:
        return np.zeros((len(indices), 0), dtype=np.uint8)
    windows = sliding_window_view(raw.buffer, size)
    return windows[raw.offsets[indices]]
