"""A simulated torque-commanded arm without a servo bus (the Franka Emika Panda), ROS-free.

Where the servo arms are simulated behind their control tables (:mod:`na_sim.rig`), an arm whose robot spec
has a ``torque_arm_<robot>.yaml`` (shipped in ``na_sim/config/`` or beside the spec on ``$NA_ROBOT_PATH``) is
simulated as its own controller runs it: every control cycle the joint angles and velocities are measured
(noise, encoder quantisation), the joint impedance law gives the commanded torque
``tau_cmd = K (q_goal - q_measured) - D dq_measured``, the robot adds gravity from its own model (which does not
know the payload) and the sum, clipped to the spec's torque limits, drives MuJoCo against the drives' friction
(in the config, not in the MJCF: the rigid-body model the observers use does not know it). The reported effort is
``tau_cmd`` (without gravity, as the Panda reports its commanded torque) with noise and quantisation, as a
fraction of the joint's torque limit (``ArmState.load``). The gripper keeps the MJCF's position actuator.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from na_description import RobotSpec
from na_description.model import joint_dof_indices, joint_qpos_indices
from na_description.yaml_file import load_yaml_mapping
from na_sim.mjcf_edit import add_payload_body, compile_edited
from na_sim.rig import GRAVITY
from na_sim.rig_config import CONFIG_DIR


class TorqueArmError(ValueError):
    """A torque-arm config that is missing, malformed or does not fit its robot spec."""


@dataclass(frozen=True)
class TorqueArmConfig:
    """``torque_arm_<robot>.yaml``: the robot's control loop and telemetry (each key commented in the shipped
    ``torque_arm_panda.yaml``)."""

    robot: str
    actuator_model: str
    control_rate_hz: float
    publish_every: int
    stiffness: np.ndarray           # N·m/rad per arm joint
    damping: np.ndarray             # N·m·s/rad per arm joint
    friction: np.ndarray            # [3, n_arm]: phi1, phi2, phi3 of the drives' friction (plant only)
    position_noise_rad: float
    position_quantum_rad: float
    velocity_noise_rad_s: float
    torque_noise_nm: float
    torque_quantum_nm: float
    input_voltage: float
    temperature_c: tuple[float, float]
    payload_offset: np.ndarray
    payload_radius: float

    @property
    def control_period(self) -> float:
        return 1.0 / self.control_rate_hz

    @classmethod
    def from_yaml(cls, path: str | Path, spec: RobotSpec) -> TorqueArmConfig:
        raw = load_yaml_mapping(path, TorqueArmError, "torque-arm config")
        try:
            config = cls(
                robot=str(raw["robot"]), actuator_model=str(raw["actuator_model"]),
                control_rate_hz=float(raw["control_rate_hz"]), publish_every=int(raw["publish_every"]),
                stiffness=np.array(raw["stiffness"], dtype=float), damping=np.array(raw["damping"], dtype=float),
                friction=np.array([raw[f"friction_phi{k}"] for k in (1, 2, 3)], dtype=float),
                position_noise_rad=float(raw["position_noise_rad"]),
                position_quantum_rad=float(raw["position_quantum_rad"]),
                velocity_noise_rad_s=float(raw["velocity_noise_rad_s"]),
                torque_noise_nm=float(raw["torque_noise_nm"]), torque_quantum_nm=float(raw["torque_quantum_nm"]),
                input_voltage=float(raw["input_voltage"]),
                temperature_c=tuple(float(v) for v in raw["temperature_c"]),
                payload_offset=np.array(raw["payload_offset"], dtype=float),
                payload_radius=float(raw["payload_radius"]))
        except KeyError as err:
            raise TorqueArmError(f"{path}: missing key {err}") from None
        except (TypeError, ValueError) as err:
            raise TorqueArmError(f"{path}: {err}") from None
        problems = []
        if config.robot != spec.name:
            problems.append(f"robot is {config.robot!r}, not {spec.name!r}")
        if config.actuator_model != spec.servo_model:
            problems.append(f"actuator_model {config.actuator_model!r} is not the spec's {spec.servo_model!r}")
        if config.stiffness.shape != (spec.n_arm,) or config.damping.shape != (spec.n_arm,) \
                or config.friction.shape != (3, spec.n_arm):
            problems.append(f"stiffness, damping and friction_phi1..3 need {spec.n_arm} values (arm joints)")
        period = config.control_period * config.publish_every
        if config.publish_every < 1 or abs(period - spec.frame_period) > 1e-9:
            problems.append(f"publish_every x control period = {period} s, the spec's frame is {spec.frame_period} s")
        if len(config.temperature_c) != 2 or config.payload_offset.shape != (3,):
            problems.append("temperature_c needs [low, high] and payload_offset 3 values (m)")
        if problems:
            raise TorqueArmError(f"{path}: " + "; ".join(problems))
        return config


def torque_arm_config_path(spec: RobotSpec) -> Path | None:
    """The robot's ``torque_arm_<name>.yaml`` (shipped, else beside its spec), None for a servo arm."""
    candidates = [CONFIG_DIR / f"torque_arm_{spec.name}.yaml"]
    if spec.source is not None:
        candidates.append(spec.source.parent / f"torque_arm_{spec.name}.yaml")
    return next((path for path in candidates if path.is_file()), None)


def is_torque_arm(spec: RobotSpec) -> bool:
    """Whether ``spec``'s arm is simulated as a torque-commanded arm (no servo bus, no rig config)."""
    return torque_arm_config_path(spec) is not None


def load_torque_arm_config(spec: RobotSpec) -> TorqueArmConfig:
    path = torque_arm_config_path(spec)
    if path is None:
        raise TorqueArmError(f"robot '{spec.name}' has no torque_arm_{spec.name}.yaml (in {CONFIG_DIR} or beside "
                             "its spec)")
    return TorqueArmConfig.from_yaml(path, spec)


def _build_model(spec: RobotSpec, config: TorqueArmConfig) -> mujoco.MjModel:
    """The spec's MJCF with a payload body at the tool point, compiled through load_model() (limits applied)."""
    mj = mujoco.MjSpec.from_file(str(spec.mjcf_path))
    add_payload_body(mj, spec, config.payload_offset, config.payload_radius, mass=0.0)
    model = compile_edited(mj, spec, "na_sim_torque_arm_", contacts=False)
    model.opt.timestep = config.control_period
    return model


@dataclass(frozen=True)
class TorqueArmReading:
    """One control cycle's measured state and report, spec order (gripper: normalised command units)."""

    position: np.ndarray            # rad (gripper: the gripper map's angle of the measured slide)
    velocity: np.ndarray            # rad/s (gripper: the same units per second)
    effort: np.ndarray              # reported commanded torque as a fraction of each joint's limit (gripper: force)
    gripper_slide: float            # m


class TorqueArm:
    """One simulated torque-commanded arm with its controller; :meth:`step` runs one control cycle."""

    def __init__(self, spec: RobotSpec, config: TorqueArmConfig | None = None, seed: int = 0) -> None:
        self.spec = spec
        self.config = config or load_torque_arm_config(spec)
        self.model = _build_model(spec, self.config)
        self.nominal = _build_model(spec, self.config)      # the robot's own model: never holds the payload
        self.data, self.nominal_data = mujoco.MjData(self.model), mujoco.MjData(self.nominal)
        names = spec.joint_names
        self._qpos = joint_qpos_indices(self.model, names)
        self._dof = joint_dof_indices(self.model, names)
        self._actuator = np.array([mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_ACTUATOR, n) for n in names])
        self.n_arm, self.g = spec.n_arm, spec.gripper_index
        arm_actuators = self._actuator[: self.n_arm]
        self.model.actuator_gainprm[arm_actuators] = 0.0     # the arm is driven by qfrc_applied (the controller)
        self.model.actuator_biasprm[arm_actuators] = 0.0
        self._payload = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "payload")
        self.limits = spec.effort_bounds[: self.n_arm]
        self.rng = np.random.default_rng(seed)
        self.payload_kg = 0.0
        self.temperature = float(np.mean(self.config.temperature_c))
        self.commanded_torque = np.zeros(self.n_arm)

    def reset(self, pose: np.ndarray, seed: int) -> None:
        """At rest at ``pose`` (spec order; gripper in command units), no payload; the episode's noise seed."""
        self.rng = np.random.default_rng([seed, 0x7A])
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[self._qpos] = self.spec.to_sim_coordinates(pose)
        self.set_payload(None)
        self.temperature = float(self.rng.uniform(*self.config.temperature_c))
        self.commanded_torque = np.zeros(self.n_arm)
        mujoco.mj_forward(self.model, self.data)

    def set_payload(self, mass_kg: float | None) -> None:
        """Attach a payload of ``mass_kg`` at the tool (a grasp) or release it (None or 0)."""
        mass = float(mass_kg or 0.0)
        self.model.body_mass[self._payload] = mass
        self.model.body_inertia[self._payload] = 0.4 * mass * self.config.payload_radius ** 2
        self.payload_kg = mass

    def _gravity(self, q: np.ndarray) -> np.ndarray:
        """Gravity torque of the robot's own model (no payload) at ``q``."""
        data = self.nominal_data
        data.qpos[:] = self.data.qpos
        data.qpos[self._qpos[: self.n_arm]] = q
        data.qvel[:] = 0.0
        mujoco.mj_forward(self.nominal, data)
        return data.qfrc_bias[self._dof[: self.n_arm]].copy()

    def friction(self, velocity: np.ndarray) -> np.ndarray:
        """The drives' friction torque at joint velocity ``velocity`` (Gaz et al.'s sigmoid model, zero at rest)."""
        phi1, phi2, phi3 = self.config.friction
        return phi1 / (1.0 + np.exp(-phi2 * (velocity + phi3))) - phi1 / (1.0 + np.exp(-phi2 * phi3))

    def measure(self) -> tuple[np.ndarray, np.ndarray]:
        """Measured arm joint angles (noise, then encoder quantisation) and velocities (rad, rad/s)."""
        c, n = self.config, self.n_arm
        q = self.data.qpos[self._qpos[:n]] + self.rng.normal(0.0, c.position_noise_rad, n)
        q = np.round(q / c.position_quantum_rad) * c.position_quantum_rad
        return q, self.data.qvel[self._dof[:n]] + self.rng.normal(0.0, c.velocity_noise_rad_s, n)

    def step(self, goal: np.ndarray) -> TorqueArmReading:
        """One control cycle towards ``goal`` (spec order, gripper in command units): measure, command, advance.
        The reading is the state measured at the start of the cycle and the torque commanded from it."""
        c, n = self.config, self.n_arm
        q, dq = self.measure()
        tau = c.stiffness * (np.asarray(goal[:n], dtype=float) - q) - c.damping * dq
        gravity = self._gravity(q)
        applied = np.clip(tau + gravity, -self.limits, self.limits)
        self.commanded_torque = applied - gravity
        reported = self.commanded_torque + self.rng.normal(0.0, c.torque_noise_nm, n)
        reported = np.round(reported / c.torque_quantum_nm) * c.torque_quantum_nm
        slide = float(self.data.qpos[self._qpos[self.g]]) if self.g is not None else float("nan")
        slide_velocity = float(self.data.qvel[self._dof[self.g]]) if self.g is not None else 0.0
        position, velocity, effort = np.zeros(self.spec.n_motors), np.zeros(self.spec.n_motors), \
            np.zeros(self.spec.n_motors)
        position[:n], velocity[:n], effort[:n] = q, dq, reported / self.limits
        if self.g is not None:
            grip = self.spec.gripper
            position[self.g] = float(grip.slide_to_angle(slide))
            velocity[self.g] = slide_velocity / grip.slope
            effort[self.g] = float(self.data.actuator_force[self._actuator[self.g]]) / self.spec.effort_bounds[self.g]
            self.data.ctrl[self._actuator[self.g]] = float(grip.angle_to_slide(goal[self.g]))
        self.data.qfrc_applied[:] = 0.0
        self.data.qfrc_applied[self._dof[:n]] = applied - self.friction(self.data.qvel[self._dof[:n]])
        mujoco.mj_step(self.model, self.data)
        return TorqueArmReading(position, velocity, effort, slide)

    def payload_force(self) -> np.ndarray:
        """The known-payload label: the held weight [0, 0, -m g] in the base frame (N)."""
        return np.array([0.0, 0.0, -self.payload_kg * GRAVITY])
