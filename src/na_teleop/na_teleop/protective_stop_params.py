"""The protective stop's node parameters: defaults, descriptions, ranges (descriptors) and the config they make.

Declared here before :func:`na_common.ros_node.declare_and_read` reads them, so each float parameter carries its
``FloatingPointRange`` (``ros2 param describe`` shows it, ``ros2 param set`` outside it is refused). The ranges are
those :class:`na_common.protective_stop.ProtectiveStopConfig` checks, spelled once there.
"""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import FloatingPointRange, ParameterDescriptor
from rclpy.exceptions import InvalidParameterValueException
from rclpy.node import Node

from na_common.protective_stop import (
    AXIS_THRESHOLD_RANGE_N,
    MAX_AGE_RANGE_S,
    MIN_DURATION_RANGE_S,
    MODES,
    THRESHOLD_RANGE_N,
    ProtectiveStopConfig,
    ProtectiveStopConfigError,
)

_DEFAULT = ProtectiveStopConfig()
DEFAULTS: dict[str, Any] = {
    "protective_stop_enabled": _DEFAULT.enabled,
    "protective_stop_mode": _DEFAULT.mode,
    "protective_stop_threshold": _DEFAULT.threshold,
    "protective_stop_axis_thresholds": list(_DEFAULT.axis_thresholds),
    "protective_stop_hysteresis": _DEFAULT.hysteresis,
    "protective_stop_min_duration": _DEFAULT.min_duration,
    "protective_stop_max_age": _DEFAULT.max_age,
}
RANGES: dict[str, tuple[float, float]] = {
    "protective_stop_threshold": THRESHOLD_RANGE_N,
    "protective_stop_axis_thresholds": AXIS_THRESHOLD_RANGE_N,
    "protective_stop_hysteresis": (0.0, THRESHOLD_RANGE_N[1]),
    "protective_stop_min_duration": MIN_DURATION_RANGE_S,
    "protective_stop_max_age": MAX_AGE_RANGE_S,
}
DESCRIPTIONS = {
    "protective_stop_enabled": "Hold the follower when the estimated contact force (/estimator/force) passes its "
                               "threshold; released by ~/release_protective_stop (Trigger). Default off.",
    "protective_stop_mode": f"How the force is compared ({', '.join(MODES)}): magnitude, |F| against "
                            "protective_stop_threshold; axis, |Fx|, |Fy|, |Fz| against "
                            "protective_stop_axis_thresholds.",
    "protective_stop_threshold": "N, contact-force magnitude that stops the follower (magnitude mode).",
    "protective_stop_axis_thresholds": "N per axis x, y, z of the force frame (axis mode); 0: axis not watched.",
    "protective_stop_hysteresis": "N: the force must fall below threshold - hysteresis to reset the onset timer and "
                                  "to re-arm after a release (below the smallest threshold).",
    "protective_stop_min_duration": "s the force must stay above the threshold before the stop latches.",
    "protective_stop_max_age": "s: a force estimate older than this counts as missing (reported on /diagnostics).",
}


def declare(node: Node) -> None:
    """Declare the parameters with their descriptions and ranges (float ones); a value outside its range raises
    ProtectiveStopConfigError naming the parameter."""
    for name, default in DEFAULTS.items():
        descriptor = ParameterDescriptor(description=DESCRIPTIONS[name], dynamic_typing=True)
        if name in RANGES:
            low, high = RANGES[name]
            descriptor.description += f" Range [{low}, {high}]."
            descriptor.floating_point_range = [FloatingPointRange(from_value=float(low), to_value=float(high))]
        try:
            node.declare_parameter(name, default, descriptor)
        except InvalidParameterValueException as error:
            raise ProtectiveStopConfigError(f"{name}: {error}") from error


def config(params: dict[str, Any]) -> ProtectiveStopConfig:
    """The monitor's config from the read parameter values (raises ProtectiveStopConfigError)."""
    return ProtectiveStopConfig(
        enabled=bool(params["protective_stop_enabled"]), mode=str(params["protective_stop_mode"]),
        threshold=float(params["protective_stop_threshold"]),
        axis_thresholds=tuple(float(v) for v in params["protective_stop_axis_thresholds"]),
        hysteresis=float(params["protective_stop_hysteresis"]),
        min_duration=float(params["protective_stop_min_duration"]),
        max_age=float(params["protective_stop_max_age"]))
