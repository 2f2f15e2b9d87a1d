"""Whether a live run on the rig can be trusted: a steady start, and no fault inside the scored window (ROS-free).

A live result (a demo phase, a recorded episode, a policy trial) counts only if, while it ran, both arm
drivers read every servo on time, no driver tripped, the simulated rig kept pace with wall time and the
estimator (where one runs) kept estimating. The watcher is fed what the graph publishes, with the
stamps of the messages (the drivers stamp each arm state when its bus read completed, so a busy
watcher does not mistake its own delay for a silent bus):

* arm states of each arm (``arm_state``): a gap between two stamps longer than ``gap_limit_s`` (the
  drivers' error timeout) or a servo left stale that long is a fault; except where the driver's own count of
  missed loop deadlines (``ArmState.dropped_cycles``) says its loop read the bus across the gap: when the
  cycles it missed there, at the arm's period (the typical spacing of its stamps), span no more than the gap
  limit, the states were lost on the way to this watcher (a watcher starved of CPU longer than its queue
  holds), which says nothing about the rig; such gaps are kept in ``delivery_gaps``;
* ``/diagnostics`` statuses (``diagnostic``): an ERROR that voids a live result
  (:func:`na_common.diagnostics.voids_live_result`: an arm driver's trip, a servo not responding, a port
  lost, the rig's physics behind wall time; the recorder marks episodes void by the same rule) is a fault,
  and so is an ERROR of a status named in ``voiding_statuses`` (e.g. a policy that stopped because its
  estimator paused);
* estimates (``estimate``), when ``estimate_gap_limit_s`` is set: a longer gap between two is a fault; its
  reason quotes the estimator's latest ``/diagnostics`` message (which names its last refused input).

``ready(now)`` holds once every expected arm has streamed for ``steady_window_s`` without a stale
servo or a fault; ``faults_since(t)`` lists what voids a window that opened at ``t``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from na_common.diagnostics import ESTIMATOR_STATUS, voids_live_result

ERROR_LEVEL = 2                      # diagnostic_msgs/DiagnosticStatus.ERROR
DEFAULT_GAP_LIMIT_S = 0.5            # the arm drivers' error_timeout (config/*_arm.yaml)
DEFAULT_STEADY_WINDOW_S = 1.0
_DEFAULT_PERIOD_S = 0.01             # an arm's period until its stamps show it (the drivers' loop_rate: 100 Hz)
_PERIOD_SAMPLE_LIMIT_S = 0.1         # stamp spacings up to this long tell the period; longer ones are gaps
_PERIOD_SMOOTHING = 0.05


@dataclass(frozen=True)
class Fault:
    at: float                        # s, stamp of the message that showed it
    source: str                      # e.g. "follower arm", the diagnostic status name
    reason: str

    def __str__(self) -> str:
        return f"{self.source}: {self.reason}"


class IntegrityWatch:
    """See the module docstring; times are seconds on the ROS clock of the messages' stamps."""

    def __init__(self, arms: Sequence[str] = ("leader", "follower"), *, gap_limit_s: float = DEFAULT_GAP_LIMIT_S,
                 steady_window_s: float = DEFAULT_STEADY_WINDOW_S, estimate_gap_limit_s: float | None = None,
                 voiding_statuses: Sequence[str] = ()) -> None:
        if gap_limit_s <= 0 or steady_window_s <= 0:
            raise ValueError("gap_limit_s and steady_window_s must be > 0")
        self.arms = tuple(arms)
        self.gap_limit_s = float(gap_limit_s)
        self.steady_window_s = float(steady_window_s)
        self.estimate_gap_limit_s = estimate_gap_limit_s
        self.voiding_statuses = frozenset(voiding_statuses)
        self.faults: list[Fault] = []
        self._last_state: dict[str, float] = {}
        self._last_dropped: dict[str, int] = {}
        self._period: dict[str, float] = {}
        self.delivery_gaps: list[Fault] = []        # states lost on the way here while the driver ran on time
        self._first_state: dict[str, float] = {}
        self._stale_since: dict[tuple[str, int], float] = {}
        self._unsteady_at = float("-inf")
        self._last_estimate: float | None = None
        self._estimator_message = ""

    def _fault(self, at: float, source: str, reason: str) -> None:
        self.faults.append(Fault(at, source, reason))
        self._unsteady_at = max(self._unsteady_at, at)

    def arm_state(self, arm: str, stamp: float, stale: Sequence[bool], dropped_cycles: int | None = None) -> None:
        last = self._last_state.get(arm)
        dropped_before = self._last_dropped.get(arm)
        if last is not None and 0 < stamp - last <= _PERIOD_SAMPLE_LIMIT_S:
            previous = self._period.get(arm, stamp - last)
            self._period[arm] = previous + _PERIOD_SMOOTHING * (stamp - last - previous)
        if last is not None and stamp - last > self.gap_limit_s:
            gap = stamp - last
            missed = None if dropped_cycles is None or dropped_before is None else dropped_cycles - dropped_before
            # Without a stall of its own the loop reads the bus every period: at most (missed + 1) periods unread.
            loop_silent = None if missed is None else (missed + 1) * self._period.get(arm, _DEFAULT_PERIOD_S)
            if loop_silent is not None and loop_silent <= self.gap_limit_s:
                self.delivery_gaps.append(Fault(stamp, f"{arm} arm", f"no state received for {gap:.2f} s while "
                                                                    f"the driver missed {missed} cycle(s)"))
            else:
                self._fault(stamp, f"{arm} arm", f"no bus read for {gap:.2f} s")
        self._last_state[arm] = stamp if last is None else max(last, stamp)
        if dropped_cycles is not None:
            self._last_dropped[arm] = dropped_cycles
        self._first_state.setdefault(arm, stamp)
        for index, is_stale in enumerate(stale):
            key = (arm, index)
            if not is_stale:
                self._stale_since.pop(key, None)
                continue
            self._unsteady_at = max(self._unsteady_at, stamp)
            since = self._stale_since.setdefault(key, stamp)
            if stamp - since > self.gap_limit_s:
                self._fault(stamp, f"{arm} arm", f"servo #{index + 1} without a valid reply for {stamp - since:.2f} s")
                self._stale_since[key] = stamp            # one fault per gap limit of silence, not per message

    def diagnostic(self, stamp: float, name: str, level: int, message: str) -> None:
        if name == ESTIMATOR_STATUS:
            self._estimator_message = message
        if level >= ERROR_LEVEL and (voids_live_result(name) or name in self.voiding_statuses):
            self._fault(stamp, name, message)

    def estimate(self, stamp: float) -> None:
        if self.estimate_gap_limit_s is not None and self._last_estimate is not None \
                and stamp - self._last_estimate > self.estimate_gap_limit_s:
            said = f" (estimator: {self._estimator_message})" if self._estimator_message else ""
            self._fault(stamp, "estimator", f"no estimate for {stamp - self._last_estimate:.2f} s{said}")
        self._last_estimate = stamp if self._last_estimate is None else max(self._last_estimate, stamp)

    def ready(self, now: float) -> bool:
        """Every arm streams, and has for ``steady_window_s`` without a stale servo or a fault."""
        if any(arm not in self._last_state for arm in self.arms):
            return False
        if any(now - self._last_state[arm] > self.gap_limit_s for arm in self.arms):
            return False
        steady_since = max(self._unsteady_at, *(self._first_state[arm] for arm in self.arms))
        return now - steady_since >= self.steady_window_s

    def faults_since(self, start: float, end: float | None = None) -> list[Fault]:
        """Faults stamped in [start, end]; a gap or a silence that ended after ``start`` counts too."""
        return [f for f in self.faults if f.at >= start and (end is None or f.at <= end)]


def describe(faults: Sequence[Fault], limit: int = 3) -> str:
    """One line naming the first faults (a void run's reason)."""
    if not faults:
        return "no fault"
    text = "; ".join(str(f) for f in faults[:limit])
    return text + (f" (+{len(faults) - limit} more)" if len(faults) > limit else "")
