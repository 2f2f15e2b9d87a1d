"""Per-motor condition statuses for /diagnostics (ROS-free).

The model's condition head scores each motor per frame (1 = normal operation); only the spec's ``condition_joint``
is supervised (docs/INTERFACES.md), so only its status is graded: WARN when its mean score over the last
diagnostics period is below :data:`na_common.diagnostics.CONDITION_WARN_BELOW`. The other motors report their
scores at OK, saying they are not supervised. A period without an estimate is WARN (condition unknown; the
estimator's own status says why), not STALE: the recorder counts every ERROR or STALE status as a fault of the
episode, and an idle estimator is not a fault of the motors. A per-frame score is noisy; turning it into a decision
(suspect / degraded over time) is the condition monitor's job, not this status's.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from na_common.diagnostics import CONDITION_WARN_BELOW, OK, WARN, Level


@dataclass(frozen=True)
class MotorConditionStatus:
    joint: str
    level: Level
    message: str
    values: dict[str, str]


class ConditionStatus:
    """Accumulates the condition scores of one diagnostics period; :meth:`statuses` reports and starts the next."""

    def __init__(self, joint_names: Sequence[str], supervised_joint: str) -> None:
        self.joint_names = tuple(joint_names)
        self.supervised = self.joint_names.index(supervised_joint)
        self._lock = threading.Lock()              # estimates and the diagnostics timer may run on different threads
        self._reset()

    def _reset(self) -> None:
        n = len(self.joint_names)
        self._sum, self._min, self._count = np.zeros(n), np.full(n, math.inf), 0
        self._latest = np.full(n, math.nan)

    def add(self, condition: Sequence[float]) -> None:
        """One estimate's per-motor scores (spec motor order)."""
        score = np.asarray(condition, dtype=float).reshape(-1)
        if score.shape != (len(self.joint_names),) or not np.all(np.isfinite(score)):
            return
        with self._lock:
            self._sum += score
            self._min = np.minimum(self._min, score)
            self._count += 1
            self._latest = score

    def statuses(self, period: float) -> list[MotorConditionStatus]:
        """One status per motor for the period just ended (``period`` s, for the message), then a new period."""
        with self._lock:
            count, total, low, latest = self._count, self._sum.copy(), self._min.copy(), self._latest.copy()
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
            values = {"condition_mean": f"{mean:.3f}", "condition_min": f"{low[k]:.3f}",
                      "condition_latest": f"{latest[k]:.3f}", "estimates": str(count),
                      "supervised": str(supervised).lower(), "warn_below": f"{CONDITION_WARN_BELOW:.2f}"}
            if not supervised:
                level, message = OK, f"condition {mean:.2f} (not supervised by the model: reported only)"
            elif mean < CONDITION_WARN_BELOW:
                level, message = WARN, f"condition {mean:.2f} below {CONDITION_WARN_BELOW:.2f} over {period:.1f} s"
            else:
                level, message = OK, f"condition {mean:.2f}"
            out.append(MotorConditionStatus(joint, level, message, values))
        return out
