"""MuJoCo model of the arm with the spec's limits applied, and tool-point kinematics."""

from __future__ import annotations

import mujoco
import numpy as np

from na_description.spec import RobotSpec, load_spec


def load_model(spec: RobotSpec | str | None = None, *, contacts: bool = True, constraints: bool = True,
               joint_limits: bool = True) -> mujoco.MjModel:
    """Compile the spec's MJCF and apply its joint limits and effort bounds.

    A motor actuator's control range is the joint's effort bound; a PD position actuator's is the joint's
    position range, and the effort bound becomes its force range.

    ``spec`` is a RobotSpec, a shipped robot's name (``so101``) or None (the OpenManipulator-X).
    ``contacts=False`` and ``constraints=False`` switch off contact handling and the whole
    constraint solver (joint limits, friction loss), as needed for MJX reverse-mode gradients.
    """
    spec = spec if isinstance(spec, RobotSpec) else load_spec(spec)
    model = mujoco.MjModel.from_xml_path(str(spec.mjcf_path))
    for joint in spec.joints:
        jid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, joint.name)
        aid = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, joint.name)
        if jid < 0 or aid < 0:
            raise ValueError(f"{spec.mjcf_path}: no joint/actuator named '{joint.name}' from the spec")
        # joint1 spans the full circle: a limit at +-pi adds nothing, leave it unlimited.
        full_circle = joint.upper - joint.lower >= 2 * np.pi - 1e-9
        model.jnt_limited[jid] = int(joint_limits and not full_circle)
        model.jnt_range[jid] = (joint.lower, joint.upper)
        model.actuator_ctrllimited[aid] = 1
        if is_position_actuator(model, aid):
            # A PD position actuator (the Panda's): its control is a joint target within the joint's range,
            # the effort bound limits the force it applies.
            model.actuator_ctrlrange[aid] = (joint.lower, joint.upper)
            model.actuator_forcelimited[aid] = 1
            model.actuator_forcerange[aid] = (-joint.effort, joint.effort)
        else:
            model.actuator_ctrlrange[aid] = (-joint.effort, joint.effort)
    if not contacts:
        model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    if not constraints:
        model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    return model


def is_position_actuator(model: mujoco.MjModel, actuator: int) -> bool:
    """Whether actuator ``actuator`` is a PD position actuator (affine bias, as MJCF ``<position>`` compiles),
    whose control is a joint target, not a torque."""
    return int(model.actuator_biastype[actuator]) == int(mujoco.mjtBias.mjBIAS_AFFINE)


def joint_qpos_indices(model: mujoco.MjModel, names: list[str]) -> np.ndarray:
    """qpos address of each named joint (all joints here are 1-DoF)."""
    return np.array([model.jnt_qposadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)]
                     for n in names])


def joint_dof_indices(model: mujoco.MjModel, names: list[str]) -> np.ndarray:
    """Velocity (dof) address of each named joint."""
    return np.array([model.jnt_dofadr[mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_JOINT, n)]
                     for n in names])


class Kinematics:
    """Tool-point forward kinematics and translational Jacobian of the arm.

    ``q`` holds the spec's joint coordinates in spec order (rad; the gripper as slide metres);
    a shorter vector sets only the leading (arm) joints.
    """

    def __init__(self, spec: RobotSpec | str | None = None) -> None:
        self.spec = spec if isinstance(spec, RobotSpec) else load_spec(spec)
        self.model = load_model(self.spec)
        self.data = mujoco.MjData(self.model)
        self._qpos_idx = joint_qpos_indices(self.model, self.spec.joint_names)
        self._dof_idx = joint_dof_indices(self.model, self.spec.joint_names)
        self._site = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_SITE, self.spec.tool_site)
        self._jacp = np.zeros((3, self.model.nv))

    def _set(self, q: np.ndarray) -> None:
        q = np.asarray(q, dtype=float)
        self.data.qpos[:] = 0.0
        self.data.qpos[self._qpos_idx[: q.shape[0]]] = q
        mujoco.mj_kinematics(self.model, self.data)

    def tool_position(self, q: np.ndarray) -> np.ndarray:
        """Tool point in the base frame (m)."""
        self._set(q)
        return self.data.site_xpos[self._site].copy()

    def tool_jacobian(self, q: np.ndarray) -> np.ndarray:
        """Translational Jacobian at the tool point, 3 x n (columns in spec joint order)."""
        self._set(q)
        mujoco.mj_comPos(self.model, self.data)
        mujoco.mj_jacSite(self.model, self.data, self._jacp, None, self._site)
        n = np.asarray(q).shape[0]
        return self._jacp[:, self._dof_idx[:n]].copy()
