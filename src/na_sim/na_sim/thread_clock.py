"""Where a thread's wall time went: on a CPU, waiting for one, or neither (ROS-free).

Linux keeps per thread the time it ran and the time it was runnable but waited on a run queue
(``/proc/thread-self/schedstat``: on-CPU ns, run-queue wait ns, time slices; the kernel's
Documentation/scheduler/sched-stats.rst). The rest of a stretch of wall time the thread slept or was
blocked (a timed wait, a lock, the GIL). When the live physics falls behind wall time, this says which
of the three it was: a slow step (ran), a CPU taken by other work (waited), or something it waited on.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from typing import NamedTuple


class ThreadTimes(NamedTuple):
    """One reading: wall clock (monotonic), on-CPU and run-queue wait, all in seconds (wait NaN where the
    kernel does not tell)."""

    wall: float
    cpu: float
    waited: float


class TimeSplit(NamedTuple):
    """How a stretch of wall time was spent (s); ``blocked`` is what is left: asleep or waiting on something."""

    wall: float
    ran: float
    waited: float

    @property
    def blocked(self) -> float:
        return max(0.0, self.wall - self.ran - (0.0 if math.isnan(self.waited) else self.waited))

    def describe(self, who: str = "the thread") -> str:
        ms = 1e3
        waited = "an unknown time" if math.isnan(self.waited) else f"{self.waited * ms:.0f} ms"
        return (f"in the {self.wall * ms:.0f} ms before, {who} ran {self.ran * ms:.0f} ms, waited "
                f"{waited} for a CPU and slept or was blocked {self.blocked * ms:.0f} ms")


class ThreadClock:
    """Readings of the calling thread's times; create it on the thread it measures."""

    def __init__(self) -> None:
        self._fd: int | None = None
        with contextlib.suppress(OSError):
            self._fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)

    def read(self) -> ThreadTimes:
        wall = time.monotonic()
        if self._fd is not None:
            with contextlib.suppress(OSError, ValueError, IndexError):
                fields = os.pread(self._fd, 128, 0).split()
                return ThreadTimes(wall, int(fields[0]) * 1e-9, int(fields[1]) * 1e-9)
        return ThreadTimes(wall, time.thread_time(), math.nan)

    def close(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    @staticmethod
    def split(start: ThreadTimes, end: ThreadTimes) -> TimeSplit:
        return TimeSplit(end.wall - start.wall, end.cpu - start.cpu, end.waited - start.waited)
