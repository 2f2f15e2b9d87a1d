"""A half-duplex serial servo bus on a pseudo-terminal: reader thread, reply timing and writes (ROS-free).

The protocol-independent half of a servo bus emulator (:class:`na_sim.dxl_emulator.DxlBusEmulator`,
:class:`na_sim.sts_emulator.StsBusEmulator`). A subclass brings a packet parser of the shape of
:class:`PacketStream` and ``_handle(packet)``; this class opens the pty (a client opens ``port_path``
like a USB serial adapter), feeds it the bytes the client writes, resynchronises on a packet left
incomplete for ``PARTIAL_PACKET_TIMEOUT_S`` and writes replies at the time they would have left a
real bus: after the servo's Return Delay and, with ``wire_time``, after every byte took its 10 bit
times at the baud rate. Injected faults (:class:`~na_sim.faults.DxlFaultInjector`) drop, delay and
corrupt replies here; a corrupted reply whose checksums still hold is recorded in ``undetected``
(:class:`~na_sim.faults.UndetectedCorruption`), so that an oracle can tell it from a driver's fault.

Hooks for the rest of the simulation, all run in the bus thread; an exception from one is counted
in ``stats["hook_errors"]`` and logged, and the bus goes on serving:

* ``on_read(servo)``: under the servo's lock right before a read of its registers is served;
* ``on_write(servo, address, data)``: after the servo executed a write (the subclass calls it);
* ``after_packets()``: after a batch of received packets was handled, after a resync, and after
  ``_between_packets`` changed a servo (a Bus Watchdog expired): whenever the bus may have changed
  the servo tables.
"""

from __future__ import annotations

import logging
import os
import select
import threading
import time
import tty
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

from na_sim.faults import DxlFaultInjector, DxlFaults, UndetectedCorruption

LOG = logging.getLogger(__name__)

BITS_PER_BYTE_ON_WIRE = 10          # 8N1: start + 8 data + stop
PARTIAL_PACKET_TIMEOUT_S = 0.02     # a packet incomplete this long is given up (resync)
_POLL_S = 0.05                      # how often the bus thread looks at the stop flag
_SPIN_BELOW_S = 2e-4                # sleeps shorter than this are spun for Return Delay accuracy

Checks = list[tuple[int, int]]      # (ID index, CRC/checksum index) of each checked part of a reply


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


class ServoTable(Protocol):
    """What the bus needs of one servo's emulated control table."""

    @property
    def lock(self) -> AbstractContextManager[Any]: ...     # a threading.RLock shared with the physics

    def get(self, name: str) -> int: ...

    def read(self, address: int, length: int) -> bytes: ...


PacketT = TypeVar("PacketT", bound=Packet)
PacketT_co = TypeVar("PacketT_co", bound=Packet, covariant=True)
ServoT = TypeVar("ServoT", bound=ServoTable)


class PacketStream(Protocol[PacketT_co]):
    """What the bus needs from a protocol's incremental parser."""

    checksum_errors: int

    @property
    def pending(self) -> int: ...

    def feed(self, data: bytes) -> Sequence[PacketT_co]: ...

    def resync(self) -> Sequence[PacketT_co]: ...


class PtyBus(Generic[PacketT, ServoT]):
    """Serves ``servos`` on one pty from its own thread; ``start()``/``stop()`` or use it as a context manager."""

    RETURN_DELAY_UNIT_S: ClassVar[float]       # s per unit of the servos' Return Delay Time register
    # A late reply (injected delay) is held back and sent right after the first instruction packet that
    # arrives once its delay is over, i.e. inside a later transaction (DxlFaults.delay_status_s). False:
    # the bus thread sends it after the delay, before it reads the next instruction.
    HOLDS_LATE_REPLIES: ClassVar[bool] = True
    # The protocol's packet checks, for telling a corruption a receiver rejects from one it takes as data.
    FRAMING_BYTES: ClassVar[int]               # header, ID and length
    CHECK_BYTES: ClassVar[int]                 # bytes of one CRC or checksum

    def __init__(self, parser: PacketStream[PacketT], servos: Sequence[ServoT], *, baud_rate: int = 1_000_000,
                 wire_time: bool = False, faults: DxlFaults | DxlFaultInjector | None = None,
                 on_read: Callable[[ServoT], None] | None = None,
                 on_write: Callable[[ServoT, int, bytes], None] | None = None,
                 after_packets: Callable[[], None] | None = None, name: str = "servo-bus") -> None:
        if not servos:
            raise ValueError("a bus needs at least one servo")
        if baud_rate <= 0:
            raise ValueError(f"baud_rate must be positive, got {baud_rate}")
        self.servos = list(servos)
        self.baud_rate = int(baud_rate)
        self.wire_time = wire_time
        self.injector = faults if isinstance(faults, DxlFaultInjector) else DxlFaultInjector(faults)
        self.on_read = on_read
        self.on_write = on_write
        self.after_packets = after_packets
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
        self._late: list[tuple[float, bytes, Checks | None]] = []   # held back: (monotonic not before, packet, checks)
        self.undetected: list[UndetectedCorruption] = []
        self._queued = 0                      # instruction packets parsed but not handled yet
        self._unsent: list[bytes] = []        # replies due already, written together (see _queue_reply)

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
    def fault_counters(self) -> dict[str, int]:
        return self.injector.snapshot()

    @property
    def parser_checksum_errors(self) -> int:
        """Packets whose checksum (Protocol 2.0: CRC) failed, as the parser counted them."""
        return self._parser.checksum_errors

    # ---- for subclasses ----------------------------------------------------------------------
    def _handle(self, packet: PacketT) -> None:
        raise NotImplementedError

    def _poll_timeout(self, timeout: float) -> float:
        """How long the bus thread may wait for bytes (``timeout``: what the bus itself needs); shorter
        while the subclass has timed work between packets."""
        return timeout

    def _status_checks(self, packet: bytes) -> Checks:
        """(ID index, check index) of each part of a reply that a receiver checks on its own."""
        raise NotImplementedError

    def _check_holds(self, packet: bytes, check_index: int) -> bool:
        """True when the CRC or checksum at ``check_index`` of ``packet`` matches the bytes it covers."""
        raise NotImplementedError

    def _between_packets(self) -> bool:
        """Called whenever the bus thread is not inside a packet: after each batch of received bytes was
        handled and when the line stayed silent for a poll. Returns True when it changed a servo table."""
        return False

    def _instruction_received(self, byte_count: int) -> None:
        """An instruction packet of ``byte_count`` bytes arrived: with wire time its last byte arrived this
        much after its first; held-back late replies that are due go out first, before its answers."""
        if self.wire_time:
            self._bus_free_at += self._wire_s(byte_count)
        self._release_late_replies()

    def _read_registers(self, servo: ServoT, address: int, length: int) -> bytes:
        """What a read returns: the ``on_read`` hook, then the bytes, under the servo's lock."""
        with servo.lock:
            self._call_hook("on_read", self.on_read, servo)
            return servo.read(address, length)

    def _call_hook(self, name: str, hook: Callable[..., None] | None, *args: object) -> None:
        if hook is None:
            return
        try:
            hook(*args)
        except Exception:     # a hook's bug must not kill the bus
            self.stats["hook_errors"] += 1
            LOG.exception("%s hook failed", name)

    def _send(self, servo: ServoT, packet: bytes, collide: bool = False, checks: Checks | None = None) -> None:
        """The servo's Return Delay, wire time and injected faults, then the bytes onto the pty.

        Times are absolute deadlines on one bus clock (``_bus_free_at``: when the last byte on the
        wire has arrived), so a late wake-up on a loaded machine does not add up over the replies
        of a Sync Read. With ``collide`` (one of the replies to a Sync/Bulk read) a reply that would
        go out while the host is already sending its next instruction is lost (``stats["collisions"]``).
        ``checks``: the reply's parts as :meth:`_status_checks` gives them, for a reply of several parts.
        """
        due = self._bus_free_at + servo.get("return_delay_time") * self.RETURN_DELAY_UNIT_S
        if self.wire_time:
            due += self._wire_s(len(packet))      # written when its last byte would have arrived
        if self.injector.drop_status():
            return
        if collide and self._host_is_sending():
            self.stats["collisions"] += 1
            return
        if self.injector.delay_status():
            if self.HOLDS_LATE_REPLIES:
                self._late.append((time.monotonic() + self.injector.faults.delay_status_s, packet, checks))
                return
            due += self.injector.faults.delay_status_s
        if due > time.perf_counter():
            self._flush()                         # what is due already goes out before this reply's wait
            self._sleep_until(due)
        self._bus_free_at = max(due, time.perf_counter())
        if collide and self._host_is_sending():
            self.stats["collisions"] += 1
            return
        self._queue_reply(self._corrupt(packet, checks))

    def _corrupt(self, packet: bytes, checks: Checks | None) -> bytes:
        """The injector's corruption of ``packet``; a part that changed while its check still holds is recorded."""
        received = self.injector.corrupt(packet)
        if received != packet:
            now = time.monotonic()
            for servo_id in self._undetected_ids(packet, received, checks or self._status_checks(packet)):
                self.stats["undetected_corruptions"] += 1
                self.undetected.append(UndetectedCorruption(servo_id, now))
        return received

    def _undetected_ids(self, original: bytes, received: bytes, checks: Checks) -> list[int]:
        """IDs of the parts of ``received`` a receiver that checks each part in order would take although they
        differ from ``original``. A changed header or length is left out: the receiver frames another packet."""
        if received[:self.FRAMING_BYTES] != original[:self.FRAMING_BYTES]:
            return []
        ids, start = [], 0
        for id_index, check_index in checks:
            if not self._check_holds(received, check_index):
                break                              # this part and every later one are rejected
            end = check_index + self.CHECK_BYTES
            if received[start:end] != original[start:end]:
                ids.append(received[id_index])
            start = end
        return ids

    def _wire_s(self, byte_count: int) -> float:
        return byte_count * BITS_PER_BYTE_ON_WIRE / self.baud_rate

    # ---- bus thread ----------------------------------------------------------------------------
    def _serve(self) -> None:
        last_byte_at = time.monotonic()
        while not self._stop.is_set():
            timeout = _POLL_S if not self._parser.pending else PARTIAL_PACKET_TIMEOUT_S
            ready, _, _ = select.select([self._master_fd], [], [], self._poll_timeout(timeout))
            if not ready:
                # Only a line that is really silent counts as idle: when this thread was late (a loaded
                # host), packets that arrived meanwhile are in the pty and are handled first.
                changed = self._between_packets()
                if self._parser.pending and time.monotonic() - last_byte_at > PARTIAL_PACKET_TIMEOUT_S:
                    self.stats["resyncs"] += 1
                    self._handle_all(self._parser.resync())
                    changed = True
                if changed:
                    self._call_hook("after_packets", self.after_packets)
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
            packets = self._parser.feed(data)
            self._handle_all(packets)
            changed = self._between_packets()
            if packets or changed:
                self._call_hook("after_packets", self.after_packets)

    def _handle_all(self, packets: Sequence[PacketT]) -> None:
        for index, packet in enumerate(packets):
            self._queued = len(packets) - index - 1
            try:
                self._handle(packet)
            except Exception:   # a bug must not kill the bus: log it and keep serving
                self.stats["internal_errors"] += 1
                LOG.exception("servo bus emulator failed on packet %s", packet.raw.hex(" "))
            self._flush()

    def _host_is_sending(self) -> bool:
        """True when the host's next instruction packet has (partly) arrived: a reply now would collide."""
        if self._queued or self._parser.pending:
            return True
        ready, _, _ = select.select([self._master_fd], [], [], 0)
        return bool(ready)

    def _release_late_replies(self) -> None:
        if not self._late:
            return
        now, keep = time.monotonic(), []
        for not_before, packet, checks in self._late:
            if now < not_before:
                keep.append((not_before, packet, checks))
                continue
            if self.wire_time:
                self._bus_free_at += self._wire_s(len(packet))
            self._sleep_until(self._bus_free_at)
            self._queue_reply(self._corrupt(packet, checks))
            self._flush()
            self.stats["late_replies"] += 1
        self._late = keep

    def _queue_reply(self, data: bytes) -> None:
        """Queue one reply. Replies that are due together (a Sync Read's, Return Delay 0, no wire time) leave in one
        write at the end of the instruction or before a wait: every write to a pty hands its bytes to a kernel
        worker, and each hand-over can wait for a busy CPU (a scheduler tick, 4 ms at 250 Hz), so one hand-over
        per transaction instead of one per servo keeps the reply's tail latency near the pty's own."""
        self._unsent.append(data)

    def _flush(self) -> None:
        """Write the queued replies onto the pty (dropped when nobody reads the port for 0.1 s)."""
        if not self._unsent:
            return
        replies, self._unsent = self._unsent, []
        view = memoryview(b"".join(replies))
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
        self.stats["replies"] += len(replies)

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
