"""Arm driver core: start-up, the per-cycle bus exchange, decoding to SI, safety logic (ROS-free).

One :class:`ArmDriverCore` drives one arm (leader or follower) on one bus. The node calls
:meth:`ArmDriverCore.start` once and :meth:`ArmDriverCore.cycle` from its deadline loop; service
requests that need the bus go through :meth:`ArmDriverCore.run_on_bus` so that only the loop
thread ever touches the port.

Joint-side quantities follow docs/INTERFACES.md: joint angle = direction * servo angle + homing
offset (``RobotSpec.servo_to_joint``); velocity, current, PWM and load take the direction's sign.

The servo family (the robot spec's servo model) picks the backend
(:func:`na_driver.backends.make_backend`): DYNAMIXEL XM430 (:mod:`na_driver.dxl_backend`) or
Feetech STS3215 (:mod:`na_driver.sts_backend`). Everything here is shared by both: the start-up
order, the command path and its clamp, stale flags, health (temperature, error bits, error
timeout; a follower trips to torque off and says why), port loss and reopen, service requests.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass

import numpy as np

from na_common.diagnostics import ERROR, OK, WARN, Level
from na_description.arm_state import ArmStateFields, arm_state_fields
from na_description.servo_state import ServoStates
from na_driver.arm_backend import Logger, ServoBackend, StartupError, StateRead
from na_driver.arm_config import ArmConfig
from na_driver.arm_health import HealthEvent, HealthMonitor
from na_driver.backends import make_backend
from na_driver.devices import wait_for_device
from na_driver.serial_bus import BusError, PortLostError, PortOpenError, SerialBus

__all__ = ["ArmDriverCore", "ArmSample", "StartupError"]


@dataclass
class ArmSample(ArmStateFields):
    """One cycle's decoded state of the arm: the na_msgs/ArmState fields (built by
    :func:`na_description.arm_state.arm_state_fields`, as the offline generator builds them) and ``stamp``."""

    stamp: float                   # time.monotonic() when the bus read completed


def _log_default(level: int, message: str) -> None:
    print(("INFO", "WARN", "ERROR", "STALE")[level] + ": " + message)


class ArmDriverCore:
    """Start-up sequence, per-cycle bus exchange and safety logic of one arm."""

    def __init__(self, config: ArmConfig, log: Logger | None = None, bus: SerialBus | None = None,
                 read_mode: str = "auto", layout: str = "auto") -> None:
        """``read_mode`` and ``layout`` force a DYNAMIXEL bus path (benchmarks); "auto" picks the best the servos
        answer. ``bus``: the family's bus object (tests), else one on ``config.port``."""
        self.config = config
        self.spec = config.robot_spec
        self.log = log or _log_default
        self.backend: ServoBackend = make_backend(config, self.log, bus, read_mode=read_mode, layout=layout)
        n = config.n_servos
        self.ids = list(config.servo_ids)
        self._lower, self._upper = self.spec.servo_angle_limits()
        nan = np.full(n, np.nan)
        self._position_servo = nan.copy()         # rad, servo side (last valid reading)
        self._velocity = nan.copy()
        self._current = nan.copy()
        self._pwm = nan.copy()
        self._load = nan.copy()
        self._voltage = nan.copy()
        self._temperature = nan.copy()
        self._error = [0] * n                      # the family's error bits per servo (last valid reading)
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
                                    config.temperature_trip, config.error_timeout,
                                    describe_error=self.backend.describe_error)
        self.dropped_cycles = 0                   # set by the owner of the loop
        self.last_bus_duration = 0.0
        self.clamped_commands = 0
        self.alerts: list[HealthEvent] = []        # events of the last cycle (for tests and the node log)
        self.reopen_attempts = 0

    @property
    def bus(self) -> SerialBus:
        return self.backend.bus

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
        self._check_models(where)
        for k, error in enumerate(self.backend.setup(where)):
            self._error[k] = error
            if error:
                for event in self.health.update_reply(k, 0.0, error):
                    self.log(event.level, event.message + "; reboot it (~/reboot) before enabling torque")
        self._goal_joint = self.spec.servo_to_joint(self.backend.read_goals())
        if self.config.is_follower:
            if self.health.tripped:
                self.log(ERROR, "follower stays torque-off: " + "; ".join(s.label for s in self.health.tripped))
            else:
                self._enable_torque_at_present_pose()
        else:
            self._set_torque_all(False)   # leader: kinesthetic, moved by hand
        family = self.config.family
        self.log(OK, f"{self.config.role} arm up on '{self.config.port}': {self.spec.servo_model} servos {self.ids}, "
                     f"mode {family.operating_modes[self.config.operating_mode]}, torque "
                     f"{'on' if self.torque_enabled else 'off'}; {self.backend.read_description()}")

    def _check_models(self, where: str) -> None:
        """Every servo of the spec answers, with the spec's model number."""
        models = {sid: self.bus.ping(sid) for sid in self.ids}
        missing = [sid for sid, model in models.items() if model is None]
        if missing:
            raise StartupError(f"{where}: servo ID(s) {', '.join(map(str, missing))} did not answer a ping "
                               f"at {self.config.baud_rate} bps")
        expected = self.spec.servo_model_number
        wrong = [f"ID {sid} reports model number {model}" for sid, model in models.items() if model != expected]
        if wrong:
            raise StartupError(f"{where}: {'; '.join(wrong)}, expected {expected} ({self.spec.servo_model})")

    def _set_torque_all(self, enable: bool) -> None:
        self.backend.set_torque(enable)
        self.torque_enabled = enable

    def _enable_torque_at_present_pose(self) -> None:
        """Goal := present position, then torque on: the arm does not jump."""
        self._goal_joint = self.spec.servo_to_joint(self.backend.hold_present_pose())
        with self._command_lock:
            self._command = None          # an old command must not move the arm after re-enabling
        self._set_torque_all(True)

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
        sent = self.backend.write_goals(self.spec.joint_to_servo(self.clamp(command)))
        self._goal_joint = self.spec.servo_to_joint(sent)

    # ---- the cycle ---------------------------------------------------------------------------
    def cycle(self, deadline: float | None = None) -> ArmSample:
        """One bus cycle: pending requests, command write, state read, decode, health. Never raises on bus faults."""
        self._bus_thread = threading.get_ident()
        started = time.monotonic()
        if deadline is None:
            deadline = started + 0.9 * self.config.period
        self.alerts = []
        read: StateRead | None = None
        completed = asked_at = started
        if self.port_lost and not self._try_reopen(started):
            completed = time.monotonic()
        else:
            try:
                silent_for = started - self.bus.last_tx_at
                self._serve_requests()
                if self.config.is_follower:
                    self._write_command()
                asked_at = time.monotonic()
                read = self.backend.read_state(deadline, silent_for)
                completed = read.completed
            except PortLostError as exc:
                self._on_port_lost(exc)
                completed = time.monotonic()
            except BusError as exc:
                self.log(WARN, f"{self.config.role} arm: {exc}")
                completed = time.monotonic()
        self.last_bus_duration = completed - started
        stale = self._decode(read, asked_at)
        self.alerts.extend(self.health.check_timeouts(completed, trip=not self.port_lost))
        self._handle_events()
        return self._sample(completed, stale)

    def _decode(self, read: StateRead | None, asked_at: float) -> list[bool]:
        """Keep each fresh state (a stale servo keeps its last values) and feed the health monitor (the read was sent
        at ``asked_at``). No read with the port open (a bus error aborted the cycle) counts as a read no servo
        answered: a driver that cannot read its servos for the error timeout trips like one whose servos fell
        silent."""
        stale = [True] * len(self.ids)
        if read is None:
            if not self.port_lost:
                for k in range(len(self.ids)):
                    self.health.missed(k, asked_at)
            return stale
        fresh, states = read.indices, read.states
        self._position_servo[fresh] = states.position
        self._velocity[fresh] = states.velocity
        self._current[fresh] = states.current
        self._pwm[fresh] = states.pwm
        self._load[fresh] = states.load
        self._voltage[fresh] = states.input_voltage
        self._temperature[fresh] = states.temperature
        for i, k in enumerate(fresh):
            self._error[k] = int(states.error[i])
            self.alerts.extend(self.health.update_reply(k, float(states.temperature[i]), self._error[k]))
            stale[k] = False
        for k, missed in enumerate(stale):
            if missed:
                self.health.missed(k, asked_at)
        return stale

    def _handle_events(self) -> None:
        for event in self.alerts:
            self.log(event.level, f"{self.config.role} arm: {event.message}")
        if any(e.trip for e in self.alerts) and self.config.is_follower and not self.port_lost:
            self._trip_torque_off()

    def _trip_torque_off(self) -> None:
        """Follower trip: torque off on every servo (with retries) and hold until ~/reboot or ~/torque."""
        reasons = self.health.trip_reasons()
        failed = []
        for sid in self.ids:
            try:
                self.backend.torque_off(sid)
            except BusError:
                failed.append(sid)
        self.torque_enabled = False
        with self._command_lock:
            self._command = None
        extra = f" (torque-off not confirmed by servo(s) {failed})" if failed else ""
        self.log(ERROR, f"follower tripped, torque off and holding{extra}: {reasons}")

    def _sample(self, stamp: float, stale: list[bool]) -> ArmSample:
        servos = ServoStates(position=self._position_servo, velocity=self._velocity, current=self._current,
                             pwm=self._pwm, load=self._load, input_voltage=self._voltage,
                             temperature=self._temperature, error=np.asarray(self._error))
        c = self.bus.counters
        state = arm_state_fields(self.spec, self.config.role, servos, self._goal_joint,
                                 reports_load=self.backend.table.REPORTS_LOAD, stale=stale,
                                 bus_cycle_duration=self.last_bus_duration, timeout_errors=c.timeouts,
                                 crc_errors=c.crc_errors, partial_errors=c.partial_replies,
                                 dropped_cycles=self.dropped_cycles)
        return ArmSample(**state.message_fields(), stamp=stamp)

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
        self.backend.after_reopen()
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
                raise BusError("tripped, reboot first: " + self.health.trip_reasons())
            self._enable_torque_at_present_pose()
            return "torque on at the present pose"
        self._set_torque_all(False)
        return "torque off"

    def reboot_tripped(self) -> str:
        """Reboot every tripped servo (hardware error, temperature, or no valid reply for longer than the error
        timeout), restore its settings and (follower) torque at the present pose."""
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
            self._error[k] = self.backend.recover(k, servo.servo_id)
            if self._error[k]:
                raise BusError(f"{servo.label} still reports a hardware error after the reboot: "
                               + ", ".join(self.backend.describe_error(self._error[k])))
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
                        self.backend.torque_off(sid)
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

    def trip_status(self) -> tuple[Level, str]:
        """Diagnostic level and message of the arm as a whole: ERROR while a servo is tripped (a follower holds with
        torque off until ~/reboot), OK otherwise."""
        reasons = self.health.trip_reasons()
        if not reasons:
            return OK, "not tripped"
        holding = ", torque off and holding" if self.config.is_follower else ""
        return ERROR, f"{self.config.role} tripped{holding}: {reasons}"

    def servo_status(self) -> list[tuple[int, str, Level, str]]:
        """(servo ID, joint, level, message) per servo."""
        out = []
        for k, servo in enumerate(self.health.servos):
            level, message = self.health.status(k)
            out.append((servo.servo_id, servo.joint, level, message))
        return out
