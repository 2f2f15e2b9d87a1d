"""Synthetic episodes from the na_description MuJoCo model in which a baseline's assumptions hold.

Used by the tests (and handy for trying the baselines): a PD + gravity-compensation servo loop
tracks smooth random sine references; the motor torque is ``Kt·i + b`` (the recorded current is
``i = (τ_motor − b)/Kt``); optional ID-Friction friction and backlash act on the joints; a known
tool force is applied through ``xfrc_applied`` on the tool body at the tool point. Contacts and
the constraint solver are off (so joint friction loss is off) and MuJoCo's implicit damping in
the Euler integrator is disabled, so each recorded frame is one plain semi-implicit Euler step.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mujoco
import numpy as np

from na_description.model import joint_dof_indices, joint_qpos_indices, load_model
from na_description.spec import load_spec
from na_training.baselines.episodes import NOMINAL, EpisodeArrays


@dataclass
class SyntheticActuator:
    """Per-joint truth of the generator (arrays of length n_arm); zero friction = linear actuator."""

    slope: np.ndarray
    offset: np.ndarray
    coulomb: np.ndarray | None = None
    stribeck: np.ndarray | None = None
    viscous: np.ndarray | None = None
    stribeck_velocity: np.ndarray | None = None
    backlash: np.ndarray | None = None
    backlash_velocity: float = 0.05

    @property
    def has_friction(self) -> bool:
        return self.coulomb is not None


# Friction of the synthetic truth, written out here rather than imported from the ID-Friction baseline,
# so that a mistake in the baseline's law cannot be hidden by data generated with that same law: the
# textbook Stribeck curve (Coulomb level, static peak decaying with exp(-(v/vs)^2), viscous term) with
# the sign of the velocity smoothed over about 0.01 rad/s.
FRICTION_SIGN_SMOOTHING = 0.01      # rad/s


def _true_friction(velocity: np.ndarray, actuator: SyntheticActuator) -> np.ndarray:
    decay = np.exp(-np.square(velocity / actuator.stribeck_velocity))
    level = actuator.coulomb * (1.0 - decay) + actuator.stribeck * decay
    return level * np.tanh(velocity / FRICTION_SIGN_SMOOTHING) + actuator.viscous * velocity


def smooth_pulse(t: np.ndarray | float, start: float, stop: float, ramp: float) -> np.ndarray:
    """0 → 1 → 0 with raised-cosine ramps of ``ramp`` s (continuous first derivative)."""
    t = np.asarray(t, dtype=float)
    up = np.clip((t - start) / ramp, 0.0, 1.0)
    down = np.clip((stop - t) / ramp, 0.0, 1.0)
    return 0.5 * (1 - np.cos(np.pi * up)) * 0.5 * (1 - np.cos(np.pi * down))


def contact_force_profile(force: np.ndarray, start: float, stop: float, ramp: float = 0.3) -> Callable:
    """Tool force (N, base frame) of ``force`` switched on smoothly between ``start`` and ``stop``."""
    force = np.asarray(force, dtype=float)
    return lambda t: force * float(smooth_pulse(t, start, stop, ramp))


def simulate_episode(actuator: SyntheticActuator, duration: float = 4.0, seed: int = 0,
                     force_profile: Callable[[float], np.ndarray] | None = None, episode_id: str = "synthetic",
                     frame_period: float | None = None, restriction_stiffness: float = 0.0,
                     restriction_rest: float = 1.4, current_noise: float = 0.0, **labels) -> EpisodeArrays:
    """One episode.

    ``restriction_stiffness`` (N·m/rad) restricts joint3 like the paper's rubber bands: a spring
    pulling it towards ``restriction_rest`` (rad). ``current_noise`` (A) is added to the recorded
    current only. Extra keyword arguments (task, payload_grams, split, ...) label the episode.
    """
    spec = load_spec()
    model = load_model(spec, contacts=False, constraints=False)
    model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_EULERDAMP
    if frame_period is not None:
        model.opt.timestep = frame_period
    h = model.opt.timestep
    data = mujoco.MjData(model)
    arm = spec.arm_joint_names
    n = len(arm)
    qpos_idx, dof_idx = joint_qpos_indices(model, arm), joint_dof_indices(model, arm)
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.tool_site)
    body = model.site_bodyid[site]
    rng = np.random.default_rng(seed)
    centre = np.array([0.0, 0.1, 0.1, 0.3])[:n] + rng.uniform(-0.2, 0.2, n)
    amplitude = rng.uniform(0.15, 0.45, n)
    omega = 2 * np.pi * rng.uniform(0.3, 0.8, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    kp, kd = np.array([6.0, 12.0, 9.0, 4.0])[:n], np.array([0.6, 1.0, 0.8, 0.4])[:n]
    data.qpos[qpos_idx] = centre + amplitude * np.sin(phase)
    data.qvel[dof_idx] = amplitude * omega * np.cos(phase)
    restricted = restriction_stiffness > 0
    joint3 = arm.index(spec.condition_joint)
    steps = round(duration / h)
    record = {k: np.zeros((steps, n)) for k in ("position", "velocity", "current", "goal")}
    forces = np.zeros((steps, 3))
    flank = np.zeros(n)
    for k in range(steps):
        t = k * h
        mujoco.mj_forward(model, data)
        q, qd = data.qpos[qpos_idx].copy(), data.qvel[dof_idx].copy()
        goal = centre + amplitude * np.sin(omega * t + phase)
        goal_rate = amplitude * omega * np.cos(omega * t + phase)
        motor = kp * (goal - q) + kd * (goal_rate - qd) + data.qfrc_bias[dof_idx] - data.qfrc_passive[dof_idx]
        current = (motor - actuator.offset) / actuator.slope
        joint_torque = motor.copy()
        if actuator.has_friction:
            joint_torque -= _true_friction(qd, actuator)
            # the same hysteretic flank update as id_friction.backlash_flank, one frame at a time
            flank = np.where(np.abs(qd) > actuator.backlash_velocity, np.sign(qd), flank)
            joint_torque += actuator.backlash * flank
        if restricted:
            joint_torque[joint3] -= restriction_stiffness * (q[joint3] - restriction_rest)
        data.ctrl[:] = 0.0
        data.qfrc_applied[:] = 0.0
        data.qfrc_applied[dof_idx] = joint_torque
        f = np.zeros(3) if force_profile is None else np.asarray(force_profile(t), dtype=float)
        data.xfrc_applied[:] = 0.0
        data.xfrc_applied[body, :3] = f
        data.xfrc_applied[body, 3:] = np.cross(data.site_xpos[site] - data.xipos[body], f)
        record["position"][k], record["velocity"][k], record["goal"][k] = q, qd, goal
        record["current"][k] = current + current_noise * rng.standard_normal(n)
        forces[k] = f
        mujoco.mj_step(model, data)
    contact = np.linalg.norm(forces, axis=1) > 1e-6
    return EpisodeArrays(
        episode_id=episode_id, time=np.arange(steps) * h, position=record["position"], velocity=record["velocity"],
        effort=record["current"], goal_position=record["goal"], force=forces, contact=contact,
        force_source=labels.pop("force_source", "ft_sensor" if force_profile is not None else "none"),
        condition=labels.pop("condition", 0 if restricted else NOMINAL), **labels)
