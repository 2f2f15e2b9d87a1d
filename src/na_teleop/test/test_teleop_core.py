"""TeleopCore with injected time: mapping, clamping, step limit, soft start, stale hold, overload guard."""

from __future__ import annotations

import numpy as np
import pytest

from na_description import load_spec
from na_teleop.teleop_core import TeleopConfig, TeleopConfigError, TeleopCore, TeleopState, smoothstep

SPEC = load_spec()
LOWER, UPPER = SPEC.servo_angle_limits()
N = SPEC.n_motors
GRIPPER = SPEC.joint_names.index("gripper")


def make_core(**overrides) -> TeleopCore:
    """Core with no soft start and a generous step limit unless the test says otherwise."""
    settings = {"soft_start_duration": 0.0, "max_step": np.full(N, 10.0)}
    settings.update(overrides)
    return TeleopCore(TeleopConfig.from_spec(SPEC, **settings))


def started(core: TeleopCore, follower=None, t: float = 0.0) -> TeleopCore:
    core.on_follower(np.zeros(N) if follower is None else follower, np.zeros(N), t)
    return core


def test_identity_mapping_passes_the_leader_pose_through() -> None:
    core = started(make_core())
    leader = np.array([0.3, -0.4, 0.5, -0.2, 0.1])
    np.testing.assert_allclose(core.on_leader(leader, 0.0), leader)
    assert core.state is TeleopState.TRACKING


def test_sign_offset_and_gripper_scale() -> None:
    sign = np.array([-1.0, 1.0, -1.0, 1.0, 0.5])
    offset = np.array([0.1, 0.0, -0.05, 0.2, 0.3])
    core = started(make_core(sign=sign, offset=offset))
    leader = np.array([0.3, -0.4, 0.5, -0.2, -0.4])
    np.testing.assert_allclose(core.on_leader(leader, 0.0), sign * leader + offset)


def test_commands_are_clamped_to_the_follower_limits() -> None:
    core = started(make_core())
    far = UPPER + 1.0
    np.testing.assert_allclose(core.on_leader(far, 0.0), UPPER)
    np.testing.assert_allclose(core.on_leader(LOWER - 1.0, 0.01), LOWER)
    # The gripper limits are the slide limits mapped to servo angles (spec.servo_angle_limits).
    slides = SPEC.gripper.angle_to_slide([LOWER[GRIPPER], UPPER[GRIPPER]])
    assert sorted(slides) == pytest.approx([SPEC.joints[GRIPPER].lower, SPEC.joints[GRIPPER].upper])


def test_max_step_limits_each_cycle() -> None:
    step = np.array([0.05, 0.02, 0.02, 0.02, 0.1])
    core = started(make_core(max_step=step))
    target = np.array([1.0, 1.0, -1.0, 1.0, 0.5])
    first = core.on_leader(target, 0.0)
    np.testing.assert_allclose(first, np.sign(target) * step)       # origin is the follower pose (0)
    second = core.on_leader(target, 0.01)
    np.testing.assert_allclose(second - first, np.sign(target) * step)
    for k in range(200):
        last = core.on_leader(target, 0.02 + 0.01 * k)
    np.testing.assert_allclose(last, np.clip(target, LOWER, UPPER))


def test_soft_start_moves_from_follower_to_leader_smoothly() -> None:
    follower = np.array([0.5, 0.2, -0.3, 0.4, 0.0])
    leader = np.array([-0.5, -0.2, 0.3, -0.4, 0.5])
    core = started(make_core(soft_start_duration=2.0), follower=follower, t=10.0)
    times = np.arange(10.0, 12.5, 0.01)
    commands = np.array([core.on_leader(leader, t) for t in times])
    np.testing.assert_allclose(commands[0], follower)                  # no jump at the start
    k = np.searchsorted(times, 11.0)
    blend = smoothstep((times[k] - 10.0) / 2.0)
    assert blend == pytest.approx(0.5, abs=0.02)
    np.testing.assert_allclose(commands[k], follower + blend * (leader - follower), atol=1e-9)
    np.testing.assert_allclose(commands[-1], leader)
    assert core.state is TeleopState.TRACKING
    # Monotonic blend, with a small first step (zero velocity at the ends).
    progress = (commands - follower)[:, 0] / (leader - follower)[0]
    assert np.all(np.diff(progress) >= -1e-12)
    assert progress[1] < 1e-4


def test_soft_start_waits_for_the_follower_pose() -> None:
    core = make_core()
    assert core.on_leader(np.zeros(N), 0.0) is None
    assert core.state is TeleopState.WAITING
    assert any(e.key == "no_follower" for e in core.drain_events())
    core.on_follower(np.zeros(N), np.zeros(N), 0.01)
    assert core.on_leader(np.zeros(N), 0.02) is not None


def test_stale_leader_holds_and_recovers_with_a_soft_start() -> None:
    core = started(make_core(soft_start_duration=1.0))
    leader = np.full(N, 0.2)
    for k in range(150):
        core.on_leader(leader, 0.01 * k)
    assert core.state is TeleopState.TRACKING
    last_time = 0.01 * 149
    assert core.check_stale(last_time + 0.05) is False
    assert core.check_stale(last_time + 0.15) is True
    assert core.state is TeleopState.STALE
    assert [e.key for e in core.drain_events()].count("stale") == 1
    # The leader moved far meanwhile and the follower drifted: the next sample restarts from the follower's pose.
    core.on_follower(np.full(N, 0.1), np.zeros(N), last_time + 0.2)
    resumed = core.on_leader(np.full(N, 0.9), last_time + 0.3)
    np.testing.assert_allclose(resumed, np.full(N, 0.1))
    assert core.state is TeleopState.SOFT_START


def test_a_short_stale_gap_with_a_leader_close_to_the_held_goal_resumes_tracking_at_once() -> None:
    core = started(make_core(soft_start_duration=1.0, stale_resume_jump=0.3, max_step=np.full(N, 0.05)))
    for k in range(150):
        core.on_leader(np.full(N, 0.2), 0.01 * k)
    assert core.check_stale(1.49 + 0.15) is True
    resumed = core.on_leader(np.full(N, 0.35), 1.49 + 0.2)         # 0.15 rad from the held goal
    assert core.state is TeleopState.TRACKING
    # Tracked at once, still under the per-cycle step limit: one 0.05 rad step from the held 0.2 towards 0.35.
    np.testing.assert_allclose(resumed, np.full(N, 0.25))
    assert any("tracking" in e.message for e in core.drain_events() if e.key == "stale")


def test_a_gap_between_leader_samples_counts_as_stale() -> None:
    core = started(make_core(soft_start_duration=1.0))
    for k in range(102):
        core.on_leader(np.full(N, 0.2), 0.01 * k)
    assert core.state is TeleopState.TRACKING
    core.on_follower(np.zeros(N), np.zeros(N), 1.02)
    command = core.on_leader(np.full(N, 0.8), 1.5)  # ~490 ms gap, no timer call in between; the leader moved far
    assert core.state is TeleopState.SOFT_START
    np.testing.assert_allclose(command, np.zeros(N))


def test_overload_guard_trips_after_the_window_and_names_the_joint() -> None:
    core = started(make_core(overload_current=1.2, overload_window=0.2))
    core.on_leader(np.zeros(N), 0.0)
    high = np.array([0.0, 0.0, 1.5, 0.0, 0.0])
    core.on_follower(np.zeros(N), high, 1.0)
    core.on_follower(np.zeros(N), high, 1.15)
    assert core.state is TeleopState.TRACKING                     # not long enough yet
    core.on_follower(np.zeros(N), -high, 1.21)                     # sign does not matter
    assert core.state is TeleopState.OVERLOAD
    assert core.overload_joint == "joint3"
    errors = [e for e in core.drain_events() if e.level == "error"]
    assert len(errors) == 1 and "joint3" in errors[0].message
    assert core.on_leader(np.full(N, 0.1), 1.22) is None          # holds
    core.set_enabled(True, 2.0)
    core.on_follower(np.zeros(N), np.zeros(N), 2.0)
    assert core.on_leader(np.full(N, 0.1), 2.01) is not None


def test_short_current_spikes_do_not_trip() -> None:
    core = started(make_core(overload_current=1.2, overload_window=0.2))
    for k in range(100):
        amps = np.full(N, 1.5 if k % 10 < 5 else 0.5)             # 50 ms above, 50 ms below
        core.on_follower(np.zeros(N), amps, 0.01 * k)
    assert core.state is not TeleopState.OVERLOAD


def test_disable_stops_commands_until_enabled() -> None:
    core = started(make_core())
    assert core.on_leader(np.zeros(N), 0.0) is not None
    core.set_enabled(False, 0.01)
    assert core.state is TeleopState.DISABLED
    assert core.on_leader(np.zeros(N), 0.02) is None
    assert core.check_stale(1.0) is True and core.state is TeleopState.DISABLED
    core.set_enabled(True, 1.0)
    assert core.on_leader(np.zeros(N), 1.01) is not None


def test_stale_servo_values_keep_their_previous_target() -> None:
    core = started(make_core())
    core.on_leader(np.full(N, 0.1), 0.0)
    stale = [False, True, False, False, False]
    command = core.on_leader(np.full(N, 0.3), 0.01, stale)
    np.testing.assert_allclose(command, [0.3, 0.1, 0.3, 0.3, 0.3])


def test_non_finite_leader_values_are_ignored() -> None:
    core = started(make_core())
    bad = np.zeros(N)
    bad[0] = np.nan
    assert core.on_leader(bad, 0.0) is None
    assert any(e.key == "invalid_leader" for e in core.drain_events())


@pytest.mark.parametrize(("override", "fragment"), [
    ({"sign": np.array([1.0, 2.0, 1.0, 1.0, 1.0])}, "joint2"),
    ({"sign": np.array([1.0, 1.0, 1.0, 1.0, 0.0])}, "gripper"),
    ({"offset": np.zeros(3)}, "offset"),
    ({"max_step": np.array([0.1, 0.1, 0.0, 0.1, 0.1])}, "max_step"),
    ({"soft_start_duration": -1.0}, "soft_start_duration"),
    ({"stale_timeout": 0.0}, "stale_timeout"),
    ({"overload_current": float("nan")}, "overload_current"),
    ({"overload_window": -0.1}, "overload_window"),
    ({"joint_names": ("a", "a", "b", "c", "d")}, "unique"),
])
def test_invalid_parameters_are_rejected_with_the_name(override: dict, fragment: str) -> None:
    with pytest.raises(TeleopConfigError, match=fragment):
        TeleopConfig.from_spec(SPEC, **override)


REASON = "servo 13 (joint3): no valid reply for 0.52 s (error timeout 0.50 s)"


def test_a_follower_trip_stops_commands_and_its_return_soft_starts_from_the_present_pose() -> None:
    core = started(make_core(soft_start_duration=1.0))
    leader = np.full(N, 0.2)
    for k in range(150):
        core.on_leader(leader, 0.01 * k)
    assert core.state is TeleopState.TRACKING
    core.drain_events()
    core.on_follower_trip(REASON)
    assert core.state is TeleopState.TRIPPED
    said = core.drain_events()
    assert [(e.level, e.message) for e in said] == [
        ("error", f"follower tripped: {REASON}; not commanding; call /follower/arm_driver/reboot")]
    assert core.status() == (1, said[0].message)          # WARN (1): teleop holds, the driver is at fault
    # While tripped: no command, however the leader moves; the same status again says nothing new.
    for k in range(100):
        core.on_follower_trip(REASON)
        core.on_follower(np.full(N, 0.2) - 0.001 * k, np.zeros(N), 1.5 + 0.01 * k)    # the limp arm sags
        assert core.on_leader(np.full(N, 0.4), 1.5 + 0.01 * k) is None
        assert core.check_stale(1.5 + 0.01 * k) is False
    assert core.state is TeleopState.TRIPPED and core.drain_events() == []
    # Back (rebooted): nothing is commanded before a follower sample taken after the return ...
    core.on_follower_trip(None)
    assert core.state is TeleopState.WAITING
    assert any("back" in e.message for e in core.drain_events())
    assert core.on_leader(np.full(N, 0.4), 2.6) is None
    # ... which is where the soft start begins, then it blends to the leader over soft_start_duration.
    present = np.array([0.05, 0.1, 0.15, 0.1, 0.0])
    core.on_follower(present, np.zeros(N), 2.61)
    np.testing.assert_allclose(core.on_leader(np.full(N, 0.4), 2.62), present)
    assert core.state is TeleopState.SOFT_START
    for k in range(1, 120):
        last = core.on_leader(np.full(N, 0.4), 2.62 + 0.01 * k)
    np.testing.assert_allclose(last, np.full(N, 0.4))
    assert core.state is TeleopState.TRACKING and core.status()[0] == 0


def test_a_trip_while_disabled_or_overloaded_is_remembered_until_enabled() -> None:
    core = started(make_core())
    core.set_enabled(False, 0.0)
    core.on_follower_trip(REASON)
    assert core.state is TeleopState.DISABLED
    assert "follower tripped" in core.set_enabled(True, 1.0)
    assert core.state is TeleopState.TRIPPED and core.on_leader(np.zeros(N), 1.01) is None
    core.on_follower_trip("")                                         # an empty reason is no trip
    core.on_follower(np.zeros(N), np.zeros(N), 1.1)
    assert core.on_leader(np.zeros(N), 1.11) is not None


def test_the_overload_guard_does_not_fire_while_the_follower_is_tripped() -> None:
    core = started(make_core(overload_current=1.2, overload_window=0.2))
    core.on_leader(np.zeros(N), 0.0)
    core.on_follower_trip(REASON)
    for k in range(50):
        core.on_follower(np.zeros(N), np.full(N, 2.0), 0.01 * k)
    assert core.state is TeleopState.TRIPPED and core.overload_joint is None


# ---------------------------------------------------------------------------- protective stop
def stop_core(**stop) -> TeleopCore:
    from na_common.protective_stop import ProtectiveStopConfig
    settings = {"enabled": True, "threshold": 10.0, "hysteresis": 2.0, "min_duration": 0.03}
    settings.update(stop)
    return started(make_core(protective_stop=ProtectiveStopConfig(**settings)))


def test_protective_stop_holds_the_follower_until_released() -> None:
    core = stop_core()
    leader = np.array([0.3, -0.4, 0.5, -0.2, 0.1])
    t, last_moving = 0.0, None
    for k in range(20):                                 # contact of 15 N from t = 0.05 s
        t = k * 0.01
        core.on_force((0.0, 0.0, 15.0 if t >= 0.05 - 1e-9 else 0.0), t)
        command = core.on_leader(leader + 0.01 * k, t)
        if command is not None:
            last_moving = t
    assert core.state is TeleopState.PROTECTIVE_STOP
    assert last_moving == pytest.approx(0.07)           # the stop latches at 0.08 s (30 ms after the onset)
    level, message = core.status()
    assert level == 2 and "~/release_protective_stop" in message and "15.0 N" in message
    assert any(e.key == "protective_stop" and e.level == "error" for e in core.drain_events())
    # Enable does not release it; the explicit release does, with a soft start from the follower's pose.
    core.set_enabled(True, 0.3)
    assert core.state is TeleopState.PROTECTIVE_STOP and core.on_leader(leader, 0.3) is None
    released, _ = core.release_protective_stop(0.4)
    assert released and core.state is TeleopState.WAITING
    core.on_follower(np.full(N, 0.05), np.zeros(N), 0.41)
    np.testing.assert_allclose(core.on_leader(leader, 0.42), leader)   # soft start 0 s: straight to the leader
    assert core.state is TeleopState.TRACKING


def test_a_protective_stop_holds_the_arm_where_it_is_and_keeps_the_grip() -> None:
    core = stop_core()
    gripper = core.config.gripper_index
    assert gripper == N - 1                              # the OpenManipulator-X's last motor
    goal = np.array([0.3, -0.4, 0.5, -0.2, 0.6])
    assert core.on_leader(goal, 0.0) is not None
    blocked = np.array([0.25, -0.38, 0.41, -0.2, 0.2])  # the arm lags its goal against a surface; gripper on the object
    core.on_follower(blocked, np.zeros(N), 0.005)
    assert core.on_force((0.0, 0.0, 15.0), 0.01) is None           # above the threshold, not yet for 30 ms
    assert core.on_force((0.0, 0.0, 15.0), 0.03) is None
    hold = core.on_force((0.0, 0.0, 15.0), 0.045)                   # latches: one hold command
    assert core.state is TeleopState.PROTECTIVE_STOP
    np.testing.assert_allclose(hold, [0.25, -0.38, 0.41, -0.2, 0.6])
    assert core.on_force((0.0, 0.0, 15.0), 0.06) is None            # said once
    assert core.on_leader(goal, 0.07) is None


def test_protective_stop_off_by_default_and_short_spikes_pass() -> None:
    core = started(make_core())
    core.on_force((0.0, 0.0, 1000.0), 0.0)
    core.on_force((0.0, 0.0, 1000.0), 1.0)
    assert core.on_leader(np.zeros(N), 1.0) is not None
    core = stop_core(min_duration=0.05)
    for k in range(50):                                  # 20 ms spikes every 100 ms
        t = k * 0.01
        core.on_force((0.0, 0.0, 20.0 if k % 10 < 2 else 0.0), t)
        assert core.on_leader(np.zeros(N), t) is not None
    assert core.state is TeleopState.TRACKING


def test_protective_stop_during_a_trip_keeps_both_holds() -> None:
    core = stop_core()
    core.on_leader(np.zeros(N), 0.0)
    core.on_follower_trip("servo 13 (joint3): overload")
    assert core.state is TeleopState.TRIPPED
    for k in range(5):
        core.on_force((0.0, 0.0, 15.0), 0.01 * k)
    assert core.protective_stop.stopped and core.state is TeleopState.TRIPPED
    core.on_follower_trip(None)                          # the follower is back, the stop still holds
    assert core.state is TeleopState.PROTECTIVE_STOP and core.on_leader(np.zeros(N), 0.1) is None
    core.on_follower_trip("again")
    released, _ = core.release_protective_stop(0.2)      # released while tripped: the trip's hold remains
    assert released and core.state is TeleopState.TRIPPED
    core.on_follower_trip(None)
    assert core.state is TeleopState.WAITING
