"""ProtectiveStopMonitor with injected time: onset, minimum duration, hysteresis, per-axis mode, release, re-arm."""

from __future__ import annotations

import numpy as np
import pytest

from na_common.diagnostics import ERROR, OK, WARN
from na_common.protective_stop import ProtectiveStopConfig, ProtectiveStopConfigError, ProtectiveStopMonitor


def monitor(**overrides) -> ProtectiveStopMonitor:
    settings = {"enabled": True, "threshold": 10.0, "hysteresis": 2.0, "min_duration": 0.03}
    settings.update(overrides)
    return ProtectiveStopMonitor(ProtectiveStopConfig(**settings))


def feed(m: ProtectiveStopMonitor, force, t0: float, t1: float, dt: float = 0.01):
    """Constant force samples at times t0, t0 + dt, ... < t1; returns the time of the first stop event or None."""
    n = round((t1 - t0) / dt)
    for k in range(n):
        t = t0 + k * dt
        event = m.update(force, t)
        if event is not None and event.level == ERROR:
            return t
    return None


def test_disabled_monitor_never_stops() -> None:
    m = monitor(enabled=False)
    assert feed(m, (100.0, 0.0, 0.0), 0.0, 1.0) is None
    assert m.status() == (OK, "disabled")


def test_stop_latches_after_the_minimum_duration_above_the_threshold() -> None:
    m = monitor()
    assert feed(m, (0.0, 0.0, 5.0), 0.0, 0.5) is None
    # 6, 8, 0 N: |F| = 10 N, exactly the threshold, from t = 0.5 s; 30 ms later (the 4th sample) it latches.
    stop = feed(m, (6.0, 8.0, 0.0), 0.5, 1.0)
    assert stop == pytest.approx(0.53)
    assert m.stopped and m.status()[0] == ERROR
    assert "10.0 N" in m.reason and "30 ms" in m.reason


def test_a_spike_shorter_than_the_minimum_duration_does_not_stop() -> None:
    m = monitor(min_duration=0.05)
    for k in range(20):                                   # 40 ms above, 60 ms well below, repeatedly
        assert feed(m, (0.0, 0.0, 15.0), k * 0.1, k * 0.1 + 0.04) is None
        assert feed(m, (0.0, 0.0, 1.0), k * 0.1 + 0.04, k * 0.1 + 0.1) is None
    assert not m.stopped


def test_hysteresis_keeps_the_onset_through_a_dip_inside_the_band() -> None:
    m = monitor(min_duration=0.05)
    assert feed(m, (0.0, 0.0, 11.0), 0.0, 0.03) is None   # above from t = 0
    assert feed(m, (0.0, 0.0, 9.0), 0.03, 0.05) is None    # 9 N: below threshold, above 10 - 2 = 8 N: onset kept
    stop = feed(m, (0.0, 0.0, 11.0), 0.05, 0.2)
    assert stop == pytest.approx(0.05)                     # 50 ms after the first onset at t = 0


def test_a_dip_below_the_clear_level_restarts_the_onset() -> None:
    m = monitor(min_duration=0.05)
    assert feed(m, (0.0, 0.0, 11.0), 0.0, 0.03) is None
    assert feed(m, (0.0, 0.0, 7.0), 0.03, 0.05) is None    # 7 N < 8 N: reset
    stop = feed(m, (0.0, 0.0, 11.0), 0.05, 0.3)
    assert stop == pytest.approx(0.10)


def test_axis_mode_watches_each_axis_against_its_own_threshold() -> None:
    m = monitor(mode="axis", axis_thresholds=(0.0, 5.0, 12.0), hysteresis=1.0)
    assert feed(m, (50.0, 4.0, -11.0), 0.0, 0.2) is None   # x not watched; y and z under theirs
    stop = feed(m, (0.0, 0.0, -12.5), 0.2, 0.5)
    assert stop == pytest.approx(0.23)
    assert "Fz -12.5 N" in m.reason


def test_stop_holds_until_released_and_rearms_below_the_clear_level() -> None:
    m = monitor()
    assert m.release(0.0)[0] is False                       # nothing to release
    feed(m, (0.0, 0.0, 20.0), 0.0, 0.1)
    assert m.stopped
    assert feed(m, (0.0, 0.0, 0.0), 0.1, 0.5) is None and m.stopped    # falling force does not release it
    m.update((0.0, 0.0, 20.0), 0.5)
    released, message = m.release(0.51)
    assert released and not m.stopped and not m.armed and "re-arms" in message
    assert m.status()[0] == WARN
    assert feed(m, (0.0, 0.0, 20.0), 0.51, 1.0) is None     # still in the contact that stopped it: no new stop
    assert feed(m, (0.0, 0.0, 9.0), 1.0, 1.1) is None and not m.armed   # inside the band: not yet
    m.update((0.0, 0.0, 7.0), 1.1)
    assert m.armed and m.status() == (OK, "armed")
    assert feed(m, (0.0, 0.0, 20.0), 1.2, 1.5) == pytest.approx(1.23)
    assert m.stops == 2


def test_stale_and_invalid_samples() -> None:
    m = monitor(max_age=0.1)
    assert m.check_age(0.0)
    m.update((float("nan"), 0.0, 0.0), 0.0)
    assert m.check_age(0.0)                                  # a non-finite sample is not used
    m.update((0.0, 0.0, 1.0), 0.0)
    assert not m.check_age(0.05) and m.check_age(0.11)
    assert m.status(0.05) == (OK, "armed")
    level, message = m.status(0.11)
    assert level == WARN and "no force estimate" in message


@pytest.mark.parametrize("overrides, parameter", [
    ({"threshold": 0.0}, "protective_stop_threshold"),
    ({"hysteresis": 10.0}, "protective_stop_hysteresis"),
    ({"min_duration": -0.1}, "protective_stop_min_duration"),
    ({"mode": "norm"}, "protective_stop_mode"),
    ({"mode": "axis"}, "protective_stop_axis_thresholds"),
    ({"axis_thresholds": (1.0, 2.0)}, "protective_stop_axis_thresholds"),
    ({"max_age": 5.0}, "protective_stop_max_age"),
])
def test_out_of_range_parameters_are_named(overrides, parameter) -> None:
    with pytest.raises(ProtectiveStopConfigError, match=parameter):
        monitor(**overrides)


def test_hold_pose_keeps_the_arm_where_it_is_and_the_gripper_goal_within_limits() -> None:
    from na_common.protective_stop import hold_pose

    lower, upper = np.array([-1.0, -1.0, -1.0]), np.array([1.0, 1.0, 0.5])
    measured, goal = np.array([0.2, -1.3, 0.1]), np.array([0.4, -0.9, 0.8])
    np.testing.assert_allclose(hold_pose(measured, goal, 2, lower, upper), [0.2, -1.0, 0.5])
    np.testing.assert_allclose(hold_pose(measured, goal, None, lower, upper), [0.2, -1.0, 0.1])
    np.testing.assert_allclose(hold_pose(measured, None, 2, lower, upper), [0.2, -1.0, 0.1])
