"""XM430 control table and unit conversions."""

from __future__ import annotations

import numpy as np
import pytest

from na_description import xm430


def test_control_table_has_no_overlaps_and_fits() -> None:
    occupied: dict[int, str] = {}
    for reg in xm430.CONTROL_TABLE:
        for addr in range(reg.address, reg.end):
            assert addr not in occupied, f"{reg.name} overlaps {occupied[addr]} at {addr}"
            occupied[addr] = reg.name
        assert reg.end <= xm430.CONTROL_TABLE_SIZE


@pytest.mark.parametrize(("name", "address", "size"), [
    ("model_number", 0, 2), ("return_delay_time", 9, 1), ("operating_mode", 11, 1), ("homing_offset", 20, 4),
    ("current_limit", 38, 2), ("torque_enable", 64, 1), ("hardware_error_status", 70, 1),
    ("position_p_gain", 84, 2), ("goal_position", 116, 4), ("present_pwm", 124, 2), ("present_current", 126, 2),
    ("present_velocity", 128, 4), ("present_position", 132, 4), ("present_input_voltage", 144, 2),
    ("present_temperature", 146, 1),
])
def test_datasheet_addresses(name: str, address: int, size: int) -> None:
    reg = xm430.REGISTERS[name]
    assert (reg.address, reg.size) == (address, size)


def test_state_block_spans_present_pwm_to_temperature() -> None:
    assert xm430.STATE_BLOCK_START == 124
    assert xm430.STATE_BLOCK_START + xm430.STATE_BLOCK_LENGTH == 147


def test_unit_conversions() -> None:
    assert xm430.pulses_to_rad(2048) == 0.0
    assert xm430.pulses_to_rad(3072) == pytest.approx(np.pi / 2)
    assert xm430.rad_to_pulses(-np.pi / 2) == 1024
    assert xm430.current_units_to_amp(1193) == pytest.approx(3.209, abs=1e-3)
    assert xm430.velocity_units_to_rad_s(200) == pytest.approx(200 * 0.229 * 2 * np.pi / 60)
    assert xm430.pwm_units_to_fraction(-885) == -1.0
    assert xm430.voltage_units_to_volt(120) == pytest.approx(12.0)
    pulses = np.arange(0, 4096, 37)
    np.testing.assert_array_equal(xm430.rad_to_pulses(xm430.pulses_to_rad(pulses)), pulses)


def test_signed_register_round_trip() -> None:
    reg = xm430.REGISTERS["present_current"]
    for value in (-1193, -1, 0, 1, 1193):
        assert xm430.decode_value(reg, xm430.encode_value(reg, value)) == value
    assert xm430.encode_value(reg, -1) == b"\xff\xff"


def test_hardware_error_names() -> None:
    assert xm430.decode_hardware_error(0) == []
    assert xm430.decode_hardware_error(0b100100) == ["overheating", "overload"]


def test_decode_state_block() -> None:
    values = {"present_pwm": -885, "present_current": 100, "present_velocity": -10, "present_position": 3072,
              "velocity_trajectory": 5, "position_trajectory": 1024, "present_input_voltage": 121,
              "present_temperature": 41}
    raw = bytearray(xm430.STATE_BLOCK_LENGTH)
    for name, value in values.items():
        reg = xm430.REGISTERS[name]
        start = reg.address - xm430.STATE_BLOCK_START
        raw[start: start + reg.size] = xm430.encode_value(reg, value)
    block = xm430.decode_state_block(raw)
    assert block.pwm == -1.0
    assert block.current == pytest.approx(0.269)
    assert block.velocity == pytest.approx(-10 * 0.229 * 2 * np.pi / 60)
    assert block.position == pytest.approx(np.pi / 2)
    assert block.position_trajectory == pytest.approx(-np.pi / 2)
    assert block.input_voltage == pytest.approx(12.1)
    assert block.temperature == 41.0
    with pytest.raises(ValueError, match="needs 23 bytes"):
        xm430.decode_state_block(raw[:10])
