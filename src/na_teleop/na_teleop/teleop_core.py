"""Leader-to-follower teleoperation logic, free of ROS.

The node feeds leader and follower samples in (positions, currents, the time they arrived) and the
follower driver's trip status (:meth:`TeleopCore.on_follower_trip`) and the estimated contact force
(:meth:`TeleopCore.on_force`, for the protective stop), and publishes whatever :meth:`TeleopCore.on_leader`
returns. Time is always passed in, so every behaviour (soft start, stale hold, overload window, trip hold,
protective stop) is testable with injected time.

Pipeline for one leader sample: per-joint mapping (sign, offset; gripper scale, offset) ->
clamping to the follower's joint limits -> soft-start blend (from the follower's pose at
enable time to the leader's pose over ``soft_start_duration``) -> maximum step per cycle
relative to the previous command -> clamping again.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from na_common import topics
from na_common.diagnostics import ERROR, OK, WARN, Level
from na_common.protective_stop import ProtectiveStopConfig, ProtectiveStopMonitor, hold_pose

# Paper, Appendix F / Fig. A20: 1200 mA is the motor-current safety limit of the arms.
DEFAULT_OVERLOAD_CURRENT_A = 1.2
# The staleness bound for the leader stream.
DEFAULT_STALE_TIMEOUT_S = 0.1
# Largest command change per leader sample. At the drivers' 100 Hz this allows 10 rad/s, about
# twice the XM430-W350's no-load speed (46 rpm = 4.8 rad/s; docs/REFERENCES.md, XM430-W350), so normal motion passes.
DEFAULT_MAX_STEP_RAD = 0.1


class TeleopConfigError(ValueError):
    """A teleop parameter is out of range or inconsistent; the message names the parameter."""


# Config field -> the node parameter a user sets, so errors name what the user can change.
PARAMETER_NAMES = {"sign": "joint_sign", "offset": "joint_offset", "max_step": "max_step_per_cycle",
                   "lower": "joint limits (lower)", "upper": "joint limits (upper)"}


class TeleopState(enum.Enum):
    DISABLED = "disabled"          # service turned following off; nothing is commanded
    WAITING = "waiting"            # enabled, waiting for both a leader and a follower sample
    SOFT_START = "soft_start"      # blending from the follower's pose to the leader's
    TRACKING = "tracking"          # follower goal = mapped leader pose (rate limited)
    STALE = "stale"                # leader silent for > stale_timeout: hold, no new commands
    OVERLOAD = "overload"          # follower current too high for too long: hold until re-enabled
    TRIPPED = "tripped"            # the follower driver tripped (torque off): no commands until it is back
    PROTECTIVE_STOP = "protective_stop"  # estimated contact force too high: hold until ~/release_protective_stop


@dataclass(frozen=True)
class TeleopConfig:
    """Teleop parameters; arrays have one entry per joint in ``joint_names`` order.

    ``sign`` and ``offset`` map leader to follower for every joint: ``q_f = sign * q_l + offset``.
    For the gripper, ``sign`` acts as a scale (any non-zero value), so the gripper's opening
    range can be rescaled, e.g. when the two grippers are calibrated differently.
    """

    joint_names: tuple[str, ...]
    gripper_index: int | None          # index of the gripper joint (scale allowed), None if absent
    sign: np.ndarray                   # -, +1/-1 on revolute joints, any non-zero scale on the gripper
    offset: np.ndarray                 # rad, added after the sign
    lower: np.ndarray                  # rad, follower joint-side limits (gripper: servo angle)
    upper: np.ndarray                  # rad
    max_step: np.ndarray               # rad per command cycle, > 0
    soft_start_duration: float = 3.0   # s
    stale_timeout: float = DEFAULT_STALE_TIMEOUT_S     # s
    overload_current: float = DEFAULT_OVERLOAD_CURRENT_A  # A, absolute follower current
    overload_window: float = 0.2       # s the current must stay above the limit to trip
    # rad: after a stale gap, a leader that moved at most this far (every joint) from the held goal is tracked
    # again at once (the per-cycle step limit still applies); a larger jump gets a soft start. A gap of a few
    # cycles on a busy host must not turn into seconds of blending that the recorded motion never had.
    stale_resume_jump: float = 0.3
    follower_reboot: str = topics.FOLLOWER_REBOOT   # the service that brings a tripped follower back (for messages)
    protective_stop: ProtectiveStopConfig = field(default_factory=ProtectiveStopConfig)   # off by default
    release_service: str = "~/release_protective_stop"   # the call that releases a protective stop (for messages)

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        if n == 0:
            raise TeleopConfigError("joint_names: at least one joint is required")
        if len(set(self.joint_names)) != n:
            raise TeleopConfigError(f"joint_names: names must be unique, got {list(self.joint_names)}")
        for name in ("sign", "offset", "lower", "upper", "max_step"):
            value = np.asarray(getattr(self, name), dtype=float)
            if value.shape != (n,):
                raise TeleopConfigError(f"{PARAMETER_NAMES[name]}: expected {n} values (one per joint),"
                                        f" got {value.size}")
            if not np.all(np.isfinite(value)):
                raise TeleopConfigError(f"{PARAMETER_NAMES[name]}: values must be finite, got {value.tolist()}")
            object.__setattr__(self, name, value)
        if self.gripper_index is not None and not 0 <= self.gripper_index < n:
            raise TeleopConfigError(f"gripper_index {self.gripper_index} outside 0..{n - 1}")
        for k, s in enumerate(self.sign):
            if k == self.gripper_index:
                if s == 0.0:
                    raise TeleopConfigError(f"joint_sign of gripper joint '{self.joint_names[k]}' must be non-zero")
            elif s not in (1.0, -1.0):
                raise TeleopConfigError(f"joint_sign of joint '{self.joint_names[k]}' must be 1 or -1, got {s}")
        if np.any(self.lower >= self.upper):
            raise TeleopConfigError("joint limits: every lower limit must be below its upper limit")
        if np.any(self.max_step <= 0.0):
            raise TeleopConfigError(f"max_step_per_cycle: values must be > 0 rad, got {self.max_step.tolist()}")
        if not (math.isfinite(self.soft_start_duration) and self.soft_start_duration >= 0.0):
            raise TeleopConfigError(f"soft_start_duration must be >= 0 s, got {self.soft_start_duration}")
        if not (math.isfinite(self.stale_timeout) and self.stale_timeout > 0.0):
            raise TeleopConfigError(f"stale_timeout must be > 0 s, got {self.stale_timeout}")
        if not (math.isfinite(self.overload_current) and self.overload_current > 0.0):
            raise TeleopConfigError(f"overload_current must be > 0 A, got {self.overload_current}")
        if not (math.isfinite(self.overload_window) and self.overload_window >= 0.0):
            raise TeleopConfigError(f"overload_window must be >= 0 s, got {self.overload_window}")
        if not (math.isfinite(self.stale_resume_jump) and self.stale_resume_jump >= 0.0):
            raise TeleopConfigError(f"stale_resume_jump must be >= 0 rad, got {self.stale_resume_jump}")

    @property
    def n_joints(self) -> int:
        return len(self.joint_names)

    @classmethod
    def from_spec(cls, spec, **overrides) -> TeleopConfig:
        """Defaults from a :class:`na_description.RobotSpec`: identity mapping, the follower's limits."""
        lower, upper = spec.servo_angle_limits()
        n = spec.n_motors
        values = {
            "joint_names": tuple(spec.joint_names),
            "gripper_index": spec.gripper_index,
            "sign": np.ones(n),
            "offset": np.zeros(n),
            "lower": lower,
            "upper": upper,
            "max_step": np.full(n, DEFAULT_MAX_STEP_RAD),
        }
        values.update(overrides)
        return cls(**values)


@dataclass(frozen=True)
class TeleopEvent:
    """Something the node should log. ``key`` groups repeated warnings for throttling."""

    level: str        # "info", "warn" or "error"
    key: str
    message: str


def smoothstep(x: float) -> float:
    """Quintic blend 0 -> 1 with zero velocity and acceleration at both ends (minimum jerk)."""
    x = min(max(x, 0.0), 1.0)
    return x * x * x * (10.0 - 15.0 * x + 6.0 * x * x)


@dataclass
class _Overload:
    above_since: list[float | None] = field(default_factory=list)


class TeleopCore:
    """State machine of one leader-follower pair. Not thread-safe; the node serialises calls."""

    def __init__(self, config: TeleopConfig, enabled: bool = True) -> None:
        self.config = config
        self._state = TeleopState.WAITING if enabled else TeleopState.DISABLED
        self._events: list[TeleopEvent] = []
        self._last_leader_time: float | None = None
        self._follower_position: np.ndarray | None = None
        self._last_command: np.ndarray | None = None
        self._last_target: np.ndarray | None = None
        self._soft_start_from: np.ndarray | None = None
        self._soft_start_time = 0.0
        self._overload = _Overload([None] * config.n_joints)
        self.overload_joint: str | None = None
        self.follower_trip: str | None = None      # why the follower driver is tripped; None while it is not
        self.protective_stop = ProtectiveStopMonitor(config.protective_stop)

    # ------------------------------------------------------------------ state
    @property
    def state(self) -> TeleopState:
        return self._state

    @property
    def last_command(self) -> np.ndarray | None:
        return None if self._last_command is None else self._last_command.copy()

    def drain_events(self) -> list[TeleopEvent]:
        """Events since the last call (the node logs them)."""
        events, self._events = self._events, []
        return events

    def _emit(self, level: str, key: str, message: str) -> None:
        self._events.append(TeleopEvent(level, key, message))

    def set_enabled(self, enabled: bool, now: float) -> str:
        """Enable (starts a new soft start, clears an overload hold) or disable following. Enabled while the
        follower is tripped, teleop waits for it to be back."""
        if not enabled:
            self._state = TeleopState.DISABLED
            message = "teleoperation disabled: follower holds its last goal"
        else:
            self.overload_joint = None
            self._overload = _Overload([None] * self.config.n_joints)
            self._last_command = None
            if self.protective_stop.stopped:
                self._state = TeleopState.PROTECTIVE_STOP
                message = f"teleoperation enabled; {self._stop_message()}"
            elif self.follower_trip is not None:
                self._state = TeleopState.TRIPPED
                message = f"teleoperation enabled; {self._trip_message()}"
            else:
                self._state = TeleopState.WAITING
                message = "teleoperation enabled: soft start on the next leader and follower samples"
        self._emit("info", "enable", message)
        return message

    def _stop_message(self) -> str:
        return (f"protective stop ({self.protective_stop.reason}); follower holds its last goal; "
                f"call {self.config.release_service}")

    def _trip_message(self) -> str:
        return f"follower tripped: {self.follower_trip}; not commanding; call {self.config.follower_reboot}"

    def on_follower_trip(self, reason: str | None) -> None:
        """The follower driver's trip status: ``reason`` while it is tripped (torque off, holding), None when it
        is not. A trip stops the commands (said once); the follower back (rebooted) restarts the soft start
        from its present pose, taken from the next follower sample."""
        was = self.follower_trip
        self.follower_trip = reason or None        # "" counts as not tripped
        if self.follower_trip is not None and was is None:
            if self._state not in (TeleopState.DISABLED, TeleopState.OVERLOAD, TeleopState.PROTECTIVE_STOP):
                self._state = TeleopState.TRIPPED
            self._emit("error", "tripped", self._trip_message())
        elif self.follower_trip is None and was is not None:
            if self._state is TeleopState.TRIPPED and self.protective_stop.stopped:
                self._state = TeleopState.PROTECTIVE_STOP
                self._emit("info", "tripped", f"follower is back; {self._stop_message()}")
            elif self._state is TeleopState.TRIPPED:
                self._state = TeleopState.WAITING
                self._follower_position = None      # its pose before the trip is no origin: wait for a fresh one
                self._last_command = None
                self._emit("info", "tripped", "follower is back: soft start from its present pose to the leader's")
            else:
                self._emit("info", "tripped", "follower is back")

    def status(self) -> tuple[Level, str]:
        """Diagnostic level and message of the teleop state (ERROR only for its own overload stop)."""
        state = self._state
        if state is TeleopState.TRIPPED:
            return WARN, self._trip_message()
        if state is TeleopState.PROTECTIVE_STOP:
            return ERROR, self._stop_message()
        if state is TeleopState.OVERLOAD:
            return ERROR, f"overload stop (follower joint '{self.overload_joint}'); call ~/enable true to resume"
        if state is TeleopState.STALE:
            return WARN, "leader stale: follower holds its last goal"
        return OK, state.value

    # ------------------------------------------------------------------ mapping
    def map_leader(self, leader_position: Sequence[float]) -> np.ndarray:
        """Leader joint positions -> follower targets (sign, offset, gripper scale), clamped to limits."""
        cfg = self.config
        q = np.asarray(leader_position, dtype=float)
        return np.clip(cfg.sign * q + cfg.offset, cfg.lower, cfg.upper)

    def _rate_limit(self, target: np.ndarray) -> np.ndarray:
        if self._last_command is None:
            return target
        step = np.clip(target - self._last_command, -self.config.max_step, self.config.max_step)
        return np.clip(self._last_command + step, self.config.lower, self.config.upper)

    # ------------------------------------------------------------------ inputs
    def on_follower(self, position: Sequence[float] | None, current: Sequence[float] | None,
                    now: float) -> None:
        """A follower sample: remembers the pose (soft-start origin) and runs the overload guard."""
        if position is not None:
            pos = np.asarray(position, dtype=float)
            if pos.shape == (self.config.n_joints,) and np.all(np.isfinite(pos)):
                self._follower_position = pos
        if current is None:
            return
        amps = np.abs(np.asarray(current, dtype=float))
        if amps.shape != (self.config.n_joints,):
            return
        for k, amp in enumerate(amps):
            if amp > self.config.overload_current:
                since = self._overload.above_since[k]
                if since is None:
                    self._overload.above_since[k] = since = now
                if now - since >= self.config.overload_window and self._state not in (
                        TeleopState.OVERLOAD, TeleopState.DISABLED, TeleopState.TRIPPED, TeleopState.PROTECTIVE_STOP):
                    self._trip_overload(k, amp, now - since)
            else:
                self._overload.above_since[k] = None

    def _trip_overload(self, joint: int, amp: float, duration: float) -> None:
        name = self.config.joint_names[joint]
        self.overload_joint = name
        self._state = TeleopState.OVERLOAD
        self._emit("error", "overload",
                   f"overload guard: follower joint '{name}' drew {amp:.3f} A (> {self.config.overload_current:.3f} A)"
                   f" for {duration:.3f} s; following stopped, follower holds its last goal."
                   " Call ~/enable true to resume.")

    def on_force(self, force: Sequence[float], now: float) -> np.ndarray | None:
        """An estimated contact force (N, x y z): runs the protective stop. When a stop latches while the follower
        was following, returns the hold command to publish at once: the arm where it is measured, the gripper at
        its last goal (:func:`na_common.protective_stop.hold_pose`)."""
        event = self.protective_stop.update(force, now)
        if event is None:
            return None
        if not self.protective_stop.stopped:
            self._emit("info", "protective_stop", event.message)
            return None
        hold = None
        if self._state in (TeleopState.WAITING, TeleopState.SOFT_START, TeleopState.TRACKING, TeleopState.STALE):
            self._state = TeleopState.PROTECTIVE_STOP
            hold = self._hold_here()
        self._emit("error", "protective_stop", self._stop_message())
        return hold

    def _hold_here(self) -> np.ndarray | None:
        """The stop's hold command (:func:`na_common.protective_stop.hold_pose`); None before the first follower
        sample or command."""
        if self._follower_position is None or self._last_command is None:
            return None
        self._last_command = hold_pose(self._follower_position, self._last_command, self.config.gripper_index,
                                       self.config.lower, self.config.upper)
        return self._last_command.copy()

    def release_protective_stop(self, now: float) -> tuple[bool, str]:
        """The explicit release: a soft start from the follower's present pose follows (or the hold of a tripped
        follower, or nothing while disabled)."""
        released, message = self.protective_stop.release(now)
        if released and self._state is TeleopState.PROTECTIVE_STOP:
            self._last_command = None
            if self.follower_trip is not None:
                self._state = TeleopState.TRIPPED
            else:
                self._state = TeleopState.WAITING
                message += "; soft start from the follower's pose to the leader's"
        self._emit("info", "protective_stop", message)
        return released, message

    def on_leader(self, position: Sequence[float], now: float,
                  stale_joints: Sequence[bool] | None = None) -> np.ndarray | None:
        """A leader sample; returns the follower goal to publish now, or None (hold).

        ``stale_joints`` marks leader servos whose value was not refreshed this cycle; their
        previous target is kept.
        """
        target = self.map_leader(position)
        if stale_joints is not None and self._last_target is not None:
            mask = np.asarray(stale_joints, dtype=bool)
            if mask.shape == target.shape:
                target = np.where(mask, self._last_target, target)
        if not np.all(np.isfinite(target)):
            self._emit("warn", "invalid_leader", "leader sample has non-finite positions; ignored")
            return None
        self._last_target = target
        if (self._last_leader_time is not None and now - self._last_leader_time > self.config.stale_timeout
                and self._state in (TeleopState.SOFT_START, TeleopState.TRACKING)):
            # A gap the timer has not seen yet counts as staleness too: restart smoothly.
            self._state = TeleopState.STALE
        was_stale = self._state is TeleopState.STALE
        self._last_leader_time = now
        if self._state in (TeleopState.DISABLED, TeleopState.OVERLOAD, TeleopState.TRIPPED,
                           TeleopState.PROTECTIVE_STOP):
            return None
        if was_stale:
            held = self._last_command
            jump = np.inf if held is None else float(np.max(np.abs(target - held)))
            if jump <= self.config.stale_resume_jump:
                self._emit("info", "stale", f"leader stream is back ({jump:.3f} rad from the held goal): tracking")
                self._state = TeleopState.TRACKING
            else:
                self._emit("info", "stale", f"leader stream is back ({jump:.3f} rad from the held goal): soft start "
                                            "towards the leader's pose")
                self._state = TeleopState.WAITING
        if self._state is TeleopState.WAITING:
            origin = self._follower_position if self._follower_position is not None else self._last_command
            if origin is None:
                self._emit("warn", "no_follower", "waiting for the follower's state before the soft start")
                return None
            self._soft_start_from = np.clip(origin, self.config.lower, self.config.upper)
            self._soft_start_time = now
            self._last_command = self._soft_start_from.copy()
            self._state = TeleopState.SOFT_START
            self._emit("info", "soft_start",
                       f"soft start: follower moves to the leader's pose over {self.config.soft_start_duration:.1f} s")
        if self._state is TeleopState.SOFT_START:
            duration = self.config.soft_start_duration
            fraction = 1.0 if duration == 0.0 else (now - self._soft_start_time) / duration
            blend = smoothstep(fraction)
            target = self._soft_start_from + blend * (target - self._soft_start_from)
            if fraction >= 1.0:
                self._state = TeleopState.TRACKING
                self._emit("info", "tracking", "soft start done: tracking the leader")
        command = self._rate_limit(target)
        self._last_command = command
        return command.copy()

    def check_stale(self, now: float) -> bool:
        """Timer check: True while the leader is stale (enters STALE and warns)."""
        if self._last_leader_time is None:
            return False
        age = now - self._last_leader_time
        if age <= self.config.stale_timeout:
            return False
        if self._state in (TeleopState.SOFT_START, TeleopState.TRACKING):
            self._state = TeleopState.STALE
        if self._state is TeleopState.STALE:
            self._emit("warn", "stale",
                       f"leader stale: no leader state for {age * 1e3:.0f} ms"
                       f" (> {self.config.stale_timeout * 1e3:.0f} ms); follower holds its last goal")
        return True
