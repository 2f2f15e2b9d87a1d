"""Realtime Tick freshness check: a servo clock simulated here (offset, millisecond ticks, wrap at 32768)."""

from __future__ import annotations

import math

import pytest

from na_driver.reply_clock import IMPLAUSIBLE, LATE, ServoClock

WRAP_MS = 32768                     # e-manual: Realtime Tick counts 0 .. 32767 ms


class SimulatedServo:
    """A servo clock running ``rate`` times host speed, ``offset_ms`` behind the host; tick = floor(ms) mod 32768."""

    def __init__(self, offset_ms: float, rate: float = 1.0) -> None:
        self.offset_ms, self.rate = offset_ms, rate

    def tick(self, host_s: float) -> int:
        return math.floor(host_s * 1000.0 * self.rate - self.offset_ms) % WRAP_MS


def exchange(clock: ServoClock, servo: SimulatedServo, sent: float, sampled_after: float = 0.0003,
             transit: float = 0.0004) -> str | None:
    """A fresh request/reply: sampled ``sampled_after`` s after the request, received ``transit`` s later."""
    sample = sent + sampled_after
    return clock.judge(servo.tick(sample), sent, sample + transit)


def test_fresh_replies_are_accepted_across_the_tick_wrap() -> None:
    clock, servo = ServoClock(), SimulatedServo(offset_ms=1234.5)
    start = 1000.0 + 32.0                       # crosses a wrap of the 32.768 s tick within the run
    for k in range(6000):                        # 60 s at 100 Hz
        assert exchange(clock, servo, start + k * 0.01, sampled_after=0.0001 * (k % 7)) is None, k


def test_a_reply_sampled_before_the_request_is_late() -> None:
    clock, servo = ServoClock(), SimulatedServo(offset_ms=77.0)
    for k in range(50):
        exchange(clock, servo, 10.0 + k * 0.01)
    sent = 10.5
    # answered a request of 10 ms ago (the previous cycle), arriving now
    assert clock.judge(servo.tick(sent - 0.0097), sent, sent + 0.0005) == LATE
    # ... or of 3 ms ago (a retry's predecessor)
    assert clock.judge(servo.tick(sent - 0.003), sent, sent + 0.0005) == LATE
    # a fresh one after those is still accepted
    assert exchange(clock, servo, sent + 0.001) is None


def test_a_reply_older_than_an_accepted_one_is_late() -> None:
    clock, servo = ServoClock(), SimulatedServo(offset_ms=5.0)
    for k in range(20):
        exchange(clock, servo, 2.0 + k * 0.01)
    sent = 2.3
    assert exchange(clock, servo, sent) is None
    # sampled 2 ms before the reply just accepted: cannot answer anything newer
    assert clock.judge(servo.tick(sent - 0.0017), sent + 0.0005, sent + 0.002) == LATE


def test_a_tick_from_the_future_is_implausible_and_teaches_nothing() -> None:
    clock, servo = ServoClock(), SimulatedServo(offset_ms=300.0)
    for k in range(20):
        exchange(clock, servo, 5.0 + k * 0.01)
    sent = 5.3
    assert clock.judge(servo.tick(sent + 5.0), sent, sent + 0.001) == IMPLAUSIBLE    # a corrupted tick
    assert exchange(clock, servo, sent + 0.01) is None                               # the bound is intact


@pytest.mark.parametrize("first_delay", [0.012, 0.02, 0.25])
def test_a_first_reply_read_late_does_not_lock_the_servo_out(first_delay: float) -> None:
    """The first reply sets the bound; read ``first_delay`` s after the servo served it (the host busy at start-up),
    it sets a loose one, and every fresh reply after it looks as if it came from the future. Two such replies in a
    row that agree mean the bound, not the ticks, was wrong."""
    clock, servo = ServoClock(), SimulatedServo(offset_ms=4321.0)
    sample = 7.0
    assert clock.judge(servo.tick(sample), sample - 0.0003, sample + first_delay) is None
    verdicts = [exchange(clock, servo, 7.01 + k * 0.01) for k in range(300)]
    assert verdicts[0] == IMPLAUSIBLE
    assert all(v is None for v in verdicts[2:]), verdicts[:10]
    # and the tightened bound still tells a late reply from a fresh one
    sent = 10.02
    assert clock.judge(servo.tick(sent - 0.0097), sent, sent + 0.0005) == LATE


def test_two_corrupt_ticks_that_disagree_teach_nothing() -> None:
    clock, servo = ServoClock(), SimulatedServo(offset_ms=300.0)
    for k in range(20):
        exchange(clock, servo, 5.0 + k * 0.01)
    sent = 5.3
    assert clock.judge(servo.tick(sent + 5.0), sent, sent + 0.001) == IMPLAUSIBLE
    assert clock.judge(servo.tick(sent + 9.0), sent + 0.01, sent + 0.011) == IMPLAUSIBLE
    assert clock.judge(servo.tick(sent + 0.017), sent + 0.02, sent + 0.021) == LATE     # the old bound still holds
    assert exchange(clock, servo, sent + 0.03) is None


@pytest.mark.parametrize("rate", [0.9992, 1.0, 1.004])     # servo clock 0.08 % slow, exact, 0.4 % fast
def test_servo_clock_drift_within_the_allowance_never_rejects_a_fresh_reply(rate: float) -> None:
    clock, servo = ServoClock(), SimulatedServo(offset_ms=10.0, rate=rate)
    for k in range(3000):
        assert exchange(clock, servo, 3.0 + k * 0.01) is None, k


def test_reset_forgets_the_clock_after_a_reboot() -> None:
    clock = ServoClock()
    before, after = SimulatedServo(offset_ms=0.0), SimulatedServo(offset_ms=20_000.0)  # the tick restarted
    for k in range(20):
        exchange(clock, before, 1.0 + k * 0.01)
    assert exchange(clock, after, 1.3) is not None          # without a reset the new clock looks wrong
    clock.reset()
    assert all(exchange(clock, after, 1.4 + k * 0.01) is None for k in range(20))
