"""What an arm driver does with one arm's servos each cycle, on the emulated control tables (ROS-free).

The offline generator (:mod:`na_sim.generate`) reads and writes the rig's registers the way the
arm drivers do over the bus, without a pty: one Sync Read of the family's state block, decoded
by the family's ``decode_states`` (``na_description.xm430`` / ``na_description.sts3215``, the
functions the drivers' backends call), and one Sync Write of Goal Position. Each reader also knows
how long those two transactions take on the wire (its protocol's packet sizes at the spec's baud
rate), which the generator adds to the message stamps as a driver stamps its reads.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from na_description import sts3215, xm430
from na_description.servo_state import ServoStates
from na_description.spec import RobotSpec
from na_sim import protocol0 as p0

USB_LATENCY_S = 0.001            # FTDI latency timer set to 1 ms (docs/REFERENCES.md, Protocol 2.0)

_XM_GOAL = xm430.REGISTERS["goal_position"]
_XM_BLOCK = slice(xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_START + xm430.STATE_BLOCK_LENGTH)
_XM_HW_ERROR = xm430.REGISTERS["hardware_error_status"].address

_STS_GOAL = sts3215.REGISTERS["goal_position"]
_STS_BLOCK = slice(sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_START + sts3215.STATE_BLOCK_LENGTH)


def bus_seconds(n_bytes: int, baud: int) -> float:
    """Time on the wire: 10 bits per byte (8N1) plus the USB latency timer."""
    return n_bytes * 10.0 / baud + USB_LATENCY_S


class ArmBus:
    """One arm's bus as its driver uses it. :meth:`sync_read` returns every servo's state (spec order, servo side,
    SI) and the goals the servos hold (joint side; a driver knows them from its own Sync Write)."""

    table: ModuleType            # the family's control table (na_description.xm430 or .sts3215)
    read_seconds: float
    write_seconds: float

    def __init__(self, spec: RobotSpec, registers: Sequence[Any]) -> None:
        self.spec, self.registers = spec, list(registers)
        self.lower, self.upper = spec.servo_angle_limits()

    def sync_write_goal(self, goal_joint: np.ndarray) -> None:
        raise NotImplementedError

    def sync_read(self) -> tuple[ServoStates, np.ndarray]:
        raise NotImplementedError


class XmArmBus(ArmBus):
    """DYNAMIXEL XM430 on Protocol 2.0: the state block Present PWM .. Present Temperature, and Hardware Error
    Status (the driver reads it when a reply raises the Alert bit)."""

    table = xm430

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

    def sync_read(self) -> tuple[ServoStates, np.ndarray]:
        """The state block of every servo (one consistent table copy each, as a status packet is)."""
        tables = [regs.snapshot() for regs in self.registers]
        states = xm430.decode_states([table[_XM_BLOCK] for table in tables],
                                     errors=[table[_XM_HW_ERROR] for table in tables])
        goals = [xm430.decode_value(_XM_GOAL, table[_XM_GOAL.address: _XM_GOAL.end]) for table in tables]
        return states, self.spec.servo_to_joint(xm430.pulses_to_rad(goals))


class StsArmBus(ArmBus):
    """Feetech STS3215 on Protocol 0: the state block Present Position .. Present Current (Present Load is
    both ``load`` and ``pwm``, the Status byte the error bits)."""

    table = sts3215

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

    def sync_read(self) -> tuple[ServoStates, np.ndarray]:
        tables = [regs.snapshot() for regs in self.registers]
        states = sts3215.decode_states([table[_STS_BLOCK] for table in tables])
        goals = [sts3215.decode_value(_STS_GOAL, table[_STS_GOAL.address: _STS_GOAL.end]) for table in tables]
        return states, self.spec.servo_to_joint(sts3215.steps_to_rad(goals))


_READERS: dict[str, type[ArmBus]] = {"xm430": XmArmBus, "sts3215": StsArmBus}


def arm_bus(family: str, spec: RobotSpec, registers: Sequence[Any]) -> ArmBus:
    """The driver-side reader of a servo family (``Rig.family.name``)."""
    try:
        return _READERS[family](spec, registers)
    except KeyError:
        raise ValueError(f"no bus reader for servo family {family!r} (known: {', '.join(_READERS)})") from None
