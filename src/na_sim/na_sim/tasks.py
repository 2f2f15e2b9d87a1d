"""Scripted operator: the task library of the paper's Table A15, randomised and human-like.

A :class:`TaskEpisode` is what a human operator does with the leader arm in one recording:
the leader pose over time (one value per joint of the robot spec: joint-side rad, gripper = servo
angle rad), when a payload hangs in the gripper, where the F/T fixture stands (or None) and
whether the rig's restricted joint is restricted. ROS-free; the offline generator and the live
rig play it. Every robot-specific number (rest pose, IK joints, workspace ranges, payload sets,
which tasks a robot runs) comes from the robot's task profile (:mod:`na_sim.task_profile`).

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

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from na_common.episode_bag.metadata import NOMINAL_CONDITION, restricted_condition, task_instance_id
from na_common.fixture import FixturePose
from na_description import RobotSpec, load_spec
from na_description.model import Kinematics
from na_sim.ik import IKError, solve_ik, tool_pitch
from na_sim.task_profile import TaskProfile, TaskProfileError, task_profile

PUSH_AXES: dict[str, tuple[float, float, float]] = {
    "px": (1.0, 0.0, 0.0), "nx": (-1.0, 0.0, 0.0), "py": (0.0, 1.0, 0.0),
    "ny": (0.0, -1.0, 0.0), "pz": (0.0, 0.0, 1.0), "nz": (0.0, 0.0, -1.0),
}
PAYLOAD_TASKS = ("pick_place", "go_up_stay", "pick_place_restricted")
TASK_IDS: tuple[str, ...] = (
    "circle_cw", "circle_ccw",
    "sweep_joint1", "sweep_joint2", "sweep_joint3", "sweep_joint4", "sweep_gripper",
    "lean_extend", "pick_place", "go_up_stay",
    *(f"push_{a}" for a in PUSH_AXES), *(f"nopush_{a}" for a in PUSH_AXES),
    "pick_place_restricted",
)

JOINT_MARGIN = 0.05          # rad kept clear of every spec joint limit
FLOOR_CLEARANCE = 0.015      # m, lowest tool-point height a scripted pose may reach
TREMOR_AMPLITUDE = 0.0012    # rad per sine (3 sines, 1.5-4 Hz: slow hand unsteadiness) on the arm joints
SWEEP_FRACTION = 0.9         # paper, NAD free-motion subset: sweeps cover ~90 % of the feasible range
# Fixture: the F/T sensor frame sits at the centre of a cube; a sphere at the tool point
# presses one face. Defaults = na_sim/config/sim_rig.yaml (fixture half_size_m, tool_collider_radius_m).
FIXTURE_HALF_SIZE = 0.02     # m
TOOL_RADIUS = 0.008          # m
MAX_PLAN_ATTEMPTS = 5


class TaskError(ValueError):
    """Unknown task, or a payload/parameter the task does not accept."""


def fixture_dict(pose: FixturePose) -> dict[str, list[float]]:
    """Fixture pose as the ``fixture:`` YAML/metadata mapping (docs/INTERFACES.md)."""
    return {"position": [float(v) for v in pose.position], "rpy": [float(v) for v in pose.rpy]}


def min_jerk(tau: np.ndarray) -> np.ndarray:
    """Minimum-jerk position profile on [0, 1] (zero velocity and acceleration at both ends)."""
    tau = np.clip(tau, 0.0, 1.0)
    return tau**3 * (10.0 - 15.0 * tau + 6.0 * tau**2)


@dataclass
class _Segment:
    start: float
    duration: float
    q0: np.ndarray
    q1: np.ndarray
    path: np.ndarray | None = None     # (K, n_motors) poses along the segment, followed with a min-jerk phase

    def evaluate(self, t: np.ndarray) -> np.ndarray:
        phase = min_jerk((t - self.start) / self.duration)
        if self.path is None:
            return self.q0 + phase[:, None] * (self.q1 - self.q0)
        x = phase * (len(self.path) - 1)
        i = np.minimum(x.astype(int), len(self.path) - 2)
        frac = (x - i)[:, None]
        return self.path[i] * (1.0 - frac) + self.path[i + 1] * frac


class Trajectory:
    """Leader pose over time: a chain of minimum-jerk moves, holds and sampled paths."""

    def __init__(self, start_pose: np.ndarray) -> None:
        self._segments: list[_Segment] = []
        self._pose = np.asarray(start_pose, dtype=float).copy()
        self._time = 0.0

    @property
    def time(self) -> float:
        """End time of the trajectory so far (s)."""
        return self._time

    @property
    def pose(self) -> np.ndarray:
        return self._pose.copy()

    def move_to(self, pose: np.ndarray, duration: float) -> None:
        pose = np.asarray(pose, dtype=float)
        self._segments.append(_Segment(self._time, duration, self._pose.copy(), pose.copy()))
        self._pose, self._time = pose.copy(), self._time + duration

    def hold(self, duration: float) -> None:
        self.move_to(self._pose, duration)

    def follow(self, path: np.ndarray, duration: float) -> None:
        """Follow a dense pose path (starting at the current pose) with a min-jerk phase."""
        path = np.asarray(path, dtype=float)
        self._segments.append(_Segment(self._time, duration, path[0], path[-1], path))
        self._pose, self._time = path[-1].copy(), self._time + duration

    def evaluate(self, times: np.ndarray) -> np.ndarray:
        times = np.atleast_1d(np.asarray(times, dtype=float))
        out = np.repeat(self._segments[0].q0[None, :], len(times), axis=0) if self._segments else \
            np.repeat(self._pose[None, :], len(times), axis=0)
        for seg in self._segments:
            mask = times >= seg.start
            if np.any(mask):
                out[mask] = seg.evaluate(times[mask])
        return out


@dataclass
class _Tremor:
    """Small multi-sine tremor on the arm joints (zero on the gripper)."""

    amplitude: np.ndarray   # (3, n_motors)
    frequency: np.ndarray   # (3, n_motors) Hz
    phase: np.ndarray       # (3, n_motors) rad

    @classmethod
    def random(cls, rng: np.random.Generator, n_motors: int, scale: float, gripper: int) -> _Tremor:
        amplitude = scale * TREMOR_AMPLITUDE * rng.uniform(0.5, 1.0, (3, n_motors))
        amplitude[:, gripper] = 0.0
        return cls(amplitude, rng.uniform(1.5, 4.0, (3, n_motors)), rng.uniform(0, 2 * np.pi, (3, n_motors)))

    def evaluate(self, times: np.ndarray) -> np.ndarray:
        arg = 2 * np.pi * self.frequency[None] * times[:, None, None] + self.phase[None]
        return np.sum(self.amplitude[None] * np.sin(arg), axis=1)


@dataclass
class TaskEpisode:
    """One scripted recording: leader pose over time plus what the environment does."""

    task: str
    seed: int
    payload_grams: float
    force_source: str
    condition: str
    fixture: FixturePose | None
    grasp_intervals: list[tuple[float, float]]
    duration: float
    trajectory: Trajectory = field(repr=False)
    tremor: _Tremor = field(repr=False)
    lower: np.ndarray = field(repr=False)
    upper: np.ndarray = field(repr=False)
    push_direction: np.ndarray | None = None                            # base frame, unit
    press_intervals: list[tuple[float, float]] = field(default_factory=list)   # s, commanded past the face
    press_targets: list[np.ndarray] = field(default_factory=list)      # tool-point targets (m) while pressed
    press_poses: list[np.ndarray] = field(default_factory=list)        # leader poses solving those targets

    @property
    def restricted(self) -> bool:
        """The rig's condition joint is restricted (the episode's condition is not nominal)."""
        return self.condition != NOMINAL_CONDITION

    @property
    def payload_kg(self) -> float:
        return self.payload_grams / 1000.0

    @property
    def task_instance(self) -> str:
        return task_instance_id(self.task, self.payload_grams, self.condition)

    def poses(self, times) -> np.ndarray:
        """Leader poses at ``times`` (s), shape (N, n_motors), inside the spec limits."""
        times = np.atleast_1d(np.asarray(times, dtype=float))
        q = self.trajectory.evaluate(times) + self.tremor.evaluate(times)
        return np.clip(q, self.lower, self.upper)

    def pose(self, t: float) -> np.ndarray:
        return self.poses([t])[0]

    def grasped(self, t: float) -> bool:
        """True while the payload hangs in the gripper (only for payload > 0)."""
        return self.payload_grams > 0 and any(a <= t < b for a, b in self.grasp_intervals)

    def metadata(self) -> dict[str, Any]:
        """Episode metadata keys owned by the task (docs/INTERFACES.md)."""
        return {"task": self.task, "task_instance": self.task_instance, "payload_grams": self.payload_grams,
                "force_source": self.force_source, "condition": self.condition, "seed": self.seed,
                "fixture": fixture_dict(self.fixture) if self.fixture else None}


# ---- planning helpers ---------------------------------------------------------------------
class _Planner:
    """Shared state of one task build: spec, profile, kinematics, rng, trajectory.

    ``q_arm`` holds the IK joints of the last pose (the IK's continuation start); poses are full
    spec-order vectors, the gripper at ``profile.gripper``.
    """

    def __init__(self, spec: RobotSpec, profile: TaskProfile, kin: Kinematics, rng: np.random.Generator, quick: bool,
                 fixture_half_size: float, tool_radius: float) -> None:
        self.spec, self.profile, self.kin, self.rng, self.quick = spec, profile, kin, rng, quick
        self.fixture_half_size, self.tool_radius = fixture_half_size, tool_radius
        self.ik_joints, self.arm, self.g = profile.ik, profile.arm, profile.gripper
        lower, upper = spec.servo_angle_limits()
        self.lower, self.upper = lower + JOINT_MARGIN, upper - JOINT_MARGIN
        slide_open = rng.uniform(*profile.gripper_open_slide)
        self.gripper_open = float(spec.gripper.slide_to_angle(slide_open))
        self.gripper_grip = float(spec.gripper.slide_to_angle(rng.uniform(*profile.gripper_grip_slide)))
        self.speed = rng.uniform(0.5, 1.0)        # operator's peak joint speed, rad/s
        home = np.zeros(spec.n_motors)
        home[self.arm] = profile.home
        home[self.ik_joints] += rng.normal(0, profile.home_noise, len(self.ik_joints))
        home[self.g] = self.gripper_open
        self.home = home
        self.traj = Trajectory(self.clip(self.home))
        self.q_arm = self.home[self.ik_joints].copy()

    def pose(self, q_ik: np.ndarray, gripper: float) -> np.ndarray:
        """A full pose: the IK joints ``q_ik``, the other arm joints as in the rest pose, the gripper."""
        q = self.home.copy()
        q[self.ik_joints] = q_ik
        q[self.g] = gripper
        return q

    def draw(self, ranges) -> np.ndarray:
        """One uniform draw per (low, high) range, in order."""
        return np.array([self.rng.uniform(low, high) for low, high in ranges])

    def draw_box(self, low, high) -> np.ndarray:
        return self.draw(zip(low, high, strict=True))

    def clip(self, q: np.ndarray) -> np.ndarray:
        return np.clip(q, self.lower, self.upper)

    def duration_for(self, q0: np.ndarray, q1: np.ndarray) -> float:
        """Min-jerk duration so the peak speed (1.875 x mean) stays at the operator's speed."""
        arm, g = self.arm, self.g
        distance = float(np.max(np.abs(q1[arm] - q0[arm])))
        gripper = abs(q1[g] - q0[g]) / 2.0
        return max(0.6, 1.875 * max(distance, gripper) / self.speed) * self.rng.uniform(0.9, 1.2)

    def move(self, q: np.ndarray, duration: float | None = None) -> None:
        q = self.clip(q)
        self.traj.move_to(q, duration or self.duration_for(self.traj.pose, q))
        self.q_arm = q[self.ik_joints].copy()

    def hold(self, low: float, high: float) -> None:
        scale = 0.4 if self.quick else 1.0
        self.traj.hold(max(0.2, scale * self.rng.uniform(low, high)))

    def ik(self, target, pitch: float, *, exact_pitch: bool = False) -> np.ndarray:
        """IK joints for a tool target; like an operator, tilt the wrist when the pitch is out of reach."""
        offsets = (0.0,) if exact_pitch else (0.0, -0.15, 0.15, -0.3, 0.3, -0.5, 0.5)
        error: IKError | None = None
        hold = self.home[self.arm[len(self.ik_joints):]]
        for offset in offsets:
            try:
                q = solve_ik(self.kin, self.profile, np.asarray(target, dtype=float), pitch + offset, self.q_arm,
                             hold=hold)
            except IKError as err:
                error = error or err
                continue
            self.q_arm = q
            return q
        raise error

    def move_tool(self, target, pitch: float, gripper: float, duration: float | None = None, *,
                  exact_pitch: bool = False) -> np.ndarray:
        q = self.pose(self.ik(target, pitch, exact_pitch=exact_pitch), gripper)
        self.move(q, duration)
        return q

    def tool_height(self, q: np.ndarray) -> float:
        return float(self.kin.tool_position(q[self.arm])[2])

    def tool_pitch(self) -> float:
        return tool_pitch(self.q_arm, self.profile)


def _circle(p: _Planner, clockwise: bool) -> dict:
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


def _sweep(p: _Planner, channel: int) -> dict:
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


def _feasible_range(p: _Planner, hold: np.ndarray, channel: int) -> tuple[float, float]:
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


def _lean_extend(p: _Planner) -> dict:
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


def _table_point(p: _Planner, side: float) -> np.ndarray:
    rng, profile = p.rng, p.profile
    return np.array([rng.uniform(*profile.table_x), side * rng.uniform(*profile.table_y_abs),
                     rng.uniform(*profile.table_z)])


def _pick_place(p: _Planner) -> dict:
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


def _go_up_stay(p: _Planner) -> dict:
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


def _push(p: _Planner, axis: str) -> dict:
    """Approach the fixture face that looks against ``axis``, press 1-3 times, retreat."""
    rng = p.rng
    d = np.array(PUSH_AXES[axis])
    # pz: press up on the underside (the fixture overhangs, the tool comes from below); nz: press down
    # on the top face; lateral: tool tilted down, the fingertips press the side face.
    box = p.profile.push[axis if axis in ("pz", "nz") else "lateral"]
    face = p.draw_box(box.low, box.high)
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


_BUILDERS: dict[str, Callable[[_Planner], dict]] = {
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


def check_task_name(task: str, spec: RobotSpec | None = None) -> str:
    """``task`` if it is a task id (and, given a spec, one its robot's task profile runs)."""
    if task not in _BUILDERS:
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
    # A draw whose poses are out of reach is redrawn (deterministically: attempt number in the seed).
    for attempt in range(MAX_PLAN_ATTEMPTS):
        rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, task_index, round(payload * 1000), attempt])
        planner = _Planner(spec, profile, kin, rng, quick, fixture_half_size, tool_radius)
        planner.hold(0.5, 1.5)
        try:
            extra = _BUILDERS[task](planner)
            break
        except IKError as err:
            failure = err
    else:
        raise TaskError(f"task '{task}' seed {seed}: no reachable plan in {MAX_PLAN_ATTEMPTS} draws: {failure}")
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
        tremor=_Tremor.random(rng, spec.n_motors, 1.0, profile.gripper), lower=planner.lower - 0.5 * JOINT_MARGIN,
        upper=planner.upper + 0.5 * JOINT_MARGIN,
        push_direction=extra.get("push_direction"),
        press_intervals=extra.get("press_intervals", []) if is_push else [],
        press_targets=extra.get("press_targets", []), press_poses=extra.get("press_poses", []),
    )
