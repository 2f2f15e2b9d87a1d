"""Per-episode numpy arrays, the one input form every baseline and metric works from.

The NAD loader (``na_training.nad``) is adapted to this form in :mod:`.compare`; tests and
other callers can build it directly from arrays.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from na_description.spec import RobotSpec

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
    effort: np.ndarray                        # [T, n_arm] the robot's effort signal: current (A) or load
                                              # (signed fraction); the observers map it to torque by a fitted scale
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
        for name in ("position", "velocity", "effort", "goal_position"):
            value = getattr(self, name)
            if value is None:
                continue
            value = np.asarray(value, dtype=float)
            if value.ndim != 2 or value.shape[0] != n_frames:
                raise ValueError(f"episode {self.episode_id}: {name} must be [T={n_frames}, n_arm], got {value.shape}")
            setattr(self, name, value)
        n_arm = self.position.shape[1]
        if self.velocity.shape[1] != n_arm or self.effort.shape[1] != n_arm:
            raise ValueError(f"episode {self.episode_id}: position/velocity/effort joint counts differ")
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


def fill_gaps(values: np.ndarray) -> np.ndarray:
    """Non-finite samples replaced by the nearest earlier finite one (the first finite one at the start)."""
    values = np.array(values, dtype=float)
    flat = values.reshape(values.shape[0], -1)
    for column in flat.T:
        finite = np.isfinite(column)
        if finite.all() or not finite.any():
            continue
        index = np.where(finite, np.arange(column.size), 0)
        np.maximum.accumulate(index, out=index)
        index[: np.argmax(finite)] = np.argmax(finite)
        column[:] = column[index]
    return flat.reshape(values.shape)


def episode_arrays_from_nad(episode, spec: RobotSpec | None = None, condition_joint: str | None = None
                            ) -> EpisodeArrays:
    """Adapt a ``na_training.nad.Episode`` (columns ``position_<joint>``, ``force_x`` ...) to EpisodeArrays.

    Invalid frames (``frame_valid`` false) keep their place in time (finite differences and the
    observer need the sequence) with gaps filled from the last good sample, and are left out of
    the force metrics through ``force_valid``.
    """
    if spec is None:
        from na_training.nad import robot_spec

        spec = robot_spec(episode.info)
    condition_joint = condition_joint or spec.condition_joint
    columns, arm = episode.columns, spec.arm_joint_names

    def per_joint(field: str) -> np.ndarray:
        values = fill_gaps(np.stack([columns[f"{field}_{j}"] for j in arm], axis=1))
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{field} has a joint without any finite sample")
        return values

    meta = episode.meta
    condition = meta.get("condition_label")
    if condition is None or not np.isfinite(condition):
        joint_labels = columns.get(f"condition_{condition_joint}")
        finite = joint_labels[np.isfinite(joint_labels)] if joint_labels is not None else np.zeros(0)
        condition = float(np.round(np.median(finite))) if finite.size else None
    valid = episode.valid
    return EpisodeArrays(
        episode_id=str(meta.get("episode_id", meta.get("episode_index"))),
        time=np.asarray(episode.time, dtype=float),
        position=per_joint("position"), velocity=per_joint("velocity"), effort=per_joint(spec.effort_signal),
        goal_position=per_joint("command_position"),
        gripper_slide=fill_gaps(columns["gripper_slide"]) if "gripper_slide" in columns else None,
        force=np.nan_to_num(episode.force), force_valid=episode.force_valid.all(axis=1) & valid,
        contact=episode.contact, condition=None if condition is None else int(condition),
        task=str(meta.get("task", "unknown")), payload_grams=float(meta.get("payload_grams") or 0.0),
        force_source=str(meta.get("force_source", "none")), split=str(meta.get("split", "")),
        extra={"nad_episode": episode},
    )
