"""Feetech STS3215 backend of the arm driver (SO-101): settings, the per-cycle read, Status bits (ROS-free).

Control table, units and sign-magnitude encodings: :mod:`na_description.sts3215` (imported, not
restated). Start-up writes the settings the driver owns where they differ from the servo's:

* EEPROM (addresses 0-39): Operating Mode, Return Delay Time, P/D/I Coefficient (the STS position
  gains live in EEPROM) and Protection Current (parameter ``current_limit``). They are written
  with torque off and Lock (55) = 0, so that they survive a power cycle, read back, and Lock is
  set to 1 again whatever happened (the servo powers up locked; LeRobot handles the lock the same
  way). Settings that already match are not written (no EEPROM wear at every start).
* Homing Offset (31) and the Min/Max Position Limits are left as they are: on an SO-101 they hold
  LeRobot's calibration, which puts step 2048 at the middle of each joint's range (the robot
  spec's zero). The Homing Offsets are read and logged.

Every cycle reads the state block Present Position .. Present Current (56..70, 15 bytes) of all
servos with one Sync Read. Present Load (60) is the output duty the firmware applies (0.1 %,
sign bit 10): published as ``load`` and, being the PWM duty, as ``pwm`` too. The Status byte (65)
is the servo's error bits (voltage, angle sensor, overheat, over-current, overload): a set bit
trips a follower (torque off, with the reason). There is no Bus Watchdog and no reboot
instruction: ``~/reboot`` clears the Status bits the way the firmware allows (goal := present,
Torque Enable 1 then 0) and restores the settings.
"""

from __future__ import annotations

import contextlib

import numpy as np

from na_common.diagnostics import OK
from na_description import sts3215
from na_driver.arm_backend import Logger, ServoBackend, StartupError, StateRead
from na_driver.arm_config import ArmConfig
from na_driver.serial_bus import BusError
from na_driver.sts_bus import StsBus

REG = sts3215.REGISTERS
_GOAL = REG["goal_position"]
_PRESENT = REG["present_position"]
_STATUS = REG["status"]
_LOCKED, _UNLOCKED = 1, 0


class StsBackend(ServoBackend):
    """STS3215 servos on a :class:`StsBus`."""

    table = sts3215

    def __init__(self, config: ArmConfig, log: Logger, bus: StsBus | None = None) -> None:
        super().__init__(config, log, bus or StsBus(config.port, config.baud_rate,
                                                    reply_timeout=config.reply_timeout or None,
                                                    retries=config.bus_retries))
        self.homing_offsets: dict[int, int] = {}       # steps, each servo's Homing Offset register

    # ---- start-up -------------------------------------------------------------------------------
    def setup(self, where: str) -> list[int]:
        silent = [sid for sid in self.ids if self._read_register(sid, "response_status_level") == 0]
        if silent:
            raise StartupError(f"{where}: servo(s) {silent} have Response Status Level 0 and do not acknowledge "
                               f"writes; set it (address {REG['response_status_level'].address}) to 1")
        for k, sid in enumerate(self.ids):
            self._write_eeprom_settings(k, sid)
        self.homing_offsets = {sid: self._read_register(sid, "homing_offset") for sid in self.ids}
        self.log(OK, f"{where}: Homing Offset (steps, kept: the arm's calibration) {self.homing_offsets}")
        return [self._read_register(sid, "status") for sid in self.ids]

    def _eeprom_targets(self, k: int) -> dict[str, int]:
        config = self.config
        return {
            "operating_mode": config.operating_mode,
            "return_delay_time": round(config.return_delay_us * 1e-6 / sts3215.RETURN_DELAY_UNIT_S),
            "p_coefficient": config.position_p_gain[k],
            "d_coefficient": config.position_d_gain[k],
            "i_coefficient": config.position_i_gain[k],
            "protection_current": int(sts3215.amp_to_current_units(config.current_limit[k])),
        }

    def _write_eeprom_settings(self, k: int, sid: int) -> None:
        """Write differing EEPROM values with torque off and the EEPROM unlocked, verify them, lock again."""
        targets = self._eeprom_targets(k)
        differing = {name: value for name, value in targets.items() if self._read_register(sid, name) != value}
        if not differing:
            return
        self._write_register(sid, "torque_enable", sts3215.TORQUE_OFF)
        self._write_register(sid, "lock", _UNLOCKED)
        try:
            for name, value in differing.items():
                self._write_register(sid, name, value)
            for name, value in differing.items():
                back = self._read_register(sid, name)
                if back != value:
                    raise StartupError(f"servo ID {sid}: EEPROM '{name}' reads back {back} after writing {value}")
        finally:
            with contextlib.suppress(BusError):
                self._write_register(sid, "lock", _LOCKED)
        if self._read_register(sid, "lock") != _LOCKED:
            raise StartupError(f"servo ID {sid}: the EEPROM stays unlocked (Lock reads 0 after writing 1)")

    def read_description(self) -> str:
        return f"reading the {sts3215.STATE_BLOCK_LENGTH}-byte state block by Sync Read"

    def diagnostic_values(self) -> dict[str, object]:
        return {"read": "state block, sync read"}

    # ---- registers and torque ---------------------------------------------------------------------
    def read_goals(self) -> np.ndarray:
        return np.asarray(sts3215.steps_to_rad([self._read_register(sid, "goal_position") for sid in self.ids]))

    def set_torque(self, enable: bool) -> None:
        for sid in self.ids:
            self._write_register(sid, "torque_enable", sts3215.TORQUE_ON if enable else sts3215.TORQUE_OFF)

    def torque_off(self, servo_id: int) -> None:
        self._write_register(servo_id, "torque_enable", sts3215.TORQUE_OFF)

    def _hold(self, sid: int) -> int:
        present = self._read_register(sid, "present_position")
        self._write_register(sid, "goal_position", present)
        return present

    def hold_present_pose(self) -> np.ndarray:
        return np.asarray(sts3215.steps_to_rad([self._hold(sid) for sid in self.ids]), dtype=float)

    def write_goals(self, servo_angles: np.ndarray) -> np.ndarray:
        steps = sts3215.rad_to_steps(servo_angles)
        self.bus.sync_write(_GOAL.address, _GOAL.size,
                            {sid: sts3215.encode_value(_GOAL, int(s)) for sid, s in zip(self.ids, steps, strict=True)})
        return np.asarray(sts3215.steps_to_rad(steps), dtype=float)

    # ---- the cycle ----------------------------------------------------------------------------------
    def read_state(self, deadline: float, silent_for: float) -> StateRead:
        result = self.bus.sync_read(self.ids, sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_LENGTH,
                                    deadline=deadline)
        answered = self._answered(result.replies)
        states = sts3215.decode_states([result.replies[self.ids[k]].data for k in answered])
        return StateRead(answered, states, result.completed)

    # ---- reopen and recovery --------------------------------------------------------------------------
    def after_reopen(self) -> None:
        """Nothing volatile to restore: every setting the driver writes is saved in EEPROM."""

    def recover(self, index: int, servo_id: int) -> int:
        """No reboot in Protocol 0: goal := present, Torque Enable 1 then 0 clears latched Status bits."""
        self._hold(servo_id)
        self._write_register(servo_id, "torque_enable", sts3215.TORQUE_ON)
        self._write_register(servo_id, "torque_enable", sts3215.TORQUE_OFF)
        self._write_eeprom_settings(index, servo_id)
        return self._read_register(servo_id, "status") & sts3215.STATUS_MASK

    def describe_error(self, bits: int) -> list[str]:
        return sts3215.decode_status(bits)
