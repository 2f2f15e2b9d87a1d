"""DYNAMIXEL XM430 backend of the arm driver: settings, the per-cycle read, Bus Watchdog (ROS-free).

The servo's own Homing Offset and Drive Mode registers are set to 0 (the mapping lives in software,
in the robot spec).

Every cycle reads one block per servo (``na_driver.state_layout``: an indirect block of exactly
what is published plus Realtime Tick and Bus Watchdog, or the direct block 120..146), as a Fast
Sync Read when every servo's firmware has it and the servos answer it at start-up, else as a
Sync Read. A reply is accepted only if its Realtime Tick shows it was sampled after the request
(``na_driver.reply_clock``): a late reply is counted and never published.

Bus Watchdog (follower, ``bus_watchdog_ms``): armed after torque-on, so that the servos stop and
hold on their own when this host stops talking to them (process killed, USB unplugged). It is armed
by the first state read after torque-on, not by the torque write: at start-up the driver still sets up
its ROS side and its bus loop between the two, and a watchdog armed then expired before the loop's first
packet on a busy host. An
expired watchdog (seen in the block, or inferred from a bus silence longer than the watchdog time)
is cleared and re-armed, with a warning. Arming clears each servo first (an expired watchdog refuses any value
but 0), and a servo that does not answer stays to be armed at the next read: it never holds up the state read,
whose packets keep the other servos' watchdogs from expiring.
"""

from __future__ import annotations

import math
import time

import numpy as np

from na_common.diagnostics import WARN
from na_description import xm430
from na_driver import state_layout
from na_driver.arm_backend import Logger, ServoBackend, StartupError, StateRead
from na_driver.arm_config import ArmConfig
from na_driver.dxl_bus import ALERT_BIT, BusError, DxlBus, PortLostError, ServoReply
from na_driver.reply_clock import ServoClock
from na_driver.state_layout import StateLayout

REG = xm430.REGISTERS
READ_MODES = ("auto", "sync", "fast")
LAYOUT_CHOICES = ("auto", "indirect", "direct")
_FAST_PROBES = 5                   # Fast Sync Reads tried at start-up before falling back to Sync Read
_GOAL = REG["goal_position"]
_PRESENT = REG["present_position"]
_HW_ERROR = REG["hardware_error_status"]
_HW_ERROR_REFRESH_S = 1.0          # re-read Hardware Error Status of an alerting servo at most this often
_STATUS_BYTES = 11                 # a status packet without parameters (Protocol 2.0)
_REBOOT_WAIT_S = 1.0               # how long a rebooted servo may take to answer pings again


class DxlBackend(ServoBackend):
    """XM430 servos on a :class:`DxlBus`."""

    table = xm430

    def __init__(self, config: ArmConfig, log: Logger, bus: DxlBus | None = None, read_mode: str = "auto",
                 layout: str = "auto") -> None:
        """``read_mode`` and ``layout`` force a bus path (benchmarks); "auto" picks the best the servos answer."""
        if read_mode not in READ_MODES or layout not in LAYOUT_CHOICES:
            raise ValueError(f"read_mode must be one of {READ_MODES} and layout one of {LAYOUT_CHOICES}")
        super().__init__(config, log, bus or DxlBus(config.port, config.baud_rate,
                                                    reply_timeout=config.reply_timeout or None,
                                                    retries=config.bus_retries))
        n = config.n_servos
        self._hw_error = [0] * n
        self._hw_error_read_at = [-math.inf] * n
        self._read_mode, self._layout_choice = read_mode, layout
        self.layout: StateLayout = state_layout.DIRECT if layout == "direct" else state_layout.INDIRECT
        self.fast_read = False                     # Fast Sync Read in use (decided at start-up)
        self.firmware: dict[int, int] = {}
        self._clocks = {sid: ServoClock() for sid in self.ids}
        self.watchdog_units = round(config.bus_watchdog_ms * 1e-3 / xm430.BUS_WATCHDOG_UNIT_S)
        self.watchdog_armed = False
        self._to_arm: set[int] = set()             # torque is on: servos to arm at the next state read
        self._arm_failed: set[int] = set()         # servos whose last arming failed (warned once)
        self.watchdog_expiries = 0                 # expired Bus Watchdogs seen (and cleared) while running

    # ---- start-up ---------------------------------------------------------------------------
    def setup(self, where: str) -> list[int]:
        self.firmware = {sid: self._read_register(sid, "firmware_version") for sid in self.ids}
        old = [sid for sid, version in self.firmware.items() if version < xm430.FIRMWARE_BUS_WATCHDOG]
        if old and self.config.is_follower and self.watchdog_units:
            self.log(WARN, f"{where}: servo(s) {old} have firmware older than v{xm430.FIRMWARE_BUS_WATCHDOG}, without "
                           f"Bus Watchdog: they keep their last goal if this host dies")
        for clock in self._clocks.values():
            clock.reset()
        for k, sid in enumerate(self.ids):
            self._write_eeprom_settings(k, sid)
            self._write_ram_settings(k, sid)
            self._hw_error[k] = self.bus.read(sid, _HW_ERROR.address, 1).data[0]
        self._choose_read_mode(where)
        return list(self._hw_error)

    def read_description(self) -> str:
        watchdog = (f", bus watchdog {self.watchdog_units * xm430.BUS_WATCHDOG_UNIT_S * 1e3:.0f} ms"
                    if self.watchdog_armed or self._to_arm else "")
        return (f"reading the {self.layout.name} {self.layout.length}-byte block by "
                f"{'Fast ' if self.fast_read else ''}Sync Read{watchdog}")

    def diagnostic_values(self) -> dict[str, object]:
        return {"watchdog_expiries": self.watchdog_expiries,
                "read": f"{self.layout.name} block, {'fast ' if self.fast_read else ''}sync read"}

    def _choose_read_mode(self, where: str) -> None:
        """Fast Sync Read when every servo's firmware has it and they answer it now; else Sync Read."""
        self.fast_read = False
        if self._read_mode == "sync":
            return
        old = [sid for sid, version in self.firmware.items() if version < xm430.FIRMWARE_FAST_SYNC_READ]
        if old:
            if self._read_mode == "fast":
                raise StartupError(f"{where}: servo(s) {old} have no Fast Sync Read "
                                   f"(firmware older than v{xm430.FIRMWARE_FAST_SYNC_READ})")
            return
        for _ in range(_FAST_PROBES):
            # One intact part of a Fast Sync Read reply shows the servos answer it (on a noisy bus a corrupted
            # byte loses the parts after it; the per-cycle retries are plain Sync Reads).
            result = self.bus.sync_read(self.ids, self.layout.address, self.layout.length, fast=True,
                                        check=self._check_reply, retries=0)
            if result.fast_replies:
                self.fast_read = True
                return
        if self._read_mode == "fast":
            raise StartupError(f"{where}: the servos did not answer {_FAST_PROBES} Fast Sync Reads")
        self.log(WARN, f"{where}: the servos did not answer Fast Sync Read; using Sync Read")

    def _eeprom_targets(self, k: int) -> dict[str, int]:
        return {
            "operating_mode": self.config.operating_mode,
            "return_delay_time": round(self.config.return_delay_us * 1e-6 / xm430.RETURN_DELAY_UNIT_S),
            "drive_mode": 0,                 # direction is applied in software (robot spec)
            "homing_offset": 0,              # homing is applied in software (robot spec)
            "current_limit": int(xm430.amp_to_current_units(self.config.current_limit[k])),
        }

    def _write_eeprom_settings(self, k: int, sid: int) -> None:
        """Write differing EEPROM values with torque off (the servo refuses otherwise) and verify them."""
        targets = self._eeprom_targets(k)
        current = {name: self._read_register(sid, name) for name in targets}
        differing = {name: value for name, value in targets.items() if current[name] != value}
        if not differing:
            return
        self._write_register(sid, "torque_enable", 0)
        for name, value in differing.items():
            self._write_register(sid, name, value)
        for name, value in differing.items():
            back = self._read_register(sid, name)
            if back != value:
                raise StartupError(f"servo ID {sid}: EEPROM '{name}' reads back {back} after writing {value}")

    def _write_ram_settings(self, k: int, sid: int) -> None:
        """Gains, a cleared Bus Watchdog (an expired one makes the goals read-only) and the indirect map."""
        gains = {"position_p_gain": self.config.position_p_gain[k], "position_i_gain": self.config.position_i_gain[k],
                 "position_d_gain": self.config.position_d_gain[k]}
        for name, value in gains.items():
            self._write_register(sid, name, value)
            back = self._read_register(sid, name)
            if back != value:
                raise StartupError(f"servo ID {sid}: '{name}' reads back {back} after writing {value}")
        self._clear_watchdog(sid)
        if self.layout is state_layout.INDIRECT:
            self._write_indirect_map(sid)

    def _write_indirect_map(self, sid: int) -> None:
        """Point Indirect Address 1..N at the state block; fall back to the direct block if a servo refuses."""
        wanted = state_layout.indirect_map()
        try:
            self.bus.write(sid, state_layout.INDIRECT_MAP_ADDRESS, wanted)
            back = self.bus.read(sid, state_layout.INDIRECT_MAP_ADDRESS, len(wanted)).data
            if back != wanted:
                raise BusError(f"servo {sid}: the indirect addresses read back differently")
        except BusError as exc:
            if self._layout_choice == "indirect":
                raise
            self.layout = state_layout.DIRECT
            self.log(WARN, f"{self.config.role} arm: indirect state block refused ({exc}); reading the direct block")

    # ---- Bus Watchdog ----------------------------------------------------------------------------
    def _has_watchdog(self, sid: int) -> bool:
        return self.firmware.get(sid, 0) >= xm430.FIRMWARE_BUS_WATCHDOG

    def _clear_watchdog(self, sid: int) -> None:
        if self._has_watchdog(sid):
            self._write_register(sid, "bus_watchdog", 0)

    def _arm_watchdogs(self) -> None:
        """Follower with torque on: the servos stop on their own after ``bus_watchdog_ms`` without a packet.

        Each servo is cleared, then armed (one retry each); a servo that does not answer stays in ``_to_arm`` for
        the next read, with one warning, and the read goes on."""
        for sid in sorted(self._to_arm):
            try:
                self._write_watchdog(sid)
            except PortLostError:
                raise
            except BusError as exc:
                if sid not in self._arm_failed:
                    self._arm_failed.add(sid)
                    self.log(WARN, f"{self.config.role} arm: could not arm the Bus Watchdog of servo {sid} ({exc}); "
                                   f"trying again at each read")
                continue
            self._to_arm.discard(sid)
            if sid in self._arm_failed:
                self._arm_failed.discard(sid)
                self.log(WARN, f"{self.config.role} arm: Bus Watchdog of servo {sid} armed")
        self.watchdog_armed = not self._to_arm

    def _write_watchdog(self, sid: int) -> None:
        """Clear (0, accepted even when expired), then arm: the servo stops after the watchdog time of silence."""
        self._write_register(sid, "bus_watchdog", 0, retries=1)
        self._write_register(sid, "bus_watchdog", self.watchdog_units, retries=1)

    @property
    def _watchdog_limit_s(self) -> float:
        return self.watchdog_units * xm430.BUS_WATCHDOG_UNIT_S

    def _check_watchdogs(self, replies: dict[int, ServoReply], silent_for: float) -> None:
        """Recover servos whose Bus Watchdog expired (read in the block, or inferred from a long silence); a servo
        still to be armed is cleared by its arming."""
        if not (self.watchdog_armed or self._to_arm):
            return
        running = [k for k, sid in enumerate(self.ids) if self._has_watchdog(sid) and sid not in self._to_arm]
        if self.layout.has("bus_watchdog"):
            expired = [k for k in running if self.ids[k] in replies
                       and self.layout.value(replies[self.ids[k]].data, "bus_watchdog") == xm430.BUS_WATCHDOG_EXPIRED]
        elif silent_for > self._watchdog_limit_s:
            expired = running
        else:
            expired = []
        if expired:
            self._recover_watchdogs(expired, silent_for)

    def _recover_watchdogs(self, indices: list[int], silent_for: float) -> None:
        """Expired watchdogs: the servos stopped and hold; clear, re-arm, and let the next command through."""
        self.watchdog_expiries += 1
        servos = [self.ids[k] for k in indices]
        # silent_for is the driver's side: how long before this cycle it last sent. An expiry read from the register
        # with a shorter silent_for means packets this driver sent in time reached the servo late (held back on
        # the line, or on the simulated rig in the host's pty).
        limit_s = self._watchdog_limit_s
        if silent_for > limit_s:
            cause = f" after {silent_for * 1e3:.0f} ms without a packet"
        elif silent_for > 0:
            cause = (f" although this driver last sent {silent_for * 1e3:.0f} ms before this cycle (limit "
                     f"{limit_s * 1e3:.0f} ms): its packets reached the servos late")
        else:
            cause = ""
        self.log(WARN, f"{self.config.role} arm: Bus Watchdog of servo(s) {servos} expired{cause}: they stopped "
                       f"and held; clearing and re-arming")
        self._to_arm.update(servos)
        self._arm_watchdogs()

    # ---- registers and torque ----------------------------------------------------------------------
    def read_goals(self) -> np.ndarray:
        pulses = [xm430.decode_value(_GOAL, self.bus.read(sid, _GOAL.address, _GOAL.size).data) for sid in self.ids]
        return np.asarray(xm430.pulses_to_rad(pulses), dtype=float)

    def set_torque(self, enable: bool) -> None:
        for sid in self.ids:
            self._write_register(sid, "torque_enable", int(enable))
        arm = enable and self.config.is_follower and bool(self.watchdog_units)
        self._to_arm = {sid for sid in self.ids if self._has_watchdog(sid)} if arm else set()
        self._arm_failed.clear()
        if not enable:
            self.watchdog_armed = False    # the watchdog only runs with torque on

    def torque_off(self, servo_id: int) -> None:
        self._write_register(servo_id, "torque_enable", 0)

    def hold_present_pose(self) -> np.ndarray:
        goals = []
        for sid in self.ids:
            self._clear_watchdog(sid)     # an expired watchdog would refuse the goal
            present = xm430.decode_value(_PRESENT, self.bus.read(sid, _PRESENT.address, _PRESENT.size).data)
            self._write_register(sid, "goal_position", present)
            goals.append(present)
        return np.asarray(xm430.pulses_to_rad(goals), dtype=float)

    def write_goals(self, servo_angles: np.ndarray) -> np.ndarray:
        pulses = xm430.rad_to_pulses(servo_angles)
        self.bus.sync_write(_GOAL.address, _GOAL.size,
                            {sid: xm430.encode_value(_GOAL, int(p)) for sid, p in zip(self.ids, pulses, strict=True)})
        return np.asarray(xm430.pulses_to_rad(pulses), dtype=float)

    # ---- the cycle ---------------------------------------------------------------------------------
    def read_state(self, deadline: float, silent_for: float) -> StateRead:
        if self._to_arm:
            self._arm_watchdogs()
        result = self.bus.sync_read(self.ids, self.layout.address, self.layout.length, deadline=deadline,
                                    fast=self.fast_read, check=self._check_reply)
        self._check_watchdogs(result.replies, silent_for)
        self._refresh_hardware_errors(result.replies, result.completed)
        answered = self._answered(result.replies)
        replies = [result.replies[self.ids[k]] for k in answered]
        for k, reply in zip(answered, replies, strict=True):
            if not reply.error & ALERT_BIT:
                self._hw_error[k] = 0
        states = xm430.decode_states([reply.data for reply in replies], self.layout.offsets,
                                     errors=[self._hw_error[k] for k in answered])
        return StateRead(answered, states, result.completed)

    def _check_reply(self, servo_id: int, data: bytes, sent_at: float, received_at: float) -> str | None:
        """The bus's reply check: None if the block was sampled after the request (Realtime Tick), else why not."""
        tick = self.layout.value(data, "realtime_tick")
        return self._clocks[servo_id].judge(tick, sent_at, received_at)

    def _refresh_hardware_errors(self, replies: dict[int, ServoReply], now: float) -> None:
        """The Alert bit says 'look at Hardware Error Status' (docs/REFERENCES.md, Protocol 2.0); read it,
        at most once a second."""
        for k, sid in enumerate(self.ids):
            reply = replies.get(sid)
            if reply is None or not reply.error & ALERT_BIT or now - self._hw_error_read_at[k] < _HW_ERROR_REFRESH_S:
                continue
            try:
                reply = self.bus.read(sid, _HW_ERROR.address, 1, retries=0,
                                      timeout=self.bus.reply_timeout(_STATUS_BYTES + 1))
                self._hw_error[k] = reply.data[0]
                self._hw_error_read_at[k] = now
            except PortLostError:
                raise
            except BusError:
                pass   # try again next cycle

    # ---- reopen and reboot -------------------------------------------------------------------------
    def after_reopen(self) -> None:
        for clock in self._clocks.values():
            clock.reset()                 # the servos may have been power-cycled: their clocks restarted
        for k, sid in enumerate(self.ids):
            self._write_ram_settings(k, sid)

    def recover(self, index: int, servo_id: int) -> int:
        """Reboot (clears a hardware-error trip), wait for the servo, restore its settings."""
        self.bus.reboot(servo_id)
        give_up = time.monotonic() + _REBOOT_WAIT_S
        while self.bus.ping(servo_id) is None:
            if time.monotonic() > give_up:
                raise BusError(f"servo {servo_id} did not answer after the reboot")
        self._clocks[servo_id].reset()     # a reboot restarts the servo's Realtime Tick
        self._write_eeprom_settings(index, servo_id)
        self._write_ram_settings(index, servo_id)
        self._hw_error[index] = self.bus.read(servo_id, _HW_ERROR.address, 1).data[0]
        return self._hw_error[index]

    def describe_error(self, bits: int) -> list[str]:
        return xm430.decode_hardware_error(bits)
