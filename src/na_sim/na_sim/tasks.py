"""Scripted operator: the task library of the paper's Table A15, randomised and human-like.

A :class:`TaskEpisode` is what a human operator does with the leader arm in one recording:
the leader pose over time (one value per joint of the robot spec: joint-side rad, gripper = servo
angle rad), when a payload hangs in the gripper, where the F/T fixture stands (or None) and
whether the rig's restricted joint is restricted. ROS-free; the offline generator and the live
rig play it. Every robot-specific number (rest pose, IK joints, workspace ranges, payload sets,
which tasks a robot runs) comes from the robot's task profile (:mod:`na_sim.task_profile`).
This module is the library's entry (task ids, :func:`make_task`); the episode type is in
:mod:`na_sim.task_episode`, the moves in :mod:`na_sim.task_planner`, the task scripts in :mod:`na_sim.task_builders`.

Human-likeness: every move is a minimum-jerk segment (the classic model of point-to-point
human arm movement) with a randomised peak speed, holds have randomised lengths, amplitudes
and positions vary per seed, and a small multi-sine tremor rides on the arm joints.

Task ids (stable; the ``task`` metadata value):

==========================  ===========================================================
``circle_cw``/``circle_ccw`` tool-space horizontal circles, clockwise / counter-clockwise
                            seen from above (IK on the tool point, constant tool pitch)
``sweep_joint1..4``         one joint (the 1st..4th of the spec) swept over ~90 % of its feasible range
``sweep_gripper``           gripper servo swept over ~90 % of its range
``lean_extend``             lean back, extend forward, repeated
``pick_place``              pick an object, carry it, place it (payload: any mass, 0 = empty)
``go_up_stay``              grasp, go up and hold still, come down (payload: any mass)
``push_px`` ... ``push_nz``   press the F/T fixture along its +X/-X/+Y/-Y/+Z/-Z axis (5-20 N)
``nopush_px`` ... ``nopush_nz`` the same commanded motion as ``push_*``, fixture absent
``pick_place_restricted``   pick and place with the rig's restricted joint (rubber bands; OpenManipulator-X:
                            Joint 3), payloads of the profile (0 or 200 g)
==========================  ===========================================================
"""

from __future__ import annotations

import numpy as np

from na_common.episode_bag.metadata import NOMINAL_CONDITION, restricted_condition
from na_description import RobotSpec, load_spec
from na_description.model import Kinematics
from na_sim.ik import IKError
from na_sim.task_builders import BUILDERS, PUSH_AXES, FixtureDrawError
from na_sim.task_episode import TaskEpisode, TaskError, Tremor
from na_sim.task_planner import JOINT_MARGIN, Planner
from na_sim.task_profile import TaskProfile, TaskProfileError, task_profile

PAYLOAD_TASKS = ("pick_place", "go_up_stay", "pick_place_restricted")
TASK_IDS: tuple[str, ...] = (
    "circle_cw", "circle_ccw",
    "sweep_joint1", "sweep_joint2", "sweep_joint3", "sweep_joint4", "sweep_gripper",
    "lean_extend", "pick_place", "go_up_stay",
    *(f"push_{a}" for a in PUSH_AXES), *(f"nopush_{a}" for a in PUSH_AXES),
    "pick_place_restricted",
)
# Fixture: the F/T sensor frame sits at the centre of a cube; a sphere at the tool point
# presses one face. Defaults = na_sim/config/sim_rig.yaml (fixture half_size_m, tool_collider_radius_m).
FIXTURE_HALF_SIZE = 0.02     # m
TOOL_RADIUS = 0.008          # m
MAX_PLAN_ATTEMPTS = 5


def check_task_name(task: str, spec: RobotSpec | None = None) -> str:
    """``task`` if it is a task id (and, given a spec, one its robot's task profile runs)."""
    if task not in BUILDERS:
        raise TaskError(f"unknown task '{task}'; known tasks: {', '.join(TASK_IDS)}")
    if spec is not None and not profile_of(spec).supports(task):
        raise TaskError(f"task '{task}' is not in the task profile of robot '{spec.name}' "
                        f"(its tasks: {', '.join(robot_tasks(spec))})")
    return task


def profile_of(spec: RobotSpec) -> TaskProfile:
    """The robot's task profile; :class:`TaskError` when it has none or it is malformed."""
    try:
        return task_profile(spec)
    except TaskProfileError as err:
        raise TaskError(str(err)) from None


def robot_tasks(spec: RobotSpec) -> tuple[str, ...]:
    """The task ids the robot's profile runs, in library order."""
    profile = profile_of(spec)
    return tuple(t for t in TASK_IDS if profile.supports(t))


def make_task(task: str, seed: int, payload_grams: float | None = None, *, quick: bool = False,
              spec: RobotSpec | None = None, kinematics: Kinematics | None = None,
              fixture_half_size: float = FIXTURE_HALF_SIZE, tool_radius: float = TOOL_RADIUS) -> TaskEpisode:
    """Build one randomised episode of ``task``; the same (task, seed, payload, quick) gives the same episode.

    ``payload_grams``: only for pick_place, go_up_stay and pick_place_restricted (default 0 =
    empty gripper; any mass is accepted). ``quick`` shortens holds and repetitions (for tests).
    ``fixture_half_size``/``tool_radius``: the rig's fixture cube and tool sphere (push planning).
    """
    spec = spec or load_spec()
    check_task_name(task, spec)
    profile = profile_of(spec)
    payload = 0.0 if payload_grams is None else float(payload_grams)
    if not np.isfinite(payload) or payload < 0:
        raise TaskError(f"payload_grams must be a mass >= 0 g, got {payload_grams}")
    if payload > 0 and task not in PAYLOAD_TASKS:
        raise TaskError(f"task '{task}' takes no payload (payload tasks: {', '.join(PAYLOAD_TASKS)})")
    kin = kinematics or Kinematics(spec)
    # nopush_* draws the same numbers as its push_* twin: same seed, same commanded motion.
    task_index = TASK_IDS.index(task.replace("nopush_", "push_"))
    # A draw whose poses are out of reach, or whose home pose no fixture face clears, is redrawn
    # (deterministically: attempt number in the seed).
    for attempt in range(MAX_PLAN_ATTEMPTS):
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, task_index, round(payload * 1000), attempt])
        planner = Planner(spec, profile, kin, rng, quick, fixture_half_size, tool_radius)
        planner.hold(0.5, 1.5)
        try:
            extra = BUILDERS[task](planner)
            break
        except (IKError, FixtureDrawError) as err:
            failure = err
    else:
        raise TaskError(f"task '{task}' seed {seed}: no plan in {MAX_PLAN_ATTEMPTS} draws: {failure}")
    planner.hold(0.5, 1.5)

    is_push = task.startswith("push_")
    is_nopush = task.startswith("nopush_")
    if is_push or is_nopush:
        force_source = "ft_sensor"
    elif payload > 0:
        force_source = "payload"
    else:
        force_source = "none"
    grasp = [extra["grasp"]] if "grasp" in extra and payload > 0 else []
    return TaskEpisode(
        task=task, seed=int(seed), payload_grams=payload, force_source=force_source,
        condition=restricted_condition(spec.condition_joint) if task == "pick_place_restricted" else NOMINAL_CONDITION,
        fixture=extra.get("fixture") if is_push else None,
        grasp_intervals=grasp, duration=planner.traj.time, trajectory=planner.traj,
        tremor=Tremor.random(rng, spec.n_motors, 1.0, profile.gripper), lower=planner.lower - 0.5 * JOINT_MARGIN,
        upper=planner.upper + 0.5 * JOINT_MARGIN,
        push_direction=extra.get("push_direction"),
        press_intervals=extra.get("press_intervals", []) if is_push else [],
        press_targets=extra.get("press_targets", []), press_poses=extra.get("press_poses", []),
    )


__all__ = ["FIXTURE_HALF_SIZE", "PAYLOAD_TASKS", "PUSH_AXES", "TASK_IDS", "TOOL_RADIUS", "TaskEpisode", "TaskError",
           "check_task_name", "make_task", "profile_of", "robot_tasks"]
