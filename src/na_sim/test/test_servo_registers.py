"""Control-table memory of the emulated XM430: defaults, typed access and the servo's write rules."""

from __future__ import annotations

import threading

import pytest

from na_description import xm430
from na_sim.servo_registers import (
    ACCESS_ERROR,
    DATA_LENGTH_ERROR,
    DATA_LIMIT_ERROR,
    DATA_RANGE_ERROR,
    RESET_ALL,
    RESET_ALL_BUT_ID,
    RESET_ALL_BUT_ID_AND_BAUD,
    ProtocolError,
    ServoRegisters,
)


def _le(value: int, size: int) -> bytes:
    return value.to_bytes(size, "little", signed=value < 0)


def _address(name: str) -> int:
    return xm430.REGISTERS[name].address


def _refused(servo: ServoRegisters, name: str, value: int) -> int:
    register = xm430.REGISTERS[name]
    with pytest.raises(ProtocolError) as info:
        servo.write(register.address, _le(value, register.size))
    return info.value.code


def test_defaults_follow_the_control_table():
    servo = ServoRegisters(12)
    assert servo.servo_id == 12
    for register in xm430.CONTROL_TABLE:
        expected = 12 if register.name == "id" else register.default
        assert servo.get(register.name) == expected, register.name
    assert servo.read(0, 2) == xm430.MODEL_NUMBER.to_bytes(2, "little")


def test_custom_model_number_and_invalid_id():
    assert ServoRegisters(1, model_number=1060).get("model_number") == 1060
    with pytest.raises(ValueError):
        ServoRegisters(253)


def test_signed_registers_round_trip_through_set_get_and_read():
    servo = ServoRegisters(1)
    servo.set("present_current", -37)
    servo.set("present_position", -123_456)
    assert servo.get("present_current") == -37
    assert servo.get("present_position") == -123_456
    raw = servo.read(_address("present_position"), 4)
    assert int.from_bytes(raw, "little", signed=True) == -123_456
    with pytest.raises(ValueError):
        servo.set("led", 300)                       # does not fit one byte
    with pytest.raises(KeyError):
        servo.get("no_such_register")


def test_reads_span_reserved_bytes_but_not_the_end_of_the_table():
    servo = ServoRegisters(1)
    block = servo.read(14, 6)                        # 14..19 are reserved
    assert block == bytes(6)
    with pytest.raises(ProtocolError) as info:
        servo.read(250, 10)
    assert info.value.code == ACCESS_ERROR


def test_write_rules_give_the_protocol_error_numbers():
    servo = ServoRegisters(1)
    assert _refused(servo, "present_position", 5) == ACCESS_ERROR              # read-only
    assert _refused(servo, "current_limit", 1194) == DATA_RANGE_ERROR          # above 1193
    assert _refused(servo, "operating_mode", 2) == DATA_RANGE_ERROR            # no such mode
    servo.write(_address("current_limit"), _le(500, 2))
    assert _refused(servo, "goal_current", 501) == DATA_LIMIT_ERROR            # above Current Limit
    assert _refused(servo, "goal_position", 4096) == DATA_LIMIT_ERROR          # position mode limits
    with pytest.raises(ProtocolError) as info:
        servo.write(_address("goal_position"), b"\x01\x02")                    # half a register
    assert info.value.code == DATA_LENGTH_ERROR
    with pytest.raises(ProtocolError) as info:
        servo.write(14, b"\x00")                                               # reserved byte
    assert info.value.code == ACCESS_ERROR


def test_extended_position_mode_accepts_multi_turn_goals():
    servo = ServoRegisters(1)
    servo.write(_address("operating_mode"), b"\x04")
    servo.write(_address("goal_position"), _le(-20_000, 4))
    assert servo.get("goal_position") == -20_000


def test_eeprom_is_locked_while_torque_is_on():
    servo = ServoRegisters(1)
    servo.write(_address("torque_enable"), b"\x01")
    assert _refused(servo, "operating_mode", 4) == ACCESS_ERROR
    assert _refused(servo, "homing_offset", 100) == ACCESS_ERROR
    assert servo.get("operating_mode") == 3
    servo.write(_address("position_p_gain"), _le(640, 2))                      # RAM is fine
    assert servo.get("position_p_gain") == 640


def test_multi_register_write_is_all_or_none():
    servo = ServoRegisters(1)
    start = _address("position_d_gain")                                        # D, I, P gains: 80..85
    before = servo.snapshot()
    with pytest.raises(ProtocolError) as info:
        servo.write(start, _le(100, 2) + _le(20, 2) + _le(20_000, 2))          # P out of range
    assert info.value.code == DATA_RANGE_ERROR
    assert servo.snapshot() == before
    servo.write(start, _le(100, 2) + _le(20, 2) + _le(900, 2))
    assert (servo.get("position_d_gain"), servo.get("position_i_gain"), servo.get("position_p_gain")) == (100, 20, 900)


def test_check_write_changes_nothing():
    servo = ServoRegisters(1)
    before = servo.snapshot()
    servo.check_write(_address("led"), b"\x01")
    assert servo.snapshot() == before
    with pytest.raises(ProtocolError):
        servo.check_write(_address("led"), b"\x02")


def test_hardware_error_sets_alert_and_only_reboot_recovers():
    servo = ServoRegisters(1)
    servo.write(_address("homing_offset"), _le(-300, 4))                       # EEPROM: survives reboot
    servo.write(_address("torque_enable"), b"\x01")
    servo.write(_address("position_p_gain"), _le(1000, 2))
    with servo.lock:                                                           # physics trips a shutdown
        servo.set("hardware_error_status", xm430.HW_ERROR_OVERLOAD)
        servo.set("torque_enable", 0)
    assert servo.alert
    servo.write(_address("torque_enable"), b"\x01")                            # accepted, no effect
    assert not servo.torque_enabled
    servo.reboot()
    assert not servo.alert
    assert servo.get("position_p_gain") == 800                                 # RAM back to default
    assert servo.get("homing_offset") == -300
    servo.write(_address("torque_enable"), b"\x01")
    assert servo.torque_enabled


@pytest.mark.parametrize(("mode", "keeps_id", "keeps_baud"), [
    (RESET_ALL, False, False), (RESET_ALL_BUT_ID, True, False), (RESET_ALL_BUT_ID_AND_BAUD, True, True)])
def test_factory_reset_modes(mode, keeps_id, keeps_baud):
    servo = ServoRegisters(14)
    servo.write(_address("baud_rate"), b"\x03")
    servo.write(_address("return_delay_time"), b"\x00")
    servo.factory_reset(mode)
    assert servo.servo_id == (14 if keeps_id else 1)
    assert servo.get("baud_rate") == (3 if keeps_baud else 1)
    assert servo.get("return_delay_time") == 250
    with pytest.raises(ProtocolError):
        servo.factory_reset(0x07)


def test_indirect_data_reads_and_writes_the_addressed_byte():
    servo = ServoRegisters(1)
    goal = _address("goal_position")
    pointers = b"".join(_le(goal + k, 2) for k in range(4))
    servo.write(_address("indirect_address_1"), pointers)
    servo.write(_address("indirect_data_1"), _le(1500, 4))
    assert servo.get("goal_position") == 1500
    servo.set("goal_position", 2047)
    assert servo.read(_address("indirect_data_1"), 4) == _le(2047, 4)
    servo.write(_address("indirect_address_5"), _le(600, 2))              # valid pointer, outside the table
    assert servo.read(_address("indirect_data_5"), 1) == b"\x00"
    with pytest.raises(ProtocolError) as info:
        servo.write(_address("indirect_data_5"), b"\x01")
    assert info.value.code == ACCESS_ERROR


def test_concurrent_physics_and_bus_never_see_a_torn_block():
    servo = ServoRegisters(1)
    start, length = xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH
    stop = threading.Event()

    def physics() -> None:
        value = 0
        while not stop.is_set():
            value = (value + 1) % 1000
            with servo.lock:                       # one physics step writes the whole block
                servo.set("present_current", value)
                servo.set("present_position", value)
                servo.set("present_temperature", value % 100)

    thread = threading.Thread(target=physics)
    thread.start()
    try:
        for _ in range(2000):
            block = servo.read(start, length)
            current = int.from_bytes(block[2:4], "little", signed=True)
            position = int.from_bytes(block[8:12], "little", signed=True)
            assert current == position
            assert block[22] == current % 100
    finally:
        stop.set()
        thread.join()


# ---- Bus Watchdog (e-manual, XM430-W350 "Bus Watchdog (98)": 20 ms units, -1 = expired) ----------------
WATCHDOG_UNIT_S = 0.020          # e-manual: one Bus Watchdog unit


def _armed(mode: int = 3, units: int = 5, at: float = 100.0) -> ServoRegisters:
    servo = ServoRegisters(1)
    servo.write(_address("operating_mode"), bytes([mode]))
    servo.set("present_position", 1500)
    servo.write(_address("goal_position"), _le(3000, 4))
    servo.write(_address("profile_velocity"), _le(40, 4))
    servo.write(_address("torque_enable"), b"\x01")
    servo.write(_address("bus_watchdog"), bytes([units]))
    servo.instruction_received(at)
    return servo


def test_bus_watchdog_expires_only_after_its_time_without_instructions():
    servo = _armed(units=5, at=100.0)
    assert servo.watchdog_deadline() == pytest.approx(100.0 + 5 * WATCHDOG_UNIT_S)
    assert not servo.check_watchdog(100.0 + 5 * WATCHDOG_UNIT_S - 1e-3)
    servo.instruction_received(100.09)                          # an instruction restarts it
    assert not servo.check_watchdog(100.0 + 5 * WATCHDOG_UNIT_S + 1e-3)
    assert servo.check_watchdog(100.09 + 5 * WATCHDOG_UNIT_S + 1e-3)
    assert servo.get("bus_watchdog") == -1
    assert servo.read(_address("bus_watchdog"), 1) == b"\xff"   # -1 on the wire
    # Stopped and holding where it is, with torque still on; the profile no longer applies.
    assert servo.get("goal_position") == 1500 and servo.get("torque_enable") == 1
    assert servo.get("profile_velocity") == 0 and servo.get("profile_acceleration") == 0
    assert not servo.check_watchdog(200.0)                      # expires once


def test_bus_watchdog_does_not_run_with_torque_off_or_value_0():
    servo = _armed(units=5, at=100.0)
    servo.write(_address("torque_enable"), b"\x00")
    assert servo.watchdog_deadline() is None and not servo.check_watchdog(200.0)
    servo = _armed(units=5, at=100.0)
    servo.write(_address("bus_watchdog"), b"\x00")
    assert not servo.check_watchdog(200.0) and servo.get("bus_watchdog") == 0


@pytest.mark.parametrize(("mode", "goal", "value"), [(1, "goal_velocity", 50), (16, "goal_pwm", 300)])
def test_bus_watchdog_stops_velocity_and_pwm_modes(mode: int, goal: str, value: int):
    servo = ServoRegisters(1)
    servo.write(_address("operating_mode"), bytes([mode]))
    servo.write(_address(goal), _le(value, xm430.REGISTERS[goal].size))
    servo.write(_address("torque_enable"), b"\x01")
    servo.write(_address("bus_watchdog"), b"\x02")
    servo.instruction_received(0.0)
    assert servo.check_watchdog(1.0)
    assert servo.get(goal) == 0


def test_expired_watchdog_makes_goals_read_only_until_cleared_with_0():
    servo = _armed(units=5, at=0.0)
    assert servo.check_watchdog(1.0)
    for name, value in (("goal_position", 2000), ("goal_velocity", 10), ("goal_current", 10), ("goal_pwm", 10)):
        assert _refused(servo, name, value) == DATA_RANGE_ERROR, name
    # ... also through Indirect Data pointing at Goal Position
    servo.write(_address("indirect_address_1"), _le(_address("goal_position"), 2))
    with pytest.raises(ProtocolError) as info:
        servo.write(_address("indirect_data_1"), b"\x07")
    assert info.value.code == DATA_RANGE_ERROR
    assert _refused(servo, "bus_watchdog", 5) == DATA_RANGE_ERROR     # re-arming needs the clear first
    servo.write(_address("led"), b"\x01")                              # other RAM stays writable
    servo.write(_address("bus_watchdog"), b"\x00")
    assert servo.get("bus_watchdog") == 0
    servo.write(_address("goal_position"), _le(2000, 4))
    servo.write(_address("bus_watchdog"), b"\x05")
    assert servo.get("goal_position") == 2000 and servo.get("bus_watchdog") == 5


def test_host_cannot_write_minus_one_and_reboot_clears_an_expired_watchdog():
    servo = _armed(units=5, at=0.0)
    assert _refused(servo, "bus_watchdog", -1) == DATA_RANGE_ERROR
    assert _refused(servo, "bus_watchdog", 128) == DATA_RANGE_ERROR
    assert servo.check_watchdog(1.0)
    servo.reboot()
    assert servo.get("bus_watchdog") == 0 and servo.get("torque_enable") == 0


def test_firmware_version_is_configurable_and_gates_the_watchdog_and_fast_sync_read():
    old = ServoRegisters(3, firmware_version=37)
    assert old.get("firmware_version") == 37 and old.read(_address("firmware_version"), 1) == bytes([37])
    assert not old.has_bus_watchdog and not old.answers_fast_sync_read
    assert _refused(old, "bus_watchdog", 5) == ACCESS_ERROR
    old.factory_reset(RESET_ALL)
    assert old.get("firmware_version") == 37                            # firmware is not a setting
    middle = ServoRegisters(3, firmware_version=44)
    assert middle.has_bus_watchdog and not middle.answers_fast_sync_read
    assert ServoRegisters(3, firmware_version=45).answers_fast_sync_read
    assert ServoRegisters(3).get("firmware_version") == 48               # the table's default
