"""Per-motor wear on /diagnostics (ROS-free): the wear monitor (:mod:`na_description.wear`) over the live arm.

Each estimated-on arm state goes to the monitor with the model's contact probability (a frame in contact carries
no wear evidence). Wear is a property of the arm, not of the model: a model reload does not restart it. The
per-motor result is folded into the motor's condition status, so /diagnostics keeps one status per motor:
degraded is WARN (the message says since when), suspect is reported in the message and values at the level the
condition gives; a motor the reference never moved says it is not monitored.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from na_common.condition_monitor import DEGRADED, STATE_NAMES, SUSPECT, EvidenceMonitor
from na_common.diagnostics import WARN
from na_description import RobotSpec
from na_description.wear import WearFrames, WearReference, standardised_excess
from na_estimator.condition_status import MotorConditionStatus


class WearStatus:
    """The wear monitor of one arm; :meth:`add` per estimated-on state, :meth:`merge` per diagnostics period."""

    def __init__(self, spec: RobotSpec, reference_path: str | Path) -> None:
        self.spec = spec
        self.reference = reference = WearReference.load(Path(reference_path))
        reference.check_robot(spec)
        self.frames = WearFrames(spec, reference.friction, reference.settings)
        self.monitor = EvidenceMonitor(len(reference.joint_names), reference.suspect, reference.degraded,
                                       reference.settings.max_frame_s)
        self._lock = threading.Lock()

    def add(self, stamp: float, names: Sequence[str], position: Sequence[float], velocity: Sequence[float],
            effort: Sequence[float], gripper_slide: float, contact_probability: float) -> None:
        """One arm state (a message's joint names and arrays) and the estimate's contact probability."""
        n = self.spec.n_arm
        arrays = [self.spec.reorder(names, values, what)[:n][None]
                  for values, what in ((position, "position"), (velocity, "velocity"), (effort, "effort"))]
        with self._lock:
            w, acceleration = self.frames.opposing(np.array([stamp]), *arrays, np.array([gripper_slide]),
                                                   np.array([contact_probability]))
            self.monitor.accumulate(stamp, standardised_excess(w, acceleration, self.reference)[0])

    def merge(self, statuses: list[MotorConditionStatus]) -> list[MotorConditionStatus]:
        """The motors' condition statuses with their wear added (the gripper, not monitored, unchanged)."""
        with self._lock:
            monitor = self.monitor
            state, evidence, decided = monitor.state.copy(), monitor.evidence.copy(), monitor.decided_at.copy()
        reference = self.reference
        index = {joint: k for k, joint in enumerate(reference.joint_names)}
        out = []
        for status in statuses:
            k = index.get(status.joint)
            if k is None:
                out.append(status)
                continue
            if not reference.monitored[k]:
                values = {**status.values, "wear_state": "not monitored"}
                out.append(replace(status, values=values))
                continue
            values = {**status.values, "wear_state": STATE_NAMES[state[k]], "wear_evidence": f"{evidence[k]:.2f}",
                      "wear_threshold": f"{reference.degraded[k]:.2f}",
                      "wear_degraded_at_s": "" if not np.isfinite(decided[k]) else f"{decided[k]:.1f}"}
            level, message = status.level, status.message
            if state[k] == DEGRADED:
                level = max(level, WARN)
                message = f"worn: degraded (decided {decided[k]:.1f} s after the first state); {message}"
            elif state[k] == SUSPECT:
                message = f"wear suspect (evidence {evidence[k]:.2f} of {reference.degraded[k]:.2f}); {message}"
            out.append(replace(status, level=level, message=message, values=values))
        return out
