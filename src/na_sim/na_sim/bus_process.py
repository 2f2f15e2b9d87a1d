"""One emulated servo bus of the live rig in a process of its own (ROS-free).

The live rig starts one per arm (:class:`~na_sim.child_process.ChildProcess`). The child builds the
arm's servo tables from the physics' initial tables, serves them on a pty with the family's protocol
emulator (XM430: Protocol 2.0, STS3215: Protocol 0) and exchanges register bytes with the physics
through :mod:`na_sim.shared_tables`. It asks for SCHED_FIFO (``priority``) where the OS allows it,
like the firmware of a real servo that answers within its Return Delay whatever the host is doing.
Facts it reports: ``port_path``, ``realtime``, ``pid``. Requests: ``("silence", seconds)`` (a fault
drill: no servo answers for that long) and ``"stats"``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from na_sim.child_process import ChildProcess, say_goodbye, serve, take_realtime
from na_sim.shared_tables import ArmChannels, BusSide

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


def _serve_bus(control, setup: BusSetup) -> None:
    from na_description import load_spec
    from na_sim.sim_family import sim_family

    realtime = take_realtime(setup.priority)
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

    def handle(request: Any) -> dict[str, int]:
        if isinstance(request, tuple) and request[0] == "silence":
            bus.injector.silence(bus.elapsed_s, request[1])
        return dict(bus.stats)

    serve(control, {"port_path": bus.port_path, "realtime": realtime}, handle)
    bus.stop()
    side.close()
    say_goodbye(control, dict(bus.stats))


def start_bus(setup: BusSetup, name: str) -> ChildProcess:
    """The bus child of one arm, serving once this returns (``facts["port_path"]``)."""
    return ChildProcess(_serve_bus, setup, name)
