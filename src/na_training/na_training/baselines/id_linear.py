"""ID-Linear baseline (paper Sec. IV-D (i)): τ_ext = τ_ID(q, q̇, q̈) − (Kt·i + b), f = (Jvᵀ)⁺ τ_ext."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from na_description import xm430
from na_training.baselines.dynamics import InverseDynamicsCache, force_from_joint_residual
from na_training.episode import Episode

# XM430-W350 stall torque / stall current at 12 V = 4.1 N·m / 2.3 A ≈ 1.78 N·m/A (docs/REFERENCES.md, XM430-W350).
DATASHEET_TORQUE_CONSTANT = xm430.STALL_TORQUE_12V / xm430.STALL_CURRENT_12V
# The paper clamps non-positive fitted slopes to "a small positive value" without giving it;
# we use 1 % of the datasheet constant, which leaves that joint's current almost unused.
MIN_SLOPE_FRACTION = 0.01
DEFAULT_MIN_SLOPE = MIN_SLOPE_FRACTION * DATASHEET_TORQUE_CONSTANT


def free_motion_training_frames(episodes: list[Episode]) -> list[tuple[Episode, np.ndarray]]:
    """(episode, frame mask) pairs of nominal, force-free frames to fit actuator maps on."""
    selected = []
    for episode in episodes:
        if not episode.is_nominal:
            continue
        mask = episode.free_motion_mask()
        if np.any(mask):
            selected.append((episode, mask))
    if not selected:
        raise ValueError("no free-motion frames in the training episodes (need force_source 'none' "
                         "episodes or contact labels marking force-free frames)")
    return selected


@dataclass
class LinearCurrentMap:
    """Per-joint ``τ = Kt·i + b``; ``raw_slope`` is the unclamped least-squares slope."""

    slope: np.ndarray
    offset: np.ndarray
    raw_slope: np.ndarray
    clamped: np.ndarray

    def torque(self, current: np.ndarray) -> np.ndarray:
        return current * self.slope + self.offset


def fit_linear_current_map(current: np.ndarray, torque: np.ndarray, min_slope: float) -> LinearCurrentMap:
    """Least squares per joint; a slope below ``min_slope`` is clamped there and the offset refitted."""
    n_joints = current.shape[1]
    slope, offset, raw = np.zeros(n_joints), np.zeros(n_joints), np.zeros(n_joints)
    for j in range(n_joints):
        design = np.column_stack([current[:, j], np.ones(current.shape[0])])
        (raw[j], offset[j]), *_ = np.linalg.lstsq(design, torque[:, j], rcond=None)
        slope[j] = raw[j]
        if raw[j] < min_slope:
            slope[j] = min_slope
            offset[j] = float(np.mean(torque[:, j] - min_slope * current[:, j]))
    return LinearCurrentMap(slope, offset, raw, raw < min_slope)


def describe_slopes(names: list[str], current_map: LinearCurrentMap, min_slope: float, effort_unit: str = "A"
                    ) -> list[str]:
    """Human-readable fitted slopes, flagging clamped (non-positive) ones as a finding."""
    lines = []
    for j, name in enumerate(names):
        line = (f"{name}: Kt = {current_map.raw_slope[j]:+.4f} N·m/{effort_unit}, "
                f"b = {current_map.offset[j]:+.4f} N·m")
        if current_map.clamped[j]:
            line += f"  (slope below {min_slope:.4f}: clamped, as in the paper Sec. IV-D)"
        lines.append(line)
    return lines


class IDLinear:
    """Acceleration-based inverse-dynamics residual with a linear current→torque map."""

    name = "ID-Linear"

    def __init__(self, cache: InverseDynamicsCache | None = None, min_slope: float = DEFAULT_MIN_SLOPE,
                 effort_unit: str = "A") -> None:
        self.cache = cache or InverseDynamicsCache()
        self.min_slope = min_slope
        self.effort_unit = effort_unit           # unit of the effort signal the map reads (A, or load)
        self.current_map: LinearCurrentMap | None = None

    @property
    def joint_names(self) -> list[str]:
        return self.cache.rigid_body.arm_joints

    def _stack(self, episodes: list[Episode]) -> dict[str, np.ndarray]:
        columns: dict[str, list[np.ndarray]] = {"tau": [], "current": [], "velocity": []}
        for episode, mask in free_motion_training_frames(episodes):
            tau, _ = self.cache.get(episode)
            columns["tau"].append(tau[mask])
            columns["current"].append(episode.arm(episode.spec.effort_signal)[mask])
            columns["velocity"].append(episode.arm("velocity")[mask])
        return {k: np.concatenate(v) for k, v in columns.items()}

    def fit(self, episodes: list[Episode]) -> dict:
        """Fit Kt, b per joint on the free-motion frames; returns a JSON-ready report."""
        data = self._stack(episodes)
        self.current_map = fit_linear_current_map(data["current"], data["tau"], self.min_slope)
        return {
            "method": self.name,
            "frames": int(data["tau"].shape[0]),
            "slope_raw": self.current_map.raw_slope.tolist(),
            "slope": self.current_map.slope.tolist(),
            "offset": self.current_map.offset.tolist(),
            "clamped_joints": [n for n, c in zip(self.joint_names, self.current_map.clamped, strict=True) if c],
            "notes": describe_slopes(self.joint_names, self.current_map, self.min_slope, self.effort_unit),
        }

    def actuator_torque(self, episode: Episode) -> np.ndarray:
        if self.current_map is None:
            raise RuntimeError(f"{self.name}: call fit() before estimating")
        return self.current_map.torque(episode.arm(episode.spec.effort_signal))

    def joint_residual(self, episode: Episode) -> np.ndarray:
        """τ_ext = τ_ID − τ_act [T, n] (N·m)."""
        tau_id, _ = self.cache.get(episode)
        return tau_id - self.actuator_torque(episode)

    def estimate(self, episode: Episode) -> np.ndarray:
        """Tool force [T, 3] (N, environment on robot, base frame)."""
        _, jac = self.cache.get(episode)
        return force_from_joint_residual(self.joint_residual(episode), jac)
