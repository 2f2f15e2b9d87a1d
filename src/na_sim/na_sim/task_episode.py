"""What one scripted recording is: the leader's pose over time (chains of minimum-jerk moves, holds and
sampled paths, with a small hand tremor on top), the payload, the fixture and the condition of the episode.

Every move is a minimum-jerk segment, the classic model of point-to-point human arm movement
(planned by :mod:`na_sim.task_planner`, scripted by :mod:`na_sim.task_builders`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from na_common.episode_bag.metadata import NOMINAL_CONDITION, task_instance_id
from na_common.fixture import FixturePose

TREMOR_AMPLITUDE = 0.0012    # rad per sine (3 sines, 1.5-4 Hz: slow hand unsteadiness) on the arm joints


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
class Tremor:
    """Small multi-sine tremor on the arm joints (zero on the gripper)."""

    amplitude: np.ndarray   # (3, n_motors)
    frequency: np.ndarray   # (3, n_motors) Hz
    phase: np.ndarray       # (3, n_motors) rad

    @classmethod
    def random(cls, rng: np.random.Generator, n_motors: int, scale: float, gripper: int) -> Tremor:
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
    tremor: Tremor = field(repr=False)
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
