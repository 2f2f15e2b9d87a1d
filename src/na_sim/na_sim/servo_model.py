"""Physics of DYNAMIXEL XM430-W350 servos in the loop: firmware controller, DC motor, gearbox,
friction, backlash, heat, supply sag, sensors and hardware-error protection. ROS-free.

One :class:`ServoBank` simulates all servos of one arm at once (numpy arrays of length n, no
per-servo Python loops) so that the offline generator runs many times faster than real time.
Angles here are *servo shaft* angles (rad, 0 = 2048 pulses, before the Drive Mode and Homing
Offset registers); torques are at the output shaft (N·m).

Firmware (ROBOTIS e-manual, XM430-W350 "Position P/I/D Gain"; docs/REFERENCES.md, XM430-W350): the position PID works
on pulses with KPP = P/128, KPI = I/65536, KPD = D/16 per firmware control period and outputs
PWM units (885 = 100 % duty), limited by PWM Limit; in current-based position mode the same
output is a current in 2.69 mA units limited by Goal Current. Every constant of the motor,
gearbox, friction and heat model lives in ``na_sim/config/servo_xm430.yaml``.

Servo families: the YAML's top-level ``family`` (default ``xm430``) picks the firmware and control
table around the same motor, gearbox and heat model; :func:`na_sim.servo_banks.make_servo_bank` builds the
bank of that family (``sts3215``: :class:`na_sim.sts_servo_model.StsServoBank`). Parameters:
:mod:`na_sim.servo_params`; the control table as the physics reads it: :mod:`na_sim.servo_table`.
"""

from __future__ import annotations

import numpy as np

from na_description import xm430
from na_sim.servo_params import ServoParams, SupplyBus
from na_sim.servo_table import (
    CONTROL_TABLE_DTYPE,
    GOAL_BLOCK_START,
    MODE_CURRENT,
    MODE_CURRENT_POSITION,
    MODE_POSITION,
    MODE_PWM,
    MODE_VELOCITY,
    PROFILE_ACCEL_UNIT_RAD_S2,
    PULSES_PER_RAD,
    SENSOR_BLOCK_DTYPE,
    SENSOR_BLOCK_LENGTH,
    SENSOR_BLOCK_START,
    SENSOR_REGISTERS,
    VELOCITY_UNIT_RAD_S,
    SimulatedServoRegisters,
)


class ServoBank:
    """n XM430-W350 servos: the firmware's control loop, the motor and gearbox, heat and sensors.

    Per control frame: :meth:`load_registers` (goals, gains, limits, torque enable), then
    :meth:`step` once per physics step (returns the output torque for the shaft angle/speed the
    physics reports), then :meth:`store_registers` (present values, hardware errors). A leader arm
    (torque off, moved by hand) uses :meth:`follow` instead of :meth:`step`.
    """

    HOUSEKEEPING_PERIOD_S = 0.01   # assumed period of the firmware's thermal/overload/voltage checks
    GEAR_RATIO = xm430.GEAR_RATIO
    DUTY_FULL_SCALE = xm430.PWM_FULL_SCALE   # firmware output units at 100 % duty

    def __init__(self, params: ServoParams, bus: SupplyBus, rng: np.random.Generator,
                 ambient_temperature: float = 25.0) -> None:
        self.p = params
        self.bus = bus
        self.rng = rng
        self.ambient = float(ambient_temperature)
        n = params.n
        self.n = n
        self.gear_ratio = self.GEAR_RATIO
        self._joule_energy = np.zeros(n)
        self._housekeeping_elapsed = 0.0
        # Constants derived once from the parameters (keeps the per-step work small).
        self._half_gap = 0.5 * params.backlash_rad
        self._half_gap_tolerance = self._half_gap - 1e-12
        self._inv_blend = 1.0 / params.direction_blend_rad_s
        self._backdrive_gain = 1.0 / params.efficiency_backward - params.efficiency_forward
        self._static_excess = params.static_nm - params.coulomb_nm
        self._inv_stribeck = 1.0 / params.stribeck_velocity_rad_s
        self._inv_smoothing = 1.0 / params.smoothing_velocity_rad_s
        self._standby_total = float(np.sum(params.standby_current_a))
        self._last_config: bytes | None = None
        self._last_goals: bytes | None = None
        self._register_errors = np.zeros(n, dtype=np.int64)
        self._register_torque = np.zeros(n, dtype=np.int64)
        self.position_limits = (np.zeros(n), np.full(n, 4095.0))
        self._sensor_record = np.zeros(n, dtype=SENSOR_BLOCK_DTYPE)
        self._sensor_views = [self._sensor_record[name] for name in SENSOR_REGISTERS]   # field views, made once
        self._current_target = np.zeros(n)
        # Register-derived commands (refreshed by load_registers).
        self.torque_on = np.zeros(n, dtype=bool)
        self.mode = np.full(n, MODE_POSITION)
        self.direction = np.ones(n)
        self.homing = np.zeros(n)
        self.goal_position = np.full(n, float(xm430.POSITION_CENTER))
        self.goal_current = np.zeros(n)
        self.goal_pwm = np.zeros(n)
        self.goal_velocity = np.zeros(n)
        self.kp, self.ki, self.kd = np.full(n, 800 / 128), np.zeros(n), np.zeros(n)
        self.kvp, self.kvi = np.full(n, 100 / 128), np.full(n, 1920 / 65536)
        self.kff1, self.kff2 = np.zeros(n), np.zeros(n)
        self.pwm_limit = np.ones(n)
        self.current_limit = np.full(n, 1193 * xm430.CURRENT_UNIT_A)
        self.voltage_min, self.voltage_max = np.full(n, 9.5), np.full(n, 16.0)
        self.temperature_limit = np.full(n, 80.0)
        self.shutdown_mask = np.zeros(n, dtype=np.int64)
        self.profile_velocity = np.zeros(n)      # pulses/s, 0 = none
        self.profile_acceleration = np.zeros(n)  # pulses/s^2, 0 = none
        self.moving_threshold = np.full(n, 10.0)  # velocity units
        self.turn_offset = np.zeros(n)
        self._set_mode_masks()
        self.reset()

    # ---- state -------------------------------------------------------------------------------
    def reset(self, temperature: np.ndarray | float | None = None, theta: np.ndarray | None = None) -> None:
        """Back to rest: no current, windings at ``temperature`` (default ambient). Latched errors are
        taken from the registers again at the next :meth:`load_registers` (only a Reboot clears them)."""
        n = self.n
        self._last_config = self._last_goals = None     # re-read everything at the next load
        temp = np.full(n, self.ambient) if temperature is None else np.broadcast_to(temperature, (n,)).astype(float)
        self.current = np.zeros(n)
        self.winding_temperature = temp.copy()
        self.housing_temperature = temp.copy()
        self.integrator = np.zeros(n)
        self.velocity_error_integrator = np.zeros(n)
        self.turn_offset = np.zeros(n)            # pulses removed by multi-turn Clear instructions
        self._set_mode_masks()                    # (position frame offsets depend on it)
        self.gap = np.zeros(n)                    # motor-side minus output angle inside the backlash (rad)
        self.gear_side = np.ones(n)               # side of the backlash the motor last pushed on (+1/-1)
        self.overload_time = np.zeros(n)
        self.error_latched = np.zeros(n, dtype=np.int64)
        self.error_status = np.zeros(n, dtype=np.int64)
        self.trajectory_position = np.full(n, float(xm430.POSITION_CENTER))
        self.trajectory_velocity = np.zeros(n)    # pulses/s
        self.position_pulses = np.full(n, float(xm430.POSITION_CENTER))
        self.velocity_pulses = np.zeros(n)
        self.pwm = np.zeros(n)                    # duty fraction in the register's sign convention
        self.output_torque = np.zeros(n)          # shaft torque delivered to the joint (N·m)
        self.damping = np.zeros(n)                # -d(torque)/d(speed) at the reference speed (N·m·s/rad)
        self.reference_speed = np.zeros(n)        # rad/s, where the last step linearised the torque
        self.reference_torque = np.zeros(n)       # N·m, the torque at that speed
        self._motor_torque = np.zeros(n)          # motor torque at the output before gear losses, last step
        self.time = 0.0
        self.was_on = np.zeros(n, dtype=bool)
        self._joule_energy = np.zeros(n)
        self._housekeeping_elapsed = 0.0
        self._update_temperature_terms()
        if theta is not None:
            self._measure(np.asarray(theta, dtype=float), np.zeros(n))
            self.trajectory_position = self.position_pulses.copy()
        self.bus.reset()

    # ---- registers ---------------------------------------------------------------------------
    def _set_mode_masks(self) -> None:
        mode = self.mode
        self._velocity_mode, self._pwm_mode = mode == MODE_VELOCITY, mode == MODE_PWM
        self._current_position_mode = mode == MODE_CURRENT_POSITION
        self._current_mode_mask = self._current_position_mode | (mode == MODE_CURRENT)
        self._any_velocity_mode = bool(self._velocity_mode.any())
        self._any_pwm_mode = bool(self._pwm_mode.any())
        self._any_current_mode = bool(self._current_mode_mask.any())
        self._any_profile = bool(np.any(self.profile_velocity > 0))
        self._integrator_bound = np.where(self.ki > 0, self.DUTY_FULL_SCALE / np.maximum(self.ki, 1e-12), 0.0)
        self._any_integral = bool(np.any(self.ki > 0))
        self._kd_tick = self.kd * self.p.control_period_s           # D term per pulse/s of speed
        self._pulse_scale = self.direction * PULSES_PER_RAD          # shaft rad -> register pulses
        self._pulse_offset = xm430.POSITION_CENTER + self.homing - self.turn_offset

    def load_registers(self, registers) -> None:
        """Read goals, gains, limits and torque enable from the servos' control tables (one lock each).

        Only what changed since the last call is decoded: usually just the goal registers.
        """
        raw = b"".join(r.snapshot() for r in registers)
        table = np.frombuffer(raw, dtype=np.uint8).reshape(len(registers), xm430.CONTROL_TABLE_SIZE)
        config = table[:, :GOAL_BLOCK_START].tobytes()
        goals = table[:, GOAL_BLOCK_START:SENSOR_BLOCK_START].tobytes()
        if config != self._last_config:
            self._last_config, self._last_goals = config, goals
            self.load_table(np.frombuffer(raw, dtype=CONTROL_TABLE_DTYPE))
        elif goals != self._last_goals:
            self._last_goals = goals
            self._load_goals(np.frombuffer(raw, dtype=CONTROL_TABLE_DTYPE))

    def load_table(self, t: np.ndarray) -> None:
        """Refresh the commands from a record array with CONTROL_TABLE_DTYPE (one record per servo)."""
        self._register_errors = t["hardware_error_status"].astype(np.int64)
        self._register_torque = t["torque_enable"].astype(np.int64)
        # The table is the record of latched errors: one that shows none was rebooted (clear ours),
        # one that shows a Shutdown error keeps it latched (also across a physics reset).
        latched_before = self.error_latched
        self.error_latched = np.where(self._register_errors == 0, 0,
                                      latched_before | (self._register_errors & t["shutdown"].astype(np.int64)))
        rebooted = (latched_before != 0) & (self.error_latched == 0)
        if np.any(rebooted):
            self.overload_time[rebooted] = 0.0
        self.error_status = np.where(rebooted, 0, self.error_status) | self.error_latched
        self._switch_torque((self._register_torque != 0) & (self.error_latched == 0))
        self.mode = t["operating_mode"].astype(np.int64)
        self.direction = np.where(t["drive_mode"] & 1, -1.0, 1.0)
        self.homing = t["homing_offset"].astype(float)
        self.position_limits = (t["min_position_limit"].astype(float), t["max_position_limit"].astype(float))
        self.current_limit = t["current_limit"] * xm430.CURRENT_UNIT_A
        self.pwm_limit = t["pwm_limit"] / xm430.PWM_FULL_SCALE
        self.kp = t["position_p_gain"] / 128.0
        self.ki = t["position_i_gain"] / 65536.0
        self.kd = t["position_d_gain"] / 16.0
        self.kvp = t["velocity_p_gain"] / 128.0
        self.kvi = t["velocity_i_gain"] / 65536.0
        self.kff1 = t["feedforward_1st_gain"] / 4.0
        self.kff2 = t["feedforward_2nd_gain"] / 4.0
        self.voltage_max = t["max_voltage_limit"] * xm430.VOLTAGE_UNIT_V
        self.voltage_min = t["min_voltage_limit"] * xm430.VOLTAGE_UNIT_V
        self.temperature_limit = t["temperature_limit"].astype(float)
        self.shutdown_mask = t["shutdown"].astype(np.int64)
        self.moving_threshold = t["moving_threshold"].astype(float)
        self._load_goals(t)

    def _switch_torque(self, torque_on: np.ndarray) -> None:
        """Torque on/off from the registers; a servo switched on starts its profile where it is, integrators cleared."""
        switched_on = torque_on & ~self.was_on
        if np.any(switched_on):
            # (new arrays, never in place: trajectory_position may be the goal array itself)
            self.trajectory_position = np.where(switched_on, self.position_pulses, self.trajectory_position)
            self.trajectory_velocity = np.where(switched_on, 0.0, self.trajectory_velocity)
            self.integrator = np.where(switched_on, 0.0, self.integrator)
            self.velocity_error_integrator = np.where(switched_on, 0.0, self.velocity_error_integrator)
        self.torque_on = torque_on
        self.was_on = torque_on.copy()

    def _load_goals(self, t: np.ndarray) -> None:
        """Goal PWM / Current / Velocity / Position and the profile (addresses 100-119)."""
        goal = t["goal_position"].astype(float)
        low, high = self.position_limits
        self.goal_position = np.where(self.mode == MODE_POSITION, np.minimum(np.maximum(goal, low), high), goal)
        self.goal_current = np.clip(t["goal_current"] * xm430.CURRENT_UNIT_A, -self.current_limit, self.current_limit)
        self.goal_pwm = np.clip(t["goal_pwm"] / xm430.PWM_FULL_SCALE, -self.pwm_limit, self.pwm_limit)
        self.goal_velocity = t["goal_velocity"].astype(float)
        self.profile_velocity = t["profile_velocity"] * (VELOCITY_UNIT_RAD_S * PULSES_PER_RAD)
        self.profile_acceleration = t["profile_acceleration"] * (PROFILE_ACCEL_UNIT_RAD_S2 * PULSES_PER_RAD)
        self._set_mode_masks()

    def sensor_values(self, current_noise: np.ndarray | None = None) -> np.ndarray:
        """Present-value block (record array, SENSOR_BLOCK_DTYPE): register units, quantised, noisy."""
        p = self.p
        noise = self.rng.standard_normal((5, self.n))
        current_sigma = p.current_noise_a if current_noise is None else current_noise
        current = self.direction * self.current + p.current_offset_a + current_sigma * noise[0]
        velocity = self.velocity_pulses * (1.0 / PULSES_PER_RAD) + p.velocity_noise_rad_s * noise[1]
        velocity_units = np.rint(velocity * (1.0 / VELOCITY_UNIT_RAD_S))
        following = np.abs(self.goal_position - self.position_pulses) <= 10.0   # e-manual "In-Position" window
        profiling = np.abs(self.trajectory_position - self.goal_position) > 0.5
        (tick, moving, status, pwm, current_view, velocity_view, position, trajectory_velocity, trajectory_position,
         voltage, temperature) = self._sensor_views
        tick[...] = int(self.time * 1000.0) % 32768
        moving[...] = np.abs(velocity_units) > self.moving_threshold
        status[...] = (following & self.torque_on) * 1 + profiling * 2
        # Values that physics keeps in range are cast directly; the two unsigned ones are clipped.
        pwm[...] = np.rint(self.pwm * xm430.PWM_FULL_SCALE)
        current_view[...] = np.rint(np.clip(current * (1.0 / xm430.CURRENT_UNIT_A), -32768, 32767))
        velocity_view[...] = velocity_units
        position[...] = np.rint(self.position_pulses + p.position_noise_pulses * noise[2])
        trajectory_velocity[...] = np.rint(self.trajectory_velocity * (1.0 / (PULSES_PER_RAD * VELOCITY_UNIT_RAD_S)))
        trajectory_position[...] = np.rint(self.trajectory_position)
        volts = self.bus.voltage + p.voltage_noise_v * noise[3]
        voltage[...] = np.rint(np.clip(volts / xm430.VOLTAGE_UNIT_V, 0, 65535))
        temperature[...] = np.rint(np.clip(self.sensor_temperature + p.temperature_noise_c * noise[4], 0, 255))
        return self._sensor_record

    def store_registers(self, registers, current_noise: np.ndarray | None = None) -> None:
        """Write the present values and Hardware Error Status; a Shutdown trip clears Torque Enable."""
        raw = self.sensor_values(current_noise).tobytes()
        errors, latched = self.error_status.tolist(), self.error_latched.tolist()
        registered_errors, registered_torque = self._register_errors.tolist(), self._register_torque.tolist()
        for k, regs in enumerate(registers):
            block = raw[k * SENSOR_BLOCK_LENGTH: (k + 1) * SENSOR_BLOCK_LENGTH]
            with regs.lock:
                if isinstance(regs, SimulatedServoRegisters):
                    regs.store_block(SENSOR_BLOCK_START, block)
                else:
                    record = self._sensor_record[k]
                    for name in SENSOR_REGISTERS:
                        regs.set(name, int(record[name]))
                if registered_errors[k] != errors[k]:
                    regs.set("hardware_error_status", errors[k])
                if latched[k] and registered_torque[k]:
                    regs.set("torque_enable", 0)
        self._register_errors = self.error_status.copy()
        self._register_torque = np.where(self.error_latched != 0, 0, self._register_torque)

    # ---- physics -----------------------------------------------------------------------------
    @property
    def sensor_temperature(self) -> np.ndarray:
        w = self.p.sensor_winding_weight
        return self.housing_temperature + w * (self.winding_temperature - self.housing_temperature)

    def clear_multi_turn(self, index: int) -> float:
        """Clear instruction (e-manual): Present Position of servo ``index`` back into one turn (0-4095).

        Returns the pulses removed; Goal Position moves with the frame (the caller rewrites the register)."""
        shift = np.zeros(self.n)
        shift[index] = np.floor(self.position_pulses[index] / xm430.PULSES_PER_REV) * xm430.PULSES_PER_REV
        self.turn_offset = self.turn_offset + shift
        self._pulse_offset = self._pulse_offset - shift
        self.position_pulses = self.position_pulses - shift
        self.trajectory_position = self.trajectory_position - shift      # new arrays: they may alias
        self.goal_position = self.goal_position - shift
        return float(shift[index])

    def _measure(self, theta: np.ndarray, omega: np.ndarray) -> None:
        """Shaft angle/speed -> the encoder's pulses in the register frame (Drive Mode, Homing Offset,
        multi-turn Clear)."""
        self.position_pulses = self._pulse_scale * theta + self._pulse_offset
        self.velocity_pulses = self._pulse_scale * omega

    def _advance_profile(self, dt: float) -> None:
        """Profile Velocity / Acceleration trajectory toward the goal (0 = jump straight to the goal)."""
        goal = self.goal_position
        if not self._any_profile:
            self.trajectory_position = goal
            return
        vmax, amax = self.profile_velocity, self.profile_acceleration
        distance = goal - self.trajectory_position
        unlimited = vmax <= 0
        braking = np.sqrt(2.0 * np.where(amax > 0, amax, 1e12) * np.abs(distance))
        v_target = np.sign(distance) * np.minimum(np.where(unlimited, np.inf, vmax), braking)
        dv = np.where(amax > 0, amax * dt, np.inf)
        v = np.minimum(np.maximum(v_target, self.trajectory_velocity - dv), self.trajectory_velocity + dv)
        step = v * dt
        arrived = unlimited | (np.abs(step) >= np.abs(distance))
        self.trajectory_position = np.where(arrived, goal, self.trajectory_position + step)
        self.trajectory_velocity = np.where(arrived, 0.0, v)

    def _command(self, dt: float) -> np.ndarray:
        """Firmware output for this step as duty fraction (register frame); sets ``_current_target``."""
        tick = self.p.control_period_s
        previous_trajectory_velocity = self.trajectory_velocity
        self._advance_profile(dt)
        error = self.trajectory_position - np.rint(self.position_pulses)
        pid = self.kp * error - self._kd_tick * self.velocity_pulses
        if self._any_integral:
            integrator = self.integrator + error * (dt / tick)
            # Anti-windup: the integral term alone never exceeds full output.
            self.integrator = np.minimum(np.maximum(integrator, -self._integrator_bound), self._integrator_bound)
            pid += self.ki * self.integrator
        if self._any_profile:
            trajectory_per_tick = self.trajectory_velocity * tick
            accel_per_tick2 = (self.trajectory_velocity - previous_trajectory_velocity) * (tick * tick / dt)
            pid += (self.kd + self.kff1) * trajectory_per_tick + self.kff2 * accel_per_tick2
        duty_units = pid
        if self._any_velocity_mode:   # Velocity mode: PI on velocity units
            velocity_error = self.goal_velocity - self.velocity_pulses * (1.0 / (PULSES_PER_RAD * VELOCITY_UNIT_RAD_S))
            integral = self.velocity_error_integrator + velocity_error * (dt / tick)
            bound = self.DUTY_FULL_SCALE / np.maximum(self.kvi, 1e-12)      # anti-windup as above
            self.velocity_error_integrator = np.minimum(np.maximum(integral, -bound), bound)
            velocity_pi = self.kvp * velocity_error + self.kvi * self.velocity_error_integrator
            duty_units = np.where(self._velocity_mode, velocity_pi, duty_units)
        if self._any_pwm_mode:
            duty_units = np.where(self._pwm_mode, self.goal_pwm * self.DUTY_FULL_SCALE, duty_units)
        if self._any_current_mode:
            limit = np.abs(self.goal_current)
            pid_current = np.minimum(np.maximum(pid * xm430.CURRENT_UNIT_A, -limit), limit)
            self._current_target = np.where(self._current_position_mode, pid_current, self.goal_current)
        duty = duty_units * (1.0 / self.DUTY_FULL_SCALE)
        return np.minimum(np.maximum(duty, -self.pwm_limit), self.pwm_limit)

    def _update_temperature_terms(self) -> None:
        """Winding resistance (copper) and torque constant (magnet) at the winding temperature,
        viscous friction at the housing temperature; refreshed every housekeeping period."""
        p = self.p
        dtemp = self.winding_temperature - p.reference_temperature_c
        self._resistance = p.resistance_ohm * (1.0 + p.resistance_temp_coeff * dtemp)
        self._k_t = p.torque_constant_nm_a * (1.0 + p.torque_constant_temp_coeff * dtemp)
        self._k_gear = self._k_t * self.gear_ratio                   # back-EMF/torque at the output shaft
        housing = self.housing_temperature - p.reference_temperature_c
        self._viscous = p.viscous_nm_s_rad * np.maximum(1.0 + p.viscous_temp_coeff * housing, 0.2)
        self._decay_dt = -1.0                                          # inductive decay to be recomputed

    def step(self, theta: np.ndarray, omega: np.ndarray, dt: float) -> np.ndarray:
        """Advance the servos by ``dt`` s at shaft angle ``theta`` (rad) and speed ``omega`` (rad/s).

        Returns the torque each servo's output shaft applies to its joint (N·m).
        """
        p = self.p
        self.time += dt
        self._measure(theta, omega)
        duty = self._command(dt)
        resistance, k_gear = self._resistance, self._k_gear
        v_bus = self.bus.voltage

        # Backlash: the motor pushes on side `gear_side`; across the gap it transmits nothing.
        back_emf_engaged = k_gear * omega
        drive_voltage = (self.direction * v_bus) * duty                # shaft frame
        if self._any_current_mode:        # the current loop sets the voltage that gives the target current
            v_max = v_bus * self.pwm_limit
            regulated = self.direction * self._current_target * resistance + back_emf_engaged
            regulated = np.minimum(np.maximum(regulated, -v_max), v_max)
            drive_voltage = np.where(self._current_mode_mask, regulated, drive_voltage)
        engaged_current = (drive_voltage - back_emf_engaged) / resistance
        push_side = np.where(np.abs(engaged_current) > p.backlash_switch_current_a,
                             np.sign(engaged_current), self.gear_side)
        engaged = push_side * self.gap >= self._half_gap_tolerance
        self.gear_side = push_side
        if engaged.all():
            self.gap = push_side * self._half_gap
            steady = engaged_current
        else:
            free_speed = 0.5 * np.abs(drive_voltage) / k_gear              # mean speed across the gap
            gap = self.gap + push_side * free_speed * dt
            self.gap = np.where(engaged, push_side * self._half_gap,
                                np.minimum(np.maximum(gap, -self._half_gap), self._half_gap))
            back_emf_engaged = back_emf_engaged + np.where(engaged, 0.0, k_gear * push_side * free_speed)
            steady = (drive_voltage - back_emf_engaged) / resistance

        # Winding current: L di/dt = V - R i - Ke w, exact first-order update; Current Limit clamp.
        limited = np.minimum(np.maximum(steady, -self.current_limit), self.current_limit)
        drive_voltage = limited * resistance + back_emf_engaged
        steady = limited * self.torque_on                                # torque off: H-bridge open
        if dt != self._decay_dt:
            self._decay, self._decay_dt = np.exp(-dt * resistance / p.inductance_h), dt
        self.current = steady + (self.current - steady) * self._decay
        self.pwm = (self.direction / max(v_bus, 1e-6)) * drive_voltage * self.torque_on

        # Gearbox: lossier when the load back-drives the motor; Coulomb + Stribeck + viscous friction.
        motor_torque = k_gear * self.current * engaged                 # at the output, before gear losses
        self._motor_torque = motor_torque
        self.output_torque, _ = self._shaft_torque(motor_torque, omega)

        # Heat and protection run on the firmware's slower housekeeping period (energy accumulated).
        self._joule_energy += np.square(self.current) * resistance * dt
        self._housekeeping_elapsed += dt
        if self._housekeeping_elapsed >= self.HOUSEKEEPING_PERIOD_S - 1e-12:
            self._housekeeping(resistance, v_bus)
        # Supply current: duty x winding current while motoring (regeneration is not fed back).
        supply_current = self._standby_total + float(np.maximum(self.pwm * self.direction * self.current, 0.0).sum())
        self.bus.update(supply_current, dt)
        return self.output_torque

    def linearise(self, omega: np.ndarray, predicted_omega: np.ndarray) -> None:
        """The last step's output torque as ``reference_torque`` + ``damping`` x (``reference_speed`` - speed), for
        an implicit integrator. The efficiency switch and the smoothed friction sign change over a few hundredths
        of a rad/s, which an explicit physics step cannot follow (a held SO-101 joint chattered between the two
        efficiencies at every 6.7 ms step); the reference is the step's speed ``omega``, or rest where the shaft
        is about to reverse (``predicted_omega``, its speed at the end of the step without this damping, on the
        other side of 0)."""
        motor_torque = self._motor_torque
        reversing = omega * predicted_omega < 0
        into_driving = reversing & (np.sign(motor_torque) * predicted_omega > 0)
        reference = np.where(reversing, 0.0, omega)
        self.reference_speed = reference
        # at rest the efficiency's slope is that of the side the shaft goes to (none on the driving side)
        self.reference_torque, self.damping = self._shaft_torque(motor_torque, reference,
                                                                 backdriven_at_rest=~into_driving)

    def _shaft_torque(self, motor_torque: np.ndarray, omega: np.ndarray,
                      backdriven_at_rest: np.ndarray | bool = True) -> tuple[np.ndarray, np.ndarray]:
        """Output torque at speed ``omega`` for a motor torque (at the output, before losses), and how steeply it
        falls with speed there (N·m·s/rad; at rest, the slope on the back-driven side where ``backdriven_at_rest``,
        else on the driving side)."""
        p = self.p
        reversal = -np.sign(motor_torque) * omega * self._inv_blend     # > 0: the load back-drives the motor
        backdriven = np.minimum(np.maximum(reversal, 0.0), 1.0)
        gear_torque = motor_torque * (p.efficiency_forward + backdriven * self._backdrive_gain)
        stribeck = p.coulomb_nm + self._static_excess * np.exp(-np.square(omega * self._inv_stribeck))
        smoothed_sign = np.tanh(omega * self._inv_smoothing)
        torque = gear_torque - stribeck * smoothed_sign - self._viscous * omega
        switching = ((reversal > 0.0) | ((reversal == 0.0) & backdriven_at_rest)) & (reversal < 1.0)
        slope = (np.where(switching, np.abs(motor_torque) * self._backdrive_gain * self._inv_blend, 0.0)
                 + stribeck * self._inv_smoothing * (1.0 - np.square(smoothed_sign)) + self._viscous)
        return torque, slope

    def follow(self, theta: np.ndarray, omega: np.ndarray, dt: float) -> None:
        """Leader arm: torque off, shaft moved by hand. Only sensors, heat and the bus evolve."""
        self.time += dt
        self._measure(theta, omega)
        self.current[:] = 0.0
        self.pwm[:] = 0.0
        self.output_torque[:] = 0.0
        self.damping[:] = 0.0
        self.reference_torque[:] = 0.0
        self._motor_torque[:] = 0.0
        self.trajectory_position = self.position_pulses.copy()
        self._housekeeping_elapsed += dt
        if self._housekeeping_elapsed >= self.HOUSEKEEPING_PERIOD_S - 1e-12:
            self._housekeeping(self.p.resistance_ohm, self.bus.voltage)
        self.bus.update(self._standby_total, dt)

    def _housekeeping(self, resistance: np.ndarray, v_bus: float) -> None:
        """Heat and protection over the time since the last call (mean Joule power)."""
        elapsed = self._housekeeping_elapsed
        if elapsed > 0:
            self._heat(self._joule_energy / elapsed, elapsed)
            self._check_protection(elapsed, resistance, v_bus)
        self._joule_energy = np.zeros(self.n)
        self._housekeeping_elapsed = 0.0
        self._update_temperature_terms()

    def _heat(self, joule: np.ndarray, dt: float) -> None:
        """Two-node thermal model: winding (Joule power ``joule`` W) -> housing -> ambient."""
        p = self.p
        to_housing = (self.winding_temperature - self.housing_temperature) / p.winding_to_housing_k_w
        to_ambient = (self.housing_temperature - self.ambient) / p.housing_to_ambient_k_w
        self.winding_temperature += dt * (joule - to_housing) / p.winding_capacity_j_k
        self.housing_temperature += dt * (to_housing - to_ambient) / p.housing_capacity_j_k

    def _check_protection(self, dt: float, resistance: np.ndarray, v_bus: float) -> None:
        """Hardware Error Status bits; those in the Shutdown mask latch and switch torque off."""
        p = self.p
        attainable = np.minimum(self.current_limit, (v_bus / resistance) * self.pwm_limit)
        over = self.torque_on & (np.abs(self.current) >= p.overload_current_fraction * attainable)
        self.overload_time = np.where(over, self.overload_time + dt, np.maximum(self.overload_time - dt, 0.0))
        bits = (self.overload_time >= p.overload_time_s) * xm430.HW_ERROR_OVERLOAD
        bits |= (np.rint(self.sensor_temperature) > self.temperature_limit) * xm430.HW_ERROR_OVERHEATING
        bits |= ((v_bus < self.voltage_min) | (v_bus > self.voltage_max)) * xm430.HW_ERROR_INPUT_VOLTAGE
        self.error_status = self.error_latched | bits
        if bits.any():
            self.error_latched |= bits & self.shutdown_mask
            self.error_status = self.error_latched | bits
            tripped = self.error_latched != 0
            if np.any(tripped & self.torque_on):
                self.torque_on = self.torque_on & ~tripped
                self.was_on = self.torque_on.copy()

    def bench_full_duty(self) -> None:
        """Datasheet bench set-up: torque on, open-loop full PWM, protections out of the way."""
        table = np.zeros(self.n, dtype=CONTROL_TABLE_DTYPE)
        for register in xm430.CONTROL_TABLE:
            table[register.name] = register.default
        table["operating_mode"] = MODE_PWM
        table["goal_pwm"] = xm430.PWM_FULL_SCALE
        table["torque_enable"] = 1
        table["temperature_limit"] = 100
        table["shutdown"] = 0
        self.load_table(table)
