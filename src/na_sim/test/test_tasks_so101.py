"""Scripted operator tasks on the SO-101 (its task profile): limits, smoothness, reach, grasps."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from na_description import load_spec
from na_description.model import Kinematics
from na_sim import tasks
from na_sim.task_profile import task_profile

RATE_HZ = 100.0
PAYLOAD_TASKS = ("pick_place", "go_up_stay", "pick_place_restricted")


@pytest.fixture(scope="module")
def kin() -> Kinematics:
    return Kinematics(load_spec("so101"))


def _sample(episode: tasks.TaskEpisode) -> np.ndarray:
    return episode.poses(np.arange(0.0, episode.duration, 1.0 / RATE_HZ))


@pytest.mark.parametrize("task", tasks.robot_tasks(load_spec("so101")))
def test_every_so101_task_within_limits_smooth_and_above_the_table(task, kin):
    spec = kin.spec
    lower, upper = spec.servo_angle_limits()
    episode = tasks.make_task(task, seed=5, payload_grams=300.0 if task in PAYLOAD_TASKS else None,
                              spec=spec, kinematics=kin)
    q = _sample(episode)
    assert q.shape[1] == 6 and len(q) > 5 * RATE_HZ
    assert np.all(q >= lower) and np.all(q <= upper)
    velocity = np.diff(q, axis=0) * RATE_HZ
    # STS3215: 45 rpm = 4.7 rad/s no-load at 12 V (datasheet); a human operator stays well below.
    assert np.max(np.abs(velocity)) < 3.0
    assert np.max(np.abs(velocity[:10, :5])) < 0.1 and np.max(np.abs(velocity[-10:, :5])) < 0.1
    heights = [kin.tool_position(pose[:5])[2] for pose in q[:: int(RATE_HZ / 5)]]
    assert min(heights) > 0.0, "tool below the table"
    if not task.startswith("sweep"):
        assert np.max(np.abs(q[:, 4])) < 0.02          # wrist_roll only trembles around its home (0 rad)


def test_sweeps_move_the_named_channel(kin):
    spec = kin.spec
    lower, upper = spec.servo_angle_limits()
    for task, channel in (("sweep_joint2", 1), ("sweep_gripper", 5)):
        q = _sample(tasks.make_task(task, 2, spec=spec, kinematics=kin))
        span = q[:, channel].max() - q[:, channel].min()
        others = [k for k in range(6) if k != channel]
        assert span > 0.6 and span > 0.25 * (upper[channel] - lower[channel])
        assert np.all(q[:, others].max(axis=0) - q[:, others].min(axis=0) < 0.5 * span)


@pytest.mark.parametrize("task", PAYLOAD_TASKS)
def test_payload_tasks_grasp_on_the_table_with_the_jaw_closed(kin, task):
    episode = tasks.make_task(task, 9, payload_grams=500.0, spec=kin.spec, kinematics=kin)
    assert episode.force_source == "payload" and len(episode.grasp_intervals) == 1
    start = episode.grasp_intervals[0][0]
    at_grasp = episode.pose(start)
    assert kin.tool_position(at_grasp[:5])[2] < 0.05                  # picked from the table
    assert at_grasp[5] < episode.pose(0.5)[5] - 0.4                   # jaw closed (rad) vs open before
    assert episode.metadata()["condition"] == ("restricted_elbow_flex" if task.endswith("restricted") else "nominal")
    assert episode.restricted == task.endswith("restricted")


def test_profile_payloads_are_the_paper_so101_set_and_other_tasks_are_refused(kin, monkeypatch):
    profile = task_profile(kin.spec)
    assert profile.payloads["pick_place"] == (0.0, 200.0, 300.0, 400.0, 500.0)      # paper Tab. A16
    assert profile.payloads["go_up_stay"] == (0.0, 200.0, 300.0, 400.0, 500.0)
    # A profile that lists its tasks refuses the others (the shipped SO-101 profile runs them all).
    narrow = dataclasses.replace(profile, tasks=("circle_cw", "go_up_stay"))
    monkeypatch.setattr(tasks, "profile_of", lambda spec: narrow)
    assert tasks.robot_tasks(kin.spec) == ("circle_cw", "go_up_stay")
    with pytest.raises(tasks.TaskError, match="task 'push_px' is not in the task profile of robot 'so101'") as err:
        tasks.make_task("push_px", 0, spec=kin.spec, kinematics=kin)
    assert "\n" not in str(err.value)


def test_circle_keeps_the_tool_pitch_on_the_so101(kin):
    profile = task_profile(kin.spec)
    episode = tasks.make_task("circle_ccw", 3, spec=kin.spec, kinematics=kin)
    q = _sample(episode)
    tool = np.array([kin.tool_position(p[:5]) for p in q[::5]])
    center = tool.mean(axis=0)
    angle = np.unwrap(np.arctan2(tool[:, 1] - center[1], tool[:, 0] - center[0]))
    assert angle[-1] - angle[0] > np.pi                               # counter-clockwise from above
    pitch = q[:, :4] @ profile.pitch_row
    assert np.mean(np.abs(pitch - np.median(pitch)) < 0.02) > 0.3
