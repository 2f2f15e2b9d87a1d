"""Margins of a servo's effort and temperature against its datasheet (ROS-free; one implementation for the arm
driver's /diagnostics and the offline health report).

Effort: the spec's effort signal against the datasheet's full scale, taken from the servo table
(:mod:`na_description.servo_tables`): the stall current at 12 V for ``current`` (A), full output for ``load``
(a fraction, 1.0 = stall, as :func:`na_description.servo_tables.datasheet_torque_per_effort` reads it).
Temperature: against the servo's factory-default overheating shutdown (XM430 Temperature Limit, STS3215 Max
Temperature Limit: the register defaults in the servo table).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from na_description.servo_tables import servo_table
from na_description.spec import RobotSpec

# Effort above this fraction of the datasheet's stall figure (margin below 1 - it) is a warning, on the arm driver's
# status and in na-health: holding near stall is what heats a servo towards its overload and overheating shutdowns.
EFFORT_WARNING_FRACTION = 0.8

# Per servo model: the servo table's register with the overheating shutdown temperature, and its error-bit decoder
# (XM430 Hardware Error Status, STS3215 Status byte).
_TEMPERATURE_LIMIT_REGISTER = {"XM430-W350": "temperature_limit", "STS3215": "max_temperature_limit"}
_ERROR_DECODER = {"XM430-W350": "decode_hardware_error", "STS3215": "decode_status"}


@dataclass(frozen=True)
class DatasheetReference:
    """What the margins are measured against, for one robot spec."""

    servo_model: str
    effort_signal: str        # ArmState field: "current" or "load"
    effort_full_scale: float  # A (stall current at 12 V) or 1.0 (full output)
    effort_unit: str          # "A" or "fraction of full output"
    temperature_limit_c: float
    describe_error: Callable[[int], list[str]]   # error bits -> their names

    @property
    def effort_source(self) -> str:
        if self.effort_signal == "load":
            return f"{self.servo_model} full output (load 1.0)"
        return f"{self.servo_model} stall current at 12 V ({self.effort_full_scale:g} A)"


def datasheet_reference(spec: RobotSpec) -> DatasheetReference:
    """The datasheet figures of ``spec``'s servo model (ValueError for a model without a servo table)."""
    table = servo_table(spec)
    limit = float(table.REGISTERS[_TEMPERATURE_LIMIT_REGISTER[spec.servo_model]].default) * table.TEMPERATURE_UNIT_C
    describe = getattr(table, _ERROR_DECODER[spec.servo_model])
    if spec.effort_signal == "load":
        return DatasheetReference(spec.servo_model, "load", 1.0, "fraction of full output", limit, describe)
    return DatasheetReference(spec.servo_model, "current", float(table.STALL_CURRENT_12V), "A", limit, describe)


def effort_margin(effort: np.ndarray | float, reference: DatasheetReference) -> np.ndarray:
    """1 - |effort| / full scale: 1 at rest, 0 at the datasheet's stall figure, negative beyond it."""
    return 1.0 - np.abs(np.asarray(effort, dtype=float)) / reference.effort_full_scale


def temperature_margin(temperature: np.ndarray | float, reference: DatasheetReference) -> np.ndarray:
    """degC left before the servo's overheating shutdown."""
    return reference.temperature_limit_c - np.asarray(temperature, dtype=float)
