"""STS3215 control table, sign-magnitude encodings (checked against the Feetech SDK's own helpers) and units.

Choices where the public sources disagree (na_description.sts3215): Baud Rate codes as Feetech's
(6 = 57 600, not LeRobot's 5), Goal Time's sign in bit 10 as the vendor's SMS_STS layer (LeRobot
says 11), Present Current signed in bit 15, Minimum Startup Force 2 bytes as LeRobot reads it.
"""

from __future__ import annotations

import numpy as np
import pytest
import scservo_sdk

from na_description import sts3215


def test_control_table_has_no_overlaps_and_fits() -> None:
    occupied: dict[int, str] = {}
    for reg in sts3215.CONTROL_TABLE:
        for addr in range(reg.address, reg.end):
            assert addr not in occupied, f"{reg.name} overlaps {occupied[addr]} at {addr}"
            occupied[addr] = reg.name
        assert reg.end <= sts3215.CONTROL_TABLE_SIZE
        assert reg.minimum is None or reg.minimum <= reg.default <= reg.maximum or not reg.writable


# (address, size) typed in from the STS/SMS memory table (Feetech; LeRobot's feetech/tables.py agrees).
@pytest.mark.parametrize(("name", "address", "size"), [
    ("firmware_major_version", 0, 1), ("model_number", 3, 2), ("id", 5, 1), ("baud_rate", 6, 1),
    ("return_delay_time", 7, 1), ("response_status_level", 8, 1), ("min_position_limit", 9, 2),
    ("max_position_limit", 11, 2), ("max_temperature_limit", 13, 1), ("max_torque_limit", 16, 2),
    ("p_coefficient", 21, 1), ("d_coefficient", 22, 1), ("i_coefficient", 23, 1), ("protection_current", 28, 2),
    ("homing_offset", 31, 2), ("operating_mode", 33, 1), ("overload_torque", 36, 1), ("torque_enable", 40, 1),
    ("acceleration", 41, 1), ("goal_position", 42, 2), ("goal_time", 44, 2), ("goal_velocity", 46, 2),
    ("torque_limit", 48, 2), ("lock", 55, 1), ("present_position", 56, 2), ("present_velocity", 58, 2),
    ("present_load", 60, 2), ("present_voltage", 62, 1), ("present_temperature", 63, 1), ("status", 65, 1),
    ("moving", 66, 1), ("present_current", 69, 2), ("maximum_acceleration", 85, 1),
])
def test_memory_table_addresses(name: str, address: int, size: int) -> None:
    reg = sts3215.REGISTERS[name]
    assert (reg.address, reg.size) == (address, size)


def test_eeprom_and_ram_areas() -> None:
    eeprom = {r.name for r in sts3215.CONTROL_TABLE if r.eeprom}
    assert {"id", "baud_rate", "homing_offset", "operating_mode", "p_coefficient", "maximum_acceleration"} <= eeprom
    assert not {"torque_enable", "goal_position", "lock", "present_load"} & eeprom
    assert all(r.address < 40 or r.address >= 80 for r in sts3215.CONTROL_TABLE if r.eeprom)


def test_state_and_goal_blocks() -> None:
    assert (sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_LENGTH) == (56, 15)
    assert (sts3215.GOAL_BLOCK_START, sts3215.GOAL_BLOCK_LENGTH) == (41, 7)


@pytest.mark.parametrize(("name", "bit"), [
    ("present_position", 15), ("goal_position", 15), ("present_velocity", 15), ("goal_velocity", 15),
    ("present_load", 10), ("goal_time", 10), ("homing_offset", 11), ("present_current", 15),
])
def test_sign_magnitude_matches_the_feetech_sdk(name: str, bit: int) -> None:
    reg = sts3215.REGISTERS[name]
    assert reg.sign_bit == bit
    for value in (-((1 << bit) - 1), -1000, -2, -1, 0, 1, 2, 1000, (1 << bit) - 1):
        if abs(value) >= 1 << bit:
            continue
        word = sts3215.encode_sign_magnitude(value, bit)
        assert word == scservo_sdk.SCS_TOSCS(value, bit)
        assert scservo_sdk.SCS_TOHOST(word, bit) == value
        raw = sts3215.encode_value(reg, value)
        assert raw == bytes([scservo_sdk.SCS_LOBYTE(word), scservo_sdk.SCS_HIBYTE(word)])
        assert sts3215.decode_value(reg, raw) == value


def test_sign_magnitude_by_hand() -> None:
    assert sts3215.encode_value(sts3215.REGISTERS["present_load"], -250) == bytes([250, 0x04])   # bit 10
    assert sts3215.encode_value(sts3215.REGISTERS["homing_offset"], -1) == bytes([0x01, 0x08])   # bit 11
    assert sts3215.encode_value(sts3215.REGISTERS["goal_position"], -5) == bytes([0x05, 0x80])   # bit 15
    assert sts3215.decode_value(sts3215.REGISTERS["present_velocity"], bytes([0x10, 0x80])) == -16
    assert sts3215.decode_value(sts3215.REGISTERS["model_number"], bytes([0x09, 0x03])) == 777


def test_values_that_do_not_fit_are_errors() -> None:
    with pytest.raises(ValueError, match="bit 11"):
        sts3215.encode_value(sts3215.REGISTERS["homing_offset"], 2048)
    with pytest.raises(ValueError, match="does not fit"):
        sts3215.encode_value(sts3215.REGISTERS["id"], 256)
    with pytest.raises(ValueError, match="does not fit"):
        sts3215.encode_value(sts3215.REGISTERS["id"], -1)


def test_unit_conversions() -> None:
    assert sts3215.steps_to_rad(2048) == 0.0
    assert sts3215.steps_to_rad(3072) == pytest.approx(np.pi / 2)
    assert sts3215.rad_to_steps(-np.pi / 2) == 1024
    steps = np.arange(0, 4096, 41)
    np.testing.assert_array_equal(sts3215.rad_to_steps(sts3215.steps_to_rad(steps)), steps)
    assert sts3215.velocity_units_to_rad_s(4096) == pytest.approx(2 * np.pi)
    assert sts3215.rad_s_to_velocity_units(np.pi) == 2048
    assert sts3215.acceleration_units_to_rad_s2(1) == pytest.approx(100 * 2 * np.pi / 4096)
    assert sts3215.load_units_to_fraction(-1000) == -1.0
    assert sts3215.fraction_to_load_units(0.25) == 250
    assert sts3215.current_units_to_amp(100) == pytest.approx(0.65)
    assert sts3215.amp_to_current_units(2.7) == 415
    assert sts3215.voltage_units_to_volt(121) == pytest.approx(12.1)
    assert sts3215.volt_to_voltage_units(7.4) == 74


def test_datasheet_figures_of_the_12v_version() -> None:
    assert abs(sts3215.STALL_TORQUE_12V - 2.94) < 0.01                   # 30 kgf*cm
    assert sts3215.GEAR_RATIO == 345
    assert abs(sts3215.NO_LOAD_SPEED_12V_RPM / (60 / 0.222 / 6) - 1) < 0.01   # 0.222 s / 60 deg
    assert sts3215.BAUD_RATES[0] == 1_000_000 and sts3215.BAUD_RATES[5] == 76_800 and sts3215.BAUD_RATES[6] == 57_600


def test_status_bits_match_the_sdk_error_bits() -> None:
    sdk = scservo_sdk
    assert sts3215.STATUS_VOLTAGE == sdk.ERRBIT_VOLTAGE
    assert sts3215.STATUS_ANGLE_SENSOR == sdk.ERRBIT_ANGLE
    assert sts3215.STATUS_OVERHEAT == sdk.ERRBIT_OVERHEAT
    assert sts3215.STATUS_OVERCURRENT == sdk.ERRBIT_OVERELE
    assert sts3215.STATUS_OVERLOAD == sdk.ERRBIT_OVERLOAD
    assert sts3215.decode_status(0) == []
    assert sts3215.decode_status(0b100100) == ["overheat", "overload"]


def test_state_block_decodes_a_hand_built_reply() -> None:
    raw = bytearray(15)
    raw[0:2] = (3072).to_bytes(2, "little")                    # present position
    raw[2:4] = (0x8000 | 100).to_bytes(2, "little")            # present velocity -100 steps/s
    raw[4:6] = (0x0400 | 300).to_bytes(2, "little")            # present load -30 %
    raw[6] = 121                                               # 12.1 V
    raw[7] = 38                                                # degC
    raw[9] = sts3215.STATUS_OVERLOAD
    raw[10] = 1                                                # moving
    raw[13:15] = (0x8000 | 200).to_bytes(2, "little")          # present current -1.3 A
    state = sts3215.decode_state_block(bytes(raw))
    assert state.position == pytest.approx(np.pi / 2)
    assert state.velocity == pytest.approx(-100 * 2 * np.pi / 4096)
    assert state.load == pytest.approx(-0.3)
    assert state.input_voltage == pytest.approx(12.1)
    assert state.temperature == 38.0
    assert state.status == sts3215.STATUS_OVERLOAD and state.moving
    assert state.current == pytest.approx(-1.3)
    with pytest.raises(ValueError, match="15 bytes"):
        sts3215.decode_state_block(bytes(14))
