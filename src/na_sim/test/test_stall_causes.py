"""When the live physics falls behind wall time, the rig says where its thread's time went: a slow step (the
thread ran), a CPU taken by other work (it waited for one) or something it waited on (it slept or was blocked).
The oracle is what the test makes the thread do: spin on the CPU or sleep, for a known time."""

from __future__ import annotations

import threading
import time

import pytest

from na_sim.realtime_runner import RealtimeRunner
from na_sim.rig import Rig
from na_sim.rig_record import PaceStatus, RigRecordReader, TruthLink
from na_sim.thread_clock import ThreadClock

HOLD_S = 0.12          # how long the test's link holds the physics thread once
MARGIN_S = 0.05


def spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_thread_clock_tells_running_from_sleeping() -> None:
    splits = []

    def measured() -> None:
        clock = ThreadClock()
        start = clock.read()
        spin(0.06)
        time.sleep(0.06)
        splits.append(clock.split(start, clock.read()))
        clock.close()

    thread = threading.Thread(target=measured)
    thread.start()
    thread.join(5.0)
    split = splits[0]
    assert split.wall >= 0.12
    assert 0.06 <= split.ran < 0.06 + split.waited + 0.03
    assert split.blocked >= 0.05
    assert "ran" in split.describe() and "waited" in split.describe()


class HoldOnce:
    """A runner link that, on its tenth step, spins or sleeps ``HOLD_S`` before the step."""

    def __init__(self, how: str) -> None:
        self.how, self.pulls = how, 0

    def pull(self) -> None:
        self.pulls += 1
        if self.pulls == 10:
            spin(HOLD_S) if self.how == "spin" else time.sleep(HOLD_S)

    def push(self, time_s: float, steps: int) -> None:
        pass


@pytest.fixture(scope="module")
def rig() -> Rig:
    return Rig(seed=0)


@pytest.mark.parametrize("how", ["spin", "sleep"])
def test_a_stall_records_where_the_physics_threads_time_went(rig, how) -> None:
    link = HoldOnce(how)
    truth = TruthLink(rig)
    runner = RealtimeRunner(rig, stall_margin=MARGIN_S, max_lag=1.0, links=(link, truth))
    truth.runner = runner
    reader = RigRecordReader(truth.path)
    try:
        with runner:
            deadline = time.monotonic() + 10.0
            while not (runner.stalls and runner.lag < MARGIN_S) and time.monotonic() < deadline:
                time.sleep(0.01)
        status = PaceStatus(reader, MARGIN_S).status()
    finally:
        reader.close()
        truth.stop()
    assert runner.error is None
    assert len(runner.stalls) == 1, runner.stalls
    stall = runner.stalls[0]
    split = stall.split
    assert stall.worst >= HOLD_S - 0.02
    assert split.wall >= HOLD_S
    # The thread's share of a CPU in the (at most one) second up to the worst point: it spun HOLD_S of it, or
    # slept HOLD_S of it.
    assert 0.0 < stall.share_span <= 1.0 + 0.05
    if how == "spin":
        assert split.ran >= HOLD_S - 0.01
        assert split.blocked < split.ran
        assert stall.cpu_share >= HOLD_S / stall.share_span - 0.02
    else:
        assert split.blocked >= HOLD_S - 0.01
        assert split.ran < 0.05
        assert stall.cpu_share <= 1.0 - HOLD_S / stall.share_span + 0.02
    # The rig's /diagnostics status says so too.
    assert status["level"] == 2
    assert f"ran {split.ran * 1e3:.0f} ms" in status["message"]
    assert f"slept or was blocked {split.blocked * 1e3:.0f} ms" in status["message"]
