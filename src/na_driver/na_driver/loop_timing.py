"""Deadline-scheduled periodic loop, rolling and whole-run timing statistics (ROS-free).

The loop keeps an absolute schedule on the monotonic clock: cycle k starts at
``t0 + k * period``. A cycle that overruns does not shift the schedule (no drift as with
``sleep(period)``); schedule slots that passed entirely while a cycle was still running are
skipped and counted as dropped cycles.

Besides the rolling window (diagnostics of the last 1000 cycles), :class:`RunStats` keeps the
whole run in fixed-size histograms: the period error |period - nominal|, how late each cycle
started after its slot, and the share of slots whose cycle was on time (started within
``on_time_tolerance`` of its slot and finished before the next one; a dropped slot is not on time).

``priority`` > 0 runs the loop thread under SCHED_FIFO at that priority, as ros2_control does with
its update thread: on a loaded machine the wake-up of a normal thread waits for the scheduler
(milliseconds), a real-time one does not. It needs CAP_SYS_NICE or an rtprio limit; without it
the loop runs with normal scheduling and ``on_warning`` says so once.
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable

import numpy as np


class RollingStats:
    """Percentiles over the last ``size`` samples (thread-safe)."""

    def __init__(self, size: int = 1000) -> None:
        self._values: deque[float] = deque(maxlen=size)
        self._lock = threading.Lock()

    def add(self, value: float) -> None:
        with self._lock:
            self._values.append(value)

    def percentile(self, q: float) -> float:
        """The q-th percentile (0-100), NaN before the first sample."""
        with self._lock:
            if not self._values:
                return math.nan
            return float(np.percentile(np.fromiter(self._values, float), q))

    def __len__(self) -> int:
        return len(self._values)


class RunHistogram:
    """Percentiles of a whole run in O(1) memory: 10 us bins up to ``limit`` s, larger values kept as a count
    and a maximum. A percentile is the upper edge of its bin (never below the true value, at most 10 us above)."""

    def __init__(self, bin_width: float = 1e-5, limit: float = 0.1) -> None:
        self.bin_width = bin_width
        self._counts = np.zeros(round(limit / bin_width), dtype=np.int64)
        self._over = 0
        self.count = 0
        self.max = -math.inf
        self._lock = threading.Lock()

    def add(self, value: float) -> None:
        index = int(max(value, 0.0) / self.bin_width)
        with self._lock:
            self.count += 1
            self.max = max(self.max, value)
            if index < self._counts.size:
                self._counts[index] += 1
            else:
                self._over += 1

    def percentile(self, q: float) -> float:
        """The q-th percentile (0-100), NaN before the first value."""
        with self._lock:
            if not self.count:
                return math.nan
            rank = max(1, math.ceil(q / 100.0 * self.count))
            cumulative = np.cumsum(self._counts)
            index = int(np.searchsorted(cumulative, rank))
            if index >= self._counts.size:
                return float(self.max)
            return min((index + 1) * self.bin_width, float(self.max))

    def share_at_most(self, value: float) -> float:
        """Fraction of values <= ``value`` (at bin resolution)."""
        with self._lock:
            if not self.count:
                return math.nan
            return float(self._counts[: int(value / self.bin_width) + 1].sum()) / self.count


class RunStats:
    """Whole-run timing of a periodic loop (see the module docstring)."""

    def __init__(self, period: float, on_time_tolerance: float) -> None:
        self.period = period
        self.on_time_tolerance = on_time_tolerance
        self.period_error = RunHistogram()      # s, |start-to-start - period|
        self.start_lateness = RunHistogram()    # s, start - scheduled slot
        self.step_time = RunHistogram()         # s inside step()
        self.on_time = 0
        self.slots = 0                          # cycles run + slots dropped

    @property
    def on_time_share(self) -> float:
        return self.on_time / self.slots if self.slots else math.nan

    def summary(self) -> dict[str, float]:
        ms = 1e3
        return {"cycles": self.step_time.count, "slots": self.slots, "on_time_share": self.on_time_share,
                "period_error_p50_ms": self.period_error.percentile(50) * ms,
                "period_error_p99_ms": self.period_error.percentile(99) * ms,
                "period_error_max_ms": self.period_error.max * ms,
                "start_late_p99_ms": self.start_lateness.percentile(99) * ms,
                "step_p50_ms": self.step_time.percentile(50) * ms, "step_p99_ms": self.step_time.percentile(99) * ms}


class DeadlineLoop:
    """Runs ``step()`` every ``period`` seconds on its own thread until :meth:`stop`."""

    def __init__(self, period: float, step: Callable[[], None], name: str = "deadline-loop",
                 on_error: Callable[[BaseException], None] | None = None, stats_size: int = 1000,
                 on_time_tolerance: float | None = None, priority: int = 0,
                 on_warning: Callable[[str], None] | None = None) -> None:
        """``on_time_tolerance``: how late after its slot a cycle may start and count as on time (default 10 %
        of the period). ``priority``: SCHED_FIFO priority of the loop thread, 0 = normal scheduling."""
        if not 0 <= priority <= 99:
            raise ValueError(f"priority must be 0 (normal scheduling) or a SCHED_FIFO priority 1..99, got {priority}")
        self.priority = priority
        self.realtime = False                 # True once the loop thread runs under SCHED_FIFO
        self._on_warning = on_warning
        if not period > 0:
            raise ValueError(f"loop period must be positive, got {period}")
        self.period = float(period)
        self._step = step
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.cycles = 0
        self.dropped_cycles = 0
        self.periods = RollingStats(stats_size)     # s between consecutive cycle starts
        self.step_times = RollingStats(stats_size)  # s spent inside step()
        self.run = RunStats(self.period, 0.1 * self.period if on_time_tolerance is None else on_time_tolerance)
        self.error: BaseException | None = None

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread.is_alive()

    def _set_priority(self) -> None:
        if not self.priority:
            return
        try:
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(self.priority))   # this thread only
            self.realtime = True
        except (AttributeError, OSError) as exc:
            if self._on_warning is not None:
                self._on_warning(f"{self._thread.name}: no real-time priority {self.priority} ({exc}); the loop's "
                                 f"timing depends on the machine's load (grant CAP_SYS_NICE or an rtprio limit)")

    def _run(self) -> None:
        self._set_priority()
        next_start = time.monotonic()
        last_start: float | None = None
        run = self.run
        while not self._stop.is_set():
            started = time.monotonic()
            if last_start is not None:
                self.periods.add(started - last_start)
                run.period_error.add(abs(started - last_start - self.period))
            last_start = started
            late = started - next_start
            run.start_lateness.add(late)
            try:
                self._step()
            except BaseException as exc:
                self.error = exc
                if self._on_error is not None:
                    self._on_error(exc)
                return
            finished = time.monotonic()
            self.step_times.add(finished - started)
            run.step_time.add(finished - started)
            self.cycles += 1
            next_start += self.period
            run.slots += 1
            if late <= run.on_time_tolerance and finished <= next_start:
                run.on_time += 1
            if finished > next_start:
                # Whole slots that went by while this cycle ran are dropped; the next cycle
                # starts at once in the current slot, keeping the original phase.
                missed = math.floor((finished - next_start) / self.period)
                if missed:
                    self.dropped_cycles += missed
                    run.slots += missed
                    next_start += missed * self.period
            remaining = next_start - time.monotonic()
            if remaining > 0:
                self._stop.wait(remaining)
