"""SO-101 arm driver benchmark: the Feetech bus (real scservo_sdk over a pty) against the na_sim STS3215 emulator.

Six STS3215 servos (IDs 1-6) on a 1 Mbps bus; the emulator runs in its own process (as the simulated rig
runs it) and sleeps the wire time of every byte (Return Delay 0, as LeRobot configures the servos). Prints
the machine, then:

  1. bus cycle time of a follower (Sync Write of 6 goals + the Sync Read of the present block, 15 bytes per
     servo from Present Position to Present Current), back to back, beside its Protocol 0 wire-time floor;
  2. a 100 Hz loop over ``--duration`` s (the driver's rate): period error p50/p99/max and the share of cycles
     on time (started within 10 % of the period of their slot, done before the next), stale share;
  3. the highest rate among ``--rates`` with >= 99 % of cycles on time.

    python src/na_driver/benchmarks/bench_sts_driver.py            # 60 s at 100 Hz, 10 s per probed rate
    python src/na_driver/benchmarks/bench_sts_driver.py --quick    # a few seconds each
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_driver
from bench_driver import machine, realtime_thread, run_loop

from na_description import load_spec, sts3215
from na_driver.arm_config import build_config
from na_driver.arm_core import ArmDriverCore

ROBOT = "so101"
SPEC = load_spec(ROBOT)
N = SPEC.n_motors
LOOP_PRIORITY = 50            # SCHED_FIFO of the timed thread, as the node's loop thread (0 with --no-rt)
ON_TIME_TARGET = 0.99

# Protocol 0 bytes (Feetech): packet = 0xFF 0xFF, ID, LENGTH, INSTRUCTION/ERROR, parameters, CHECKSUM.
SYNC_WRITE_GOALS = 6 + 2 + N * (1 + sts3215.REGISTERS["goal_position"].size)   # start, length, per servo ID + data
SYNC_READ_REQUEST = 6 + 2 + N                                                   # start, length, the IDs
STATUS_REPLY = 6 + sts3215.STATE_BLOCK_LENGTH                                   # one per servo


def wire_floor_ms(baud: int) -> float:
    """Time the bytes of one follower cycle need on the wire (10 bits per byte), nothing else."""
    return (SYNC_WRITE_GOALS + SYNC_READ_REQUEST + N * STATUS_REPLY) * 10 / baud * 1e3


def _serve(connection, baud: int) -> None:
    """Child process: the STS emulator with the spec's servos until the parent says stop."""
    from na_sim.sts_emulator import StsBusEmulator
    from na_sim.sts_registers import StsServoRegisters

    emulator = StsBusEmulator([StsServoRegisters(sid) for sid in SPEC.servo_ids], baud_rate=baud,
                              wire_time=True).start()
    connection.send(emulator.port_path)
    connection.recv()
    emulator.stop()


class Follower:
    """The emulator process and a started SO-101 follower core on its port."""

    def __init__(self, baud: int) -> None:
        parent, child = multiprocessing.Pipe()
        self.process = multiprocessing.get_context("spawn").Process(target=_serve, args=(child, baud), daemon=True)
        self.process.start()
        if not parent.poll(30.0):
            raise RuntimeError("the STS emulator process did not start within 30 s")
        self.connection = parent
        port = parent.recv()
        self.core = ArmDriverCore(build_config({"port": port, "role": "follower", "robot_spec": ROBOT,
                                                "baud_rate": baud}), log=lambda level, message: None)
        self.core.start()
        self.core.set_command(np.nan_to_num(self.core.cycle().position))   # goals every cycle, as teleoperated

    def close(self) -> None:
        self.core.shutdown()
        self.connection.send("stop")
        self.process.join(5.0)
        if self.process.is_alive():
            self.process.kill()


def bench_cycle_time(cycles: int, baud: int, priority: int) -> None:
    arm = Follower(baud)
    try:
        with realtime_thread(priority):
            times = []
            for _ in range(cycles):
                began = time.perf_counter()
                arm.core.cycle(deadline=time.monotonic() + 1.0)
                times.append(time.perf_counter() - began)
    finally:
        arm.close()
    ms = np.array(times) * 1e3
    floor = wire_floor_ms(baud)
    print(f"1. bus cycle time (Sync Write of {N} goals + Sync Read of {sts3215.STATE_BLOCK_LENGTH} bytes x {N}), "
          f"{cycles} back to back: p50 {np.percentile(ms, 50):.2f} ms  p99 {np.percentile(ms, 99):.2f} ms  "
          f"wire floor {floor:.2f} ms  (p50 - floor {np.percentile(ms, 50) - floor:.2f} ms)", flush=True)


def bench_rate(rate: float, seconds: float, baud: int, label: str) -> dict[str, float]:
    arm = Follower(baud)
    try:
        samples, loop = run_loop(arm.core, rate, seconds)
    finally:
        arm.close()
    run = loop.run.summary()
    stale = sum(sum(s.stale) for s in samples) / max(N * len(samples), 1)
    scheduling = f"SCHED_FIFO {loop.priority}" if loop.realtime else "normal scheduling"
    print(f"{label}{rate:.0f} Hz for {seconds:.0f} s ({run['slots']} slots, {scheduling}): "
          f"on time {100 * run['on_time_share']:.2f} %, dropped {loop.dropped_cycles}; "
          f"period error p50 {run['period_error_p50_ms']:.3f} ms, p99 {run['period_error_p99_ms']:.3f} ms, "
          f"max {run['period_error_max_ms']:.2f} ms; bus step p50 {run['step_p50_ms']:.2f} ms "
          f"p99 {run['step_p99_ms']:.2f} ms; stale {100 * stale:.1f} %", flush=True)
    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=60.0, help="s of the 100 Hz run (default 60)")
    parser.add_argument("--probe", type=float, default=10.0, help="s per rate when searching the maximum (default 10)")
    parser.add_argument("--rates", type=float, nargs="+", default=[150, 200, 250, 300],
                        help="loop rates (Hz) tried for the highest rate with >= 99 %% of cycles on time")
    parser.add_argument("--cycles", type=int, default=2000, help="cycles timed back to back")
    parser.add_argument("--baud", type=int, default=SPEC.baud_rate, help=f"bus rate (default {SPEC.baud_rate})")
    parser.add_argument("--quick", action="store_true", help="short runs: 300 cycles, 5 s at 100 Hz, 2 s probes")
    parser.add_argument("--no-rt", action="store_true", help="normal scheduling for the timed thread")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.probe, args.cycles = 5.0, 2.0, 300
    priority = 0 if args.no_rt else LOOP_PRIORITY
    bench_driver.PRIORITY = priority          # the loop runner's thread priority
    print(machine(), flush=True)
    bench_cycle_time(args.cycles, args.baud, priority)
    bench_rate(100.0, args.duration, args.baud, "2. loop at ")
    print(f"3. highest rate with >= {100 * ON_TIME_TARGET:.0f} % of cycles on time:", flush=True)
    best = None
    for rate in args.rates:
        if bench_rate(rate, args.probe, args.baud, "   ")["on_time_share"] >= ON_TIME_TARGET:
            best = rate
    print(f"   highest: {f'{best:.0f} Hz' if best else f'none of {args.rates}'}", flush=True)
    print(machine().replace("machine:", "machine at the end:"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
