"""Fault injection for the emulated DYNAMIXEL bus and F/T sensors (ROS-free).

Each knob is a probability or a time window in a small dataclass; a ``*FaultInjector`` draws
from its own seeded RNG and counts every fault it injects, so tests (and the driver's own
statistics) can be compared against what really happened on the wire.
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from na_description import xm430


@dataclass(frozen=True)
class DxlFaults:
    """Faults of the servo bus. Rates are probabilities per status packet (per byte for corruption)."""

    drop_status_rate: float = 0.0          # a status packet is never sent
    delay_status_rate: float = 0.0         # a status packet is held back (a late reply) ...
    delay_status_s: float = 0.0            # ... at least this long, then sent right after the next instruction
                                           # packet arrives: it lands inside a later transaction, after its request
    corrupt_byte_rate: float = 0.0         # each byte of a status packet is replaced by a random one
    stall_servo_id: int | None = None      # this servo does not answer at all ...
    stall_window_s: tuple[float, float] = (0.0, 0.0)   # ... from .. to, seconds after the emulator started
    trip_servo_id: int | None = None       # this servo trips a shutdown (hardware error) ...
    trip_after_s: float | None = None      # ... this many seconds after the emulator started
    trip_error_bits: int = xm430.HW_ERROR_OVERLOAD
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("drop_status_rate", "delay_status_rate", "corrupt_byte_rate"):
            _check_probability(name, getattr(self, name))
        if self.delay_status_s < 0:
            raise ValueError("delay_status_s must be >= 0")
        if self.stall_window_s[1] < self.stall_window_s[0]:
            raise ValueError("stall_window_s must be (start, end) with end >= start")
        if self.trip_error_bits & ~0xFF or not self.trip_error_bits:
            raise ValueError("trip_error_bits must be a non-empty Hardware Error Status bit set (1..255)")


@dataclass(frozen=True)
class UndetectedCorruption:
    """A corrupted reply whose checksum still held, so any receiver takes it as data: CRC-16 passes about one
    random multi-byte corruption in 65,536, a one-byte checksum one in 256. No driver can reject it."""

    servo_id: int             # the servo whose part of the reply was corrupted (the ID the receiver reads)
    time: float               # time.monotonic() when the reply was queued to go out


@dataclass(frozen=True)
class FtFaults:
    """Faults of the F/T sensors. Rates are probabilities per record (UDP) or per line (serial)."""

    drop_rate: float = 0.0                 # UDP record lost / serial line lost
    reorder_rate: float = 0.0              # UDP record held back and sent after the next one
    error_status_rate: float = 0.0         # UDP record carries an error status (bit 31 set)
    garbage_line_rate: float = 0.0         # serial: a line of garbage is sent instead of a reading
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("drop_rate", "reorder_rate", "error_status_rate", "garbage_line_rate"):
            _check_probability(name, getattr(self, name))


def _check_probability(name: str, value: float) -> None:
    if not 0.0 <= value <= 1.0:
        raise ValueError(f"{name} must be a probability in [0, 1], got {value}")


@dataclass
class _Injector:
    seed: int
    counters: Counter = field(default_factory=Counter)

    def __post_init__(self) -> None:
        self._rng = np.random.default_rng(self.seed)
        self._lock = threading.Lock()

    def _chance(self, rate: float) -> bool:
        if rate <= 0.0:
            return False
        with self._lock:
            return bool(self._rng.random() < rate)

    def count(self, name: str, amount: int = 1) -> None:
        with self._lock:
            self.counters[name] += amount

    def snapshot(self) -> dict[str, int]:
        """A copy of the counters (name -> number injected)."""
        with self._lock:
            return dict(self.counters)


class DxlFaultInjector(_Injector):
    """Decides, per status packet, whether to drop, delay or corrupt it; counts what it did."""

    def __init__(self, faults: DxlFaults | None = None) -> None:
        self.faults = faults or DxlFaults()
        super().__init__(self.faults.seed)
        self._silent_window = (0.0, 0.0)

    def silence(self, start_s: float, seconds: float) -> None:
        """Fault drill at run time: no servo of the bus answers from ``start_s`` for ``seconds`` (emulator time)."""
        self._silent_window = (float(start_s), float(start_s) + float(seconds))

    def is_stalled(self, servo_id: int, elapsed_s: float) -> bool:
        f = self.faults
        begin, end = self._silent_window
        stalled = (f.stall_servo_id == servo_id and f.stall_window_s[0] <= elapsed_s < f.stall_window_s[1]) \
            or begin <= elapsed_s < end
        if stalled:
            self.count("stalled_requests")
        return stalled

    def trip_due(self, servo_id: int, elapsed_s: float) -> bool:
        """True once, when the forced hardware-error trip of ``servo_id`` is due."""
        f = self.faults
        if f.trip_servo_id != servo_id or f.trip_after_s is None or elapsed_s < f.trip_after_s:
            return False
        with self._lock:
            if self.counters["hardware_trips"]:
                return False
            self.counters["hardware_trips"] += 1
        return True

    def drop_status(self) -> bool:
        dropped = self._chance(self.faults.drop_status_rate)
        if dropped:
            self.count("status_dropped")
        return dropped

    def delay_status(self) -> bool:
        """True when this status packet becomes a late reply (held back, sent inside a later transaction)."""
        delayed = self._chance(self.faults.delay_status_rate)
        if delayed:
            self.count("status_delayed")
        return delayed

    def corrupt(self, packet: bytes) -> bytes:
        """The packet with each byte replaced by a different random byte with ``corrupt_byte_rate``."""
        rate = self.faults.corrupt_byte_rate
        if rate <= 0.0 or not packet:
            return packet
        with self._lock:
            hits = self._rng.random(len(packet)) < rate
            if not hits.any():
                return packet
            out = np.frombuffer(packet, dtype=np.uint8).copy()
            # XOR with 1..255 so a hit always changes the byte.
            out[hits] ^= self._rng.integers(1, 256, size=int(hits.sum()), dtype=np.uint8)
            self.counters["status_corrupted"] += 1
            self.counters["bytes_corrupted"] += int(hits.sum())
        return out.tobytes()


class FtFaultInjector(_Injector):
    """Decides, per F/T record or line, whether to drop, reorder, flag or garble it."""

    def __init__(self, faults: FtFaults | None = None) -> None:
        self.faults = faults or FtFaults()
        super().__init__(self.faults.seed)

    def drop(self) -> bool:
        dropped = self._chance(self.faults.drop_rate)
        if dropped:
            self.count("dropped")
        return dropped

    def reorder(self) -> bool:
        held = self._chance(self.faults.reorder_rate)
        if held:
            self.count("reordered")
        return held

    def error_status(self) -> bool:
        flagged = self._chance(self.faults.error_status_rate)
        if flagged:
            self.count("error_status")
        return flagged

    def garbage_line(self) -> bytes | None:
        """A line of printable garbage (with CR LF) or None."""
        if not self._chance(self.faults.garbage_line_rate):
            return None
        self.count("garbage_lines")
        with self._lock:
            length = int(self._rng.integers(3, 40))
            text = self._rng.integers(33, 127, size=length, dtype=np.uint8).tobytes()
        return text + b"\r\n"
