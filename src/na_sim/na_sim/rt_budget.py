"""The kernel's real-time budget: how much of each CPU SCHED_FIFO threads may keep (ROS-free, Linux).

Linux leaves normal threads a share of every CPU however busy the real-time ones keep it: by default 50 ms
of each second (``/proc/sys/kernel/sched_rt_runtime_us`` 950000 of ``sched_rt_period_us`` 1000000, the kernel's
Documentation/scheduler/sched-rt-group.rst; since Linux 6.12 the fair deadline server gives normal threads the
same share). Real-time threads that have kept a CPU busy for the budget are held off it for the rest of the
period while a normal thread waits there: the live physics, SCHED_FIFO, then falls about 50 ms behind at once.
So when it falls behind, the rig says how busy its thread kept a CPU in the last period, beside the budget.
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from na_sim.thread_clock import ThreadClock, ThreadTimes

RT_RUNTIME = Path("/proc/sys/kernel/sched_rt_runtime_us")
RT_PERIOD = Path("/proc/sys/kernel/sched_rt_period_us")


@dataclass(frozen=True)
class RtBudget:
    runtime_s: float               # what real-time threads may run on a CPU in each period
    period_s: float

    @property
    def share(self) -> float:
        return self.runtime_s / self.period_s


def read_rt_budget(runtime_path: Path = RT_RUNTIME, period_path: Path = RT_PERIOD) -> RtBudget | None:
    """The budget, or None where it is unlimited (runtime -1) or the kernel does not tell."""
    with contextlib.suppress(OSError, ValueError):
        runtime_us = int(runtime_path.read_text().split()[0])
        period_us = int(period_path.read_text().split()[0])
        if runtime_us >= 0 and period_us > 0:
            return RtBudget(runtime_us * 1e-6, period_us * 1e-6)
    return None


def describe_cpu_share(share: float, span_s: float, budget: RtBudget | None, who: str = "the physics thread") -> str:
    """``share`` of one CPU over the last ``span_s`` s, beside the budget where there is one."""
    if share != share:                        # NaN: fewer than two readings
        return f"{who}'s share of a CPU is not known yet"
    text = f"{who} was on a CPU {share * 100:.0f} % of the last {span_s * 1e3:.0f} ms"
    if budget is None:
        return text
    return (f"{text} (real-time threads may keep a CPU {budget.runtime_s * 1e3:.0f} ms of every "
            f"{budget.period_s * 1e3:.0f} ms: sched_rt_runtime_us)")


class CpuShare:
    """How much of one CPU a thread had over the last ``window_s``, from its readings (``add`` each, in order)."""

    def __init__(self, window_s: float, max_readings: int) -> None:
        self.window_s = float(window_s)
        self._readings: deque[ThreadTimes] = deque(maxlen=max(2, int(max_readings)))

    def add(self, times: ThreadTimes) -> None:
        self._readings.append(times)

    def share(self) -> tuple[float, float]:
        """(on-CPU time over wall time, that wall time in s) from the newest reading at least ``window_s`` before
        the latest one (the oldest kept, when none is that old) to the latest; (NaN, 0) before two readings."""
        if len(self._readings) < 2:
            return float("nan"), 0.0
        latest = self._readings[-1]
        start = self._readings[0]
        for times in self._readings:
            if latest.wall - times.wall < self.window_s:
                break
            start = times
        span = ThreadClock.split(start, latest)
        return (span.ran / span.wall if span.wall > 0 else float("nan")), span.wall
