"""The interface between the arm driver core and one servo family's bus (ROS-free).

:class:`na_driver.arm_core.ArmDriverCore` keeps what every arm shares: start-up order, the
command path and its clamp, stale flags, health (temperature, error bits, error timeout, trip and
torque off), port loss and reopen, service requests on the bus thread, loop-facing samples and
the robot spec's servo <-> joint mapping. A :class:`ServoBackend` does what depends on the servo
family: its bus and packets, its control table, the settings written at start-up, decoding one
cycle's replies to SI (servo side, with the family's ``decode_states``, as the offline generator decodes
them) and what its error bits mean.

Backends: :class:`na_driver.dxl_backend.DxlBackend` (DYNAMIXEL XM430, Protocol 2.0) and
:class:`na_driver.sts_backend.StsBackend` (Feetech STS3215, Protocol 0);
:func:`na_driver.backends.make_backend` picks one from the robot spec's servo model.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import ModuleType

import numpy as np

from na_description.servo_state import ServoStates
from na_driver.arm_config import ArmConfig
from na_driver.serial_bus import SerialBus

Logger = Callable[[int, str], None]    # (level, message)


class StartupError(RuntimeError):
    """The arm could not be brought up; the message says which port/servo/setting and why."""


@dataclass(frozen=True)
class StateRead:
    """One cycle's read: the servos that answered (their indices in servo order, ascending), their states
    (one entry each, servo side, SI) and the ``time.monotonic()`` the read completed."""

    indices: list[int]
    states: ServoStates
    completed: float


class ServoBackend(ABC):
    """One servo family on one bus. Called from the bus thread only; raises BusError/PortLostError on bus faults."""

    table: ModuleType          # the family's control table module (na_description.xm430 or .sts3215)

    def __init__(self, config: ArmConfig, log: Logger, bus: SerialBus) -> None:
        self.config = config
        self.log = log
        self.bus = bus
        self.ids = list(config.servo_ids)

    def _read_register(self, sid: int, name: str) -> int:
        """One register of one servo, decoded through the family's table (sign conventions included)."""
        reg = self.table.REGISTERS[name]
        return self.table.decode_value(reg, self.bus.read(sid, reg.address, reg.size).data)

    def _write_register(self, sid: int, name: str, value: int, retries: int | None = None) -> None:
        """One register of one servo, encoded through the family's table (``retries``: default the bus's)."""
        reg = self.table.REGISTERS[name]
        self.bus.write(sid, reg.address, self.table.encode_value(reg, value), retries=retries)

    def _answered(self, replies: Mapping[int, object]) -> list[int]:
        """Indices (servo order) of the servos with a reply in ``replies`` (by servo ID)."""
        return [k for k, sid in enumerate(self.ids) if sid in replies]

    @abstractmethod
    def setup(self, where: str) -> list[int]:
        """After every servo answered with the right model: write and verify the start-up settings and pick the
        per-cycle read; returns each servo's error bits (0 = healthy), in servo order."""

    @abstractmethod
    def read_goals(self) -> np.ndarray:
        """Each servo's Goal Position now (rad, servo side)."""

    @abstractmethod
    def read_state(self, deadline: float, silent_for: float) -> StateRead:
        """One cycle's read of every servo. ``silent_for``: s the bus was quiet before this cycle."""

    @abstractmethod
    def write_goals(self, servo_angles: np.ndarray) -> np.ndarray:
        """One Sync Write of Goal Position (rad, servo side); returns the angles the servos were sent (rounded)."""

    @abstractmethod
    def hold_present_pose(self) -> np.ndarray:
        """Goal := present position on every servo (before torque on: no jump); returns the goals (rad, servo side)."""

    @abstractmethod
    def set_torque(self, enable: bool) -> None:
        """Torque on or off on every servo (each write acknowledged, else BusError)."""

    @abstractmethod
    def torque_off(self, servo_id: int) -> None:
        """Torque off on one servo (acknowledged, else BusError): trips and shutdown."""

    @abstractmethod
    def after_reopen(self) -> None:
        """The port was reopened (the servos may have been power-cycled): restore the volatile settings."""

    @abstractmethod
    def recover(self, index: int, servo_id: int) -> int:
        """Clear a tripped servo the family's way and restore its settings; returns the error bits left."""

    @abstractmethod
    def describe_error(self, bits: int) -> list[str]:
        """Names of the set error bits."""

    @abstractmethod
    def read_description(self) -> str:
        """What the per-cycle read is, for the start-up log and diagnostics."""

    def diagnostic_values(self) -> dict[str, object]:
        """Family-specific values for the bus diagnostics."""
        return {}
