"""Reply latency of the live rig's emulated servo buses, as the host sees it on the port.

Starts ``na-sim rig`` with a scripted task (the physics busy with the arm, the payload and the F/T
emulators) in its own process, optionally with CPU-bound processes beside it, and from this process
sends a Sync Read of the state block of every follower servo every 10 ms, as the arm driver does,
timing each from the instruction's write to the last byte of the last status packet. It does so once
with the bus processes under SCHED_FIFO (the rig's default) and once with normal scheduling, and
prints p50/p99/max and the cycles with a reply missing (50 ms). This client asks for SCHED_FIFO
(priority 50, as the driver's bus loop) so that its own scheduling does not count against the rig.

It also times the emulator's own work for one Sync Read in this process, before any load starts: the bus
built as a rig's bus process builds it (the family's emulator, shared tables with a physics side), the
instruction parsed and answered and the tables handed back, with no pty and warm caches. What the host sees
above that and the floor is scheduling.

First it measures the floor that the host's kernel sets: the same exchange with a minimal process at
SCHED_FIFO 60 that answers every instruction at once with the same number of status bytes over a
pseudo-terminal (no emulator, no physics). A pty passes bytes through kernel workers that run at
normal priority, so under CPU load this floor is what no emulator on this host can beat.

``--floor-only`` measures just that floor, for as long as asked, so that it can run beside another workload
(the system tests, the demo): with ``--late-ms`` it lists every slow cycle with the unix time it was sent,
to be matched with the stamps of ``stale`` servo readings recorded meanwhile. Where both line up, the bytes
waited in the kernel, not in an emulator.

    python src/na_sim/benchmarks/bench_rig_reply.py --seconds 60 --hog 1
    python src/na_sim/benchmarks/bench_rig_reply.py --robot so101 --seconds 20
    python src/na_sim/benchmarks/bench_rig_reply.py --robot so101 --floor-only --hog 0 --seconds 600 --late-ms 8
"""

from __future__ import annotations

import argparse
import json
import os
import select
import subprocess
import sys
import tempfile
import time
import tty
from pathlib import Path

import numpy as np

from na_common.machine import machine_line
from na_description import load_spec, sts3215, xm430
from na_sim import protocol0, protocol2
from na_sim.child_process import take_realtime
from na_sim.rig_config import RigConfig, rig_config_for, robot_name
from na_sim.shared_tables import BusSide, PhysicsSide
from na_sim.sim_family import sim_family

PERIOD_S = 0.01
REPLY_TIMEOUT_S = 0.05
CLIENT_PRIORITY = 50
BUS_PRIORITY = 60                  # the rig's bus processes (na-sim rig --bus-priority default)


def bus_packets(robot: str, servo_ids: list[int]) -> tuple[bytes, bytes, object]:
    """For ``robot``: the driver's start-up write of Return Delay 0 (broadcast, no reply), its state Sync Read,
    and a parser of the replies."""
    if load_spec(robot).servo_model == "STS3215":
        delay = sts3215.REGISTERS["return_delay_time"].address
        read = bytes([sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_LENGTH, *servo_ids])
        return (protocol0.build_instruction(protocol0.BROADCAST_ID, protocol0.WRITE, bytes([delay, 0])),
                protocol0.build_instruction(protocol0.BROADCAST_ID, protocol0.SYNC_READ, read), protocol0)
    delay = xm430.REGISTERS["return_delay_time"].address
    start, length = xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH
    read = start.to_bytes(2, "little") + length.to_bytes(2, "little") + bytes(servo_ids)
    return (protocol2.build_instruction(protocol2.BROADCAST_ID, protocol2.WRITE, delay.to_bytes(2, "little") + b"\0"),
            protocol2.build_instruction(protocol2.BROADCAST_ID, protocol2.SYNC_READ, read), protocol2)


def _echo_main(fd: int, reply: bytes) -> None:
    """The floor's servo side: every instruction read is answered at once with ``reply``."""
    take_realtime(BUS_PRIORITY)
    while True:
        if not os.read(fd, 4096):
            return
        os.write(fd, reply)


def pty_floor(setup: bytes, packet: bytes, protocol, servo_ids: list[int], state_bytes: int,
              seconds: float, late: Late | None = None) -> tuple[np.ndarray, int]:
    """``measure`` against a bare echo on a pty pair (see the module docstring)."""
    import pty

    master, slave = pty.openpty()
    tty.setraw(master)
    tty.setraw(slave)
    reply = b"".join(protocol.build_status(sid, 0, bytes(state_bytes)) for sid in servo_ids)
    child = os.fork()
    if child == 0:                                   # pragma: no cover (the child process)
        os.close(master)
        try:
            _echo_main(slave, reply)
        finally:
            os._exit(0)
    os.close(slave)
    try:
        return measure(master, setup, packet, protocol, len(servo_ids), seconds, echo=True, late=late)
    finally:
        os.kill(child, 9)
        os.waitpid(child, 0)
        os.close(master)


def emulator_work(robot: str, packet: bytes, setup: bytes, calls: int = 3000) -> float:
    """Mean seconds of the emulator's own work per ``packet`` (see the module docstring): parse, answer (the
    replies are collected, not written) and the tables handed to the physics side."""
    spec = load_spec(robot)
    family = sim_family(RigConfig.from_yaml(rig_config_for(robot)).servo_family, spec)   # as the rig picks it
    physics = [family.make_registers(servo_id) for servo_id in spec.servo_ids]
    link = PhysicsSide(physics, family.physics_bytes, family.error_bytes, family.clock_bytes)
    try:
        link.push(0.0, 0)
        tables = []
        for servo_id, source in zip(spec.servo_ids, physics, strict=True):
            table = family.make_registers(servo_id)
            table.store_block(0, source.snapshot())
            tables.append(table)
        side = BusSide(link.channels, tables)
        bus = family.make_bus(tables, baud_rate=spec.baud_rate, wire_time=False, faults=None, on_read=side.on_read,
                              after_packets=side.after_packets, on_reboot=side.on_reboot)
        side.stats = bus.stats
        bus._flush = bus._unsent.clear                  # no pty: the replies are built and dropped
        bus._host_is_sending = lambda: False
        try:
            def one(data: bytes) -> None:
                bus._handle_all(bus._parser.feed(data))
                bus._between_packets()
                side.after_packets()

            one(setup)
            for _ in range(200):
                one(packet)
            start = time.perf_counter()
            for _ in range(calls):
                one(packet)
            return (time.perf_counter() - start) / calls
        finally:
            side.close()
    finally:
        link.close()


def start_rig(robot: str, priority: int, info: Path, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "na_sim.live_rig", "--robot", robot, "--task", "pick_place",
               "--payload-grams", "200", "--loop-task", "--status-every", "0", "--no-serial-ft",
               "--bus-priority", str(priority), "--info-out", str(info)]
    process = subprocess.Popen(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120.0
    while not info.is_file():
        if process.poll() is not None or time.monotonic() > deadline:
            process.kill()
            raise SystemExit(f"the rig did not come up; see {log}")
        time.sleep(0.1)
    return process


class Late:
    """Cycles slower than ``threshold_s`` (a missing reply included), with the unix time each was sent: to be
    matched with the stamps of a recording made meanwhile."""

    def __init__(self, threshold_s: float) -> None:
        self.threshold_s = threshold_s
        self.cycles: list[tuple[float, float]] = []        # (unix time sent, latency s; inf: a reply missing)

    def add(self, sent_unix: float, latency: float) -> None:
        if latency > self.threshold_s:
            self.cycles.append((sent_unix, latency))


def measure(port: str | int, setup: bytes, packet: bytes, protocol, servo_count: int,
            seconds: float, echo: bool = False, late: Late | None = None) -> tuple[np.ndarray, int]:
    """Latency of every cycle (s) and the number of cycles with a reply missing. ``port``: a device path, or
    the open master of the floor's pty (``echo``: it answers the set-up write too); ``late`` collects the slow
    cycles."""
    if isinstance(port, int):
        fd = os.dup(port)
    else:
        fd = os.open(port, os.O_RDWR | os.O_NOCTTY | os.O_NONBLOCK)
        tty.setraw(fd)
    latencies, missing = [], 0
    try:
        os.write(fd, setup)                  # Return Delay 0, as the arm driver writes at start-up
        time.sleep(0.1)
        if echo:
            while select.select([fd], [], [], 0.05)[0]:
                os.read(fd, 4096)
        next_cycle = time.monotonic()
        end = next_cycle + seconds
        while next_cycle < end:
            parser = protocol.PacketParser()
            sent, sent_unix = time.perf_counter(), time.time()
            os.write(fd, packet)
            replies, deadline = 0, sent + REPLY_TIMEOUT_S
            while replies < servo_count:
                remaining = deadline - time.perf_counter()
                if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                    break
                replies += len(parser.feed(os.read(fd, 4096)))       # only the servos write to this end
            latency = time.perf_counter() - sent if replies >= servo_count else float("inf")
            if replies >= servo_count:
                latencies.append(latency)
            else:
                missing += 1
            if late is not None:
                late.add(sent_unix, latency)
            next_cycle += PERIOD_S
            time.sleep(max(0.0, next_cycle - time.monotonic()))
    finally:
        os.close(fd)
    return np.asarray(latencies), missing


def report(what: str, latency: np.ndarray, missing: int, servo_count: int, took: bool | None) -> dict:
    """Print one run's line; its figures."""
    ms = latency * 1e3 if latency.size else np.array([np.nan])
    figures = {"bus_realtime": took, "cycles": int(latency.size + missing), "missing": missing,
               "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99)),
               "max_ms": float(ms.max())}
    print(f"{what}{'' if took is None else f' (took: {took})'}: Sync Read of {servo_count} servos every 10 ms, "
          f"{figures['cycles']} cycles: p50 {figures['p50_ms']:.3f} ms, p99 {figures['p99_ms']:.3f} ms, "
          f"max {figures['max_ms']:.3f} ms, {missing} with a reply missing", flush=True)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="omx_x", help="omx_x (default) or so101")
    parser.add_argument("--seconds", type=float, default=60.0, help="seconds per run (default 60)")
    parser.add_argument("--hog", type=int, default=1, help="CPU-bound processes beside the rig (default 1)")
    parser.add_argument("--priorities", type=int, nargs="+", default=[60, 0],
                        help="SCHED_FIFO priorities of the bus processes, one run each (0 = normal; default 60 0)")
    parser.add_argument("--floor-only", action="store_true",
                        help="measure only the bare pty echo (no rig): run it beside another workload (e.g. the "
                             "system tests, with --hog 0) to see whether the kernel's pty path itself stalled")
    parser.add_argument("--late-ms", type=float, default=None,
                        help="list the floor's cycles slower than this, with the unix time each was sent")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args(argv)
    robot = robot_name(args.robot)
    spec = load_spec(robot)
    setup, packet, protocol = bus_packets(robot, list(spec.servo_ids))
    work = emulator_work(robot, packet, setup)
    print(f"emulator work per Sync Read of {len(spec.servo_ids)} servos, in this process (no pty, warm caches, before "
          f"any load): {work * 1e6:.0f} us", flush=True)
    try:
        # Reset on fork: the CPU-bound processes and the rig started below must not inherit real-time priority (a
        # busy loop at SCHED_FIFO would starve the kernel's pty workers and every normal process, the rig's included).
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(CLIENT_PRIORITY))
        client = f"SCHED_FIFO {CLIENT_PRIORITY}"
    except (AttributeError, OSError):
        client = "normal scheduling"
    hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hog)]
    results = {}
    try:
        state_bytes = sts3215.STATE_BLOCK_LENGTH if protocol is protocol0 else xm430.STATE_BLOCK_LENGTH
        late = Late(args.late_ms / 1e3) if args.late_ms is not None else None
        latency, missing = pty_floor(setup, packet, protocol, list(spec.servo_ids), state_bytes, args.seconds, late)
        results["kernel_pty_floor"] = report("bare pty echo, SCHED_FIFO 60 (the kernel's floor)", latency, missing,
                                             len(spec.servo_ids), None)
        if late is not None:
            print(f"floor cycles slower than {args.late_ms:g} ms: {len(late.cycles)}")
            for sent_unix, seconds in late.cycles:
                print(f"  sent {sent_unix:.3f}: {seconds * 1e3:.1f} ms")
        with tempfile.TemporaryDirectory(prefix="na_bench_rig_") as tmp:
            for priority in ([] if args.floor_only else args.priorities):
                info = Path(tmp) / f"rig_{priority}.json"
                rig = start_rig(robot, priority, info, Path(tmp) / f"rig_{priority}.log")
                try:
                    rig_info = json.loads(info.read_text())
                    latency, missing = measure(rig_info["follower_port"], setup, packet, protocol,
                                               len(spec.servo_ids), args.seconds)
                finally:
                    rig.terminate()
                    rig.wait(20)
                took = rig_info.get("realtime", {}).get("buses")
                what = f"rig bus processes {'SCHED_FIFO ' + str(priority) if priority else 'normal scheduling'}"
                results[f"priority_{priority}"] = report(what, latency, missing, len(spec.servo_ids), took)
    finally:
        for hog in hogs:
            hog.kill()
    beside = "the floor" if args.floor_only else "the rig"
    print(f"robot {robot}; client {client}; {args.hog} CPU-bound process(es) beside {beside}; {machine_line()}")
    if args.json is not None:
        args.json.write_text(json.dumps({"robot": robot, "hog": args.hog, "machine": machine_line(),
                                         "runs": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
