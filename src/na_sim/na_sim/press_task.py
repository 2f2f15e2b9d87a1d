"""``press_hold``: a contact-rich task where position alone is ambiguous and force decides success.

The gripper holds an object of unknown mass; the tool starts hovering above the F/T fixture's top face,
presses the object's tool point down on it and must hold the *contact* force inside a band. The face height
and the mass change with the seed (``FACE_HEIGHT_RANGE``, ``PAYLOAD_RANGE``). A position-controlled arm
presses with a force that follows from how far its command leads the measured position, but the object's
weight loads the same joints the same way (it hangs at the tool point): from joint positions and commands
alone, a controller cannot tell contact force from weight, nor where the face is.

ROS-free. Three parts:
* :func:`make_press_episode`: seed -> fixture pose, start (hover) pose, tool pitch;
* :class:`PressExpert`: the scripted expert, a closed-loop operator on the rig's ground-truth contact
  force (descend until touch, then an integral force loop on the tool height); it moves the leader arm;
* :func:`score_press`: the success criterion on the ground-truth force of a trial.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from na_common.fixture import FixturePose
from na_description import RobotSpec, load_spec
from na_description.model import Kinematics
from na_sim.ik import solve_ik
from na_sim.tasks import profile_of

PRESS_TASK = "press_hold"

# Task geometry (base frame, m).
FACE_HEIGHT_RANGE = (0.050, 0.085)   # top face of the fixture, drawn per seed
FIXTURE_XY = (0.20, 0.0)             # fixture centre; jittered per seed by FIXTURE_XY_JITTER
FIXTURE_XY_JITTER = 0.006
HOVER_HEIGHT = 0.135                 # tool point commanded at the start: clear of the highest face with 0.5 kg sagging
TOOL_PITCH = 1.35                    # rad, tool tilted down onto the top face
GRIP_SLIDE = 0.004                   # m, closed gripper holding the object
PAYLOAD_RANGE = (0.0, 0.5)           # kg, the held object; 0.5 kg: rated payload (docs/REFERENCES.md, Paper)

# Success criterion: upward contact force on the tool inside the band, continuously, and never a slam.
FORCE_BAND = (7.0, 9.0)              # N
HOLD_SECONDS = 1.5                   # s in the band without leaving it
SLAM_FORCE = 20.0                    # N, a peak above this fails the trial
TRIAL_TIMEOUT = 15.0                 # s from the policy's first command (its 2.5 s move to the start pose included)

# Expert.
DESCENT_SPEED = 0.025                # m/s
TOUCH_FORCE = 0.8                    # N, contact detected (ground truth)
FORCE_TARGET = 8.0                   # N, the middle of the band
FORCE_GAIN = 0.006                   # m/s per N of force error (integral action on the height)
MAX_PRESS_SPEED = 0.02               # m/s
SETTLE_SECONDS = 5.0                 # s at the hover after engage (the fixture is placed)
START_TOLERANCE = 0.12               # rad per arm joint: back at the start pose (gravity offset up to ~0.07 at 0.5 kg)
START_CLEARANCE = 0.01               # m, and its tool point (sphere surface) at least this far above the face


@dataclass(frozen=True)
class PressEpisode:
    seed: int
    face_height: float               # m, top face of the fixture
    payload_kg: float                # the held object
    fixture: FixturePose             # sensor frame = fixture cube centre
    hover: np.ndarray                # (3,) tool point at the start
    start_pose: np.ndarray           # (5,) joint side, both arms at reset (gripper: servo angle)


def make_press_episode(seed: int, *, spec: RobotSpec | None = None, kinematics: Kinematics | None = None,
                       fixture_half_size: float = 0.02) -> PressEpisode:
    """The fixture and start pose of one seed (the same seed gives the same episode)."""
    spec = spec or load_spec()
    kin = kinematics or Kinematics(spec)
    rng = np.random.default_rng([int(seed) & 0xFFFFFFFF, 0x5E55])
    face = float(rng.uniform(*FACE_HEIGHT_RANGE))
    xy = np.asarray(FIXTURE_XY) + rng.uniform(-FIXTURE_XY_JITTER, FIXTURE_XY_JITTER, 2)
    payload = float(rng.uniform(*PAYLOAD_RANGE))
    fixture = FixturePose((float(xy[0]), float(xy[1]), face - fixture_half_size))
    hover = np.array([FIXTURE_XY[0], FIXTURE_XY[1], HOVER_HEIGHT])
    arm = solve_ik(kin, profile_of(spec), hover, TOOL_PITCH, np.array([0.0, -0.3, 0.3, 1.35]))
    start = np.append(arm, float(spec.gripper.slide_to_angle(GRIP_SLIDE)))
    return PressEpisode(int(seed), face, payload, fixture, hover, start)


class PressExpert:
    """Closed-loop expert: hover, descend at ``DESCENT_SPEED`` until the true contact force exceeds
    ``TOUCH_FORCE``, then move the tool height by ``FORCE_GAIN`` x (target - force) per second.

    ``step(dt, contact_force_z)`` returns the leader pose (joint side, 5). It holds the hover until
    ``SETTLE_SECONDS`` after :meth:`engage`.
    """

    def __init__(self, episode: PressEpisode, spec: RobotSpec | None = None,
                 kinematics: Kinematics | None = None) -> None:
        self.episode = episode
        self.kin = kinematics or Kinematics(spec or load_spec())
        self.profile = profile_of(self.kin.spec)
        self.height = float(episode.hover[2])
        self.phase = "wait"
        self.since = 0.0              # s in the current phase
        self.touched_at: float | None = None
        self.time = 0.0
        self._q_arm = episode.start_pose[:4].copy()

    def clear_of_face(self, q_arm: np.ndarray, tool_radius: float) -> bool:
        """The tool sphere of arm pose ``q_arm`` is at least ``START_CLEARANCE`` above the fixture's face."""
        height = float(self.kin.tool_position(np.asarray(q_arm, dtype=float)[:4])[2])
        return height - tool_radius >= self.episode.face_height + START_CLEARANCE

    def engage(self) -> None:
        if self.phase == "wait":
            self.phase, self.since = "settle", 0.0

    def step(self, dt: float, contact_force_z: float) -> np.ndarray:
        self.time += dt
        self.since += dt
        if self.phase == "settle" and self.since >= SETTLE_SECONDS:
            self.phase, self.since = "descend", 0.0
        if self.phase == "descend":
            self.height -= DESCENT_SPEED * dt
            if contact_force_z > TOUCH_FORCE:
                self.phase, self.since, self.touched_at = "press", 0.0, self.time
        elif self.phase == "press":
            rate = float(np.clip(FORCE_GAIN * (FORCE_TARGET - contact_force_z), -MAX_PRESS_SPEED, MAX_PRESS_SPEED))
            self.height -= rate * dt
        self.height = max(self.height, FACE_HEIGHT_RANGE[0] - 0.03)
        return self.pose()

    def pose(self) -> np.ndarray:
        target = np.array([self.episode.hover[0], self.episode.hover[1], self.height])
        self._q_arm = solve_ik(self.kin, self.profile, target, TOOL_PITCH, self._q_arm)
        return np.append(self._q_arm, self.episode.start_pose[4])


@dataclass(frozen=True)
class PressScore:
    success: bool
    time_to_success: float           # s from the trial start to the end of the held band (nan: failed)
    peak_force: float                # N, largest upward contact force
    slammed: bool                    # the peak exceeded SLAM_FORCE
    longest_hold: float              # s, longest stretch inside the band


def contact_from_truth(truth_force_z, payload_kg: float) -> np.ndarray:
    """Upward contact force on the tool from the rig's ``/sim/truth/wrench`` z (contact plus the held object's
    weight, ``-m g``): the weight added back."""
    from na_sim.rig import GRAVITY

    return np.asarray(truth_force_z, dtype=float) + payload_kg * GRAVITY


def score_press(times: np.ndarray, contact_force_z: np.ndarray, *, band: tuple[float, float] = FORCE_BAND,
                hold: float = HOLD_SECONDS, slam: float = SLAM_FORCE) -> PressScore:
    """Success: the force stays in ``band`` for ``hold`` s without a gap, and never exceeds ``slam``
    before that. ``times`` (s from the trial start, increasing) and the upward contact force (N)."""
    times = np.asarray(times, dtype=float)
    force = np.asarray(contact_force_z, dtype=float)
    if times.shape != force.shape or times.ndim != 1:
        raise ValueError(f"times and forces must be 1-D of one length, got {times.shape} and {force.shape}")
    if times.size == 0:
        return PressScore(False, float("nan"), 0.0, False, 0.0)
    inside = (force >= band[0]) & (force <= band[1])
    start, longest, done_at = None, 0.0, None
    for k in range(times.size):
        if force[k] > slam:
            break
        if inside[k]:
            start = times[k] if start is None else start
            longest = max(longest, times[k] - start)
            if times[k] - start >= hold:
                done_at = times[k]
                break
        else:
            start = None
    window = force if done_at is None else force[times <= done_at]
    peak = float(np.max(window))
    slammed = bool(np.max(force) > slam) and done_at is None
    return PressScore(done_at is not None, float("nan") if done_at is None else float(done_at), peak, slammed,
                      float(longest))
