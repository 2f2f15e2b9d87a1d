"""PolicyCore: 60 Hz decimation, the move to the start pose, clamping, stale input, estimator wait and loss."""

from __future__ import annotations

import numpy as np
import pytest

from na_policy.core import PolicyCore, SafetyConfig

NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]
LOWER = np.array([-3.0, -2.0, -1.5, -1.7, -1.0])
UPPER = np.array([3.0, 1.5, 1.4, 2.0, 1.0])
POSE = np.array([0.0, 0.15, -0.46, 1.66, -0.26])     # the hand-made policies' start pose


def make_core(policy, **safety) -> PolicyCore:
    instant = {"start_duration": 0.0, "start_settle": 0.0, "estimator_warmup": 0.0}
    config = SafetyConfig(lower=LOWER, upper=UPPER, **(instant | safety))
    return PolicyCore(policy, config)


def feed(core: PolicyCore, seconds: float, rate: float = 100.0, t0: float = 0.0, pose=POSE, estimator: bool = True):
    """States at ``rate`` Hz (fresh: clock = stamp), estimator output with each; returns the decisions."""
    out = []
    for k in range(round(seconds * rate)):
        t = t0 + k / rate
        if estimator:
            core.on_force((0.0, 0.0, 3.0), now=t)
            core.on_contact(0.9, now=t)
        decision = core.on_state(t, NAMES, pose, now=t, clock=t)
        if decision is not None:
            out.append((t, decision))
    return out


def test_100hz_states_give_60_commands_a_second(make_policy) -> None:
    decisions = feed(make_core(make_policy()), 3.0)
    assert 178 <= len(decisions) <= 182
    gaps = np.diff([t for t, _ in decisions])
    assert gaps.max() <= 0.02 + 1e-9 and gaps.min() >= 0.01 - 1e-9


def test_acts_with_fresh_inputs_and_clamps_the_step(make_policy) -> None:
    core = make_core(make_policy(delta=0.01), max_step=0.03)
    decisions = feed(core, 0.5)
    acted = [d for _, d in decisions if d.acted]
    assert acted and np.allclose(acted[-1].command, POSE + 0.01)
    core = make_core(make_policy(delta=0.5), max_step=0.03, max_lead=1.0)
    first, second = [d.command for _, d in feed(core, 0.04)][:2]
    assert np.allclose(second - first, 0.03)                       # at most max_step per command


def test_lead_over_the_measured_position_and_limits_are_clamped(make_policy) -> None:
    core = make_core(make_policy(delta=0.5), max_step=10.0, max_lead=0.12)
    command = feed(core, 0.05)[-1][1].command
    np.testing.assert_allclose(command, POSE + 0.12)
    edge = UPPER - 0.05
    core = make_core(make_policy(delta=0.5), max_step=10.0, max_lead=1.0)
    command = feed(core, 0.05, pose=edge)[-1][1].command
    np.testing.assert_allclose(command, UPPER)


def test_first_moves_to_the_start_pose(make_policy) -> None:
    core = make_core(make_policy(delta=0.2), start_duration=1.0, max_lead=1.0, max_step=1.0)
    away = POSE + np.array([0.0, 0.3, 0.0, 0.0, 0.0])
    decisions = feed(core, 1.2, pose=away)
    moving = [d for t, d in decisions if t < 1.0]
    assert all(not d.acted for d in moving)
    assert np.allclose(moving[0].command, away, atol=1e-3)         # starts where the arm is
    after = [d for t, d in decisions if t >= 1.0]
    assert after[0].command == pytest.approx(POSE) or after[0].acted


def test_stale_state_is_not_acted_on(make_policy) -> None:
    core = make_core(make_policy(delta=0.01))
    held = feed(core, 0.2)[-1][1].command
    core.on_force((0, 0, 3), now=1.0)
    core.on_contact(0.9, now=1.0)
    decision = core.on_state(0.5, NAMES, POSE + 0.3, now=1.0, clock=1.0)     # 0.5 s old
    assert decision is not None and not decision.acted
    np.testing.assert_allclose(decision.command, held)
    assert "old" in core.message


def test_waits_for_the_estimator_then_stops_when_it_is_lost(make_policy) -> None:
    core = make_core(make_policy(delta=0.01), estimator_timeout=0.2)
    waiting = feed(core, 0.3, estimator=False)
    assert waiting and not any(d.acted for _, d in waiting)
    assert "waiting for the estimator" in core.message
    assert any(d.acted for _, d in feed(core, 0.3, t0=0.3))
    last = core.last_command.copy()
    lost = feed(core, 0.5, t0=0.6, estimator=False)                # the estimator went silent at 0.6 s
    late = [d for t, d in lost if t > 0.6 + 0.2 + 0.02]
    assert late and not any(d.acted for d in late)
    assert all(np.allclose(d.command, late[0].command) for d in late)   # holds one pose
    assert np.max(np.abs(late[0].command - last)) <= 0.03 + 1e-9
    assert "estimator lost" in core.message and core.level == 2
    assert not any(d.acted for _, d in feed(core, 0.2, t0=1.2))    # latched although the estimator is back
    core.reset()
    assert any(d.acted for _, d in feed(core, 0.3, t0=1.5))


def test_force_is_tared_when_the_policy_starts(make_policy) -> None:
    policy = make_policy(delta=0.0)
    seen = []
    original = policy.act_chunk
    policy.act_chunk = lambda obs: seen.append(obs.copy()) or original(obs)
    core = make_core(policy)
    for t, fz in ((0.0, -2.0), (0.02, -2.0), (0.04, 6.0)):  # start pose, first action (the object's weight), 8 N
        core.on_force((0.0, 0.0, fz), now=t)
        core.on_contact(0.9, now=t)
        core.on_state(t, NAMES, POSE, now=t, clock=t)
    np.testing.assert_allclose(seen[0][5:8], [0.0, 0.0, 0.0])
    np.testing.assert_allclose(seen[1][5:8], [0.0, 0.0, 8.0])


def test_tare_is_the_median_at_rest_at_the_start_pose(make_policy) -> None:
    policy = make_policy(delta=0.0)
    seen = []
    original = policy.act_chunk
    policy.act_chunk = lambda obs: seen.append(obs.copy()) or original(obs)
    core = make_core(policy, start_duration=0.05, start_settle=0.1)
    readings = {0.0: 0.0, 0.02: -5.0, 0.04: -5.0, 0.06: -2.0, 0.08: -30.0, 0.10: -2.0, 0.12: -2.0, 0.14: -2.0,
                0.16: -2.0, 0.18: 6.0}                    # moving (ignored), at rest with one outlier, then 8 N
    for t, fz in readings.items():
        core.on_force((0.0, 0.0, fz), now=t)
        core.on_contact(0.9, now=t)
        core.on_state(t, NAMES, POSE, now=t, clock=t)
    np.testing.assert_allclose(seen[-1][5:8], [0.0, 0.0, 8.0])


def test_an_estimator_heard_late_is_tared_on_its_settled_estimates(make_policy) -> None:
    """The estimator starts after the settle: its first estimates (padded history) read 0 N although the arm
    holds an object (-3 N); the policy keeps the start pose until it has 0.5 s of estimates past 0.25 s of
    warm-up and then sees the object's weight tared away."""
    policy = make_policy(delta=0.01)
    seen = []
    original = policy.act_chunk
    policy.act_chunk = lambda obs: seen.append(obs.copy()) or original(obs)
    core = make_core(policy, start_duration=0.2, start_settle=0.5, estimator_warmup=0.25)
    for k in range(200):                                     # 2 s at 100 Hz; the estimator from 1.0 s
        t = k / 100.0
        if t >= 1.0:
            heard = t - 1.0
            core.on_force((0.0, 0.0, 0.0 if heard < 0.08 else -3.0), now=t)
            core.on_contact(0.1, now=t)
        decision = core.on_state(t, NAMES, POSE, now=t, clock=t)
        if decision is not None and decision.acted:
            first_action = t
            break
    else:
        raise AssertionError("the policy never acted")
    assert first_action >= 1.0 + 0.25 + 0.5 - 0.02
    np.testing.assert_allclose(seen[0][5:8], [0.0, 0.0, 0.0], atol=1e-9)


def test_after_a_gap_in_the_estimator_the_policy_holds_through_its_warm_up(make_policy) -> None:
    """A 0.3 s gap in the estimator's output (it restarted its window): its next estimates read 0 N while the
    tool presses with 8 N. The policy holds its last command until 0.25 s after the estimator is back."""
    policy = make_policy(delta=0.01)
    core = make_core(policy, estimator_warmup=0.25, estimator_gap=0.1)
    acted_at = []
    for k in range(150):                                       # 1.5 s at 100 Hz; no estimate in [0.5, 0.8)
        t = k / 100.0
        if not 0.5 <= t < 0.8:
            back = t - 0.8
            core.on_force((0.0, 0.0, 0.0 if 0.0 <= back < 0.08 else 8.0), now=t)
            core.on_contact(0.9, now=t)
        decision = core.on_state(t, NAMES, POSE, now=t, clock=t)
        if decision is not None and decision.acted:
            acted_at.append(t)
    assert any(t < 0.5 for t in acted_at)                      # it acted before the gap
    after = [t for t in acted_at if t >= 0.8]                  # (within estimator_timeout it acts on the last force)
    assert after and min(after) >= 0.8 + 0.25 - 0.02           # not on the restarted estimator's first output
    assert core.estimator_restarts == 1


def test_estimates_delivered_late_in_a_burst_are_not_a_restart(make_policy) -> None:
    """The policy's own process paused: estimates with consecutive stamps arrive 0.2 s apart in arrival time.
    Their stamps say the estimator's window never restarted, so the policy does not hold for a warm-up."""
    core = make_core(make_policy(delta=0.01), estimator_warmup=0.25, estimator_gap=0.1)
    core.on_force((0.0, 0.0, 3.0), now=1.0, stamp=10.00)
    core.on_force((0.0, 0.0, 3.0), now=1.2, stamp=10.01)
    assert core.estimator_restarts == 0
    core.on_force((0.0, 0.0, 3.0), now=1.21, stamp=10.2)     # a real gap in the stamps
    assert core.estimator_restarts == 1


def test_proprio_policy_needs_no_estimator(make_policy) -> None:
    core = make_core(make_policy(variant="proprio"))
    assert any(d.acted for _, d in feed(core, 0.3, estimator=False))


def test_wrong_joint_names_are_refused(make_policy) -> None:
    core = make_core(make_policy())
    decision = core.on_state(0.0, ["a", "b", "c", "d", "e"], POSE, now=0.0, clock=0.0)
    assert decision is None or not decision.acted
    assert core.refused == 1 and "joint names" in core.message


def test_watchdog_reports_a_silent_follower(make_policy) -> None:
    core = make_core(make_policy())
    feed(core, 0.1)
    level, message = core.check(now=0.1 + 0.5)
    assert level == 1 and "no follower state" in message


def test_protective_stop_holds_the_arm_until_released(make_policy) -> None:
    from na_common.protective_stop import ProtectiveStopConfig

    stop = ProtectiveStopConfig(enabled=True, threshold=10.0, hysteresis=2.0, min_duration=0.03)
    core = make_core(make_policy(delta=0.01), protective_stop=stop)
    assert all(d.acted for _, d in feed(core, 0.5)[1:])                 # 3 N: acts
    held = []
    for k in range(30):                                                  # 15 N from t = 1.0 s
        t = 1.0 + k / 100.0
        core.on_force((0.0, 0.0, 15.0), now=t)
        core.on_contact(0.9, now=t)
        decision = core.on_state(t, NAMES, POSE, now=t, clock=t)
        if decision is not None:
            held.append((t, decision.acted))
    assert core.protective_stop.stopped and "15.0 N" in core.message and core.level == 2
    assert [a for t, a in held if t >= 1.03 + 1e-9] and not any(a for t, a in held if t >= 1.03 + 1e-9)
    assert any(a for t, a in held if t < 1.03 - 1e-9)                    # before the minimum duration it acted
    released, _ = core.release_protective_stop(now=1.5)
    assert released
    assert any(d.acted for _, d in feed(core, 0.2, t0=1.5))             # 3 N again: acts, and re-arms


def test_a_protective_stop_holds_the_measured_arm_pose_and_the_grip(make_policy) -> None:
    from na_common.protective_stop import ProtectiveStopConfig

    stop = ProtectiveStopConfig(enabled=True, threshold=10.0, hysteresis=2.0, min_duration=0.0)
    core = make_core(make_policy(delta=0.01), protective_stop=stop, gripper_index=4)
    decisions = [d for _, d in feed(core, 0.5)]
    goal = decisions[-1].command                                          # the policy's last goal
    measured = np.array([0.05, -0.3, 0.2, 0.1, -0.4])                     # the arm lags it; the gripper on an object
    assert np.all(np.abs(goal - measured) > 0.01)                         # so that each check below can fail
    core.on_force((0.0, 0.0, 15.0), now=0.6)
    decision = None
    for k in range(5):
        t = 0.6 + k / 100.0
        decision = core.on_state(t, NAMES, measured, now=t, clock=t) or decision
    assert core.protective_stop.stopped and decision is not None and not decision.acted
    np.testing.assert_allclose(decision.command[:4], measured[:4])
    assert decision.command[4] == pytest.approx(goal[4])
