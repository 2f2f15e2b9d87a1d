"""DYNAMIXEL Protocol 2.0 packet codec for the servo emulator (pure functions, ROS-free).

Packet: ``FF FF FD 00 | ID | LEN_L LEN_H | INST | params... | CRC_L CRC_H`` with LEN = bytes
after LEN (instruction, parameters, CRC), counted after byte stuffing. Status packets use
INST 0x55 followed by the ERR byte. Source: ROBOTIS e-manual "Protocol 2.0" (docs/REFERENCES.md, Protocol 2.0).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from na_description.crc16 import crc16
from na_sim.packet_stream import PacketStream

HEADER = b"\xff\xff\xfd\x00"
HEADER_PREFIX = b"\xff\xff\xfd"
BROADCAST_ID = 0xFE
MAX_ID = 252
MIN_LENGTH = 3                      # LEN of a packet without parameters: INST + CRC
MAX_LENGTH = 4096                   # longest LEN the parser accepts before it resynchronises
_ID_INDEX = 4
FRAMING_BYTES = 7                   # header, ID and LEN
CHECK_BYTES = 2                     # the CRC

# Instructions (e-manual, Protocol 2.0 "Instruction").
PING = 0x01
READ = 0x02
WRITE = 0x03
REG_WRITE = 0x04
ACTION = 0x05
FACTORY_RESET = 0x06
REBOOT = 0x08
CLEAR = 0x10
STATUS = 0x55
SYNC_READ = 0x82
SYNC_WRITE = 0x83
FAST_SYNC_READ = 0x8A
BULK_READ = 0x92
BULK_WRITE = 0x93
FAST_BULK_READ = 0x9A
INSTRUCTION_NAMES = {
    PING: "ping", READ: "read", WRITE: "write", REG_WRITE: "reg_write", ACTION: "action",
    FACTORY_RESET: "factory_reset", REBOOT: "reboot", CLEAR: "clear", STATUS: "status",
    SYNC_READ: "sync_read", SYNC_WRITE: "sync_write", FAST_SYNC_READ: "fast_sync_read",
    BULK_READ: "bulk_read", BULK_WRITE: "bulk_write", FAST_BULK_READ: "fast_bulk_read",
}
# Parameters of the Clear instruction that clear the multi-turn position (e-manual, Clear 0x10).
CLEAR_MULTI_TURN_PARAMS = bytes([0x01, 0x44, 0x58, 0x4C, 0x22])


def stuff(body: bytes) -> bytes:
    """Byte stuffing: after every ``FF FF FD`` in INST..last parameter insert an extra ``FD``."""
    out = bytearray()
    for byte in body:
        out.append(byte)
        if byte == 0xFD and len(out) >= 3 and out[-3] == 0xFF and out[-2] == 0xFF:
            out.append(0xFD)
    return bytes(out)


def unstuff(body: bytes) -> bytes:
    """Undo :func:`stuff`: drop the ``FD`` that follows every ``FF FF FD``."""
    out = bytearray()
    index = 0
    while index < len(body):
        out.append(body[index])
        if body[index] == 0xFD and len(out) >= 3 and out[-3] == 0xFF and out[-2] == 0xFF \
                and index + 1 < len(body) and body[index + 1] == 0xFD:
            index += 1
        index += 1
    return bytes(out)


def build_packet(servo_id: int, instruction: int, params: bytes = b"", *, stuffed: bool = True) -> bytes:
    """A complete packet with stuffing, LEN and CRC."""
    if not 0 <= servo_id <= 0xFE:
        raise ValueError(f"packet id must be 0..254, got {servo_id}")
    body = bytes([instruction]) + bytes(params)
    if stuffed:
        body = stuff(body)
    head = HEADER + bytes([servo_id]) + (len(body) + 2).to_bytes(2, "little")
    frame = head + body
    return frame + crc16(frame).to_bytes(2, "little")


def build_instruction(servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    return build_packet(servo_id, instruction, params)


def build_status(servo_id: int, error: int, params: bytes = b"") -> bytes:
    """A status packet (INST 0x55, ERR byte, parameters)."""
    return build_packet(servo_id, STATUS, bytes([error & 0xFF]) + bytes(params))


def build_fast_status(entries: Iterable[tuple[int, int, bytes]]) -> bytes:
    """The one status packet of a Fast Sync/Bulk Read: ``(error, servo_id, data)`` per servo.

    Layout (e-manual "Fast Sync Read"): ID 0xFE, INST 0x55, then per servo ERR, ID, data and a
    CRC over the packet so far; the last servo's CRC is the packet CRC. Not byte-stuffed (the
    dynamixel-sdk does not unstuff fast replies).
    """
    parts = [(int(err) & 0xFF, int(sid), bytes(data)) for err, sid, data in entries]
    length = 1 + sum(len(data) + 4 for _, _, data in parts)
    frame = bytearray(HEADER + bytes([BROADCAST_ID]) + length.to_bytes(2, "little") + bytes([STATUS]))
    for err, sid, data in parts:
        frame += bytes([err, sid]) + data
        frame += crc16(frame).to_bytes(2, "little")
    if not parts:
        frame += crc16(frame).to_bytes(2, "little")
    return bytes(frame)


def status_checks(packet: bytes) -> list[tuple[int, int]]:
    """(ID index, CRC index) of each part of a plain status packet a receiver checks: one, the whole packet."""
    return [(_ID_INDEX, len(packet) - CHECK_BYTES)]


def fast_status_checks(data_lengths: Iterable[int]) -> list[tuple[int, int]]:
    """(ID index, CRC index) of each servo's part of a Fast Sync/Bulk Read status (:func:`build_fast_status`):
    each part's CRC covers the packet up to it, so a receiver may keep the parts before a broken one."""
    checks, start = [], len(HEADER) + 4          # after header, ID, LEN and INST
    for length in data_lengths:
        crc_index = start + 2 + length           # ERR, ID, data
        checks.append((start + 1, crc_index))
        start = crc_index + CHECK_BYTES
    return checks


def check_holds(packet: bytes, crc_index: int) -> bool:
    """True when the CRC at ``crc_index`` matches the bytes before it."""
    return crc16(packet[:crc_index]) == int.from_bytes(packet[crc_index:crc_index + CHECK_BYTES], "little")


@dataclass(frozen=True)
class Packet:
    """One packet found in the byte stream; ``params`` are unstuffed (for status packets they start with ERR).

    Same fields as :class:`na_sim.protocol0.Packet`; ``checksum_ok`` is the CRC check.
    """

    servo_id: int
    instruction: int
    params: bytes
    checksum_ok: bool
    raw: bytes

    @property
    def is_broadcast(self) -> bool:
        return self.servo_id == BROADCAST_ID


class PacketParser(PacketStream[Packet]):
    """Incremental parser: feed it bytes as they arrive, get complete packets back.

    Garbage before a header is skipped (counted in ``garbage_bytes``). A packet with a bad
    CRC is returned with ``checksum_ok=False`` (counted in ``checksum_errors``) so that a servo can
    answer it; a header with an impossible length is treated as garbage and the parser
    resynchronises on the next header. Same interface as :class:`na_sim.protocol0.PacketParser`.
    """

    def __init__(self, max_length: int = MAX_LENGTH) -> None:
        super().__init__(max_length)

    def _next(self) -> Packet | None:
        buffer = self._buffer
        while True:
            start = buffer.find(HEADER)
            if start < 0:
                # Keep a possible partial header at the end; the rest is garbage.
                keep = next((k for k in (3, 2, 1) if len(buffer) >= k and HEADER.startswith(bytes(buffer[-k:]))), 0)
                self._drop(len(buffer) - keep)
                return None
            self._drop(start)
            if len(buffer) < 7:
                return None
            length = int.from_bytes(buffer[5:7], "little")
            if length < MIN_LENGTH or length > self._max_length:
                self._drop(1)                       # impossible length: resynchronise after this byte
                continue
            total = 7 + length
            if len(buffer) < total:
                return None
            raw, ok = self._take(total, lambda packet: check_holds(packet, len(packet) - CHECK_BYTES))
            body = unstuff(raw[7:-2])
            return Packet(servo_id=raw[_ID_INDEX], instruction=body[0], params=body[1:], checksum_ok=ok, raw=raw)


def parse_packets(data: bytes) -> list[Packet]:
    """All complete packets in ``data`` (convenience for tests and tools)."""
    return PacketParser().feed(data)
