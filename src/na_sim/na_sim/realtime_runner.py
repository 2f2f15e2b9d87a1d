"""Steps the live rig against the monotonic clock in a thread of its own, and keeps how far it fell behind.

Split from :mod:`na_sim.rig` (the physics) because pacing is its own job: the live rig, the driver tests and the
benchmarks run a :class:`na_sim.rig.Rig` through it; offline generation steps the rig directly.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, NamedTuple

from na_sim.rt_budget import CpuShare
from na_sim.thread_clock import ThreadClock, ThreadTimes, TimeSplit

if TYPE_CHECKING:
    from na_sim.rig import Rig

CPU_SHARE_WINDOW_S = 1.0    # the kernel's default real-time period (na_sim.rt_budget)


class Stall(NamedTuple):
    """One episode of the physics lagging wall time by more than the stall margin."""

    began: float                # monotonic time the first late step was due
    worst: float                # s, the largest lag in it
    split: TimeSplit            # the thread's time from its last step begun on time to the worst point
    cpu_share: float            # share of one CPU the thread had over ``share_span`` s up to the worst point
    share_span: float           # s, at most CPU_SHARE_WINDOW_S (less early in a run)


class RealtimeRunner:
    """Steps a rig against the monotonic clock in a background thread (live rig, no drift).

    Step deadlines are multiples of ``period`` from the start time, so simulated time tracks
    wall time however long each step takes; after a stall of more than ``max_lag`` s the runner
    skips ahead (counted in ``skipped``) instead of racing to catch up. Registers and ground truth
    come from the same step either way; how far the physics fell behind wall time is kept in
    ``lag`` (now), ``worst_lag`` (since start) and ``stalls`` (one :class:`Stall` per episode of lagging more
    than ``stall_margin``: when it began, its worst lag, how the thread's time went from its last step on time
    to the worst point, and how busy the thread kept a CPU in the second before), so that the owner can say so.
    ``times`` is the thread's latest reading of its own times (:class:`na_sim.thread_clock.ThreadTimes`).

    ``links`` exchange register bytes with the bus processes around every step (``pull()`` before,
    ``push(time, steps)`` after; :class:`na_sim.shared_tables.PhysicsSide`).

    ``pause_s`` > 0: a sleep that long after the exchange and between MuJoCo steps. A real-time physics thread
    otherwise holds its CPU for the whole period's work (about 4 ms on a slow 2-core machine), and the
    kernel worker that carries a pty's bytes (normal priority), queued on that CPU, waits for it: every
    emulated servo's reply is late by as much.
    """

    def __init__(self, rig: Rig, period: float | None = None, max_lag: float = 0.1,
                 stall_margin: float = 0.05, links: tuple = (), pause_s: float = 0.0) -> None:
        self.rig = rig
        self.pause_s = float(pause_s)
        self.period = float(period or rig.config.timestep_s)
        self.max_lag = float(max_lag)
        self.stall_margin = float(stall_margin)
        self.links = tuple(links)
        self.steps = 0
        self.skipped = 0
        self.lag = 0.0
        self.worst_lag = 0.0
        self.stalls: list[Stall] = []
        self.times: ThreadTimes | None = None
        self._on_time: ThreadTimes | None = None     # the thread's times at its last step begun on time
        self._share = CpuShare(CPU_SHARE_WINDOW_S, max_readings=int(2 * CPU_SHARE_WINDOW_S / self.period) + 8)
        self._stalling = False
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> RealtimeRunner:
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError("runner already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="na_sim_rig", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> RealtimeRunner:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _note_lag(self, now: float, lag: float, times: ThreadTimes) -> None:
        """``times``: the thread's own times now; the split of a stall runs from its last step begun on time."""
        self.lag = lag
        self.worst_lag = max(self.worst_lag, lag)
        self.times = times
        self._share.add(times)
        if lag <= self.period or self._on_time is None:
            self._on_time = times
        if lag <= self.stall_margin:
            self._stalling = False
        elif self._stalling:
            if lag > self.stalls[-1].worst:
                self.stalls[-1] = Stall(self.stalls[-1].began, lag, ThreadClock.split(self._on_time, times),
                                        *self._share.share())
        else:
            self._stalling = True
            self.stalls.append(Stall(now - lag, lag, ThreadClock.split(self._on_time, times), *self._share.share()))

    def _run(self) -> None:
        period = self.period
        deadline = time.monotonic() + period
        rig = self.rig
        clock = ThreadClock()
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                if now < deadline:
                    self._stop.wait(deadline - now)
                    continue
                self._note_lag(now, now - deadline, clock.read())
                due = int((now - deadline) / period) + 1
                if (now - deadline) > self.max_lag:
                    self.skipped += due - 1
                    deadline = now
                    due = 1
                with rig.lock:
                    for link in self.links:
                        link.pull()
                    if self.pause_s > 0:
                        time.sleep(self.pause_s)
                    rig.step(due * period, pause_s=self.pause_s)
                    self.steps += due
                    for link in self.links:
                        link.push(rig.time, self.steps)
                deadline += due * period
        except BaseException as exc:  # surfaced to the owner through .error
            self.error = exc
        finally:
            clock.close()
