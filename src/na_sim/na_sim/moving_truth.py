"""Registers that change on every read, and a log of what each read served: an oracle for drivers (ROS-free).

A driver that re-publishes an old or late reply as fresh is invisible while the registers stand
still. :class:`ReadCounterTruth` is an ``on_read`` hook for :class:`~na_sim.dxl_emulator.DxlBusEmulator`:
the k-th read of each servo serves present values derived from k (all five published quantities
change from one read to the next) and is logged with the time it was served. A test then checks
every value a driver published against the log: it must be what some read served while that
cycle was on the bus.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass

from na_sim.servo_registers import ServoRegisters

POSITION_BASE = 48            # pulses; positions stay inside the XM430's 0..4095 position-mode range
POSITION_SPAN = 4000          # pulses; the position repeats after this many reads of one servo


@dataclass(frozen=True)
class ServedRead:
    """What one read of one servo served (register units) and when (time.monotonic())."""

    servo_id: int
    time: float
    position: int
    velocity: int
    current: int
    pwm: int
    voltage: int
    temperature: int


def values_of_read(count: int) -> dict[str, int]:
    """Present values served by the ``count``-th read of a servo (register units, all inside their ranges;
    temperature stays below the driver's warning level)."""
    return {
        "present_position": POSITION_BASE + count % POSITION_SPAN,
        "present_velocity": (13 * count) % 201 - 100,
        "present_current": (37 * count) % 401 - 200,
        "present_pwm": (29 * count) % 801 - 400,
        "present_input_voltage": 110 + (3 * count) % 40,
        "present_temperature": 30 + count % 20,
    }


class ReadCounterTruth:
    """``on_read`` hook: every read of a servo advances its counter, rewrites its present values and is logged."""

    def __init__(self, servos: Iterable[ServoRegisters] = ()) -> None:
        self._counts: dict[int, int] = {}
        self.records: list[ServedRead] = []
        for servo in servos:              # a plausible state before the first read
            self._apply(servo, 0)

    def __call__(self, servo: ServoRegisters) -> None:
        sid = servo.servo_id
        count = self._counts.get(sid, 0) + 1
        self._counts[sid] = count
        values = self._apply(servo, count)
        self.records.append(ServedRead(sid, time.monotonic(), values["present_position"],
                                       values["present_velocity"], values["present_current"], values["present_pwm"],
                                       values["present_input_voltage"], values["present_temperature"]))

    @staticmethod
    def _apply(servo: ServoRegisters, count: int) -> dict[str, int]:
        values = values_of_read(count)
        with servo.lock:
            for name, value in values.items():
                servo.set(name, value)
        return values
