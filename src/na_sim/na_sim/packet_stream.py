"""The byte-stream side of a servo-bus packet parser, shared by both wire protocols.

A serial bus delivers packets in arbitrary slices: a read may end inside a packet or hold several. This base
keeps the bytes not yet parsed, counts what it had to skip, and hands complete packets back; each protocol's
parser (``na_sim.protocol0``, ``na_sim.protocol2``) only says how one packet is found at the front of the
buffer (``_next``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

PacketT = TypeVar("PacketT")


class PacketStream(Generic[PacketT]):
    """Feed it bytes as they arrive, get complete packets back.

    Counters: ``garbage_bytes`` (skipped before a header or to resynchronise), ``checksum_errors`` (packets
    returned with ``checksum_ok=False``) and ``packets`` (all packets returned).
    """

    def __init__(self, max_length: int) -> None:
        self._buffer = bytearray()
        self._max_length = max_length
        self.garbage_bytes = 0
        self.checksum_errors = 0
        self.packets = 0

    @property
    def pending(self) -> int:
        """Bytes held back waiting for the rest of a packet."""
        return len(self._buffer)

    def reset(self) -> None:
        self._buffer.clear()

    def resync(self) -> list[PacketT]:
        """Give up on a stalled partial packet (e.g. a corrupted LEN): skip its first byte, re-scan."""
        if not self._buffer:
            return []
        self._drop(1)
        return self.feed(b"")

    def feed(self, data: bytes) -> list[PacketT]:
        self._buffer += data
        found: list[PacketT] = []
        while (packet := self._next()) is not None:
            found.append(packet)
        return found

    def _next(self) -> PacketT | None:
        """The packet at the front of the buffer, consumed, or None while it is incomplete."""
        raise NotImplementedError

    def _take(self, total: int, checksum_ok: Callable[[bytes], bool]) -> tuple[bytes, bool]:
        """Consume the first ``total`` bytes as one packet, count it, and say whether its checksum holds."""
        raw = bytes(self._buffer[:total])
        del self._buffer[:total]
        ok = checksum_ok(raw)
        self.packets += 1
        if not ok:
            self.checksum_errors += 1
        return raw, ok

    def _drop(self, count: int) -> None:
        if count > 0:
            self.garbage_bytes += count
            del self._buffer[:count]
