"""CPU of the simulated collect graph, per process and thread, with each thread's scheduling class.

Starts ``na-sim rig`` (pick-and-place, 200 g, looping) and ``na-launch na_bringup collect.launch.xml sim:=true``
against it, optionally with CPU-bound processes beside them, waits ``--warmup`` s, then reads utime + stime of every
thread of the graph from ``/proc`` at the start and end of a ``--seconds`` window. Prints each process (and its
threads above 1 %), the share that ran under SCHED_FIFO, the total, and how many trip, silent-servo and
physics-behind lines the graph logged meanwhile: real-time work that fills the cores delays the kernel's
normal-priority pty workers, and with them every emulated bus (``src/na_sim/README.md``).

    python src/na_sim/benchmarks/graph_cpu.py                    # 10 s window after 20 s
    python src/na_sim/benchmarks/graph_cpu.py --hog 1 --seconds 30
    python src/na_sim/benchmarks/graph_cpu.py --robot so101 --hog 1 --rig-option=--physics-priority=40
    python src/na_sim/benchmarks/graph_cpu.py --robot so101 --take-cpu 0.6 --seconds 45

``--take-cpu F`` measures the graph's headroom: one process per CPU, pinned to it, runs under SCHED_FIFO 99 for F of
every millisecond, so every part of the graph, real-time or not, has 1 - F of each core, as on a slower machine. The
physics-behind lines of the window are printed; each says where the physics thread's time went.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from na_common.dds_transport import use_udp_transport
from na_common.machine import machine_line

SCHED_FIFO = 1
CPU_TAKER = """
import os, sys, time
cpu, busy = int(sys.argv[1]), float(sys.argv[2]) * 1e-3
os.sched_setaffinity(0, {cpu})
os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(99))
due = time.monotonic()
while True:
    end = time.monotonic() + busy
    while time.monotonic() < end:
        pass
    due = max(due + 1e-3, time.monotonic())
    time.sleep(max(0.0, due - time.monotonic()))
"""
LOG_FAULTS = {"trip lines": r"tripped", "silent-servo lines": r"no valid reply", "physics-behind lines": r"fell behind"}


def thread_times(pids: set[int]) -> dict[tuple[int, int], tuple[str, float, int, int]]:
    """(pid, tid) -> (thread name, CPU seconds, scheduling policy, priority as /proc shows it)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1: stat.rindex(")")]
            fields = stat[stat.rindex(")") + 2:].split()
            out[(pid, int(tid))] = (name, (int(fields[11]) + int(fields[12])) / tick, int(fields[38]), int(fields[15]))
    return out


def descendants(root: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            children.setdefault(int(stat[stat.rindex(")") + 2:].split()[1]), []).append(int(entry))
    found, todo = set(), [root]
    while todo:
        pid = todo.pop()
        found.add(pid)
        todo.extend(children.get(pid, []))
    return found


def command_of(pid: int) -> str:
    try:
        words = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = " ".join(w.decode(errors="replace") for w in words if w)
    if "spawn_main" in text:
        return "a part of the rig in its own process (bus, F/T or truth publisher; see its threads)"
    for known in ("na-sim rig", "arm_driver", "ft_driver", "recorder", "teleop", "na-launch"):   # recorder: na_teleop
        if known in text:
            role = re.search(r"__ns:=/(\w+)", text)
            return known + (f" ({role.group(1)})" if role and known == "arm_driver" else "")
    return text[:60]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measuring window (default 10)")
    parser.add_argument("--warmup", type=float, default=20.0, help="s after the rig is ready before measuring")
    parser.add_argument("--hog", type=int, default=0, help="CPU-bound processes beside the graph (default 0)")
    parser.add_argument("--take-cpu", type=float, default=0.0, metavar="F",
                        help="share of every millisecond a SCHED_FIFO 99 process takes on each CPU (0 <= F < 1; "
                             "default 0): the graph's headroom, as on a slower machine; needs CAP_SYS_NICE")
    parser.add_argument("--ft-port", type=int, default=49391, help="UDP port of the rig's Net F/T emulator")
    parser.add_argument("--robot", default="omx_x", help="omx_x (default) or so101")
    parser.add_argument("--rig-option", action="append", default=[],
                        help="one more option for na-sim rig, e.g. --rig-option=--physics-priority=40 (repeatable)")
    args = parser.parse_args()
    if not 0.0 <= args.take_cpu < 1.0:
        parser.error(f"--take-cpu must be at least 0 and below 1, got {args.take_cpu}")
    print(f"machine: {machine_line()}", flush=True)
    env = {**os.environ, "ROS_DOMAIN_ID": os.environ.get("ROS_DOMAIN_ID", "91"),
           "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST"}
    use_udp_transport(env)
    with tempfile.TemporaryDirectory(prefix="na_graph_cpu_") as tmp:
        work = Path(tmp)
        hogs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.hog)]
        if args.take_cpu > 0:
            hogs += [subprocess.Popen([sys.executable, "-c", CPU_TAKER, str(cpu), str(args.take_cpu)])
                     for cpu in sorted(os.sched_getaffinity(0))]
            time.sleep(0.5)
            if any(hog.poll() is not None for hog in hogs):
                print("--take-cpu: a CPU taker did not start (SCHED_FIFO 99 needs CAP_SYS_NICE)", file=sys.stderr)
                for hog in hogs:
                    hog.kill()
                return 1
        rig_log, graph_log = (work / "rig.log").open("w"), (work / "graph.log").open("w")
        rig = subprocess.Popen(["na-sim", "rig", "--robot", args.robot, *args.rig_option,
                                "--link-dir", str(work / "sim"), "--info-out", str(work / "rig.json"),
                                "--ft-port", str(args.ft_port), "--task", "pick_place", "--payload-grams", "200",
                                "--loop-task", "--ros"], env=env, stdout=rig_log, stderr=subprocess.STDOUT,
                               start_new_session=True)
        graph = None
        try:
            deadline = time.monotonic() + 120.0
            while not (work / "rig.json").exists():
                if rig.poll() is not None or time.monotonic() > deadline:
                    print("the rig did not come up; its log:\n" + (work / "rig.log").read_text(), file=sys.stderr)
                    return 1
                time.sleep(0.5)
            graph = subprocess.Popen(["na-launch", "na_bringup", "collect.launch.xml", "sim:=true",
                                      f"robot:={args.robot}",
                                      f"sim_dir:={work / 'sim'}", f"output_dir:={work / 'episodes'}",
                                      f"ft_port:={args.ft_port}", "--run"], env=env, stdout=graph_log,
                                     stderr=subprocess.STDOUT, start_new_session=True)
            time.sleep(args.warmup)
            pids = descendants(rig.pid) | descendants(graph.pid)
            marks = {name: len(re.findall(p, (work / "graph.log").read_text() + (work / "rig.log").read_text()))
                     for name, p in LOG_FAULTS.items()}
            stalls_before = len(rig_stalls((work / "rig.log").read_text()))
            before = thread_times(pids)
            time.sleep(args.seconds)
            after = thread_times(pids)
            commands = {pid: command_of(pid) for pid in pids}
            rig_log_text = (work / "rig.log").read_text()
            logs = (work / "graph.log").read_text() + rig_log_text
        finally:
            for process in (graph, rig):
                if process is not None and process.poll() is None:
                    os.killpg(process.pid, signal.SIGINT)
            for process in (graph, rig):
                if process is not None:
                    try:
                        process.wait(20)
                    except subprocess.TimeoutExpired:
                        os.killpg(process.pid, signal.SIGKILL)
            for hog in hogs:
                hog.kill()
    per_process: dict[int, list[tuple[float, str, int, int]]] = {}
    for key, (name, cpu, policy, priority) in after.items():
        if key in before:
            share = 100.0 * (cpu - before[key][1]) / args.seconds
            per_process.setdefault(key[0], []).append((share, name, policy, priority))
    total = fifo = 0.0
    taken = f", {args.take_cpu:.0%} of each CPU taken" if args.take_cpu else ""
    print(f"CPU over {args.seconds:.0f} s ({args.hog} CPU-bound process(es) beside{taken}; % of one core):")
    for pid, threads in sorted(per_process.items(), key=lambda item: -sum(t[0] for t in item[1])):
        share = sum(t[0] for t in threads)
        total += share
        fifo += sum(t[0] for t in threads if t[2] == SCHED_FIFO)
        if share >= 1.0:
            print(f"  {share:6.1f} %  {commands.get(pid, '?')}")
            for thread_share, name, policy, priority in sorted(threads, reverse=True):
                if thread_share >= 1.0:
                    kind = f"FIFO {-priority - 1}" if policy == SCHED_FIFO else f"normal, nice {priority - 20}"
                    print(f"           {thread_share:5.1f} %  {name:<16} {kind}")
    print(f"  total {total:.0f} %, of which SCHED_FIFO {fifo:.0f} %")
    for name, pattern in LOG_FAULTS.items():
        print(f"  {name} in the window: {len(re.findall(pattern, logs)) - marks[name]}")
    for line in rig_stalls(rig_log_text)[stalls_before:][:10]:
        print(f"    {line}")
    return 0


def rig_stalls(rig_log: str) -> list[str]:
    """The rig's own physics-behind lines (each says where the physics thread's time went)."""
    return [line for line in rig_log.splitlines() if line.startswith("na-sim rig: physics fell behind")]


if __name__ == "__main__":
    sys.exit(main())
