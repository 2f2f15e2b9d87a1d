"""The live rig's F/T sensor emulators in a process of their own (ROS-free).

The ATI Net F/T UDP server and the serial line sensor of :mod:`na_sim.ft_emulator`, fed the wrench on the
sensor from the physics' latest record (:mod:`na_sim.rig_record`), so that the sensor streams at its rate
whatever the physics process is doing. Facts it reports: ``netft`` (host, port) or None, ``serial_port``
or "", ``realtime``, ``pid``; requests answer the counters (``records``, ``lines``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from na_sim.child_process import ChildProcess, say_goodbye, serve, take_realtime
from na_sim.faults import FtFaults


@dataclass(frozen=True)
class FtSetup:
    record_path: str
    netft: bool
    netft_port: int
    netft_rate: float
    serial: bool
    serial_rate: float
    faults: FtFaults
    priority: int
    nice: int = 0


def _serve_ft(control, setup: FtSetup) -> None:
    from na_sim.ft_emulator import NetFtEmulator, SerialFtEmulator
    from na_sim.rig_record import RigRecordReader

    realtime = take_realtime(setup.priority, setup.nice)
    reader = RigRecordReader(setup.record_path)
    netft = NetFtEmulator(reader.sensor_wrench, port=setup.netft_port, rate_hz=setup.netft_rate,
                          faults=setup.faults).start() if setup.netft else None
    serial = SerialFtEmulator(reader.sensor_wrench, rate_hz=setup.serial_rate,
                              faults=setup.faults).start() if setup.serial else None

    def counters(_request: Any = None) -> dict[str, int]:
        return {"records": netft.stats["records"] if netft else 0, "lines": serial.lines_sent if serial else 0}

    facts = {"netft": None if netft is None else list(netft.address),
             "serial_port": "" if serial is None else serial.port_path, "realtime": realtime}
    serve(control, facts, counters)
    final = counters()
    for part in (netft, serial):
        if part is not None:
            part.stop()
    reader.close()
    say_goodbye(control, final)


def start_ft(setup: FtSetup) -> ChildProcess:
    return ChildProcess(_serve_ft, setup, "ft-sensors")
