"""Feetech STS3215 (STS/SMS series, Protocol 0): control table, sign-magnitude encodings, units, status bits.

One implementation, imported by the servo emulator (na_sim) and the arm driver (na_driver); the
same shape as :mod:`na_description.xm430`. Sources (docs/REFERENCES.md, STS3215): the Feetech
STS/SMS memory table, the Feetech SDK (``scservo_sdk``, PyPI feetech-servo-sdk 1.0.0, and its
SMS_STS application layer) and LeRobot's Feetech control table (``lerobot/motors/feetech/tables.py``).

Choices where those sources disagree or are silent:

* Baud Rate codes follow Feetech (5 = 76 800, 6 = 57 600, 7 = 38 400); LeRobot's table lists
  5 = 57 600, 6 = 38 400, 7 = 19 200.
* Sign-magnitude registers follow Feetech's SMS_STS layer: Present/Goal Position, Goal/Present
  Velocity and Present Current use bit 15, Present Load and Goal Time (PWM mode) bit 10, Homing
  Offset bit 11. LeRobot lists only Homing Offset and the velocities as signed, and names bit 11
  for Goal Time; we follow the vendor's layer.
* Minimum Startup Force is one 2-byte register at 24, as LeRobot reads it; Feetech's table has
  1 byte there and an integral limit at 25.
* Return Delay Time defaults to 0 (Feetech's table); 2 µs per unit.
* Defaults of the 12 V STS3215 (C018) where the datasheet gives no register value are marked
  "assumed" below (firmware version, Phase, protection thresholds, factory bytes 80-86).
* Present Load is the controller's output duty (0.1 % of full PWM, 1000 = 100 %), the sign in
  bit 10: the firmware reports the drive it commands, not a measured torque (see na_sim's
  STS3215 physics for the model).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from na_description.servo_state import ServoStates

MODEL_NUMBER = 777                     # read as one word at address 3 (bytes 3, 4 = 0x09, 0x03)
GEAR_RATIO = 345.0                     # C018 (12 V) and C001 (7.4 V): 1:345
STEPS_PER_REV = 4096                   # 12-bit magnetic encoder
POSITION_CENTER = 2048                 # steps; 0 rad of the servo angle
VELOCITY_UNIT_STEPS_S = 1.0            # Goal/Present Velocity: steps/s per unit
ACCELERATION_UNIT_STEPS_S2 = 100.0     # Acceleration (41): 100 steps/s^2 per unit (8.79 deg/s^2)
DUTY_FULL_SCALE = 1000                 # Present Load, Torque Limit, Goal Time (PWM): 0.1 % per unit
CURRENT_UNIT_A = 6.5e-3                # Present Current, Protection Current: A per unit
VOLTAGE_UNIT_V = 0.1                   # V per unit (one byte)
TEMPERATURE_UNIT_C = 1.0               # degC per unit
RETURN_DELAY_UNIT_S = 2e-6             # s per Return Delay Time unit
PROTECTION_TIME_UNIT_S = 0.010         # Protection Time / Over-current Protection Time: s per unit
PERCENT_UNIT = 0.01                    # Protective Torque / Overload Torque: fraction per unit (1 %)

# Datasheet figures of the 12 V STS3215 (C018), used to check the simulated servo.
STALL_TORQUE_12V = 30.0 * 0.0980665    # 30 kgf*cm = 2.94 N*m
STALL_CURRENT_12V = 2.7                # A
NO_LOAD_SPEED_12V_RPM = 45.0           # 0.222 s/60 deg
NO_LOAD_CURRENT_12V = 0.18             # A
BACKLASH_RAD = math.radians(0.5)       # datasheet: <= 0.5 deg

BAUD_RATES = {0: 1_000_000, 1: 500_000, 2: 250_000, 3: 128_000, 4: 115_200, 5: 76_800, 6: 57_600, 7: 38_400}
OPERATING_MODES = {0: "position", 1: "velocity", 2: "pwm", 3: "step"}
TORQUE_OFF, TORQUE_ON, TORQUE_CALIBRATE_MIDDLE = 0, 1, 128   # Torque Enable (40) values
REPORTS_LOAD = True                    # Present Load (60): a driver publishes it as ArmState.load

# Status (65) bits; the ERR byte of every status packet carries the same bits.
STATUS_VOLTAGE = 1 << 0
STATUS_ANGLE_SENSOR = 1 << 1
STATUS_OVERHEAT = 1 << 2
STATUS_OVERCURRENT = 1 << 3
STATUS_OVERLOAD = 1 << 5
STATUS_NAMES = {
    STATUS_VOLTAGE: "input voltage error",
    STATUS_ANGLE_SENSOR: "angle sensor error",
    STATUS_OVERHEAT: "overheat",
    STATUS_OVERCURRENT: "over-current",
    STATUS_OVERLOAD: "overload",
}
STATUS_MASK = sum(STATUS_NAMES)        # 0x2F


@dataclass(frozen=True)
class Register:
    address: int
    size: int                 # bytes, little-endian on the wire
    name: str
    writable: bool
    eeprom: bool              # EEPROM area: kept across a power cycle only when written with Lock = 0
    default: int = 0
    sign_bit: int | None = None   # sign-magnitude: this bit is the sign, the bits below the magnitude
    minimum: int | None = None
    maximum: int | None = None

    @property
    def end(self) -> int:
        return self.address + self.size

    @property
    def signed(self) -> bool:
        return self.sign_bit is not None


def _reg(address, size, name, access, area, default=0, sign=None, lo=None, hi=None) -> Register:
    return Register(address, size, name, access == "RW", area == "EE", default, sign, lo, hi)


# fmt: off
CONTROL_TABLE: tuple[Register, ...] = (
    _reg(0, 1, "firmware_major_version", "R", "EE", 3),           # assumed
    _reg(1, 1, "firmware_minor_version", "R", "EE", 10),          # assumed
    _reg(3, 2, "model_number", "R", "EE", MODEL_NUMBER),
    _reg(5, 1, "id", "RW", "EE", 1, lo=0, hi=253),
    _reg(6, 1, "baud_rate", "RW", "EE", 0, lo=0, hi=7),
    _reg(7, 1, "return_delay_time", "RW", "EE", 0, lo=0, hi=254),
    _reg(8, 1, "response_status_level", "RW", "EE", 1, lo=0, hi=1),
    _reg(9, 2, "min_position_limit", "RW", "EE", 0, lo=0, hi=4095),
    _reg(11, 2, "max_position_limit", "RW", "EE", 4095, lo=0, hi=4095),
    _reg(13, 1, "max_temperature_limit", "RW", "EE", 70, lo=0, hi=100),
    _reg(14, 1, "max_voltage_limit", "RW", "EE", 140, lo=0, hi=254),     # 12 V version: 14.0 V (assumed)
    _reg(15, 1, "min_voltage_limit", "RW", "EE", 40, lo=0, hi=254),      # 4.0 V
    _reg(16, 2, "max_torque_limit", "RW", "EE", 1000, lo=0, hi=1000),    # copied to Torque Limit at power-on
    _reg(18, 1, "phase", "RW", "EE", 0, lo=0, hi=255),                   # assumed; stored, not modelled
    _reg(19, 1, "unloading_condition", "RW", "EE", STATUS_OVERHEAT | STATUS_OVERCURRENT | STATUS_OVERLOAD,
         lo=0, hi=255),                                                    # assumed
    _reg(20, 1, "led_alarm_condition", "RW", "EE", STATUS_MASK, lo=0, hi=255),   # assumed
    _reg(21, 1, "p_coefficient", "RW", "EE", 32, lo=0, hi=254),
    _reg(22, 1, "d_coefficient", "RW", "EE", 32, lo=0, hi=254),
    _reg(23, 1, "i_coefficient", "RW", "EE", 0, lo=0, hi=254),
    _reg(24, 2, "minimum_startup_force", "RW", "EE", 16, lo=0, hi=1000),
    _reg(26, 1, "cw_dead_zone", "RW", "EE", 1, lo=0, hi=32),
    _reg(27, 1, "ccw_dead_zone", "RW", "EE", 1, lo=0, hi=32),
    _reg(28, 2, "protection_current", "RW", "EE", 500, lo=0, hi=2047),   # assumed (3.25 A)
    _reg(30, 1, "angular_resolution", "RW", "EE", 1, lo=1, hi=128),
    _reg(31, 2, "homing_offset", "RW", "EE", 0, sign=11, lo=-2047, hi=2047),
    _reg(33, 1, "operating_mode", "RW", "EE", 0, lo=0, hi=3),
    _reg(34, 1, "protective_torque", "RW", "EE", 20, lo=0, hi=100),      # % of full output after overload
    _reg(35, 1, "protection_time", "RW", "EE", 200, lo=0, hi=254),       # 10 ms units
    _reg(36, 1, "overload_torque", "RW", "EE", 80, lo=0, hi=100),        # % of full output
    _reg(37, 1, "velocity_p_coefficient", "RW", "EE", 10, lo=0, hi=254),   # assumed
    _reg(38, 1, "over_current_protection_time", "RW", "EE", 200, lo=0, hi=254),
    _reg(39, 1, "velocity_i_coefficient", "RW", "EE", 200, lo=0, hi=254),  # assumed
    _reg(40, 1, "torque_enable", "RW", "RAM", TORQUE_OFF, lo=0, hi=TORQUE_CALIBRATE_MIDDLE),
    _reg(41, 1, "acceleration", "RW", "RAM", 0, lo=0, hi=254),
    _reg(42, 2, "goal_position", "RW", "RAM", 0, sign=15, lo=-32767, hi=32767),
    _reg(44, 2, "goal_time", "RW", "RAM", 0, sign=10, lo=-1000, hi=1000),        # PWM mode: duty
    _reg(46, 2, "goal_velocity", "RW", "RAM", 0, sign=15, lo=-32767, hi=32767),
    _reg(48, 2, "torque_limit", "RW", "RAM", 1000, lo=0, hi=1000),
    _reg(55, 1, "lock", "RW", "RAM", 1, lo=0, hi=1),
    _reg(56, 2, "present_position", "R", "RAM", 0, sign=15),
    _reg(58, 2, "present_velocity", "R", "RAM", 0, sign=15),
    _reg(60, 2, "present_load", "R", "RAM", 0, sign=10),
    _reg(62, 1, "present_voltage", "R", "RAM", 0),
    _reg(63, 1, "present_temperature", "R", "RAM", 0),
    _reg(64, 1, "async_write_flag", "R", "RAM", 0),       # 1 while a Reg Write waits for Action
    _reg(65, 1, "status", "R", "RAM", 0),
    _reg(66, 1, "moving", "R", "RAM", 0),
    _reg(69, 2, "present_current", "R", "RAM", 0, sign=15),
    # Factory area: kept like EEPROM (LeRobot unlocks the EEPROM to make Maximum Acceleration persist).
    _reg(80, 1, "moving_velocity_threshold", "RW", "EE", 2, lo=0, hi=254),       # assumed
    _reg(81, 1, "dts", "RW", "EE", 32, lo=0, hi=254),                            # assumed
    _reg(82, 1, "velocity_unit_factor", "RW", "EE", 1, lo=0, hi=254),            # assumed
    _reg(83, 1, "hts", "RW", "EE", 0, lo=0, hi=254),
    _reg(84, 1, "maximum_velocity_limit", "RW", "EE", 62, lo=0, hi=254),         # assumed (x 0.732 rpm)
    _reg(85, 1, "maximum_acceleration", "RW", "EE", 100, lo=0, hi=254),          # assumed
    _reg(86, 1, "acceleration_multiplier", "RW", "EE", 0, lo=0, hi=254),         # assumed
)
# fmt: on
REGISTERS: dict[str, Register] = {r.name: r for r in CONTROL_TABLE}
CONTROL_TABLE_SIZE = 256               # one-byte addresses; bytes no register owns read 0

# The block the driver reads every cycle with one Sync Read: Present Position .. Present Current.
STATE_BLOCK_START = REGISTERS["present_position"].address                      # 56
STATE_BLOCK_LENGTH = REGISTERS["present_current"].end - STATE_BLOCK_START      # 15 bytes (56-70)
# Register name -> byte offset in the state block.
STATE_OFFSETS: dict[str, int] = {r.name: r.address - STATE_BLOCK_START for r in CONTROL_TABLE
                                 if STATE_BLOCK_START <= r.address < STATE_BLOCK_START + STATE_BLOCK_LENGTH}
# The goal block a driver writes with one Sync Write: Acceleration .. Goal Velocity (SMS_STS WritePosEx).
GOAL_BLOCK_START = REGISTERS["acceleration"].address                           # 41
GOAL_BLOCK_LENGTH = REGISTERS["goal_velocity"].end - GOAL_BLOCK_START          # 7 bytes (41-47)


# ---- sign-magnitude ------------------------------------------------------------------------
def encode_sign_magnitude(value: int, sign_bit: int) -> int:
    """Signed integer -> register word: magnitude in the bits below ``sign_bit``, the sign in that bit."""
    value = int(value)
    if abs(value) >= 1 << sign_bit:
        raise ValueError(f"{value} does not fit a sign-magnitude field with the sign in bit {sign_bit}")
    return (-value) | (1 << sign_bit) if value < 0 else value


def decode_sign_magnitude(raw: int, sign_bit: int) -> int:
    """Register word -> signed integer (the sign bit set means negative)."""
    raw = int(raw)
    return -(raw & ~(1 << sign_bit)) if raw & (1 << sign_bit) else raw


# ---- register (de)serialisation ------------------------------------------------------------
def encode_value(register: Register, value: int) -> bytes:
    """Register value -> its little-endian bytes (sign-magnitude where the register has a sign bit)."""
    value = int(value)
    if register.sign_bit is not None:
        value = encode_sign_magnitude(value, register.sign_bit)
    if not 0 <= value < 1 << (8 * register.size):
        raise ValueError(f"{register.name}={value} does not fit {register.size} byte(s)")
    return value.to_bytes(register.size, "little")


def decode_value(register: Register, raw: bytes | bytearray | memoryview) -> int:
    word = int.from_bytes(bytes(raw[: register.size]), "little")
    return word if register.sign_bit is None else decode_sign_magnitude(word, register.sign_bit)


def decode_status(byte: int) -> list[str]:
    """Names of the set Status / ERR bits."""
    return [name for bit, name in STATUS_NAMES.items() if byte & bit]


# ---- unit conversions (vectorised; servo units <-> SI) ----------------------------------------
_RAD_PER_STEP = 2 * np.pi / STEPS_PER_REV


def steps_to_rad(steps):
    """Present/Goal Position (steps, 2048 = 0 rad) -> servo angle (rad)."""
    return (np.asarray(steps, dtype=float) - POSITION_CENTER) * _RAD_PER_STEP


def rad_to_steps(angle):
    """Servo angle (rad) -> position steps, rounded to the nearest step."""
    return np.rint(np.asarray(angle, dtype=float) / _RAD_PER_STEP + POSITION_CENTER).astype(np.int64)


def velocity_units_to_rad_s(units):
    return np.asarray(units, dtype=float) * (VELOCITY_UNIT_STEPS_S * _RAD_PER_STEP)


def rad_s_to_velocity_units(rad_s):
    return np.rint(np.asarray(rad_s, dtype=float) / (VELOCITY_UNIT_STEPS_S * _RAD_PER_STEP)).astype(np.int64)


def acceleration_units_to_rad_s2(units):
    return np.asarray(units, dtype=float) * (ACCELERATION_UNIT_STEPS_S2 * _RAD_PER_STEP)


def load_units_to_fraction(units):
    """Present Load (signed, 0.1 %) -> signed fraction of full output (-1 ... 1)."""
    return np.asarray(units, dtype=float) / DUTY_FULL_SCALE


def fraction_to_load_units(fraction):
    return np.rint(np.asarray(fraction, dtype=float) * DUTY_FULL_SCALE).astype(np.int64)


def current_units_to_amp(units):
    return np.asarray(units, dtype=float) * CURRENT_UNIT_A


def amp_to_current_units(amp):
    return np.rint(np.asarray(amp, dtype=float) / CURRENT_UNIT_A).astype(np.int64)


def voltage_units_to_volt(units):
    return np.asarray(units, dtype=float) * VOLTAGE_UNIT_V


def volt_to_voltage_units(volt):
    return np.rint(np.asarray(volt, dtype=float) / VOLTAGE_UNIT_V).astype(np.int64)


# ---- the per-cycle state block (Present Position .. Present Current) --------------------------
def _field(blocks: Sequence[bytes], offsets: Mapping[str, int], name: str) -> list[int]:
    """One register's value in each block; ``offsets`` maps register name -> byte offset in a block."""
    register, offset = REGISTERS[name], offsets[name]
    return [decode_value(register, block[offset: offset + register.size]) for block in blocks]


def decode_states(blocks: Sequence[bytes], offsets: Mapping[str, int] = STATE_OFFSETS) -> ServoStates:
    """The present state of each servo, SI, from its state block. Present Load is the output duty the firmware
    applies: it is both ``load`` and ``pwm``. ``error``: the Status bits (:data:`STATUS_MASK`)."""
    def field(name: str) -> list[int]:
        return _field(blocks, offsets, name)

    load = load_units_to_fraction(field("present_load"))
    return ServoStates(
        position=steps_to_rad(field("present_position")),
        velocity=velocity_units_to_rad_s(field("present_velocity")),
        current=current_units_to_amp(field("present_current")),
        pwm=load,
        load=load,
        input_voltage=voltage_units_to_volt(field("present_voltage")),
        temperature=np.asarray(field("present_temperature"), dtype=float) * TEMPERATURE_UNIT_C,
        error=np.asarray(field("status"), dtype=np.int64) & STATUS_MASK)


@dataclass(frozen=True)
class StateBlock:
    """One servo's state block decoded to SI, servo side (after its Homing Offset, before the robot's homing)."""

    position: float            # rad (2048 steps = 0)
    velocity: float            # rad/s
    load: float                # signed fraction of full output duty, -1 ... 1
    input_voltage: float       # V
    temperature: float         # degC
    status: int                # Status bits (STATUS_*)
    moving: bool
    current: float             # A, signed


def decode_state_block(raw: bytes | bytearray | memoryview, start: int = STATE_BLOCK_START) -> StateBlock:
    """Decode the bytes read from ``start`` (default 56) through Present Current (70): one servo's
    :func:`decode_states`, its whole Status byte and Moving."""
    raw = bytes(raw)
    needed = STATE_BLOCK_START + STATE_BLOCK_LENGTH - start
    if start > STATE_BLOCK_START or len(raw) < needed:
        raise ValueError(f"state block needs {needed} bytes from address {start}, got {len(raw)}")
    offsets = {name: offset + STATE_BLOCK_START - start for name, offset in STATE_OFFSETS.items()}
    state = decode_states([raw], offsets)
    return StateBlock(
        position=float(state.position[0]),
        velocity=float(state.velocity[0]),
        load=float(state.load[0]),
        input_voltage=float(state.input_voltage[0]),
        temperature=float(state.temperature[0]),
        status=_field([raw], offsets, "status")[0],
        moving=bool(_field([raw], offsets, "moving")[0]),
        current=float(state.current[0]),
    )
