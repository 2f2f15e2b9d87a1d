"""What an arm driver does with one arm's servos each cycle, on the emulated control tables (ROS-free).

The offline generator (:mod:`na_sim.generate`) reads and writes the rig's registers the way the
arm drivers do over the bus, without a pty: one Sync Read of the family's state block, decoded
with the family's table (``na_description.xm430`` / ``na_description.sts3215``, the decoders the
drivers use), and one Sync Write of Goal Position. Each reader also knows how long those two
transactions take on the wire (its protocol's packet sizes at the spec's baud rate), which the
generator adds to the message stamps as a driver stamps its reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from na_description import sts3215, xm430
from na_description.spec import RobotSpec
from na_sim import protocol0 as p0

USB_LATENCY_S = 0.001            # FTDI latency timer set to 1 ms (docs/REFERENCES.md, Protocol 2.0)

_XM_STATE_DTYPE = np.dtype([("pwm", "<i2"), ("current", "<i2"), ("velocity", "<i4"), ("position", "<i4"),
                            ("velocity_trajectory", "<i4"), ("position_trajectory", "<i4"),
                            ("input_voltage", "<u2"), ("temperature", "u1")])
assert _XM_STATE_DTYPE.itemsize == xm430.STATE_BLOCK_LENGTH
_XM_GOAL = xm430.REGISTERS["goal_position"]
_XM_BLOCK = slice(xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_START + xm430.STATE_BLOCK_LENGTH)
_XM_HW_ERROR = xm430.REGISTERS["hardware_error_status"].address
_XM_GOAL_BYTES = slice(_XM_GOAL.address, _XM_GOAL.end)

_STS_GOAL = sts3215.REGISTERS["goal_position"]
_STS_BLOCK = slice(sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_START + sts3215.STATE_BLOCK_LENGTH)


def bus_seconds(n_bytes: int, baud: int) -> float:
    """Time on the wire: 10 bits per byte (8N1) plus the USB latency timer."""
    return n_bytes * 10.0 / baud + USB_LATENCY_S


class ArmBus:
    """One arm's bus as its driver uses it; :meth:`sync_read` returns the ArmState fields (spec order, SI)."""

    read_seconds: float
    write_seconds: float

    def __init__(self, spec: RobotSpec, registers: Sequence[Any]) -> None:
        self.spec, self.registers = spec, list(registers)
        self.direction = np.array([j.drive_direction for j in spec.joints], dtype=float)
        self.lower, self.upper = spec.servo_angle_limits()

    def sync_write_goal(self, goal_joint: np.ndarray) -> None:
        raise NotImplementedError

    def sync_read(self) -> dict[str, np.ndarray]:
        raise NotImplementedError


class XmArmBus(ArmBus):
    """DYNAMIXEL XM430 on Protocol 2.0: the state block Present PWM .. Present Temperature."""

    def __init__(self, spec: RobotSpec, registers: Sequence[Any]) -> None:
        super().__init__(spec, registers)
        n = spec.n_motors
        # Sync Read: instruction (10 + 4 + n bytes) and n status packets (11 + block bytes).
        self.read_seconds = bus_seconds(14 + n + n * (11 + xm430.STATE_BLOCK_LENGTH), spec.baud_rate)
        # Sync Write of Goal Position: 10 + 4 + n * (1 + 4) bytes, no replies.
        self.write_seconds = bus_seconds(14 + n * (1 + _XM_GOAL.size), spec.baud_rate)

    def sync_write_goal(self, goal_joint: np.ndarray) -> None:
        """Goal Position of every servo. The goal is clamped to the joint limits first, so the
        servo's own range check cannot refuse it; the bytes go straight into the table."""
        goal = np.clip(goal_joint, self.lower, self.upper)
        pulses = xm430.rad_to_pulses(self.spec.joint_to_servo(goal))
        for regs, value in zip(self.registers, pulses.tolist(), strict=True):
            regs.set(_XM_GOAL.name, value)

    def sync_read(self) -> dict[str, np.ndarray]:
        """The state block of every servo (one consistent table copy each, as a status packet is)."""
        tables = [regs.snapshot() for regs in self.registers]
        raw = b"".join(table[_XM_BLOCK] for table in tables)
        block = np.frombuffer(raw, dtype=_XM_STATE_DTYPE)
        errors = np.array([table[_XM_HW_ERROR] for table in tables], dtype=np.uint8)
        goal_pulses = np.frombuffer(b"".join(table[_XM_GOAL_BYTES] for table in tables), dtype="<i4")
        d = self.direction
        return {
            "position": self.spec.servo_to_joint(xm430.pulses_to_rad(block["position"])),
            "velocity": d * xm430.velocity_units_to_rad_s(block["velocity"]),
            "current": d * xm430.current_units_to_amp(block["current"]),
            "pwm": d * xm430.pwm_units_to_fraction(block["pwm"]),
            "load": np.zeros(0),                     # no load register: ArmState.load stays empty
            "input_voltage": xm430.voltage_units_to_volt(block["input_voltage"]),
            "temperature": block["temperature"] * xm430.TEMPERATURE_UNIT_C,
            "hardware_error": errors,
            # What the servo was last commanded (the driver knows it from its own Sync Write).
            "goal_position": self.spec.servo_to_joint(xm430.pulses_to_rad(goal_pulses)),
        }


class StsArmBus(ArmBus):
    """Feetech STS3215 on Protocol 0: the state block Present Position .. Present Current, decoded by
    :func:`na_description.sts3215.decode_state_block` as the SO-101 driver decodes it. Present Load is
    published as ``load`` and, being the output duty, as ``pwm`` too (the driver's convention)."""

    def __init__(self, spec: RobotSpec, registers: Sequence[Any]) -> None:
        super().__init__(spec, registers)
        ids = bytes(spec.servo_ids)
        block = sts3215.STATE_BLOCK_LENGTH
        # Sync Read: one broadcast instruction (address, length, the IDs) and one status packet per servo.
        instruction = p0.build_instruction(p0.BROADCAST_ID, p0.SYNC_READ,
                                           bytes([sts3215.STATE_BLOCK_START, block]) + ids)
        status = p0.build_status(0, 0, bytes(block))
        self.read_seconds = bus_seconds(len(instruction) + len(ids) * len(status), spec.baud_rate)
        # Sync Write of Goal Position: (address, length) and (ID + 2 bytes) per servo, no replies.
        body = bytes([_STS_GOAL.address, _STS_GOAL.size]) + bytes(len(ids) * (1 + _STS_GOAL.size))
        self.write_seconds = bus_seconds(len(p0.build_instruction(p0.BROADCAST_ID, p0.SYNC_WRITE, body)),
                                         spec.baud_rate)

    def sync_write_goal(self, goal_joint: np.ndarray) -> None:
        """Goal Position (steps, sign-magnitude on the wire) of every servo, clamped to the joint limits."""
        goal = np.clip(goal_joint, self.lower, self.upper)
        steps = sts3215.rad_to_steps(self.spec.joint_to_servo(goal))
        for regs, value in zip(self.registers, steps.tolist(), strict=True):
            regs.set(_STS_GOAL.name, value)

    def sync_read(self) -> dict[str, np.ndarray]:
        tables = [regs.snapshot() for regs in self.registers]
        blocks = [sts3215.decode_state_block(table[_STS_BLOCK]) for table in tables]
        goals = [sts3215.decode_value(_STS_GOAL, table[_STS_GOAL.address: _STS_GOAL.end]) for table in tables]
        d = self.direction
        load = d * np.array([b.load for b in blocks])
        return {
            "position": self.spec.servo_to_joint(np.array([b.position for b in blocks])),
            "velocity": d * np.array([b.velocity for b in blocks]),
            "current": d * np.array([b.current for b in blocks]),
            "pwm": load,
            "load": load,
            "input_voltage": np.array([b.input_voltage for b in blocks]),
            "temperature": np.array([b.temperature for b in blocks]),
            "hardware_error": np.array([b.status & sts3215.STATUS_MASK for b in blocks], dtype=np.uint8),
            "goal_position": self.spec.servo_to_joint(sts3215.steps_to_rad(goals)),
        }


_READERS: dict[str, type[ArmBus]] = {"xm430": XmArmBus, "sts3215": StsArmBus}


def arm_bus(family: str, spec: RobotSpec, registers: Sequence[Any]) -> ArmBus:
    """The driver-side reader of a servo family (``Rig.family.name``)."""
    try:
        return _READERS[family](spec, registers)
    except KeyError:
        raise ValueError(f"no bus reader for servo family {family!r} (known: {', '.join(_READERS)})") from None
