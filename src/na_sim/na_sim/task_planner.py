"""The shared state of one task build: the robot, its task profile, the operator's speed and rest pose,
and the moves a script makes (joint moves, holds, tool-point moves through IK, tilting the wrist like an
operator when a pitch is out of reach)."""

from __future__ import annotations

import numpy as np

from na_description import RobotSpec
from na_description.model import Kinematics
from na_sim.ik import IKError, solve_ik, tool_pitch
from na_sim.task_episode import Trajectory
from na_sim.task_profile import TaskProfile

JOINT_MARGIN = 0.05          # rad kept clear of every spec joint limit


class Planner:
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
        hold = self.home[np.setdiff1d(self.arm, self.ik_joints)]
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
