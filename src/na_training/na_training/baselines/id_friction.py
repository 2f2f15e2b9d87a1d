"""ID-Friction baseline (paper Sec. IV-D (ii)): ID-Linear plus Stribeck friction and a backlash term.

Joint-side actuator torque per joint (fitted on the same free-motion frames as ID-Linear)::

    τ_act = Kt·i + b − [Fc + (Fs − Fc)·exp(−(q̇/vs)²)]·sgn(q̇) − Fv·q̇ + β·d

``sgn`` is smoothed as tanh(q̇/SIGN_VELOCITY). ``d`` ∈ {−1, 0, +1} is the gear flank in contact,
a hysteretic state: it takes sign(q̇) once |q̇| exceeds ``backlash_velocity`` and keeps it until
the joint moves the other way, so β models the direction-dependent torque offset backlash leaves
after a reversal (a simplified benchmark adaptation, as the paper calls its baselines).
All terms are linear in (Kt, b, Fc, Fs − Fc, Fv, β) for a given vs: the fit solves a bounded
linear least-squares problem (Kt ≥ min slope, Fc, Fs − Fc, Fv ≥ 0) and searches vs in 1-D.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import lsq_linear, minimize_scalar

from na_description.friction import (
    DEFAULT_BACKLASH_VELOCITY,
    FrictionCurrentMap,
    backlash_flank,
    smooth_sign,
)
from na_training.baselines.dynamics import InverseDynamicsCache
from na_training.baselines.id_linear import DEFAULT_MIN_SLOPE, IDLinear, free_motion_training_frames
from na_training.episode import Episode

STRIBECK_VELOCITY_RANGE = (0.005, 3.0)  # rad/s, search interval for vs


def _design(current: np.ndarray, velocity: np.ndarray, flank: np.ndarray, stribeck_velocity: float) -> np.ndarray:
    sign = smooth_sign(velocity)
    return np.column_stack([current, np.ones_like(current), -sign,
                            -np.exp(-((velocity / stribeck_velocity) ** 2)) * sign, -velocity, flank])


def fit_joint_friction(current: np.ndarray, velocity: np.ndarray, flank: np.ndarray, torque: np.ndarray,
                       min_slope: float) -> tuple[np.ndarray, float, float]:
    """(Kt, b, Fc, Fs − Fc, Fv, β), vs and the RMS residual for one joint."""
    lower = np.array([min_slope, -np.inf, 0.0, 0.0, 0.0, -np.inf])
    upper = np.full(6, np.inf)
    scale = np.maximum(np.std(_design(current, velocity, flank, 0.1), axis=0), 1e-9)
    scale[1] = 1.0

    def solve(log_vs: float):
        design = _design(current, velocity, flank, float(np.exp(log_vs))) / scale
        result = lsq_linear(design, torque, bounds=(lower * scale, upper * scale), method="bvls")
        return result.x / scale, float(np.sqrt(np.mean(result.fun ** 2)))

    grid = np.linspace(np.log(STRIBECK_VELOCITY_RANGE[0]), np.log(STRIBECK_VELOCITY_RANGE[1]), 25)
    errors = [solve(g)[1] for g in grid]
    best = int(np.argmin(errors))
    lo, hi = grid[max(best - 1, 0)], grid[min(best + 1, grid.size - 1)]
    refined = minimize_scalar(lambda g: solve(g)[1], bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-4})
    log_vs = float(refined.x) if refined.fun <= errors[best] else float(grid[best])
    params, rms = solve(log_vs)
    return params, float(np.exp(log_vs)), rms


class IDFriction(IDLinear):
    """ID-Linear with Stribeck friction and backlash compensation in the actuator torque."""

    name = "ID-Friction"

    def __init__(self, cache: InverseDynamicsCache | None = None, min_slope: float = DEFAULT_MIN_SLOPE,
                 backlash_velocity: float = DEFAULT_BACKLASH_VELOCITY, effort_unit: str = "A") -> None:
        super().__init__(cache, min_slope, effort_unit)
        self.backlash_velocity = backlash_velocity
        self.friction_map: FrictionCurrentMap | None = None

    def fit(self, episodes: list[Episode]) -> dict:
        current, velocity, flank, tau = [], [], [], []
        for episode, mask in free_motion_training_frames(episodes):
            tau_id, _ = self.cache.get(episode)
            tau.append(tau_id[mask])
            arm_velocity = episode.arm("velocity")
            current.append(episode.arm(episode.spec.effort_signal)[mask])
            velocity.append(arm_velocity[mask])
            # the flank state needs the whole history, so compute it before masking
            flank.append(backlash_flank(arm_velocity, self.backlash_velocity)[mask])
        current, velocity, flank, tau = (np.concatenate(x) for x in (current, velocity, flank, tau))
        n = current.shape[1]
        params = np.zeros((n, 6))
        vs, rms = np.zeros(n), np.zeros(n)
        for j in range(n):
            params[j], vs[j], rms[j] = fit_joint_friction(current[:, j], velocity[:, j], flank[:, j], tau[:, j],
                                                          self.min_slope)
        self.friction_map = FrictionCurrentMap(
            slope=params[:, 0], offset=params[:, 1], coulomb=params[:, 2], stribeck=params[:, 2] + params[:, 3],
            viscous=params[:, 4], stribeck_velocity=vs, backlash=params[:, 5],
            backlash_velocity=self.backlash_velocity)
        clamped = [name for name, s in zip(self.joint_names, params[:, 0], strict=True) if s <= self.min_slope + 1e-12]
        fm = self.friction_map
        return {
            "method": self.name,
            "frames": int(tau.shape[0]),
            "slope": fm.slope.tolist(), "offset": fm.offset.tolist(), "coulomb": fm.coulomb.tolist(),
            "stribeck": fm.stribeck.tolist(), "viscous": fm.viscous.tolist(),
            "stribeck_velocity": fm.stribeck_velocity.tolist(), "backlash": fm.backlash.tolist(),
            "rms_residual": rms.tolist(), "clamped_joints": clamped,
            "notes": [f"{name}: slope at its lower bound {self.min_slope:.4f} N·m/{self.effort_unit} (clamped, paper "
                      "Sec. IV-D)"
                      for name in clamped],
        }

    def actuator_torque(self, episode: Episode) -> np.ndarray:
        if self.friction_map is None:
            raise RuntimeError(f"{self.name}: call fit() before estimating")
        return self.friction_map.torque(episode.arm(episode.spec.effort_signal), episode.arm("velocity"))
