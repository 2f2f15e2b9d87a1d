"""Deadline-scheduled periodic loop and rolling timing statistics (ROS-free).

The loop keeps an absolute schedule on the monotonic clock: cycle k starts at
``t0 + k * period``. A cycle that overruns does not shift the schedule (no drift as with
``sleep(period)``); schedule slots that passed entirely while a cycle was still running are
skipped and counted as dropped cycles.
"""

from __future__ import annotations

import math
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


class DeadlineLoop:
    """Runs ``step()`` every ``period`` seconds on its own thread until :meth:`stop`."""

    def __init__(self, period: float, step: Callable[[], None], name: str = "deadline-loop",
                 on_error: Callable[[BaseException], None] | None = None, stats_size: int = 1000) -> None:
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

    def _run(self) -> None:
        next_start = time.monotonic()
        last_start: float | None = None
        while not self._stop.is_set():
            started = time.monotonic()
            if last_start is not None:
                self.periods.add(started - last_start)
            last_start = started
            try:
                self._step()
            except BaseException as exc:
                self.error = exc
                if self._on_error is not None:
                    self._on_error(exc)
                return
            finished = time.monotonic()
            self.step_times.add(finished - started)
            self.cycles += 1
            next_start += self.period
            if finished > next_start:
                # Whole slots that went by while this cycle ran are dropped; the next cycle
                # starts at once in the current slot, keeping the original phase.
                missed = math.floor((finished - next_start) / self.period)
                if missed:
                    self.dropped_cycles += missed
                    next_start += missed * self.period
            remaining = next_start - time.monotonic()
            if remaining > 0:
                self._stop.wait(remaining)
