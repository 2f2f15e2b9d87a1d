"""The servo family of a simulated arm: its control table, register class and driver-side writes (ROS-free).

The servo config names the family (``family:`` in ``servo_xm430.yaml`` / ``servo_sts3215.yaml``)
and the robot spec names the servo model (``servo.model``); :func:`sim_family` checks that the two
agree and returns what the rig, the offline generator and the live rig need to treat the arm's
servos without naming a family themselves: the emulated control table of one servo, the names of
the position-gain registers, the position modes, how a shaft angle becomes a Goal Position value
and how a servo powers up again. Tables, units and encodings come from
:mod:`na_description.xm430` / :mod:`na_description.sts3215` (not restated here).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from na_description import sts3215, xm430
from na_description.spec import RobotSpec
from na_sim.dxl_emulator import DxlBusEmulator
from na_sim.rig_config_error import RigConfigError
from na_sim.servo_table import SimulatedServoRegisters
from na_sim.sts_emulator import StsBusEmulator
from na_sim.sts_registers import StsServoRegisters


@dataclass(frozen=True)
class SimFamily:
    name: str                                   # ServoParams.family: xm430 | sts3215
    spec_model: str                             # RobotSpec.servo_model of arms with these servos
    table: ModuleType                           # na_description.xm430 | na_description.sts3215
    position_modes: tuple[int, ...]             # Operating Mode values the rig's follower may run in
    gain_registers: tuple[str, str, str]        # position P, I, D gain registers
    rad_to_steps: Callable[[Any], np.ndarray]   # shaft angle (rad, 0 = the table's centre) -> position steps
    make_registers: Callable[[int], Any]        # servo ID -> the servo's emulated control table
    _goal_value: Callable[[Any, int], int]      # (registers, shaft steps) -> Goal Position register value
    _power_up: Callable[[Any], None]            # a reboot / power cycle: RAM back to its defaults
    _bus: Callable[..., Any]                    # (registers, **options) -> the family's pty bus emulator
    physics_bytes: tuple[int, ...] = ()         # table bytes the physics writes after every step (present values,
                                                #   error register); the bus owns the rest (na_sim.shared_tables)
    error_bytes: tuple[int, ...] = ()           # the error register among them (cleared by a reboot on the bus)
    clock_bytes: tuple[int, ...] = ()           # bytes the physics writes but the bus sets from its own clock

    def goal_value(self, registers: Any, shaft_angle: float) -> int:
        """The Goal Position value that puts this servo's shaft at ``shaft_angle`` (its Homing Offset and,
        for the XM430, Drive Mode applied as the firmware applies them to Present Position)."""
        return int(self._goal_value(registers, int(self.rad_to_steps(shaft_angle))))

    def power_up(self, registers: Any) -> None:
        self._power_up(registers)

    def make_bus(self, registers: Any, *, baud_rate: int, wire_time: bool, faults: Any,
                 on_read: Callable[[Any], None] | None = None,
                 after_packets: Callable[[], None] | None = None,
                 on_reboot: Callable[[Any], None] | None = None) -> Any:
        """The pty bus emulator of this family serving ``registers`` (XM430: Protocol 2.0, STS3215: Protocol 0);
        ``on_read`` and ``after_packets`` are the bus hooks of :mod:`na_sim.pty_bus`; ``on_reboot`` runs after a
        Reboot instruction (Protocol 0 has none: never called on an STS3215 bus)."""
        return self._bus(registers, baud_rate=baud_rate, wire_time=wire_time, faults=faults, on_read=on_read,
                         after_packets=after_packets, on_reboot=on_reboot)


def _xm430_goal(registers: Any, pulses: int) -> int:
    direction = -1 if registers.get("drive_mode") & 1 else 1
    center = xm430.POSITION_CENTER
    return direction * (pulses - center) + center + registers.get("homing_offset")


def _sts3215_goal(registers: Any, steps: int) -> int:
    return steps - registers.get("homing_offset")          # Present Position = actual - Homing Offset


def _xm430_registers(servo_id: int) -> Any:
    return SimulatedServoRegisters(servo_id)


def _xm430_bus(registers: Any, **options: Any) -> Any:
    return DxlBusEmulator(registers, **options)


def _sts3215_bus(registers: Any, *, on_reboot: Callable[[Any], None] | None = None, **options: Any) -> Any:
    del on_reboot                       # Protocol 0 has no Reboot instruction
    return StsBusEmulator(registers, **options)


def _byte_range(table: ModuleType, first: str, last: str, *, without: tuple[str, ...] = ()) -> tuple[int, ...]:
    """Addresses from register ``first`` to the end of ``last``, less the bytes of the registers in ``without``."""
    skip = {address for name in without
            for address in range(table.REGISTERS[name].address, table.REGISTERS[name].end)}
    return tuple(a for a in range(table.REGISTERS[first].address, table.REGISTERS[last].end) if a not in skip)


def _sts3215_registers(servo_id: int) -> Any:
    return StsServoRegisters(servo_id)


FAMILIES: dict[str, SimFamily] = {
    "xm430": SimFamily("xm430", "XM430-W350", xm430, (3, 4, 5),
                       ("position_p_gain", "position_i_gain", "position_d_gain"), xm430.rad_to_pulses,
                       _xm430_registers, _xm430_goal, lambda registers: registers.reboot(), _xm430_bus,
                       # Realtime Tick is the bus's: the emulator sets it from its own clock on every read.
                       _byte_range(xm430, "hardware_error_status", "hardware_error_status")
                       + _byte_range(xm430, "moving", "present_temperature"),
                       _byte_range(xm430, "hardware_error_status", "hardware_error_status"),
                       _byte_range(xm430, "realtime_tick", "realtime_tick")),
    "sts3215": SimFamily("sts3215", "STS3215", sts3215, (0, 3),
                         ("p_coefficient", "i_coefficient", "d_coefficient"), sts3215.rad_to_steps,
                         _sts3215_registers, _sts3215_goal, lambda registers: registers.power_cycle(), _sts3215_bus,
                         _byte_range(sts3215, "present_position", "present_current", without=("async_write_flag",)),
                         _byte_range(sts3215, "status", "status")),
}


def sim_family(family: str, spec: RobotSpec) -> SimFamily:
    """The family named by a servo config, checked against the spec's servo model (one-line error)."""
    try:
        found = FAMILIES[family]
    except KeyError:
        raise RigConfigError(f"unknown servo family {family!r} (known: {', '.join(FAMILIES)})") from None
    if found.spec_model != spec.servo_model:
        raise RigConfigError(f"servo family {family!r} simulates {found.spec_model} servos, but robot "
                             f"'{spec.name}' has {spec.servo_model}: use that robot's servo_config")
    return found
