"""Rigid-body terms of an arm from its na_description MuJoCo model, per frame (ROS-free).

The model is ``load_model(contacts=False, constraints=False)``: the configuration the simulator and the paper use
(contacts and constraint solver off), so ``mj_inverse`` gives exactly ``M(q) q̈ + C(q, q̇) q̇ + g(q) + D q̇``
(armature inside ``M``, joint damping ``D`` from the MJCF), without ``g(q)`` for an arm whose effort signal
leaves gravity out (the Panda's commanded torque). Only the arm joints enter; the gripper slide only places the
finger mass. Used by the classical observers (training) and the wear monitor (training and the estimator).
"""

from __future__ import annotations

import mujoco
import numpy as np

from na_description.model import joint_dof_indices, joint_qpos_indices, load_model
from na_description.servo_tables import effort_excludes_gravity
from na_description.spec import RobotSpec, load_spec


class RigidBodyModel:
    """Inverse dynamics, mass matrix, bias forces and tool Jacobian of the arm joints."""

    def __init__(self, spec: RobotSpec | None = None) -> None:
        self.spec = spec or load_spec()
        self.model = load_model(self.spec, contacts=False, constraints=False)
        if effort_excludes_gravity(self.spec):
            # The arm's effort is the torque its controller commands on top of the gravity the robot compensates
            # itself (the Panda's): the rigid-body torque it is compared with leaves gravity out too.
            self.model.opt.gravity[:] = 0.0
        self.data = mujoco.MjData(self.model)
        self.arm_joints = self.spec.arm_joint_names
        self.n_arm = len(self.arm_joints)
        self._qpos = joint_qpos_indices(self.model, self.arm_joints)
        self._dof = joint_dof_indices(self.model, self.arm_joints)
        grippers = [j.name for j in self.spec.joints if j.type == "gripper"]
        self._gripper_qpos = joint_qpos_indices(self.model, grippers) if grippers else np.array([], dtype=int)
        self._site = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, self.spec.tool_site)
        if self._site < 0:
            raise ValueError(f"{self.spec.mjcf_path}: no site named '{self.spec.tool_site}'")
        self._jacp = np.zeros((3, self.model.nv))
        self._mass = np.zeros((self.model.nv, self.model.nv))

    def _check(self, q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=float)
        if q.ndim != 2 or q.shape[1] != self.n_arm:
            raise ValueError(f"expected arm joint array [T, {self.n_arm}], got shape {q.shape}")
        return q

    def _set_state(self, q: np.ndarray, qd: np.ndarray | None, slide: float | None) -> None:
        self.data.qpos[:] = 0.0
        self.data.qvel[:] = 0.0
        self.data.qacc[:] = 0.0
        self.data.qpos[self._qpos] = q
        if slide is not None and self._gripper_qpos.size:
            self.data.qpos[self._gripper_qpos[0]] = slide
        if qd is not None:
            self.data.qvel[self._dof] = qd

    def inverse_dynamics(self, q: np.ndarray, qd: np.ndarray, qdd: np.ndarray,
                         gripper_slide: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``τ_ID`` [T, n] and the tool Jacobian [T, 3, n] at every frame (one MuJoCo pass each)."""
        q, qd, qdd = self._check(q), self._check(qd), self._check(qdd)
        tau = np.zeros_like(q)
        jac = np.zeros((q.shape[0], 3, self.n_arm))
        for k in range(q.shape[0]):
            self._set_state(q[k], qd[k], None if gripper_slide is None else gripper_slide[k])
            self.data.qacc[self._dof] = qdd[k]
            mujoco.mj_inverse(self.model, self.data)
            tau[k] = self.data.qfrc_inverse[self._dof]
            mujoco.mj_jacSite(self.model, self.data, self._jacp, None, self._site)
            jac[k] = self._jacp[:, self._dof]
        return tau, jac

    def observer_terms(self, q: np.ndarray, qd: np.ndarray, gripper_slide: np.ndarray | None = None,
                       eps: float = 1e-6) -> dict[str, np.ndarray]:
        """What the momentum observer needs at every frame, without any time derivative.

        ``momentum`` p = M q̇; ``drift`` = Ṁ q̇ − (C q̇ + g) − D q̇ = Cᵀ q̇ − g − D q̇ (since
        Ṁ = C + Cᵀ), with Ṁ q̇ as the directional derivative of M along q̇ (central difference in
        q of size ``eps``·q̇ — measured q and q̇ of the same frame only); ``jacobian`` [T, 3, n].
        """
        q, qd = self._check(q), self._check(qd)
        n = q.shape[0]
        momentum = np.zeros_like(q)
        drift = np.zeros_like(q)
        jac = np.zeros((n, 3, self.n_arm))
        dofs = np.ix_(self._dof, self._dof)
        for k in range(n):
            slide = None if gripper_slide is None else gripper_slide[k]
            mass_dot_qd = np.zeros(self.n_arm)
            for sign in (1.0, -1.0):
                self._set_state(q[k] + sign * eps * qd[k], None, slide)
                mujoco.mj_fwdPosition(self.model, self.data)
                mujoco.mj_fullM(self.model, self.data, self._mass)
                mass_dot_qd += sign * self._mass[dofs] @ qd[k]
            mass_dot_qd /= 2.0 * eps
            self._set_state(q[k], qd[k], slide)
            mujoco.mj_forward(self.model, self.data)
            mujoco.mj_fullM(self.model, self.data, self._mass)
            momentum[k] = self._mass[dofs] @ qd[k]
            drift[k] = mass_dot_qd - self.data.qfrc_bias[self._dof] + self.data.qfrc_passive[self._dof]
            mujoco.mj_jacSite(self.model, self.data, self._jacp, None, self._site)
            jac[k] = self._jacp[:, self._dof]
        return {"momentum": momentum, "drift": drift, "jacobian": jac}
