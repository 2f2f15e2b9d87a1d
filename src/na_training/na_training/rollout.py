"""Recorded-telemetry-conditioned MJX rollout of the arm driven by the model's torque surrogate.

At every frame the model sees a window whose current token is built, through the shared feature
contract, from the *simulated* position, velocity and slide (tracking errors recomputed) and the
*recorded* commands (the goal inputs) and telemetry (effort, voltage, temperature); its clipped torque surrogate then
drives ``substeps`` MuJoCo steps (paper Sec. III-D, Eq. 10). ``lax.scan`` over frames carrying only
the simulator coordinates, reverse-mode gradients through the whole horizon (BPTT), optionally
``jax.checkpoint`` per frame (``sim.remat``).
"""

from __future__ import annotations

import contextlib
import io
from typing import Any

import jax
import jax.numpy as jnp
import mujoco
import numpy as np
from flax import nnx

from na_description import RobotSpec, load_spec
from na_description.features import compute_features
from na_description.model import is_position_actuator, joint_dof_indices, joint_qpos_indices, load_model
from na_training.batches import RECORDED_INPUTS
from na_training.config import SimConfig

# mjx prints "Failed to import warp" when its optional GPU backend (warp) is absent; keep that off
# the user's terminal.
with contextlib.redirect_stdout(io.StringIO()):
    from mujoco import mjx


def enable_float64(enabled: bool = True) -> None:
    """MJX runs in float64 when x64 is on (the authors' setting); the model itself stays float32."""
    jax.config.update("jax_enable_x64", bool(enabled))


class ArmSimulator:
    """The spec's arm in MJX with contacts and the constraint solver off (differentiable)."""

    def __init__(self, spec: RobotSpec | None = None, sim: SimConfig | None = None) -> None:
        self.spec = spec or load_spec()
        self.config = sim or SimConfig()
        model = load_model(self.spec, contacts=False, constraints=False)
        self.substeps = self.config.substeps or max(1, round(self.spec.frame_period / model.opt.timestep))
        frame = model.opt.timestep * self.substeps
        if abs(frame - self.spec.frame_period) > 1e-9:
            raise ValueError(f"{self.substeps} substeps of {model.opt.timestep} s make {frame} s per frame, "
                             f"the spec's data frame is {self.spec.frame_period} s")
        self.mj_model = model
        # MJX's default device is jax.devices()[0], which in a multi-process run belongs to process 0 only.
        device = jax.local_devices()[0]
        self.mjx_model = mjx.put_model(model, device=device)
        names = self.spec.joint_names
        self.qpos_index = jnp.asarray(joint_qpos_indices(model, names))
        self.dof_index = jnp.asarray(joint_dof_indices(model, names))
        self.actuator_index = jnp.asarray([mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in names])
        self.effort_bounds = np.asarray(self.spec.effort_bounds)
        # The surrogate's bounds are the actuators' control ranges (load_model): the effort bounds for motors,
        # the joint ranges for PD position actuators (the Panda's, whose control is a joint target).
        self.control_lower = np.asarray(model.actuator_ctrlrange[np.asarray(self.actuator_index), 0])
        self.control_upper = np.asarray(model.actuator_ctrlrange[np.asarray(self.actuator_index), 1])
        # With sim.position_control "offset" the surrogate of a position actuator is added to the recorded
        # command at t (in the actuator's coordinate: arm joints rad, a prismatic gripper's slide m), so that an
        # untrained head already follows the command and training learns only the correction.
        position = np.array([is_position_actuator(model, int(a)) for a in np.asarray(self.actuator_index)])
        self.offset_channels = position if self.config.position_control == "offset" else np.zeros_like(position)
        self._blank = mjx.make_data(self.mjx_model, device=device)
        self.dtype = self._blank.qpos.dtype

    def initial_state(self, qpos: jax.Array, qvel: jax.Array) -> mjx.Data:
        """One unbatched state from spec-ordered coordinates (arm rad, gripper slide m)."""
        data = self._blank
        return data.replace(qpos=data.qpos.at[self.qpos_index].set(qpos.astype(self.dtype)),
                            qvel=data.qvel.at[self.dof_index].set(qvel.astype(self.dtype)))

    def clip_torque(self, torque: jax.Array) -> jax.Array:
        """tau = clip(tau_pred, lower, upper) with the actuators' control ranges (paper Eq. 10: the spec's
        effort bounds on torque-actuated arms)."""
        return jnp.clip(torque, jnp.asarray(self.control_lower, dtype=torque.dtype),
                        jnp.asarray(self.control_upper, dtype=torque.dtype))

    def command_targets(self, command: jax.Array) -> jax.Array:
        """The recorded command ``[..., n]`` (arm rad, gripper servo angle) in the actuators' coordinates:
        arm joints as they are, the gripper angle through the spec's linear gripper map to the slide (m)."""
        n_arm = self.spec.n_arm
        return jnp.concatenate([command[..., :n_arm], self.spec.gripper.angle_to_slide(command[..., n_arm:])], axis=-1)

    def control(self, surrogate: jax.Array, command: jax.Array | None = None) -> jax.Array:
        """The actuators' control from the surrogate: offset channels add the command at t (see __init__)."""
        if command is not None and self.offset_channels.any():
            surrogate = surrogate + jnp.where(jnp.asarray(self.offset_channels),
                                              self.command_targets(command).astype(surrogate.dtype), 0.0)
        return self.clip_torque(surrogate)

    def advance(self, data: mjx.Data, torque: jax.Array, command: jax.Array | None = None) -> mjx.Data:
        """One data frame: ``substeps`` MuJoCo steps with the clipped control held, joint velocity clipped.
        ``command`` (the recorded command at t) is needed only where :meth:`control` offsets a channel."""
        if self.offset_channels.any() and command is None:
            raise ValueError("sim.position_control 'offset' needs the recorded command of each frame")
        ctrl = data.ctrl.at[self.actuator_index].set(self.control(torque, command).astype(self.dtype))
        data = data.replace(ctrl=ctrl)
        limit = self.config.max_joint_velocity

        def substep(state: mjx.Data, _: Any) -> tuple[mjx.Data, None]:
            state = mjx.step(self.mjx_model, state)
            return state.replace(qvel=jnp.clip(state.qvel, -limit, limit)), None

        data, _ = jax.lax.scan(substep, data, None, length=self.substeps, unroll=self.config.unroll_substeps)
        return data

    def advance_coordinates(self, qpos: jax.Array, qvel: jax.Array, torque: jax.Array,
                            command: jax.Array | None = None) -> tuple[jax.Array, jax.Array]:
        """:meth:`advance` on the model's full ``qpos``/``qvel`` vectors (unbatched).

        Without contacts and constraints MuJoCo's step depends on nothing else of the state (no
        activations, no warm start is used), so a rollout needs to carry (and store for the backward
        pass) only these two small vectors instead of the whole ``mjx.Data``."""
        data = self.advance(self._blank.replace(qpos=qpos, qvel=qvel), torque, command)
        return data.qpos, data.qvel

    def joints(self, data: mjx.Data) -> tuple[jax.Array, jax.Array]:
        """Spec-ordered position and velocity of a (batched) state."""
        return data.qpos[..., self.qpos_index], data.qvel[..., self.dof_index]


def simulated_features(spec: RobotSpec, command, qpos, qvel, effort, voltage, temperature):
    """Feature vectors from simulator coordinates (gripper slide m, m/s) via the shared contract, with the
    recorded command as the goal input.

    The gripper velocity feature is the servo angular velocity (ArmState convention), so the slide
    velocity is mapped back through the spec's linear gripper map."""
    n_arm = spec.n_arm
    velocity = jnp.concatenate([qvel[..., :n_arm], qvel[..., n_arm:] / spec.gripper.slope], axis=-1)
    return compute_features(command, qpos[..., :n_arm], qpos[..., n_arm], effort, velocity, voltage, temperature,
                            spec=spec, xp=jnp)


def rollout(graphdef: nnx.GraphDef, params: nnx.State, rest: nnx.State, simulator: ArmSimulator,
            batch: dict[str, jax.Array], heads: bool = True) -> dict[str, jax.Array]:
    """Roll the model + simulator over ``batch`` (arrays from :mod:`na_training.batches`).

    batch: ``history [B, L-1, F]`` recorded past tokens, ``qpos0``/``qvel0 [B, n]`` initial simulated
    state, per-frame ``command``/``effort``/``voltage``/``temperature`` ``[B, H, n]``
    (:data:`na_training.batches.RECORDED_INPUTS`).
    Returns per-frame ``[B, H, ...]``: the simulated ``qpos`` after each frame (the state at t+1) and
    the model outputs at t (``torque_surrogate`` and, with ``heads``, ``force``, ``contact_logit``,
    ``condition_logit``; without, only the torque path of the model is evaluated).
    """
    spec = simulator.spec
    model = nnx.merge(graphdef, params, rest)
    state = jax.vmap(simulator.initial_state)(batch["qpos0"], batch["qvel0"])
    advance = jax.vmap(simulator.advance_coordinates)
    if simulator.config.remat:
        advance = jax.checkpoint(advance)
    per_frame = {k: jnp.swapaxes(batch[k], 0, 1) for k in RECORDED_INPUTS}
    qpos_index, dof_index = simulator.qpos_index, simulator.dof_index
    replayed = np.arange(spec.n_arm, spec.n_motors) if simulator.config.replay_gripper else np.arange(0)

    def frame(carry, inputs):
        qpos_full, qvel_full, past = carry
        qpos, qvel = qpos_full[..., qpos_index], qvel_full[..., dof_index]
        current_token = simulated_features(spec, inputs["command"], qpos, qvel, inputs["effort"], inputs["voltage"],
                                           inputs["temperature"])
        window = jnp.concatenate([past, current_token[:, None, :].astype(past.dtype)], axis=1)
        if heads:
            outputs = model(window)
            emitted = {k: outputs[k] for k in ("torque_surrogate", "force", "contact_logit", "condition_logit")}
        else:
            emitted = {"torque_surrogate": model.torque_surrogate(window)}
        qpos_full, qvel_full = advance(qpos_full, qvel_full, emitted["torque_surrogate"], inputs["command"])
        if replayed.size:
            qpos_full = qpos_full.at[..., qpos_index[replayed]].set(
                inputs["next_qpos"][..., replayed].astype(qpos_full.dtype))
            qvel_full = qvel_full.at[..., dof_index[replayed]].set(
                inputs["next_qvel"][..., replayed].astype(qvel_full.dtype))
        emitted["qpos"] = qpos_full[..., qpos_index]
        return (qpos_full, qvel_full, window[:, 1:]), emitted

    _, emitted = jax.lax.scan(frame, (state.qpos, state.qvel, batch["history"]), per_frame,
                              unroll=simulator.config.unroll_frames)
    return {k: jnp.swapaxes(v, 0, 1) for k, v in emitted.items()}
