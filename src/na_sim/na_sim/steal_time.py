"""Steal time: how long the hypervisor kept this virtual machine's CPUs from running (ROS-free, Linux).

A real-time thread cannot keep pace while its virtual CPU is not running at all; no priority inside the
guest helps then. When the live rig's physics falls behind wall time, the rig says how much steal time
each CPU had around the stall, so that a host that paused the VM is told apart from work inside it
(``steal`` column of ``/proc/stat``, in USER_HZ ticks; see proc(5)). Elsewhere the figures read as unknown.
"""

from __future__ import annotations

import os
import time
from collections import deque
from pathlib import Path

PROC_STAT = Path("/proc/stat")
STEAL_FIELD = 8                      # cpuN user nice system idle iowait irq softirq steal ...


def read_steal(path: Path = PROC_STAT) -> tuple[float, ...] | None:
    """Steal time in seconds of each CPU since boot, or None where the kernel does not report it."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return None
    tick = float(os.sysconf("SC_CLK_TCK"))
    per_cpu = []
    for line in lines:
        fields = line.split()
        if fields and fields[0].startswith("cpu") and fields[0] != "cpu" and len(fields) > STEAL_FIELD:
            per_cpu.append(int(fields[STEAL_FIELD]) / tick)
    return tuple(per_cpu) if per_cpu else None


class StealHistory:
    """Samples of per-CPU steal time, kept for ``keep_s`` seconds, to ask what a past interval had."""

    def __init__(self, keep_s: float = 30.0, read=read_steal) -> None:
        self.keep_s = float(keep_s)
        self._read = read
        self._samples: deque[tuple[float, tuple[float, ...]]] = deque()

    def sample(self, now: float | None = None) -> None:
        steal = self._read()
        if steal is None:
            return
        now = time.monotonic() if now is None else now
        self._samples.append((now, steal))
        while self._samples and now - self._samples[0][0] > self.keep_s:
            self._samples.popleft()

    def worst_cpu_steal(self, start: float, end: float) -> float | None:
        """The most steal time one CPU had between the last sample at or before ``start`` and the first at or
        after ``end`` (s); None without samples around the interval."""
        before = [s for t, s in self._samples if t <= start]
        after = [s for t, s in self._samples if t >= end]
        if not before or not after or len(before[-1]) != len(after[0]):
            return None
        return max(b - a for a, b in zip(before[-1], after[0], strict=True))


def describe_steal(seconds: float | None) -> str:
    """The clause a stall message carries about steal time."""
    if seconds is None:
        return "steal time unknown"
    return f"host steal time up to {seconds * 1e3:.0f} ms on one CPU around it"
