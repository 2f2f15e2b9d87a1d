"""The family module of a spec's servo model (``xm430``, ``sts3215``, ``panda_drive``) and its datasheet figures."""

from __future__ import annotations

from types import ModuleType

from na_description import panda_drive, sts3215, xm430
from na_description.spec import RobotSpec

SERVO_TABLES: dict[str, ModuleType] = {"XM430-W350": xm430, "STS3215": sts3215, panda_drive.MODEL: panda_drive}


def servo_table(spec: RobotSpec) -> ModuleType:
    """The module with the servo's register table, units and datasheet figures; ValueError for an unknown model."""
    try:
        return SERVO_TABLES[spec.servo_model]
    except KeyError:
        raise ValueError(f"robot spec '{spec.name}': no servo table for {spec.servo_model!r} "
                         f"(known: {', '.join(SERVO_TABLES)})") from None


def datasheet_torque_per_effort(spec: RobotSpec) -> tuple[float, str]:
    """Datasheet torque per unit of the spec's effort signal at 12 V, and that unit: stall torque / stall current
    (N·m/A) for Present Current, stall torque per full-scale Present Load (N·m per unit load) for load (a family
    without a stall figure, the Panda's drives: its TORQUE_AT_FULL_LOAD)."""
    table = servo_table(spec)
    if spec.effort_signal == "load":
        return getattr(table, "TORQUE_AT_FULL_LOAD", None) or table.STALL_TORQUE_12V, "load"
    return table.STALL_TORQUE_12V / table.STALL_CURRENT_12V, "A"


def effort_excludes_gravity(spec: RobotSpec) -> bool:
    """Whether the arm's effort signal leaves out the gravity torque its controller adds itself (the Panda's
    commanded torque); the servo families' current and load carry it."""
    return bool(getattr(servo_table(spec), "EFFORT_EXCLUDES_GRAVITY", False))


def input_voltage_range(spec: RobotSpec, default: tuple[float, float]) -> tuple[float, float]:
    """The plausible supply voltage (V) of the arm's actuator family: the family's own range where it has one
    (the Panda's 48 V bus), else ``default`` (the servos')."""
    return tuple(getattr(servo_table(spec), "INPUT_VOLTAGE_RANGE_V", default))
