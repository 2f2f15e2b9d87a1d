"""The policy node's ROS-free core: 60 Hz decimation, the observation, inference and the safety layer.

Event-driven: every follower state is offered to :meth:`PolicyCore.on_state`; at most ``rate_hz`` of
them a second are answered with a command (a state arriving at or after the next due time is taken, so
100 Hz states give 60 commands a second). The estimator's latest force and contact probability are
kept as they arrive.

Start: from the first state, the arm is moved to the policy's start pose (where its demonstrations began)
along a minimum-jerk blend of ``start_duration`` s and held there ``start_settle`` s; the policy acts after
that. A force policy tares the estimator's force: the median of what the estimator said while the arm rested
at the start pose; it sees the force minus that. The tare needs ``start_settle`` s of such estimates, leaving
out the estimator's first ``estimator_warmup`` s: a freshly started estimator's history window is mostly
padding, and its first estimates mostly read near 0 N whatever the arm holds (12 recorded demonstrations
replayed from 1 s in: in 8 the first 5-8 estimates stayed near 0 N, or well short of it, where the settled
estimate was -1.1 to -4.2 N or +8.4 N). An estimator first heard after the settle
therefore keeps the arm at the start pose until it has said enough; tared on its first estimate, a force
policy saw every force several newtons too low and pressed too hard. For the same reason, when the estimator
is heard again after a gap longer than ``estimator_gap`` (its ``max_gap``: it restarted its window), a force
policy holds its last command for ``estimator_warmup`` s before it acts on the force again.

Safety, in this order:
* names: a state whose joint names differ from the policy's is refused (hold);
* stale input: a state older than ``state_timeout`` on arrival is not acted on (hold); the node's watchdog
  reports a follower that stopped sending;
* estimator loss (force policies): after the estimator has been heard, no force or contact for
  ``estimator_timeout`` s stops the policy: it holds the arm until :meth:`reset` (the node's ``~/enable``);
  before the estimator is first heard, the policy waits (hold);
* protective stop (off by default): the estimator's force past its threshold (na_common.protective_stop) holds
  the arm where it is measured when the stop latches (the gripper at its last goal) until
  :meth:`release_protective_stop` (the node's ``~/release_protective_stop``);
* clamping: the command is kept inside the robot's joint limits, moves at most ``max_step`` rad per command
  and leads the measured position by at most ``max_lead`` rad (this bounds how hard the arm can press).

Holding publishes the hold pose (the last command, or the measured pose if none was sent) on the same
clock, so that the follower keeps its goal and the estimator keeps the command it needs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from na_common.diagnostics import ERROR, OK, WARN
from na_common.protective_stop import ProtectiveStopConfig, ProtectiveStopMonitor, hold_pose
from na_description.features import WINDOW_MAX_GAP_S
from na_policy.features import observation, uses_estimator
from na_policy.policy_file import Policy


@dataclass
class SafetyConfig:
    lower: np.ndarray                # rad, joint limits (gripper: servo angle)
    upper: np.ndarray
    max_step: float = 0.03           # rad per command (1.8 rad/s at 60 Hz)
    max_lead: float = 0.12           # rad between command and measured position
    state_timeout: float = 0.1       # s, a state older than this on arrival is not acted on
    estimator_timeout: float = 1.0   # s without estimator output after it was heard: stop and hold
    start_duration: float = 2.0      # s, blend from the first measured pose to the policy's start pose
    start_settle: float = 0.5        # s held at the start pose after the blend (the estimator settles; tare)
    estimator_warmup: float = 0.25   # s of the estimator's first output not used for the tare (padded history)
    estimator_gap: float = WINDOW_MAX_GAP_S   # s between estimates' stamps: the estimator restarted its window
    protective_stop: ProtectiveStopConfig = field(default_factory=ProtectiveStopConfig)   # off by default
    gripper_index: int | None = None  # the gripper motor: a protective stop keeps its goal


@dataclass
class Decision:
    command: np.ndarray              # (joints,) rad
    acted: bool                      # the policy chose it (False: a hold)
    inference_s: float               # s spent in the network
    clamped: bool                    # the safety layer changed the policy's command


class PolicyCore:
    def __init__(self, policy: Policy, safety: SafetyConfig) -> None:
        self.policy, self.safety = policy, safety
        self.needs_estimator = uses_estimator(policy.variant)
        self.period = 1.0 / policy.rate_hz
        self.force: np.ndarray | None = None
        self.tare: np.ndarray | None = None      # the estimator's force at rest at the start pose (features.py)
        self._tare_samples: list[np.ndarray] = []
        self._tare_since: float | None = None     # local time of the first estimate used for the tare
        self._window_since: float | None = None    # local time the estimator's window (re)started: first heard or
        self.estimator_restarts = 0                #   heard again after a gap
        self._last_force_time: float | None = None  # stamp (or arrival time) of the latest force
        self.contact: float | None = None
        self.force_received = -math.inf       # s, local monotonic clock
        self.contact_received = -math.inf
        self.heard_estimator = False
        self.stopped_reason: str | None = None   # latched (estimator loss) until reset()
        self.level, self.message = WARN, "waiting for the follower state"
        self.last_command: np.ndarray | None = None
        self.last_state_received = -math.inf
        self.next_due: float | None = None
        self.blend: tuple[float, np.ndarray] | None = None    # (start stamp, pose) of the move to the start pose
        self._blend_done = False
        self.started = False                                 # the move to the start pose is done
        self.commands = self.actions = self.holds = self.clamps = self.refused = 0
        self.protective_stop = ProtectiveStopMonitor(safety.protective_stop)   # latched until released
        self._stop_held = False                              # the hold pose of the latched stop is set

    # -- inputs -------------------------------------------------------------------------------
    def on_force(self, force: Sequence[float], now: float | None = None, stamp: float | None = None) -> None:
        """The estimator's force; ``stamp``: its header stamp (s), that of the follower state it was estimated
        on, so that a gap between two stamps is the gap the estimator's window saw (else arrival times)."""
        value = np.asarray(force, dtype=float)
        if value.shape == (3,) and np.all(np.isfinite(value)):
            previous = self._last_force_time
            self.force, self.force_received = value, time.monotonic() if now is None else now
            self._last_force_time = self.force_received if stamp is None else stamp
            if previous is None or self._last_force_time - previous > self.safety.estimator_gap:
                self._window_since = self.force_received
                self.estimator_restarts += int(previous is not None)
            self.protective_stop.update(value, self.force_received)     # the untared force: what the arm feels
            warmed_up = self.force_received - self._window_since >= self.safety.estimator_warmup
            if self.settling and warmed_up:
                self._tare_since = self.force_received if self._tare_since is None else self._tare_since
                self._tare_samples.append(value)

    @property
    def settling(self) -> bool:
        """The arm rests at the start pose (after the move, before the first action): the tare window."""
        return self.blend is not None and self._blend_done and self.tare is None and self.actions == 0

    def _tare_ready(self, now: float) -> bool:
        """``start_settle`` s of estimates past the warm-up were taken at rest at the start pose."""
        if self._tare_since is None:
            return self.safety.start_settle <= 0 and self.safety.estimator_warmup <= 0 and self.force is not None
        return now - self._tare_since >= self.safety.start_settle - 1e-6

    def on_contact(self, probability: float, now: float | None = None) -> None:
        if math.isfinite(probability):
            self.contact, self.contact_received = float(probability), time.monotonic() if now is None else now

    def reset(self) -> None:
        """Clear a latched stop (estimator loss); the policy acts again once its inputs are fresh."""
        self.stopped_reason = None
        self.heard_estimator = False
        self.level, self.message = WARN, "re-enabled: waiting for fresh inputs"

    def release_protective_stop(self, now: float | None = None) -> tuple[bool, str]:
        """The explicit release of a protective stop; the policy acts again from the next state."""
        released, message = self.protective_stop.release(time.monotonic() if now is None else now)
        if released:
            self._stop_held = False
            self.level, self.message = WARN, message
        return released, message

    # -- the loop -------------------------------------------------------------------------------
    def on_state(self, stamp: float, names: Sequence[str], position: Sequence[float],
                 now: float | None = None, clock: float | None = None) -> Decision | None:
        """One follower state: a :class:`Decision` when a command is due, else None (decimated).

        ``stamp``: the state's stamp and ``clock``: the node's clock now (same time base, s); ``now``: the
        local monotonic time (s) the estimator inputs are timed against."""
        now = time.monotonic() if now is None else now
        clock = stamp if clock is None else clock
        if self.next_due is not None and stamp < self.next_due:
            return None
        self.next_due = stamp + self.period if self.next_due is None or stamp - self.next_due > self.period \
            else self.next_due + self.period
        position = np.asarray(position, dtype=float)
        if list(names) != self.policy.joint_names or position.shape != (self.policy.n_joints,) \
                or not np.all(np.isfinite(position)):
            self.refused += 1
            return self._hold(position, ERROR, f"refusing follower state: joint names {list(names)} or values do "
                                                f"not match the policy's {self.policy.joint_names}")
        self.last_state_received = now
        age = clock - stamp
        if age > self.safety.state_timeout:
            return self._hold(position, WARN, f"holding: follower state is {age * 1000:.0f} ms old "
                                              f"(limit {self.safety.state_timeout * 1000:.0f} ms)")
        if self.stopped_reason is not None:
            return self._hold(position, ERROR, self.stopped_reason)
        if self.protective_stop.stopped:
            if not self._stop_held and position.shape == (self.policy.n_joints,) and np.all(np.isfinite(position)):
                self._stop_held = True          # from now on hold where the arm was when the stop latched
                self.last_command = hold_pose(position, self.last_command, self.safety.gripper_index,
                                              self.safety.lower, self.safety.upper)
            return self._hold(position, ERROR, f"protective stop: {self.protective_stop.reason}; holding until "
                                               f"~/release_protective_stop")
        if not self.started:
            return self._move_to_start(stamp, position)
        if self.needs_estimator:
            silent = now - min(self.force_received, self.contact_received)
            if silent > self.safety.estimator_timeout:
                if not self.heard_estimator:
                    return self._hold(position, WARN, "waiting for the estimator (/estimator/force, /contact)")
                self.stopped_reason = (f"stopped: estimator lost, no /estimator/force or /estimator/contact for "
                                       f"{silent:.2f} s (limit {self.safety.estimator_timeout:.2f} s); holding "
                                       "the arm, call ~/enable to resume")
                return self._hold(position, ERROR, self.stopped_reason)
            self.heard_estimator = True
            if self.tare is None:
                if not self._tare_ready(now):
                    self.level, self.message = OK, "at the start pose: taring the estimator's force"
                    return self._emit(self.last_command, False, 0.0, False)     # the start pose, held
                samples = self._tare_samples or [self.force]
                self.tare = np.median(np.asarray(samples), axis=0)
            if self.actions and now - self._window_since < self.safety.estimator_warmup:
                return self._hold(position, WARN, "holding: the estimator restarted after a gap in its output "
                                                  "(its first estimates read about 0 N)")
        force = None if self.force is None or self.tare is None else self.force - self.tare
        obs = observation(self.policy.variant, position, force, self.contact)
        started = time.perf_counter()
        chunk = self.policy.act_chunk(obs)
        inference = time.perf_counter() - started
        wanted = position + chunk[0]
        command = self._clamp(wanted, position)
        clamped = not np.allclose(command, wanted, atol=1e-9)
        self.clamps += int(clamped)
        self.actions += 1
        self.level, self.message = OK, "running"
        return self._emit(command, True, inference, clamped)

    def check(self, now: float | None = None) -> tuple[int, str]:
        """Watchdog (timer): the status, updated for a follower that stopped sending."""
        now = time.monotonic() if now is None else now
        silent = now - self.last_state_received
        if math.isfinite(silent) and silent > self.safety.state_timeout and self.stopped_reason is None:
            self.level, self.message = WARN, f"holding: no follower state for {silent:.2f} s"
        return self.level, self.message

    # -- helpers --------------------------------------------------------------------------------
    def _clamp(self, command: np.ndarray, position: np.ndarray) -> np.ndarray:
        s = self.safety
        command = np.clip(command, position - s.max_lead, position + s.max_lead)
        if self.last_command is not None:
            command = np.clip(command, self.last_command - s.max_step, self.last_command + s.max_step)
        return np.clip(command, s.lower, s.upper)

    def _move_to_start(self, stamp: float, position: np.ndarray) -> Decision:
        if self.blend is None:
            self.blend = (stamp, position.copy())
        began, origin = self.blend
        elapsed = stamp - began
        phase = min(1.0, elapsed / self.safety.start_duration) if self.safety.start_duration > 0 else 1.0
        shape = phase**3 * (10.0 - 15.0 * phase + 6.0 * phase**2)       # minimum jerk
        command = np.clip(origin + shape * (self.policy.start_pose - origin), self.safety.lower, self.safety.upper)
        self._blend_done = phase >= 1.0
        self.started = elapsed >= self.safety.start_duration + self.safety.start_settle
        self.level, self.message = OK, "moving to the policy's start pose"
        return self._emit(command, False, 0.0, False)

    def _hold(self, position: np.ndarray, level: int, message: str) -> Decision | None:
        self.level, self.message = level, message
        self.holds += 1
        if self.last_command is None:
            if position.shape != (self.policy.n_joints,) or not np.all(np.isfinite(position)):
                return None
            self.last_command = np.clip(position, self.safety.lower, self.safety.upper)
        return self._emit(self.last_command, False, 0.0, False)

    def _emit(self, command: np.ndarray, acted: bool, inference: float, clamped: bool) -> Decision:
        self.last_command = command.copy()
        self.commands += 1
        return Decision(command.copy(), acted, inference, clamped)
