"""One emulated servo bus of the live rig in a process of its own (ROS-free).

The live rig starts one :class:`BusProcess` per arm. The child builds the arm's servo tables from
the physics' initial tables, serves them on a pty with the family's protocol emulator (XM430:
Protocol 2.0, STS3215: Protocol 0) and exchanges register bytes with the physics through
:mod:`na_sim.shared_tables`. It asks for SCHED_FIFO (``priority``) where the OS allows it, like the
firmware of a real servo that answers within its Return Delay whatever the host is doing;
``realtime`` says whether it took. The child exits when the parent stops it or goes away.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
from dataclasses import dataclass
from typing import Any

from na_sim.shared_tables import ArmChannels, BusSide

START_TIMEOUT_S = 60.0          # spawning a Python process on a loaded 2-core machine can take seconds
DEFAULT_PRIORITY = 60           # above the arm drivers' bus loops (50): the servos answer before the host runs on


@dataclass(frozen=True)
class BusSetup:
    """Everything the child needs, picklable."""

    family: str
    robot: str
    tables: tuple[bytes, ...]       # initial control table of every servo, spec order
    channels: ArmChannels
    baud_rate: int
    wire_time: bool
    faults: Any
    priority: int
    name: str


def _take_realtime(priority: int) -> bool:
    if priority <= 0:
        return False
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return True
    except (AttributeError, OSError):
        return False


def _serve(control, setup: BusSetup) -> None:
    """Child process: build the tables and the emulator, serve until told to stop or the parent is gone."""
    from na_description import load_spec
    from na_sim.sim_family import sim_family

    realtime = _take_realtime(setup.priority)
    spec = load_spec(setup.robot)
    family = sim_family(setup.family, spec)
    registers = []
    for servo_id, table in zip(spec.servo_ids, setup.tables, strict=True):
        servo = family.make_registers(servo_id)
        servo.store_block(0, table)
        registers.append(servo)
    side = BusSide(setup.channels, registers)
    bus = family.make_bus(registers, baud_rate=setup.baud_rate, wire_time=setup.wire_time, faults=setup.faults,
                          on_read=side.on_read, after_packets=side.after_packets, on_reboot=side.on_reboot)
    side.stats = bus.stats
    bus.start()
    side.after_packets()
    control.send((bus.port_path, realtime, os.getpid()))
    try:
        while (request := control.recv()) != "stop":
            if isinstance(request, tuple) and request[0] == "silence":
                bus.injector.silence(bus.elapsed_s, request[1])
            control.send(dict(bus.stats))
    except (EOFError, OSError):          # the parent went away
        pass
    bus.stop()
    side.close()
    with contextlib.suppress(BrokenPipeError, OSError):
        control.send(dict(bus.stats))


class BusProcess:
    """Starts the child and holds its port path; ``stop()`` ends it and returns its final counters."""

    def __init__(self, setup: BusSetup) -> None:
        context = multiprocessing.get_context("spawn")
        self._control, child_control = context.Pipe()
        self._process = context.Process(target=_serve, args=(child_control, setup), daemon=True, name=setup.name)
        self._process.start()
        child_control.close()
        if not self._control.poll(START_TIMEOUT_S):
            self.kill()
            raise RuntimeError(f"the {setup.name} bus process did not start within {START_TIMEOUT_S:.0f} s")
        self.port_path, self.realtime, self.pid = self._control.recv()
        self.name = setup.name
        self._final: dict[str, int] | None = None

    @property
    def alive(self) -> bool:
        return self._process.is_alive()

    def stats(self) -> dict[str, int]:
        """The emulator's counters now (a round trip to the child)."""
        if self._final is not None:
            return self._final
        self._control.send("stats")
        return self._control.recv()

    def silence(self, seconds: float) -> None:
        """Fault drill: no servo of this bus answers for ``seconds`` from now."""
        self._control.send(("silence", float(seconds)))
        self._control.recv()

    def stop(self) -> dict[str, int]:
        """Stop the child (idempotent); its final counters."""
        if self._final is None:
            self._final = {}
            try:
                self._control.send("stop")
                if self._control.poll(5.0):
                    self._final = self._control.recv()
            except (BrokenPipeError, EOFError, OSError):
                pass
            self._process.join(5.0)
            self.kill()
        return self._final

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join(5.0)
