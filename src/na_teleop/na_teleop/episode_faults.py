"""Faults seen on /diagnostics during an episode, for its metadata (ROS-free).

Every ERROR or STALE status of a driver, the estimator or another node is a fault from the first report
until the status is OK or WARN again. The arm driver's statuses are told apart by their names
(:mod:`na_common.diagnostics`): ``<driver>: trip`` (a servo tripped; a follower holds with torque off),
``<driver>: bus`` (port lost, bus loop stopped) and ``<driver>: servo <id> (<joint>)`` (a servo silent
past the error timeout, or in error). Those make the episode *void*: the follower did not follow, or the
telemetry has a hole, so the episode must not train a model; so does the simulated rig's ``sim_rig: physics``
ERROR (its physics fell behind wall time: the recorded motion is not the motion the servos reported). Other
faults are kept for the record.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

from na_common.diagnostics import (
    BUS_PART,
    RIG_PACE_STATUS,
    SERVO_PART_PREFIX,
    TRIP_PART,
    StatusReport,
    voids_live_result,
)
from na_common.episode_bag.metadata import FAULTS_KEY, VOID_KEY, VOID_REASON_KEY

# Kinds of fault; all but OTHER void an episode (na_common.diagnostics.voids_live_result).
TRIP, BUS, SERVO, RIG, OTHER = "trip", "bus", "servo", "rig", "error"
# At most this many faults are written per episode (a status whose message changes every report would
# otherwise grow the metadata without bound); the rest are counted.
MAX_FAULTS = 100


def fault_kind(status: StatusReport) -> str:
    if status.name == RIG_PACE_STATUS:
        return RIG
    part = status.part
    if part == TRIP_PART:
        return TRIP
    if part == BUS_PART:
        return BUS
    if part.startswith(SERVO_PART_PREFIX):
        return SERVO
    return OTHER


@dataclass
class Fault:
    """One failing status: ``since_ns`` its first report, ``until_ns`` the report that it was well again (None:
    still failing when the episode stopped). Stamps are ns of ROS time, as the episode's start and stop."""

    kind: str
    status: str              # the status name, e.g. "/follower/arm_driver: trip"
    level: str               # "ERROR" or "STALE"
    message: str
    hardware_id: str
    since_ns: int
    until_ns: int | None = None

    @property
    def voids(self) -> bool:
        return voids_live_result(self.status)

    def describe(self) -> str:
        return f"{self.status}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "void": self.voids}


class FaultMonitor:
    """Follows the failing statuses all the time (a trip before the episode started counts when it lasts into
    it) and lists those of the episode between :meth:`begin` and :meth:`end`."""

    def __init__(self) -> None:
        self.active: dict[str, Fault] = {}          # status name -> its fault, while it fails
        self._episode: list[Fault] | None = None

    def begin(self) -> None:
        """An episode starts: the faults active now are its first ones."""
        self._episode = list(self.active.values())

    def update(self, statuses: Iterable[StatusReport], stamp_ns: int) -> list[Fault]:
        """One received DiagnosticArray (stamped ``stamp_ns``); returns the faults that began with it."""
        new = []
        for status in statuses:
            known = self.active.get(status.name)
            if not status.failed:
                if known is not None:
                    known.until_ns = int(stamp_ns)
                    del self.active[status.name]
                continue
            if known is not None and known.level == status.level.name and known.message == status.message:
                continue
            if known is not None:
                known.until_ns = int(stamp_ns)      # the same status fails differently now: a fault of its own
            fault = Fault(kind=fault_kind(status), status=status.name, level=status.level.name,
                          message=status.message, hardware_id=status.hardware_id, since_ns=int(stamp_ns))
            self.active[status.name] = fault
            new.append(fault)
            if self._episode is not None:
                self._episode.append(fault)
        return new

    @property
    def recording(self) -> bool:
        return self._episode is not None

    def metadata(self) -> dict[str, Any]:
        """The episode metadata of the faults so far: ``faults`` (list of dicts), ``void``, ``void_reason``."""
        faults = self._episode or []
        voiding = [f for f in faults if f.voids]
        meta: dict[str, Any] = {FAULTS_KEY: [f.as_dict() for f in faults[:MAX_FAULTS]], VOID_KEY: bool(voiding),
                                VOID_REASON_KEY: voiding[0].describe() if voiding else ""}
        if len(faults) > MAX_FAULTS:
            meta["faults_omitted"] = len(faults) - MAX_FAULTS
        return meta

    def end(self) -> dict[str, Any]:
        """The episode stops: its fault metadata (:meth:`metadata`); the monitor keeps following the statuses."""
        meta = self.metadata()
        self._episode = None
        return meta
