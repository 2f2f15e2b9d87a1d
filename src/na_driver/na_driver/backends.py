"""The arm backend of a robot spec's servo family (:class:`na_driver.arm_backend.ServoBackend`).

The STS3215 backend is imported when an arm of that family starts: it brings the Feetech SDK
(scservo_sdk), which the package does not require; the XM430's dynamixel-sdk is a dependency.
"""

from __future__ import annotations

from na_driver.arm_backend import Logger, ServoBackend
from na_driver.arm_config import ArmConfig
from na_driver.dxl_backend import DxlBackend
from na_driver.serial_bus import SerialBus
from na_driver.servo_family import STS3215, XM430


def make_backend(config: ArmConfig, log: Logger, bus: SerialBus | None = None, read_mode: str = "auto",
                 layout: str = "auto") -> ServoBackend:
    """The backend of the robot spec's servo family. ``read_mode``/``layout`` force a DYNAMIXEL bus path
    (benchmarks); the STS3215 has one path, Sync Read of its state block."""
    family = config.family.name
    if family == XM430:
        return DxlBackend(config, log, bus, read_mode=read_mode, layout=layout)
    if family == STS3215:
        from na_driver.sts_backend import StsBackend  # lazy: needs scservo_sdk (optional), only for STS3215 arms

        if (read_mode, layout) not in (("auto", "auto"), ("sync", "auto")):
            raise ValueError("STS3215 servos are read one way (Sync Read of the state block): read_mode and "
                             "layout must be 'auto'")
        return StsBackend(config, log, bus)
    raise ValueError(f"no arm backend for servo family {family}")
