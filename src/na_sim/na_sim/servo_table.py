"""The XM430-W350 as the servo physics addresses it: register units in SI, operating modes, the
256-byte control table as numpy records, the present-value block the physics rewrites after every
step, and :class:`SimulatedServoRegisters`, which writes that block at once. Layout and units come
from :mod:`na_description.xm430`."""

from __future__ import annotations

import math

import numpy as np

from na_description import xm430
from na_sim.servo_registers import ServoRegisters

TWO_PI = 2.0 * math.pi
PULSES_PER_RAD = xm430.PULSES_PER_REV / TWO_PI
VELOCITY_UNIT_RAD_S = xm430.VELOCITY_UNIT_RPM * TWO_PI / 60.0
PROFILE_ACCEL_UNIT_RAD_S2 = xm430.PROFILE_ACCEL_UNIT_RPM2 * TWO_PI / 3600.0

MODE_CURRENT, MODE_VELOCITY, MODE_POSITION, MODE_EXTENDED, MODE_CURRENT_POSITION, MODE_PWM = 0, 1, 3, 4, 5, 16

# numpy view of the 256-byte control table: one record per servo, one field per register.
CONTROL_TABLE_DTYPE = np.dtype({
    "names": [r.name for r in xm430.CONTROL_TABLE],
    "formats": [("<i" if r.signed else "<u") + str(r.size) for r in xm430.CONTROL_TABLE],
    "offsets": [r.address for r in xm430.CONTROL_TABLE],
    "itemsize": xm430.CONTROL_TABLE_SIZE,
})

# The block the physics owns and rewrites after every step: Realtime Tick (120) .. Present Temperature (146).
SENSOR_REGISTERS = ("realtime_tick", "moving", "moving_status", "present_pwm", "present_current",
                    "present_velocity", "present_position", "velocity_trajectory", "position_trajectory",
                    "present_input_voltage", "present_temperature")
SENSOR_BLOCK_START = xm430.REGISTERS["realtime_tick"].address
GOAL_BLOCK_START = xm430.REGISTERS["goal_pwm"].address          # 100: Goal PWM .. Goal Position (116-119)
SENSOR_BLOCK_LENGTH = xm430.REGISTERS["present_temperature"].end - SENSOR_BLOCK_START
SENSOR_BLOCK_DTYPE = np.dtype({
    "names": list(SENSOR_REGISTERS),
    "formats": [("<i" if xm430.REGISTERS[n].signed else "<u") + str(xm430.REGISTERS[n].size) for n in SENSOR_REGISTERS],
    "offsets": [xm430.REGISTERS[n].address - SENSOR_BLOCK_START for n in SENSOR_REGISTERS],
    "itemsize": SENSOR_BLOCK_LENGTH,
})


class SimulatedServoRegisters(ServoRegisters):
    """A servo's control table plus one bulk internal write for the physics' present-value block.

    Writing the 27-byte block at once (instead of eleven ``set`` calls) keeps the per-frame
    register traffic of the offline generator small; a bus reader never sees a half-written block.
    """

    def store_block(self, address: int, data: bytes) -> None:
        """Internal write of raw bytes (no access checks), like :meth:`set` for a run of registers."""
        if address < 0 or address + len(data) > xm430.CONTROL_TABLE_SIZE:
            raise ValueError(f"block {address}+{len(data)} is outside the control table")
        with self.lock:
            self._memory[address: address + len(data)] = data
