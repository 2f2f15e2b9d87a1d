"""STS3215 firmware around the shared servo physics (ROS-free).

:class:`StsServoBank` is :class:`na_sim.servo_model.ServoBank` (DC motor, 1:345 gearbox, friction,
backlash, heat, supply sag, all from ``na_sim/config/servo_sts3215.yaml``) with the Feetech
control table (:mod:`na_description.sts3215`) and firmware in place of the XM430's. Built by
:func:`na_sim.servo_banks.make_servo_bank` for a servo config with ``family: sts3215``.

Firmware model (Feetech publishes no control law; the scalings are ours and marked assumed):

* Position mode (0): PID on the step error, output in duty units of 0.1 % (1000 = full PWM):
  ``KP = 0.5·P`` units per step, ``KD = 8·D`` units per step/ms of speed, ``KI = I/64`` units per
  step·ms. With the default P = 32 a 35 % load leaves ~22 steps of error, as bench tests of the
  12 V servo measure (20-30 steps). Inside the CW/CCW dead zone (26, 27) the output is 0;
  outside it at least Minimum Startup Force (24). Goal Velocity (46, steps/s; 0 = Maximum
  Velocity Limit) and Acceleration (41, 100 steps/s^2; 0 = none) shape a trapezoidal profile.
  Output limited to Torque Limit (48). Step mode (3) runs as multi-turn position mode; velocity
  mode (1) is a PI on steps/s; PWM mode (2) drives Goal Time (44) as duty.
* Present Position = actual - Homing Offset, wrapped to 0..4095 in position mode.
* **Present Load (60)** is what the firmware reports: the duty cycle it applies to the motor
  (0.1 %, sign in bit 10 = driving toward decreasing position), i.e. the controller output after
  Torque Limit and the overload clamp. It is not a torque measurement: it includes the voltage
  spent on back-EMF when moving and reads 0 with torque off (a leader arm moved by hand).
  Present Current (69) is the winding current (6.5 mA units, sign bit 15).
* Protection (every 10 ms): |Present Load| >= Overload Torque (36) for Protection Time (35) ->
  Overload bit, and the output is held to Protective Torque (34) until the demanded output falls
  below it or torque goes off. |current| >= Protection Current (28) for Over-current Protection
  Time (38) -> Over-current bit; temperature above Max Temperature -> Overheat bit; input
  voltage outside the limits -> Voltage bit. A bit in Unloading Condition (19) makes that error
  switch torque off (Torque Enable reads 0); the bit then stays in Status until Torque Enable is
  written 1 again (assumed). Bits set from outside (fault injection: angle sensor) stay until a
  power cycle clears the Status register.
* Moving (66): the profile is still running or |speed| > 50 steps/s per unit of Moving Velocity
  Threshold (80) (assumed unit).
"""

from __future__ import annotations

import numpy as np

from na_description import sts3215
from na_sim.servo_model import ServoBank
from na_sim.servo_params import ServoParams, SupplyBus
from na_sim.servo_table import (
    MODE_EXTENDED,
    MODE_POSITION,
    MODE_PWM,
    MODE_VELOCITY,
    PULSES_PER_RAD,
    VELOCITY_UNIT_RAD_S,
)

# Firmware gain scalings (assumed, see the module doc): duty units (0.1 %) per unit of the coefficient.
KP_PER_COEFFICIENT = 0.5          # per step of position error
KD_PER_COEFFICIENT = 8.0          # per step/ms of speed (the XM430-shaped D term: kd · speed · tick)
KI_PER_COEFFICIENT = 1.0 / 64.0   # per step·ms of accumulated error
KVP_PER_COEFFICIENT = 0.2         # velocity mode: per step/s of speed error
KVI_PER_COEFFICIENT = 0.002       # velocity mode: per step/s·ms
VELOCITY_LIMIT_UNIT_STEPS_S = 0.732 / 60.0 * sts3215.STEPS_PER_REV   # Maximum Velocity Limit: 0.732 rpm
MOVING_THRESHOLD_UNIT_STEPS_S = 50.0
STATE_BYTES = sts3215.STATE_BLOCK_LENGTH

_XM_VELOCITY_UNIT_STEPS_S = PULSES_PER_RAD * VELOCITY_UNIT_RAD_S    # the base bank's velocity-mode unit
_MODES = {0: MODE_POSITION, 1: MODE_VELOCITY, 2: MODE_PWM, 3: MODE_EXTENDED}
_UNLOADING_ERRORS = (sts3215.STATUS_VOLTAGE | sts3215.STATUS_ANGLE_SENSOR | sts3215.STATUS_OVERHEAT
                     | sts3215.STATUS_OVERCURRENT)
_REG = sts3215.REGISTERS
_ASYNC_FLAG = _REG["async_write_flag"].address - sts3215.STATE_BLOCK_START    # owned by the bus, not physics


def _field(table: np.ndarray, name: str) -> np.ndarray:
    """One register of every servo from an (n, 256) byte table, sign-magnitude decoded (int64)."""
    reg = _REG[name]
    word = table[:, reg.address].astype(np.int64)
    if reg.size == 2:
        word = word | (table[:, reg.address + 1].astype(np.int64) << 8)
    if reg.sign_bit is not None:
        bit = 1 << reg.sign_bit
        word = np.where(word & bit, -(word & ~bit), word)
    return word


def _sign_magnitude(values: np.ndarray, sign_bit: int) -> np.ndarray:
    """Signed integers -> register words (magnitude clipped to the field)."""
    limit = (1 << sign_bit) - 1
    v = np.clip(np.rint(values), -limit, limit).astype(np.int64)
    return np.where(v < 0, (-v) | (1 << sign_bit), v)


def default_table(n: int) -> np.ndarray:
    """(n, 256) byte table of n servos at their power-on defaults."""
    row = bytearray(sts3215.CONTROL_TABLE_SIZE)
    for reg in sts3215.CONTROL_TABLE:
        row[reg.address: reg.end] = sts3215.encode_value(reg, reg.default)
    row[_REG["torque_limit"].address: _REG["torque_limit"].end] = row[16:18]
    return np.tile(np.frombuffer(bytes(row), dtype=np.uint8), (n, 1))


def set_field(table: np.ndarray, name: str, value: int) -> None:
    """Write one register of every servo in an (n, 256) byte table (bench and test set-ups)."""
    reg = _REG[name]
    table[:, reg.address: reg.end] = np.frombuffer(sts3215.encode_value(reg, value), dtype=np.uint8)


class StsServoBank(ServoBank):
    """n STS3215 servos: the Feetech firmware on the shared motor/gearbox/heat physics."""

    GEAR_RATIO = sts3215.GEAR_RATIO
    DUTY_FULL_SCALE = sts3215.DUTY_FULL_SCALE

    def __init__(self, params: ServoParams, bus: SupplyBus, rng: np.random.Generator,
                 ambient_temperature: float = 25.0) -> None:
        super().__init__(params, bus, rng, ambient_temperature)
        self._written_status = np.zeros(self.n, dtype=np.int64)
        self.external_bits = np.zeros(self.n, dtype=np.int64)
        self._trip = np.zeros(self.n, dtype=bool)
        self.unloaded_bits = np.zeros(self.n, dtype=np.int64)     # errors that switched torque off
        self.load_table(default_table(self.n))

    def reset(self, temperature: np.ndarray | float | None = None, theta: np.ndarray | None = None) -> None:
        super().reset(temperature, theta)
        self.overloaded = np.zeros(self.n, dtype=bool)
        self.overcurrent_time = np.zeros(self.n)
        self.demand = np.zeros(self.n)

    # ---- registers ---------------------------------------------------------------------------
    def _set_mode_masks(self) -> None:
        super()._set_mode_masks()
        self._position_mask = (self.mode == MODE_POSITION) | (self.mode == MODE_EXTENDED)
        self._any_position = bool(self._position_mask.any())

    def load_registers(self, registers) -> None:
        """Read the servos' control tables; decodes only what changed (usually just the goal block)."""
        table = np.frombuffer(b"".join(r.snapshot() for r in registers), dtype=np.uint8).reshape(
            len(registers), sts3215.CONTROL_TABLE_SIZE)
        goal_start, goal_end = sts3215.GOAL_BLOCK_START, sts3215.GOAL_BLOCK_START + sts3215.GOAL_BLOCK_LENGTH
        status = _REG["status"].address
        config = b"".join(part.tobytes() for part in (table[:, :goal_start], table[:, goal_end:56],
                                                        table[:, status: status + 1], table[:, 71:]))
        goals = table[:, goal_start:goal_end].tobytes()
        if config != self._last_config:
            self._last_config, self._last_goals = config, goals
            self.load_table(table)
        elif goals != self._last_goals:
            self._last_goals = goals
            self._load_goals(table)

    def load_table(self, t: np.ndarray) -> None:
        """Refresh the commands from an (n, 256) byte table (one row per servo)."""
        status = _field(t, "status")
        power_cycled = (status == 0) & (self._written_status != 0)
        self.external_bits = np.where(power_cycled, 0, self.external_bits | (status & ~self._written_status))
        if np.any(power_cycled):
            self.overloaded = self.overloaded & ~power_cycled
            self.overload_time = np.where(power_cycled, 0.0, self.overload_time)
            self._written_status = np.where(power_cycled, 0, self._written_status)
        self._register_torque = _field(t, "torque_enable")
        self.unloaded_bits = np.where(power_cycled | (self._register_torque == sts3215.TORQUE_ON), 0,
                                      self.unloaded_bits)
        self._switch_torque(self._register_torque == sts3215.TORQUE_ON)
        self.mode = np.vectorize(lambda m: _MODES.get(int(m), MODE_POSITION), otypes=[np.int64])(
            _field(t, "operating_mode"))
        self.direction = np.ones(self.n)
        self.homing = -_field(t, "homing_offset").astype(float)       # Present = actual - Homing Offset
        low, high = _field(t, "min_position_limit").astype(float), _field(t, "max_position_limit").astype(float)
        unlimited = (low == 0) & (high == 0)
        self.position_limits = (np.where(unlimited, -np.inf, low), np.where(unlimited, np.inf, high))
        self.pwm_limit = _field(t, "torque_limit") / sts3215.DUTY_FULL_SCALE
        self.current_limit = np.full(self.n, np.inf)                  # no current loop; see protection
        self.kp = _field(t, "p_coefficient") * KP_PER_COEFFICIENT
        self.kd = _field(t, "d_coefficient") * KD_PER_COEFFICIENT
        self.ki = _field(t, "i_coefficient") * KI_PER_COEFFICIENT
        self.kvp = _field(t, "velocity_p_coefficient") * KVP_PER_COEFFICIENT * _XM_VELOCITY_UNIT_STEPS_S
        self.kvi = _field(t, "velocity_i_coefficient") * KVI_PER_COEFFICIENT * _XM_VELOCITY_UNIT_STEPS_S
        self.kff1, self.kff2 = np.zeros(self.n), np.zeros(self.n)
        self.voltage_max = _field(t, "max_voltage_limit") * sts3215.VOLTAGE_UNIT_V
        self.voltage_min = _field(t, "min_voltage_limit") * sts3215.VOLTAGE_UNIT_V
        self.temperature_limit = _field(t, "max_temperature_limit").astype(float)
        self.unloading = _field(t, "unloading_condition")
        self.shutdown_mask = self.unloading
        self.overload_fraction = _field(t, "overload_torque") * sts3215.PERCENT_UNIT
        self.protective_fraction = _field(t, "protective_torque") * sts3215.PERCENT_UNIT
        self.protection_time = _field(t, "protection_time") * sts3215.PROTECTION_TIME_UNIT_S
        self.overcurrent_limit = _field(t, "protection_current") * sts3215.CURRENT_UNIT_A
        self.overcurrent_time_limit = _field(t, "over_current_protection_time") * sts3215.PROTECTION_TIME_UNIT_S
        self.dead_zone_cw = _field(t, "cw_dead_zone").astype(float)
        self.dead_zone_ccw = _field(t, "ccw_dead_zone").astype(float)
        self.min_startup = _field(t, "minimum_startup_force") / sts3215.DUTY_FULL_SCALE
        self.moving_threshold = _field(t, "moving_velocity_threshold") * MOVING_THRESHOLD_UNIT_STEPS_S
        self.max_speed = _field(t, "maximum_velocity_limit") * VELOCITY_LIMIT_UNIT_STEPS_S
        self._load_goals(t)

    def _load_goals(self, t: np.ndarray) -> None:
        """Acceleration, Goal Position, Goal Time (PWM duty), Goal Velocity (addresses 41-47)."""
        goal = _field(t, "goal_position").astype(float)
        low, high = self.position_limits
        self.goal_position = np.where(self.mode == MODE_POSITION, np.clip(goal, low, high), goal)
        speed = _field(t, "goal_velocity").astype(float)
        self.goal_velocity = speed / _XM_VELOCITY_UNIT_STEPS_S            # the base bank's velocity unit
        self.goal_pwm = np.clip(_field(t, "goal_time") / sts3215.DUTY_FULL_SCALE, -self.pwm_limit, self.pwm_limit)
        self.goal_current = np.zeros(self.n)
        acceleration = _field(t, "acceleration") * sts3215.ACCELERATION_UNIT_STEPS_S2
        limit = np.where(speed != 0, np.abs(speed), np.where(acceleration > 0, self.max_speed, 0.0))
        self.profile_velocity = np.where(self._position_mode_of(self.mode), limit, 0.0)
        self.profile_acceleration = acceleration
        self._set_mode_masks()

    @staticmethod
    def _position_mode_of(mode: np.ndarray) -> np.ndarray:
        return (mode == MODE_POSITION) | (mode == MODE_EXTENDED)

    def bench_full_duty(self) -> None:
        """Datasheet bench set-up: PWM mode at full duty, torque on, protections out of the way."""
        table = default_table(self.n)
        set_field(table, "operating_mode", 2)
        set_field(table, "goal_time", sts3215.DUTY_FULL_SCALE)
        set_field(table, "torque_enable", sts3215.TORQUE_ON)
        set_field(table, "max_temperature_limit", 100)
        set_field(table, "unloading_condition", 0)
        set_field(table, "overload_torque", 100)
        self.load_table(table)

    # ---- present values ----------------------------------------------------------------------
    def sensor_values(self, current_noise: np.ndarray | None = None) -> np.ndarray:
        """Present Position .. Present Current (addresses 56-70) of every servo: (n, 15) bytes."""
        p = self.p
        noise = self.rng.standard_normal((5, self.n))
        current_sigma = p.current_noise_a if current_noise is None else current_noise
        position = np.rint(self.position_pulses + p.position_noise_pulses * noise[2])
        single_turn = self.mode == MODE_POSITION
        position = np.where(single_turn, np.mod(position, sts3215.STEPS_PER_REV), position)
        speed = np.rint(self.velocity_pulses + p.velocity_noise_rad_s * PULSES_PER_RAD * noise[1])
        load = np.clip(self.pwm, -1.0, 1.0) * sts3215.DUTY_FULL_SCALE
        volts = np.clip(np.rint((self.bus.voltage + p.voltage_noise_v * noise[3]) / sts3215.VOLTAGE_UNIT_V), 0, 255)
        temperature = np.clip(np.rint(self.sensor_temperature + p.temperature_noise_c * noise[4]), 0, 255)
        amps = self.direction * self.current + p.current_offset_a + current_sigma * noise[0]
        current = amps / sts3215.CURRENT_UNIT_A
        profiling = np.abs(self.trajectory_position - self.goal_position) > 0.5
        moving = (self.torque_on & profiling) | (np.abs(speed) > self.moving_threshold)
        block = np.zeros((self.n, STATE_BYTES), dtype=np.uint8)
        for offset, words in ((0, _sign_magnitude(position, 15)), (2, _sign_magnitude(speed, 15)),
                              (4, _sign_magnitude(load, 10)), (13, _sign_magnitude(current, 15))):
            block[:, offset] = words & 0xFF
            block[:, offset + 1] = words >> 8
        block[:, 6] = volts
        block[:, 7] = temperature
        block[:, 9] = (self.error_status | self.external_bits | self.unloaded_bits) & 0x7F
        block[:, 10] = moving
        return block

    def store_registers(self, registers, current_noise: np.ndarray | None = None) -> None:
        """Write the present values and Status; an unloading error clears Torque Enable."""
        block = self.sensor_values(current_noise)
        trip = self._trip.tolist()
        start = sts3215.STATE_BLOCK_START
        for k, regs in enumerate(registers):
            row = block[k].tobytes()
            with regs.lock:
                regs.store_block(start, row[:_ASYNC_FLAG])               # Async Write Flag belongs to the bus
                regs.store_block(start + _ASYNC_FLAG + 1, row[_ASYNC_FLAG + 1:])
                if trip[k]:
                    regs.set("torque_enable", sts3215.TORQUE_OFF)
        self._written_status = block[:, 9].astype(np.int64)
        self._register_torque = np.where(self._trip, sts3215.TORQUE_OFF, self._register_torque)
        self._trip = np.zeros(self.n, dtype=bool)

    # ---- firmware ----------------------------------------------------------------------------
    def _command(self, dt: float) -> np.ndarray:
        """The base PID output, then the STS dead zone, minimum startup force and overload clamp."""
        duty = super()._command(dt)
        if self._any_position:
            error = self.trajectory_position - np.rint(self.position_pulses)
            dead = np.where(error >= 0, self.dead_zone_ccw, self.dead_zone_cw)
            inside = self._position_mask & (np.abs(error) <= dead)
            duty = np.where(inside, 0.0, duty)
            floor = np.minimum(self.min_startup, self.pwm_limit)
            weak = self._position_mask & ~inside & (np.abs(duty) < floor)
            duty = np.where(weak, np.sign(error) * floor, duty)
        self.demand = duty
        if self.overloaded.any():
            limit = np.where(self.overloaded, np.minimum(self.protective_fraction, self.pwm_limit), self.pwm_limit)
            duty = np.minimum(np.maximum(duty, -limit), limit)
        return duty

    def _check_protection(self, dt: float, resistance: np.ndarray, v_bus: float) -> None:
        """Status bits every housekeeping period; see the module doc for the rules."""
        enabled = self.unloading
        loaded = self.torque_on & (np.abs(self.pwm) >= self.overload_fraction - 1e-9)
        self.overload_time = np.where(loaded, self.overload_time + dt, 0.0)
        guard = (enabled & sts3215.STATUS_OVERLOAD) != 0
        self.overloaded = (self.overloaded | (guard & (self.overload_time >= self.protection_time)))
        self.overloaded &= self.torque_on & (np.abs(self.demand) >= self.protective_fraction)
        heavy = self.torque_on & (np.abs(self.current) >= self.overcurrent_limit)
        self.overcurrent_time = np.where(heavy, self.overcurrent_time + dt, 0.0)
        bits = self.overloaded * sts3215.STATUS_OVERLOAD
        bits |= (self.overcurrent_time >= self.overcurrent_time_limit) * sts3215.STATUS_OVERCURRENT
        bits |= (np.rint(self.sensor_temperature) > self.temperature_limit) * sts3215.STATUS_OVERHEAT
        bits |= ((v_bus < self.voltage_min) | (v_bus > self.voltage_max)) * sts3215.STATUS_VOLTAGE
        self.error_status = bits.astype(np.int64)
        unload = ((bits | self.external_bits) & enabled & _UNLOADING_ERRORS) != 0
        if np.any(unload & self.torque_on):
            self.unloaded_bits = np.where(unload & self.torque_on, (bits | self.external_bits) & enabled,
                                          self.unloaded_bits)
            self._trip |= unload & self.torque_on
            self.torque_on = self.torque_on & ~unload
            self.was_on = self.torque_on.copy()
