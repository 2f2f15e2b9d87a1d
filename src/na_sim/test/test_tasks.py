"""Scripted operator task library: limits, smoothness, determinism, push geometry."""

from __future__ import annotations

import numpy as np
import pytest

from na_description import load_spec
from na_description.model import Kinematics
from na_sim import tasks
from na_sim.ik import tool_pitch
from na_sim.task_profile import task_profile

RATE_HZ = 100.0


@pytest.fixture(scope="module")
def kin() -> Kinematics:
    return Kinematics(load_spec())


def _sample(episode: tasks.TaskEpisode) -> np.ndarray:
    return episode.poses(np.arange(0.0, episode.duration, 1.0 / RATE_HZ))


def _payload_for(task: str) -> float | None:
    return 300.0 if task in tasks.PAYLOAD_TASKS else None


@pytest.mark.parametrize("task", tasks.TASK_IDS)
def test_every_task_within_limits_and_smooth(task, kin):
    spec = kin.spec
    lower, upper = spec.servo_angle_limits()
    episode = tasks.make_task(task, seed=11, payload_grams=_payload_for(task), kinematics=kin)
    q = _sample(episode)
    assert q.shape == (len(q), 5) and len(q) > 5 * RATE_HZ
    assert np.all(q >= lower) and np.all(q <= upper), "pose outside the spec joint limits"
    velocity = np.diff(q, axis=0) * RATE_HZ
    acceleration = np.diff(velocity, axis=0) * RATE_HZ
    # XM430: 46 rpm = 4.8 rad/s no-load (docs/REFERENCES.md, XM430-W350); a human operator stays well below.
    assert np.max(np.abs(velocity)) < 3.0
    assert np.max(np.abs(acceleration)) < 25.0
    # The episode starts and ends nearly at rest (only tremor).
    assert np.max(np.abs(velocity[:10, :4])) < 0.1 and np.max(np.abs(velocity[-10:, :4])) < 0.1
    heights = [kin.tool_position(pose[:4])[2] for pose in q[:: int(RATE_HZ / 5)]]
    assert min(heights) > 0.0, "tool below the table"
    meta = episode.metadata()
    assert meta["task"] == task and meta["seed"] == 11
    assert meta["condition"] == ("restricted_joint3" if task == "pick_place_restricted" else "nominal")
    assert episode.restricted == (task == "pick_place_restricted")


def test_deterministic_per_seed_and_different_across_seeds(kin):
    a = _sample(tasks.make_task("circle_cw", 5, kinematics=kin))
    b = _sample(tasks.make_task("circle_cw", 5, kinematics=kin))
    c = _sample(tasks.make_task("circle_cw", 6, kinematics=kin))
    np.testing.assert_array_equal(a, b)
    n = min(len(a), len(c))
    assert np.max(np.abs(a[:n] - c[:n])) > 0.05


@pytest.mark.parametrize("clockwise", [True, False])
def test_circles_turn_the_right_way(kin, clockwise):
    episode = tasks.make_task("circle_cw" if clockwise else "circle_ccw", 2, kinematics=kin)
    tool = np.array([kin.tool_position(q[:4]) for q in _sample(episode)[::5]])
    center = tool[:, :2].mean(axis=0)
    rel = tool[:, :2] - center
    angle = np.unwrap(np.arctan2(rel[:, 1], rel[:, 0]))
    turned = angle[-1] - angle[0]
    # Net rotation is dominated by the full circles (approach/return add < 1 turn).
    assert (turned < -np.pi) if clockwise else (turned > np.pi)
    # Pitch held constant during the circle: q2+q3+q4 varies little around its median.
    pitches = np.array([tool_pitch(q, task_profile(kin.spec)) for q in _sample(episode)])
    assert np.mean(np.abs(pitches - np.median(pitches)) < 0.02) > 0.3


@pytest.mark.parametrize("joint", [0, 1, 2, 3, 4])
def test_sweeps_move_one_channel_over_most_of_its_range(kin, joint):
    name = "sweep_gripper" if joint == 4 else f"sweep_joint{joint + 1}"
    episode = tasks.make_task(name, 3, kinematics=kin)
    q = _sample(episode)
    lower, upper = kin.spec.servo_angle_limits()
    span = np.ptp(q, axis=0)
    if joint in (0, 4):           # free channels: ~90 % of the spec range
        assert span[joint] > 0.8 * (upper[joint] - lower[joint])
    else:                         # feasible part of the range (tool above the table)
        assert span[joint] > 0.45 * (upper[joint] - lower[joint])
    # While the channel sweeps, the others stay put (start/return moves excluded).
    moving = np.abs(np.gradient(q[:, joint])) * RATE_HZ > 0.1
    others = np.delete(np.arange(5), joint)
    assert np.max(np.ptp(q[moving][:, others[others < 4]], axis=0)) < 1.2


@pytest.mark.parametrize("task", ["pick_place", "go_up_stay", "pick_place_restricted"])
def test_payload_tasks_have_grasp_intervals(kin, task):
    episode = tasks.make_task(task, 4, payload_grams=250.0, kinematics=kin)
    assert episode.force_source == "payload" and episode.payload_kg == pytest.approx(0.25)
    ((start, stop),) = episode.grasp_intervals
    assert 0 < start < stop < episode.duration and stop - start > 2.0
    assert episode.grasped(0.5 * (start + stop)) and not episode.grasped(0.0)
    # The gripper is closed on the object during the grasp and open before it.
    q_hold, q_before = episode.pose(0.5 * (start + stop)), episode.pose(0.5)
    assert q_hold[4] > q_before[4] + 0.3   # closing = larger servo angle (smaller slide)
    empty = tasks.make_task(task, 4, kinematics=kin)
    assert empty.grasp_intervals == [] and empty.force_source == "none"


@pytest.mark.parametrize("axis", list(tasks.PUSH_AXES))
def test_push_reaches_fixture(kin, axis):
    episode = tasks.make_task(f"push_{axis}", 8, kinematics=kin)
    assert episode.fixture is not None and episode.force_source == "ft_sensor"
    d = np.asarray(tasks.PUSH_AXES[axis])
    np.testing.assert_array_equal(episode.push_direction, d)
    center = np.asarray(episode.fixture.position)
    face_offset = float((center - tasks.FIXTURE_HALF_SIZE * d) @ d)  # the face the tool presses
    assert episode.press_intervals
    for (start, stop), target, pose in zip(episode.press_intervals, episode.press_targets, episode.press_poses,
                                           strict=True):
        # IK error small, and the commanded sphere surface goes past the face by the axis' depth.
        reached = kin.tool_position(pose[:4])
        assert np.linalg.norm(reached - target) < 1e-3
        depth = float(reached @ d) + tasks.TOOL_RADIUS - face_offset
        low, high = task_profile(kin.spec).press_depth[axis]
        assert low - 1e-3 < depth < high + 1e-3
        # The played pose at mid-press is that pose (only tremor added).
        played = kin.tool_position(episode.pose(0.5 * (start + stop))[:4])
        assert np.linalg.norm(played - reached) < 0.004
        # Sideways the sphere stays on the face, not off its edge.
        lateral = (reached - center) - ((reached - center) @ d) * d
        assert np.all(np.abs(lateral) < tasks.FIXTURE_HALF_SIZE)
    # The tool sphere only ever meets the cube through the pressed face (approach and retreat
    # go around it), and not at all before the first press.
    times = np.arange(0.0, episode.duration, 0.02)
    tool = np.array([kin.tool_position(q[:4]) for q in episode.poses(times)])
    rel = tool - center
    gap = np.linalg.norm(np.maximum(np.abs(rel) - tasks.FIXTURE_HALF_SIZE, 0.0), axis=1)
    touching = gap < tasks.TOOL_RADIUS
    assert touching.any() and not touching[times < episode.press_intervals[0][0] - 2.0].any()
    lateral = rel[touching] - np.outer(rel[touching] @ d, d)
    assert np.all(np.abs(lateral) < tasks.FIXTURE_HALF_SIZE)
    # Commanded past the face by at most the press depth (the servos stop the real tool at the face).
    past_face = rel[touching] @ d + tasks.FIXTURE_HALF_SIZE + tasks.TOOL_RADIUS
    assert np.all(past_face < task_profile(kin.spec).press_depth[axis][1] + 1e-3)


def test_nopush_matches_push_motion_without_fixture(kin):
    push = tasks.make_task("push_ny", 21, kinematics=kin)
    nopush = tasks.make_task("nopush_ny", 21, kinematics=kin)
    assert nopush.fixture is None and nopush.press_intervals == []
    assert nopush.duration == pytest.approx(push.duration)
    np.testing.assert_allclose(_sample(nopush), _sample(push))
    assert nopush.force_source == "ft_sensor" and nopush.metadata()["fixture"] is None


def test_bad_requests_fail_clearly(kin):
    with pytest.raises(tasks.TaskError, match="unknown task 'circle'"):
        tasks.make_task("circle", 0, kinematics=kin)
    with pytest.raises(tasks.TaskError, match="takes no payload"):
        tasks.make_task("sweep_joint1", 0, payload_grams=100, kinematics=kin)
    with pytest.raises(tasks.TaskError, match="payload_grams"):
        tasks.make_task("pick_place", 0, payload_grams=-5, kinematics=kin)


def test_quick_episodes_are_shorter(kin):
    full = tasks.make_task("go_up_stay", 1, payload_grams=100, kinematics=kin)
    quick = tasks.make_task("go_up_stay", 1, payload_grams=100, quick=True, kinematics=kin)
    assert quick.duration < 0.8 * full.duration
    assert quick.metadata()["task_instance"] == "go_up_stay_100g_nominal"
