"""ATI Net F/T Raw Data Transfer (RDT) over UDP: the published wire constants.

Only the constants live here. The driver's client (``na_driver.ft_sources``) and the simulator's
emulator (``na_sim.ft_emulator``) encode and decode on their own, so that each checks the other.
Sources: ATI Net F/T manual and the public open-source Net F/T drivers (docs/REFERENCES.md, "Net F/T").

Request (8 bytes, big-endian): ``uint16 header, uint16 command, uint32 sample count`` (0 = until
stopped). Record (36 bytes, big-endian): ``uint32 rdt_sequence, uint32 ft_sequence, uint32 status,
int32 Fx Fy Fz Tx Ty Tz`` in counts (scale from the sensor's calibration).
"""

from __future__ import annotations

import struct

RDT_PORT = 49152
RDT_HEADER = 0x1234
RDT_CMD_STOP = 0x0000
RDT_CMD_START_HIGH_SPEED = 0x0002
RDT_CMD_SET_SOFTWARE_BIAS = 0x0042
RDT_REQUEST = struct.Struct(">HHI")
RDT_RECORD = struct.Struct(">III6i")
RDT_STATUS_OK = 0
RDT_STATUS_ERROR = 0x8000_0000            # bit 31: error summary
INT32_LIMITS = (-(2 ** 31), 2 ** 31 - 1)  # a count at a limit is saturated, not a measurement
# Counts per unit hard-coded by the ROS 1 Net F/T driver; real sensors state theirs in the calibration.
DEFAULT_COUNTS_PER_FORCE = 1_000_000.0       # counts per N
DEFAULT_COUNTS_PER_TORQUE = 1_000_000_000.0  # counts per N·m
