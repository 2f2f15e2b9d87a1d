"""The live-run integrity watcher: when a run may start, and what voids it."""

from __future__ import annotations

import numpy as np
import pytest

from na_bringup.live_integrity import IntegrityWatch, describe

PERIOD = 0.01


def stream(watch: IntegrityWatch, start: float, end: float, arms=("leader", "follower"), stale=()) -> float:
    """Both arms at 100 Hz from ``start`` to ``end``; ``stale``: (arm, servo) pairs left without a reply."""
    for t in np.arange(start, end, PERIOD):
        for arm in arms:
            flags = [(arm, k) in stale for k in range(5)]
            watch.arm_state(arm, float(t), flags)
    return end


def test_ready_only_after_a_steady_window_on_every_arm():
    watch = IntegrityWatch(steady_window_s=1.0)
    stream(watch, 0.0, 0.6, arms=("leader",))
    assert not watch.ready(0.6), "the follower has not been heard yet"
    stream(watch, 0.6, 1.2)
    assert not watch.ready(1.2), "the follower streams for 0.6 s only"
    stream(watch, 1.2, 1.7)
    assert watch.ready(1.7)
    assert not watch.ready(2.5), "nothing heard for 0.8 s: not ready"


def test_a_silent_bus_past_the_error_timeout_voids_the_window_and_delays_readiness():
    watch = IntegrityWatch(gap_limit_s=0.5, steady_window_s=1.0)
    stream(watch, 0.0, 2.0)
    assert watch.ready(2.0)
    window = 2.0
    stream(watch, 2.0, 3.0, arms=("leader",))         # follower silent 1 s
    stream(watch, 3.0, 3.5)
    faults = watch.faults_since(window)
    assert [f.source for f in faults] == ["follower arm"]
    assert "1.0" in faults[0].reason or "0.99" in faults[0].reason
    assert not watch.ready(3.5), "a fault 0.5 s ago: not steady yet"
    stream(watch, 3.5, 4.2)
    assert watch.ready(4.2)
    assert watch.faults_since(3.6) == []


def test_a_gap_the_driver_did_not_miss_a_cycle_in_was_lost_on_the_way_not_on_the_bus():
    watch = IntegrityWatch(gap_limit_s=0.5)
    dropped = {"leader": 3, "follower": 7}
    for t in np.arange(0.0, 1.0, PERIOD):
        for arm in dropped:
            watch.arm_state(arm, float(t), [False] * 5, dropped[arm])
    # 2.6 s without a state at the watcher: the leader's loop ran every cycle (its count stays), the follower's
    # loop missed 260 deadlines.
    dropped["follower"] += 260
    for arm in dropped:
        watch.arm_state(arm, 3.6, [False] * 5, dropped[arm])
    assert [(f.source, f.reason) for f in watch.faults] == [("follower arm", "no bus read for 2.61 s")]
    assert [f.source for f in watch.delivery_gaps] == ["leader arm"]
    assert "2.61 s" in watch.delivery_gaps[0].reason


@pytest.mark.parametrize(("missed", "is_fault"), [(1, False), (40, False), (55, True), (70, True)])
def test_a_gap_is_a_bus_fault_only_when_the_missed_cycles_span_the_limit(missed, is_fault):
    """0.7 s without a state at the watcher; the driver's loop missed ``missed`` deadlines of 10 ms in it: one
    late cycle (or 40, 0.41 s unread) is states lost on the way; 55 or more cycles (0.56 s) left the bus unread."""
    watch = IntegrityWatch(gap_limit_s=0.5)
    for t in np.arange(0.0, 1.0, PERIOD):
        watch.arm_state("follower", float(t), [False] * 5, 2)
    watch.arm_state("follower", 0.99 + 0.7, [False] * 5, 2 + missed)
    assert bool(watch.faults) is is_fault
    assert bool(watch.delivery_gaps) is not is_fault


def test_a_short_silence_within_the_timeout_is_not_a_fault_but_a_long_stale_servo_is():
    watch = IntegrityWatch(gap_limit_s=0.5)
    stream(watch, 0.0, 1.0)
    stream(watch, 1.3, 2.0)                             # 0.3 s gap: inside the error timeout
    assert watch.faults_since(0.0) == []
    stream(watch, 2.0, 2.8, stale={("follower", 2)})
    faults = watch.faults_since(0.0)
    assert len(faults) == 1 and "servo #3" in faults[0].reason


@pytest.mark.parametrize(("level", "voids"), [(0, False), (1, False), (2, True)])
def test_error_statuses_void_and_lower_levels_do_not(level, voids):
    watch = IntegrityWatch()
    stream(watch, 0.0, 1.5)
    watch.diagnostic(1.2, "/follower/arm_driver: servo 12 (joint2)", level, "tripped: no valid reply for 0.75 s")
    faults = watch.faults_since(1.0)
    assert bool(faults) is voids
    if voids:
        assert "tripped" in describe(faults)
        assert watch.faults_since(1.3) == []


def test_estimate_gaps_void_only_when_asked_for():
    relaxed, strict = IntegrityWatch(), IntegrityWatch(estimate_gap_limit_s=0.5)
    for watch in (relaxed, strict):
        for t in (0.0, 0.1, 0.2, 1.0, 1.1):
            watch.estimate(t)
    assert relaxed.faults == []
    assert [str(f) for f in strict.faults] == ["estimator: no estimate for 0.80 s"]


def test_an_estimate_gap_quotes_what_the_estimator_last_said():
    watch = IntegrityWatch(estimate_gap_limit_s=0.5)
    watch.estimate(0.0)
    watch.diagnostic(0.5, "estimator", 1, "120 estimates, 40 inputs refused; last: no_command")    # a WARN
    watch.estimate(2.0)
    assert [str(f) for f in watch.faults] == \
        ["estimator: no estimate for 2.00 s (estimator: 120 estimates, 40 inputs refused; last: no_command)"]


def test_only_errors_that_void_a_live_result_are_faults_unless_named():
    plain, strict = IntegrityWatch(), IntegrityWatch(voiding_statuses=("policy",))
    for watch in (plain, strict):
        watch.diagnostic(1.0, "policy", 2, "stopped: estimator lost")
        watch.diagnostic(1.0, "/ft/ft_driver: Net F/T 127.0.0.1:49152", 2, "no good reading within the stale timeout")
        watch.diagnostic(1.0, "/follower/arm_driver: bus", 2, "port lost")
        watch.diagnostic(1.0, "sim_rig: physics", 2, "physics fell behind wall time by 80 ms")
    assert [f.source for f in plain.faults] == ["/follower/arm_driver: bus", "sim_rig: physics"]
    assert [f.source for f in strict.faults] == ["policy", "/follower/arm_driver: bus", "sim_rig: physics"]
