"""The simulated rig, ROS-free: a MuJoCo follower arm driven by servo models, a kinematic leader
arm, payloads, an F/T fixture, the restricted joint and the ground truth.

The rig config names the robot (``robot:``, its spec from ``na_description``) and the servo
physics (``servo_config``, whose ``family`` picks the firmware and control table:
:mod:`na_sim.sim_family`); nothing here names a joint or a servo family.

* Follower: the robot's MJCF plus a tool collider, a payload body and a mocap fixture. Each joint
  gets the torque its servo's output shaft delivers (:func:`~na_sim.servo_banks.make_servo_bank`),
  which tracks the goals in the follower's registers. MuJoCo's own joint damping/friction loss
  are zeroed: the servo model carries the friction.
* Leader: torque off and moved by the operator (kinesthetic teaching). It has no dynamics, only
  registers: present position/velocity from the operator's pose, current near zero.
* Both arms' control tables are the family's emulated tables in spec order with the spec's servo
  IDs (XM430: :class:`~na_sim.servo_table.SimulatedServoRegisters`, served by the Protocol 2.0
  emulator; STS3215: :class:`~na_sim.sts_registers.StsServoRegisters`, Protocol 0); every access
  holds the servo's ``lock``.

Coordinates: poses given to and read from the rig are joint side (rad) in spec order with the
gripper as its servo angle, as in ``ArmState``; MuJoCo holds the gripper as the finger slide (m).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

import mujoco
import numpy as np

from na_common.episode_bag import NOMINAL_CONDITION, restricted_condition
from na_common.fixture import FixturePose
from na_description import load_spec
from na_description.model import joint_dof_indices, joint_qpos_indices
from na_description.spec import RobotSpec
from na_sim.mjcf_edit import add_payload_body, compile_edited
from na_sim.rig_config import RigConfig, RigConfigError, parse_fixture
from na_sim.servo_banks import make_servo_bank
from na_sim.servo_model import ServoBank
from na_sim.servo_params import ServoParams, SupplyBus
from na_sim.sim_family import sim_family

GRAVITY = 9.81                      # m/s², the payload label of docs/INTERFACES.md
PARKED_FIXTURE = np.array([0.0, 0.0, -10.0])   # where the fixture waits when the episode has none

CONDITION_NOMINAL = NOMINAL_CONDITION


@dataclass(frozen=True)
class RigTruth:
    """Ground truth after the last step or episode change (set_payload/set_fixture/...); arrays are copies."""

    time: float                     # s of simulated time since reset
    force_base: np.ndarray          # (3,) N, force the environment exerts on the tool, base frame:
                                    #   fixture contact + payload weight (docs/INTERFACES.md sign)
    contact_force_base: np.ndarray  # (3,) N, the fixture-contact part of force_base
    contact: bool                   # the tool touches the fixture
    sensor_wrench: np.ndarray       # (6,) N, N·m: wrench the tool applies to the F/T sensor, sensor frame
    payload_kg: float               # 0.0 when nothing is held
    grasp: bool                     # a payload is attached
    condition: str                  # "nominal" | "restricted_<the spec's condition_joint>"
    joint_position: np.ndarray      # (n_motors,) follower, joint side (gripper: servo angle, rad)
    joint_velocity: np.ndarray      # (n_motors,) rad/s
    servo_torque: np.ndarray        # (n_motors,) N·m, torque each follower servo's output shaft delivers
    fixture: FixturePose | None     # the fixture pose of this episode


def _build_model(spec: RobotSpec, config: RigConfig) -> mujoco.MjModel:
    """The spec's MJCF plus tool collider, payload body and fixture, compiled through load_model()."""
    mj = mujoco.MjSpec.from_file(str(spec.mjcf_path))
    for geom in mj.geoms:                       # only tool <-> fixture contacts exist in the rig
        geom.contype, geom.conaffinity = 0, 0
    tool = mj.site(spec.tool_site)
    tool_body = tool.parent
    tool_body.add_geom(name="tool_collider", type=mujoco.mjtGeom.mjGEOM_SPHERE,
                       size=[config.tool_collider_radius, 0, 0], pos=list(tool.pos), contype=2, conaffinity=2,
                       friction=[config.fixture_friction, 0.005, 0.0001], rgba=[0.9, 0.2, 0.2, 1])
    add_payload_body(mj, spec, config.payload_offset, config.payload_radius, rgba=[0.2, 0.4, 0.9, 0.4])
    fixture = mj.worldbody.add_body(name="ft_fixture", mocap=True, pos=list(PARKED_FIXTURE))
    fixture.add_geom(name="ft_fixture_geom", type=mujoco.mjtGeom.mjGEOM_BOX, size=list(config.fixture_half_size),
                     contype=2, conaffinity=2, friction=[config.fixture_friction, 0.005, 0.0001],
                     rgba=[0.3, 0.7, 0.3, 1])
    fixture.add_site(name="ft_sensor", size=[0.005, 0, 0])
    return compile_edited(mj, spec, "na_sim_rig_")


class Rig:
    """Leader and follower arm, payload, fixture and restriction; see the module docstring.

    ``step(dt)`` advances the physics by ``dt`` (default one rig timestep, ``timestep_s``) in MuJoCo
    steps no longer than the timestep; registers are read once at the start and written once at
    the end of each call. All public methods are thread-safe (``lock``).
    """

    def __init__(self, config: RigConfig | None = None, seed: int = 0, spec: RobotSpec | None = None) -> None:
        self.config = config or RigConfig.from_yaml()
        self.spec = spec or load_spec(self.config.robot)
        if self.spec.name != self.config.robot:
            raise RigConfigError(f"rig config is for robot '{self.config.robot}', the spec is '{self.spec.name}': "
                                 f"use that robot's rig config (robot: {self.spec.name})")
        self.family = sim_family(self.config.servo_family, self.spec)
        self.lock = threading.RLock()
        self.seed = int(seed)
        cfg, spec = self.config, self.spec
        names = spec.joint_names
        self.model = _build_model(spec, cfg)
        self.model.opt.timestep = cfg.timestep_s
        self.data = mujoco.MjData(self.model)
        self._qpos = joint_qpos_indices(self.model, names)
        self._dof = joint_dof_indices(self.model, names)
        self._jnt = np.array([mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_JOINT, n) for n in names])
        self._qpos_slice = self._as_slice(self._qpos)
        self._dof_slice = self._as_slice(self._dof)
        # Servo shaft angle = A * MuJoCo coordinate + B (affine through the spec's maps);
        # MuJoCo generalized force = A * shaft torque (virtual work).
        self._gripper = [k for k, j in enumerate(spec.joints) if j.type == "gripper"]
        self._joint_direction = np.array([j.drive_direction for j in spec.joints], dtype=float)
        zero, one = np.zeros(spec.n_motors), np.ones(spec.n_motors)
        self._b = self.servo_from_sim(zero)
        self._a = self.servo_from_sim(one) - self._b
        self._joint_offset = self.joint_from_sim(zero)                  # joint side = scale * q_sim + offset
        self._joint_scale = self.joint_from_sim(one) - self._joint_offset
        self.model.dof_damping[self._dof] = 0.0
        self.model.dof_frictionloss[self._dof] = 0.0
        # Damping per joint from outside the servo (the restriction's rubber bands); each physics step adds the
        # servo's own speed dependence to it, which MuJoCo's Euler integrator then applies implicitly.
        self._environment_damping = np.zeros(spec.n_motors)
        self._torque_change = np.zeros((1, self.model.nv))           # scratch for the servo step's prediction
        self._acceleration_change = np.zeros((1, self.model.nv))
        self._a_squared = np.square(self._a)                         # servo damping -> MuJoCo joint damping
        self.model.dof_armature[self._dof] = cfg.reflected_inertia * self._a_squared
        self._grip_qpos = int(self._qpos[self._gripper[0]])
        self._grip_dof = int(self._dof[self._gripper[0]])
        self._grasp_stop: float | None = None       # slide where a held object stops the finger
        self._restricted_joint = names.index(spec.condition_joint)
        self.restricted_condition = restricted_condition(spec.condition_joint)
        self._tool_geom = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, "tool_collider")
        self._fixture_geom = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_GEOM, "ft_fixture_geom")
        self._fixture_body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "ft_fixture")
        self._fixture_mocap = self.model.body_mocapid[self._fixture_body]
        self._payload_body = mujoco.mj_name2id(self.model, mujoco.mjtObj.mjOBJ_BODY, "payload")
        self._contact_force = np.zeros(6)

        self.leader_registers = [self.family.make_registers(sid) for sid in spec.servo_ids]
        self.follower_registers = [self.family.make_registers(sid) for sid in spec.servo_ids]
        n = spec.n_motors
        follower_params = ServoParams.from_yaml(cfg.servo_config, n, seed=self.seed).worn(cfg.follower_wear)
        leader_params = ServoParams.from_yaml(cfg.servo_config, n, seed=self.seed + 7919)
        self._rng = np.random.default_rng(self.seed)
        self.follower = make_servo_bank(follower_params, self._bus(), self._rng, cfg.ambient_temperature)
        self.leader = make_servo_bank(leader_params, self._bus(), self._rng, cfg.ambient_temperature)
        self._leader_noise = np.full(n, cfg.leader_current_noise)
        self.time, self.payload_kg, self.fixture, self.restricted = 0.0, 0.0, None, False
        self._servo_torque = np.zeros(n)
        self.reset(self.seed)

    # ---- coordinates -------------------------------------------------------------------------
    @staticmethod
    def _as_slice(index: np.ndarray) -> slice | np.ndarray:
        contiguous = np.array_equal(index, np.arange(index[0], index[0] + len(index)))
        return slice(int(index[0]), int(index[0]) + len(index)) if contiguous else index

    def _bus(self) -> SupplyBus:
        cfg = self.config
        return SupplyBus(cfg.supply_voltage, cfg.supply_resistance, cfg.supply_filter_time)

    def joint_from_sim(self, q_sim) -> np.ndarray:
        """MuJoCo coordinates (gripper slide, m) -> joint side (gripper servo angle, rad)."""
        q = np.array(q_sim, dtype=float)
        for k in self._gripper:
            q[..., k] = self.spec.gripper.slide_to_angle(q[..., k])
        return q

    def servo_from_sim(self, q_sim) -> np.ndarray:
        """MuJoCo coordinates -> servo shaft angles (rad, 0 = 2048 pulses)."""
        return self.spec.joint_to_servo(self.joint_from_sim(q_sim))

    # ---- episode setup -----------------------------------------------------------------------
    def reset(self, seed: int | None = None, pose=None) -> None:
        """Rest at ``pose`` (joint side, default ``initial_pose``): no payload, no fixture, no restriction.

        ``seed`` re-seeds the sensor noise and the servos' starting temperatures; the servos'
        individual parameters stay (same hardware). Register configuration (modes, gains, torque
        enable, latched errors) is kept; Goal Position is set to the present position.
        """
        with self.lock:
            cfg = self.config
            if seed is not None:
                self._rng = np.random.default_rng(seed)
                self.follower.rng = self.leader.rng = self._rng
            pose = np.asarray(cfg.initial_pose if pose is None else pose, dtype=float)
            self._check_pose(pose)
            mujoco.mj_resetData(self.model, self.data)
            self.data.qpos[self._qpos] = self.spec.to_sim_coordinates(pose)
            mujoco.mj_forward(self.model, self.data)
            self.time = 0.0
            self._servo_torque = np.zeros(self.spec.n_motors)
            self.set_payload(None)
            self.set_fixture(None)
            self.set_restriction(False)
            low, high = cfg.initial_warmup
            theta = self.spec.joint_to_servo(pose)
            for bank in (self.follower, self.leader):
                warm = cfg.ambient_temperature + self._rng.uniform(low, high, bank.n)
                bank.reset(temperature=warm, theta=theta)
            self._leader_theta = theta.copy()
            self._leader_omega = np.zeros_like(theta)
            self._leader_target = theta.copy()
            self._leader_velocity = None
            for bank, registers in ((self.follower, self.follower_registers), (self.leader, self.leader_registers)):
                bank.load_registers(registers)
                self._store(bank, registers)
                goals = np.rint(bank.position_pulses).astype(np.int64).tolist()
                for regs, goal in zip(registers, goals, strict=True):
                    regs.set("goal_position", goal)
            self._truth = self._compute_truth()

    def configure_follower(self, torque: bool = True) -> None:
        """Write what the arm driver writes before teleoperation: mode and gains from ``follower_setup``,
        Goal Position = Present Position, then Torque Enable (for offline use without a driver)."""
        cfg = self.config
        p_gain, i_gain, d_gain = self.family.gain_registers
        with self.lock:
            for k, regs in enumerate(self.follower_registers):
                with regs.lock:
                    regs.set("torque_enable", 0)
                    regs.set("operating_mode", cfg.follower_mode)
                    regs.set(p_gain, cfg.follower_p_gain[k])
                    regs.set(i_gain, cfg.follower_i_gain[k])
                    regs.set(d_gain, cfg.follower_d_gain[k])
                    regs.set("goal_position", regs.get("present_position"))
                    regs.set("torque_enable", int(torque))

    def set_leader_pose(self, q_joint, velocity=None) -> None:
        """The operator's leader pose (joint side, gripper servo angle); it is reached at the next step.

        ``velocity`` (rad/s, joint side) if known; otherwise it is the finite difference over the step.
        """
        q = np.asarray(q_joint, dtype=float)
        self._check_pose(q)
        with self.lock:
            self._leader_target = self.spec.joint_to_servo(q)
            self._leader_velocity = None if velocity is None else \
                self._joint_direction * np.asarray(velocity, dtype=float)

    def set_follower_goal(self, q_joint) -> None:
        """Convenience for offline use: write Goal Position (the family's steps) for a joint-side pose."""
        q = np.asarray(q_joint, dtype=float)
        self._check_pose(q)
        shaft = self.spec.joint_to_servo(q)
        with self.lock:
            for regs, angle in zip(self.follower_registers, shaft.tolist(), strict=True):
                with regs.lock:
                    regs.set("goal_position", self.family.goal_value(regs, angle))

    def set_payload(self, mass_kg: float | None) -> None:
        """Attach a payload of ``mass_kg`` at the tool (a grasp) or release it (None or 0)."""
        if mass_kg is not None and (not np.isfinite(mass_kg) or mass_kg < 0):
            raise ValueError(f"payload mass must be a finite number >= 0 kg, got {mass_kg!r}")
        mass = float(mass_kg or 0.0)
        with self.lock:
            self.model.body_mass[self._payload_body] = mass
            self.model.body_inertia[self._payload_body] = 0.4 * mass * self.config.payload_radius ** 2
            self.payload_kg = mass
            # The held object stops the closing finger (at most where the finger is now): the gripper
            # squeezes a compliant object instead of reaching its goal.
            slide = float(self.data.qpos[self._grip_qpos])
            self._grasp_stop = min(self.config.grasp_stop_slide, slide) if mass > 0 else None
            self._truth = self._compute_truth()

    def set_fixture(self, pose) -> None:
        """Place the F/T fixture (``{position, rpy}`` in the base frame) or remove it (None)."""
        with self.lock:
            if pose is None:
                self.fixture = None
                self.data.mocap_pos[self._fixture_mocap] = PARKED_FIXTURE
                self.data.mocap_quat[self._fixture_mocap] = (1.0, 0.0, 0.0, 0.0)
            else:
                self.fixture = parse_fixture(pose)
                quat = np.zeros(4)
                mujoco.mju_mat2Quat(quat, self.fixture.rotation.ravel())
                self.data.mocap_pos[self._fixture_mocap] = self.fixture.position
                self.data.mocap_quat[self._fixture_mocap] = quat
            mujoco.mj_forward(self.model, self.data)
            self._truth = self._compute_truth()

    def fixture_face(self, push: str) -> tuple[np.ndarray, np.ndarray]:
        """Where the tool point touches the fixture when pushing along ``push`` ('+x' ... '-z', sensor frame).

        Returns (tool point at first touch, unit push direction), both in the base frame.
        """
        if self.fixture is None:
            raise RuntimeError("no fixture placed (set_fixture first)")
        if len(push) != 2 or push[0] not in "+-" or push[1] not in "xyz":
            raise ValueError(f"push must be one of +x -x +y -y +z -z, got {push!r}")
        axis, sign = "xyz".index(push[1]), 1.0 if push[0] == "+" else -1.0
        rotation = self.fixture.rotation
        direction = sign * rotation[:, axis]
        standoff = self.config.fixture_half_size[axis] + self.config.tool_collider_radius
        return np.asarray(self.fixture.position) - standoff * direction, direction

    def set_restriction(self, on: bool) -> None:
        """Rubber bands across the spec's condition joint (OpenManipulator-X: joint3, SO-101: elbow_flex),
        the ``restriction`` section of the rig config: extra spring toward ``rest_angle``, damping, friction."""
        cfg = self.config
        k = self._restricted_joint
        with self.lock:
            jid, dof, qadr = self._jnt[k], self._dof[k], self._qpos[k]
            self.restricted = bool(on)
            self.model.jnt_stiffness[jid] = cfg.restriction_stiffness if on else 0.0
            self.model.qpos_spring[qadr] = cfg.restriction_rest_angle
            self._environment_damping[k] = cfg.restriction_damping if on else 0.0
            self.model.dof_damping[dof] = self._environment_damping[k]
            self.model.dof_frictionloss[dof] = cfg.restriction_friction if on else 0.0
            self._truth = self._compute_truth()

    set_joint3_restriction = set_restriction     # the OpenManipulator-X's name of it

    def set_supply_voltage(self, volts: float) -> None:
        """Fault injection: change the follower's supply voltage (the bus still sags under load)."""
        if not np.isfinite(volts) or volts < 0:
            raise ValueError(f"supply voltage must be >= 0 V, got {volts!r}")
        with self.lock:
            self.follower.bus.nominal_voltage = float(volts)

    def on_clear(self, registers) -> None:
        """Hook for the bus emulator (``DxlBusEmulator(on_clear=rig.on_clear)``): a multi-turn Clear
        reached one of this rig's servos, so its position frame loses whole turns."""
        with self.lock:
            for bank, arm in ((self.follower, self.follower_registers), (self.leader, self.leader_registers)):
                for index, candidate in enumerate(arm):
                    if candidate is registers:
                        shift = round(bank.clear_multi_turn(index))
                        with registers.lock:
                            registers.set("goal_position", registers.get("goal_position") - shift)
                        bank.store_registers(arm, self._leader_noise if bank is self.leader else None)

    @property
    def condition(self) -> str:
        return self.restricted_condition if self.restricted else CONDITION_NOMINAL

    # ---- stepping ----------------------------------------------------------------------------
    def step(self, dt: float | None = None, registers: bool = True, pause_s: float = 0.0) -> RigTruth:
        """Advance by ``dt`` s (default one timestep) and return the ground truth.

        ``registers=False`` skips the register exchange of this call (goals are not re-read, present
        values not written): for offline loops that step several times between two bus reads; the
        call before a read must exchange them. Each exchange costs about as much as two MuJoCo steps.
        ``pause_s`` > 0: sleep this long after each MuJoCo step but the last (:class:`RealtimeRunner`).
        """
        timestep = self.config.timestep_s
        dt = timestep if dt is None else float(dt)
        if not dt > 0:
            raise ValueError(f"dt must be positive, got {dt}")
        substeps = max(1, int(np.ceil(dt / timestep - 1e-9)))
        h = dt / substeps
        model, data, a, b = self.model, self.data, self._a, self._b
        qs, ds = self._qpos_slice, self._dof_slice
        with self.lock:
            model.opt.timestep = h
            if registers:
                self.follower.load_registers(self.follower_registers)
                self.leader.load_registers(self.leader_registers)
            follower, a2 = self.follower, self._a_squared
            for substep in range(substeps):
                speed = a * data.qvel[ds]
                torque = follower.step(a * data.qpos[qs] + b, speed, h)
                # The servos' torques linearised about a reference speed (ServoBank.linearise), the slope applied
                # as damping, which MuJoCo's Euler integrator treats implicitly. Whether a shaft is about to
                # reverse: its speed at the end of this step if only the servos' torques changed since the last
                # one (through the last step's factorised inertia).
                self._torque_change[0, ds] = a * (torque - self._servo_torque)
                mujoco.mj_solveM(model, data, self._acceleration_change, self._torque_change)
                follower.linearise(speed, speed + h * a * (data.qacc[ds] + self._acceleration_change[0, ds]))
                data.qfrc_applied[ds] = a * (follower.reference_torque + follower.damping * follower.reference_speed)
                model.dof_damping[ds] = self._environment_damping + a2 * follower.damping
                if self._grasp_stop is not None:
                    data.qfrc_applied[self._grip_dof] += self._object_force()
                mujoco.mj_step(model, data)
                if pause_s > 0 and substep < substeps - 1:
                    time.sleep(pause_s)
                self._servo_torque = follower.reference_torque + follower.damping * (
                    follower.reference_speed - a * data.qvel[ds])
            self._step_leader(dt)
            self.time += dt
            if registers:
                self._store(self.follower, self.follower_registers)
                self._store(self.leader, self.leader_registers, self._leader_noise)
            self._truth = self._compute_truth()
            return self._truth

    def advance(self, seconds: float) -> RigTruth:
        """Step for ``seconds`` (rounded to whole timesteps) in data-frame chunks (the spec's frame period)."""
        remaining = max(1, round(seconds / self.config.timestep_s))
        chunk = max(1, round(self.spec.frame_period / self.config.timestep_s))
        while remaining > 0:
            steps = min(chunk, remaining)
            truth = self.step(steps * self.config.timestep_s)
            remaining -= steps
        return truth

    def _object_force(self) -> float:
        """One-sided spring-damper of a held object between the fingers (N on the slide)."""
        depth = self._grasp_stop - self.data.qpos[self._grip_qpos]
        if depth <= 0:
            return 0.0
        cfg = self.config
        return cfg.grasp_stiffness * depth - cfg.grasp_damping * min(self.data.qvel[self._grip_dof], 0.0)

    def _step_leader(self, dt: float) -> None:
        target = self._leader_target
        velocity = self._leader_velocity
        omega = (target - self._leader_theta) / dt if velocity is None else velocity
        self._leader_omega = omega
        self._leader_theta = target.copy()
        self.leader.follow(target, omega, dt)

    @staticmethod
    def _store(bank: ServoBank, registers, noise=None) -> None:
        bank.store_registers(registers, noise)

    def _check_pose(self, q: np.ndarray) -> None:
        if q.shape != (self.spec.n_motors,) or not np.all(np.isfinite(q)):
            raise ValueError(f"pose needs {self.spec.n_motors} finite values (joint side), got {q!r}")

    # ---- ground truth ------------------------------------------------------------------------
    @property
    def truth(self) -> RigTruth:
        return self._truth

    def _compute_truth(self) -> RigTruth:
        model, data = self.model, self.data
        on_fixture = np.zeros(3)           # force the tool applies to the fixture, world frame
        torque_at_sensor = np.zeros(3)
        sensor_position = data.xpos[self._fixture_body]
        touching = False
        for i in range(data.ncon):         # only tool <-> fixture contacts exist (contype 2)
            contact = data.contact[i]
            pair = (contact.geom1, contact.geom2)
            if self._tool_geom not in pair or self._fixture_geom not in pair:
                continue
            touching = True
            mujoco.mj_contactForce(model, data, i, self._contact_force)
            # Contact frame rows: normal (geom1 -> geom2) and two tangents; the force acts on geom2.
            force = contact.frame.reshape(3, 3).T @ self._contact_force[:3]
            if contact.geom2 != self._fixture_geom:
                force = -force
            on_fixture += force
            torque_at_sensor += np.cross(contact.pos - sensor_position, force)
        if touching:
            rotation = data.xmat[self._fixture_body].reshape(3, 3)
            wrench = np.concatenate([rotation.T @ on_fixture, rotation.T @ torque_at_sensor])
        else:
            wrench = np.zeros(6)
        contact_force = -on_fixture
        force = contact_force.copy()
        force[2] -= self.payload_kg * GRAVITY
        return RigTruth(
            time=self.time,
            force_base=force,
            contact_force_base=contact_force,
            contact=touching,
            sensor_wrench=wrench,
            payload_kg=self.payload_kg,
            grasp=self.payload_kg > 0,
            condition=self.condition,
            joint_position=self._joint_scale * data.qpos[self._qpos_slice] + self._joint_offset,
            joint_velocity=self._joint_scale * data.qvel[self._dof_slice],
            servo_torque=self._servo_torque.copy(),
            fixture=self.fixture,
        )
