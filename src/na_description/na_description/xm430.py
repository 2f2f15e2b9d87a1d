"""DYNAMIXEL XM430-W350 (Protocol 2.0): control table, unit conversions and status bits.

One implementation, imported by the servo emulator (na_sim) and the arm driver (na_driver).
Source of the numbers: ROBOTIS e-manual for the XM430-W350 (docs/REFERENCES.md, XM430-W350).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from na_description.servo_state import ServoStates

MODEL_NUMBER = 1020
GEAR_RATIO = 353.5
PULSES_PER_REV = 4096
POSITION_CENTER = 2048                 # pulses; 0 rad in position mode
VELOCITY_UNIT_RPM = 0.229              # rpm per velocity unit
CURRENT_UNIT_A = 2.69e-3               # A per current unit
PWM_UNIT_FRACTION = 0.00113            # fraction of full duty per PWM unit (0.113 %)
PWM_FULL_SCALE = 885                   # PWM units at 100 % duty
VOLTAGE_UNIT_V = 0.1                   # V per voltage unit
TEMPERATURE_UNIT_C = 1.0               # degC per unit
RETURN_DELAY_UNIT_S = 2e-6             # s per Return Delay Time unit
PROFILE_ACCEL_UNIT_RPM2 = 214.577      # rev/min^2 per Profile Acceleration unit
BUS_WATCHDOG_UNIT_S = 0.020            # s per Bus Watchdog unit
BUS_WATCHDOG_EXPIRED = -1              # Bus Watchdog value while its error is latched (e-manual, Bus Watchdog)
BUS_WATCHDOG_MAX_UNITS = 127           # longest watchdog time: 127 x 20 ms = 2.54 s
FIRMWARE_BUS_WATCHDOG = 38             # first firmware with the Bus Watchdog (e-manual, Bus Watchdog)
FIRMWARE_FAST_SYNC_READ = 45           # first firmware answering Fast Sync Read (0x8A)
REPORTS_LOAD = False                   # no load register: a driver publishes ArmState.load empty

# Stall and no-load figures at 12 V (datasheet), used to check the simulated servo.
STALL_TORQUE_12V = 4.1                 # N*m
STALL_CURRENT_12V = 2.3                # A
NO_LOAD_SPEED_12V_RPM = 46.0           # rpm
BACKLASH_RAD = math.radians(15.0 / 60.0)

BAUD_RATES = {0: 9_600, 1: 57_600, 2: 115_200, 3: 1_000_000, 4: 2_000_000, 5: 3_000_000,
              6: 4_000_000, 7: 4_500_000}
OPERATING_MODES = {0: "current", 1: "velocity", 3: "position", 4: "extended_position",
                   5: "current_based_position", 16: "pwm"}

# Hardware Error Status (address 70) and Shutdown (address 63) bits.
HW_ERROR_INPUT_VOLTAGE = 1 << 0
HW_ERROR_OVERHEATING = 1 << 2
HW_ERROR_MOTOR_ENCODER = 1 << 3
HW_ERROR_ELECTRICAL_SHOCK = 1 << 4
HW_ERROR_OVERLOAD = 1 << 5
HARDWARE_ERROR_NAMES = {
    HW_ERROR_INPUT_VOLTAGE: "input voltage error",
    HW_ERROR_OVERHEATING: "overheating",
    HW_ERROR_MOTOR_ENCODER: "motor encoder error",
    HW_ERROR_ELECTRICAL_SHOCK: "electrical shock",
    HW_ERROR_OVERLOAD: "overload",
}

# Status packet ERR byte.
STATUS_ALERT = 0x80
STATUS_ERRORS = {1: "result fail", 2: "instruction error", 3: "CRC error", 4: "data range error",
                 5: "data length error", 6: "data limit error", 7: "access error"}


@dataclass(frozen=True)
class Register:
    address: int
    size: int                 # bytes, little-endian on the wire
    name: str
    writable: bool
    eeprom: bool              # EEPROM area: writable only with torque off
    default: int = 0
    signed: bool = False
    minimum: int | None = None
    maximum: int | None = None

    @property
    def end(self) -> int:
        return self.address + self.size


def _reg(address, size, name, access, area, default=0, signed=False, lo=None, hi=None) -> Register:
    return Register(address, size, name, access == "RW", area == "EE", default, signed, lo, hi)


# fmt: off
CONTROL_TABLE: tuple[Register, ...] = (
    _reg(0, 2, "model_number", "R", "EE", MODEL_NUMBER),
    _reg(2, 4, "model_information", "R", "EE", 0),
    _reg(6, 1, "firmware_version", "R", "EE", 48),
    _reg(7, 1, "id", "RW", "EE", 1, lo=0, hi=252),
    _reg(8, 1, "baud_rate", "RW", "EE", 1, lo=0, hi=7),
    _reg(9, 1, "return_delay_time", "RW", "EE", 250, lo=0, hi=254),
    _reg(10, 1, "drive_mode", "RW", "EE", 0, lo=0, hi=13),
    _reg(11, 1, "operating_mode", "RW", "EE", 3, lo=0, hi=16),
    _reg(12, 1, "secondary_id", "RW", "EE", 255, lo=0, hi=255),
    _reg(13, 1, "protocol_type", "RW", "EE", 2, lo=1, hi=2),
    _reg(20, 4, "homing_offset", "RW", "EE", 0, signed=True, lo=-1_044_479, hi=1_044_479),
    _reg(24, 4, "moving_threshold", "RW", "EE", 10, lo=0, hi=1023),
    _reg(31, 1, "temperature_limit", "RW", "EE", 80, lo=0, hi=100),
    _reg(32, 2, "max_voltage_limit", "RW", "EE", 160, lo=95, hi=160),
    _reg(34, 2, "min_voltage_limit", "RW", "EE", 95, lo=95, hi=160),
    _reg(36, 2, "pwm_limit", "RW", "EE", PWM_FULL_SCALE, lo=0, hi=PWM_FULL_SCALE),
    _reg(38, 2, "current_limit", "RW", "EE", 1193, lo=0, hi=1193),
    _reg(44, 4, "velocity_limit", "RW", "EE", 200, lo=0, hi=1023),
    _reg(48, 4, "max_position_limit", "RW", "EE", 4095, lo=0, hi=4095),
    _reg(52, 4, "min_position_limit", "RW", "EE", 0, lo=0, hi=4095),
    _reg(60, 1, "startup_configuration", "RW", "EE", 0, lo=0, hi=3),
    _reg(63, 1, "shutdown", "RW", "EE", HW_ERROR_OVERHEATING | HW_ERROR_ELECTRICAL_SHOCK | HW_ERROR_OVERLOAD,
         lo=0, hi=255),
    _reg(64, 1, "torque_enable", "RW", "RAM", 0, lo=0, hi=1),
    _reg(65, 1, "led", "RW", "RAM", 0, lo=0, hi=1),
    _reg(68, 1, "status_return_level", "RW", "RAM", 2, lo=0, hi=2),
    _reg(69, 1, "registered_instruction", "R", "RAM", 0),
    _reg(70, 1, "hardware_error_status", "R", "RAM", 0),
    _reg(76, 2, "velocity_i_gain", "RW", "RAM", 1920, lo=0, hi=16383),
    _reg(78, 2, "velocity_p_gain", "RW", "RAM", 100, lo=0, hi=16383),
    _reg(80, 2, "position_d_gain", "RW", "RAM", 0, lo=0, hi=16383),
    _reg(82, 2, "position_i_gain", "RW", "RAM", 0, lo=0, hi=16383),
    _reg(84, 2, "position_p_gain", "RW", "RAM", 800, lo=0, hi=16383),
    _reg(88, 2, "feedforward_2nd_gain", "RW", "RAM", 0, lo=0, hi=16383),
    _reg(90, 2, "feedforward_1st_gain", "RW", "RAM", 0, lo=0, hi=16383),
    _reg(98, 1, "bus_watchdog", "RW", "RAM", 0, signed=True, lo=0, hi=127),     # reads -1 once expired
    _reg(100, 2, "goal_pwm", "RW", "RAM", 0, signed=True, lo=-PWM_FULL_SCALE, hi=PWM_FULL_SCALE),
    _reg(102, 2, "goal_current", "RW", "RAM", 0, signed=True, lo=-1193, hi=1193),
    _reg(104, 4, "goal_velocity", "RW", "RAM", 0, signed=True, lo=-1023, hi=1023),
    _reg(108, 4, "profile_acceleration", "RW", "RAM", 0, lo=0, hi=32767),
    _reg(112, 4, "profile_velocity", "RW", "RAM", 0, lo=0, hi=32767),
    _reg(116, 4, "goal_position", "RW", "RAM", 0, signed=True, lo=-1_048_575, hi=1_048_575),
    _reg(120, 2, "realtime_tick", "R", "RAM", 0),
    _reg(122, 1, "moving", "R", "RAM", 0),
    _reg(123, 1, "moving_status", "R", "RAM", 0),
    _reg(124, 2, "present_pwm", "R", "RAM", 0, signed=True),
    _reg(126, 2, "present_current", "R", "RAM", 0, signed=True),
    _reg(128, 4, "present_velocity", "R", "RAM", 0, signed=True),
    _reg(132, 4, "present_position", "R", "RAM", 0, signed=True),
    _reg(136, 4, "velocity_trajectory", "R", "RAM", 0, signed=True),
    _reg(140, 4, "position_trajectory", "R", "RAM", 0, signed=True),
    _reg(144, 2, "present_input_voltage", "R", "RAM", 0),
    _reg(146, 1, "present_temperature", "R", "RAM", 0),
    _reg(147, 1, "backup_ready", "R", "RAM", 0),
    *(_reg(168 + 2 * k, 2, f"indirect_address_{k + 1}", "RW", "RAM", 224 + k, lo=64, hi=661) for k in range(28)),
    *(_reg(224 + k, 1, f"indirect_data_{k + 1}", "RW", "RAM", 0) for k in range(28)),
)
# fmt: on
REGISTERS: dict[str, Register] = {r.name: r for r in CONTROL_TABLE}
CONTROL_TABLE_SIZE = 256               # bytes of the table the emulator holds (addresses 0-255)

# The block the driver reads every cycle with one Sync Read: Present PWM .. Present Temperature.
STATE_BLOCK_START = REGISTERS["present_pwm"].address                   # 124
STATE_BLOCK_LENGTH = REGISTERS["present_temperature"].end - STATE_BLOCK_START  # 23 bytes (124-146)
# Register name -> byte offset in the state block.
STATE_OFFSETS: dict[str, int] = {r.name: r.address - STATE_BLOCK_START for r in CONTROL_TABLE
                                 if STATE_BLOCK_START <= r.address < STATE_BLOCK_START + STATE_BLOCK_LENGTH}


# ---- unit conversions (vectorised; servo units <-> SI) ----------------------------------
def pulses_to_rad(pulses):
    """Present/Goal Position (pulses, 2048 = 0 rad) -> servo angle (rad)."""
    return (np.asarray(pulses, dtype=float) - POSITION_CENTER) * (2 * np.pi / PULSES_PER_REV)


def rad_to_pulses(angle):
    """Servo angle (rad) -> position pulses, rounded to the nearest pulse."""
    return np.rint(np.asarray(angle, dtype=float) * (PULSES_PER_REV / (2 * np.pi)) + POSITION_CENTER).astype(
        np.int64)


def velocity_units_to_rad_s(units):
    return np.asarray(units, dtype=float) * (VELOCITY_UNIT_RPM * 2 * np.pi / 60.0)


def rad_s_to_velocity_units(rad_s):
    return np.rint(np.asarray(rad_s, dtype=float) / (VELOCITY_UNIT_RPM * 2 * np.pi / 60.0)).astype(np.int64)


def current_units_to_amp(units):
    return np.asarray(units, dtype=float) * CURRENT_UNIT_A


def amp_to_current_units(amp):
    return np.rint(np.asarray(amp, dtype=float) / CURRENT_UNIT_A).astype(np.int64)


def pwm_units_to_fraction(units):
    """Present/Goal PWM -> signed duty fraction (-1 ... 1)."""
    return np.asarray(units, dtype=float) / PWM_FULL_SCALE


def fraction_to_pwm_units(fraction):
    return np.rint(np.asarray(fraction, dtype=float) * PWM_FULL_SCALE).astype(np.int64)


def voltage_units_to_volt(units):
    return np.asarray(units, dtype=float) * VOLTAGE_UNIT_V


def volt_to_voltage_units(volt):
    return np.rint(np.asarray(volt, dtype=float) / VOLTAGE_UNIT_V).astype(np.int64)


# ---- little-endian register (de)serialisation --------------------------------------------
def encode_value(register: Register, value: int) -> bytes:
    """Register value -> its little-endian bytes (two's complement when signed)."""
    return int(value).to_bytes(register.size, "little", signed=register.signed and value < 0)


def decode_value(register: Register, raw: bytes | bytearray | memoryview) -> int:
    return int.from_bytes(bytes(raw[: register.size]), "little", signed=register.signed)


def decode_hardware_error(byte: int) -> list[str]:
    """Names of the set Hardware Error Status bits."""
    return [name for bit, name in HARDWARE_ERROR_NAMES.items() if byte & bit]


# ---- the per-cycle state block (Present PWM .. Present Temperature) ----------------------
def _field(blocks: Sequence[bytes], offsets: Mapping[str, int], name: str) -> list[int]:
    """One register's value in each block; ``offsets`` maps register name -> byte offset in a block."""
    register, offset = REGISTERS[name], offsets[name]
    return [decode_value(register, block[offset: offset + register.size]) for block in blocks]


def decode_states(blocks: Sequence[bytes], offsets: Mapping[str, int] = STATE_OFFSETS,
                  errors: Sequence[int] | None = None) -> ServoStates:
    """Present PWM, Current, Velocity, Position, Input Voltage and Temperature of each servo, SI, from blocks
    that hold them at ``offsets`` (the state block, or a driver's indirect block). Hardware Error Status is not
    in these blocks: ``errors`` gives it per servo (default 0). There is no load register: ``load`` is NaN."""
    def field(name: str) -> list[int]:
        return _field(blocks, offsets, name)

    return ServoStates(
        position=pulses_to_rad(field("present_position")),
        velocity=velocity_units_to_rad_s(field("present_velocity")),
        current=current_units_to_amp(field("present_current")),
        pwm=pwm_units_to_fraction(field("present_pwm")),
        load=np.full(len(blocks), np.nan),
        input_voltage=voltage_units_to_volt(field("present_input_voltage")),
        temperature=np.asarray(field("present_temperature"), dtype=float) * TEMPERATURE_UNIT_C,
        error=np.zeros(len(blocks), dtype=np.int64) if errors is None else np.asarray(errors, dtype=np.int64))


@dataclass(frozen=True)
class StateBlock:
    """One servo's state block decoded to SI, servo side (before homing/direction)."""

    pwm: float                 # fraction of full duty, -1 ... 1
    current: float             # A
    velocity: float            # rad/s
    position: float            # rad (2048 pulses = 0)
    velocity_trajectory: float  # rad/s
    position_trajectory: float  # rad
    input_voltage: float       # V
    temperature: float         # degC


def decode_state_block(raw: bytes | bytearray | memoryview, start: int = STATE_BLOCK_START) -> StateBlock:
    """Decode the bytes read from ``start`` (default 124) through Present Temperature (146): one servo's
    :func:`decode_states` and the two trajectory registers."""
    raw = bytes(raw)
    if len(raw) < STATE_BLOCK_START + STATE_BLOCK_LENGTH - start:
        raise ValueError(f"state block needs {STATE_BLOCK_START + STATE_BLOCK_LENGTH - start} bytes, got {len(raw)}")
    offsets = {name: offset + STATE_BLOCK_START - start for name, offset in STATE_OFFSETS.items()}
    state = decode_states([raw], offsets)
    return StateBlock(
        pwm=float(state.pwm[0]),
        current=float(state.current[0]),
        velocity=float(state.velocity[0]),
        position=float(state.position[0]),
        velocity_trajectory=float(velocity_units_to_rad_s(_field([raw], offsets, "velocity_trajectory")[0])),
        position_trajectory=float(pulses_to_rad(_field([raw], offsets, "position_trajectory")[0])),
        input_voltage=float(state.input_voltage[0]),
        temperature=float(state.temperature[0]),
    )
