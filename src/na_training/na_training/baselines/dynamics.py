"""What the classical observers need per episode: accelerations from measured velocity, the force from a joint
residual, and ``τ_ID`` with tool Jacobians cached per episode (the rigid-body model itself:
:mod:`na_description.rigid_body`).
"""

from __future__ import annotations

import numpy as np

from na_description.rigid_body import RigidBodyModel
from na_training.episode import Episode, fill_gaps

ACCEL_SCHEMES = ("central", "backward", "forward")


def finite_difference_acceleration(velocity: np.ndarray, time: np.ndarray, scheme: str = "central",
                                   smoothing_frames: int = 1) -> np.ndarray:
    """Joint acceleration from measured velocity.

    ``central`` (offline, second-order, the default for the paper's offline benchmark),
    ``backward`` (causal, one frame of lag), ``forward`` (one frame ahead). The end frames use
    the one-sided difference. ``smoothing_frames`` > 1 applies a centred moving average of that
    odd length afterwards (zero phase, shrinking symmetrically at the ends).
    """
    if scheme not in ACCEL_SCHEMES:
        raise ValueError(f"unknown acceleration scheme '{scheme}', choose one of {ACCEL_SCHEMES}")
    if smoothing_frames < 1 or smoothing_frames % 2 == 0:
        raise ValueError(f"smoothing_frames must be an odd number >= 1, got {smoothing_frames}")
    velocity = np.asarray(velocity, dtype=float)
    time = np.asarray(time, dtype=float)
    dv = np.diff(velocity, axis=0)
    dt = np.diff(time)[:, None]
    one_sided = dv / dt                                   # slope between frames k and k+1
    acc = np.empty_like(velocity)
    if scheme == "central":
        acc[:] = np.gradient(velocity, time, axis=0, edge_order=1)
    elif scheme == "backward":
        acc[1:] = one_sided
        acc[0] = one_sided[0]
    else:
        acc[:-1] = one_sided
        acc[-1] = one_sided[-1]
    if smoothing_frames > 1:
        acc = centred_moving_average(acc, smoothing_frames)
    return acc


def centred_moving_average(values: np.ndarray, width: int) -> np.ndarray:
    """Zero-phase moving average along axis 0; near the ends the window shrinks symmetrically."""
    n = values.shape[0]
    index = np.arange(n)
    half = np.minimum(np.minimum(index, n - 1 - index), width // 2)
    cumulative = np.concatenate([np.zeros((1, *values.shape[1:])), np.cumsum(values, axis=0)])
    lo, hi = index - half, index + half + 1
    return (cumulative[hi] - cumulative[lo]) / (hi - lo).reshape(-1, *([1] * (values.ndim - 1)))


def force_from_joint_residual(tau_ext: np.ndarray, jacobian: np.ndarray, rcond: float = 1e-3) -> np.ndarray:
    """Tool force ``f = (Jvᵀ)⁺ τ_ext`` per frame (least squares; tiny singular values cut at ``rcond``).

    ``tau_ext`` [T, n], ``jacobian`` [T, 3, n] -> [T, 3] (N, environment on robot, base frame).
    """
    jt_pinv = np.linalg.pinv(np.swapaxes(jacobian, 1, 2), rcond=rcond)     # [T, 3, n]
    return np.einsum("tij,tj->ti", jt_pinv, tau_ext)


class InverseDynamicsCache:
    """``τ_ID`` and tool Jacobians per episode, computed once and shared by the ID baselines."""

    def __init__(self, rigid_body: RigidBodyModel | None = None, accel_scheme: str = "central",
                 smoothing_frames: int = 5) -> None:
        if accel_scheme not in ACCEL_SCHEMES:
            raise ValueError(f"unknown acceleration scheme '{accel_scheme}', choose one of {ACCEL_SCHEMES}")
        self.rigid_body = rigid_body or RigidBodyModel()
        self.accel_scheme = accel_scheme
        self.smoothing_frames = smoothing_frames
        self._store: dict[int, tuple[object, np.ndarray, np.ndarray]] = {}

    def get(self, episode: Episode) -> tuple[np.ndarray, np.ndarray]:
        """(τ_ID [T, n], Jv [T, 3, n]) of an episode's arm joints."""
        key = id(episode)
        hit = self._store.get(key)
        if hit is not None and hit[0] is episode:
            return hit[1], hit[2]
        velocity = episode.arm("velocity")
        acc = finite_difference_acceleration(velocity, episode.time, self.accel_scheme, self.smoothing_frames)
        tau, jac = self.rigid_body.inverse_dynamics(episode.arm("position"), velocity, acc,
                                                    fill_gaps(episode.gripper_slide))
        self._store[key] = (episode, tau, jac)
        return tau, jac
