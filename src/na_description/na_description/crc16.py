"""DYNAMIXEL Protocol 2.0 CRC-16 (ROS-free).

One implementation, imported by the servo emulator's codec (na_sim.protocol2) and the arm driver's
bus (na_driver.dxl_bus). Source: ROBOTIS e-manual, Protocol 2.0 "CRC" (docs/REFERENCES.md, Protocol 2.0).
"""

from __future__ import annotations

from collections.abc import Iterable

POLYNOMIAL = 0x8005


def _table() -> tuple[int, ...]:
    """Lookup table: polynomial 0x8005, MSB first (not reflected)."""
    table = []
    for byte in range(256):
        crc = byte << 8
        for _ in range(8):
            crc = ((crc << 1) ^ POLYNOMIAL) if crc & 0x8000 else (crc << 1)
        table.append(crc & 0xFFFF)
    return tuple(table)


_TABLE = _table()


def crc16(data: Iterable[int], crc: int = 0) -> int:
    """CRC-16 of ``data`` (bytes or a list of byte values), continued from ``crc``.

    Init 0, not reflected, no final xor; passing the CRC of a packet's first part as ``crc`` continues
    it over the next part (the per-servo CRCs of a Fast Sync Read reply).
    """
    for byte in data:
        crc = ((crc << 8) ^ _TABLE[((crc >> 8) ^ byte) & 0xFF]) & 0xFFFF
    return crc
