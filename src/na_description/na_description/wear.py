"""The wear monitor's physics, shared by training (offline) and the estimator (live) (ROS-free).

A worn servo (dried grease, worn gears, a weaker motor) needs more current than a healthy one for the same
motion: the friction that opposes the motion has grown. The reference is the healthy arm a model was trained
on: its effort-to-torque map with friction (:class:`na_description.friction.FrictionCurrentMap`, fitted on its
nominal free-motion frames) and the statistics below. The rigid-body torque the motion needs (inverse
dynamics, with a causal backward-difference acceleration) minus the map's torque is the residual ``τ_ext``.
Where friction grew, the residual opposes the motion: ``w = −τ_ext·sgn(q̇)`` rises above what the reference
showed.

Per motor, ``w`` is standardised by its mean and spread over the reference's nominal frames (``z``), taken
separately in bands of the joint's acceleration magnitude ``|q̈|`` (edges at quantiles of the reference's
counted frames): the rigid-body torque of an accelerating joint carries the error of the differentiated
velocity and of the inertias, so its residual spreads several times wider than a joint moving evenly, where a
worn motor's extra friction stands out most. One spread for all frames would hide the shift in the quiet frames
behind the noise of the others. A frame counts only while the joint moves (``|q̇| ≥ min_speed``) and the model
sees no contact (contact probability at most ``contact_limit``): a push or a grasp is not wear. The evidence is
a one-sided CUSUM of ``z − drift`` (Page, 1954; ``drift`` half the shift in spreads it is built to see),
accumulated by the condition monitor's :class:`na_common.condition_monitor.EvidenceMonitor` with the
reference's per-motor thresholds (``degraded``; suspect from half of it). How the reference is fitted:
``na_training.wear``.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from na_description.friction import FrictionCurrentMap, backlash_flank
from na_description.rigid_body import RigidBodyModel
from na_description.spec import RobotSpec

REFERENCE_KIND = "na-wear-reference"
REFERENCE_VERSION = 2       # 1: one mean and spread per motor (read as a single band)


@dataclass(frozen=True)
class WearSettings:
    min_speed: float = 0.1        # rad/s: slower frames carry no friction evidence (the sign of q̇ is unreliable)
    contact_limit: float = 0.5    # the model's contact probability above which a frame is left out (1: none is)
    drift: float = 0.75           # spreads: CUSUM reference value, half the 1.5-spread shift it is built to see
    acceleration_quantiles: tuple[float, ...] = (0.5, 0.8, 0.95)   # band edges in |q̈| (reference quantiles)
    margin: float = 1.5           # degraded threshold = margin x the largest reference nominal episode's evidence
    min_degraded_s: float = 1.0   # and never below this (s of spreads): a few reference episodes are a thin sample
    max_frame_s: float = 0.1      # a longer gap between frames counts as this long

    def __post_init__(self) -> None:
        for name in ("min_speed", "drift", "max_frame_s", "min_degraded_s"):
            if not getattr(self, name) > 0.0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if not 0.0 < self.contact_limit <= 1.0:
            raise ValueError(f"contact_limit must be in (0, 1], got {self.contact_limit}")
        if not self.margin >= 1.0:
            raise ValueError(f"margin must be at least 1, got {self.margin}")
        quantiles = np.asarray(self.acceleration_quantiles, dtype=float)
        if quantiles.ndim != 1 or np.any((quantiles <= 0.0) | (quantiles >= 1.0)) or np.any(np.diff(quantiles) <= 0):
            raise ValueError("acceleration_quantiles must rise strictly within (0, 1), got "
                             f"{list(self.acceleration_quantiles)}")
        object.__setattr__(self, "acceleration_quantiles", tuple(float(q) for q in quantiles))


@dataclass
class WearReference:
    """What a healthy arm looks like: its actuator map, its residual statistics and the thresholds."""

    robot: str
    joint_names: list[str]
    friction: FrictionCurrentMap
    mean: np.ndarray              # [motor, band]: mean of w over the reference's counted frames (N·m)
    spread: np.ndarray            # [motor, band]: its standard deviation (N·m)
    degraded: np.ndarray          # per motor: evidence (s of spreads) from which degraded
    settings: WearSettings = field(default_factory=WearSettings)
    episodes: int = 0             # reference nominal episodes the thresholds came from
    monitored: np.ndarray | None = None   # per motor: moved in the reference (else it carries no evidence)
    acceleration_edges: np.ndarray | None = None   # [motor, band − 1]: |q̈| band edges (rad/s²); None: one band

    def __post_init__(self) -> None:
        n = len(self.joint_names)
        if self.monitored is None:
            self.monitored = np.ones(n, dtype=bool)
        self.mean = np.asarray(self.mean, dtype=float).reshape(n, -1)
        self.spread = np.asarray(self.spread, dtype=float).reshape(n, -1)
        bands = self.mean.shape[1]
        if self.acceleration_edges is None:
            self.acceleration_edges = np.zeros((n, 0))
        self.acceleration_edges = np.asarray(self.acceleration_edges, dtype=float).reshape(n, -1)
        if self.spread.shape[1] != bands or self.acceleration_edges.shape[1] != bands - 1:
            raise ValueError(f"a wear reference needs one mean and spread per acceleration band: {bands} means, "
                             f"{self.spread.shape[1]} spreads, {self.acceleration_edges.shape[1]} band edges")

    @property
    def suspect(self) -> np.ndarray:
        return 0.5 * self.degraded

    def check_robot(self, spec: RobotSpec) -> None:
        """ValueError unless the reference is for ``spec``'s robot."""
        if self.robot != spec.name:
            raise ValueError(f"the wear reference is for robot '{self.robot}', the arm is '{spec.name}'")

    def to_json(self) -> dict:
        friction = {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in asdict(self.friction).items()}
        return {"kind": REFERENCE_KIND, "version": REFERENCE_VERSION, "robot": self.robot,
                "joint_names": list(self.joint_names), "friction": friction, "mean": self.mean.tolist(),
                "spread": self.spread.tolist(), "degraded": self.degraded.tolist(),
                "settings": asdict(self.settings), "episodes": self.episodes,
                "monitored": [bool(m) for m in self.monitored],
                "acceleration_edges": self.acceleration_edges.tolist()}

    @classmethod
    def from_json(cls, data: dict) -> WearReference:
        version = data.get("version")
        if data.get("kind") != REFERENCE_KIND or version not in (1, REFERENCE_VERSION):
            raise ValueError(f"not a wear reference (kind {data.get('kind')!r}, version {version!r})")
        settings = dict(data["settings"])
        if version == 1:     # fitted before the acceleration bands: one band, as it was fitted
            settings["acceleration_quantiles"] = ()
        friction = {k: (np.asarray(v, dtype=float) if isinstance(v, list) else v)
                    for k, v in data["friction"].items()}
        return cls(robot=data["robot"], joint_names=list(data["joint_names"]),
                   friction=FrictionCurrentMap(**friction), mean=np.asarray(data["mean"], dtype=float),
                   spread=np.asarray(data["spread"], dtype=float),
                   degraded=np.asarray(data["degraded"], dtype=float),
                   settings=WearSettings(**settings), episodes=int(data.get("episodes", 0)),
                   monitored=np.asarray(data["monitored"], dtype=bool),
                   acceleration_edges=(None if version == 1 else np.asarray(data["acceleration_edges"], dtype=float)))

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> WearReference:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise ValueError(f"{path} is not a readable wear reference ({err})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{path} is not a wear reference")
        try:
            return cls.from_json(data)
        except KeyError as err:
            raise ValueError(f"{path} is not a complete wear reference (no {err})") from None
        except TypeError as err:
            raise ValueError(f"{path} is not a valid wear reference ({err})") from None


def opposing_residual(tau_ext: np.ndarray, velocity: np.ndarray, contact_prob: np.ndarray,
                      settings: WearSettings) -> np.ndarray:
    """w = −τ_ext·sgn(q̇) [T, n] (N·m) in frames where the joint moves and the model sees no contact, else NaN."""
    w = -np.asarray(tau_ext, dtype=float) * np.sign(velocity)
    counted = ((np.abs(velocity) >= settings.min_speed)
               & (np.asarray(contact_prob, dtype=float).reshape(-1, 1) <= settings.contact_limit)
               & np.isfinite(w))
    return np.where(counted, w, np.nan)


def acceleration_band(edges: np.ndarray, acceleration: np.ndarray) -> np.ndarray:
    """Each frame's |q̈| band per motor [T, n]: how many of the motor's band edges ``edges`` [n, b − 1] its
    ``|acceleration|`` [T, n] reaches (an unknown acceleration counts as zero)."""
    magnitude = np.nan_to_num(np.abs(np.atleast_2d(np.asarray(acceleration, dtype=float))))
    return np.count_nonzero(magnitude[:, :, None] >= edges[None], axis=2)


def standardised_excess(w: np.ndarray, acceleration: np.ndarray, reference: WearReference) -> np.ndarray:
    """The CUSUM input ``(w − mean) / spread − drift`` [T, n], each frame by the mean and spread of its joint's
    ``|q̈|`` band; NaN where w is and on motors not monitored."""
    w = np.atleast_2d(np.asarray(w, dtype=float))
    motors = np.arange(w.shape[1])
    band = acceleration_band(reference.acceleration_edges, acceleration)
    z = (w - reference.mean[motors, band]) / reference.spread[motors, band] - reference.settings.drift
    return np.where(reference.monitored, z, np.nan)


class WearFrames:
    """The opposing residual of an arm's frames as they arrive, in batches of any size (arm joints in spec order):
    the acceleration and the backlash flank carry over from one batch to the next, so batches give the numbers of
    the whole sequence at once. Offline (``na_training.wear``) and live (the estimator) both run it."""

    def __init__(self, spec: RobotSpec, friction: FrictionCurrentMap, settings: WearSettings,
                 rigid_body: RigidBodyModel | None = None) -> None:
        self.friction, self.settings = friction, settings
        self.rigid_body = rigid_body or RigidBodyModel(spec)
        self.reset()

    def reset(self) -> None:
        """No frame before the next one."""
        self._last: tuple[float, np.ndarray] | None = None
        self._flank = np.zeros(len(self.friction.slope))

    def opposing(self, time_s: np.ndarray, position: np.ndarray, velocity: np.ndarray, effort: np.ndarray,
                 gripper_slide: np.ndarray | None, contact_prob: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(w [T, n] (N·m), the causal acceleration q̈ [T, n] (rad/s²)) of frames ``[T]`` / ``[T, n]`` in time
        order; w is NaN in frames that do not count (the first frame ever has no acceleration)."""
        time_s = np.asarray(time_s, dtype=float).reshape(-1)
        velocity = np.asarray(velocity, dtype=float)
        if time_s.size == 0:
            empty = np.zeros((0, len(self.friction.slope)))
            return empty, empty
        if self._last is None:
            previous_time, previous_velocity = np.r_[np.nan, time_s[:-1]], np.vstack([velocity[:1], velocity[:-1]])
        else:
            previous_time = np.r_[self._last[0], time_s[:-1]]
            previous_velocity = np.vstack([self._last[1][None], velocity[:-1]])
        acceleration = (velocity - previous_velocity) / (time_s - previous_time)[:, None]
        self._last = (float(time_s[-1]), velocity[-1].copy())
        flank = backlash_flank(velocity, self.friction.backlash_velocity, self._flank)
        self._flank = flank[-1].copy()
        tau_id, _ = self.rigid_body.inverse_dynamics(position, velocity, np.nan_to_num(acceleration), gripper_slide)
        tau_ext = tau_id - self.friction.torque(np.asarray(effort, dtype=float), velocity, flank)
        tau_ext[~np.isfinite(acceleration).all(axis=1)] = np.nan
        return opposing_residual(tau_ext, velocity, contact_prob, self.settings), acceleration
