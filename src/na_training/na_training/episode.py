"""The one episode type of ``na_training``: a NAD episode read as arrays in the robot's joint order.

An :class:`Episode` holds the stored NAD form (one array per frame column, its ``episodes.parquet`` row and the
dataset's ``info.json``); everything else is a function of it: ``[T, n]`` arrays in spec order, the labels,
the feature matrix of the shared contract (:meth:`Episode.features`), the simulator coordinates the training
rollout starts from (:attr:`Episode.qpos`, :attr:`Episode.qvel`) and gap-filled arm arrays for the classical
observers (:meth:`Episode.arm`). Training, evaluation, the comparison and the baselines all take it.

Field names keep one meaning from the bag to the model (NAD.md, "Field names"): ``goal_position`` is the
servo's Goal Position read back in ``ArmState``, ``command_position`` the ``JointCommand`` sent to the
follower. The model's goal inputs are the command, as the live estimator feeds them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from na_description import RobotSpec
from na_description.features import compute_features

AXES = ("x", "y", "z")
NOMINAL = 1       # condition label of an unrestricted joint (NAD condition_<joint>, episodes.parquet condition_label)
RESTRICTED = 0    # condition label of a mechanically restricted joint
MIN_FRAMES = 3    # finite differences (observers, acceleration) need three frames


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


@dataclass(eq=False)
class Episode:
    """One episode: NAD frame columns (length T each) with its metadata row, read through ``spec``'s joints."""

    meta: dict[str, Any]
    columns: dict[str, np.ndarray]
    info: dict[str, Any] = field(repr=False)
    spec: RobotSpec = field(repr=False)
    _views: dict[Any, np.ndarray] = field(default_factory=dict, init=False, repr=False)    # computed once

    def __len__(self) -> int:
        return len(self.columns["time"])

    # ------------------------------------------------------------------ metadata
    @property
    def index(self) -> int:
        return int(self.meta["episode_index"])

    @property
    def name(self) -> str:
        return str(self.meta.get("episode_id", self.meta.get("episode_index")))

    @property
    def task(self) -> str:
        return str(self.meta.get("task") or "")

    @property
    def payload_grams(self) -> float:
        return float(self.meta.get("payload_grams") or 0.0)

    @property
    def force_source(self) -> str:
        return str(self.meta.get("force_source") or "none")

    # ------------------------------------------------------------------ stored arrays, spec order
    def per_joint(self, field_name: str) -> np.ndarray:
        """``[T, n_motors]`` array of a per-joint column, e.g. ``per_joint("current")``."""
        return np.stack([self.columns[f"{field_name}_{j}"] for j in self.spec.joint_names], axis=1)

    def stack(self, names: Iterable[str]) -> np.ndarray:
        """``[T, len(names)]`` array of the named columns (float64)."""
        return np.stack([np.asarray(self.columns[n], dtype=np.float64) for n in names], axis=1)

    @property
    def time(self) -> np.ndarray:
        return self.columns["time"]

    @property
    def position(self) -> np.ndarray:
        """Follower joint positions ``[T, n]`` (rad; the gripper as servo angle)."""
        return self.per_joint("position")

    @property
    def velocity(self) -> np.ndarray:
        """Follower joint velocities ``[T, n]`` (rad/s; the gripper as servo angular velocity)."""
        return self.per_joint("velocity")

    @property
    def gripper_slide(self) -> np.ndarray:
        """Follower single-finger slide ``[T]`` (m)."""
        return self.columns["gripper_slide"]

    @property
    def goal_position(self) -> np.ndarray:
        """The servos' Goal Position register read back in ``ArmState`` ``[T, n]`` (rad)."""
        return self.per_joint("goal_position")

    @property
    def command_position(self) -> np.ndarray:
        """The ``JointCommand`` sent to the follower ``[T, n]`` (rad): the model's goal input."""
        return self.per_joint("command_position")

    @property
    def effort(self) -> np.ndarray:
        """The spec's effort signal ``[T, n]``: Present Current (A) or Present Load (signed fraction)."""
        return self.per_joint(self.spec.effort_signal)

    @property
    def input_voltage(self) -> np.ndarray:
        return self.per_joint("input_voltage")

    @property
    def temperature(self) -> np.ndarray:
        return self.per_joint("temperature")

    # ------------------------------------------------------------------ labels
    @cached_property
    def force_valid(self) -> np.ndarray:
        """Per-channel validity of the force label ``[T, 3]``: stored as valid and finite."""
        stored = np.stack([self.columns[f"force_valid_{a}"] for a in AXES], axis=1).astype(bool)
        return stored & np.isfinite(self.stack(f"force_{a}" for a in AXES))

    @cached_property
    def force(self) -> np.ndarray:
        """Force label ``[T, 3]`` (N, base frame, environment on robot); 0 where not :attr:`force_valid`."""
        return np.where(self.force_valid, self.stack(f"force_{a}" for a in AXES), 0.0)

    @property
    def contact(self) -> np.ndarray:
        """Contact label ``[T]`` (bool)."""
        return self.columns["contact"].astype(bool)

    def condition_of(self, joint: str) -> np.ndarray:
        """Per-frame condition label of ``joint`` ``[T]`` (1 nominal, 0 restricted); NaN where not recorded."""
        column = self.columns.get(f"condition_{joint}")
        return np.full(len(self), np.nan) if column is None else np.asarray(column, dtype=float)

    @property
    def condition(self) -> np.ndarray:
        """Per-frame condition label ``[T]`` of the spec's condition joint (NaN where not recorded)."""
        return self.condition_of(self.spec.condition_joint)

    @property
    def condition_label(self) -> int | None:
        """The episode's condition (:data:`NOMINAL` or :data:`RESTRICTED`): its ``condition_label`` metadata,
        else the median per-frame label; None when neither is known."""
        label = self.meta.get("condition_label")
        if label is None or not np.isfinite(label):
            frames = self.condition[np.isfinite(self.condition)]
            label = float(np.round(np.median(frames))) if frames.size else None
        return None if label is None else int(label)

    @property
    def is_nominal(self) -> bool:
        return self.condition_label is None or self.condition_label == NOMINAL

    @property
    def truth_force(self) -> np.ndarray | None:
        """Simulator truth force ``[T, 3]`` (evaluation only), or None when the dataset has none."""
        if "truth_force_x" not in self.columns:
            return None
        return self.stack(f"truth_force_{a}" for a in AXES)

    # ------------------------------------------------------------------ validity
    @cached_property
    def valid(self) -> np.ndarray:
        """Usable frames ``[T]``: the NAD's ``frame_valid`` with every model input finite."""
        frame_valid = self.columns["frame_valid"].astype(bool)
        return frame_valid & np.all(np.isfinite(self.features()), axis=1) & np.all(np.isfinite(self.qvel), axis=1)

    @property
    def force_mask(self) -> np.ndarray:
        """``[T, 3]`` label entries every force metric scores: valid channels of usable frames."""
        return self.force_valid & self.valid[:, None]

    @property
    def has_force_label(self) -> bool:
        return bool(np.any(self.force_mask))

    def has_no_contact(self) -> bool:
        """Episode without any contact: the set the false-contact rate is measured on."""
        return not bool(np.any(self.contact))

    def free_motion_mask(self) -> np.ndarray:
        """Frames known to be free of external force: a whole ``none`` episode, else non-contact frames."""
        if self.force_source == "none":
            return np.ones(len(self), dtype=bool)
        return ~self.contact

    @cached_property
    def _invalid_before(self) -> np.ndarray:
        """``[T + 1]`` count of unusable frames before each frame (window validity in O(1))."""
        return np.concatenate([[0], np.cumsum(~self.valid)])

    def valid_window_starts(self, length: int) -> np.ndarray:
        """Start indices of windows of ``length`` frames whose frames are all usable (computed once per length)."""
        key = ("window_starts", length)
        if key not in self._views:
            if length <= 0 or length > len(self):
                self._views[key] = np.zeros(0, dtype=np.int64)
            else:
                starts = np.arange(len(self) - length + 1)
                self._views[key] = starts[self._invalid_before[starts + length] - self._invalid_before[starts] == 0]
        return self._views[key]

    def history_valid(self, length: int) -> np.ndarray:
        """``[T]``: frames t whose causal window max(0, t - length + 1) .. t is all usable (pads count as usable)."""
        ends = np.arange(len(self)) + 1
        starts = np.maximum(ends - length, 0)
        return self._invalid_before[ends] - self._invalid_before[starts] == 0

    # ------------------------------------------------------------------ views
    def features(self) -> np.ndarray:
        """Feature matrix ``[T, F]`` through the shared contract, with the command as the goal input: what the
        estimator builds live from ``ArmState`` and ``/follower/command`` (computed once)."""
        if "features" not in self._views:
            n_arm = self.spec.n_arm
            self._views["features"] = compute_features(
                self.command_position, self.position[:, :n_arm], self.gripper_slide, self.effort, self.velocity,
                self.input_voltage, self.temperature, spec=self.spec)
        return self._views["features"]

    def filled_features(self) -> np.ndarray:
        """:meth:`features` with gaps held from the last good frame (0 where none came before): a model's input
        over a whole recorded episode in the comparison and the evaluation (computed once)."""
        if "filled_features" not in self._views:
            self._views["filled_features"] = np.nan_to_num(fill_gaps(self.features()))
        return self._views["filled_features"]

    @cached_property
    def qpos(self) -> np.ndarray:
        """Simulator coordinates ``[T, n]``: arm joints (rad) and the gripper slide (m)."""
        n_arm = self.spec.n_arm
        return np.concatenate([self.position[:, :n_arm], self.gripper_slide[:, None]], axis=1)

    @cached_property
    def qvel(self) -> np.ndarray:
        """Simulator velocities ``[T, n]``: arm joints (rad/s) and the gripper slide (m/s)."""
        n_arm = self.spec.n_arm
        velocity = self.velocity
        return np.concatenate([velocity[:, :n_arm], velocity[:, n_arm:] * self.spec.gripper.slope], axis=1)

    def arm(self, field_name: str) -> np.ndarray:
        """``[T, n_arm]`` arm columns of a per-joint field with gaps held from the last good sample (invalid frames
        keep their place in time: finite differences and observers need the sequence)."""
        values = fill_gaps(self.per_joint(field_name)[:, : self.spec.n_arm])
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{field_name} has a joint without any finite sample")
        return values

    def unusable_reason(self) -> str | None:
        """Why the observers and metrics cannot use this episode (too short, time not increasing, an arm joint
        without any sample), or None."""
        if len(self) < MIN_FRAMES:
            return f"needs at least {MIN_FRAMES} frames, has {len(self)}"
        if np.any(np.diff(self.time) <= 0):
            return "time stamps are not strictly increasing"
        for name in ("position", "velocity", self.spec.effort_signal, "command_position"):
            try:
                self.arm(name)
            except ValueError as err:
                return str(err)
        return None
