"""Diagnostic levels and status names of every core and node (ROS-free).

The numbers are those of ``diagnostic_msgs/DiagnosticStatus`` (OK 0, WARN 1, ERROR 2, STALE 3), so a
core decides a level without importing ROS and a node turns it into the message's byte with
:func:`na_common.ros_node.diagnostic_status`; :func:`na_common.ros_node.status_reports` turns a received
``DiagnosticArray`` into :class:`StatusReport` for a core.

A driver names each of its statuses ``"<node's full name>: <part>"``; the arm driver's parts are spelled
here once (:data:`BUS_PART`, :data:`TRIP_PART`, ``servo <id> (<joint>)``), so consumers (recorder, teleop)
recognise them without guessing at messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import IntEnum


class Level(IntEnum):
    OK = 0
    WARN = 1
    ERROR = 2
    STALE = 3


OK, WARN, ERROR, STALE = Level.OK, Level.WARN, Level.ERROR, Level.STALE

# Parts of an arm driver's status names.
BUS_PART = "bus"                 # the serial bus: ERROR when the port is lost or the bus loop stopped
TRIP_PART = "trip"               # ERROR while a servo is tripped (follower: torque off, holding until ~/reboot)
SERVO_PART_PREFIX = "servo "     # one per servo: "servo 13 (joint3)"
# The simulated rig's own status (na-sim rig --ros): ERROR after its physics fell behind wall time past its margin.
RIG_PACE_STATUS = "sim_rig: physics"
ESTIMATOR_STATUS = "estimator"   # the estimator node's own /diagnostics status (its message names its last refusal)
# The teleop node's own status (teleop.launch.xml names the node teleop): ERROR while its overload guard or a
# protective stop holds the follower, which then no longer plays what the leader does.
TELEOP_STATUS = "/teleop"
# One per motor of the estimator's condition: "estimator: motor joint3" (na_estimator.condition_status).
MOTOR_PART_PREFIX = "motor "
# A supervised motor's mean condition score below this is a WARN (the estimator's motor status, na-health): the
# condition head is trained towards 1 for normal operation and 0 for the restricted joint, so 0.5 is its decision
# point.
CONDITION_WARN_BELOW = 0.5
# A node holding its arm on the estimated contact force (teleop, policy): "<node>: protective stop", ERROR while held.
PROTECTIVE_STOP_PART = "protective stop"
TRIP_REASON_KEY = "reason"       # value of the trip status: the tripped servos and why, "" when none is


def status_name(node: str, part: str) -> str:
    """The name of one of ``node``'s statuses."""
    return f"{node}: {part}"


def motor_part(joint: str) -> str:
    """The part of a per-motor status (the estimator's condition), e.g. ``"motor joint3"``."""
    return f"{MOTOR_PART_PREFIX}{joint}"


def voids_live_result(name: str) -> bool:
    """Whether an ERROR of this status makes a live result void (a recorded episode, a demo phase, a policy trial):
    an arm driver's trip, lost bus or silent servo, and the simulated rig falling behind wall time. Other ERRORs
    (an F/T reading gap, an estimator or policy report) are kept for the record only."""
    part = split_status_name(name)[1]
    return name == RIG_PACE_STATUS or part in (BUS_PART, TRIP_PART) or part.startswith(SERVO_PART_PREFIX)


def split_status_name(name: str) -> tuple[str, str]:
    """``(node, part)`` of a status name; part is "" for a name without one (e.g. ``"estimator"``)."""
    node, separator, part = name.partition(": ")
    return (node, part) if separator else (name, "")


@dataclass(frozen=True)
class StatusReport:
    """One received ``DiagnosticStatus``, free of ROS types."""

    name: str
    level: Level
    message: str
    hardware_id: str = ""
    values: Mapping[str, str] = field(default_factory=dict)

    @property
    def node(self) -> str:
        return split_status_name(self.name)[0]

    @property
    def part(self) -> str:
        return split_status_name(self.name)[1]

    @property
    def failed(self) -> bool:
        """ERROR or STALE: the source says it is not working."""
        return self.level >= ERROR
