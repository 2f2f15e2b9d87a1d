"""Per-motor condition decisions from the model's per-frame condition scores (ROS-free).

The condition head scores every frame (1 = normal operation). One frame says little: a restriction only
shows while the joint works against it, and a nominal frame can score low for a moment. The monitor
accumulates the evidence over time with a one-sided CUSUM per motor (Page, 1954): the evidence grows by
``(1 - score) - drift`` times the frame's duration and never falls below zero, so a nominal motor (restricted
score well below ``drift``) stays at zero and a restricted one climbs whenever the restriction acts. A motor is

* ``nominal`` while its evidence is below ``suspect_s``,
* ``suspect`` from ``suspect_s`` (it falls back when the evidence decays),
* ``degraded`` from ``degraded_s``, latched until :meth:`ConditionMonitor.reset`: a worn or restricted motor
  does not heal within a session, and a decision that flips back and forth cannot stop a robot.

Evidence is in seconds of excess score (a frame with restricted score 1 adds ``(1 - drift) * dt``), so the
thresholds do not depend on the frame rate. The decision time is the time of the frame that crossed
``degraded_s``, measured from the first frame.

A frame in which the model sees contact (contact probability above ``contact_limit``) adds no evidence, as in
the wear monitor: a push or a grasp loads the joints as a fault can, and it is not one. The evidence it has
keeps until the next counted frame.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

NOMINAL, SUSPECT, DEGRADED = 0, 1, 2
STATE_NAMES = ("nominal", "suspect", "degraded")


@dataclass(frozen=True)
class MonitorSettings:
    # Defaults chosen on the validation split of the OpenManipulator-X benchmark at seed 11, then scored on its
    # test split and on the SO-101's: src/na_training/TRAINING.md, "Condition monitor".
    drift: float = 0.4          # restricted score a frame must exceed to add evidence (CUSUM reference value)
    suspect_s: float = 0.5      # evidence (s of excess score) from which a motor is suspect
    degraded_s: float = 1.0     # evidence from which a motor is degraded (latched)
    max_frame_s: float = 0.1    # a longer gap between two frames counts as this long (a pause adds no evidence)
    contact_limit: float = 0.5  # contact probability above which a frame adds no evidence (1: every frame counts)

    def __post_init__(self) -> None:
        if not 0.0 < self.drift < 1.0:
            raise ValueError(f"drift must be in (0, 1), got {self.drift}")
        if not 0.0 < self.contact_limit <= 1.0:
            raise ValueError(f"contact_limit must be in (0, 1], got {self.contact_limit}")
        if not 0.0 < self.suspect_s <= self.degraded_s:
            raise ValueError(f"need 0 < suspect_s <= degraded_s, got {self.suspect_s} and {self.degraded_s}")
        if self.max_frame_s <= 0.0:
            raise ValueError(f"max_frame_s must be positive, got {self.max_frame_s}")


class EvidenceMonitor:
    """One-sided CUSUM per motor over per-frame excess evidence (per-motor thresholds), with the states above.

    :meth:`accumulate` takes each motor's excess per second for one frame (already less its reference value; NaN
    where the frame carries no evidence, e.g. a gated-out frame) and adds it times the frame's duration.
    """

    def __init__(self, n_motors: int, suspect: float | Sequence[float], degraded: float | Sequence[float],
                 max_frame_s: float = 0.1) -> None:
        self.n_motors = int(n_motors)
        self.suspect = np.broadcast_to(np.asarray(suspect, dtype=float), (self.n_motors,)).copy()
        self.degraded = np.broadcast_to(np.asarray(degraded, dtype=float), (self.n_motors,)).copy()
        if not (np.all(self.suspect > 0.0) and np.all(self.suspect <= self.degraded)):
            raise ValueError(f"need 0 < suspect <= degraded per motor, got {self.suspect} and {self.degraded}")
        if max_frame_s <= 0.0:
            raise ValueError(f"max_frame_s must be positive, got {max_frame_s}")
        self.max_frame_s = float(max_frame_s)
        self.reset()

    def reset(self) -> None:
        self.evidence = np.zeros(self.n_motors)
        self.state = np.full(self.n_motors, NOMINAL, dtype=int)
        self.decided_at = np.full(self.n_motors, np.nan)     # s since the first frame at which degraded was decided
        self._first: float | None = None
        self._last: float | None = None

    def accumulate(self, time_s: float, excess: Sequence[float]) -> np.ndarray:
        """One frame's per-motor excess at ``time_s``; returns the states (a copy)."""
        excess = np.asarray(excess, dtype=float).reshape(-1)
        if excess.shape != (self.n_motors,):
            raise ValueError(f"expected {self.n_motors} values, got {excess.shape}")
        if self._first is None:
            self._first = self._last = float(time_s)
        dt = min(max(float(time_s) - self._last, 0.0), self.max_frame_s)
        self._last = float(time_s)
        step = np.where(np.isfinite(excess), excess, 0.0) * dt
        self.evidence = np.maximum(0.0, self.evidence + step)
        degraded = (self.state == DEGRADED) | (self.evidence >= self.degraded)
        self.decided_at[degraded & (self.state != DEGRADED)] = float(time_s) - self._first
        self.state = np.where(degraded, DEGRADED, np.where(self.evidence >= self.suspect, SUSPECT, NOMINAL))
        return self.state.copy()


def restricted_excess(condition: np.ndarray, drift: float, contact_probability: np.ndarray | float | None = None,
                      contact_limit: float = 1.0) -> np.ndarray:
    """Restricted score (1 - condition) less ``drift``; NaN (no evidence) where a score is not finite and in frames
    whose ``contact_probability`` (per frame: a scalar for one frame, ``[T]`` for ``[T, n]`` scores) is above
    ``contact_limit``."""
    condition = np.asarray(condition, dtype=float)
    excess = np.where(np.isfinite(condition), (1.0 - np.clip(condition, 0.0, 1.0)) - drift, np.nan)
    if contact_probability is None:
        return excess
    contact = np.asarray(contact_probability, dtype=float)
    in_contact = contact > contact_limit          # NaN (contact unknown) gates nothing
    return np.where(in_contact[..., None] if condition.ndim > contact.ndim else in_contact, np.nan, excess)


class ConditionMonitor(EvidenceMonitor):
    """Streaming monitor of ``n_motors`` motors' condition scores; feed :meth:`update` one frame at a time."""

    def __init__(self, n_motors: int, settings: MonitorSettings | None = None) -> None:
        self.settings = settings or MonitorSettings()
        super().__init__(n_motors, self.settings.suspect_s, self.settings.degraded_s, self.settings.max_frame_s)

    def update(self, time_s: float, condition: Sequence[float], contact_probability: float | None = None
               ) -> np.ndarray:
        """One frame's per-motor condition scores (1 = normal) at ``time_s``, with the model's contact probability
        of that frame (None: not known, the frame counts); returns the states (a copy)."""
        score = np.asarray(condition, dtype=float).reshape(-1)
        if score.shape != (self.n_motors,):
            raise ValueError(f"expected {self.n_motors} condition scores, got {score.shape}")
        return self.accumulate(time_s, restricted_excess(score, self.settings.drift, contact_probability,
                                                         self.settings.contact_limit))


def run_evidence(monitor: EvidenceMonitor, time_s: np.ndarray, excess: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A whole sequence of per-frame excess [T, n] through ``monitor`` (reset first): (evidence [T, n], state
    [T, n], decision time [n], NaN if never degraded)."""
    excess = np.asarray(excess, dtype=float)
    monitor.reset()
    evidence = np.zeros(excess.shape)
    state = np.zeros(excess.shape, dtype=int)
    for k, (t, values) in enumerate(zip(np.asarray(time_s, dtype=float), excess, strict=True)):
        state[k] = monitor.accumulate(t, values)
        evidence[k] = monitor.evidence
    return evidence, state, monitor.decided_at.copy()


def run_monitor(time_s: np.ndarray, condition: np.ndarray, settings: MonitorSettings | None = None,
                contact_probability: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A whole sequence of condition scores [T, n] (with the model's contact probability [T], if known) through a
    fresh monitor: (evidence [T, n], state [T, n], decision time [n], NaN if never degraded)."""
    condition = np.asarray(condition, dtype=float)
    settings = settings or MonitorSettings()
    if contact_probability is not None:
        contact_probability = np.asarray(contact_probability, dtype=float).reshape(-1)
        if contact_probability.shape != condition.shape[:1]:
            raise ValueError(f"{condition.shape[0]} frames of scores but {contact_probability.size} contact "
                             "probabilities")
    return run_evidence(ConditionMonitor(condition.shape[1], settings), time_s,
                        restricted_excess(condition, settings.drift, contact_probability, settings.contact_limit))
