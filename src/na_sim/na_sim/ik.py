"""Inverse kinematics of the 4-revolute-joint arm: tool position plus tool pitch.

The OpenManipulator-X joints 2-4 all turn about the link y axes, so the tool's pitch in the
arm plane is q2 + q3 + q4 (positive = tool tilted down). Position (3) and pitch (1) pin the
four arm joints; damped least squares on the MuJoCo tool Jacobian solves for them.
"""

from __future__ import annotations

import numpy as np

from na_description.model import Kinematics

PITCH_ROW = np.array([0.0, 1.0, 1.0, 1.0])   # d(pitch)/dq for joints 1-4


class IKError(RuntimeError):
    """The target is out of reach (or outside the joint limits) within the tolerance."""

    def __init__(self, error: float, message: str) -> None:
        super().__init__(message)
        self.error = error          # m, remaining position error of the best attempt


def tool_pitch(q_arm: np.ndarray) -> float:
    return float(PITCH_ROW @ np.asarray(q_arm, dtype=float)[:4])


def solve_ik(kin: Kinematics, target: np.ndarray, pitch: float, q_init: np.ndarray, *,
             margin: float = 0.05, tol: float = 2e-4, max_iter: int = 200, damping: float = 1e-3) -> np.ndarray:
    """Arm joints (4, rad) that put the tool at ``target`` (m, base frame) with ``pitch`` (rad).

    Starts from ``q_init`` (continuity along a path); when that start gets stuck against a
    joint limit, retries from elbow-up starting configurations. Stays ``margin`` rad inside
    the spec's joint limits; raises :class:`IKError` when the position error exceeds ``tol`` (m).
    """
    target = np.asarray(target, dtype=float)
    yaw = float(np.arctan2(target[1], target[0]))
    starts = [np.asarray(q_init, dtype=float)[:4]]
    starts += [np.array([yaw, q2, q3, pitch - q2 - q3]) for q2, q3 in ((-0.5, 0.5), (0.3, -0.3), (-1.0, 1.0),
                                                                        (0.6, -1.0), (-0.2, 1.2))]
    best: IKError | None = None
    for start in starts:
        try:
            return _solve_from(kin, target, pitch, start, margin, tol, max_iter, damping)
        except IKError as err:
            best = best if best is not None and best.error <= err.error else err
    raise best


def _solve_from(kin: Kinematics, target: np.ndarray, pitch: float, q_init: np.ndarray, margin: float, tol: float,
                max_iter: int, damping: float) -> np.ndarray:
    spec = kin.spec
    lower = spec.lower[:4] + margin
    upper = spec.upper[:4] - margin
    q = np.clip(np.asarray(q_init, dtype=float)[:4].copy(), lower, upper)
    # Pitch error weighted to metres: 0.1 m per rad keeps both residuals comparable.
    pitch_weight = 0.1
    error = np.inf
    for _ in range(max_iter):
        pos_err = target - kin.tool_position(q)
        pitch_err = pitch - tool_pitch(q)
        error = float(np.linalg.norm(pos_err))
        if error < tol and abs(pitch_err) * pitch_weight < tol:
            return q
        jac = np.vstack([kin.tool_jacobian(q), pitch_weight * PITCH_ROW])
        residual = np.concatenate([pos_err, [pitch_weight * pitch_err]])
        step = jac.T @ np.linalg.solve(jac @ jac.T + damping**2 * np.eye(4), residual)
        # Limit the step so the linearisation holds.
        step *= min(1.0, 0.3 / max(np.max(np.abs(step)), 1e-12))
        q = np.clip(q + step, lower, upper)
    raise IKError(error, f"IK did not reach {np.round(target, 4).tolist()} m at pitch {pitch:.2f} rad "
                  f"(position error {error * 1000:.1f} mm)")
