"""Synthetic episodes for tests and benchmarks: the training arm model itself, driven by known torques.

A PD law with gravity feed-forward tracks smooth random goals in (CPU) MuJoCo with the same
contact-free, constraint-free model the MJX rollout uses; the applied torque is reported as the
"current" through a fixed torque constant, so a model that learns torque = k · current reproduces
the recorded positions exactly. Not a servo model (``na_sim`` owns that): only a known-answer
data source for the training machinery.
"""

from __future__ import annotations

import mujoco
import numpy as np

from na_description import RobotSpec, load_spec
from na_description.model import joint_dof_indices, joint_qpos_indices, load_model
from na_training.batches import TrainingEpisode, training_episode

TORQUE_PER_AMP = 1.78     # N*m/A: 4.1 N·m / 2.3 A, XM430-W350 stall at 12 V (docs/REFERENCES.md, XM430-W350)


def synthetic_episode(frames: int, seed: int = 0, spec: RobotSpec | None = None, substeps: int = 4,
                      gains: tuple[float, float] = (8.0, 0.6), force: np.ndarray | None = None) -> TrainingEpisode:
    """One episode of ``frames`` frames (data rate of the spec) with arrays named like ArmState fields."""
    spec = spec or load_spec()
    rng = np.random.default_rng(seed)
    model = load_model(spec, contacts=False, constraints=False)
    data = mujoco.MjData(model)
    qpos_index = joint_qpos_indices(model, spec.joint_names)
    dof_index = joint_dof_indices(model, spec.joint_names)
    actuators = [mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in spec.joint_names]
    n, n_arm = spec.n_motors, spec.n_arm
    t = np.arange(frames) * spec.frame_period
    # Smooth goals in simulator coordinates: a few slow sines per joint inside the joint limits.
    centre = (spec.lower + spec.upper) / 2
    span = (spec.upper - spec.lower) / 2
    amplitude = rng.uniform(0.1, 0.35, n) * np.minimum(span, 1.0)
    frequency = rng.uniform(0.2, 0.6, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    goal_sim = centre * 0.2 + amplitude * np.sin(2 * np.pi * frequency * t[:, None] + phase)
    goal_sim[:, n_arm] = np.clip(goal_sim[:, n_arm], spec.lower[n_arm] + 1e-3, spec.upper[n_arm] - 1e-3)
    data.qpos[qpos_index] = goal_sim[0]
    bounds = spec.effort_bounds
    kp = np.where(np.arange(n) < n_arm, gains[0], 40.0)
    kd = np.where(np.arange(n) < n_arm, gains[1], 2.0)
    position = np.zeros((frames, n))
    velocity = np.zeros((frames, n))
    torque = np.zeros((frames, n))
    for k in range(frames):
        position[k], velocity[k] = data.qpos[qpos_index], data.qvel[dof_index]
        mujoco.mj_forward(model, data)
        gravity = data.qfrc_bias[dof_index]
        torque[k] = np.clip(gravity + kp * (goal_sim[k] - position[k]) - kd * velocity[k], -bounds, bounds)
        data.ctrl[actuators] = torque[k]
        for _ in range(substeps):
            mujoco.mj_step(model, data)
            data.qvel[:] = np.clip(data.qvel, -10.0, 10.0)
    slope = spec.gripper.slope
    goal = goal_sim.copy()
    goal[:, n_arm] = spec.gripper.slide_to_angle(goal_sim[:, n_arm])
    position_servo = position.copy()
    position_servo[:, n_arm] = spec.gripper.slide_to_angle(position[:, n_arm])
    velocity_servo = velocity.copy()
    velocity_servo[:, n_arm] = velocity[:, n_arm] / slope
    columns = {
        "goal_position": goal, "position": position_servo, "gripper_slide": position[:, n_arm],
        "velocity": velocity_servo, "current": torque / TORQUE_PER_AMP,
        "input_voltage": 12.0 + 0.05 * rng.standard_normal((frames, n)),
        "temperature": np.full((frames, n), 35.0),
    }
    if force is None:
        # A simple, learnable force label: proportional to the joint-2 current (like a payload pulling down).
        force = np.zeros((frames, 3))
        force[:, 2] = -np.clip(torque[:, 1], 0, None)
    return training_episode(columns, name=f"synthetic_{seed}", spec=spec, force=force, condition=1.0)
