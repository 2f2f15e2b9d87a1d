"""Which LeRobot robot each suite arm is, and the per-motor telemetry channels a LeRobot dataset carries.

* The SO-101 is LeRobot's ``so_follower`` (``SO101Follower`` and ``SO100Follower`` are the same class; its config
  registers ``so101_follower`` and ``so100_follower``): motors ``shoulder_pan``, ``shoulder_lift``, ``elbow_flex``,
  ``wrist_flex``, ``wrist_roll``, ``gripper`` (servo IDs 1-6), the suite's joint names.
* The OpenManipulator-X has no LeRobot robot class (LeRobot's ``omx_follower`` is ROBOTIS's OMX, a different arm
  with six XL430/XL330 servos); exports name it ``open_manipulator_x`` with the suite's motor names ``joint1`` ...
  ``joint4``, ``gripper`` and LeRobot's Dynamixel normalisation of the same 4096-step encoder.

Sources: LeRobot's ``robots/so_follower/`` and ``robots/omx_follower/`` (docs/REFERENCES.md, LeRobot dataset).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from na_description import RobotSpec

# Export robot_type per suite robot, and the spellings import accepts (lower case, letters and digits only).
EXPORT_ROBOT_TYPE = {"so101": "so101_follower", "open_manipulator_x": "open_manipulator_x"}
ACCEPTED_ROBOT_TYPES: dict[str, dict[str, str]] = {
    "so101": {
        "so101follower": "", "so101": "", "sofollower": "the SO-100/SO-101 follower class",
        "so100follower": "SO-100: the same six STS3215 motors and names; imported with the SO-101 spec "
                         "(its arm geometry differs slightly)",
        "so100": "SO-100: the same six STS3215 motors and names; imported with the SO-101 spec "
                 "(its arm geometry differs slightly)",
    },
    "open_manipulator_x": {"openmanipulatorx": "", "omxx": "", "openmanipulatorxfollower": ""},
}
# robot_type spellings that name another arm, with the reason given when refusing them.
OTHER_ARMS = {
    "omxfollower": "LeRobot's omx_follower is ROBOTIS's OMX (six XL430/XL330 servos), not the OpenManipulator-X",
    "omx": "LeRobot's omx_follower is ROBOTIS's OMX (six XL430/XL330 servos), not the OpenManipulator-X",
    "bisofollower": "a bimanual SO arm pair (two arms in one dataset)",
    "biso100follower": "a bimanual SO arm pair (two arms in one dataset)",
    "biso101follower": "a bimanual SO arm pair (two arms in one dataset)",
}
UNKNOWN_ROBOT_TYPES = ("", "none", "null", "unknown")
# LeRobot's calibration folders (calibration/robots/<folder>/<id>.json) per suite robot, newest name first.
CALIBRATION_FOLDERS = {"so101": ("so_follower", "so101_follower", "so100_follower"),
                       "open_manipulator_x": ("open_manipulator_x",)}


def normalise_robot_type(robot_type: object) -> str:
    """``SO-101 Follower`` -> ``so101follower``: lower case, letters and digits only."""
    return re.sub(r"[^a-z0-9]", "", str(robot_type or "").lower())


def robot_for_type(robot_type: object) -> tuple[str | None, str]:
    """The suite robot a LeRobot ``robot_type`` names and a note on the spelling (``None`` when unknown);
    raises ValueError for a type that names another arm."""
    key = normalise_robot_type(robot_type)
    if key in OTHER_ARMS:
        raise ValueError(f"robot_type {robot_type!r} is {OTHER_ARMS[key]}")
    for robot, spellings in ACCEPTED_ROBOT_TYPES.items():
        if key in spellings:
            return robot, spellings[key]
    return None, ""


# ----------------------------------------------------------------------------------------- channels

@dataclass(frozen=True)
class Channel:
    """One per-motor telemetry channel: the NAD field, the LeRobot feature and name suffix it is exported as, and
    the factor from the NAD's SI unit to the exported unit (named in the suffix)."""

    field: str          # NAD per-joint field (``velocity``, ``load``, ...)
    feature: str        # LeRobot feature key
    suffix: str         # entry name = <motor><suffix>
    scale: float        # exported value = NAD value * scale
    nad_unit: str


CHANNELS = {
    "velocity": Channel("velocity", "observation.velocity", ".vel_deg_s", 180.0 / math.pi, "rad/s"),
    "load": Channel("load", "observation.load", ".load_pct", 100.0, "fraction of full output"),
    "current": Channel("current", "observation.current", ".current_mA", 1000.0, "A"),
    "pwm": Channel("pwm", "observation.pwm", ".pwm_pct", 100.0, "fraction of full duty"),
    "input_voltage": Channel("input_voltage", "observation.voltage", ".voltage_V", 1.0, "V"),
    "temperature": Channel("temperature", "observation.temperature", ".temperature_degC", 1.0, "degC"),
}
# What each servo family measures (the STS3215's PWM field repeats its Present Load, so it is not a channel).
SERVO_CHANNELS = {"STS3215": ("velocity", "load", "current", "input_voltage", "temperature"),
                  "XM430-W350": ("velocity", "current", "pwm", "input_voltage", "temperature")}

# Tool force and contact: NAD label columns and the estimator's outputs.
FORCE_NAMES = ["force.x_N", "force.y_N", "force.z_N"]          # base frame, environment on the robot
FORCE_VALID_NAMES = ["force.x_valid", "force.y_valid", "force.z_valid"]
FORCE_FEATURE, FORCE_VALID_FEATURE, CONTACT_FEATURE = "observation.force", "observation.force_valid", \
    "observation.contact"
ESTIMATE_FORCE_FEATURE, ESTIMATE_CONTACT_FEATURE = "observation.force_estimate", "observation.contact_estimate"
ESTIMATE_CONTACT_NAMES = ["contact_probability", "in_contact", "estimate_valid"]


def channels_for(spec: RobotSpec) -> list[Channel]:
    """The telemetry channels a robot's servos give (all when the servo family is unknown)."""
    return [CHANNELS[name] for name in SERVO_CHANNELS.get(spec.servo_model, tuple(CHANNELS))]


__all__ = ["ACCEPTED_ROBOT_TYPES", "CALIBRATION_FOLDERS", "CHANNELS", "EXPORT_ROBOT_TYPE", "Channel",
           "channels_for", "normalise_robot_type", "robot_for_type"]
