"""Inverse kinematics of the arm's leading revolute joints: tool position plus tool pitch.

The robot's task profile (:mod:`na_sim.task_profile`) names the IK joints (four: a base yaw
joint and three joints turning about parallel axes in the arm plane) and the pitch row, so that
the tool's pitch in the arm plane is ``pitch_row . q`` (positive = tool tilted down). Position (3)
and pitch (1) pin the four joints; damped least squares on the MuJoCo tool Jacobian solves for
them. The other arm joints (the SO-101's wrist roll; the Panda's joints 3, 5 and 7, which keep its
yaw-and-three-pitch-joints plane) keep the values in ``hold``.
"""

from __future__ import annotations

import numpy as np

from na_description.model import Kinematics
from na_sim.task_profile import TaskProfile


class IKError(RuntimeError):
    """The target is out of reach (or outside the joint limits) within the tolerance."""

    def __init__(self, error: float, message: str) -> None:
        super().__init__(message)
        self.error = error          # m, remaining position error of the best attempt


def tool_pitch(q_arm: np.ndarray, profile: TaskProfile) -> float:
    row = profile.pitch_row
    return float(row @ np.asarray(q_arm, dtype=float)[: len(row)])


def solve_ik(kin: Kinematics, profile: TaskProfile, target: np.ndarray, pitch: float, q_init: np.ndarray, *,
             hold: np.ndarray | None = None, margin: float = 0.05, tol: float = 2e-4, max_iter: int = 200,
             damping: float = 1e-3) -> np.ndarray:
    """IK joints (rad) that put the tool at ``target`` (m, base frame) with ``pitch`` (rad).

    Starts from ``q_init`` (continuity along a path); when that start gets stuck against a
    joint limit, retries from the profile's elbow-up starting configurations. ``hold``: values of
    the other arm joints, in spec order (default 0). Stays ``margin`` rad inside the spec's joint
    limits; raises :class:`IKError` when the position error exceeds ``tol`` (m).
    """
    target = np.asarray(target, dtype=float)
    n = len(profile.ik)
    yaw = profile.yaw_sign * float(np.arctan2(target[1], target[0]))
    starts = [np.asarray(q_init, dtype=float)[:n]]
    row = profile.pitch_row
    # The fourth joint closes the pitch: pitch = row . q (row [0, 1, 1, 1] on the OMX and SO-101).
    last = (lambda a, b: (pitch - row[1] * a - row[2] * b) / row[3]) if n >= 4 and row[3] else \
        (lambda a, b: pitch - a - b)
    starts += [np.array([yaw, a, b, last(a, b)]) for a, b in profile.ik_starts]
    rest = np.zeros(len(profile.arm) - n) if hold is None else np.asarray(hold, dtype=float)
    best: IKError | None = None
    for start in starts:
        try:
            return _solve_from(kin, profile, target, pitch, start, rest, margin, tol, max_iter, damping)
        except IKError as err:
            best = best if best is not None and best.error <= err.error else err
    raise best


def _solve_from(kin: Kinematics, profile: TaskProfile, target: np.ndarray, pitch: float, q_init: np.ndarray,
                rest: np.ndarray, margin: float, tol: float, max_iter: int, damping: float) -> np.ndarray:
    spec = kin.spec
    ik = profile.ik
    n = len(ik)
    row = profile.pitch_row
    lower = spec.lower[ik] + margin
    upper = spec.upper[ik] - margin
    q = np.clip(np.asarray(q_init, dtype=float)[:n].copy(), lower, upper)
    others = np.setdiff1d(profile.arm, ik)       # arm joints the IK holds, spec order
    arm = np.zeros(len(profile.arm))
    arm[others] = rest
    # Pitch error weighted to metres: 0.1 m per rad keeps both residuals comparable.
    pitch_weight = 0.1
    error = np.inf
    for _ in range(max_iter):
        arm[ik] = q
        pos_err = target - kin.tool_position(arm)
        pitch_err = pitch - float(row @ q)
        error = float(np.linalg.norm(pos_err))
        if error < tol and abs(pitch_err) * pitch_weight < tol:
            return q
        jac = np.vstack([kin.tool_jacobian(arm)[:, ik], pitch_weight * row])
        residual = np.concatenate([pos_err, [pitch_weight * pitch_err]])
        step = jac.T @ np.linalg.solve(jac @ jac.T + damping**2 * np.eye(len(residual)), residual)
        # Limit the step so the linearisation holds.
        step *= min(1.0, 0.3 / max(np.max(np.abs(step)), 1e-12))
        q = np.clip(q + step, lower, upper)
    raise IKError(error, f"IK did not reach {np.round(target, 4).tolist()} m at pitch {pitch:.2f} rad "
                  f"(position error {error * 1000:.1f} mm)")
