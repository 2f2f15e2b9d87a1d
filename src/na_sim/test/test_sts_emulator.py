"""The Feetech STS bus emulator against the real Feetech SDK (scservo_sdk) over a pty, and raw bytes on the wire.

Oracles: the SDK's own calls and sign-magnitude helpers, and packets built here by hand with their
checksums computed here (never the emulator's codec). Choices where the public sources are
silent (see na_sim.sts_emulator / na_sim.sts_registers): a broadcast PING is answered only when
one servo is on the bus; an EEPROM write with Lock = 1 is answered without error and takes
effect, but is lost at the next power cycle; a bad checksum gets no reply.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import scservo_sdk as scs
import serial

from na_description import sts3215
from na_sim import protocol0 as p0
from na_sim.faults import DxlFaultInjector, DxlFaults
from na_sim.sim_family import FAMILIES
from na_sim.sts_emulator import StsBusEmulator
from na_sim.sts_registers import StsServoRegisters

SO101_IDS = (1, 2, 3, 4, 5, 6)           # LeRobot SO-101: shoulder_pan .. gripper
BAUD = 1_000_000                         # STS default (Baud Rate code 0)
SDK_LATENCY_MS = 250                     # the SDK waits 2 x this for a status packet
REG = sts3215.REGISTERS


@dataclass
class SdkBus:
    emulator: StsBusEmulator
    servos: list[StsServoRegisters]
    port: scs.PortHandler
    ph: object                           # scs.PacketHandler(0)

    def servo(self, servo_id: int) -> StsServoRegisters:
        return next(s for s in self.servos if s.servo_id == servo_id)


@pytest.fixture
def sts_bus(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., SdkBus]]:
    """Factory: ``sts_bus(ids=..., **emulator_kwargs)`` starts an emulator and opens the Feetech SDK on it.

    The SDK polls the port in a busy loop in this same process: a short GIL switch interval keeps the
    emulator thread from waiting 5 ms for its turn, and the SDK's reply timeout (2 x LATENCY_TIMER +
    bytes, 34 ms by default) is raised to 0.5 s so that a 2-core machine loaded by other jobs does not
    lose honest replies (a test that expects no reply waits that long).
    """
    monkeypatch.setattr(importlib.import_module("scservo_sdk.port_handler"), "LATENCY_TIMER", SDK_LATENCY_MS)
    opened: list[SdkBus] = []
    interval = sys.getswitchinterval()
    sys.setswitchinterval(2e-4)

    def start(ids: tuple[int, ...] = SO101_IDS, **kwargs) -> SdkBus:
        servos = [StsServoRegisters(servo_id) for servo_id in ids]
        emulator = StsBusEmulator(servos, **{"baud_rate": BAUD, **kwargs}).start()
        port = scs.PortHandler(emulator.port_path)
        bus = SdkBus(emulator, servos, port, scs.PacketHandler(0))
        opened.append(bus)
        assert port.openPort(), f"cannot open {emulator.port_path}"
        assert port.setBaudRate(BAUD)
        return bus

    try:
        yield start
    finally:
        for bus in opened:
            if bus.port.is_open:
                bus.port.closePort()
            bus.emulator.stop()
        sys.setswitchinterval(interval)


def hand_packet(servo_id: int, code: int, params: bytes = b"") -> bytes:
    """FF FF ID LEN INST/ERR P.. CHK, written out here from the protocol description."""
    length = len(params) + 2
    chk = ~(servo_id + length + code + sum(params)) & 0xFF
    return bytes([0xFF, 0xFF, servo_id, length, code]) + bytes(params) + bytes([chk])


def raw_exchange(path: str, data: bytes, expect: int, timeout: float = 1.0) -> bytes:
    """Write raw bytes on the bus and read what comes back (up to ``expect`` bytes or ``timeout``)."""
    with serial.Serial(path, BAUD, timeout=timeout) as link:
        link.reset_input_buffer()
        link.write(data)
        return link.read(expect)


def eventually(predicate: Callable[[], bool], timeout: float = 2.0) -> bool:
    """True once ``predicate()`` holds (the bus thread may run late on a loaded machine)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.002)
    return True


def write_ok(bus: SdkBus, servo_id: int, name: str, value: int) -> None:
    reg = REG[name]
    word = scs.SCS_TOSCS(value, reg.sign_bit) if reg.sign_bit is not None else value
    call = {1: bus.ph.write1ByteTxRx, 2: bus.ph.write2ByteTxRx}[reg.size]
    assert call(bus.port, servo_id, reg.address, word) == (scs.COMM_SUCCESS, 0)


def read_ok(bus: SdkBus, servo_id: int, name: str) -> int:
    reg = REG[name]
    call = {1: bus.ph.read1ByteTxRx, 2: bus.ph.read2ByteTxRx}[reg.size]
    word, result, error = call(bus.port, servo_id, reg.address)
    assert (result, error) == (scs.COMM_SUCCESS, 0), bus.ph.getTxRxResult(result)
    return scs.SCS_TOHOST(word, reg.sign_bit) if reg.sign_bit is not None else word


# ---- the Feetech SDK's own calls ---------------------------------------------------------------
def test_sdk_ping_reads_model_number_777(sts_bus):
    bus = sts_bus()
    assert bus.ph.ping(bus.port, 4) == (777, scs.COMM_SUCCESS, 0)
    model, result, _ = bus.ph.ping(bus.port, 9)
    assert (model, result) == (0, scs.COMM_RX_TIMEOUT)                   # nobody has ID 9


class FlipFirstDataByte(DxlFaultInjector):
    """Flips the first parameter byte of every reply (FF FF ID LEN ERR data.. CHK: index 5); with ``reseal`` it
    rewrites the checksum (the inverted low byte of the sum of ID .. the last parameter), so it goes unseen."""

    def __init__(self, reseal: bool) -> None:
        super().__init__(DxlFaults())
        self.reseal = reseal

    def corrupt(self, packet: bytes) -> bytes:
        out = bytearray(packet)
        out[5] ^= 0x01
        if self.reseal:
            out[-1] = ~sum(out[2:-1]) & 0xFF
        return bytes(out)


@pytest.mark.parametrize("reseal", [False, True])
def test_a_corrupted_reply_whose_checksum_holds_is_recorded(sts_bus, reseal: bool):
    bus = sts_bus(ids=(1,), faults=FlipFirstDataByte(reseal))
    bus.servos[0].set("present_position", 1000)
    word, result, _ = bus.ph.read2ByteTxRx(bus.port, 1, REG["present_position"].address)
    assert (result == scs.COMM_SUCCESS) == reseal
    assert [u.servo_id for u in bus.emulator.undetected] == ([1] if reseal else [])
    if reseal:
        assert word == 1001                                   # the SDK takes it as data


@pytest.mark.parametrize(("name", "value"), [
    ("goal_position", 3000), ("goal_position", -700), ("goal_velocity", -1500), ("acceleration", 254),
    ("torque_enable", 1), ("torque_limit", 500), ("lock", 0), ("p_coefficient", 16), ("d_coefficient", 32),
    ("homing_offset", -1234), ("min_position_limit", 700), ("return_delay_time", 0), ("operating_mode", 2),
])
def test_sdk_write_and_read_back(sts_bus, name, value):
    bus = sts_bus(ids=(1,))
    write_ok(bus, 1, name, value)
    assert read_ok(bus, 1, name) == value
    assert bus.servo(1).get(name) == value


def test_sdk_write_with_eeprom_locked_is_answered_and_applied_but_not_saved(sts_bus):
    bus = sts_bus(ids=(1,))
    servo = bus.servo(1)
    assert read_ok(bus, 1, "lock") == 1                       # the EEPROM powers up locked
    write_ok(bus, 1, "p_coefficient", 16)                     # answered without an error bit ...
    write_ok(bus, 1, "maximum_acceleration", 254)
    assert read_ok(bus, 1, "p_coefficient") == 16             # ... and in effect at once
    servo.power_cycle()
    assert read_ok(bus, 1, "p_coefficient") == 32             # but not saved
    assert read_ok(bus, 1, "maximum_acceleration") == REG["maximum_acceleration"].default

    write_ok(bus, 1, "lock", 0)                               # LeRobot's way: unlock, write, lock
    write_ok(bus, 1, "p_coefficient", 16)
    write_ok(bus, 1, "maximum_acceleration", 254)
    write_ok(bus, 1, "lock", 1)
    servo.power_cycle()
    assert read_ok(bus, 1, "p_coefficient") == 16
    assert read_ok(bus, 1, "maximum_acceleration") == 254
    assert read_ok(bus, 1, "lock") == 1


def test_id_change_answers_from_the_old_id_and_needs_the_unlock_to_survive(sts_bus):
    bus = sts_bus(ids=(1,))
    servo = bus.servo(1)
    write_ok(bus, 1, "id", 7)                                 # locked: in effect, answered from ID 1
    assert bus.ph.ping(bus.port, 7)[:2] == (777, scs.COMM_SUCCESS)
    assert bus.ph.ping(bus.port, 1)[1] == scs.COMM_RX_TIMEOUT
    servo.power_cycle()
    assert servo.servo_id == 1                                # lost without an unlock
    write_ok(bus, 1, "lock", 0)
    write_ok(bus, 1, "id", 7)
    servo.power_cycle()
    assert bus.ph.ping(bus.port, 7)[:2] == (777, scs.COMM_SUCCESS)


def test_sdk_sync_read_of_the_state_block_for_six_servos(sts_bus):
    bus = sts_bus()
    for k, servo in enumerate(bus.servos):
        servo.set("present_position", 1000 + 300 * k)
        servo.set("present_velocity", -40 * k)
        servo.set("present_load", 100 - 50 * k)               # signed, bit 10
        servo.set("present_voltage", 118 + k)
        servo.set("present_temperature", 30 + k)
        servo.set("present_current", -7 * k)
    group = scs.GroupSyncRead(bus.port, bus.ph, sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_LENGTH)
    for servo_id in SO101_IDS:
        assert group.addParam(servo_id)
    assert group.txRxPacket() == scs.COMM_SUCCESS
    for k, servo_id in enumerate(SO101_IDS):
        assert group.isAvailable(servo_id, sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_LENGTH)
        assert group.getData(servo_id, 56, 2) == 1000 + 300 * k
        assert scs.SCS_TOHOST(group.getData(servo_id, 58, 2), 15) == -40 * k
        assert scs.SCS_TOHOST(group.getData(servo_id, 60, 2), 10) == 100 - 50 * k
        assert group.getData(servo_id, 62, 1) == 118 + k
        assert scs.SCS_TOHOST(group.getData(servo_id, 69, 2), 15) == -7 * k
        state = sts3215.decode_state_block(bytes(group.data_dict[servo_id]))
        assert state.load == pytest.approx((100 - 50 * k) / 1000)
        assert state.temperature == 30 + k


def test_sync_read_answers_one_status_packet_per_servo_in_id_list_order(sts_bus):
    bus = sts_bus()
    for servo in bus.servos:
        servo.set("present_position", 100 * servo.servo_id)
    order = (5, 2, 6, 1)
    request = hand_packet(0xFE, 0x82, bytes([56, 2, *order]))
    reply = raw_exchange(bus.emulator.port_path, request, expect=8 * len(order))
    expected = b"".join(hand_packet(sid, 0x00, (100 * sid).to_bytes(2, "little")) for sid in order)
    assert reply == expected


def test_sdk_sync_write_reaches_every_servo_without_a_reply(sts_bus):
    calls = []
    bus = sts_bus(on_write=lambda servo, address, data: calls.append((servo.servo_id, address, data)))
    group = scs.GroupSyncWrite(bus.port, bus.ph, REG["goal_position"].address, 2)
    goals = {1: 1024, 2: 2048, 3: scs.SCS_TOSCS(-300, 15), 4: 4095, 5: 10, 6: 2500}
    for servo_id, goal in goals.items():
        assert group.addParam(servo_id, [scs.SCS_LOBYTE(goal), scs.SCS_HIBYTE(goal)])
    assert group.txPacket() == scs.COMM_SUCCESS
    assert eventually(lambda: len(calls) == 6)
    time.sleep(0.02)
    assert bus.port.getBytesAvailable() == 0                  # Sync Write is never answered
    for servo_id, goal in goals.items():
        assert bus.servo(servo_id).get("goal_position") == scs.SCS_TOHOST(goal, 15)
    assert sorted(c[0] for c in calls) == list(SO101_IDS)


def test_sdk_reg_write_takes_effect_on_action(sts_bus):
    bus = sts_bus(ids=(1, 2))
    for servo_id in (1, 2):
        result, error = bus.ph.regWriteTxRx(bus.port, servo_id, REG["goal_position"].address, 2, [0x00, 0x0C])
        assert (result, error) == (scs.COMM_SUCCESS, 0)
        assert bus.servo(servo_id).get("goal_position") == 0
        assert read_ok(bus, servo_id, "async_write_flag") == 1
    assert bus.ph.action(bus.port, p0.BROADCAST_ID) == scs.COMM_SUCCESS     # no reply; the reads below queue after it
    for servo_id in (1, 2):
        assert read_ok(bus, servo_id, "goal_position") == 0x0C00
        assert read_ok(bus, servo_id, "async_write_flag") == 0


def test_on_read_runs_under_the_lock_before_every_read_and_each_sync_read_reply(sts_bus):
    reads: list[int] = []

    def count_reads(servo: StsServoRegisters) -> None:       # every read sees its own present position
        reads.append(servo.servo_id)
        servo.set("present_position", reads.count(servo.servo_id))

    bus = sts_bus(ids=(1, 2), on_read=count_reads)
    assert [read_ok(bus, 1, "present_position") for _ in range(2)] == [1, 2]
    group = scs.GroupSyncRead(bus.port, bus.ph, REG["present_position"].address, 2)
    for servo_id in (1, 2):
        assert group.addParam(servo_id)
    assert group.txRxPacket() == scs.COMM_SUCCESS
    assert (group.getData(1, 56, 2), group.getData(2, 56, 2)) == (3, 1)
    assert reads == [1, 1, 1, 2]
    write_ok(bus, 1, "goal_position", 1000)                  # a write is no read
    assert reads == [1, 1, 1, 2]


def test_after_packets_runs_after_each_batch_of_packets(sts_bus):
    seen: list[int] = []                                     # servo 1's goal position as the hook found it
    bus = sts_bus(ids=(1,), after_packets=lambda: seen.append(bus.servo(1).get("goal_position")))
    write_ok(bus, 1, "goal_position", 3000)
    assert eventually(lambda: seen[-1:] == [3000])
    calls = len(seen)
    time.sleep(0.2)                                          # a silent line changes nothing: no calls
    assert len(seen) == calls
    assert bus.emulator.stats["hook_errors"] == 0


def test_failing_hooks_are_counted_and_the_bus_still_answers(sts_bus):
    def broken(*_: object) -> None:
        raise RuntimeError("hook bug")

    bus = sts_bus(ids=(1,), on_read=broken, after_packets=broken)
    bus.servo(1).set("present_position", 1234)
    assert read_ok(bus, 1, "present_position") == 1234      # on_read failed, the read is served
    assert eventually(lambda: bus.emulator.stats["hook_errors"] == 2)       # ... and after_packets
    write_ok(bus, 1, "goal_position", 2000)
    assert read_ok(bus, 1, "goal_position") == 2000
    assert bus.emulator.stats["internal_errors"] == 0


def test_the_family_bus_takes_the_hooks():
    def on_read(servo: StsServoRegisters) -> None:
        pass

    def after_packets() -> None:
        pass

    bus = FAMILIES["sts3215"].make_bus([StsServoRegisters(1)], baud_rate=BAUD, wire_time=False, faults=None,
                                       on_read=on_read, after_packets=after_packets)
    assert isinstance(bus, StsBusEmulator) and (bus.on_read, bus.after_packets) == (on_read, after_packets)


def test_status_bits_travel_in_every_err_byte(sts_bus):
    bus = sts_bus(ids=(3,))
    bus.servo(3).set("status", sts3215.STATUS_OVERLOAD | sts3215.STATUS_OVERHEAT)
    _, result, error = bus.ph.read2ByteTxRx(bus.port, 3, REG["present_position"].address)
    assert result == scs.COMM_SUCCESS
    assert error == sts3215.STATUS_OVERLOAD | sts3215.STATUS_OVERHEAT
    assert bus.ph.getRxPacketError(error) == "[RxPacketError] Overheat error!"
    assert bus.ph.ping(bus.port, 3) == (777, scs.COMM_SUCCESS, error)


def test_response_level_0_answers_only_reads_and_pings(sts_bus):
    bus = sts_bus(ids=(2,))
    result, _ = bus.ph.write1ByteTxRx(bus.port, 2, REG["response_status_level"].address, 0)
    assert result == scs.COMM_RX_TIMEOUT                      # the reply follows the new level already
    result, _ = bus.ph.write2ByteTxRx(bus.port, 2, REG["goal_position"].address, 1500)
    assert result == scs.COMM_RX_TIMEOUT                      # executed, but no status packet
    assert read_ok(bus, 2, "goal_position") == 1500
    assert bus.ph.ping(bus.port, 2)[:2] == (777, scs.COMM_SUCCESS)


def test_read_only_and_out_of_range_writes_change_nothing_but_are_answered(sts_bus):
    bus = sts_bus(ids=(1,))
    bus.servo(1).set("present_position", 2100)
    assert bus.ph.write2ByteTxRx(bus.port, 1, REG["present_position"].address, 5) == (scs.COMM_SUCCESS, 0)
    assert read_ok(bus, 1, "present_position") == 2100
    assert bus.ph.write1ByteTxRx(bus.port, 1, REG["id"].address, 254) == (scs.COMM_SUCCESS, 0)
    assert bus.servo(1).servo_id == 1
    # one write across Torque Limit (valid) and two reserved bytes: the register changes, the rest is ignored
    assert bus.ph.writeTxRx(bus.port, 1, REG["torque_limit"].address, 4, [0x2C, 0x01, 9, 9]) == (scs.COMM_SUCCESS, 0)
    assert read_ok(bus, 1, "torque_limit") == 300
    assert bus.servo(1).read(50, 2) == b"\x00\x00"


def test_torque_enable_128_calibrates_the_middle(sts_bus):
    bus = sts_bus(ids=(1,))
    bus.servo(1).set("present_position", 3000)
    write_ok(bus, 1, "lock", 0)
    write_ok(bus, 1, "torque_enable", 128)
    assert read_ok(bus, 1, "present_position") == 2048
    assert read_ok(bus, 1, "homing_offset") == 3000 - 2048      # Present = actual - offset
    assert read_ok(bus, 1, "torque_enable") == 0
    bus.servo(1).power_cycle()
    assert read_ok(bus, 1, "homing_offset") == 952              # saved: the EEPROM was unlocked


# ---- raw bytes on the wire ---------------------------------------------------------------------
def test_raw_ping_and_read_bytes(sts_bus):
    bus = sts_bus(ids=(1,))
    path = bus.emulator.port_path
    assert raw_exchange(path, bytes.fromhex("ff ff 01 02 01 fb"), 6) == bytes.fromhex("ff ff 01 02 00 fc")
    reply = raw_exchange(path, hand_packet(1, 0x02, bytes([3, 2])), 8)        # model number at 3
    assert reply == hand_packet(1, 0x00, bytes([0x09, 0x03]))
    assert reply == bytes.fromhex("ff ff 01 04 00 09 03 ee")


def test_bad_checksum_is_ignored_like_a_real_servo(sts_bus):
    bus = sts_bus(ids=(1,))
    path = bus.emulator.port_path
    good = hand_packet(1, 0x02, bytes([56, 2]))
    bad = good[:-1] + bytes([good[-1] ^ 0x5A])
    assert raw_exchange(path, bad, 8, timeout=0.1) == b""                    # no reply at all
    assert raw_exchange(path, good, 8) == hand_packet(1, 0x00, bytes(2))      # the bus still works
    broken_write = hand_packet(1, 0x03, bytes([42, 0x00, 0x08]))[:-1] + b"\x00"
    assert raw_exchange(path, broken_write, 6, timeout=0.1) == b""
    assert eventually(lambda: bus.emulator.stats["checksum_errors"] == 2)
    assert bus.servo(1).get("goal_position") == 0                            # and nothing was executed


def test_garbage_and_a_split_packet_are_handled(sts_bus):
    bus = sts_bus(ids=(2,))
    with serial.Serial(bus.emulator.port_path, BAUD, timeout=1.0) as link:
        packet = hand_packet(2, 0x01)
        link.write(b"\x00\xff\x13\xff" + packet[:3])
        time.sleep(0.005)
        link.write(packet[3:])
        assert link.read(6) == hand_packet(2, 0x00)


def test_broadcast_ping_is_answered_only_by_a_lone_servo(sts_bus):
    lone = sts_bus(ids=(6,))
    assert raw_exchange(lone.emulator.port_path, hand_packet(0xFE, 0x01), 6) == hand_packet(6, 0x00)
    crowd = sts_bus(ids=(1, 2))
    assert raw_exchange(crowd.emulator.port_path, hand_packet(0xFE, 0x01), 6, timeout=0.1) == b""


def test_broadcast_write_acts_on_every_servo_without_a_reply(sts_bus):
    bus = sts_bus(ids=(1, 2, 3))
    reply = raw_exchange(bus.emulator.port_path, hand_packet(0xFE, 0x03, bytes([40, 1])), 6, timeout=0.1)
    assert reply == b""
    assert eventually(lambda: all(servo.get("torque_enable") == 1 for servo in bus.servos))


def test_return_delay_is_real_time(sts_bus):
    bus = sts_bus(ids=(1,))
    write_ok(bus, 1, "return_delay_time", 250)              # 500 µs
    start = time.perf_counter()
    for _ in range(10):
        assert bus.ph.ping(bus.port, 1)[1] == scs.COMM_SUCCESS     # two exchanges each (ping + read)
    assert (time.perf_counter() - start) / 20 >= 500e-6


def test_wire_time_follows_the_baud_rate(sts_bus):
    bus = sts_bus(wire_time=True)
    group = scs.GroupSyncRead(bus.port, bus.ph, sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_LENGTH)
    for servo_id in SO101_IDS:
        group.addParam(servo_id)
    start = time.perf_counter()
    for _ in range(5):
        assert group.txRxPacket() == scs.COMM_SUCCESS
    # instruction 14 bytes + 6 replies x 21 bytes, 10 bits each at 1 Mbps
    assert (time.perf_counter() - start) / 5 >= (14 + 6 * 21) * 10 / BAUD


def test_fault_knobs_drop_and_stall(sts_bus):
    dropped = sts_bus(ids=(1,), faults=DxlFaults(drop_status_rate=1.0))
    assert dropped.ph.ping(dropped.port, 1)[1] == scs.COMM_RX_TIMEOUT
    stalled = sts_bus(ids=(1, 2), faults=DxlFaults(stall_servo_id=2, stall_window_s=(0.0, 60.0),
                                                    trip_servo_id=1, trip_after_s=0.0,
                                                    trip_error_bits=sts3215.STATUS_OVERLOAD))
    assert stalled.ph.ping(stalled.port, 2)[1] == scs.COMM_RX_TIMEOUT
    model, result, error = stalled.ph.ping(stalled.port, 1)
    assert (model, result, error) == (777, scs.COMM_SUCCESS, sts3215.STATUS_OVERLOAD)
    assert stalled.servo(1).get("torque_enable") == 0


def test_emulator_rejects_an_empty_bus():
    with pytest.raises(ValueError, match="at least one servo"):
        StsBusEmulator([])


# ---- the codec, against hand-built packets -----------------------------------------------------
def test_parser_finds_packets_in_noise_and_flags_bad_checksums():
    stream = b"\x01\xff" + hand_packet(3, 0x02, bytes([56, 15])) + b"\xff\xff\xff" + hand_packet(4, 0x01)
    stream += hand_packet(5, 0x03, bytes([40, 1]))[:-1] + b"\x00"
    parser = p0.PacketParser()
    packets = []
    for k in range(0, len(stream), 3):                      # dribbled in 3-byte pieces
        packets += parser.feed(stream[k: k + 3])
    assert [(p.servo_id, p.instruction, p.params, p.checksum_ok) for p in packets] == [
        (3, 0x02, bytes([56, 15]), True), (4, 0x01, b"", True), (5, 0x03, bytes([40, 1]), False)]
    assert parser.checksum_errors == 1
    assert p0.build_instruction(3, 0x02, bytes([56, 15])) == hand_packet(3, 0x02, bytes([56, 15]))


def test_parser_resynchronises_after_an_impossible_length():
    parser = p0.PacketParser()
    assert parser.feed(b"\xff\xff\x01\x01\x00") == []         # LEN 1 is impossible
    assert [p.servo_id for p in parser.feed(hand_packet(2, 0x01))] == [2]
    assert parser.feed(b"\xff\xff\x01\x09\x02") == [] and parser.pending == 5   # waits for 9 more
    assert parser.resync() == [] and parser.pending == 0


def test_registers_reject_an_impossible_id():
    with pytest.raises(ValueError, match=r"0\.\.253"):
        StsServoRegisters(254)


# ---- a separate emulator process, as the live rig runs it --------------------------------------
@pytest.mark.system
def test_sdk_against_an_emulator_process_at_the_so101_read_rate():
    command = [sys.executable, "-m", "na_sim.sts_emulator", "--ids", *map(str, SO101_IDS), "--wire-time"]
    process = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        port = scs.PortHandler(process.stdout.readline().strip())
        assert port.openPort() and port.setBaudRate(BAUD), "emulator process did not start"
        ph = scs.PacketHandler(0)
        goal = REG["goal_position"].address
        for servo_id in SO101_IDS:
            assert ph.write2ByteTxRx(port, servo_id, goal, 2000 + servo_id) == (scs.COMM_SUCCESS, 0)
        group = scs.GroupSyncRead(port, ph, REG["goal_position"].address, 2)
        for servo_id in SO101_IDS:
            group.addParam(servo_id)
        failures, start = 0, time.perf_counter()
        for _ in range(100):
            failures += group.txRxPacket() != scs.COMM_SUCCESS
        elapsed = (time.perf_counter() - start) / 100
        assert failures == 0
        assert [group.getData(i, REG["goal_position"].address, 2) for i in SO101_IDS] == [2000 + i for i in SO101_IDS]
        assert elapsed < 1 / 30                                # well inside one 30 fps frame
        port.closePort()
    finally:
        process.stdin.close()
        try:
            assert process.wait(timeout=10) == 0
        finally:
            if process.poll() is None:
                process.kill()


def test_command_line_rejects_a_bad_id(capsys):
    from na_sim.sts_emulator import main

    with pytest.raises(SystemExit):
        main(["--ids", "1", "300"])
    assert "servo id must be 0..253, got 300" in capsys.readouterr().err
