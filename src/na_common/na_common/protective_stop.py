"""Protective stop on the estimated contact force (ROS-free; time is passed in).

The monitor watches the estimator's contact force (``/estimator/force``) and latches a stop when the force has stayed
above its threshold for ``min_duration``. Hysteresis: once the force went above the threshold, only a fall below
``threshold - hysteresis`` resets the onset timer, so an estimate flickering around the threshold still trips.
A latched stop stays until :meth:`ProtectiveStopMonitor.release` (a service in the nodes). After a release the monitor
re-arms when the force has fallen below ``threshold - hysteresis``: the arm can be backed out of the contact that
stopped it without stopping again at once, and every later contact trips as before.

Two ways to compare: ``magnitude`` (the norm of the force vector against one threshold) or ``axis`` (each axis'
absolute value against its own threshold; an axis with threshold 0 is not watched).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from na_common.diagnostics import ERROR, OK, WARN, Level

MODES = ("magnitude", "axis")
AXES = ("x", "y", "z")
# Parameter ranges (node descriptors and the config check share them).
THRESHOLD_RANGE_N = (0.5, 200.0)
AXIS_THRESHOLD_RANGE_N = (0.0, 200.0)       # 0: axis not watched
MIN_DURATION_RANGE_S = (0.0, 1.0)
MAX_AGE_RANGE_S = (0.01, 1.0)


class ProtectiveStopConfigError(ValueError):
    """A protective-stop parameter is out of range; the message names the parameter."""


@dataclass(frozen=True)
class ProtectiveStopConfig:
    """Protective-stop parameters. Defaults: off; when on, a conservative 20 N on the magnitude for 30 ms."""

    enabled: bool = False
    mode: str = "magnitude"
    threshold: float = 20.0                                  # N, magnitude mode
    axis_thresholds: tuple[float, float, float] = (0.0, 0.0, 0.0)  # N per axis (x, y, z), axis mode
    hysteresis: float = 3.0                                  # N below the threshold that counts as "below"
    min_duration: float = 0.03                               # s above the threshold before the stop latches
    max_age: float = 0.1                                     # s: an older force sample is not used (stale estimate)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ProtectiveStopConfigError(f"protective_stop_mode must be one of {', '.join(MODES)}, "
                                            f"got {self.mode!r}")
        _check_range("protective_stop_threshold", self.threshold, THRESHOLD_RANGE_N)
        axes = tuple(float(v) for v in self.axis_thresholds)
        if len(axes) != 3:
            raise ProtectiveStopConfigError(f"protective_stop_axis_thresholds: expected 3 values (x, y, z), got "
                                            f"{len(axes)}")
        for axis, value in zip(AXES, axes, strict=True):
            _check_range(f"protective_stop_axis_thresholds ({axis})", value, AXIS_THRESHOLD_RANGE_N)
        object.__setattr__(self, "axis_thresholds", axes)
        if self.mode == "axis" and not any(axes):
            raise ProtectiveStopConfigError("protective_stop_axis_thresholds: axis mode needs at least one axis > 0 N")
        smallest = min([self.threshold] if self.mode == "magnitude" else [v for v in axes if v > 0.0])
        if not (math.isfinite(self.hysteresis) and 0.0 <= self.hysteresis < smallest):
            raise ProtectiveStopConfigError(f"protective_stop_hysteresis must be >= 0 N and below the smallest "
                                            f"threshold ({smallest} N), got {self.hysteresis}")
        _check_range("protective_stop_min_duration", self.min_duration, MIN_DURATION_RANGE_S)
        _check_range("protective_stop_max_age", self.max_age, MAX_AGE_RANGE_S)


def _check_range(name: str, value: float, bounds: tuple[float, float]) -> None:
    low, high = bounds
    if not (math.isfinite(value) and low <= value <= high):
        raise ProtectiveStopConfigError(f"{name} must be in [{low}, {high}], got {value}")


@dataclass(frozen=True)
class StopEvent:
    """A change worth a log line."""

    level: Level
    message: str


class ProtectiveStopMonitor:
    """Latches a stop when the estimated contact force stays above its threshold. Not thread-safe."""

    def __init__(self, config: ProtectiveStopConfig) -> None:
        self.config = config
        self.reason: str | None = None           # why the stop is latched; None while it is not
        self.stopped_at: float | None = None
        self.armed = True                         # False after a release until the force falls below the clear level
        self.stops = 0
        self.last_force: np.ndarray | None = None
        self.last_time: float | None = None
        self._above_since: float | None = None
        self._peak = 0.0                          # largest excess ratio (force / threshold) since the onset

    @property
    def stopped(self) -> bool:
        return self.reason is not None

    def _excess(self, force: np.ndarray) -> tuple[float, str]:
        """How far over its threshold the force is (1.0 = at the threshold), and what is compared, in words."""
        cfg = self.config
        if cfg.mode == "magnitude":
            magnitude = float(np.linalg.norm(force))
            return magnitude / cfg.threshold, f"|F| {magnitude:.1f} N (threshold {cfg.threshold:.1f} N)"
        ratios = [abs(force[k]) / t if t > 0.0 else 0.0 for k, t in enumerate(cfg.axis_thresholds)]
        k = int(np.argmax(ratios))
        return ratios[k], f"F{AXES[k]} {force[k]:+.1f} N (threshold {cfg.axis_thresholds[k]:.1f} N)"

    def _below_clear_level(self, force: np.ndarray) -> bool:
        cfg = self.config
        if cfg.mode == "magnitude":
            return float(np.linalg.norm(force)) < cfg.threshold - cfg.hysteresis
        return all(abs(force[k]) < t - cfg.hysteresis for k, t in enumerate(cfg.axis_thresholds) if t > 0.0)

    def update(self, force: Sequence[float], now: float) -> StopEvent | None:
        """A force estimate (N, x y z) taken at ``now``; returns an event when the stop latches or re-arms."""
        if not self.config.enabled:
            return None
        f = np.asarray(force, dtype=float)[:3]
        if f.shape != (3,) or not np.all(np.isfinite(f)):
            return None
        self.last_force, self.last_time = f, now
        below = self._below_clear_level(f)
        if not self.armed:
            if below:
                self.armed = True
                return StopEvent(OK, "protective stop re-armed: contact force below the clear level")
            return None
        if self.stopped:
            return None
        ratio, words = self._excess(f)
        if ratio >= 1.0:
            if self._above_since is None:
                self._above_since = now
            if now - self._above_since >= self.config.min_duration:
                held = now - self._above_since
                self.reason = f"estimated contact force {words} for {held * 1e3:.0f} ms"
                self.stopped_at = now
                self.stops += 1
                return StopEvent(ERROR, f"protective stop: {self.reason}")
        elif below:
            self._above_since = None
        return None

    def check_age(self, now: float) -> bool:
        """True when the last force sample is older than ``max_age`` (the estimator is silent)."""
        return self.last_time is None or now - self.last_time > self.config.max_age

    def release(self, now: float) -> tuple[bool, str]:
        """The explicit release: clears a latched stop; the monitor re-arms once the force is below the clear
        level. Returns (released, message)."""
        if not self.stopped:
            return False, "no protective stop to release"
        reason, self.reason, self.stopped_at = self.reason, None, None
        self._above_since = None
        self.armed = self.last_force is not None and self._below_clear_level(self.last_force)
        rearm = "armed" if self.armed else "re-arms when the contact force falls below the clear level"
        return True, f"protective stop released ({reason}); monitor {rearm}"

    def status(self, now: float | None = None) -> tuple[Level, str]:
        """Diagnostic level and message: ERROR while latched; WARN while waiting to re-arm or, given ``now``, while
        the force estimate is older than ``max_age`` (the stop cannot see a contact then); OK otherwise."""
        if not self.config.enabled:
            return OK, "disabled"
        if self.stopped:
            return ERROR, f"protective stop: {self.reason}"
        if not self.armed:
            return WARN, "released; re-arms when the contact force falls below the clear level"
        if now is not None and self.check_age(now):
            return WARN, (f"armed, but no force estimate for more than {self.config.max_age:.2f} s: "
                          "a contact would not be seen")
        return OK, "armed"

    def values(self) -> dict[str, str]:
        """Key/values for the status: settings, the last force and the number of stops."""
        cfg = self.config
        force = self.last_force
        return {
            "enabled": str(cfg.enabled).lower(), "mode": cfg.mode,
            "threshold_n": f"{cfg.threshold:.1f}" if cfg.mode == "magnitude"
            else ", ".join(f"{v:.1f}" for v in cfg.axis_thresholds),
            "hysteresis_n": f"{cfg.hysteresis:.1f}", "min_duration_s": f"{cfg.min_duration:.3f}",
            "last_force_n": "" if force is None else ", ".join(f"{v:.2f}" for v in force),
            "stops": str(self.stops), "reason": self.reason or "",
        }


def hold_pose(measured: np.ndarray, last_goal: np.ndarray | None, gripper_index: int | None,
              lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """The goal that holds a stopped follower: the arm joints where they are measured, the gripper at its last goal
    (a grasped object is not let go), within the limits. The last goal of a pressing arm lies beyond the surface it
    is blocked by (the position loop's lag); holding that goal keeps pushing, holding the measured pose does not."""
    hold = np.asarray(measured, dtype=float).copy()
    if gripper_index is not None and last_goal is not None:
        hold[gripper_index] = last_goal[gripper_index]
    return np.clip(hold, lower, upper)
