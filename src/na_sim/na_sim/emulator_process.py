"""One emulated servo bus in its own process, driven over a pipe (ROS-free).

Tests and benchmarks that measure a driver's rate run the emulator here, as the simulated rig
does, so that the emulator and the driver do not share one interpreter lock (in one process, a
driver thread can make the emulator thread wait up to Python's 5 ms switch interval).
``family`` picks the servos: ``"xm430"`` (Protocol 2.0, the default) or ``"sts3215"`` (Feetech
Protocol 0, the SO-101's). ``priority`` > 0 runs the emulator process under SCHED_FIFO (where the OS allows it): real
servos answer within microseconds, and a benchmark of the driver should not measure how long a
loaded machine keeps the emulator waiting (``EmulatorProcess.realtime`` says whether it took).

    with EmulatorProcess([11, 12, 13, 14, 15], wire_time=True, moving_truth=True) as bus:
        ... drive bus.port_path ...
        report = bus.stop()          # fault counts, emulator stats, what every read served
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from na_description import xm430
from na_sim.faults import DxlFaults, UndetectedCorruption
from na_sim.moving_truth import ReadCounterTruth, ServedRead
from na_sim.sim_family import FAMILIES

START_TIMEOUT_S = 60.0          # spawning a Python process on a loaded 2-core machine can take seconds


@dataclass
class EmulatorReport:
    """What the emulator process reports when it stops."""

    stats: dict[str, int]
    faults: dict[str, int]
    served: list[ServedRead] = field(default_factory=list)
    registers: dict[int, bytes] = field(default_factory=dict)     # servo ID -> final 256-byte table
    undetected: list[UndetectedCorruption] = field(default_factory=list)   # corrupted replies whose CRC held


@dataclass(frozen=True)
class _Setup:
    servo_ids: tuple[int, ...]
    baud_rate: int
    wire_time: bool
    faults: DxlFaults | None
    moving_truth: bool
    firmware_version: int
    registers: dict[str, tuple[int, ...]]
    priority: int = 0
    family: str = "xm430"


def _serve(connection, setup: _Setup) -> None:
    """Child process: build the servos and the emulator, then answer requests until "stop"."""
    import os

    from na_sim.servo_registers import ServoRegisters

    realtime = False
    if setup.priority:
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(setup.priority))
            realtime = True
        except (AttributeError, OSError):
            pass

    family = FAMILIES[setup.family]
    if setup.family == "xm430":     # plain XM430 tables: the ones firmware_version and moving_truth act on
        servos = [ServoRegisters(sid, firmware_version=setup.firmware_version) for sid in setup.servo_ids]
    else:
        servos = [family.make_registers(sid) for sid in setup.servo_ids]
    baud_code = next(code for code, baud in family.table.BAUD_RATES.items() if baud == setup.baud_rate)
    for k, servo in enumerate(servos):
        servo.set("return_delay_time", 0)
        servo.set("baud_rate", baud_code)
        for name, values in setup.registers.items():
            servo.set(name, values[k])
    truth = ReadCounterTruth(servos) if setup.moving_truth else None
    emulator = family.make_bus(servos, baud_rate=setup.baud_rate, wire_time=setup.wire_time, faults=setup.faults,
                               on_read=truth).start()
    by_id = {servo.servo_id: servo for servo in servos}
    connection.send((emulator.port_path, realtime))
    try:
        while True:
            request = connection.recv()
            if request[0] == "get":
                connection.send(by_id[request[1]].get(request[2]))
            elif request[0] == "set":
                by_id[request[1]].set(request[2], request[3])
                connection.send(None)
            elif request[0] == "stop":
                break
    except EOFError:          # the parent went away
        pass
    emulator.stop()
    connection.send(EmulatorReport(dict(emulator.stats), emulator.fault_counters,
                                   list(truth.records) if truth is not None else [],
                                   {servo.servo_id: servo.snapshot() for servo in servos}, list(emulator.undetected)))


class EmulatorProcess:
    """A bus emulator of XM430 (:class:`~na_sim.dxl_emulator.DxlBusEmulator`) or STS3215 servos
    (:class:`~na_sim.sts_emulator.StsBusEmulator`) in a spawned process."""

    def __init__(self, servo_ids: Sequence[int], *, baud_rate: int = 1_000_000, wire_time: bool = True,
                 faults: DxlFaults | None = None, moving_truth: bool = False,
                 firmware_version: int = xm430.REGISTERS["firmware_version"].default,
                 registers: dict[str, Sequence[int]] | None = None, priority: int = 0,
                 family: str = "xm430") -> None:
        if family not in FAMILIES:
            raise ValueError(f"family must be one of {sorted(FAMILIES)}, got {family!r}")
        if moving_truth and family != "xm430":
            raise ValueError("moving_truth serves XM430 registers; it has no STS3215 form")
        rates = FAMILIES[family].table.BAUD_RATES.values()
        if baud_rate not in rates:
            raise ValueError(f"baud_rate must be one of {sorted(rates)}, got {baud_rate}")
        setup = _Setup(tuple(servo_ids), int(baud_rate), wire_time, faults, moving_truth, int(firmware_version),
                       {name: tuple(int(v) for v in values) for name, values in (registers or {}).items()},
                       int(priority), family)
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, setup), daemon=True, name=f"{family}-emulator")
        self._process.start()
        child.close()
        if not self._connection.poll(START_TIMEOUT_S):
            self._process.kill()
            raise RuntimeError("the emulator process did not start")
        self.port_path, self.realtime = self._connection.recv()
        self._report: EmulatorReport | None = None

    def get(self, servo_id: int, name: str) -> int:
        """A register of one servo (typed, as ``ServoRegisters.get``)."""
        return self._call(("get", servo_id, name))

    def set(self, servo_id: int, name: str, value: int) -> None:
        """An internal write into one servo's table (no access checks), e.g. to start a fault."""
        self._call(("set", servo_id, name, value))

    def _call(self, request: tuple[Any, ...]) -> Any:
        if self._report is not None:
            raise RuntimeError("the emulator process has stopped")
        self._connection.send(request)
        return self._connection.recv()

    def stop(self) -> EmulatorReport:
        """Stop the emulator (idempotent) and return its report."""
        if self._report is None:
            self._connection.send(("stop",))
            if not self._connection.poll(START_TIMEOUT_S):
                self._process.kill()
                raise RuntimeError("the emulator process did not stop")
            self._report = self._connection.recv()
            self._process.join(5.0)
        return self._report

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5.0)

    def __enter__(self) -> EmulatorProcess:
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            self.stop()
        finally:
            self.kill()
