"""Registers that change on every read, and a log of what each read served: an oracle for drivers (ROS-free).

A driver that re-publishes an old or late reply as fresh is invisible while the registers stand
still. :class:`ReadCounterTruth` is an ``on_read`` hook for :class:`~na_sim.dxl_emulator.DxlBusEmulator`:
the k-th read of each servo serves present values derived from k (all five published quantities
change from one read to the next) and is logged with the time it was served. A test then checks
every value a driver published against the log (:func:`check_published`): it must be what some
read served while that cycle was on the bus. A value that a corrupted reply whose CRC still held
explains (the emulator's ``undetected`` record) is counted apart: no driver can reject it.

The oracle's unit conversions are written here from the ROBOTIS e-manual (XM430-W350 control
table), independently of the driver's.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from na_sim.servo_registers import ServoRegisters

# e-manual, XM430-W350: position 4096 pulses per turn (2048 = 0 rad), velocity 0.229 rpm, current 2.69 mA,
# input voltage 0.1 V, temperature 1 degC per unit.
PULSES_PER_REV, CENTER_PULSES = 4096, 2048
RAD_S_PER_VELOCITY_UNIT = 0.229 * 2 * math.pi / 60.0
AMP_PER_CURRENT_UNIT = 2.69e-3
VOLT_PER_VOLTAGE_UNIT = 0.1
WINDOW_SLACK_S = 1e-4         # clock reads around a driver's bus exchange
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


@dataclass(frozen=True)
class JointMap:
    """How a driver maps servo to joint values: joint = direction * servo + homing offset (rad)."""

    servo_id: int
    direction: int
    homing_offset: float


@dataclass
class PublishedCheck:
    """What :func:`check_published` found."""

    fresh: int = 0            # values published as fresh, checked against what was served
    stale: int = 0            # values flagged stale, checked to repeat the last fresh one
    wrong: list[str] = field(default_factory=list)
    undetected: list[str] = field(default_factory=list)   # served by none, but a corrupted reply passed its CRC


def check_published(samples: Iterable, served: Sequence[ServedRead], joints: Sequence[JointMap],
                    undetected: Sequence = ()) -> PublishedCheck:
    """Check every published value of a driver against what the emulator served, and when.

    ``samples``: objects with ``stamp`` and ``bus_cycle_duration`` (time.monotonic() s of the end of the
    cycle's bus exchange and its length), ``stale`` and the joint-side ``position`` (rad), ``velocity``
    (rad/s), ``current`` (A), ``input_voltage`` (V), ``temperature`` (degC) per servo, in ``joints`` order.
    A fresh value of a servo is right only if one read of that servo, served while the cycle was on the
    bus, served exactly these five values; a stale value must repeat the last fresh one (NaN before it).
    ``undetected``: objects with ``servo_id`` and ``time`` (a corrupted reply of that servo whose CRC held, queued
    then); a fresh value no read served is counted in ``undetected`` instead of ``wrong`` when such a reply of
    its servo went out while the cycle was on the bus.
    """
    by_position: dict[tuple[int, int], list[ServedRead]] = {}
    for record in served:
        by_position.setdefault((record.servo_id, record.position), []).append(record)
    fields = ("position", "velocity", "current", "input_voltage", "temperature")
    result, last = PublishedCheck(), {}
    for n, sample in enumerate(samples):
        start = sample.stamp - sample.bus_cycle_duration - WINDOW_SLACK_S
        end = sample.stamp + WINDOW_SLACK_S
        for k, joint in enumerate(joints):
            values = tuple(float(getattr(sample, name)[k]) for name in fields)
            if sample.stale[k]:
                result.stale += 1
                before = last.get(k, (math.nan,) * len(fields))
                if not all(a == b or (math.isnan(a) and math.isnan(b)) for a, b in zip(values, before, strict=True)):
                    result.wrong.append(f"cycle {n} servo {joint.servo_id}: stale {values} is not the last fresh one")
                continue
            result.fresh += 1
            last[k] = values
            angle = (values[0] - joint.homing_offset) / joint.direction
            pulses = angle * PULSES_PER_REV / (2 * math.pi) + CENTER_PULSES
            exact = abs(pulses - round(pulses)) < 1e-6
            candidates = by_position.get((joint.servo_id, round(pulses)), []) if exact else []
            if not any(start <= r.time <= end and _same(values[1:], _expected(r, joint.direction)) for r in candidates):
                message = f"cycle {n} servo {joint.servo_id}: {values} was not served during the cycle"
                if any(u.servo_id == joint.servo_id and start <= u.time <= end for u in undetected):
                    result.undetected.append(message)
                else:
                    result.wrong.append(message)
    return result


def _expected(record: ServedRead, direction: int) -> tuple[float, float, float, float]:
    return (direction * record.velocity * RAD_S_PER_VELOCITY_UNIT, direction * record.current * AMP_PER_CURRENT_UNIT,
            record.voltage * VOLT_PER_VOLTAGE_UNIT, float(record.temperature))


def _same(values: Sequence[float], expected: Sequence[float]) -> bool:
    return all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12) for a, b in zip(values, expected, strict=True))
