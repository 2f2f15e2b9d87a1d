"""Arm driver core: start-up, the per-cycle bus exchange, decoding to SI, safety logic (ROS-free).

One :class:`ArmDriverCore` drives one arm (leader or follower) on one bus. The node calls
:meth:`ArmDriverCore.start` once and :meth:`ArmDriverCore.cycle` from its deadline loop; service
requests that need the bus go through :meth:`ArmDriverCore.run_on_bus` so that only the loop
thread ever touches the port.

Joint-side quantities follow docs/INTERFACES.md: joint angle = direction * servo angle + homing
offset (``RobotSpec.servo_to_joint``); velocity, current and PWM take the direction's sign. The
servo's own Homing Offset and Drive Mode registers are set to 0 (the mapping lives in software,
in one place).

Every cycle reads one block per servo (``na_driver.state_layout``: an indirect block of exactly
what is published plus Realtime Tick and Bus Watchdog, or the direct block 120..146), as a Fast
Sync Read when every servo's firmware has it and the servos answer it at start-up, else as a
Sync Read. A reply is accepted only if its Realtime Tick shows it was sampled after the request
(``na_driver.reply_clock``): a late reply is counted and never published.

Bus Watchdog (follower, ``bus_watchdog_ms``): armed after torque-on, so that the servos stop and
hold on their own when this host stops talking to them (process killed, USB unplugged). An
expired watchdog (seen in the block, or inferred from a bus silence longer than the watchdog time)
is cleared and re-armed, with a warning.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from na_common.diagnostics import ERROR, OK, WARN, Level
from na_description import xm430
from na_driver import state_layout
from na_driver.arm_config import ArmConfig
from na_driver.arm_health import HealthEvent, HealthMonitor
from na_driver.devices import wait_for_device
from na_driver.dxl_bus import BusError, DxlBus, PortLostError, PortOpenError, ServoReply
from na_driver.reply_clock import ServoClock
from na_driver.state_layout import StateLayout

REG = xm430.REGISTERS
READ_MODES = ("auto", "sync", "fast")
LAYOUT_CHOICES = ("auto", "indirect", "direct")
_FAST_PROBES = 5                   # Fast Sync Reads tried at start-up before falling back to Sync Read
_TORQUE = REG["torque_enable"]
_GOAL = REG["goal_position"]
_PRESENT = REG["present_position"]
_HW_ERROR = REG["hardware_error_status"]
_HW_ERROR_REFRESH_S = 1.0          # re-read Hardware Error Status of an alerting servo at most this often
_STATUS_BYTES = 11                 # a status packet without parameters (Protocol 2.0)
_REBOOT_WAIT_S = 1.0               # how long a rebooted servo may take to answer pings again

Logger = Callable[[int, str], None]    # (level, message)


class StartupError(RuntimeError):
    """The arm could not be brought up; the message says which port/servo/setting and why."""


@dataclass
class ArmSample:
    """One cycle's decoded state of the arm (mirrors na_msgs/ArmState)."""

    stamp: float                   # time.monotonic() when the bus read completed
    role: str
    names: tuple[str, ...]
    position: np.ndarray           # rad, joint side (gripper: servo angle)
    gripper_slide: float           # m
    goal_gripper_slide: float      # m
    velocity: np.ndarray           # rad/s
    goal_position: np.ndarray      # rad, joint side
    current: np.ndarray            # A
    pwm: np.ndarray                # fraction
    input_voltage: np.ndarray      # V
    temperature: np.ndarray        # degC
    hardware_error: list[int]
    stale: list[bool]
    timeout_errors: int
    crc_errors: int
    partial_errors: int
    dropped_cycles: int
    bus_cycle_duration: float      # s


def _log_default(level: int, message: str) -> None:
    print(("INFO", "WARN", "ERROR", "STALE")[level] + ": " + message)


class ArmDriverCore:
    """Start-up sequence, per-cycle bus exchange and safety logic of one arm."""

    def __init__(self, config: ArmConfig, log: Logger | None = None, bus: DxlBus | None = None,
                 read_mode: str = "auto", layout: str = "auto") -> None:
        """``read_mode`` and ``layout`` force a bus path (benchmarks); "auto" picks the best the servos answer."""
        if read_mode not in READ_MODES or layout not in LAYOUT_CHOICES:
            raise ValueError(f"read_mode must be one of {READ_MODES} and layout one of {LAYOUT_CHOICES}")
        self.config = config
        self.spec = config.robot_spec
        self.log = log or _log_default
        self.bus = bus or DxlBus(config.port, config.baud_rate, reply_timeout=config.reply_timeout or None,
                                 retries=config.bus_retries)
        n = config.n_servos
        self.ids = list(config.servo_ids)
        self._direction = np.array([j.drive_direction for j in self.spec.joints], dtype=float)
        self._lower, self._upper = self.spec.servo_angle_limits()
        self._gripper = config.gripper_index
        nan = np.full(n, np.nan)
        self._position_servo = nan.copy()         # rad, servo side (last valid reading)
        self._velocity = nan.copy()
        self._current = nan.copy()
        self._pwm = nan.copy()
        self._voltage = nan.copy()
        self._temperature = nan.copy()
        self._hw_error = [0] * n
        self._hw_error_read_at = [-math.inf] * n
        self._goal_joint = nan.copy()             # rad, joint side, what the servos were last commanded
        self._command: np.ndarray | None = None   # latest joint-side command (unclamped)
        self._command_lock = threading.Lock()
        self._requests: list[tuple[Callable[[], object], Future]] = []
        self._requests_lock = threading.Lock()
        self._bus_thread: int | None = None
        self.torque_enabled = False
        self.port_lost = False
        self._next_reopen = 0.0
        self.health = HealthMonitor(config.servo_ids, config.joint_names, config.temperature_warning,
                                    config.temperature_trip, config.error_timeout, time.monotonic())
        self.dropped_cycles = 0                   # set by the owner of the loop
        self.last_bus_duration = 0.0
        self.clamped_commands = 0
        self.alerts: list[HealthEvent] = []        # events of the last cycle (for tests and the node log)
        self.reopen_attempts = 0
        self._read_mode, self._layout_choice = read_mode, layout
        self.layout: StateLayout = state_layout.DIRECT if layout == "direct" else state_layout.INDIRECT
        self.fast_read = False                     # Fast Sync Read in use (decided at start-up)
        self.firmware: dict[int, int] = {}
        self._clocks = {sid: ServoClock() for sid in self.ids}
        self.watchdog_units = round(config.bus_watchdog_ms * 1e-3 / xm430.BUS_WATCHDOG_UNIT_S)
        self.watchdog_armed = False
        self.watchdog_expiries = 0                 # expired Bus Watchdogs seen (and cleared) while running

    # ---- start-up -------------------------------------------------------------------------
    def start(self) -> None:
        """Open the port (waiting up to ``port_wait`` s for it to appear), check every servo, write and verify
        settings, set torque for the role."""
        wait_for_device(self.config.port, self.config.port_wait, lambda text: self.log(OK, text))
        try:
            self.bus.open()
        except PortOpenError as exc:
            raise StartupError(str(exc)) from exc
        try:
            self._bring_up()
        except BusError as exc:
            self.bus.close()
            raise StartupError(f"{self.config.role} arm on '{self.config.port}': {exc}") from exc
        except StartupError:
            self.bus.close()
            raise

    def _bring_up(self) -> None:
        where = f"{self.config.role} arm on '{self.config.port}'"
        models = {sid: self.bus.ping(sid) for sid in self.ids}
        missing = [sid for sid, model in models.items() if model is None]
        if missing:
            raise StartupError(f"{where}: servo ID(s) {', '.join(map(str, missing))} did not answer a ping "
                               f"at {self.config.baud_rate} bps")
        wrong = [f"ID {sid} reports model number {model}" for sid, model in models.items()
                 if model != xm430.MODEL_NUMBER]
        if wrong:
            raise StartupError(f"{where}: {'; '.join(wrong)}, expected {xm430.MODEL_NUMBER} ({self.spec.servo_model})")
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
            hw_error = self.bus.read(sid, _HW_ERROR.address, 1).data[0]
            if hw_error:
                self._hw_error[k] = hw_error
                for event in self.health.update_reply(k, time.monotonic(), 0.0, hw_error):
                    self.log(event.level, event.message + "; reboot it (~/reboot) before enabling torque")
        for k, sid in enumerate(self.ids):
            goal = xm430.decode_value(_GOAL, self.bus.read(sid, _GOAL.address, _GOAL.size).data)
            self._goal_joint[k] = self._servo_to_joint_index(k, float(xm430.pulses_to_rad(goal)))
        self._choose_read_mode(where)
        if self.config.is_follower:
            if self.health.tripped:
                self.log(ERROR, "follower stays torque-off: " + "; ".join(s.label for s in self.health.tripped))
            else:
                self._enable_torque_at_present_pose()
        else:
            self._set_torque_all(False)   # leader: kinesthetic, moved by hand
        watchdog = (f", bus watchdog {self.watchdog_units * xm430.BUS_WATCHDOG_UNIT_S * 1e3:.0f} ms"
                    if self.watchdog_armed else "")
        self.log(OK, f"{self.config.role} arm up on '{self.config.port}': servos {self.ids}, "
                     f"mode {xm430.OPERATING_MODES[self.config.operating_mode]}, torque "
                     f"{'on' if self.torque_enabled else 'off'}{watchdog}; reading the {self.layout.name} "
                     f"{self.layout.length}-byte block by {'Fast ' if self.fast_read else ''}Sync Read")

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
        """Follower with torque on: the servos stop on their own after ``bus_watchdog_ms`` without a packet."""
        if not (self.config.is_follower and self.watchdog_units):
            return
        for sid in self.ids:
            if self._has_watchdog(sid):
                self._write_register(sid, "bus_watchdog", self.watchdog_units)
        self.watchdog_armed = True

    def _recover_watchdogs(self, indices: list[int], silent_for: float) -> None:
        """Expired watchdogs: the servos stopped and hold; clear, re-arm, and let the next command through."""
        self.watchdog_expiries += 1
        servos = [self.ids[k] for k in indices]
        cause = f" after {silent_for * 1e3:.0f} ms without a packet" if silent_for > 0 else ""
        self.log(WARN, f"{self.config.role} arm: Bus Watchdog of servo(s) {servos} expired{cause}: they stopped "
                       f"and held; clearing and re-arming")
        for sid in servos:
            self.bus.write(sid, REG["bus_watchdog"].address, b"\x00", retries=1)
            self.bus.write(sid, REG["bus_watchdog"].address, bytes([self.watchdog_units]), retries=1)

    def _read_register(self, sid: int, name: str) -> int:
        reg = REG[name]
        return xm430.decode_value(reg, self.bus.read(sid, reg.address, reg.size).data)

    def _write_register(self, sid: int, name: str, value: int) -> None:
        reg = REG[name]
        self.bus.write(sid, reg.address, xm430.encode_value(reg, value))

    def _set_torque_all(self, enable: bool) -> None:
        for sid in self.ids:
            self._write_register(sid, "torque_enable", int(enable))
        self.torque_enabled = enable
        if not enable:
            self.watchdog_armed = False    # the watchdog only runs with torque on

    def _enable_torque_at_present_pose(self) -> None:
        """Goal := present position, then torque on and the Bus Watchdog armed: the arm does not jump."""
        for k, sid in enumerate(self.ids):
            self._clear_watchdog(sid)     # an expired watchdog would refuse the goal
            present = xm430.decode_value(_PRESENT, self.bus.read(sid, _PRESENT.address, _PRESENT.size).data)
            self._write_register(sid, "goal_position", present)
            self._goal_joint[k] = self._servo_to_joint_index(k, float(xm430.pulses_to_rad(present)))
        with self._command_lock:
            self._command = None          # an old command must not move the arm after re-enabling
        self._set_torque_all(True)
        self._arm_watchdogs()

    # ---- conversions ------------------------------------------------------------------------
    def _servo_to_joint_index(self, k: int, servo_angle: float) -> float:
        joint = self.spec.joints[k]
        return joint.drive_direction * servo_angle + joint.homing_offset

    def _slide(self, angle: float) -> float:
        return float(self.spec.gripper.angle_to_slide(angle)) if self._gripper is not None else math.nan

    # ---- commands --------------------------------------------------------------------------
    def set_command(self, positions: Sequence[float], names: Sequence[str] | None = None) -> None:
        """Latest joint-side goal (rad; gripper: servo angle), named by ``names`` in any order (None: spec order).
        Raises ValueError (:class:`JointNameError` for names) on bad input."""
        values = np.asarray(positions, dtype=float)
        if names is not None:
            values = self.spec.reorder(names, values, "command position")
        if values.shape != (self.config.n_servos,):
            raise ValueError(f"command needs {self.config.n_servos} positions, got {values.shape[0]}")
        if not np.all(np.isfinite(values)):
            raise ValueError("command contains non-finite positions")
        if np.any(self.clamp(values) != values):
            self.clamped_commands += 1
        with self._command_lock:
            self._command = values

    def clamp(self, joint_positions: np.ndarray) -> np.ndarray:
        """Clamp joint-side goals to the joint limits (gripper limits mapped to servo angle)."""
        return np.clip(joint_positions, self._lower, self._upper)

    def _write_command(self) -> None:
        with self._command_lock:
            command = self._command
        if command is None or not self.torque_enabled or self.health.tripped:
            return
        goal = self.clamp(command)
        pulses = xm430.rad_to_pulses(self.spec.joint_to_servo(goal))
        self.bus.sync_write(_GOAL.address, _GOAL.size,
                            {sid: xm430.encode_value(_GOAL, int(p)) for sid, p in zip(self.ids, pulses, strict=True)})
        self._goal_joint = self.spec.servo_to_joint(xm430.pulses_to_rad(pulses))

    # ---- the cycle ---------------------------------------------------------------------------
    def cycle(self, deadline: float | None = None) -> ArmSample:
        """One bus cycle: pending requests, command write, state read, decode, health. Never raises on bus faults."""
        self._bus_thread = threading.get_ident()
        started = time.monotonic()
        if deadline is None:
            deadline = started + 0.9 * self.config.period
        self.alerts = []
        replies: dict[int, ServoReply] = {}
        completed = started
        if self.port_lost and not self._try_reopen(started):
            completed = time.monotonic()
        else:
            try:
                silent_for = started - self.bus.last_tx_at
                self._serve_requests()
                if self.config.is_follower:
                    self._write_command()
                result = self.bus.sync_read(self.ids, self.layout.address, self.layout.length, deadline=deadline,
                                            fast=self.fast_read, check=self._check_reply)
                replies, completed = result.replies, result.completed
                self._check_watchdogs(replies, silent_for)
                self._refresh_hardware_errors(replies, completed)
            except PortLostError as exc:
                self._on_port_lost(exc)
                completed = time.monotonic()
            except BusError as exc:
                self.log(WARN, f"{self.config.role} arm: {exc}")
                completed = time.monotonic()
        self.last_bus_duration = completed - started
        stale = self._decode(replies, completed)
        self.alerts.extend(self.health.check_timeouts(completed))
        self._handle_events()
        return self._sample(completed, stale)

    def _check_reply(self, servo_id: int, data: bytes, sent_at: float, received_at: float) -> str | None:
        """The bus's reply check: None if the block was sampled after the request (Realtime Tick), else why not."""
        tick = self.layout.value(data, "realtime_tick")
        return self._clocks[servo_id].judge(tick, sent_at, received_at)

    def _check_watchdogs(self, replies: dict[int, ServoReply], silent_for: float) -> None:
        """Recover servos whose Bus Watchdog expired (read in the block, or inferred from a long silence)."""
        if not self.watchdog_armed or self.port_lost:
            return
        if self.layout.has("bus_watchdog"):
            expired = [k for k, sid in enumerate(self.ids) if sid in replies
                       and self.layout.value(replies[sid].data, "bus_watchdog") == xm430.BUS_WATCHDOG_EXPIRED]
        elif silent_for > self.watchdog_units * xm430.BUS_WATCHDOG_UNIT_S:
            expired = [k for k, sid in enumerate(self.ids) if self._has_watchdog(sid)]
        else:
            expired = []
        if expired:
            self._recover_watchdogs(expired, silent_for)

    def _decode(self, replies: dict[int, ServoReply], now: float) -> list[bool]:
        stale = []
        layout = self.layout
        for k, sid in enumerate(self.ids):
            reply = replies.get(sid)
            if reply is None:
                stale.append(True)
                continue
            raw = reply.data
            self._position_servo[k] = float(xm430.pulses_to_rad(layout.value(raw, "present_position")))
            self._velocity[k] = float(xm430.velocity_units_to_rad_s(layout.value(raw, "present_velocity")))
            self._current[k] = float(xm430.current_units_to_amp(layout.value(raw, "present_current")))
            self._pwm[k] = float(xm430.pwm_units_to_fraction(layout.value(raw, "present_pwm")))
            self._voltage[k] = float(xm430.voltage_units_to_volt(layout.value(raw, "present_input_voltage")))
            temperature = layout.value(raw, "present_temperature") * xm430.TEMPERATURE_UNIT_C
            self._temperature[k] = temperature
            if not reply.alert:
                self._hw_error[k] = 0
            self.alerts.extend(self.health.update_reply(k, now, temperature, self._hw_error[k]))
            stale.append(False)
        return stale

    def _refresh_hardware_errors(self, replies: dict[int, ServoReply], now: float) -> None:
        """The Alert bit says 'look at Hardware Error Status' (docs/REFERENCES.md, Protocol 2.0); read it,
        at most once a second."""
        for k, sid in enumerate(self.ids):
            reply = replies.get(sid)
            if reply is None or not reply.alert or now - self._hw_error_read_at[k] < _HW_ERROR_REFRESH_S:
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

    def _handle_events(self) -> None:
        for event in self.alerts:
            self.log(event.level, f"{self.config.role} arm: {event.message}")
        if any(e.trip for e in self.alerts) and self.config.is_follower and not self.port_lost:
            self._trip_torque_off()

    def _trip_torque_off(self) -> None:
        """Follower trip: torque off on every servo (with retries) and hold until ~/reboot or ~/torque."""
        reasons = "; ".join(f"{s.label}: {s.trip_reason}" for s in self.health.tripped)
        failed = []
        for sid in self.ids:
            try:
                self._write_register(sid, "torque_enable", 0)
            except BusError:
                failed.append(sid)
        self.torque_enabled = False
        with self._command_lock:
            self._command = None
        extra = f" (torque-off not confirmed by servo(s) {failed})" if failed else ""
        self.log(ERROR, f"follower tripped, torque off and holding{extra}: {reasons}")

    def _sample(self, stamp: float, stale: list[bool]) -> ArmSample:
        position = self.spec.servo_to_joint(self._position_servo)
        c = self.bus.counters
        g = self._gripper
        return ArmSample(
            stamp=stamp, role=self.config.role, names=self.config.joint_names, position=position,
            gripper_slide=self._slide(position[g]) if g is not None else math.nan,
            goal_gripper_slide=self._slide(self._goal_joint[g]) if g is not None else math.nan,
            velocity=self._direction * self._velocity, goal_position=self._goal_joint.copy(),
            current=self._direction * self._current, pwm=self._direction * self._pwm,
            input_voltage=self._voltage.copy(), temperature=self._temperature.copy(),
            hardware_error=list(self._hw_error), stale=stale, timeout_errors=c.timeouts, crc_errors=c.crc_errors,
            partial_errors=c.partial_replies, dropped_cycles=self.dropped_cycles,
            bus_cycle_duration=self.last_bus_duration)

    # ---- port loss ---------------------------------------------------------------------------
    def _on_port_lost(self, exc: BaseException) -> None:
        if not self.port_lost:
            self.log(ERROR, f"{self.config.role} arm: lost the port: {exc}; trying to reopen every "
                            f"{self.config.reopen_interval:.1f} s")
        self.port_lost = True
        self.bus.close()
        self._next_reopen = time.monotonic() + self.config.reopen_interval

    def _try_reopen(self, now: float) -> bool:
        if now < self._next_reopen:
            return False
        self._next_reopen = now + self.config.reopen_interval
        self.reopen_attempts += 1
        try:
            self.bus.open()
            was_enabled = self.torque_enabled
            self._bring_up_after_reopen(was_enabled)
        except BusError as exc:
            self.bus.close()
            self.log(WARN, f"{self.config.role} arm: reopen attempt {self.reopen_attempts} failed: {exc}")
            return False
        self.port_lost = False
        self.log(OK, f"{self.config.role} arm: port '{self.config.port}' reopened")
        return True

    def _bring_up_after_reopen(self, torque_was_enabled: bool) -> None:
        missing = [sid for sid in self.ids if self.bus.ping(sid) is None]
        if missing:
            raise BusError(f"servo ID(s) {', '.join(map(str, missing))} do not answer after reopening")
        for clock in self._clocks.values():
            clock.reset()                 # the servos may have been power-cycled: their clocks restarted
        for k, sid in enumerate(self.ids):
            self._write_ram_settings(k, sid)
        if self.config.is_follower and torque_was_enabled and not self.health.tripped:
            self._enable_torque_at_present_pose()

    # ---- requests from other threads (services) -----------------------------------------------
    def run_on_bus(self, func: Callable[[], object], timeout: float = 5.0) -> object:
        """Run ``func`` on the bus thread (between cycles) and return its result or raise its error."""
        if self._bus_thread is None or self._bus_thread == threading.get_ident():
            return func()
        future: Future = Future()
        with self._requests_lock:
            self._requests.append((func, future))
        return future.result(timeout)

    def _serve_requests(self) -> None:
        with self._requests_lock:
            requests, self._requests = self._requests, []
        for func, future in requests:
            try:
                future.set_result(func())
            except PortLostError as exc:
                future.set_exception(exc)
                raise
            except Exception as exc:
                future.set_exception(exc)

    def set_torque(self, enable: bool) -> str:
        """Torque on (goal := present first) or off for every servo; refuses to enable while tripped."""
        if self.port_lost:
            raise BusError(f"port '{self.config.port}' is lost")
        if enable:
            if self.health.tripped:
                raise BusError("tripped, reboot first: " + "; ".join(f"{s.label}: {s.trip_reason}"
                                                                     for s in self.health.tripped))
            self._enable_torque_at_present_pose()
            return "torque on at the present pose"
        self._set_torque_all(False)
        return "torque off"

    def reboot_tripped(self) -> str:
        """Reboot every tripped servo, restore its settings and (follower) torque at the present pose."""
        if self.port_lost:
            raise BusError(f"port '{self.config.port}' is lost")
        tripped = [(k, s) for k, s in enumerate(self.health.servos) if s.trip_reason is not None or s.hardware_error]
        if not tripped:
            return "nothing to reboot: no servo is tripped"
        for k, servo in tripped:
            temperature = self._temperature[k]
            if temperature >= self.config.temperature_trip:
                raise BusError(f"{servo.label} is still at {temperature:.0f} degC (trip "
                               f"{self.config.temperature_trip:.0f} degC); let it cool first")
        for k, servo in tripped:
            sid = servo.servo_id
            self.bus.reboot(sid)
            give_up = time.monotonic() + _REBOOT_WAIT_S
            while self.bus.ping(sid) is None:
                if time.monotonic() > give_up:
                    raise BusError(f"{servo.label} did not answer after the reboot")
            self._clocks[sid].reset()     # a reboot restarts the servo's Realtime Tick
            self._write_eeprom_settings(k, sid)
            self._write_ram_settings(k, sid)
            self._hw_error[k] = self.bus.read(sid, _HW_ERROR.address, 1).data[0]
            if self._hw_error[k]:
                raise BusError(f"{servo.label} still reports a hardware error after the reboot: "
                               + ", ".join(xm430.decode_hardware_error(self._hw_error[k])))
            self.health.clear_trip(k)
        labels = ", ".join(s.label for _, s in tripped)
        if self.config.is_follower:
            self._enable_torque_at_present_pose()
            return f"rebooted {labels}; torque on at the present pose"
        self._set_torque_all(False)
        return f"rebooted {labels}"

    # ---- shutdown ------------------------------------------------------------------------------
    def shutdown(self, attempts: int = 3) -> None:
        """Follower: torque off (retried); then close the port. Safe to call twice."""
        if self.config.is_follower and self.bus.is_open:
            for sid in self.ids:
                for _ in range(attempts):
                    try:
                        self._write_register(sid, "torque_enable", 0)
                        break
                    except BusError:
                        continue
                else:
                    self.log(ERROR, f"follower servo {sid}: torque off not confirmed at shutdown")
            self.torque_enabled = False
        self.bus.close()

    # ---- diagnostics ----------------------------------------------------------------------------
    def bus_status(self, loop_running: bool) -> tuple[Level, str]:
        """Diagnostic level and message of the bus (the loop thread belongs to the node)."""
        if self.port_lost:
            return ERROR, f"port '{self.config.port}' lost, reopening"
        if not loop_running:
            return ERROR, "bus loop stopped"
        return OK, "running"

    def servo_status(self) -> list[tuple[int, str, Level, str]]:
        """(servo ID, joint, level, message) per servo."""
        out = []
        for k, servo in enumerate(self.health.servos):
            level, message = self.health.status(k)
            out.append((servo.servo_id, servo.joint, level, message))
        return out
