"""What the arm driver reads from each servo every cycle, and where those bytes are (ROS-free).

Two layouts of the per-cycle block:

* indirect (preferred): Indirect Address 1..N point at exactly the registers the driver
  publishes, plus Realtime Tick (to tell fresh replies from late ones) and Bus Watchdog (to see an
  expired watchdog), so one read of Indirect Data 1..N returns 18 bytes;
* direct (fallback, for servos that refuse the indirect map): Realtime Tick .. Present
  Temperature, addresses 120..146, 27 bytes, which carries 8 trajectory bytes the driver does not
  use and no Bus Watchdog.

Indirect Address / Indirect Data: ROBOTIS e-manual, XM430-W350 (addresses 168.. and 224..; a
multi-byte register needs one indirect address per byte).
"""

from __future__ import annotations

from dataclasses import dataclass

from na_description import xm430

REG = xm430.REGISTERS
INDIRECT_FIELDS = ("realtime_tick", "present_pwm", "present_current", "present_velocity", "present_position",
                   "present_input_voltage", "present_temperature", "bus_watchdog")
DIRECT_FIELDS = ("realtime_tick", "present_pwm", "present_current", "present_velocity", "present_position",
                 "present_input_voltage", "present_temperature")


@dataclass(frozen=True)
class StateLayout:
    """A per-cycle read: ``length`` bytes from ``address``; ``offsets`` maps register name -> byte offset (what
    :func:`na_description.xm430.decode_states` decodes a servo's block by)."""

    name: str
    address: int
    length: int
    offsets: dict[str, int]

    def value(self, data: bytes, name: str) -> int:
        """A register's value (typed, signed where the register is) from one servo's block."""
        register, offset = REG[name], self.offsets[name]
        return xm430.decode_value(register, data[offset: offset + register.size])

    def has(self, name: str) -> bool:
        return name in self.offsets


def _indirect_layout() -> StateLayout:
    offsets, cursor = {}, 0
    for name in INDIRECT_FIELDS:
        offsets[name] = cursor
        cursor += REG[name].size
    return StateLayout("indirect", REG["indirect_data_1"].address, cursor, offsets)


def _direct_layout() -> StateLayout:
    start = REG[DIRECT_FIELDS[0]].address
    end = REG[DIRECT_FIELDS[-1]].end
    return StateLayout("direct", start, end - start, {name: REG[name].address - start for name in DIRECT_FIELDS})


INDIRECT = _indirect_layout()
DIRECT = _direct_layout()
LAYOUTS = {"indirect": INDIRECT, "direct": DIRECT}


def indirect_map() -> bytes:
    """The values of Indirect Address 1..N (2 bytes each, little-endian) that make :data:`INDIRECT` work."""
    addresses = [REG[name].address + i for name in INDIRECT_FIELDS for i in range(REG[name].size)]
    return b"".join(a.to_bytes(2, "little") for a in addresses)


INDIRECT_MAP_ADDRESS = REG["indirect_address_1"].address
