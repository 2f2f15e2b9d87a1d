"""Per-episode numpy arrays, the one input form every baseline and metric works from.

The NAD loader (``na_training.nad``) is adapted to this form in :mod:`.compare`; tests and
other callers can build it directly from arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NOMINAL = 1       # NAD condition label of an unrestricted episode (INTERFACES / issue 6)
RESTRICTED = 0    # NAD condition label of a mechanically restricted Joint 3


@dataclass
class EpisodeArrays:
    """One episode, frames along axis 0. Arm arrays hold the arm joints in spec order.

    Units (SI): time s, position rad, velocity rad/s, current A, force N (environment on robot,
    base frame, paper Eq. 4). Optional arrays are ``None`` when the episode does not have them.
    """

    episode_id: str
    time: np.ndarray                          # [T]
    position: np.ndarray                      # [T, n_arm]
    velocity: np.ndarray                      # [T, n_arm]
    current: np.ndarray                       # [T, n_arm]
    goal_position: np.ndarray | None = None   # [T, n_arm]
    gripper_slide: np.ndarray | None = None   # [T] single-finger slide, m
    force: np.ndarray | None = None           # [T, 3] label
    force_valid: np.ndarray | None = None     # [T] bool
    contact: np.ndarray | None = None         # [T] bool
    condition: int | None = None              # NOMINAL or RESTRICTED for the whole episode
    task: str = "unknown"
    payload_grams: float = 0.0
    force_source: str = "none"                # none | payload | ft_sensor
    split: str = "train"
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.time = np.asarray(self.time, dtype=float)
        n_frames = self.time.shape[0]
        if self.time.ndim != 1 or n_frames < 3:
            raise ValueError(f"episode {self.episode_id}: time must be 1-D with at least 3 frames")
        if np.any(np.diff(self.time) <= 0):
            raise ValueError(f"episode {self.episode_id}: time stamps are not strictly increasing")
        for name in ("position", "velocity", "current", "goal_position"):
            value = getattr(self, name)
            if value is None:
                continue
            value = np.asarray(value, dtype=float)
            if value.ndim != 2 or value.shape[0] != n_frames:
                raise ValueError(f"episode {self.episode_id}: {name} must be [T={n_frames}, n_arm], got {value.shape}")
            setattr(self, name, value)
        n_arm = self.position.shape[1]
        if self.velocity.shape[1] != n_arm or self.current.shape[1] != n_arm:
            raise ValueError(f"episode {self.episode_id}: position/velocity/current joint counts differ")
        if self.force is not None:
            self.force = np.asarray(self.force, dtype=float)
            if self.force.shape != (n_frames, 3):
                raise ValueError(f"episode {self.episode_id}: force must be [T, 3], got {self.force.shape}")
            if self.force_valid is None:
                self.force_valid = np.all(np.isfinite(self.force), axis=1)
        for name in ("force_valid", "contact"):
            value = getattr(self, name)
            if value is not None:
                value = np.asarray(value).astype(bool).reshape(-1)
                if value.shape[0] != n_frames:
                    raise ValueError(f"episode {self.episode_id}: {name} must have {n_frames} frames")
                setattr(self, name, value)
        if self.gripper_slide is not None:
            self.gripper_slide = np.asarray(self.gripper_slide, dtype=float).reshape(-1)

    @property
    def n_frames(self) -> int:
        return int(self.time.shape[0])

    @property
    def has_force_label(self) -> bool:
        return self.force is not None and bool(np.any(self.force_valid))

    @property
    def is_nominal(self) -> bool:
        return self.condition is None or int(self.condition) == NOMINAL

    def free_motion_mask(self) -> np.ndarray:
        """Frames known to be free of external force: a whole ``none`` episode, else non-contact frames."""
        if self.force_source == "none":
            return np.ones(self.n_frames, dtype=bool)
        if self.contact is not None:
            return ~self.contact
        return np.zeros(self.n_frames, dtype=bool)

    def has_no_contact(self) -> bool:
        """Episode without any contact: the set the false-contact rate is measured on."""
        if self.contact is not None:
            return not bool(np.any(self.contact))
        return self.force_source == "none"
