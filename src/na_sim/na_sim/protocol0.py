"""Feetech STS/SMS serial-bus packet codec ("Protocol 0") for the servo emulator (pure functions, ROS-free).

Instruction packet ``FF FF | ID | LEN | INST | P1..PN | CHK``, status packet ``FF FF | ID | LEN |
ERR | P1..PN | CHK`` with LEN = N + 2 and CHK = ~(ID + LEN + INST/ERR + P1 + ... + PN) & 0xFF.
No byte stuffing; addresses and lengths are one byte. Sources: the Feetech SDK (``scservo_sdk``)
and the STS/SMS communication protocol manual (docs/REFERENCES.md, STS3215).
"""

from __future__ import annotations

from dataclasses import dataclass

from na_sim.packet_stream import PacketStream

HEADER = b"\xff\xff"
BROADCAST_ID = 0xFE
MAX_ID = 253                        # servo IDs 0..253
MIN_LENGTH = 2                      # LEN of a packet without parameters: INST/ERR + CHK
FRAMING_BYTES = 4                   # header, ID and LEN
CHECK_BYTES = 1                     # the checksum
_ID_INDEX = 2
MAX_LENGTH = 250                    # longest LEN the parser accepts before it resynchronises

# Instructions.
PING = 0x01
READ = 0x02
WRITE = 0x03
REG_WRITE = 0x04
ACTION = 0x05
SYNC_READ = 0x82
SYNC_WRITE = 0x83
INSTRUCTION_NAMES = {
    PING: "ping", READ: "read", WRITE: "write", REG_WRITE: "reg_write", ACTION: "action",
    SYNC_READ: "sync_read", SYNC_WRITE: "sync_write",
}


def checksum(body: bytes | bytearray | memoryview) -> int:
    """Checksum of ``body`` = ID, LEN, INST/ERR and the parameters: the inverted low byte of their sum."""
    return ~sum(bytes(body)) & 0xFF


def build_packet(servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    """A complete packet; ``instruction`` is INST, or the ERR byte of a status packet."""
    if not 0 <= servo_id <= BROADCAST_ID:
        raise ValueError(f"packet id must be 0..254, got {servo_id}")
    params = bytes(params)
    if len(params) + MIN_LENGTH > MAX_LENGTH:
        raise ValueError(f"{len(params)} parameter bytes do not fit one packet")
    body = bytes([servo_id, len(params) + MIN_LENGTH, instruction & 0xFF]) + params
    return HEADER + body + bytes([checksum(body)])


def status_checks(packet: bytes) -> list[tuple[int, int]]:
    """(ID index, checksum index) of the one part of a status packet a receiver checks."""
    return [(_ID_INDEX, len(packet) - CHECK_BYTES)]


def check_holds(packet: bytes, checksum_index: int) -> bool:
    """True when the checksum at ``checksum_index`` matches ID .. the last parameter before it."""
    return checksum(packet[_ID_INDEX:checksum_index]) == packet[checksum_index]


def build_instruction(servo_id: int, instruction: int, params: bytes = b"") -> bytes:
    return build_packet(servo_id, instruction, params)


def build_status(servo_id: int, error: int, params: bytes = b"") -> bytes:
    return build_packet(servo_id, error, params)


@dataclass(frozen=True)
class Packet:
    """One packet found in the byte stream; ``instruction`` is INST, or ERR in a status packet (no INST byte).

    Same fields as :class:`na_sim.protocol2.Packet`.
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

    Garbage before a header is skipped (``garbage_bytes``). A packet with a bad checksum is
    returned with ``checksum_ok=False`` (``checksum_errors``) and its bytes are consumed; a header
    followed by ID 0xFF or an impossible LEN is garbage and the parser resynchronises on the next
    header. Same interface as :class:`na_sim.protocol2.PacketParser`.
    """

    def __init__(self, max_length: int = MAX_LENGTH) -> None:
        super().__init__(max_length)

    def _next(self) -> Packet | None:
        buffer = self._buffer
        while True:
            start = buffer.find(HEADER)
            if start < 0:
                self._drop(len(buffer) - (1 if buffer[-1:] == b"\xff" else 0))   # keep a possible half header
                return None
            self._drop(start)
            if len(buffer) < 4:
                return None
            length = buffer[3]
            if buffer[2] == 0xFF or not MIN_LENGTH <= length <= self._max_length:
                self._drop(1)                      # FF FF FF ... or impossible LEN: resynchronise
                continue
            total = 4 + length
            if len(buffer) < total:
                return None
            raw, ok = self._take(total, lambda packet: check_holds(packet, len(packet) - CHECK_BYTES))
            return Packet(servo_id=raw[2], instruction=raw[4], params=raw[5:-1], checksum_ok=ok, raw=raw)


def parse_packets(data: bytes) -> list[Packet]:
    """All complete packets in ``data`` (convenience for tests and tools)."""
    return PacketParser().feed(data)
