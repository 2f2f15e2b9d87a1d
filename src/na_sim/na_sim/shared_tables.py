"""Servo control tables shared between the physics process and the bus processes of the live rig (ROS-free).

Each emulated bus runs in a process of its own (:mod:`na_sim.bus_process`), so a stall of the physics
process (a MuJoCo step, the F/T emulators, the ROS truth publisher) never delays a status packet, as
with real servos whose firmware answers within its Return Delay whatever the host does. The two sides
own different bytes of every servo's control table:

* the **physics** owns the present values and the error register (``SimFamily.physics_bytes``): it
  writes them after every step;
* the **bus** owns everything else (goals, gains, modes, torque enable, watchdog, realtime tick):
  the host writes them through the bus.

Two lock-free :class:`SnapshotChannel` records in shared memory carry each side's copy of the tables
to the other, one writer each; nobody holds a lock across a physics step or a bus transaction. The
bus takes the physics bytes of a servo right before it serves a read of that servo; the physics takes
the bus bytes before every step. Writes the physics makes to bus-owned bytes (a Shutdown error
turning Torque Enable off) travel as numbered events inside the physics record, re-published and
re-applied on the physics side until the bus reports them applied, so neither copy loses them and
nothing ever blocks on the other process. A reboot of a servo bumps its
power-up generation: the physics then takes the bus's error register (cleared by the reboot)
instead of its own, and the bus ignores the physics' error byte until the physics has seen the reboot.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

_HEADER_BYTES = 64                   # sequence number, padded to a cache line
MAX_EVENTS = 64                      # physics writes to bus-owned bytes not yet applied by the bus
EVENT_BYTES = 8                      # longest run of bytes one event carries (longer runs: several events)
EVENT_DTYPE = np.dtype([("seq", np.uint64), ("servo", np.uint16), ("address", np.uint16), ("length", np.uint16),
                        ("data", np.uint8, (EVENT_BYTES,))])
BUS_COUNTERS = ("packets", "replies", "collisions", "crc_errors", "resyncs", "watchdog_expired",
                "internal_errors", "hook_errors", "late_replies", "tx_overflow")


def _shared_directory() -> str:
    return "/dev/shm" if os.path.isdir("/dev/shm") else tempfile.gettempdir()


class SnapshotChannel:
    """The latest fixed-size record from one writer, readable from any process without a lock.

    A memory-mapped file holds a sequence number and two slots. ``publish`` writes the slot the
    readers are not reading, then bumps the sequence; ``read`` copies the slot of the sequence it saw
    and retries if the sequence moved meanwhile. A writer preempted in the middle of a write leaves
    the readers on the previous record: they never wait for it.
    """

    def __init__(self, size: int, path: str | None = None) -> None:
        self.size = int(size)
        self.owner = path is None
        if path is None:
            fd, path = tempfile.mkstemp(prefix="na_sim_tables_", dir=_shared_directory())
            os.ftruncate(fd, _HEADER_BYTES + 2 * self.size)
        else:
            fd = os.open(path, os.O_RDWR)
        self.path = path
        try:
            self._map = mmap.mmap(fd, _HEADER_BYTES + 2 * self.size)
        finally:
            os.close(fd)
        self._view = memoryview(self._map)
        self._sequence = np.frombuffer(self._map, dtype=np.uint64, count=1)

    def _slot(self, sequence: int) -> memoryview:
        start = _HEADER_BYTES + (sequence & 1) * self.size
        return self._view[start: start + self.size]

    def publish(self, record: bytes | bytearray | memoryview) -> None:
        sequence = int(self._sequence[0])
        self._slot(sequence + 1)[:] = record
        self._sequence[0] = sequence + 1

    def read(self) -> bytes:
        return self.read_numbered()[1]

    def read_numbered(self) -> tuple[int, bytes]:
        """The latest record and its sequence number (a reader can skip decoding a record it has seen)."""
        while True:
            before = int(self._sequence[0])
            record = bytes(self._slot(before))
            if int(self._sequence[0]) == before:
                return before, record

    @property
    def sequence(self) -> int:
        return int(self._sequence[0])

    def close(self) -> None:
        """Unmap; the creating process also removes the file."""
        self._sequence = None
        self._view.release()
        self._map.close()
        if self.owner:
            Path(self.path).unlink(missing_ok=True)


def bus_record_dtype(n_servos: int, table_size: int) -> np.dtype:
    """What a bus process publishes: its tables, each servo's power-up generation, the physics events it
    has applied and its counters."""
    return np.dtype([("tables", np.uint8, (n_servos, table_size)), ("generation", np.uint32, (n_servos,)),
                     ("events_applied", np.uint64), ("counters", np.uint64, (len(BUS_COUNTERS),))])


def physics_record_dtype(n_servos: int, table_size: int) -> np.dtype:
    """What the physics publishes: its tables, the generation they belong to, its pending events (seq 0 = none),
    simulated time and steps."""
    return np.dtype([("tables", np.uint8, (n_servos, table_size)), ("generation", np.uint32, (n_servos,)),
                     ("events", EVENT_DTYPE, (MAX_EVENTS,)), ("events_dropped", np.uint64),
                     ("time", np.float64), ("steps", np.uint64)])


@dataclass(frozen=True)
class ArmChannels:
    """Paths of one arm's two channels and its table layout: what a bus process needs to attach."""

    bus_path: str
    physics_path: str
    n_servos: int
    table_size: int
    physics_bytes: tuple[int, ...]
    error_bytes: tuple[int, ...]


def _mask(addresses: Sequence[int], size: int) -> np.ndarray:
    mask = np.zeros(size, dtype=bool)
    mask[list(addresses)] = True
    return mask


def _runs(changed: np.ndarray) -> list[tuple[int, int]]:
    """(start, end) of each run of True in a boolean vector."""
    edges = np.flatnonzero(np.diff(np.concatenate(([0], changed.view(np.int8), [0]))))
    return list(zip(edges[::2].tolist(), edges[1::2].tolist(), strict=True))


class PhysicsSide:
    """The physics process's end of one arm: ``pull()`` before a step, ``push()`` after it.

    ``registers`` are the physics' own copies of the servos' tables (what the servo models load goals
    from and store present values into). ``clock_bytes``: bytes the physics writes but the bus sets
    from its own clock whenever it serves a read (XM430 Realtime Tick); they never travel.
    """

    def __init__(self, registers: Sequence[Any], physics_bytes: Sequence[int], error_bytes: Sequence[int],
                 clock_bytes: Sequence[int] = ()) -> None:
        self.registers = list(registers)
        n, size = len(self.registers), len(self.registers[0].snapshot())
        self.to_bus = SnapshotChannel(physics_record_dtype(n, size).itemsize)
        self.from_bus = SnapshotChannel(bus_record_dtype(n, size).itemsize)
        self.channels = ArmChannels(self.from_bus.path, self.to_bus.path, n, size, tuple(physics_bytes),
                                    tuple(error_bytes))
        self._physics = _mask(physics_bytes, size)
        self._travels = ~(self._physics | _mask(clock_bytes, size))
        self._errors = _mask(error_bytes, size)
        self._event_seq = 0
        self._pending = np.zeros(0, dtype=EVENT_DTYPE)        # events the bus has not applied yet
        self.events_dropped = 0
        self._generation = np.zeros(n, dtype=np.uint32)
        self._bus_dtype = bus_record_dtype(n, size)
        self._physics_record = np.zeros((), dtype=physics_record_dtype(n, size))
        self._expected = self._tables()
        self.counters = dict.fromkeys(BUS_COUNTERS, 0)
        initial = np.zeros((), dtype=self._bus_dtype)
        initial["tables"] = self._expected
        self.from_bus.publish(initial.tobytes())
        self.push(0.0, 0)

    def _tables(self) -> np.ndarray:
        return np.frombuffer(b"".join(r.snapshot() for r in self.registers), dtype=np.uint8).reshape(
            len(self.registers), -1).copy()

    @property
    def pending_events(self) -> int:
        """Writes to bus-owned bytes the bus has not confirmed yet."""
        return int(self._pending.size)

    def _collect_events(self) -> None:
        """Writes made here to bus-owned bytes since the last exchange become events for the bus."""
        tables = self._tables()
        changed = (tables != self._expected) & self._travels
        new = []
        for servo in np.flatnonzero(changed.any(axis=1)).tolist():
            for start, end in _runs(changed[servo]):
                for address in range(start, end, EVENT_BYTES):
                    data = tables[servo, address: min(end, address + EVENT_BYTES)]
                    self._event_seq += 1
                    event = np.zeros((), dtype=EVENT_DTYPE)
                    event["seq"], event["servo"], event["address"], event["length"] = \
                        self._event_seq, servo, address, data.size
                    event["data"][:data.size] = data
                    new.append(event)
        if new:
            self._pending = np.concatenate([self._pending, np.stack(new)])
            if self._pending.size > MAX_EVENTS:         # a bus that stopped applying them: keep the newest
                self.events_dropped += self._pending.size - MAX_EVENTS
                self._pending = self._pending[-MAX_EVENTS:]
        self._expected = tables

    def pull(self) -> None:
        """Take the bus-owned bytes (and, after a reboot, the error register) from the bus's latest record."""
        self._collect_events()
        record = np.frombuffer(self.from_bus.read(), dtype=self._bus_dtype)[0]
        self._pending = self._pending[self._pending["seq"] > record["events_applied"]]
        tables = np.where(self._physics, self._expected, record["tables"])
        rebooted = record["generation"] != self._generation
        if rebooted.any():
            tables[rebooted] = np.where(self._errors, record["tables"][rebooted], tables[rebooted])
            self._generation = record["generation"].copy()
        _apply(tables, self._pending)
        for registers, row in zip(self.registers, tables, strict=True):
            registers.store_block(0, row.tobytes())
        self._expected = tables
        self.counters = dict(zip(BUS_COUNTERS, record["counters"].tolist(), strict=True))

    def push(self, time_s: float, steps: int) -> None:
        """Publish the tables after a step (the bus uses their physics-owned bytes) and the pending events."""
        self._collect_events()
        record = self._physics_record
        record["tables"] = self._expected
        record["generation"] = self._generation
        record["events"] = np.zeros(MAX_EVENTS, dtype=EVENT_DTYPE)
        record["events"][:self._pending.size] = self._pending
        record["events_dropped"] = self.events_dropped
        record["time"], record["steps"] = time_s, steps
        self.to_bus.publish(record.tobytes())

    def close(self) -> None:
        self.to_bus.close()
        self.from_bus.close()


def _apply(tables: np.ndarray, events: np.ndarray) -> None:
    """Write the events' bytes into ``tables`` (servo x byte), in order."""
    for event in events:
        length = int(event["length"])
        tables[int(event["servo"]), int(event["address"]): int(event["address"]) + length] = event["data"][:length]


class BusSide:
    """A bus process's end of one arm: hooks for the emulator (``on_read``, ``after_packets``, ``on_reboot``).

    ``registers`` are the bus's own tables (what the protocol emulator serves).
    """

    def __init__(self, channels: ArmChannels, registers: Sequence[Any], stats: Any = None) -> None:
        self.registers = list(registers)
        self._index = {id(r): k for k, r in enumerate(self.registers)}
        self.from_physics = SnapshotChannel(physics_record_dtype(channels.n_servos, channels.table_size).itemsize,
                                            channels.physics_path)
        self.to_physics = SnapshotChannel(bus_record_dtype(channels.n_servos, channels.table_size).itemsize,
                                          channels.bus_path)
        self._physics_dtype = physics_record_dtype(channels.n_servos, channels.table_size)
        self._physics = _mask(channels.physics_bytes, channels.table_size)
        self._physics_no_errors = self._physics & ~_mask(channels.error_bytes, channels.table_size)
        self._events_applied = 0
        self._cached: tuple[int, np.void] | None = None
        self._generation = np.zeros(channels.n_servos, dtype=np.uint32)
        self._record = np.zeros((), dtype=bus_record_dtype(channels.n_servos, channels.table_size))
        self.stats = stats if stats is not None else {}

    def _physics_record(self) -> np.void:
        """The physics' latest record, its new events applied to the bus's tables (decoded once per record:
        the physics publishes one per step, the bus reads it for every servo of every read)."""
        if self._cached is not None and self.from_physics.sequence == self._cached[0]:
            return self._cached[1]
        sequence, raw = self.from_physics.read_numbered()
        record = np.frombuffer(raw, dtype=self._physics_dtype)[0]
        self._cached = (sequence, record)
        events = record["events"]
        fresh = events[events["seq"] > self._events_applied]
        for event in fresh:
            length = int(event["length"])
            self.registers[int(event["servo"])].store_block(int(event["address"]), event["data"][:length].tobytes())
        if fresh.size:
            self._events_applied = int(fresh["seq"].max())
        return record

    def on_read(self, servo: Any) -> None:
        """Before a read of ``servo`` is served: the physics' latest present values into its table."""
        record = self._physics_record()
        k = self._index[id(servo)]
        current = np.frombuffer(servo.snapshot(), dtype=np.uint8)
        mask = self._physics if record["generation"][k] == self._generation[k] else self._physics_no_errors
        servo.store_block(0, np.where(mask, record["tables"][k], current).tobytes())

    def on_reboot(self, servo: Any) -> None:
        self._generation[self._index[id(servo)]] += 1

    def after_packets(self) -> None:
        """After the bus handled packets: its tables (and counters) to the physics."""
        self._physics_record()
        record = self._record
        record["tables"] = np.frombuffer(b"".join(r.snapshot() for r in self.registers), dtype=np.uint8).reshape(
            len(self.registers), -1)
        record["generation"] = self._generation
        record["events_applied"] = self._events_applied
        record["counters"] = [int(self.stats.get(name, 0)) for name in BUS_COUNTERS]
        self.to_physics.publish(record.tobytes())

    def close(self) -> None:
        self.from_physics.close()
        self.to_physics.close()
