"""Arm driver benchmark against the na_sim servo emulator (real dynamixel-sdk over a pty).

Prints, for five XM430 servos at a 1 Mbps-equivalent bus (the emulator sleeps the wire time of
every byte at 1 Mbps, return delay 0; it runs in its own process, as the simulated rig does, so
that it does not share the driver's interpreter lock):
  * bus cycle time (one Sync Write of goals + one Sync Read of the 23-byte state block), p50/p99;
  * the achieved loop rate at 100 Hz over ``--duration`` seconds (share of scheduled cycles run);
  * the maximum stable loop rate (>= 98 % of cycles, <= 1 % dropped) among ``--rates``;
  * a fault campaign (1 % corrupted bytes, 2 % dropped replies) over ``--campaign`` seconds:
    achieved rate, error counters next to what the emulator injected, stale share, and the number of
    published values that differ from the emulator's register (must be 0).

    python src/na_driver/benchmarks/bench_driver.py                 # 30 s + 60 s, as issue 4 asks
    python src/na_driver/benchmarks/bench_driver.py --quick         # a few seconds each
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time

import numpy as np

from na_description import load_spec, xm430
from na_driver.arm_config import build_config
from na_driver.arm_core import ArmDriverCore
from na_driver.loop_timing import DeadlineLoop
from na_sim.dxl_emulator import DxlBusEmulator
from na_sim.faults import DxlFaults
from na_sim.servo_registers import ServoRegisters

BAUD = 1_000_000


def make_servos() -> list[ServoRegisters]:
    servos = []
    for k, sid in enumerate(load_spec().servo_ids):
        regs = ServoRegisters(sid)
        regs.set("return_delay_time", 0)
        regs.set("present_position", 1800 + 100 * k)
        regs.set("goal_position", 1800 + 100 * k)
        regs.set("present_input_voltage", 120)
        regs.set("present_temperature", 35)
        servos.append(regs)
    return servos


def serve_emulator(connection, faults: DxlFaults | None) -> None:
    """Child process: one emulated arm; sends its pty path, then on request its registers and fault counts."""
    servos = make_servos()
    emulator = DxlBusEmulator(servos, baud_rate=BAUD, wire_time=True, faults=faults).start()
    connection.send(emulator.port_path)
    connection.recv()                       # "stop"
    connection.send(([regs.get("present_position") for regs in servos], emulator.fault_counters))
    emulator.stop()


class EmulatorProcess:
    def __init__(self, faults: DxlFaults | None = None) -> None:
        context = multiprocessing.get_context("spawn")
        self._connection, child = context.Pipe()
        self._process = context.Process(target=serve_emulator, args=(child, faults), daemon=True)
        self._process.start()
        if not self._connection.poll(30.0):
            raise RuntimeError("the emulator process did not start")
        self.port_path: str = self._connection.recv()

    def stop(self) -> tuple[list[int], dict[str, int]]:
        """Stop the emulator; returns the true present positions and the injected fault counts."""
        self._connection.send("stop")
        truth, counters = self._connection.recv()
        self._process.join(5.0)
        return truth, counters


def start(faults: DxlFaults | None = None) -> tuple[EmulatorProcess, ArmDriverCore]:
    emulator = EmulatorProcess(faults)
    core = ArmDriverCore(build_config({"port": emulator.port_path, "role": "follower", "baud_rate": BAUD}),
                         log=lambda level, message: None)
    core.start()
    pose = core.cycle().position
    core.set_command(np.nan_to_num(pose))
    return emulator, core


def run_loop(core: ArmDriverCore, rate: float, seconds: float) -> tuple[list, DeadlineLoop, float]:
    samples: list = []
    loop = DeadlineLoop(1.0 / rate, lambda: samples.append(core.cycle()))
    began = time.monotonic()
    loop.start()
    time.sleep(seconds)          # the loop runs on its own thread for the measured span
    loop.stop()
    return samples, loop, time.monotonic() - began


def bench_cycle_time(cycles: int) -> None:
    emulator, core = start()
    try:
        times = []
        for _ in range(cycles):
            began = time.perf_counter()
            core.cycle(deadline=time.monotonic() + 1.0)
            times.append(time.perf_counter() - began)
        times_ms = np.array(times) * 1e3
        wire_ms = (5 * (11 + xm430.STATE_BLOCK_LENGTH) + 14 + 5 + 14 + 5 * 5) * 10 / BAUD * 1e3
        print(f"bus cycle time (sync write + sync read, 5 servos, 1 Mbps wire time ~{wire_ms:.2f} ms): "
              f"p50 {np.percentile(times_ms, 50):.2f} ms, p99 {np.percentile(times_ms, 99):.2f} ms, "
              f"max {times_ms.max():.2f} ms over {cycles} cycles", flush=True)
    finally:
        core.shutdown()
        emulator.stop()


def bench_rate(rate: float, seconds: float, label: str = "") -> tuple[float, int]:
    emulator, core = start()
    try:
        samples, loop, elapsed = run_loop(core, rate, seconds)
    finally:
        core.shutdown()
        emulator.stop()
    share = len(samples) / (elapsed * rate)
    print(f"{label}loop at {rate:.0f} Hz for {elapsed:.1f} s: {len(samples)} cycles = {len(samples) / elapsed:.1f} Hz "
          f"({100 * share:.1f} % of scheduled), dropped {loop.dropped_cycles}, period p50 "
          f"{loop.periods.percentile(50) * 1e3:.2f} ms p99 {loop.periods.percentile(99) * 1e3:.2f} ms, "
          f"stale replies {sum(sum(s.stale) for s in samples)}", flush=True)
    return share, loop.dropped_cycles


def bench_campaign(seconds: float) -> None:
    faults = DxlFaults(corrupt_byte_rate=0.01, drop_status_rate=0.02, seed=1)
    emulator, core = start(faults)
    try:
        samples, loop, elapsed = run_loop(core, 100.0, seconds)
    finally:
        core.shutdown()
        truth, injected = emulator.stop()
    fresh = [(k, p) for s in samples for k, p in enumerate(s.raw_present_position) if p is not None]
    wrong = sum(p != truth[k] for k, p in fresh)
    total = len(samples) * len(truth)
    c = core.bus.counters
    print(f"fault campaign (1 % corrupted bytes, 2 % dropped replies) at 100 Hz for {elapsed:.1f} s: "
          f"{len(samples) / elapsed:.1f} Hz, dropped cycles {loop.dropped_cycles}", flush=True)
    print(f"  injected: {injected.get('status_corrupted', 0)} corrupted replies ({injected.get('bytes_corrupted', 0)} "
          f"bytes), {injected.get('status_dropped', 0)} dropped replies", flush=True)
    print(f"  driver:   crc/framing errors {c.crc_errors}, timed-out transactions {c.timeouts}, partial sync reads "
          f"{c.partial_replies}, retries {c.retries}, transactions {c.transactions}", flush=True)
    print(f"  values:   {len(fresh)}/{total} fresh ({100 * len(fresh) / max(total, 1):.1f} %), stale "
          f"{total - len(fresh)}, published values differing from the register: {wrong}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--duration", type=float, default=30.0, help="s of the 100 Hz rate run (default 30)")
    parser.add_argument("--campaign", type=float, default=60.0, help="s of the fault campaign (default 60)")
    parser.add_argument("--probe", type=float, default=5.0, help="s per rate when searching the maximum (default 5)")
    parser.add_argument("--rates", type=float, nargs="+", default=[200, 300, 400, 500, 700, 1000],
                        help="loop rates (Hz) tried for the maximum stable rate")
    parser.add_argument("--cycles", type=int, default=2000, help="cycles timed back to back (default 2000)")
    parser.add_argument("--quick", action="store_true", help="short runs: 3 s rate, 5 s campaign, 1 s probes")
    args = parser.parse_args(argv)
    if args.quick:
        args.duration, args.campaign, args.probe, args.cycles = 3.0, 5.0, 1.0, 300
    bench_cycle_time(args.cycles)
    bench_rate(100.0, args.duration)
    best = 100.0
    for rate in args.rates:
        share, dropped = bench_rate(rate, args.probe, label="  probe: ")
        if share < 0.98 or dropped > 0.01 * rate * args.probe:
            break
        best = rate
    print(f"maximum stable loop rate (>= 98 % of cycles, <= 1 % dropped): {best:.0f} Hz", flush=True)
    bench_campaign(args.campaign)
    return 0


if __name__ == "__main__":
    sys.exit(main())
