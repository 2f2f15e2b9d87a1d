"""The servo bus emulator against the real dynamixel-sdk client over a pty (and raw bytes on the wire)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import tty

import dynamixel_sdk.port_handler
import numpy as np
import pytest
import serial
from dynamixel_sdk import (
    COMM_RX_CORRUPT,
    COMM_RX_TIMEOUT,
    COMM_SUCCESS,
    GroupBulkRead,
    GroupBulkWrite,
    GroupSyncRead,
    GroupSyncWrite,
    PacketHandler,
    PortHandler,
)

from na_description import xm430
from na_description.crc16 import crc16
from na_sim import protocol2 as p2
from na_sim.dxl_emulator import DxlBusEmulator
from na_sim.faults import DxlFaultInjector, DxlFaults
from na_sim.servo_registers import (
    ACCESS_ERROR,
    CRC_ERROR,
    DATA_LENGTH_ERROR,
    DATA_LIMIT_ERROR,
    DATA_RANGE_ERROR,
    INSTRUCTION_ERROR,
    RESULT_FAIL,
    ServoRegisters,
)
from na_sim.sim_family import FAMILIES

REG = xm430.REGISTERS


def _write(bus, servo_id: int, name: str, value: int) -> tuple[int, int]:
    """Write one register with the SDK call of its size; returns (comm result, ERR byte)."""
    register, ph = REG[name], bus.packet_handler
    raw = value & ((1 << (8 * register.size)) - 1)
    call = {1: ph.write1ByteTxRx, 2: ph.write2ByteTxRx, 4: ph.write4ByteTxRx}[register.size]
    return call(bus.port, servo_id, register.address, raw)


def _read(bus, servo_id: int, name: str) -> int:
    register, ph = REG[name], bus.packet_handler
    call = {1: ph.read1ByteTxRx, 2: ph.read2ByteTxRx, 4: ph.read4ByteTxRx}[register.size]
    raw, result, error = call(bus.port, servo_id, register.address)
    assert (result, error & 0x7F) == (COMM_SUCCESS, 0), ph.getTxRxResult(result)
    return int.from_bytes(raw.to_bytes(register.size, "little"), "little", signed=register.signed)


def test_ping_returns_the_model_number(sdk_bus):
    bus = sdk_bus()
    model, result, error = bus.packet_handler.ping(bus.port, 13)
    assert (model, result, error) == (xm430.MODEL_NUMBER, COMM_SUCCESS, 0)
    _, result, _ = bus.packet_handler.ping(bus.port, 20)
    assert result == COMM_RX_TIMEOUT                              # nobody has ID 20


@pytest.mark.parametrize(("name", "value"), [
    ("operating_mode", 4), ("return_delay_time", 0), ("drive_mode", 1), ("homing_offset", -1024),
    ("current_limit", 900), ("position_p_gain", 800), ("position_i_gain", 30), ("position_d_gain", 1000),
    ("torque_enable", 1), ("goal_position", 3000)])
def test_driver_registers_write_and_read_back(sdk_bus, name, value):
    bus = sdk_bus(ids=(11,))
    assert _write(bus, 11, name, value) == (COMM_SUCCESS, 0)
    assert _read(bus, 11, name) == value
    assert bus.servo(11).get(name) == value


def test_physics_values_read_back_through_the_sdk(sdk_bus):
    bus = sdk_bus(ids=(11,))
    servo = bus.servo(11)
    servo.set("present_position", 2100)
    servo.set("present_current", -55)
    servo.set("present_temperature", 41)
    servo.set("hardware_error_status", xm430.HW_ERROR_OVERHEATING)
    assert _read(bus, 11, "present_position") == 2100
    assert _read(bus, 11, "present_current") == -55
    assert _read(bus, 11, "present_temperature") == 41
    raw, result, error = bus.packet_handler.read1ByteTxRx(bus.port, 11, REG["hardware_error_status"].address)
    assert (raw, result) == (xm430.HW_ERROR_OVERHEATING, COMM_SUCCESS)
    assert error & xm430.STATUS_ALERT                           # every status packet carries the Alert bit


def test_sync_read_of_the_state_block_for_five_servos(sdk_bus):
    bus = sdk_bus()
    for k, servo in enumerate(bus.servos):
        servo.set("present_position", 1000 + 100 * k)
        servo.set("present_velocity", -3 * k)
        servo.set("present_input_voltage", 120 + k)
    group = GroupSyncRead(bus.port, bus.packet_handler, xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)
    for servo in bus.servos:
        assert group.addParam(servo.servo_id)
    assert group.txRxPacket() == COMM_SUCCESS
    for k, servo in enumerate(bus.servos):
        assert group.isAvailable(servo.servo_id, xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)
        raw = bytes(group.data_dict[servo.servo_id])
        assert len(raw) == 23
        state = xm430.decode_state_block(raw)
        assert state.position == pytest.approx(float(xm430.pulses_to_rad(1000 + 100 * k)))
        assert state.velocity == pytest.approx(float(xm430.velocity_units_to_rad_s(-3 * k)))
        assert state.input_voltage == pytest.approx(12.0 + 0.1 * k)


def test_fast_sync_read_matches_sync_read(sdk_bus):
    bus = sdk_bus()
    for k, servo in enumerate(bus.servos):
        servo.set("present_position", -5000 + k)
    group = GroupSyncRead(bus.port, bus.packet_handler, REG["present_position"].address, 4)
    for servo in bus.servos:
        group.addParam(servo.servo_id)
    assert group.fastSyncRead() == COMM_SUCCESS
    for k, servo in enumerate(bus.servos):
        value = group.getData(servo.servo_id, REG["present_position"].address, 4)
        assert int.from_bytes(value.to_bytes(4, "little"), "little", signed=True) == -5000 + k


def test_sync_write_reaches_every_servo_and_the_hook(sdk_bus):
    written = []
    bus = sdk_bus(on_write=lambda servo, address, data: written.append((servo.servo_id, address, data)))
    goal = REG["goal_position"].address
    group = GroupSyncWrite(bus.port, bus.packet_handler, goal, 4)
    for servo in bus.servos:
        assert group.addParam(servo.servo_id, (2000 + servo.servo_id).to_bytes(4, "little"))
    assert group.txPacket() == COMM_SUCCESS
    _read(bus, 15, "goal_position")                             # a round trip: the sync write is processed
    assert [s.get("goal_position") for s in bus.servos] == [2000 + s.servo_id for s in bus.servos]
    assert {w[0] for w in written} == set(bus.emulator.servos and [s.servo_id for s in bus.servos])
    assert all(address == goal for _, address, _ in written)


def test_bulk_read_of_different_blocks(sdk_bus):
    bus = sdk_bus(ids=(11, 12))
    bus.servo(11).set("present_temperature", 33)
    bus.servo(12).set("present_current", -400)
    group = GroupBulkRead(bus.port, bus.packet_handler)
    assert group.addParam(11, REG["present_temperature"].address, 1)
    assert group.addParam(12, REG["present_current"].address, 2)
    assert group.txRxPacket() == COMM_SUCCESS
    assert group.getData(11, REG["present_temperature"].address, 1) == 33
    assert group.getData(12, REG["present_current"].address, 2) == (-400) & 0xFFFF


def test_eeprom_write_with_torque_on_is_refused(sdk_bus):
    bus = sdk_bus(ids=(11,))
    assert _write(bus, 11, "torque_enable", 1) == (COMM_SUCCESS, 0)
    assert _write(bus, 11, "operating_mode", 4) == (COMM_SUCCESS, ACCESS_ERROR)
    assert _read(bus, 11, "operating_mode") == 3


def test_range_limit_and_length_errors(sdk_bus):
    bus = sdk_bus(ids=(11,))
    assert _write(bus, 11, "current_limit", 5000) == (COMM_SUCCESS, DATA_RANGE_ERROR)
    assert _write(bus, 11, "current_limit", 300) == (COMM_SUCCESS, 0)
    assert _write(bus, 11, "goal_current", 400) == (COMM_SUCCESS, DATA_LIMIT_ERROR)
    result, error = bus.packet_handler.write2ByteTxRx(bus.port, 11, REG["goal_position"].address, 7)
    assert (result, error) == (COMM_SUCCESS, DATA_LENGTH_ERROR)
    assert bus.servo(11).get("goal_position") == 0


def test_unknown_instruction_gets_an_instruction_error(sdk_bus):
    bus = sdk_bus(ids=(11,))
    packet = [0] * 10
    packet[4], packet[5], packet[6], packet[7] = 11, 3, 0, 0x7E          # ID, LEN 3, INST 0x7E
    _, result, error = bus.packet_handler.txRxPacket(bus.port, packet)
    assert (result, error) == (COMM_SUCCESS, INSTRUCTION_ERROR)


def test_reg_write_takes_effect_on_action(sdk_bus):
    bus = sdk_bus(ids=(11, 12))
    ph = bus.packet_handler
    for servo_id in (11, 12):
        result, error = ph.regWriteTxRx(bus.port, servo_id, REG["led"].address, 1, [1])
        assert (result, error) == (COMM_SUCCESS, 0)
    assert _read(bus, 11, "led") == 0
    assert _read(bus, 11, "registered_instruction") == 1
    assert ph.action(bus.port, p2.BROADCAST_ID) == COMM_SUCCESS
    assert _read(bus, 12, "led") == 1                           # round trip after the unanswered Action
    assert _read(bus, 11, "led") == 1
    assert _read(bus, 11, "registered_instruction") == 0


def test_value_needing_byte_stuffing_round_trips(sdk_bus):
    bus = sdk_bus(ids=(11,))
    stuffed_value = int.from_bytes(b"\xff\xff\xfd\xff", "little", signed=True)       # -131073
    assert _write(bus, 11, "homing_offset", stuffed_value) == (COMM_SUCCESS, 0)
    assert bus.servo(11).read(REG["homing_offset"].address, 4) == b"\xff\xff\xfd\xff"
    assert _read(bus, 11, "homing_offset") == stuffed_value          # the status packet is stuffed too


def test_reboot_clears_a_hardware_error(sdk_bus):
    bus = sdk_bus(ids=(11,))
    servo = bus.servo(11)
    assert _write(bus, 11, "torque_enable", 1) == (COMM_SUCCESS, 0)
    with servo.lock:
        servo.set("hardware_error_status", xm430.HW_ERROR_OVERLOAD)
        servo.set("torque_enable", 0)
    _, result, error = bus.packet_handler.ping(bus.port, 11)
    assert result == COMM_SUCCESS and error & xm430.STATUS_ALERT
    assert _write(bus, 11, "torque_enable", 1)[1] & xm430.STATUS_ALERT
    assert _read(bus, 11, "torque_enable") == 0                     # shutdown holds until reboot
    assert bus.packet_handler.reboot(bus.port, 11) == (COMM_SUCCESS, xm430.STATUS_ALERT)
    _, result, error = bus.packet_handler.ping(bus.port, 11)
    assert (result, error) == (COMM_SUCCESS, 0)
    assert _read(bus, 11, "hardware_error_status") == 0
    assert _write(bus, 11, "torque_enable", 1) == (COMM_SUCCESS, 0)


def test_broadcast_ping_finds_every_servo(sdk_bus):
    bus = sdk_bus(ids=(14, 11, 12))
    found, result = bus.packet_handler.broadcastPing(bus.port)
    assert result == COMM_SUCCESS
    assert found == {11: [xm430.MODEL_NUMBER, 48], 12: [xm430.MODEL_NUMBER, 48], 14: [xm430.MODEL_NUMBER, 48]}


def test_status_return_level_1_suppresses_write_replies(sdk_bus):
    bus = sdk_bus(ids=(11,))
    # The new level applies to the answer of the very write that sets it: no status packet.
    assert _write(bus, 11, "status_return_level", 1) == (COMM_RX_TIMEOUT, 0)
    assert _read(bus, 11, "status_return_level") == 1
    assert _write(bus, 11, "led", 1) == (COMM_RX_TIMEOUT, 0)
    assert _read(bus, 11, "led") == 1                             # written, and reads still answer
    assert bus.packet_handler.ping(bus.port, 11)[1] == COMM_SUCCESS


def test_return_delay_is_real_time(sdk_bus):
    bus = sdk_bus(ids=(11,))
    bus.servo(11).set("return_delay_time", 250)                  # 500 us (the XM430 default)
    round_trips = []
    for _ in range(10):
        start = time.perf_counter()
        assert bus.packet_handler.ping(bus.port, 11)[1] == COMM_SUCCESS
        round_trips.append(time.perf_counter() - start)
    # Load can only add time, so the fastest round trip bounds the delay from below.
    assert min(round_trips) >= 250 * xm430.RETURN_DELAY_UNIT_S


def test_wire_time_follows_the_baud_rate(sdk_bus):
    bus = sdk_bus(ids=(11,), baud_rate=57_600, wire_time=True)
    round_trips = []
    for _ in range(5):
        start = time.perf_counter()
        assert bus.packet_handler.ping(bus.port, 11)[1] == COMM_SUCCESS
        round_trips.append(time.perf_counter() - start)
    # 10-byte ping + 14-byte status, 10 bits per byte at 57600 baud = 4.17 ms on the wire.
    assert min(round_trips) >= 24 * 10 / 57_600


def test_crc_check_value_and_raw_wire_bytes(sdk_bus):
    ping = p2.build_instruction(1, p2.PING)
    assert ping == bytes.fromhex("ff ff fd 00 01 03 00 01 19 4e")
    # What the SDK puts on the wire is byte-identical to our codec (captured on a bare pty).
    master, slave = os.openpty()
    tty.setraw(slave)
    try:
        port = PortHandler(os.ttyname(slave))
        assert port.openPort()
        PacketHandler(2.0).txPacket(port, [0, 0, 0, 0, 1, 3, 0, p2.PING, 0, 0])
        assert os.read(master, 64) == ping
        port.closePort()
    finally:
        os.close(master)
        os.close(slave)
    # The emulator's raw answer: status packet of ID 1 with model number and firmware, SDK CRC agrees.
    bus = sdk_bus(ids=(1,))
    bus.port.closePort()
    with serial.Serial(bus.emulator.port_path, timeout=0.5) as raw:
        raw.write(ping)
        answer = raw.read(14)
    assert answer[:9] == bytes.fromhex("ff ff fd 00 01 07 00 55 00")
    assert answer[9:12] == bytes([0xFC, 0x03, 48])
    assert int.from_bytes(answer[12:], "little") == PacketHandler(2.0).updateCRC(0, list(answer[:12]), 12)


def test_crc_broken_instruction_is_answered_only_by_its_own_id(sdk_bus):
    bus = sdk_bus(ids=(11, 12))
    bus.port.closePort()
    broken = bytearray(p2.build_instruction(11, p2.READ, bytes([64, 0, 1, 0])))
    broken[-1] ^= 0xFF
    with serial.Serial(bus.emulator.port_path, timeout=0.3) as raw:
        raw.write(bytes(broken))
        answer = p2.parse_packets(raw.read(11))
    assert len(answer) == 1
    assert (answer[0].servo_id, answer[0].params) == (11, bytes([CRC_ERROR]))
    assert bus.emulator.stats["crc_errors"] == 1


def test_garbage_before_a_packet_is_skipped(sdk_bus):
    bus = sdk_bus(ids=(11,))
    bus.port.closePort()
    with serial.Serial(bus.emulator.port_path, timeout=0.5) as raw:
        raw.write(b"\x00\xff\xff\x12\xfd" + p2.build_instruction(11, p2.PING))
        answer = p2.parse_packets(raw.read(14))
    assert [(a.servo_id, a.checksum_ok) for a in answer] == [(11, True)]


def _ping_results(bus, count: int) -> list[int]:
    return [bus.packet_handler.ping(bus.port, 11)[1] for _ in range(count)]


def test_corrupt_knob_gives_sdk_crc_failures_at_the_configured_rate(sdk_bus):
    rate, pings = 0.02, 120
    bus = sdk_bus(ids=(11,), faults=DxlFaults(corrupt_byte_rate=rate, seed=7))
    results = _ping_results(bus, pings)
    failures = sum(r != COMM_SUCCESS for r in results)
    injected = bus.emulator.fault_counters.get("status_corrupted", 0)
    unseen = bus.emulator.stats["undetected_corruptions"]        # CRC-16 passes ~1 in 65,536 of them
    assert failures == injected - unseen                          # every other corrupted reply is caught
    assert COMM_RX_CORRUPT in results
    expected = pings * (1 - (1 - rate) ** 14)                     # 14-byte ping status packets
    assert abs(failures - expected) < 4 * (expected ** 0.5) + 2


class FlipByte(DxlFaultInjector):
    """Flips one byte of every reply; with ``reseal`` it also rewrites the CRC ``crc_after`` bytes after the
    flipped byte (default: the packet's own CRC; Protocol 2.0: CRC-16 little-endian over the packet before it),
    so the corruption goes unseen."""

    def __init__(self, index: int, reseal: bool, crc_after: int = 0) -> None:
        super().__init__(DxlFaults())
        self.index, self.reseal, self.crc_after = index, reseal, crc_after

    def corrupt(self, packet: bytes) -> bytes:
        out = bytearray(packet)
        out[self.index] ^= 0x01
        if self.reseal:
            at = self.index + self.crc_after if self.crc_after else len(out) - 2
            out[at:at + 2] = crc16(bytes(out[:at])).to_bytes(2, "little")
        return bytes(out)


@pytest.mark.parametrize("reseal", [False, True])
def test_a_corrupted_reply_whose_crc_holds_is_recorded(sdk_bus, reseal: bool):
    # Status packet: FF FF FD 00 ID LEN LEN 55 ERR data... CRC; byte 9 is the first data byte.
    bus = sdk_bus(ids=(11,), faults=FlipByte(index=9, reseal=reseal))
    bus.servos[0].set("present_position", 1000)
    value, result, _ = bus.packet_handler.read4ByteTxRx(bus.port, 11, REG["present_position"].address)
    if reseal:
        assert (result, value) == (COMM_SUCCESS, 1001)          # the SDK takes it as data
        assert [u.servo_id for u in bus.emulator.undetected] == [11]
        assert bus.emulator.stats["undetected_corruptions"] == 1
    else:
        assert result == COMM_RX_CORRUPT
        assert bus.emulator.undetected == [] and bus.emulator.stats["undetected_corruptions"] == 0


def test_an_unseen_corruption_in_a_fast_sync_read_names_its_servo(sdk_bus):
    # Fast status: 8 header bytes, then per servo ERR, ID, 4 data bytes, CRC over the packet so far. Servo 12's
    # data starts at 8 + 8 + 2; its CRC follows 4 bytes later. Resealing it breaks the running CRC after it.
    bus = sdk_bus(ids=(11, 12, 13), faults=FlipByte(index=18, reseal=True, crc_after=4))
    group = GroupSyncRead(bus.port, bus.packet_handler, REG["present_position"].address, 4)
    for servo in bus.servos:
        group.addParam(servo.servo_id)
    assert group.fastSyncRead() == COMM_RX_CORRUPT                # the packet's CRC (servo 13's) fails
    assert [u.servo_id for u in bus.emulator.undetected] == [12]  # a receiver checking parts takes 11 and 12


def test_drop_knob_gives_sdk_timeouts_at_the_configured_rate(sdk_bus):
    rate, pings = 0.1, 100
    bus = sdk_bus(ids=(11,), faults=DxlFaults(drop_status_rate=rate, seed=3))
    results = _ping_results(bus, pings)
    timeouts = results.count(COMM_RX_TIMEOUT)
    assert timeouts == bus.emulator.fault_counters.get("status_dropped", 0)
    assert results.count(COMM_SUCCESS) == pings - timeouts
    assert abs(timeouts - rate * pings) < 4 * (rate * pings) ** 0.5 + 2


def test_stalled_servo_does_not_answer_and_a_forced_trip_sets_the_alert(sdk_bus):
    faults = DxlFaults(stall_servo_id=12, stall_window_s=(0.0, 60.0), trip_servo_id=13, trip_after_s=0.0)
    bus = sdk_bus(ids=(11, 12, 13), faults=faults)
    assert bus.packet_handler.ping(bus.port, 12)[1] == COMM_RX_TIMEOUT
    assert bus.packet_handler.ping(bus.port, 11)[1:] == (COMM_SUCCESS, 0)
    _, result, error = bus.packet_handler.ping(bus.port, 13)
    assert result == COMM_SUCCESS and error == xm430.STATUS_ALERT
    assert _read(bus, 13, "hardware_error_status") == xm430.HW_ERROR_OVERLOAD
    counters = bus.emulator.fault_counters
    assert counters["hardware_trips"] == 1 and counters["stalled_requests"] >= 1


def test_emulator_rejects_an_empty_bus():
    from na_sim.dxl_emulator import DxlBusEmulator
    with pytest.raises(ValueError):
        DxlBusEmulator([])
    assert ServoRegisters(1).servo_id == 1


def test_factory_reset_and_clear_multi_turn(sdk_bus):
    bus = sdk_bus(ids=(11, 12))
    ph = bus.packet_handler
    assert _write(bus, 12, "operating_mode", 4) == (COMM_SUCCESS, 0)
    assert ph.factoryReset(bus.port, 12, 0x01) == (COMM_SUCCESS, 0)          # all but the ID
    assert _read(bus, 12, "operating_mode") == 3
    assert _read(bus, 12, "return_delay_time") == 250
    bus.servo(11).set("present_position", 3 * 4096 + 100)
    assert ph.clearMultiTurn(bus.port, 11) == (COMM_SUCCESS, 0)
    assert _read(bus, 11, "present_position") == 100
    bus.servo(11).set("moving", 1)
    assert ph.clearMultiTurn(bus.port, 11) == (COMM_SUCCESS, RESULT_FAIL)   # only while stopped
    assert _write(bus, 11, "torque_enable", 1) == (COMM_SUCCESS, 0)
    assert ph.factoryReset(bus.port, 11, 0xFF) == (COMM_SUCCESS, ACCESS_ERROR)
    assert bus.servo(11).servo_id == 11


def test_bulk_write_and_fast_bulk_read(sdk_bus):
    bus = sdk_bus(ids=(11, 12))
    writer = GroupBulkWrite(bus.port, bus.packet_handler)
    assert writer.addParam(11, REG["led"].address, 1, [1])
    assert writer.addParam(12, REG["goal_position"].address, 4, list((1234).to_bytes(4, "little")))
    assert writer.txPacket() == COMM_SUCCESS
    reader = GroupBulkRead(bus.port, bus.packet_handler)
    assert reader.addParam(11, REG["led"].address, 1)
    assert reader.addParam(12, REG["goal_position"].address, 4)
    assert reader.fastBulkRead() == COMM_SUCCESS
    assert reader.getData(11, REG["led"].address, 1) == 1
    assert reader.getData(12, REG["goal_position"].address, 4) == 1234


def _status_packets(raw: serial.Serial, count: int) -> list[p2.Packet]:
    """Read status packets from a raw port until ``count`` arrived or the port's timeout passed."""
    parser, found = p2.PacketParser(), []
    while len(found) < count:
        chunk = raw.read(1)
        if not chunk:
            break
        found += parser.feed(chunk + raw.read(raw.in_waiting))
    return found


def test_delay_knob_makes_a_late_reply_arrive_inside_the_next_transaction(sdk_bus, wait_for):
    bus = sdk_bus(ids=(11,), faults=DxlFaults(delay_status_rate=1.0))
    bus.port.closePort()
    servo = bus.servo(11)
    read_position = p2.build_instruction(11, p2.READ, bytes([REG["present_position"].address, 0, 4, 0]))
    with serial.Serial(bus.emulator.port_path, timeout=0.2) as raw:
        servo.set("present_position", 1111)
        raw.write(read_position)
        assert _status_packets(raw, 1) == []                     # held back: the first request times out
        servo.set("present_position", 2222)
        raw.write(read_position)                                  # the next request ...
        late = _status_packets(raw, 1)
    # ... is answered by the reply to the first one, with the value of the first request's time
    assert len(late) == 1 and late[0].servo_id == 11
    assert int.from_bytes(late[0].params[1:], "little") == 1111
    # the emulator thread counts the second delay after it has sent the first reply: poll, do not race it
    assert wait_for(lambda: bus.emulator.fault_counters["status_delayed"] == 2, timeout=2.0)
    assert bus.emulator.stats["late_replies"] == 1


def test_a_late_reply_is_held_at_least_its_delay(sdk_bus):
    bus = sdk_bus(ids=(11,), faults=DxlFaults(delay_status_rate=1.0, delay_status_s=0.3))
    bus.port.closePort()
    ping = p2.build_instruction(11, p2.PING)
    with serial.Serial(bus.emulator.port_path, timeout=0.05) as raw:
        raw.write(ping)
        raw.write(ping)                                            # too early: nothing is due yet
        assert _status_packets(raw, 1) == []
        time.sleep(0.35)                                           # let the 0.3 s hold pass
        raw.write(ping)
        assert len(_status_packets(raw, 2)) == 2                   # both earlier replies, now late


def test_realtime_tick_is_each_servos_millisecond_clock(sdk_bus):
    bus = sdk_bus(ids=(11, 12))
    ticks = []
    for _ in range(2):
        began = time.monotonic()
        ticks.append((_read(bus, 11, "realtime_tick"), _read(bus, 12, "realtime_tick"), began))
        time.sleep(0.2)
    (a11, a12, t0), (b11, b12, t1) = ticks
    assert a11 != a12                                              # independent clocks
    for first, second in ((a11, b11), (a12, b12)):
        advanced = (second - first) % 32768                        # e-manual: 0 .. 32767 ms, then from 0
        assert 0.15 * 1000 <= advanced <= (t1 - t0 + 0.1) * 1000


def test_on_read_hook_moves_the_registers_on_every_read(sdk_bus):
    from na_sim.moving_truth import ReadCounterTruth

    servos = [ServoRegisters(servo_id) for servo_id in (11, 12)]
    for servo in servos:
        servo.set("return_delay_time", 0)
    truth = ReadCounterTruth(servos)
    bus = sdk_bus(servos=servos, on_read=truth)
    first, second = _read(bus, 11, "present_position"), _read(bus, 11, "present_position")
    assert second == first + 1
    group = GroupSyncRead(bus.port, bus.packet_handler, xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)
    for servo_id in (11, 12):
        group.addParam(servo_id)
    assert group.txRxPacket() == COMM_SUCCESS
    served = {(r.servo_id, r.position) for r in truth.records}
    for servo_id in (11, 12):
        position = xm430.decode_value(REG["present_position"], bytes(group.data_dict[servo_id])[8:12])
        assert (servo_id, position) in served
    assert [r.position for r in truth.records if r.servo_id == 11] == [first, second, first + 2]


def test_after_packets_hook_runs_when_the_bus_changed_the_tables(sdk_bus, wait_for):
    """After each batch of packets and after a Bus Watchdog expired on a silent line; not on every idle poll."""
    servo = ServoRegisters(11)
    seen: list[tuple[int, int]] = []          # (goal position, bus watchdog) as the hook found them
    bus = sdk_bus(servos=[servo], after_packets=lambda: seen.append((servo.get("goal_position"),
                                                                     servo.get("bus_watchdog"))))
    assert _write(bus, 11, "goal_position", 3000) == (COMM_SUCCESS, 0)
    assert wait_for(lambda: (3000, 0) in seen, 2.0)
    _torque_on_with_watchdog(bus, 11, 5)                           # 0.1 s, then no more traffic
    assert wait_for(lambda: seen[-1][1] == xm430.BUS_WATCHDOG_EXPIRED, 5.0)
    calls = len(seen)
    time.sleep(0.2)                                                # a silent line changes nothing
    assert len(seen) == calls
    assert bus.emulator.stats["hook_errors"] == 0


def test_failing_hooks_are_counted_and_the_bus_still_answers(sdk_bus, wait_for):
    def broken(*_: object) -> None:
        raise RuntimeError("hook bug")

    bus = sdk_bus(ids=(11,), on_read=broken, after_packets=broken)
    bus.servo(11).set("present_position", 1234)
    assert _read(bus, 11, "present_position") == 1234               # on_read failed, the read is served
    assert wait_for(lambda: bus.emulator.stats["hook_errors"] == 2, 2.0)     # ... and after_packets
    assert _write(bus, 11, "goal_position", 2000) == (COMM_SUCCESS, 0)
    assert _read(bus, 11, "goal_position") == 2000
    assert bus.emulator.stats["internal_errors"] == 0


def test_the_family_bus_takes_the_hooks():
    def on_read(servo: ServoRegisters) -> None:
        pass

    def after_packets() -> None:
        pass

    bus = FAMILIES["xm430"].make_bus([ServoRegisters(11)], baud_rate=1_000_000, wire_time=False, faults=None,
                                     on_read=on_read, after_packets=after_packets)
    assert isinstance(bus, DxlBusEmulator) and (bus.on_read, bus.after_packets) == (on_read, after_packets)


def _torque_on_with_watchdog(bus, servo_id: int, units: int) -> None:
    assert _write(bus, servo_id, "torque_enable", 1) == (COMM_SUCCESS, 0)
    assert _write(bus, servo_id, "bus_watchdog", units) == (COMM_SUCCESS, 0)


def _expired_at(servo: ServoRegisters, timeout: float) -> float | None:
    """When the in-process registers show an expired watchdog (observed without bus traffic)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if servo.get("bus_watchdog") == -1:
            return time.monotonic()
        time.sleep(0.002)
    return None


def test_bus_watchdog_stops_a_servo_the_host_stopped_talking_to(sdk_bus):
    watchdog_s = 10 * 0.020                                        # 10 units of 20 ms (e-manual)
    bus = sdk_bus(ids=(11, 12))
    servo = bus.servo(11)
    servo.set("present_position", 1500)
    assert _write(bus, 11, "goal_position", 3000) == (COMM_SUCCESS, 0)
    assert _write(bus, 11, "torque_enable", 1) == (COMM_SUCCESS, 0)
    # The servo counts from the moment it receives the instruction, which is after this and before the reply.
    last_instruction_sent = time.monotonic()
    assert _write(bus, 11, "bus_watchdog", 10) == (COMM_SUCCESS, 0)
    for _ in range(10):                                            # instructions for another servo do not count
        bus.packet_handler.ping(bus.port, 12)
    expired = _expired_at(servo, 5.0)
    assert expired is not None and expired >= last_instruction_sent + watchdog_s
    assert servo.get("goal_position") == 1500 and servo.get("torque_enable") == 1      # holds, torque on
    assert _read(bus, 11, "bus_watchdog") == -1
    assert _write(bus, 11, "goal_position", 2500) == (COMM_SUCCESS, DATA_RANGE_ERROR)  # goals read-only
    assert _write(bus, 11, "bus_watchdog", 0) == (COMM_SUCCESS, 0)                     # clear
    assert _write(bus, 11, "goal_position", 2500) == (COMM_SUCCESS, 0)
    assert bus.emulator.stats["watchdog_expired"] == 1


def test_sync_reads_that_list_the_servo_keep_its_watchdog_fed(sdk_bus):
    bus = sdk_bus(ids=(11, 12))
    _torque_on_with_watchdog(bus, 11, 25)                          # 0.5 s
    group = GroupSyncRead(bus.port, bus.packet_handler, REG["present_position"].address, 4)
    group.addParam(11)
    fed_until = time.monotonic() + 1.5
    while time.monotonic() < fed_until:
        group.txRxPacket()
        time.sleep(0.02)                                           # pacing a 50 Hz loop
    assert bus.servo(11).get("bus_watchdog") == 25
    assert _expired_at(bus.servo(11), 5.0) is not None             # and it expires once the reads stop


def test_firmware_gates_fast_sync_read_and_the_watchdog(sdk_bus):
    old = [ServoRegisters(sid, firmware_version=44) for sid in (11, 12)]
    bus = sdk_bus(servos=old)
    group = GroupSyncRead(bus.port, bus.packet_handler, REG["present_position"].address, 4)
    for servo_id in (11, 12):
        group.addParam(servo_id)
    assert group.fastSyncRead() == COMM_RX_TIMEOUT                 # firmware 44 does not know 0x8A
    assert group.txRxPacket() == COMM_SUCCESS                      # plain Sync Read works
    assert bus.packet_handler.ping(bus.port, 11) == (xm430.MODEL_NUMBER, COMM_SUCCESS, 0)
    assert bus.packet_handler.read1ByteTxRx(bus.port, 11, REG["firmware_version"].address)[0] == 44
    older = sdk_bus(servos=[ServoRegisters(13, firmware_version=37)])
    assert _write(older, 13, "bus_watchdog", 5) == (COMM_SUCCESS, ACCESS_ERROR)


def test_parser_finds_packets_in_a_dribbled_noisy_stream():
    packets = [p2.build_instruction(11, p2.WRITE, bytes([116, 0, 0xFF, 0xFF, 0xFD, 0x00])),
               p2.build_status(12, 0, bytes([0xFF, 0xFF, 0xFD])),
               p2.build_instruction(p2.BROADCAST_ID, p2.PING)]
    broken = bytearray(p2.build_instruction(13, p2.PING))
    broken[-2] ^= 0x01
    stream = b"\x00\xff\xff\xfd" + packets[0] + b"\xfe\xff" + bytes(broken) + packets[1] + b"\xff" + packets[2]
    parser = p2.PacketParser()
    found = []
    for byte in stream:                                   # one byte at a time, as a slow UART delivers
        found += parser.feed(bytes([byte]))
    assert [(f.servo_id, f.checksum_ok) for f in found] == [(11, True), (13, False), (12, True),
                                                            (p2.BROADCAST_ID, True)]
    assert found[0].params == bytes([116, 0, 0xFF, 0xFF, 0xFD, 0x00])        # unstuffed
    assert found[2].params == bytes([0, 0xFF, 0xFF, 0xFD])                   # ERR + data
    assert parser.checksum_errors == 1 and parser.garbage_bytes == 7
    assert p2.stuff(b"\xff\xff\xfd\xff\xff\xfd") == b"\xff\xff\xfd\xfd\xff\xff\xfd\xfd"


def test_parser_resynchronises_after_an_impossible_or_stalled_length():
    parser = p2.PacketParser(max_length=64)
    good = p2.build_instruction(11, p2.PING)
    assert parser.feed(b"\xff\xff\xfd\x00\x0b\xff\x7f" + good) == [p2.parse_packets(good)[0]]   # LEN too big
    assert parser.feed(b"\xff\xff\xfd\x00\x0b\x20\x00\x01") == []          # waits for 32 bytes ...
    assert parser.pending == 8
    assert parser.resync() == [] and parser.pending == 0                  # ... until the bus gives up


@pytest.mark.system
def test_live_rig_serves_both_arms_and_the_ft_sensors(tmp_path, wait_for, monkeypatch):
    monkeypatch.setattr(dynamixel_sdk.port_handler, "LATENCY_TIMER", 50)     # loaded CI machine: see conftest
    info_path = tmp_path / "rig.json"
    command = [sys.executable, "-m", "na_sim.live_rig", "--task", "sweep_joint1", "--status-every", "0",
               "--info-out", str(info_path), "--duration", "60"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_for(lambda: info_path.exists() or process.poll() is not None, 60.0)
        assert process.poll() is None, process.stdout.read()
        info = json.loads(info_path.read_text())
        handler = PacketHandler(2.0)
        leader_positions = []
        for key in ("follower_port", "leader_port"):
            port = PortHandler(info[key])
            assert port.openPort() and port.setBaudRate(info["baud_rate"])
            for servo_id in info["servo_ids"]:                  # as the driver does (docs/REFERENCES.md, Protocol 2.0)
                assert handler.write1ByteTxRx(port, servo_id, REG["return_delay_time"].address, 0) == (COMM_SUCCESS, 0)
            group = GroupSyncRead(port, handler, xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)
            for servo_id in info["servo_ids"]:
                group.addParam(servo_id)
            for _ in range(20):
                assert group.txRxPacket() == COMM_SUCCESS
                leader_positions.append(xm430.decode_state_block(bytes(group.data_dict[11])).position)
                time.sleep(0.02)                 # pacing a 50 Hz read loop, not waiting for a result
            port.closePort()
        assert np.ptp(leader_positions[20:]) > 1e-3          # the scripted operator moves the leader
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.settimeout(2.0)
            sock.sendto(bytes.fromhex("1234 0002 0000000a"), (info["netft"]["host"], info["netft"]["port"]))
            assert len(sock.recv(64)) == 36
        with serial.Serial(info["serial_ft_port"], 115200, timeout=2.0) as line_port:
            line_port.reset_input_buffer()
            line_port.readline()
            assert line_port.readline().startswith(b"< ")
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_emulator_process_serves_a_bus_and_reports_what_it_served(monkeypatch):
    from na_sim.emulator_process import EmulatorProcess

    monkeypatch.setattr(dynamixel_sdk.port_handler, "LATENCY_TIMER", 50)     # loaded CI machine: see conftest
    with EmulatorProcess((11, 12), moving_truth=True, firmware_version=46,
                         registers={"present_temperature": (40, 41)}) as bus:
        port = PortHandler(bus.port_path)
        assert port.openPort() and port.setBaudRate(1_000_000)
        handler = PacketHandler(2.0)
        positions = [handler.read4ByteTxRx(port, 12, REG["present_position"].address) for _ in range(3)]
        port.closePort()
        assert bus.get(12, "firmware_version") == 46
        bus.set(11, "led", 1)
        assert bus.get(11, "led") == 1
        report = bus.stop()
    assert [(value, result) for value, result, _ in positions] == [(p.position, COMM_SUCCESS)
                                                                   for p in report.served if p.servo_id == 12]
    assert report.stats["read"] == 3 and report.registers[11][REG["led"].address] == 1


def test_sync_read_replies_due_together_leave_in_one_write(sdk_bus, monkeypatch):
    """Each write to a pty is one hand-over to a kernel worker, which can wait behind a busy CPU: the replies of a
    Sync Read that are due together (Return Delay 0, no wire time) go out in one write, not one per servo."""
    bus = sdk_bus()
    for servo in bus.servos:
        servo.set("return_delay_time", 0)
    master = bus.emulator._master_fd
    counted: list[int] = []
    real_write = os.write

    def counting_write(fd: int, data) -> int:
        if fd == master:
            counted.append(len(data))
        return real_write(fd, data)

    monkeypatch.setattr(os, "write", counting_write)
    group = GroupSyncRead(bus.port, bus.packet_handler, xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)
    for servo in bus.servos:
        assert group.addParam(servo.servo_id)
    assert group.txRxPacket() == COMM_SUCCESS
    assert len(counted) == 1
    assert sum(counted) == len(bus.servos) * (11 + xm430.STATE_BLOCK_LENGTH)    # status packet: 11 bytes + data
