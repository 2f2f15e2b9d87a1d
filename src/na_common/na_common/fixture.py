"""The F/T fixture's pose in the robot base frame: one type for the simulated rig (where it places the
sensor) and the converter (how it turns sensor readings into base-frame force labels).

Roll-pitch-yaw follows REP-103 (fixed axes X, then Y, then Z: R = Rz(yaw) Ry(pitch) Rx(roll)); see
docs/REFERENCES.md, ROS conventions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np


class FixturePoseError(ValueError):
    """A fixture pose that is not three finite position and three finite rpy values."""


def rotation_from_rpy(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Rotation matrix Rz(yaw) Ry(pitch) Rx(roll) (3 x 3)."""
    cr, sr = np.cos(roll), np.sin(roll)
    cp, sp = np.cos(pitch), np.sin(pitch)
    cy, sy = np.cos(yaw), np.sin(yaw)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def _vector(value: Any, where: str) -> tuple[float, float, float]:
    try:
        vector = tuple(float(v) for v in value)
    except (TypeError, ValueError):
        raise FixturePoseError(f"{where}: expected three numbers, got {value!r}") from None
    if len(vector) != 3 or not all(np.isfinite(vector)):
        raise FixturePoseError(f"{where}: expected three finite numbers, got {value!r}")
    return vector


@dataclass(frozen=True)
class FixturePose:
    """Pose of the F/T sensor in the robot base frame: position (m) and roll-pitch-yaw (rad)."""

    position: tuple[float, float, float]
    rpy: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @classmethod
    def parse(cls, pose: Any, where: str = "fixture") -> FixturePose:
        """A FixturePose, ``{position: [x, y, z], rpy: [r, p, y]}`` (rpy defaults to 0) or ``(position, rpy)``."""
        if isinstance(pose, FixturePose):
            return pose
        if isinstance(pose, Mapping):
            if "position" not in pose:
                raise FixturePoseError(f"{where}: expected a mapping with keys position and rpy, got {dict(pose)!r}")
            position, rpy = pose["position"], pose.get("rpy", (0.0, 0.0, 0.0))
        else:
            try:
                position, rpy = pose
            except (TypeError, ValueError):
                raise FixturePoseError(f"{where}: expected {{position, rpy}} or (position, rpy), got {pose!r}") \
                    from None
        return cls(_vector(position, f"{where}.position"), _vector(rpy, f"{where}.rpy"))

    @property
    def rotation(self) -> np.ndarray:
        """R_base_sensor (3 x 3)."""
        return rotation_from_rpy(*self.rpy)
