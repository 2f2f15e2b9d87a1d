"""Generalized momentum observer (De Luca & Mattone; paper Sec. IV-D (iii)), which avoids q̈.

Continuous form: r = K_O (p − p0 − ∫(τ_act + Cᵀq̇ − g − D q̇ + r) dt) with p = M(q) q̇, so that
ṙ = K_O (τ_ext − r): r is τ_ext through a first-order low-pass of bandwidth K_O (1/s).

Discrete form used here (exact for a zero-order hold of ṙ = K_O(τ̂ − r) over each frame)::

    τ̂_k = (p_k − p_{k−1}) / h_k − (ν_k + ν_{k−1}) / 2        ν = τ_act + Cᵀq̇ − g − D q̇
    r_k = a_k r_{k−1} + (1 − a_k) τ̂_k,   a_k = exp(−K_O h_k),   r_0 = 0

It is stable for any K_O ≥ 0 and frame period h_k. Cᵀq̇ comes from Ṁq̇ − Cq̇ with Ṁq̇ as a
directional derivative of M at the measured state (no time derivative of a measurement besides
the momentum difference). τ_act is the linear current→torque map fitted by ID-Linear, as the
paper does for all three baselines. K_O is tuned by a line search over a log grid that minimises
force MAE on the labelled nominal training episodes; without any nonzero force label in
them (free motion alone would always pick the slowest observer) DEFAULT_GAIN is kept.
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

from na_description.rigid_body import RigidBodyModel
from na_training.baselines.dynamics import force_from_joint_residual
from na_training.baselines.id_linear import IDLinear
from na_training.baselines.metrics import force_mae
from na_training.episode import Episode, fill_gaps

DEFAULT_GAIN = 25.0                                     # 1/s: 40 ms time constant, ≈2 frames at 58.8 Hz
# 1/s, log-spaced line search. The floor of 1 1/s (1 s time constant) keeps the observer able to
# follow a grasp or push of a few seconds; slower ones only average the model error away.
GAIN_GRID = tuple(float(g) for g in np.geomspace(1.0, 3000.0, 16))


def observer_residual(momentum: np.ndarray, drift: np.ndarray, actuator_torque: np.ndarray, time: np.ndarray,
                      gain: float) -> np.ndarray:
    """r [T, n] of the discrete observer above (N·m); r_0 = 0."""
    nu = actuator_torque + drift
    h = np.diff(time)[:, None]
    innovation = np.diff(momentum, axis=0) / h - 0.5 * (nu[1:] + nu[:-1])
    decay = np.exp(-gain * h)
    residual = np.zeros_like(momentum)
    if np.ptp(h) <= 1e-9 * np.max(h):          # uniform frames: the same recursion as a linear filter
        a = float(decay[0, 0])
        residual[1:] = lfilter([1.0 - a], [1.0, -a], innovation, axis=0)
        return residual
    for k in range(1, momentum.shape[0]):
        residual[k] = decay[k - 1] * residual[k - 1] + (1.0 - decay[k - 1]) * innovation[k - 1]
    return residual


class MomentumObserver:
    """GMO force baseline; needs a fitted ID-Linear for τ_act (fitted here when not given)."""

    name = "GMO"

    def __init__(self, linear: IDLinear | None = None, rigid_body: RigidBodyModel | None = None,
                 gain: float | None = None, gain_grid: tuple[float, ...] = GAIN_GRID) -> None:
        self.linear = linear or IDLinear()
        self.rigid_body = rigid_body or self.linear.cache.rigid_body
        self.gain = gain
        self.gain_grid = gain_grid
        self._terms: dict[int, tuple[object, dict[str, np.ndarray]]] = {}

    def _observer_terms(self, episode: Episode) -> dict[str, np.ndarray]:
        hit = self._terms.get(id(episode))
        if hit is not None and hit[0] is episode:
            return hit[1]
        terms = self.rigid_body.observer_terms(episode.arm("position"), episode.arm("velocity"),
                                               fill_gaps(episode.gripper_slide))
        self._terms[id(episode)] = (episode, terms)
        return terms

    def fit(self, episodes: list[Episode]) -> dict:
        """Fit τ_act (if needed), then tune K_O on labelled training episodes."""
        report = {"method": self.name}
        if self.linear.current_map is None:
            report["current_map"] = self.linear.fit(episodes)
        labelled = [e for e in episodes if e.is_nominal and e.has_force_label]
        if self.gain is not None:
            report["gain_source"] = "given"
        elif not any(np.any(np.abs(e.force[e.force_mask]) > 0) for e in labelled):
            # zero labels alone always favour the slowest observer: nothing to trade noise against
            self.gain = DEFAULT_GAIN
            report["gain_source"] = "default (no training episode with a nonzero force label to tune on)"
        else:
            scores = []
            for gain in self.gain_grid:
                self.gain = gain
                predictions = [self.estimate(e) for e in labelled]
                scores.append(force_mae(np.concatenate(predictions), np.concatenate([e.force for e in labelled]),
                                        np.concatenate([e.force_mask for e in labelled])))
            self.gain = self.gain_grid[int(np.nanargmin(scores))]
            report["gain_source"] = f"line search on {len(labelled)} labelled training episodes"
            report["gain_search"] = {f"{g:.4g}": s for g, s in zip(self.gain_grid, scores, strict=True)}
        report["gain"] = self.gain
        report["notes"] = [f"K_O = {self.gain:.4g} 1/s, {report['gain_source']}"]
        if "gain_search" in report and self.gain in (min(self.gain_grid), max(self.gain_grid)):
            report["notes"].append(f"K_O = {self.gain:.4g} 1/s is at the end of the search grid")
        return report

    def joint_residual(self, episode: Episode) -> np.ndarray:
        if self.gain is None:
            raise RuntimeError(f"{self.name}: call fit() before estimating")
        terms = self._observer_terms(episode)
        return observer_residual(terms["momentum"], terms["drift"], self.linear.actuator_torque(episode),
                                 episode.time, self.gain)

    def estimate(self, episode: Episode) -> np.ndarray:
        """Tool force [T, 3] (N, environment on robot, base frame)."""
        return force_from_joint_residual(self.joint_residual(episode), self._observer_terms(episode)["jacobian"])
