"""Per-motor condition statuses for /diagnostics (ROS-free).

The model's condition head scores each motor per frame (1 = normal operation); a per-frame score is noisy, so
every score also goes to the condition monitor (:mod:`na_common.condition_monitor`: evidence accumulated over
time, nominal / suspect / degraded, degraded latched until the model is reloaded). Only the spec's
``condition_joint`` is supervised (docs/INTERFACES.md), so only its status is graded by the monitor's state: OK
while nominal, WARN when suspect or degraded (the message says which, and how long the decision took). Not ERROR:
the recorder counts every ERROR or STALE status as a fault of the episode, and a worn motor's telemetry is still a
sound recording. The other motors report their scores at OK, saying they are not supervised (their heads are not
trained on labels; no monitor state is given for them). A period without an estimate is WARN (condition unknown;
the estimator's own status says why).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from na_common.condition_monitor import DEGRADED, NOMINAL, STATE_NAMES, ConditionMonitor, MonitorSettings
from na_common.diagnostics import OK, WARN, Level


@dataclass(frozen=True)
class MotorConditionStatus:
    joint: str
    level: Level
    message: str
    values: dict[str, str]


class ConditionStatus:
    """Accumulates the condition scores of one diagnostics period; :meth:`statuses` reports and starts the next."""

    def __init__(self, joint_names: Sequence[str], supervised_joint: str,
                 monitor: MonitorSettings | None = None) -> None:
        self.joint_names = tuple(joint_names)
        self.supervised = self.joint_names.index(supervised_joint)
        self.monitor = ConditionMonitor(len(self.joint_names), monitor)
        self._lock = threading.Lock()              # estimates and the diagnostics timer may run on different threads
        self._reset()

    def reset_monitor(self) -> None:
        """A new model (or a repaired arm): the monitor starts again from nominal."""
        with self._lock:
            self.monitor.reset()

    def _reset(self) -> None:
        n = len(self.joint_names)
        self._sum, self._min, self._count = np.zeros(n), np.full(n, math.inf), 0
        self._latest = np.full(n, math.nan)

    def add(self, condition: Sequence[float], time_s: float, contact_probability: float | None = None) -> None:
        """One estimate's per-motor scores (spec motor order) at ``time_s`` (the estimate's stamp, s), with its
        contact probability (a frame in contact adds no evidence to the monitor)."""
        score = np.asarray(condition, dtype=float).reshape(-1)
        if score.shape != (len(self.joint_names),) or not np.all(np.isfinite(score)):
            return
        with self._lock:
            self.monitor.update(time_s, score, contact_probability)
            self._sum += score
            self._min = np.minimum(self._min, score)
            self._count += 1
            self._latest = score

    def statuses(self, period: float) -> list[MotorConditionStatus]:
        """One status per motor for the period just ended (``period`` s, for the message), then a new period."""
        with self._lock:
            count, total, low, latest = self._count, self._sum.copy(), self._min.copy(), self._latest.copy()
            state, evidence = self.monitor.state.copy(), self.monitor.evidence.copy()
            decided = self.monitor.decided_at.copy()
            self._reset()
        out = []
        for k, joint in enumerate(self.joint_names):
            supervised = k == self.supervised
            if count == 0:
                out.append(MotorConditionStatus(
                    joint, WARN, f"condition unknown: no estimate in the last {period:.1f} s",
                    {"supervised": str(supervised).lower(), "estimates": "0"}))
                continue
            mean = total[k] / count
            name = STATE_NAMES[state[k]]
            values = {"condition_mean": f"{mean:.3f}", "condition_min": f"{low[k]:.3f}",
                      "condition_latest": f"{latest[k]:.3f}", "estimates": str(count),
                      "supervised": str(supervised).lower()}
            if supervised:
                values.update(monitor_state=name, evidence_s=f"{evidence[k]:.2f}",
                              degraded_at_s="" if not np.isfinite(decided[k]) else f"{decided[k]:.1f}")
            if not supervised:
                # an unsupervised head's score carries no meaning the monitor could decide on (on the benchmark's
                # nominal episodes it reads low): reported, never graded
                level, message = OK, f"condition {mean:.2f} (not supervised by the model: reported only)"
            elif state[k] == NOMINAL:
                level, message = OK, f"condition {mean:.2f}, nominal"
            elif state[k] == DEGRADED:
                level, message = WARN, (f"degraded (decided {decided[k]:.1f} s after the first estimate); condition "
                                        f"{mean:.2f} over {period:.1f} s")
            else:
                level, message = WARN, (f"suspect (evidence {evidence[k]:.2f} s); condition {mean:.2f} "
                                        f"over {period:.1f} s")
            out.append(MotorConditionStatus(joint, level, message, values))
        return out
