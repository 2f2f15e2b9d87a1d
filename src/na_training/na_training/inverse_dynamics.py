"""Torque labels from inverse dynamics of the recorded trajectories (a warm start, not in the paper).

The paper supervises the torque-surrogate head only through rollouts (Sec. III-D). As an *addition*,
this module computes, for every recorded frame, the generalised effort that the training simulator
itself (same MuJoCo model: contacts and constraint solver off) needs to follow the recorded motion:
``mj_inverse`` at the recorded position with velocity and acceleration from a smoothing fit. Anything
the unloaded model does not contain (payload, pushes, friction, the Joint-3 restriction) ends up in
this effort, as it does in the rollout-trained surrogate. The labels are clipped to the effort bounds
that clip the surrogate in the rollout (paper Eq. 10).
"""

from __future__ import annotations

import mujoco
import numpy as np
from scipy.signal import savgol_filter

from na_description import RobotSpec, load_spec
from na_description.model import joint_dof_indices, joint_qpos_indices, load_model
from na_training.episode import Episode

SMOOTHING_WINDOW = 9      # frames (0.15 s): velocity/acceleration from a quadratic fit over +-4 frames


class InverseDynamics:
    """``mj_inverse`` of the rollout's MuJoCo model over whole episodes."""

    def __init__(self, spec: RobotSpec | None = None, window: int = SMOOTHING_WINDOW) -> None:
        if window < 3 or window % 2 == 0:
            raise ValueError(f"the smoothing window must be an odd number of frames >= 3, got {window}")
        self.window = window
        self.spec = spec or load_spec()
        self.model = load_model(self.spec, contacts=False, constraints=False)
        self.data = mujoco.MjData(self.model)
        self.qpos_index = joint_qpos_indices(self.model, self.spec.joint_names)
        self.dof_index = joint_dof_indices(self.model, self.spec.joint_names)
        self.bounds = np.asarray(self.spec.effort_bounds, dtype=float)
        self.frame_period = float(self.spec.frame_period)

    def torques(self, qpos: np.ndarray) -> np.ndarray:
        """Clipped generalised effort ``[T, n]`` along a trajectory of simulator coordinates ``[T, n]``
        (frames one data period apart; non-finite rows split it into segments). NaN in segments
        shorter than the smoothing window."""
        qpos = np.asarray(qpos, dtype=float)
        out = np.full(qpos.shape, np.nan)
        finite = np.all(np.isfinite(qpos), axis=1)
        edges = np.flatnonzero(np.diff(np.r_[0, finite.astype(int), 0]))
        for start, stop in zip(edges[::2], edges[1::2], strict=True):
            if stop - start >= self.window:
                out[start:stop] = self._segment(qpos[start:stop])
        return np.clip(out, -self.bounds, self.bounds)

    def _segment(self, qpos: np.ndarray) -> np.ndarray:
        """``mj_inverse`` with velocity and acceleration from a quadratic Savitzky-Golay fit: plain second
        differences at 58.8 Hz turn the encoder quantisation into accelerations whose inertia term
        (armature 0.1 kg m^2) is larger than the gravity torque."""
        dt = self.frame_period
        velocity = savgol_filter(qpos, self.window, 2, deriv=1, delta=dt, axis=0, mode="interp")
        acceleration = savgol_filter(qpos, self.window, 2, deriv=2, delta=dt, axis=0, mode="interp")
        data, model = self.data, self.model
        out = np.empty_like(qpos)
        for k in range(qpos.shape[0]):
            data.qpos[:] = 0.0
            data.qvel[:] = 0.0
            data.qacc[:] = 0.0
            data.qpos[self.qpos_index] = qpos[k]
            data.qvel[self.dof_index] = velocity[k]
            data.qacc[self.dof_index] = acceleration[k]
            mujoco.mj_inverse(model, data)
            out[k] = data.qfrc_inverse[self.dof_index]
        return out

    def episode_torques(self, episode: Episode) -> np.ndarray:
        """Torque labels of one episode; invalid frames (and short valid runs) get NaN."""
        qpos = np.where(episode.valid[:, None], episode.qpos, np.nan)
        return self.torques(qpos)
