"""The task scripts: what the operator does in each task of the library (circles, sweeps, lean and
extend, pick and place, go up and stay, presses on the F/T fixture), drawn from a :class:`Planner`."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from na_common.fixture import FixturePose
from na_sim.ik import IKError
from na_sim.task_episode import TaskError
from na_sim.task_planner import Planner
from na_sim.task_profile import Box

PUSH_AXES: dict[str, tuple[float, float, float]] = {
    "px": (1.0, 0.0, 0.0), "nx": (-1.0, 0.0, 0.0), "py": (0.0, 1.0, 0.0),
    "ny": (0.0, -1.0, 0.0), "pz": (0.0, 0.0, 1.0), "nz": (0.0, 0.0, -1.0),
}
FLOOR_CLEARANCE = 0.015      # m, lowest tool-point height a scripted pose may reach
SWEEP_FRACTION = 0.9         # paper, NAD free-motion subset: sweeps cover ~90 % of the feasible range


def _circle(p: Planner, clockwise: bool) -> dict:
    rng, box = p.rng, p.profile.circle
    center = p.draw_box(box.low, box.high)
    radius = rng.uniform(*p.profile.circle_radius)
    pitch = rng.uniform(*box.pitch)
    revolutions = 1 if p.quick else int(rng.integers(2, 4))
    seconds_per_rev = rng.uniform(3.0, 5.5) * (0.7 if p.quick else 1.0)
    start_angle = rng.uniform(0, 2 * np.pi)
    sign = -1.0 if clockwise else 1.0        # seen from above (+z): ccw is positive about z
    angles = start_angle + sign * np.linspace(0.0, 2 * np.pi * revolutions, 400 * revolutions + 1)
    wobble = 1.0 + 0.04 * np.sin(2 * (angles - start_angle) + rng.uniform(0, 2 * np.pi))
    points = center + radius * wobble[:, None] * np.stack([np.cos(angles), np.sin(angles), 0 * angles], 1)
    path = None
    for offset in (0.0, -0.2, 0.2, -0.4, 0.4):     # one pitch for the whole circle
        start_arm = p.q_arm.copy()
        try:
            path = np.array([p.pose(p.ik(point, pitch + offset, exact_pitch=True), p.gripper_open)
                             for point in points])
        except IKError:
            p.q_arm = start_arm
            continue
        pitch += offset
        break
    if path is None:
        raise IKError(np.inf, f"circle of radius {radius:.3f} m around {np.round(center, 3).tolist()} is out of reach")
    p.q_arm = start_arm
    p.move_tool(points[0], pitch, p.gripper_open, exact_pitch=True)
    p.hold(0.5, 1.2)
    p.traj.follow(path, seconds_per_rev * revolutions * 1.3)
    p.hold(0.5, 1.2)
    p.move(p.home)
    return {"circle_center": center, "circle_radius": radius}


def _sweep(p: Planner, channel: int) -> dict:
    rng = p.rng
    hold = p.home.copy()
    for held, low, high in p.profile.sweep_holds.get(channel, ()):    # the other joints' hold pose
        hold[held] = rng.uniform(low, high)
    lo, hi = _feasible_range(p, hold, channel)
    center, half = 0.5 * (lo + hi), 0.5 * (hi - lo) * SWEEP_FRACTION
    p.move(hold)
    p.hold(0.3, 0.8)
    cycles = 1 if p.quick else int(rng.integers(1, 3))
    first_low = bool(rng.integers(0, 2))
    for _ in range(cycles):
        for go_low in (first_low, not first_low):
            q = p.traj.pose
            q[channel] = center + (-1 if go_low else 1) * half * rng.uniform(0.97, 1.0)
            p.move(q)
            p.hold(0.2, 0.8)
    q = p.traj.pose
    q[channel] = hold[channel]
    p.move(q)
    p.move(p.home)
    return {"sweep_range": (center - half, center + half)}


def _feasible_range(p: Planner, hold: np.ndarray, channel: int) -> tuple[float, float]:
    """Largest interval of ``channel`` around the hold value where the tool stays above the table."""
    if channel == p.g:
        return float(p.lower[channel]), float(p.upper[channel])
    grid = np.linspace(p.lower[channel], p.upper[channel], 181)
    ok = []
    for value in grid:
        q = hold.copy()
        q[channel] = value
        ok.append(p.tool_height(q) >= FLOOR_CLEARANCE + 0.01)
    ok = np.array(ok)
    k = int(np.argmin(np.abs(grid - hold[channel])))
    if not ok[k]:
        raise TaskError(f"sweep hold pose of channel {channel + 1} puts the tool below the table")
    lo_k, hi_k = k, k
    while lo_k > 0 and ok[lo_k - 1]:
        lo_k -= 1
    while hi_k < len(grid) - 1 and ok[hi_k + 1]:
        hi_k += 1
    return float(grid[lo_k]), float(grid[hi_k])


def _lean_extend(p: Planner) -> dict:
    rng = p.rng
    repeats = 1 if p.quick else int(rng.integers(2, 4))
    for _ in range(repeats):
        back = p.pose(p.draw(p.profile.lean_back), p.gripper_open)
        p.move(back)
        p.hold(0.5, 1.5)
        forward = p.pose(p.draw(p.profile.lean_forward), p.gripper_open)
        p.move(forward)
        p.hold(0.5, 1.5)
    p.move(p.home)
    return {}


def _table_point(p: Planner, side: float) -> np.ndarray:
    rng, profile = p.rng, p.profile
    return np.array([rng.uniform(*profile.table_x), side * rng.uniform(*profile.table_y_abs),
                     rng.uniform(*profile.table_z)])


def _pick_place(p: Planner) -> dict:
    rng = p.rng
    side = 1.0 if rng.integers(0, 2) else -1.0
    pick, place = _table_point(p, side), _table_point(p, -side)
    pitch = rng.uniform(*p.profile.grasp_pitch)
    lift = np.array([0.0, 0.0, rng.uniform(*p.profile.lift)])
    p.move_tool(pick + lift, pitch, p.gripper_open)
    p.move_tool(pick, pitch, p.gripper_open)
    p.hold(0.3, 0.8)
    q = p.traj.pose
    q[p.g] = p.gripper_grip
    p.move(q, rng.uniform(0.8, 1.3))
    grasp_start = p.traj.time
    p.hold(0.2, 0.5)
    p.move_tool(pick + lift, pitch, p.gripper_grip)
    p.hold(0.2, 0.8)
    p.move_tool(place + lift, pitch, p.gripper_grip)
    p.move_tool(place, pitch, p.gripper_grip)
    p.hold(0.2, 0.6)
    grasp_end = p.traj.time
    q = p.traj.pose
    q[p.g] = p.gripper_open
    p.move(q, rng.uniform(0.8, 1.3))
    p.move_tool(place + lift, pitch, p.gripper_open)
    p.move(p.home)
    return {"grasp": (grasp_start, grasp_end)}


LIFT_HIGH = np.array([0.0, 0.0, 0.06])   # m above the object when approaching/leaving it
LIFT_LOW = np.array([0.0, 0.0, 0.02])


def _go_up_stay(p: Planner) -> dict:
    rng = p.rng
    pick = _table_point(p, 1.0 if rng.integers(0, 2) else -1.0)
    pick[1] *= 0.5
    pitch = rng.uniform(*p.profile.grasp_pitch)
    p.move_tool(pick + LIFT_HIGH, pitch, p.gripper_open)
    p.move_tool(pick, pitch, p.gripper_open)
    p.hold(0.3, 0.6)
    q = p.traj.pose
    q[p.g] = p.gripper_grip
    p.move(q, rng.uniform(0.8, 1.3))
    grasp_start = p.traj.time
    up = p.draw_box(p.profile.go_up.low, p.profile.go_up.high)
    p.move_tool(up, rng.uniform(*p.profile.go_up.pitch), p.gripper_grip)
    p.hold(4.0, 8.0)                 # "stay still": only tremor
    p.move_tool(pick + LIFT_LOW, pitch, p.gripper_grip)
    p.move_tool(pick, pitch, p.gripper_grip)
    grasp_end = p.traj.time
    q = p.traj.pose
    q[p.g] = p.gripper_open
    p.move(q, rng.uniform(0.8, 1.3))
    p.move_tool(pick + LIFT_HIGH, pitch, p.gripper_open)
    p.move(p.home)
    return {"grasp": (grasp_start, grasp_end)}


HOME_CLEARANCE_M = 0.005     # the tool at the home pose stays this far from the fixture's surface
MAX_FIXTURE_DRAWS = 50


class FixtureDrawError(RuntimeError):
    """No fixture face of the push box clears the tool at this draw's home pose. The home pose carries the task
    profile's noise, so a draw that puts the resting tool inside the box's reach is planned again from new random
    numbers, as one with a pose out of reach is (``na_sim.tasks.make_task``)."""


def _fixture_face_clear_of_home(p: Planner, box: Box, d: np.ndarray) -> np.ndarray:
    """A fixture face drawn from ``box`` whose cube leaves the tool at the home pose clear of it: the episode
    starts and ends at home, and a fixture placed on the resting tool (the next episode's, when a live rig loops
    its task) would press it with whatever the cube's placement gives."""
    tool = p.kin.tool_position(p.home[p.arm])
    for _ in range(MAX_FIXTURE_DRAWS):
        face = p.draw_box(box.low, box.high)
        centre = face + d * p.fixture_half_size
        gap = float(np.linalg.norm(np.maximum(np.abs(tool - centre) - p.fixture_half_size, 0.0)))
        if gap > p.tool_radius + HOME_CLEARANCE_M:
            return face
    raise FixtureDrawError(f"no fixture face in {box} leaves the tool at the home pose {np.round(tool, 3)} m "
                           f"clear after {MAX_FIXTURE_DRAWS} draws: move the push box or the home pose in the task "
                           "profile")


def _push(p: Planner, axis: str) -> dict:
    """Approach the fixture face that looks against ``axis``, press 1-3 times, retreat."""
    rng = p.rng
    d = np.array(PUSH_AXES[axis])
    # pz: press up on the underside (the fixture overhangs, the tool comes from below); nz: press down
    # on the top face; lateral: tool tilted down, the fingertips press the side face.
    box = p.profile.push[axis if axis in ("pz", "nz") else "lateral"]
    face = _fixture_face_clear_of_home(p, box, d)
    pitch = rng.uniform(*box.pitch)
    fixture = FixturePose(tuple(float(v) for v in face + d * p.fixture_half_size))
    # Plan the tool point (sphere centre): touching = one radius before the face.
    touch = face - d * p.tool_radius
    standoff = touch - d * rng.uniform(0.03, 0.045)
    # Via points clear of the cube: from above, or for +Z down beside the cube and in from the side.
    if axis == "pz":
        side = np.array([0.0, 1.0 if rng.integers(0, 2) else -1.0, 0.0]) * (p.fixture_half_size + 0.05)
        vias = [np.array([standoff[0], 0.0, face[2] + 2 * p.fixture_half_size + 0.04]) + side, standoff + side]
    else:
        vias = [standoff + np.array([0.0, 0.0, 0.05])]
    for via in vias:
        p.move_tool(via, pitch, p.gripper_grip)
    p.move_tool(standoff, pitch, p.gripper_grip)
    pitch = p.tool_pitch()           # press straight along the axis at the pitch reached here
    p.hold(0.3, 0.8)
    presses = 1 if p.quick else int(rng.integers(2, 4))
    intervals, targets, poses = [], [], []
    for _ in range(presses):
        near = touch - d * 0.004
        p.move_tool(near, pitch, p.gripper_grip, rng.uniform(0.6, 1.0), exact_pitch=True)
        target = touch + d * rng.uniform(*p.profile.press_depth[axis])
        pressed = p.move_tool(target, pitch, p.gripper_grip, rng.uniform(0.6, 1.2), exact_pitch=True)
        start = p.traj.time
        p.hold(1.0, 2.5)
        intervals.append((start, p.traj.time))
        targets.append(target)
        poses.append(pressed)
        p.move_tool(touch - d * rng.uniform(0.01, 0.02), pitch, p.gripper_grip, rng.uniform(0.5, 0.9),
                    exact_pitch=True)
        p.hold(0.3, 0.8)
    p.move_tool(standoff, pitch, p.gripper_grip)
    for via in reversed(vias):
        p.move_tool(via, pitch, p.gripper_grip)
    p.move(p.home)
    return {"fixture": fixture, "push_direction": d, "press_intervals": intervals, "press_targets": targets,
            "press_poses": poses}


BUILDERS: dict[str, Callable[[Planner], dict]] = {
    "circle_cw": lambda p: _circle(p, clockwise=True),
    "circle_ccw": lambda p: _circle(p, clockwise=False),
    **{f"sweep_joint{k + 1}": (lambda p, k=k: _sweep(p, k)) for k in range(4)},
    "sweep_gripper": lambda p: _sweep(p, p.g),
    "lean_extend": _lean_extend,
    "pick_place": _pick_place,
    "go_up_stay": _go_up_stay,
    "pick_place_restricted": _pick_place,
    **{f"push_{a}": (lambda p, a=a: _push(p, a)) for a in PUSH_AXES},
    **{f"nopush_{a}": (lambda p, a=a: _push(p, a)) for a in PUSH_AXES},
}
