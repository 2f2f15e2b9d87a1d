"""The NeuralActuator feature contract: one frame's feature vector, its order, units and normalisation.

Training (vectorised over whole NAD episodes, and inside the JAX rollout) and the estimator (one
frame at a time) both build features through :func:`compute_features`, so the two paths cannot drift.
The feature set is the authors' OpenManipulator-X set (docs/REFERENCES.md, Authors' setup): 36 values per
frame for 4 arm joints and the gripper. Other arms get the same layout over their own joints, with the
effort channel the spec names (``effort_signal``: Present Current, or the SO-101's Present Load): 43 values
for the SO-101's 5 arm joints and gripper (its jaw "slide" is the hinge angle, so its "mm" features are mrad).

This module is pure numpy (no rclpy, no jax). :func:`compute_features` takes an array namespace
``xp`` so that the training rollout can call the very same code with ``jax.numpy``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from na_description import RobotSpec, load_spec

SCHEMA_VERSION = "na-features/1"
HISTORY_LENGTH = 9            # 8 past frames + the current one (paper Sec. III-D)
WINDOW_MAX_GAP_S = 0.1        # a longer gap between two frames' stamps restarts a HistoryWindow (padded again)
NORMALISED_CLIP = 10.0        # z-scores are clipped to +-10 (docs/REFERENCES.md, Authors' setup)
METRES_TO_MM = 1000.0         # slide features are in mm (paper kappa_g = 1000)

# Std floors per unit (docs/REFERENCES.md, Authors' setup): keep near-constant channels from exploding after
# z-scoring. "%" (Feetech Present Load) is ours: 1 % of the servo's maximum output.
STD_FLOOR_BY_UNIT = {"rad": 0.05, "mm": 1.0, "mA": 10.0, "%": 1.0, "rad/s": 0.1, "V": 0.1, "degC": 1.0}
# The effort input per the spec's effort_signal: (feature unit, factor from the ArmState value in SI).
EFFORT_FEATURE_UNITS: dict[str, tuple[str, float]] = {
    "current": ("mA", 1000.0),        # A -> mA
    "load": ("%", 100.0),             # signed fraction of maximum output -> %
}


class FeatureError(ValueError):
    """Inputs that cannot form a feature vector (wrong shape, missing joints, bad stats)."""


def _feature_layout(spec: RobotSpec) -> list[tuple[str, str, bool]]:
    """(name, unit, simulated) per feature, in the fixed order of docs/REFERENCES.md, Authors' setup."""
    motors, arm = spec.joint_names, spec.arm_joint_names
    layout: list[tuple[str, str, bool]] = []
    layout += [(f"goal_position.{m}", "rad", False) for m in motors]
    layout += [(f"position.{j}", "rad", True) for j in arm]
    layout += [("finger_slide", "mm", True)]
    unit, _ = EFFORT_FEATURE_UNITS[spec.effort_signal]
    layout += [(f"{spec.effort_signal}.{m}", unit, False) for m in motors]
    layout += [(f"velocity.{m}", "rad/s", True) for m in motors]
    layout += [(f"voltage.{m}", "V", False) for m in motors]
    layout += [(f"temperature.{m}", "degC", False) for m in motors]
    layout += [("goal_finger_slide", "mm", False)]
    layout += [(f"tracking_error.{j}", "rad", True) for j in arm]
    layout += [("finger_error", "mm", True)]
    return layout


_DEFAULT_LAYOUT = _feature_layout(load_spec())
FEATURE_NAMES: list[str] = [name for name, _, _ in _DEFAULT_LAYOUT]
FEATURE_UNITS: list[str] = [unit for _, unit, _ in _DEFAULT_LAYOUT]
# Features that come from the simulator during training rollouts (position, velocity, slide and
# the tracking errors derived from them); the rest come from the record (goals and telemetry).
SIMULATED_FEATURES: list[str] = [name for name, _, simulated in _DEFAULT_LAYOUT if simulated]
NUM_FEATURES = len(FEATURE_NAMES)


def feature_names(spec: RobotSpec | None = None) -> list[str]:
    return [name for name, _, _ in _feature_layout(spec or load_spec())]


def feature_units(spec: RobotSpec | None = None) -> list[str]:
    """The unit of each feature of ``spec``'s layout (the effort's follows its effort signal: mA or %)."""
    return [unit for _, unit, _ in _feature_layout(spec or load_spec())]


def std_floors(spec: RobotSpec | None = None) -> np.ndarray:
    """Per-feature std floor from its unit (docs/REFERENCES.md, Authors' setup)."""
    return np.array([STD_FLOOR_BY_UNIT[unit] for _, unit, _ in _feature_layout(spec or load_spec())])


def compute_features(goal_position, arm_position, gripper_slide, effort, velocity, input_voltage, temperature,
                     *, spec: RobotSpec | None = None, xp: Any = np):
    """Feature vectors ``[..., F]`` from frames of raw SI signals (any leading shape, one frame = no leading dims).

    goal_position  [..., n_motors]  rad, joint side; gripper as servo angle (JointCommand.position)
    arm_position   [..., n_arm]     rad, joint side (ArmState.position[:n_arm])
    gripper_slide  [...]            m, single-finger slide (ArmState.gripper_slide)
    effort         [..., n_motors]  the spec's effort signal: current (A) or load (signed fraction)
    velocity       [..., n_motors]  rad/s (gripper: servo angular velocity)
    input_voltage  [..., n_motors]  V
    temperature    [..., n_motors]  degC
    The goal finger slide is derived from the gripper goal angle with the spec's gripper map.
    """
    spec = spec or load_spec()
    n_motors, n_arm = spec.n_motors, spec.n_arm
    as_array = (lambda value: np.asarray(value, dtype=float)) if xp is np else xp.asarray
    goal = as_array(goal_position)
    arm = as_array(arm_position)
    slide_mm = as_array(gripper_slide) * METRES_TO_MM
    signals = {"goal_position": goal, spec.effort_signal: as_array(effort), "velocity": as_array(velocity),
               "input_voltage": as_array(input_voltage), "temperature": as_array(temperature)}
    for name, value in signals.items():
        if value.shape[-1:] != (n_motors,):
            raise FeatureError(f"{name}: expected last dimension {n_motors}, got shape {tuple(value.shape)}")
    if arm.shape[-1:] != (n_arm,):
        raise FeatureError(f"arm_position: expected last dimension {n_arm}, got shape {tuple(arm.shape)}")
    lead = goal.shape[:-1]
    if arm.shape[:-1] != lead or slide_mm.shape != lead or any(v.shape[:-1] != lead for v in signals.values()):
        raise FeatureError("all inputs must share the same leading (frame) dimensions")
    # Linear gripper map written out (not GripperMap.angle_to_slide) so that it also traces under jax.
    grip = spec.gripper
    goal_slide_mm = (grip.slide_points[0] + (goal[..., n_motors - 1] - grip.angle_points[0]) * grip.slope) \
        * METRES_TO_MM
    columns = [
        goal,
        arm,
        slide_mm[..., None],
        signals[spec.effort_signal] * EFFORT_FEATURE_UNITS[spec.effort_signal][1],
        signals["velocity"],
        signals["input_voltage"],
        signals["temperature"],
        goal_slide_mm[..., None],
        goal[..., :n_arm] - arm,
        (goal_slide_mm - slide_mm)[..., None],
    ]
    return xp.concatenate(columns, axis=-1)


def frame_features(arm_state: Any, command_position: Sequence[float], spec: RobotSpec | None = None) -> np.ndarray:
    """One frame ``[F]`` from an ``na_msgs/ArmState`` (or any object with its fields) and the latest
    ``JointCommand.position``. Same code path as the vectorised training features."""
    spec = spec or load_spec()
    position = np.asarray(arm_state.position, dtype=float)
    if position.shape != (spec.n_motors,):
        raise FeatureError(f"ArmState.position has {position.shape[0]} values, expected {spec.n_motors}")
    return compute_features(np.asarray(command_position, dtype=float), position[: spec.n_arm],
                            np.asarray(arm_state.gripper_slide, dtype=float),
                            getattr(arm_state, spec.effort_signal), arm_state.velocity,
                            arm_state.input_voltage, arm_state.temperature, spec=spec)


def episode_features(columns: dict[str, np.ndarray], spec: RobotSpec | None = None) -> np.ndarray:
    """Vectorised ``[T, F]`` features of one episode from per-frame arrays named like the ArmState fields:
    ``goal_position [T, n]`` (the command), ``position [T, n]``, ``gripper_slide [T]``, the spec's effort
    signal (``current`` or ``load``), ``velocity``, ``input_voltage``, ``temperature`` ``[T, n]``."""
    spec = spec or load_spec()
    missing = [k for k in ("goal_position", "position", "gripper_slide", spec.effort_signal, "velocity",
                           "input_voltage", "temperature") if k not in columns]
    if missing:
        raise FeatureError(f"episode is missing columns: {missing}")
    position = np.asarray(columns["position"], dtype=float)
    return compute_features(columns["goal_position"], position[:, : spec.n_arm], columns["gripper_slide"],
                            columns[spec.effort_signal], columns["velocity"], columns["input_voltage"],
                            columns["temperature"], spec=spec)


@dataclass(frozen=True)
class FeatureStats:
    """Per-feature z-score statistics from the training split (std already floored)."""

    mean: np.ndarray
    std: np.ndarray

    @classmethod
    def fit(cls, frames: np.ndarray | Sequence[np.ndarray], spec: RobotSpec | None = None) -> FeatureStats:
        """Mean and floored std over all frames (an ``[N, F]`` array or a list of per-episode arrays)."""
        data = np.concatenate(list(frames), axis=0) if not isinstance(frames, np.ndarray) else frames
        if data.ndim != 2 or data.shape[0] == 0:
            raise FeatureError(f"need a non-empty [N, F] array of frames, got shape {data.shape}")
        floors = std_floors(spec)
        if data.shape[1] != floors.shape[0]:
            raise FeatureError(f"frames have {data.shape[1]} features, the contract has {floors.shape[0]}")
        if not np.all(np.isfinite(data)):
            raise FeatureError("frames contain NaN or inf")
        return cls(data.mean(axis=0), np.maximum(data.std(axis=0), floors))

    def normalise(self, features, xp: Any = np):
        """z-score clipped to +-10 (docs/REFERENCES.md, Authors' setup)."""
        return xp.clip((features - xp.asarray(self.mean)) / xp.asarray(self.std), -NORMALISED_CLIP, NORMALISED_CLIP)

    def to_dict(self) -> dict[str, list[float]]:
        return {"mean": [float(v) for v in self.mean], "std": [float(v) for v in self.std]}

    @classmethod
    def from_dict(cls, data: dict[str, Sequence[float]]) -> FeatureStats:
        mean, std = np.asarray(data["mean"], dtype=float), np.asarray(data["std"], dtype=float)
        if mean.shape != std.shape or mean.ndim != 1:
            raise FeatureError("feature stats: mean and std must be 1-D arrays of equal length")
        if np.any(std <= 0):
            raise FeatureError("feature stats: std must be positive")
        return cls(mean, std)

    def to_json(self) -> str:
        return json.dumps(self.to_dict())


def history_windows(features: np.ndarray, pad_frame: np.ndarray, length: int = HISTORY_LENGTH) -> np.ndarray:
    """All causal windows of one episode: ``[T, length, F]``, window t ends with frame t.

    Frames before the episode start are the pad frame (the training mean frame; docs/REFERENCES.md, Authors' setup)."""
    features = np.asarray(features, dtype=float)
    pad = np.broadcast_to(np.asarray(pad_frame, dtype=float), (length - 1, features.shape[1]))
    padded = np.concatenate([pad, features], axis=0)
    index = np.arange(features.shape[0])[:, None] + np.arange(length)[None, :]
    return padded[index]


class HistoryWindow:
    """Rolling window of the last ``length`` feature frames for the one-frame-at-a-time estimator.

    Starts (and restarts after a gap in the stamps longer than ``max_gap`` s, or when the caller
    calls :meth:`reset`) filled with the pad frame, exactly like :func:`history_windows` at an
    episode start."""

    def __init__(self, pad_frame: np.ndarray, length: int = HISTORY_LENGTH, max_gap: float = WINDOW_MAX_GAP_S) -> None:
        if length < 1:
            raise FeatureError("history length must be at least 1")
        self.pad_frame = np.asarray(pad_frame, dtype=float)
        self.length = length
        self.max_gap = max_gap
        self._last_stamp: float | None = None
        self._window = np.empty((length, self.pad_frame.shape[0]))
        self.reset()
        self.resets = 0               # count of resets after construction (gaps, explicit calls)

    def reset(self) -> None:
        self._window[:] = self.pad_frame
        self._last_stamp = None
        self.filled = 0               # real (non-pad) frames in the window
        self.resets = getattr(self, "resets", 0) + 1

    def push(self, features: np.ndarray, stamp: float | None = None) -> np.ndarray:
        """Append the current frame (stamp in s) and return a copy of the window ``[length, F]``."""
        features = np.asarray(features, dtype=float)
        if features.shape != self.pad_frame.shape:
            raise FeatureError(f"frame has shape {features.shape}, window expects {self.pad_frame.shape}")
        if stamp is not None and self._last_stamp is not None:
            gap = stamp - self._last_stamp
            if gap > self.max_gap or gap < 0:
                self.reset()
        self._window[:-1] = self._window[1:]
        self._window[-1] = features
        self.filled = min(self.filled + 1, self.length)
        if stamp is not None:
            self._last_stamp = stamp
        return self._window.copy()
