"""Demonstration bags -> samples: the policy clock, estimator outputs from an earlier state, the lead-in cut,
action chunks relative to the measured position, and the one-line refusals."""

from __future__ import annotations

import numpy as np
import pytest

from na_common import episode_bag as eb
from na_policy.dataset import DemoError, load_demo, samples

NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]
T0 = 1_800_000_000_000_000_000
MS = 1_000_000


def write_demo(out_dir, *, seconds: float = 3.0, move_at: float = 1.0, estimator: bool = True, lag: float = 0.02):
    """States and commands at 100 Hz, estimator outputs 2 ms after each state. Joint 2's command ramps at 0.1 rad/s
    from ``move_at`` (the leader moves then); the follower lags its command by ``lag`` rad. The estimator's force z
    is the stamp's millisecond count (so a test can tell which state it came from)."""
    meta = {"task": "press_hold", "payload_grams": 0.0, "force_source": "ft_sensor", "condition": "nominal",
            "source": "live", "operator": "test"}
    writer = eb.EpisodeWriter(out_dir, meta)
    state_cls, cmd_cls = eb.message_class(eb.ARM_STATE), eb.message_class(eb.JOINT_COMMAND)
    wrench_cls = eb.message_class(eb.WRENCH_STAMPED)
    vec, wrench = eb.message_class("geometry_msgs/msg/Vector3"), eb.message_class("geometry_msgs/msg/Wrench")
    contact_cls = eb.message_class("na_msgs/msg/Contact")
    for topic, kind in (("/follower/arm_state", eb.ARM_STATE), ("/leader/arm_state", eb.ARM_STATE),
                        ("/follower/command", eb.JOINT_COMMAND)):
        writer.add_topic(topic, kind)
    if estimator:
        writer.add_topic("/estimator/force", eb.WRENCH_STAMPED)
        writer.add_topic("/estimator/contact", "na_msgs/msg/Contact")
    for k in range(round(seconds * 100)):
        t = T0 + k * 10 * MS
        seconds_in = k / 100
        q_cmd = np.zeros(5)
        q_cmd[1] = 0.1 * max(0.0, seconds_in - move_at)
        q = q_cmd.copy()
        q[1] -= lag
        def state(pos, stamp, role):
            return state_cls(header=eb.make_header(stamp, "world"), role=role, name=NAMES, position=pos,
                             gripper_slide=0.0, goal_gripper_slide=0.0, velocity=np.zeros(5), goal_position=pos,
                             current=np.zeros(5), pwm=np.zeros(5), load=np.zeros(0), input_voltage=np.full(5, 12.0),
                             temperature=np.full(5, 30.0), hardware_error=np.zeros(5, dtype=np.uint8),
                             stale=np.zeros(5, dtype=bool), timeout_errors=0, crc_errors=0, partial_errors=0,
                             dropped_cycles=0, bus_cycle_duration=0.002)
        writer.write("/leader/arm_state", t, state(q_cmd, t, "leader"))
        writer.write("/follower/command", t + MS, cmd_cls(header=eb.make_header(t + MS), name=NAMES, position=q_cmd,
                                                          gripper_slide=0.0))
        writer.write("/follower/arm_state", t, state(q, t, "follower"))
        if estimator:
            header = eb.make_header(t, "world")        # stamped with the state it came from
            force = wrench(force=vec(x=0.0, y=0.0, z=float(k * 10)), torque=vec(x=0.0, y=0.0, z=0.0))
            writer.write("/estimator/force", t + 2 * MS, wrench_cls(header=header, wrench=force))
            writer.write("/estimator/contact", t + 2 * MS, contact_cls(header=header, probability=0.25,
                                                                        in_contact=False))
    return writer.close()


def test_resampled_on_the_policy_clock_with_earlier_estimates(tmp_path) -> None:
    demo = load_demo(write_demo(tmp_path / "a"))
    dt = np.diff(demo.time)
    np.testing.assert_allclose(dt, 1 / 60, atol=1e-6)
    # The leader moves at 1.0 s; 0.1 s of lead-in is kept.
    first_move = np.flatnonzero(np.abs(demo.command[:, 1]) > 3e-3)[0]
    assert demo.time[first_move] == pytest.approx(0.1 + 0.03, abs=0.05)
    # Each tick's force comes from the state just before the tick's state (live, the estimate of the current state
    # arrives after the policy answered it): state index k <- position on the ramp; force z = 10 ms x index.
    moving = demo.position[:, 1] + 0.02 > 0.005
    # The force is tared (by its median at rest): differences between ticks are the raw ones.
    state_index = np.rint(((demo.position[moving, 1] + 0.02) / 0.1 + 1.0) * 100)
    tare = (state_index[0] - 1) * 10 - demo.force[moving, 2][0]
    np.testing.assert_allclose(demo.force[moving, 2] + tare, (state_index - 1) * 10)
    assert abs(demo.force[0, 2]) <= 60.0     # the 0.1 s rest window spans ~10 states of 10 units: median within 60
    np.testing.assert_allclose(demo.contact, 0.25)


def test_action_chunks_are_future_commands_relative_to_the_measured_position(tmp_path) -> None:
    demo = load_demo(write_demo(tmp_path / "a", lag=0.02))
    obs, actions = samples([demo], "force", chunk=3)
    assert obs.shape == (len(demo.time), 9) and actions.shape == (len(demo.time), 3, 5)
    k = len(demo.time) // 2                                           # mid-ramp
    expected = demo.command[k + 1: k + 4] - demo.position[k]
    np.testing.assert_allclose(actions[k], expected, atol=1e-6)
    assert actions[k, 0, 1] == pytest.approx(0.02 + 0.1 / 60, abs=0.002)   # the lag plus one tick of the ramp
    proprio, _ = samples([demo], "proprio", chunk=3)
    assert proprio.shape[1] == 5


def test_refusals_name_the_problem(tmp_path) -> None:
    with pytest.raises(DemoError, match="lacks /estimator/force"):
        load_demo(write_demo(tmp_path / "a", estimator=False))
    with pytest.raises(DemoError, match="never moves"):
        load_demo(write_demo(tmp_path / "b", move_at=10.0))
    with pytest.raises(DemoError, match="did not follow"):
        load_demo(write_demo(tmp_path / "c", lag=0.5))
