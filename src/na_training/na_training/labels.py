"""Force, contact and condition labels of the Neural Actuation Dataset (pure numpy, no ROS).

Sign and frame (docs/INTERFACES.md "Force sign and frames", paper Eq. 4): the label is the
force the environment exerts on the robot at the tool point, in the robot base frame. The
F/T sensor reports the force the tool exerts on the sensor, in the sensor frame, hence
``f_label = -R_base_sensor @ (f_sensor - tare)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from na_common.episode_bag import FORCE_SOURCES, NOMINAL_CONDITION, restricted_condition
from na_common.fixture import FixturePose, FixturePoseError

STANDARD_GRAVITY = 9.81  # m/s^2, the value docs/INTERFACES.md fixes for the payload label

# Condition label of the supervised motor (paper Sec. III-A: c = 1 normal, 0 mechanically restricted;
# only Joint 3 is supervised on the OpenManipulator-X benchmark). The supervised joint is the robot
# spec's condition_joint; an episode's condition is "nominal" or "restricted_<that joint>".


class LabelError(ValueError):
    """Episode metadata or configuration cannot produce a label."""


def fixture_from_mapping(raw: Any, where: str = "fixture") -> FixturePose:
    """The fixture pose of the converter config or of an episode's metadata, as a label error if malformed."""
    try:
        return FixturePose.parse(raw, where)
    except FixturePoseError as err:
        raise LabelError(str(err)) from None


def ft_force_label(sensor_force: np.ndarray, rotation: np.ndarray, tare: Sequence[float] = (0.0, 0.0, 0.0)
                   ) -> np.ndarray:
    """Base-frame environment-on-robot force from sensor-frame readings ``[T, 3]`` (N)."""
    sensor_force = np.asarray(sensor_force, dtype=np.float64)
    tared = sensor_force - np.asarray(tare, dtype=np.float64)
    return -(tared @ np.asarray(rotation, dtype=np.float64).T)


def payload_force_label(grasp: np.ndarray, payload_grams: float) -> np.ndarray:
    """Nominal ``[0, 0, -m g]`` while the payload is grasped, zero otherwise (paper Sec. IV-B), ``[T, 3]``."""
    if not np.isfinite(payload_grams) or payload_grams < 0:
        raise LabelError(f"payload_grams must be a finite non-negative number, got {payload_grams!r}")
    grasp = np.asarray(grasp, dtype=bool)
    label = np.zeros((grasp.shape[0], 3))
    label[grasp, 2] = -payload_grams / 1000.0 * STANDARD_GRAVITY
    return label


def contact_from_force(force: np.ndarray, valid: np.ndarray, threshold: float) -> np.ndarray:
    """Contact label ``|f| > threshold`` over the valid channels; frames without a valid channel are 0."""
    force = np.where(valid, np.asarray(force, dtype=np.float64), 0.0)
    return np.linalg.norm(force, axis=1) > threshold


def condition_labels(condition: str, joint: str) -> dict[str, float]:
    """Condition label of the supervised ``joint`` for an episode's ``condition`` metadata value."""
    known = {NOMINAL_CONDITION: 1.0, restricted_condition(joint): 0.0}
    if condition not in known:
        raise LabelError(f"unknown condition {condition!r} (known: {', '.join(known)})")
    return {joint: known[condition]}


def check_force_source(force_source: str) -> str:
    if force_source not in FORCE_SOURCES:
        raise LabelError(f"unknown force_source {force_source!r} (known: {', '.join(FORCE_SOURCES)})")
    return force_source
