"""The wear monitor offline: fitting a healthy arm's reference, and the evidence over recorded episodes.

The physics and the reference format are :mod:`na_description.wear` (shared with the estimator). The reference
is fitted on the nominal episodes of a healthy arm's training split: the ID-Friction actuator map
(``baselines.id_friction``, paper Sec. IV-D (ii)) on their free-motion frames, then the mean and spread of the
opposing residual over their counted frames in each band of the joint's acceleration magnitude (edges at the
quantiles ``acceleration_quantiles`` of those frames' ``|q̈|``), then each motor's degraded threshold:
``margin`` times the largest evidence any of those episodes reached, and at least ``min_degraded_s``. A joint
with fewer than ``MIN_REFERENCE_FRAMES`` counted frames (one the tasks never move) is not monitored.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from na_common.condition_monitor import EvidenceMonitor, run_evidence
from na_description.rigid_body import RigidBodyModel
from na_description.servo_tables import datasheet_torque_per_effort
from na_description.spec import RobotSpec
from na_description.wear import WearFrames, WearReference, WearSettings, acceleration_band, standardised_excess
from na_training.baselines.dynamics import InverseDynamicsCache
from na_training.baselines.id_friction import IDFriction
from na_training.baselines.id_linear import MIN_SLOPE_FRACTION
from na_training.episode import Episode, fill_gaps

MIN_REFERENCE_FRAMES = 600        # counted frames a joint needs in the reference to be monitored (10-20 s of motion)
MIN_BAND_FRAMES = 20              # counted frames an acceleration band needs for its own mean and spread


class WearEvidence:
    """Per-frame wear excess of episodes of one robot, with or without a fitted reference."""

    def __init__(self, spec: RobotSpec, reference: WearReference | None = None) -> None:
        if reference is not None:
            reference.check_robot(spec)
        per_unit, unit = datasheet_torque_per_effort(spec)
        self.spec = spec
        self.rigid_body = RigidBodyModel(spec)
        # the map is fitted with the causal acceleration the monitor computes (na_description.wear.WearFrames)
        cache = InverseDynamicsCache(self.rigid_body, accel_scheme="backward", smoothing_frames=1)
        self.actuator = IDFriction(cache, min_slope=MIN_SLOPE_FRACTION * per_unit, effort_unit=unit)
        self.reference = reference
        if reference is not None:
            self.actuator.friction_map = reference.friction

    def opposing_residual(self, episode: Episode, contact_prob: np.ndarray, settings: WearSettings
                          ) -> tuple[np.ndarray, np.ndarray]:
        """(w [T, n] (N·m), acceleration [T, n]) of one episode, as the live monitor computes them; w is NaN in
        frames that do not count."""
        frames = WearFrames(self.spec, self.actuator.friction_map, settings, self.rigid_body)
        return frames.opposing(episode.time, episode.arm("position"), episode.arm("velocity"),
                               episode.arm(self.spec.effort_signal), fill_gaps(episode.gripper_slide), contact_prob)

    def excess(self, episode: Episode, contact_prob: np.ndarray) -> np.ndarray:
        """Per-frame CUSUM input [T, n]: ``z − drift`` in frames that count, NaN elsewhere."""
        if self.reference is None:
            raise RuntimeError("fit or load a wear reference first")
        w, acceleration = self.opposing_residual(episode, contact_prob, self.reference.settings)
        return standardised_excess(w, acceleration, self.reference)

    def monitor(self) -> EvidenceMonitor:
        """A fresh monitor with the reference's thresholds."""
        ref = self.reference
        if ref is None:
            raise RuntimeError("fit or load a wear reference first")
        return EvidenceMonitor(len(ref.joint_names), ref.suspect, ref.degraded, ref.settings.max_frame_s)

    def run(self, episode: Episode, contact_prob: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The monitor over one episode from nominal: (evidence [T, n], state [T, n], decision time [n])."""
        return run_evidence(self.monitor(), episode.time, self.excess(episode, contact_prob))

    def fit(self, episodes: Sequence[tuple[Episode, np.ndarray]], settings: WearSettings | None = None
            ) -> WearReference:
        """The reference from nominal (episode, contact probability [T]) pairs of a healthy arm's training split."""
        settings = settings or WearSettings()
        nominal = [(e, c) for e, c in episodes if e.is_nominal]
        if not nominal:
            raise ValueError("no nominal episodes to fit the wear reference on")
        self.actuator.fit([e for e, _ in nominal])
        residuals = [self.opposing_residual(e, c, settings) for e, c in nominal]
        w = np.concatenate([r[0] for r in residuals])
        magnitude = np.abs(np.concatenate([r[1] for r in residuals]))
        # a joint the reference never moves (the SO-101's wrist roll in the benchmark tasks) has no healthy
        # level to compare with: it is not monitored
        monitored = np.sum(np.isfinite(w), axis=0) >= MIN_REFERENCE_FRAMES
        if not np.any(monitored):
            raise ValueError(f"the reference episodes never move a joint at {settings.min_speed} rad/s without "
                             "contact")
        edges, mean, spread = _acceleration_bands(w, magnitude, monitored, settings.acceleration_quantiles)
        n = len(self.spec.arm_joint_names)
        self.reference = WearReference(
            robot=self.spec.name, joint_names=list(self.spec.arm_joint_names), friction=self.actuator.friction_map,
            mean=mean, spread=spread, degraded=np.ones(n), settings=settings, episodes=len(nominal),
            monitored=monitored, acceleration_edges=edges)
        peak = np.zeros(n)
        for episode, contact in nominal:
            evidence, _, _ = run_evidence(_unbounded(n, settings), episode.time, self.excess(episode, contact))
            if len(evidence):
                peak = np.maximum(peak, evidence.max(axis=0))
        self.reference.degraded = np.maximum(settings.margin * peak, settings.min_degraded_s)
        return self.reference


def _acceleration_bands(w: np.ndarray, magnitude: np.ndarray, monitored: np.ndarray, quantiles: tuple[float, ...]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per motor: the |q̈| band edges at ``quantiles`` of its counted frames, and w's mean and spread in each band
    (edges [n, b − 1], mean [n, b], spread [n, b]); a motor not monitored gets mean 0, spread 1."""
    n, bands = w.shape[1], len(quantiles) + 1
    edges, mean, spread = np.zeros((n, bands - 1)), np.zeros((n, bands)), np.ones((n, bands))
    for k in np.flatnonzero(monitored):
        counted = np.isfinite(w[:, k])
        edges[k] = np.quantile(magnitude[counted, k], quantiles) if bands > 1 else []
        band = acceleration_band(edges[k:k + 1], magnitude[counted, k:k + 1])[:, 0]
        values = w[counted, k]
        for b in range(bands):
            # a band the quantiles left empty (ties in |q̈|) takes the motor's statistics over every frame
            in_band = values[band == b] if np.count_nonzero(band == b) >= MIN_BAND_FRAMES else values
            mean[k, b] = in_band.mean()
            spread[k, b] = max(in_band.std(), 1e-9)
    return edges, mean, spread


def _unbounded(n: int, settings: WearSettings) -> EvidenceMonitor:
    """An accumulator that never decides: the reference's own evidence, for its thresholds."""
    return EvidenceMonitor(n, np.inf, np.inf, settings.max_frame_s)
