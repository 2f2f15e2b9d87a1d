"""Protocol 2.0 CRC-16 against the e-manual's example packets and a bit-by-bit reference written here."""

from __future__ import annotations

from na_description.crc16 import crc16


def _bitwise(data: bytes) -> int:
    crc = 0
    for byte in data:
        crc ^= byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x8005) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def test_crc_of_the_e_manual_ping_packets() -> None:
    # e-manual, Protocol 2.0 "Ping": instruction to ID 1 ends 19 4E, the status of an XM430 ends 65 5D.
    assert crc16(bytes.fromhex("ff ff fd 00 01 03 00 01")) == 0x4E19
    assert crc16(bytes.fromhex("ff ff fd 00 01 07 00 55 00 06 04 26")) == 0x5D65


def test_crc_takes_lists_and_continues_over_parts() -> None:
    data = bytes(range(256)) * 3
    assert crc16(data) == _bitwise(data)
    assert crc16(list(data)) == crc16(memoryview(data)) == crc16(data)
    assert crc16(data[100:], crc16(data[:100])) == crc16(data)
