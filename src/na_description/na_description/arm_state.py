"""What an arm driver publishes for one cycle: the fields of na_msgs/ArmState and sensor_msgs/JointState (ROS-free).

Built here once, from the servos' decoded states (:class:`na_description.servo_state.ServoStates`) and the
robot spec, for both the arm driver node (na_driver) and the offline generator (na_sim.generate), so that
generated training data and the live estimator's input cannot drift apart. Joint side as in
docs/INTERFACES.md: joint angle = direction * servo angle + homing offset (``RobotSpec.servo_to_joint``);
velocity, current, PWM and load take the direction's sign; the gripper also as its slide.

Arrays stay numpy arrays (rosbags serialises those); rclpy messages take lists (the driver node converts).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from na_description.servo_state import ServoStates
from na_description.spec import RobotSpec


@dataclass
class ArmStateFields:
    """na_msgs/ArmState without its header; per-servo arrays in spec order."""

    role: str
    name: list[str]
    position: np.ndarray           # rad, joint side (gripper: servo angle)
    gripper_slide: float           # m (NaN without a gripper)
    goal_gripper_slide: float      # m
    velocity: np.ndarray           # rad/s
    goal_position: np.ndarray      # rad, joint side
    current: np.ndarray            # A
    pwm: np.ndarray                # fraction
    load: np.ndarray               # fraction of full output; empty where the servos have no load register
    input_voltage: np.ndarray      # V
    temperature: np.ndarray        # degC
    hardware_error: np.ndarray     # uint8, the family's error bits
    stale: np.ndarray              # bool
    timeout_errors: int
    crc_errors: int
    partial_errors: int
    dropped_cycles: int
    bus_cycle_duration: float      # s

    def message_fields(self) -> dict[str, Any]:
        """The ArmState fields by name (only those, also on a subclass that adds its own)."""
        return {f.name: getattr(self, f.name) for f in fields(ArmStateFields)}


def _gripper_index(spec: RobotSpec) -> int | None:
    return next((k for k, joint in enumerate(spec.joints) if joint.type == "gripper"), None)


def _slide(spec: RobotSpec, joint_position: np.ndarray) -> float:
    g = _gripper_index(spec)
    return math.nan if g is None else float(spec.gripper.angle_to_slide(joint_position[g]))


def arm_state_fields(spec: RobotSpec, role: str, servos: ServoStates, goal_position: np.ndarray, *,
                     reports_load: bool, stale: Sequence[bool], bus_cycle_duration: float, timeout_errors: int = 0,
                     crc_errors: int = 0, partial_errors: int = 0, dropped_cycles: int = 0) -> ArmStateFields:
    """One cycle's ArmState fields from every servo's state (spec order, servo side) and the goals the servos
    were last sent (``goal_position``, joint side). ``reports_load``: the family has a load register
    (``xm430.REPORTS_LOAD``, ``sts3215.REPORTS_LOAD``). The arrays are new (the inputs may change later)."""
    direction = np.array([j.drive_direction for j in spec.joints], dtype=float)
    position = spec.servo_to_joint(servos.position)
    goal = np.array(goal_position, dtype=float)
    return ArmStateFields(
        role=role, name=spec.joint_names, position=position, gripper_slide=_slide(spec, position),
        goal_gripper_slide=_slide(spec, goal), velocity=direction * servos.velocity, goal_position=goal,
        current=direction * servos.current, pwm=direction * servos.pwm,
        load=direction * servos.load if reports_load else np.zeros(0),
        input_voltage=np.array(servos.input_voltage, dtype=float),
        temperature=np.array(servos.temperature, dtype=float),
        hardware_error=(np.asarray(servos.error, dtype=np.int64) & 0xFF).astype(np.uint8),
        stale=np.array(stale, dtype=bool), timeout_errors=timeout_errors, crc_errors=crc_errors,
        partial_errors=partial_errors, dropped_cycles=dropped_cycles, bus_cycle_duration=bus_cycle_duration)


def joint_state_fields(spec: RobotSpec, arm: ArmStateFields) -> dict[str, Any]:
    """sensor_msgs/JointState fields (but the header) for RViz: the arm's joints, the gripper as its finger
    slide (m, m/s); no effort."""
    position, velocity = arm.position.copy(), arm.velocity.copy()
    g = _gripper_index(spec)
    if g is not None:
        position[g] = arm.gripper_slide
        velocity[g] = velocity[g] * spec.gripper.slope
    return {"name": list(arm.name), "position": position, "velocity": velocity, "effort": np.zeros(0)}
