"""Round-trip time of the servo bus emulator under the live rig's load, measured with the real dynamixel-sdk.

Load (docs/REFERENCES.md, Authors' setup): a 100 Hz loop of one Sync Read of the state block (addresses 124-146, 23
bytes) plus one Sync Write of Goal Position for five servos (IDs 11-15) at 1 Mbps. The emulator runs in
its own process (as in the live rig) unless ``--same-process``. Prints percentiles of the Sync Read
round trip, the Sync Write send time and the whole cycle, plus missed 100 Hz deadlines.

    python src/na_sim/benchmarks/bench_dxl_emulator.py --cycles 500
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import time

import numpy as np
from dynamixel_sdk import COMM_SUCCESS, GroupSyncRead, GroupSyncWrite, PacketHandler, PortHandler

from na_description import xm430
from na_sim.dxl_emulator import DxlBusEmulator
from na_sim.servo_registers import ServoRegisters

IDS = (11, 12, 13, 14, 15)
BAUD = 1_000_000


def _make_bus(return_delay: int, wire_time: bool) -> DxlBusEmulator:
    servos = [ServoRegisters(servo_id) for servo_id in IDS]
    for k, servo in enumerate(servos):
        servo.set("return_delay_time", return_delay)
        servo.set("baud_rate", 3)
        servo.set("present_position", 2048 + k)
    return DxlBusEmulator(servos, baud_rate=BAUD, wire_time=wire_time)


def _serve(connection, return_delay: int, wire_time: bool) -> None:
    """Child process: run one emulator until the parent says stop."""
    sys.setswitchinterval(5e-4)
    bus = _make_bus(return_delay, wire_time).start()
    connection.send(bus.port_path)
    connection.recv()
    bus.stop()


def _percentiles(samples_s: list[float]) -> str:
    ms = np.asarray(samples_s) * 1e3
    return (f"median {np.median(ms):6.3f} ms  p90 {np.percentile(ms, 90):6.3f}  p99 {np.percentile(ms, 99):6.3f}  "
            f"max {ms.max():6.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cycles", type=int, default=500, help="control cycles to time (default 500 = 5 s)")
    parser.add_argument("--rate", type=float, default=100.0, help="loop rate in Hz (default 100)")
    parser.add_argument("--return-delay", type=int, default=0,
                        help="Return Delay Time register, 2 us units (default 0, as the driver sets it)")
    parser.add_argument("--no-wire-time", action="store_true", help="do not emulate the 1 Mbps byte time")
    parser.add_argument("--fast", action="store_true", help="use Fast Sync Read (0x8A) instead of Sync Read")
    parser.add_argument("--same-process", action="store_true", help="run the emulator in this process")
    args = parser.parse_args(argv)
    if args.cycles < 1 or args.rate <= 0:
        parser.error("--cycles must be >= 1 and --rate > 0")

    child = None
    if args.same_process:
        bus = _make_bus(args.return_delay, not args.no_wire_time).start()
        port_path = bus.port_path
    else:
        parent_end, child_end = mp.Pipe()
        child = mp.get_context("spawn").Process(target=_serve,
                                                args=(child_end, args.return_delay, not args.no_wire_time))
        child.start()
        port_path = parent_end.recv()
    try:
        port = PortHandler(port_path)
        if not (port.openPort() and port.setBaudRate(BAUD)):
            print(f"cannot open {port_path}", file=sys.stderr)
            return 1
        handler = PacketHandler(2.0)
        reader = GroupSyncRead(port, handler, xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)
        writer = GroupSyncWrite(port, handler, xm430.REGISTERS["goal_position"].address, 4)
        for servo_id in IDS:
            reader.addParam(servo_id)
            writer.addParam(servo_id, (2048).to_bytes(4, "little"))
        read_s, write_s, cycle_s, failures, missed = [], [], [], 0, 0
        period = 1.0 / args.rate
        next_t = time.perf_counter()
        print(f"timing {args.cycles} cycles at {args.rate:g} Hz on {port_path} "
              f"({'same process' if args.same_process else 'emulator in its own process'}, "
              f"wire time {'off' if args.no_wire_time else 'on'}, return delay {args.return_delay * 2} us)")
        for cycle in range(args.cycles):
            start = time.perf_counter()
            result = reader.fastSyncRead() if args.fast else reader.txRxPacket()
            after_read = time.perf_counter()
            failures += result != COMM_SUCCESS
            writer.changeParam(IDS[0], (2048 + cycle % 100).to_bytes(4, "little"))
            writer.txPacket()
            end = time.perf_counter()
            read_s.append(after_read - start)
            write_s.append(end - after_read)
            cycle_s.append(end - start)
            next_t += period
            if end > next_t:
                missed += 1
                next_t = end
            time.sleep(max(0.0, next_t - time.perf_counter()))
            if (cycle + 1) % max(1, args.cycles // 5) == 0:
                print(f"  {cycle + 1}/{args.cycles} cycles", flush=True)
        port.closePort()
    finally:
        if child is not None:
            parent_end.send("stop")
            child.join(timeout=5)
        else:
            bus.stop()

    print(f"sync read round trip : {_percentiles(read_s)}")
    print(f"sync write send      : {_percentiles(write_s)}")
    print(f"whole bus cycle      : {_percentiles(cycle_s)}")
    print(f"failed reads {failures}/{args.cycles}, missed {args.rate:g} Hz deadlines {missed}/{args.cycles}")
    return 0 if failures == 0 else 2


if __name__ == "__main__":
    raise SystemExit(main())
