"""Torque labels from inverse dynamics of the recorded trajectories (a warm start, not in the paper).

The paper supervises the torque-surrogate head only through rollouts (Sec. III-D). As an *addition*,
this module computes, for every recorded frame, the generalised effort that the training simulator
itself (same MuJoCo model: contacts and constraint solver off) needs to follow the recorded motion:
``mj_inverse`` at the recorded position with central-difference velocity and acceleration. Anything
the unloaded model does not contain (payload, pushes, friction, the Joint-3 restriction) ends up in
this effort, as it does in the rollout-trained surrogate. The labels are clipped to the effort bounds
that clip the surrogate in the rollout (paper Eq. 10).
"""

from __future__ import annotations

import mujoco
import numpy as np

from na_description import RobotSpec, load_spec
from na_description.model import joint_dof_indices, joint_qpos_indices, load_model
from na_training.batches import TrainingEpisode


class InverseDynamics:
    """``mj_inverse`` of the rollout's MuJoCo model over whole episodes."""

    def __init__(self, spec: RobotSpec | None = None) -> None:
        self.spec = spec or load_spec()
        self.model = load_model(self.spec, contacts=False, constraints=False)
        self.data = mujoco.MjData(self.model)
        self.qpos_index = joint_qpos_indices(self.model, self.spec.joint_names)
        self.dof_index = joint_dof_indices(self.model, self.spec.joint_names)
        self.bounds = np.asarray(self.spec.effort_bounds, dtype=float)
        self.frame_period = float(self.spec.frame_period)

    def torques(self, qpos: np.ndarray) -> np.ndarray:
        """Clipped generalised effort ``[T, n]`` along a trajectory of simulator coordinates ``[T, n]``
        (frames one data period apart); NaN where the central differences are undefined (first/last
        frame, or a non-finite neighbour)."""
        qpos = np.asarray(qpos, dtype=float)
        dt = self.frame_period
        out = np.full(qpos.shape, np.nan)
        if qpos.shape[0] < 3:
            return out
        velocity = (qpos[2:] - qpos[:-2]) / (2.0 * dt)
        acceleration = (qpos[2:] - 2.0 * qpos[1:-1] + qpos[:-2]) / dt**2
        data, model = self.data, self.model
        for k in range(velocity.shape[0]):
            q, v, a = qpos[k + 1], velocity[k], acceleration[k]
            if not (np.all(np.isfinite(q)) and np.all(np.isfinite(v)) and np.all(np.isfinite(a))):
                continue
            data.qpos[:] = 0.0
            data.qvel[:] = 0.0
            data.qacc[:] = 0.0
            data.qpos[self.qpos_index] = q
            data.qvel[self.dof_index] = v
            data.qacc[self.dof_index] = a
            mujoco.mj_inverse(model, data)
            out[k + 1] = data.qfrc_inverse[self.dof_index]
        return np.clip(out, -self.bounds, self.bounds)

    def episode_torques(self, episode: TrainingEpisode) -> np.ndarray:
        """Torque labels of one episode; frames next to invalid ones get NaN."""
        qpos = np.where(episode.valid[:, None], episode.qpos, np.nan)
        return self.torques(qpos)
