"""Protocol 2.0 CRC-16 against the e-manual's example packets."""

from __future__ import annotations

from na_description.crc16 import crc16


def test_crc_of_the_e_manual_ping_packets() -> None:
    # e-manual, Protocol 2.0 "Ping": instruction to ID 1 ends 19 4E, the status of an XM430 ends 65 5D.
    assert crc16(bytes.fromhex("ff ff fd 00 01 03 00 01")) == 0x4E19
    assert crc16(bytes.fromhex("ff ff fd 00 01 07 00 55 00 06 04 26")) == 0x5D65


def test_crc_takes_lists_and_continues_over_parts() -> None:
    data = bytes.fromhex("ff ff fd 00 01 07 00 55 00 06 04 26")
    assert crc16(list(data)) == crc16(memoryview(data)) == crc16(data)
    assert crc16(data[5:], crc16(data[:5])) == crc16(data)
