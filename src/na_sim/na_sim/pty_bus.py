"""A half-duplex serial servo bus on a pseudo-terminal: reader thread, reply timing and writes (ROS-free).

The protocol-independent half of a servo bus emulator. A subclass brings a packet parser
(``feed``/``pending``/``resync``) and ``_handle(packet)``; this class opens the pty (a client opens
``port_path`` like a USB serial adapter), feeds it the bytes the client writes, resynchronises
on a packet left incomplete for ``PARTIAL_PACKET_TIMEOUT_S`` and writes replies at the time they
would have left a real bus: after the servo's Return Delay and, with ``wire_time``, after every
byte took its 10 bit times at the baud rate.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
import tty
from collections import Counter
from collections.abc import Sequence
from typing import Generic, Protocol, Self, TypeVar

LOG = logging.getLogger(__name__)

BITS_PER_BYTE_ON_WIRE = 10          # 8N1: start + 8 data + stop
PARTIAL_PACKET_TIMEOUT_S = 0.02     # a packet incomplete this long is given up (resync)
_POLL_S = 0.05                      # how often the bus thread looks at the stop flag
_SPIN_BELOW_S = 2e-4                # sleeps shorter than this are spun for Return Delay accuracy


class Packet(Protocol):
    """A packet as both protocols' parsers return it (:mod:`na_sim.protocol0`, :mod:`na_sim.protocol2`)."""

    @property
    def servo_id(self) -> int: ...

    @property
    def instruction(self) -> int: ...

    @property
    def params(self) -> bytes: ...

    @property
    def checksum_ok(self) -> bool: ...

    @property
    def raw(self) -> bytes: ...

    @property
    def is_broadcast(self) -> bool: ...


PacketT = TypeVar("PacketT", bound=Packet)
PacketT_co = TypeVar("PacketT_co", bound=Packet, covariant=True)


class PacketStream(Protocol[PacketT_co]):
    """What the bus needs from a protocol's incremental parser."""

    checksum_errors: int

    @property
    def pending(self) -> int: ...

    def feed(self, data: bytes) -> Sequence[PacketT_co]: ...

    def resync(self) -> Sequence[PacketT_co]: ...


class PtyBus(Generic[PacketT]):
    """Serves one pty from its own thread; ``start()``/``stop()`` or use it as a context manager."""

    def __init__(self, parser: PacketStream[PacketT], *, baud_rate: int = 1_000_000, wire_time: bool = False,
                 name: str = "servo-bus") -> None:
        if baud_rate <= 0:
            raise ValueError(f"baud_rate must be positive, got {baud_rate}")
        self.baud_rate = int(baud_rate)
        self.wire_time = wire_time
        self.stats: Counter = Counter()
        self._parser = parser
        self._name = name
        self._master_fd = -1
        self._slave_fd = -1
        self.port_path = ""
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._started_at = time.monotonic()
        self._bus_free_at = 0.0               # perf_counter time the bus is idle again

    # ---- lifecycle ---------------------------------------------------------------------------
    def start(self) -> Self:
        if self._thread is not None:
            raise RuntimeError("emulator already started")
        self._master_fd, self._slave_fd = os.openpty()
        tty.setraw(self._slave_fd)
        os.set_blocking(self._master_fd, False)
        self.port_path = os.ttyname(self._slave_fd)
        self._started_at = time.monotonic()
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name=f"{self._name} {self.port_path}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None
        for fd in (self._master_fd, self._slave_fd):
            if fd >= 0:
                os.close(fd)
        self._master_fd = self._slave_fd = -1

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started_at

    @property
    def parser_checksum_errors(self) -> int:
        """Packets whose checksum (Protocol 2.0: CRC) failed, as the parser counted them."""
        return self._parser.checksum_errors

    # ---- for subclasses ----------------------------------------------------------------------
    def _handle(self, packet: PacketT) -> None:
        raise NotImplementedError

    def _instruction_received(self, byte_count: int) -> None:
        """With wire time, the instruction's last byte arrives this much after its first."""
        if self.wire_time:
            self._bus_free_at += self._wire_s(byte_count)

    def _reply_due(self, return_delay_s: float, byte_count: int) -> float:
        """perf_counter time a reply of ``byte_count`` bytes is complete on the wire.

        Times are absolute deadlines on one bus clock (``_bus_free_at``: when the last byte on the
        wire has arrived), so a late wake-up on a loaded machine does not add up over the replies
        of a Sync Read.
        """
        due = self._bus_free_at + return_delay_s
        if self.wire_time:
            due += self._wire_s(byte_count)      # written when its last byte would have arrived
        return due

    def _transmit(self, data: bytes, due: float) -> None:
        """Wait until ``due`` (perf_counter), then put ``data`` on the pty; the bus is busy until then."""
        self._sleep_until(due)
        self._bus_free_at = max(due, time.perf_counter())
        self._write_all(data)

    def _wire_s(self, byte_count: int) -> float:
        return byte_count * BITS_PER_BYTE_ON_WIRE / self.baud_rate

    # ---- bus thread ----------------------------------------------------------------------------
    def _serve(self) -> None:
        last_byte_at = time.monotonic()
        while not self._stop.is_set():
            ready, _, _ = select.select([self._master_fd], [], [], _POLL_S if not self._parser.pending
                                        else PARTIAL_PACKET_TIMEOUT_S)
            if not ready:
                if self._parser.pending and time.monotonic() - last_byte_at > PARTIAL_PACKET_TIMEOUT_S:
                    self.stats["resyncs"] += 1
                    self._handle_all(self._parser.resync())
                continue
            try:
                data = os.read(self._master_fd, 4096)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:               # the pty went away (stop() from another thread)
                return
            last_byte_at = time.monotonic()
            self._bus_free_at = max(self._bus_free_at, time.perf_counter())
            self.stats["bytes_received"] += len(data)
            self._handle_all(self._parser.feed(data))

    def _handle_all(self, packets: Sequence[PacketT]) -> None:
        for packet in packets:
            try:
                self._handle(packet)
            except Exception:   # a bug must not kill the bus: log it and keep serving
                self.stats["internal_errors"] += 1
                LOG.exception("servo bus emulator failed on packet %s", packet.raw.hex(" "))

    def _write_all(self, data: bytes) -> None:
        view = memoryview(data)
        deadline = time.monotonic() + 0.1
        while view:
            try:
                written = os.write(self._master_fd, view)
            except BlockingIOError:
                if time.monotonic() > deadline:        # nobody reads the port: drop the reply
                    self.stats["tx_overflow"] += 1
                    return
                time.sleep(0.001)
                continue
            except OSError:
                return
            view = view[written:]
        self.stats["replies"] += 1

    @staticmethod
    def _sleep_until(deadline: float) -> None:
        """Sleep until ``deadline`` (perf_counter) with ~10 µs accuracy: OS sleep, then a short spin."""
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return
        if remaining > _SPIN_BELOW_S:
            time.sleep(remaining - _SPIN_BELOW_S)
        while time.perf_counter() < deadline:
            pass
