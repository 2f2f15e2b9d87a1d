"""Synthetic episodes for tests and benchmarks: the training arm model itself, driven by a known actuator.

A PD law with gravity and passive-force feed-forward tracks smooth random sine goals (inside the joint
limits) on every motor, in CPU MuJoCo with the contact-free, constraint-free model that the MJX rollout
and the classical baselines use. The arm's motor torque is ``slope·current + offset`` per joint
(:class:`SyntheticActuator`; by default ``TORQUE_PER_AMP·current``, so a model that learns torque = k·current
reproduces the recorded positions); optional Stribeck friction and backlash act on the joints, a spring
restricts the condition joint like the paper's rubber bands, and a known tool force acts at the tool point
(its label, environment on robot, base frame). The gripper's effort is its drive force over
``TORQUE_PER_AMP``. The episode is an :class:`na_training.episode.Episode` over NAD columns, read by
everything downstream as a converted bag is. Not a servo model (``na_sim`` owns that): a known-answer
data source.

The torque of a frame is held for ``substeps`` MuJoCo steps; with one step per frame and MuJoCo's
implicit damping off, every frame is one plain semi-implicit Euler step, in which the inverse-dynamics
baselines are exact.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import mujoco
import numpy as np

from na_description import RobotSpec, load_spec
from na_description.model import joint_dof_indices, joint_qpos_indices, load_model
from na_training.episode import NOMINAL, RESTRICTED, Episode
from na_training.nad import build_columns

TORQUE_PER_AMP = 1.78     # N*m/A: 4.1 N·m / 2.3 A, XM430-W350 stall at 12 V (docs/REFERENCES.md, XM430-W350)
ARM_GAINS = (8.0, 0.8)    # PD gains of the arm joints (N·m/rad, N·m·s/rad)
GRIPPER_GAINS = (40.0, 2.0)   # PD gains of the gripper slide (N/m, N·s/m)
MAX_JOINT_VELOCITY = 10.0     # rad/s (m/s), clipped after every step as the training simulator does
# Friction of the synthetic truth, written out here rather than imported from the ID-Friction baseline,
# so that a mistake in the baseline's law cannot be hidden by data generated with that same law: the
# textbook Stribeck curve (Coulomb level, static peak decaying with exp(-(v/vs)^2), viscous term) with
# the sign of the velocity smoothed over about 0.01 rad/s.
FRICTION_SIGN_SMOOTHING = 0.01      # rad/s


@dataclass(frozen=True)
class SyntheticActuator:
    """Per-arm-joint truth of the generator (arrays of length n_arm); no friction = a linear actuator."""

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

    def friction(self, velocity: np.ndarray) -> np.ndarray:
        decay = np.exp(-np.square(velocity / self.stribeck_velocity))
        level = self.coulomb * (1.0 - decay) + self.stribeck * decay
        return level * np.tanh(velocity / FRICTION_SIGN_SMOOTHING) + self.viscous * velocity


def torque_per_amp(n_arm: int) -> SyntheticActuator:
    """The default actuator: torque = TORQUE_PER_AMP · current on every arm joint."""
    return SyntheticActuator(slope=np.full(n_arm, TORQUE_PER_AMP), offset=np.zeros(n_arm))


def smooth_pulse(t: np.ndarray | float, start: float, stop: float, ramp: float) -> np.ndarray:
    """0 → 1 → 0 with raised-cosine ramps of ``ramp`` s (continuous first derivative)."""
    t = np.asarray(t, dtype=float)
    up = np.clip((t - start) / ramp, 0.0, 1.0)
    down = np.clip((stop - t) / ramp, 0.0, 1.0)
    return 0.5 * (1 - np.cos(np.pi * up)) * 0.5 * (1 - np.cos(np.pi * down))


def force_pulse(frames: int, frame_period: float, force: np.ndarray, start: float, stop: float,
                ramp: float = 0.3) -> np.ndarray:
    """Tool force ``[frames, 3]`` (N, base frame) of ``force`` switched on smoothly between ``start`` and
    ``stop`` (s)."""
    t = np.arange(frames) * frame_period
    return np.asarray(force, dtype=float)[None, :] * smooth_pulse(t, start, stop, ramp)[:, None]


def synthetic_episode(frames: int, seed: int = 0, *, actuator: SyntheticActuator | None = None,
                      tool_force: np.ndarray | None = None, restriction_stiffness: float = 0.0,
                      restriction_rest: float = 1.4, current_noise: float = 0.0, frame_period: float | None = None,
                      substeps: int | None = None, implicit_damping: bool = True, **meta: Any) -> Episode:
    """One episode of ``frames`` frames of the OpenManipulator-X.

    ``tool_force`` ``[frames, 3]``: the force on the tool at each frame (N, base frame; its label); none: free
    motion. ``restriction_stiffness`` (N·m/rad) pulls the condition joint towards ``restriction_rest`` (rad)
    and labels the episode restricted. ``current_noise`` (A) is added to the recorded current only.
    ``frame_period`` (default the spec's) is made of ``substeps`` MuJoCo steps (default: the model's
    timestep). ``implicit_damping``: MuJoCo's implicit joint damping in the Euler step, as the training
    simulator has it. ``meta``: episode metadata (``episode_id``, ``task``, ``task_instance``,
    ``payload_grams``, ``force_source``, ...) over the defaults.
    """
    spec = load_spec()
    rng = np.random.default_rng(seed)
    model = load_model(spec, contacts=False, constraints=False)
    frame_period = spec.frame_period if frame_period is None else frame_period
    substeps = substeps or max(1, round(frame_period / model.opt.timestep))
    model.opt.timestep = frame_period / substeps
    if not implicit_damping:
        model.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_EULERDAMP
    data = mujoco.MjData(model)
    names, n, n_arm = spec.joint_names, spec.n_motors, spec.n_arm
    qpos_index, dof_index = joint_qpos_indices(model, names), joint_dof_indices(model, names)
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, spec.tool_site)
    body = model.site_bodyid[site]
    actuator = actuator or torque_per_amp(n_arm)
    condition_index = names.index(spec.condition_joint)
    force = np.zeros((frames, 3)) if tool_force is None else np.asarray(tool_force, dtype=float)
    if force.shape != (frames, 3):
        raise ValueError(f"tool_force must be [{frames}, 3], got {force.shape}")

    # Goals in simulator coordinates: one slow sine per joint inside its limits.
    span = np.minimum((spec.upper - spec.lower) / 2, 1.0)
    centre = 0.2 * (spec.lower + spec.upper) / 2 + rng.uniform(-0.2, 0.2, n) * span
    amplitude = rng.uniform(0.15, 0.45, n) * span
    omega = 2 * np.pi * rng.uniform(0.3, 0.8, n)
    phase = rng.uniform(0, 2 * np.pi, n)
    margin = 1e-3 * span
    kp = np.where(np.arange(n) < n_arm, ARM_GAINS[0], GRIPPER_GAINS[0])
    kd = np.where(np.arange(n) < n_arm, ARM_GAINS[1], GRIPPER_GAINS[1])
    bounds = spec.effort_bounds

    def goal_at(t: float) -> tuple[np.ndarray, np.ndarray]:
        goal = centre + amplitude * np.sin(omega * t + phase)
        return np.clip(goal, spec.lower + margin, spec.upper - margin), amplitude * omega * np.cos(omega * t + phase)

    data.qpos[qpos_index], data.qvel[dof_index] = goal_at(0.0)
    record = {k: np.zeros((frames, n)) for k in ("position", "velocity", "goal", "motor")}
    flank = np.zeros(n_arm)
    for k in range(frames):
        mujoco.mj_forward(model, data)
        q, qd = data.qpos[qpos_index].copy(), data.qvel[dof_index].copy()
        goal, goal_rate = goal_at(k * frame_period)
        motor = kp * (goal - q) + kd * (goal_rate - qd) + data.qfrc_bias[dof_index] - data.qfrc_passive[dof_index]
        motor = np.clip(motor, -bounds, bounds)
        joint = motor.copy()
        if actuator.has_friction:
            joint[:n_arm] -= actuator.friction(qd[:n_arm])
            # the same hysteretic flank update as id_friction.backlash_flank, one frame at a time
            flank = np.where(np.abs(qd[:n_arm]) > actuator.backlash_velocity, np.sign(qd[:n_arm]), flank)
            joint[:n_arm] += actuator.backlash * flank
        joint[condition_index] -= restriction_stiffness * (q[condition_index] - restriction_rest)
        record["position"][k], record["velocity"][k], record["goal"][k], record["motor"][k] = q, qd, goal, motor
        for step in range(substeps):
            if step:
                mujoco.mj_forward(model, data)
            data.qfrc_applied[:] = 0.0
            data.qfrc_applied[dof_index] = joint
            data.xfrc_applied[:] = 0.0
            data.xfrc_applied[body, :3] = force[k]
            data.xfrc_applied[body, 3:] = np.cross(data.site_xpos[site] - data.xipos[body], force[k])
            mujoco.mj_step(model, data)
            data.qvel[:] = np.clip(data.qvel, -MAX_JOINT_VELOCITY, MAX_JOINT_VELOCITY)
    current = record["motor"] / TORQUE_PER_AMP
    current[:, :n_arm] = (record["motor"][:, :n_arm] - actuator.offset) / actuator.slope
    current[:, :n_arm] += current_noise * rng.standard_normal((frames, n_arm))
    restricted = restriction_stiffness > 0
    meta = {"episode_id": f"synthetic_{seed}", "task": "free_motion", "payload_grams": 0.0,
            "force_source": "ft_sensor" if tool_force is not None else "none",
            "condition": f"restricted_{spec.condition_joint}" if restricted else "nominal",
            "condition_label": float(RESTRICTED if restricted else NOMINAL), "frame_count": frames,
            "duration_s": frames * frame_period, "source_bag": "", "source": "synthetic", "seed": seed,
            "operator": "synthetic", "notes": "", "complete": True, "recovered": False, "split": "", **meta}
    meta.setdefault("task_instance", f"{meta['task']}/{meta['condition']}")
    return Episode(meta=meta, columns=_columns(spec, frame_period, record, current, force,
                                                     float(meta["condition_label"]), rng),
                   info={"robot": spec.name, "joint_names": names, "condition_joints": [spec.condition_joint]},
                   spec=spec)


def _columns(spec: RobotSpec, frame_period: float, record: dict[str, np.ndarray], current: np.ndarray,
             force: np.ndarray, condition: float, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """The NAD frame columns of a simulated episode (simulator coordinates to servo-side ``ArmState`` values)."""
    frames, n_arm = current.shape[0], spec.n_arm
    gripper = spec.gripper
    slide, goal_slide = record["position"][:, n_arm], record["goal"][:, n_arm]
    per_joint = {"position": record["position"].copy(), "velocity": record["velocity"].copy(),
                 "command_position": record["goal"].copy(), "current": current,
                 "input_voltage": 12.0 + 0.05 * rng.standard_normal(current.shape),
                 "temperature": np.full(current.shape, 35.0), "pwm": np.zeros(current.shape),
                 "hardware_error": np.zeros(current.shape, np.uint8), "stale": np.zeros(current.shape, bool)}
    per_joint["position"][:, n_arm] = gripper.slide_to_angle(slide)
    per_joint["velocity"][:, n_arm] /= gripper.slope
    per_joint["command_position"][:, n_arm] = gripper.slide_to_angle(goal_slide)
    per_joint["goal_position"] = per_joint["leader_position"] = per_joint["command_position"]
    time = np.arange(frames) * frame_period
    columns: dict[str, np.ndarray] = {
        "time": time, "stamp_ns": np.round(time * 1e9).astype(np.int64), "gripper_slide": slide,
        "goal_gripper_slide": goal_slide, "command_gripper_slide": goal_slide, "leader_gripper_slide": goal_slide,
        "bus_cycle_duration": np.zeros(frames), "aligned": np.ones(frames, bool),
        "frame_valid": np.ones(frames, bool), "contact": np.linalg.norm(force, axis=1) > 0,
        f"condition_{spec.condition_joint}": np.full(frames, condition)}
    for name, values in per_joint.items():
        columns.update({f"{name}_{j}": values[:, k] for k, j in enumerate(spec.joint_names)})
    for a, axis in enumerate("xyz"):
        columns[f"force_{axis}"] = force[:, a]
        columns[f"force_valid_{axis}"] = np.ones(frames, bool)
    names = [c.name for c in build_columns(spec.joint_names, [spec.condition_joint], with_truth=False)]
    return {name: columns[name] for name in names}
