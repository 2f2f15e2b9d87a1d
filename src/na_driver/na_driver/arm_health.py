"""Per-servo health: temperature warning/trip, hardware errors, servos that stopped answering (ROS-free).

Thresholds: warning 55 degC and trip 60 degC are the NeuralActuator authors' rig settings
(docs/REFERENCES.md, Authors' setup); the servo's own overheating shutdown is at its Temperature Limit (80 degC;
docs/REFERENCES.md, XM430-W350). Error bits are the servo family's (XM430 Hardware Error Status, STS3215
Status), named by the ``describe_error`` the arm's backend passes in. Datasheet margins
(:mod:`na_description.datasheet_margins`): effort against the stall figure, temperature against the shutdown limit;
an effort above :data:`EFFORT_WARNING_FRACTION` of the stall figure is a WARN.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from na_common.diagnostics import ERROR, OK, WARN, Level
from na_description import xm430
from na_description.datasheet_margins import (
    EFFORT_WARNING_FRACTION,
    DatasheetReference,
    effort_margin,
    temperature_margin,
)


@dataclass(frozen=True)
class HealthEvent:
    """A change worth a log line: ``trip`` events make a follower turn torque off."""

    level: Level
    servo_id: int
    joint: str
    message: str
    trip: bool = False


@dataclass
class ServoHealth:
    servo_id: int
    joint: str
    temperature: float = math.nan         # degC
    hardware_error: int = 0
    temperature_warned: bool = False
    trip_reason: str | None = None        # set while tripped, cleared by a reboot / re-enable
    not_responding: bool = False
    unanswered: int = 0                   # reads that asked this servo since its last valid reply
    first_unanswered: float = math.nan    # monotonic time the first of those reads was sent
    effort: float = math.nan              # last |effort| in the reference's unit (A or fraction of full output)
    messages: list[str] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"servo {self.servo_id} ({self.joint})"


class HealthMonitor:
    """Turns decoded telemetry into warnings, trips and per-servo status lines."""

    def __init__(self, servo_ids: tuple[int, ...], joint_names: tuple[str, ...], temperature_warning: float,
                 temperature_trip: float, error_timeout: float,
                 describe_error: Callable[[int], list[str]] = xm430.decode_hardware_error,
                 reference: DatasheetReference | None = None) -> None:
        self.describe_error = describe_error
        self.reference = reference              # datasheet figures for the margins; None: margins not reported
        self.temperature_warning = temperature_warning
        self.temperature_trip = temperature_trip
        self.error_timeout = error_timeout
        self.servos = [ServoHealth(sid, name) for sid, name in zip(servo_ids, joint_names, strict=True)]

    def update_reply(self, index: int, temperature: float, hardware_error: int) -> list[HealthEvent]:
        """A valid reply of servo ``index`` arrived."""
        servo = self.servos[index]
        events: list[HealthEvent] = []
        servo.unanswered = 0
        servo.first_unanswered = math.nan
        if servo.not_responding:
            servo.not_responding = False
            events.append(HealthEvent(OK, servo.servo_id, servo.joint, f"{servo.label} answers again"))
        servo.temperature = temperature
        if hardware_error and hardware_error != servo.hardware_error:
            names = ", ".join(self.describe_error(hardware_error)) or f"bits 0x{hardware_error:02X}"
            reason = f"hardware error: {names}"
            servo.trip_reason = servo.trip_reason or reason
            events.append(HealthEvent(ERROR, servo.servo_id, servo.joint, f"{servo.label}: {reason}", trip=True))
        servo.hardware_error = hardware_error
        if temperature >= self.temperature_trip and servo.trip_reason is None:
            reason = f"temperature {temperature:.0f} degC reached the trip limit {self.temperature_trip:.0f} degC"
            servo.trip_reason = reason
            events.append(HealthEvent(ERROR, servo.servo_id, servo.joint, f"{servo.label}: {reason}", trip=True))
        elif temperature >= self.temperature_warning and not servo.temperature_warned:
            servo.temperature_warned = True
            events.append(HealthEvent(WARN, servo.servo_id, servo.joint,
                                      f"{servo.label}: temperature {temperature:.0f} degC above the warning "
                                      f"level {self.temperature_warning:.0f} degC"))
        elif temperature < self.temperature_warning - 2.0:
            servo.temperature_warned = False      # 2 degC hysteresis against a flickering warning
        return events

    def update_effort(self, efforts: Sequence[float]) -> None:
        """The latest effort of every servo (ArmState current or load, as the reference's signal names)."""
        for servo, effort in zip(self.servos, efforts, strict=False):
            if math.isfinite(effort):
                servo.effort = abs(float(effort))

    def effort_margin(self, index: int) -> float:
        """1 - |effort| / datasheet stall figure of servo ``index`` (nan without a reference or an effort)."""
        if self.reference is None:
            return math.nan
        return float(effort_margin(self.servos[index].effort, self.reference))

    def values(self, index: int) -> dict[str, str]:
        """Key/values of servo ``index``'s status: error bits, temperature and the datasheet margins."""
        servo = self.servos[index]
        out = {"hardware_error_status": f"0x{servo.hardware_error:02X}",
               "hardware_errors": ", ".join(self.describe_error(servo.hardware_error)),
               "temperature_c": f"{servo.temperature:.0f}"}
        if self.reference is not None:
            ref = self.reference
            out.update({
                "temperature_limit_c": f"{ref.temperature_limit_c:.0f}",
                "temperature_margin_c": f"{float(temperature_margin(servo.temperature, ref)):.0f}",
                "effort_signal": ref.effort_signal,
                "effort": f"{servo.effort:.3f}",
                "effort_unit": ref.effort_unit,
                "effort_datasheet": ref.effort_source,
                "effort_margin": f"{self.effort_margin(index):.2f}",
            })
        return out

    def check_timeouts(self, now: float, trip: bool = True) -> list[HealthEvent]:
        """Servos that answered none of the reads sent over longer than the error timeout: a trip (a follower turns
        torque off and holds until ~/reboot), unless ``trip`` is False (the port itself is lost: its own path handles
        that).

        The silence counts from the first unanswered read, not from the last reply: while the driver asks nothing
        (its bus thread busy with a reboot, or the host stalled) a servo cannot be silent, and one read missed
        right after such a pause is not a servo that stopped answering."""
        events = []
        for servo in self.servos:
            if not servo.unanswered:
                continue
            silent = now - servo.first_unanswered
            if silent > self.error_timeout and not servo.not_responding:
                servo.not_responding = True
                reason = (f"no valid reply for {silent:.2f} s to {servo.unanswered} read(s) "
                          f"(error timeout {self.error_timeout:.2f} s)")
                if trip:
                    servo.trip_reason = servo.trip_reason or reason
                events.append(HealthEvent(ERROR, servo.servo_id, servo.joint, f"{servo.label}: {reason}", trip=trip))
        return events

    def missed(self, index: int, asked_at: float) -> None:
        """A read sent at ``asked_at`` asked servo ``index`` and got no valid reply (counted in the silence's report:
        a servo silent to many reads, or a driver that hardly asked)."""
        servo = self.servos[index]
        if not servo.unanswered:
            servo.first_unanswered = asked_at
        servo.unanswered += 1

    def clear_trip(self, index: int) -> None:
        """Servo ``index`` was recovered (rebooted, answered): its trip is cleared and its silence forgotten,
        so a servo that tripped by falling silent is not reported silent again at once."""
        servo = self.servos[index]
        servo.trip_reason = None
        servo.hardware_error = 0
        servo.temperature_warned = False
        servo.not_responding = False
        servo.unanswered = 0
        servo.first_unanswered = math.nan

    @property
    def tripped(self) -> list[ServoHealth]:
        return [s for s in self.servos if s.trip_reason is not None]

    def trip_reasons(self) -> str:
        """Every tripped servo and why, one line ("" when none is tripped)."""
        return "; ".join(f"{s.label}: {s.trip_reason}" for s in self.tripped)

    def status(self, index: int) -> tuple[Level, str]:
        """Diagnostic level and a one-line message of one servo."""
        servo = self.servos[index]
        if servo.trip_reason is not None:
            return ERROR, f"tripped: {servo.trip_reason}" + ("; not responding" if servo.not_responding else "")
        if servo.not_responding:
            return ERROR, "not responding"
        if servo.hardware_error:
            return ERROR, "hardware error: " + ", ".join(self.describe_error(servo.hardware_error))
        if servo.temperature >= self.temperature_warning:
            return WARN, f"temperature {servo.temperature:.0f} degC"
        margin = self.effort_margin(index)
        if margin < 1.0 - EFFORT_WARNING_FRACTION:
            return WARN, (f"{self.reference.effort_signal} at {100.0 * (1.0 - margin):.0f} % of the "
                          f"{self.reference.effort_source}")
        return OK, "ok"
