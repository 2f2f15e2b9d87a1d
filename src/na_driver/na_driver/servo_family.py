"""What the arm driver needs to know of a servo family to validate its parameters (ROS-free).

The robot spec names the servo model (``servo.model``: XM430-W350 for the OpenManipulator-X,
STS3215 for the SO-101); this module maps it to the family's control-table facts, taken from
``na_description.xm430`` / ``na_description.sts3215`` (one source of each number, not restated).
Which bus and start-up sequence drive a family: :func:`na_driver.backends.make_backend`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType

from na_description import RobotSpec, sts3215, xm430

XM430, STS3215 = "XM430", "STS3215"


@dataclass(frozen=True)
class ServoFamily:
    name: str                                  # XM430 or STS3215
    table: ModuleType                          # na_description.xm430 or na_description.sts3215
    baud_rates: Mapping[int, int]              # Baud Rate register code -> bit/s
    operating_modes: Mapping[int, str]         # Operating Mode register value -> name
    default_operating_mode: str
    max_gain: int                              # largest value of the position P/I/D gain registers
    current_limit_register: str                # the EEPROM register parameter current_limit writes
    current_unit_a: float
    return_delay_unit_s: float
    max_return_delay_units: int
    temperature_limit: float                   # degC, the servo's own shutdown (register default)
    max_id: int
    bus_watchdog: bool                         # has a Bus Watchdog (stops on its own when the host is silent)

    @property
    def max_current_limit_a(self) -> float:
        return self.table.REGISTERS[self.current_limit_register].maximum * self.current_unit_a

    @property
    def default_current_limit_a(self) -> float:
        """XM430: the largest Current Limit (its factory value); STS3215: the factory Protection Current."""
        reg = self.table.REGISTERS[self.current_limit_register]
        return (reg.maximum if self.name == XM430 else reg.default) * self.current_unit_a

    @property
    def max_return_delay_us(self) -> float:
        return self.max_return_delay_units * self.return_delay_unit_s * 1e6


_FAMILIES = {
    "XM430-W350": ServoFamily(
        XM430, xm430, xm430.BAUD_RATES, xm430.OPERATING_MODES, "extended_position",
        xm430.REGISTERS["position_p_gain"].maximum, "current_limit", xm430.CURRENT_UNIT_A,
        xm430.RETURN_DELAY_UNIT_S, xm430.REGISTERS["return_delay_time"].maximum,
        xm430.REGISTERS["temperature_limit"].default, xm430.REGISTERS["id"].maximum, bus_watchdog=True),
    "STS3215": ServoFamily(
        STS3215, sts3215, sts3215.BAUD_RATES, sts3215.OPERATING_MODES, "position",   # LeRobot runs the SO-101 in mode 0
        sts3215.REGISTERS["p_coefficient"].maximum, "protection_current", sts3215.CURRENT_UNIT_A,
        sts3215.RETURN_DELAY_UNIT_S, sts3215.REGISTERS["return_delay_time"].maximum,
        sts3215.REGISTERS["max_temperature_limit"].default, sts3215.REGISTERS["id"].maximum, bus_watchdog=False),
}


def family_of(spec: RobotSpec) -> ServoFamily:
    """The family of the spec's servo model; ValueError names the model and the known ones."""
    try:
        return _FAMILIES[spec.servo_model]
    except KeyError:
        raise ValueError(f"robot spec '{spec.name}': servo model {spec.servo_model!r} has no driver "
                         f"(known: {', '.join(sorted(_FAMILIES))})") from None
