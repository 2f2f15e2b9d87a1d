"""Training episodes as numpy arrays and random rollout windows across them.

:class:`TrainingEpisode` is the trainer's input. Build it from a NAD episode
(:func:`from_nad_episode`, helper of ``na_training.nad.Episode``) or from plain per-frame arrays
named like the ``na_msgs/ArmState`` fields (:func:`training_episode`), e.g. synthetic data.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from na_description import RobotSpec, load_spec
from na_estimator.features import episode_features


class DataError(ValueError):
    """Episodes that cannot be used for training (missing columns, too short, non-finite)."""


@dataclass
class TrainingEpisode:
    """One episode, all arrays ``[T, ...]``; simulator coordinates have the gripper as slide (m, m/s)."""

    name: str
    features: np.ndarray        # [T, F] recorded feature vectors (contract of na_estimator.features)
    goal: np.ndarray            # [T, n] goal positions (rad; gripper servo angle)
    effort: np.ndarray          # [T, n] the spec's effort signal (current A, or load as signed fraction)
    voltage: np.ndarray         # [T, n] V
    temperature: np.ndarray     # [T, n] degC
    qpos: np.ndarray            # [T, n] simulator coordinates
    qvel: np.ndarray            # [T, n]
    force: np.ndarray           # [T, 3] N, base frame
    force_valid: np.ndarray     # [T, 3] bool
    condition: np.ndarray       # [T] supervised-joint condition label (1 nominal, 0 restricted; NaN unknown)
    condition_supervised: bool
    valid: np.ndarray           # [T] bool, frame usable
    task: str = ""
    payload_grams: float = 0.0
    contact: np.ndarray | None = None   # [T] bool contact label (NAD ``contact``); None: not recorded

    def __len__(self) -> int:
        return self.features.shape[0]

    def window_starts(self, horizon: int) -> np.ndarray:
        """Starts s whose frames s .. s+horizon (inputs and next-state targets) are all valid."""
        span = horizon + 1
        if len(self) < span:
            return np.zeros(0, dtype=np.int64)
        invalid = np.concatenate([[0], np.cumsum(~self.valid)])
        starts = np.arange(len(self) - span + 1)
        return starts[invalid[starts + span] - invalid[starts] == 0]


REQUIRED = ("goal_position", "position", "gripper_slide", "velocity", "input_voltage", "temperature")


def training_episode(columns: Mapping[str, Any], *, name: str = "episode", spec: RobotSpec | None = None,
                     force: np.ndarray | None = None, force_valid: np.ndarray | None = None,
                     condition: np.ndarray | float | None = None, condition_supervised: bool = False,
                     valid: np.ndarray | None = None, task: str = "", payload_grams: float = 0.0,
                     contact: np.ndarray | None = None) -> TrainingEpisode:
    """A training episode from ArmState-named arrays (see :func:`na_estimator.features.episode_features`)."""
    spec = spec or load_spec()
    required = (*REQUIRED, spec.effort_signal)
    missing = [k for k in required if k not in columns]
    if missing:
        raise DataError(f"{name}: missing columns {missing}")
    arrays = {k: np.asarray(columns[k], dtype=float) for k in required}
    frames = arrays["position"].shape[0]
    if frames < 2:
        raise DataError(f"{name}: needs at least 2 frames, has {frames}")
    features = episode_features(arrays, spec)
    n_arm = spec.n_arm
    qpos = np.concatenate([arrays["position"][:, :n_arm], arrays["gripper_slide"][:, None]], axis=1)
    qvel = np.concatenate([arrays["velocity"][:, :n_arm], arrays["velocity"][:, n_arm:] * spec.gripper.slope], axis=1)
    force = np.zeros((frames, 3)) if force is None else np.asarray(force, dtype=float)
    force_valid = np.ones((frames, 3), bool) if force_valid is None else np.asarray(force_valid, dtype=bool)
    condition = np.broadcast_to(np.asarray(np.nan if condition is None else condition, dtype=float), (frames,)).copy()
    valid = np.ones(frames, bool) if valid is None else np.asarray(valid, dtype=bool).copy()
    if force.shape != (frames, 3) or force_valid.shape != (frames, 3):
        raise DataError(f"{name}: force and force_valid must be [{frames}, 3]")
    if contact is not None:
        contact = np.asarray(contact, dtype=bool).reshape(-1)
        if contact.shape != (frames,):
            raise DataError(f"{name}: contact must have {frames} frames, has {contact.shape[0]}")
    # Frames with non-finite inputs are unusable; non-finite force channels become invalid labels.
    valid &= np.all(np.isfinite(features), axis=1) & np.all(np.isfinite(qvel), axis=1)
    force_valid &= np.isfinite(force)
    force = np.where(force_valid, force, 0.0)
    return TrainingEpisode(name=name, features=features, goal=arrays["goal_position"],
                           effort=arrays[spec.effort_signal],
                           voltage=arrays["input_voltage"], temperature=arrays["temperature"], qpos=qpos, qvel=qvel,
                           force=force, force_valid=force_valid, condition=condition,
                           condition_supervised=bool(condition_supervised and np.any(np.isfinite(condition))),
                           valid=valid, task=task, payload_grams=payload_grams, contact=contact)


def from_nad_episode(episode: Any, condition_joint: str | None = None, condition_tasks: Sequence[str] = (),
                     spec: RobotSpec | None = None) -> TrainingEpisode:
    """Adapter from ``na_training.nad.Episode``: the command sent to the follower is the goal position.
    ``spec`` and ``condition_joint`` default to the NAD's robot and its condition joint."""
    if spec is None:
        from na_training.nad import robot_spec

        spec = robot_spec(episode.info)
    condition_joint = condition_joint or spec.condition_joint
    state = episode.arm_state()
    state["goal_position"] = state["command_position"]
    joints = list(episode.info.get("condition_joints", []))
    condition = episode.condition[:, joints.index(condition_joint)] if condition_joint in joints else None
    task = str(episode.meta.get("task", ""))
    supervised = condition is not None and (not condition_tasks or task in condition_tasks)
    return training_episode(state, name=str(episode.meta.get("episode_id", episode.index)), spec=spec,
                            force=episode.force, force_valid=episode.force_valid, condition=condition,
                            condition_supervised=supervised, valid=episode.valid, task=task,
                            payload_grams=float(episode.meta.get("payload_grams") or 0.0), contact=episode.contact)


class WindowSampler:
    """Random rollout windows across episodes (uniform over all valid starts) and fixed validation sets."""

    def __init__(self, episodes: Sequence[TrainingEpisode], pad_frame: np.ndarray, history_length: int,
                 label_shift: int = 1) -> None:
        if not episodes:
            raise DataError("no episodes to sample from")
        self.episodes = list(episodes)
        self.pad_frame = np.asarray(pad_frame, dtype=float)
        self.history_length = history_length
        self.label_shift = label_shift
        self._starts: dict[int, list[tuple[int, np.ndarray]]] = {}

    def starts(self, horizon: int) -> list[tuple[int, np.ndarray]]:
        if horizon not in self._starts:
            span = max(horizon, horizon + self.label_shift - 1)
            table = [(i, ep.window_starts(span)) for i, ep in enumerate(self.episodes)]
            table = [(i, s) for i, s in table if s.size]
            if not table:
                longest = max(len(ep) for ep in self.episodes)
                raise DataError(f"no episode has {span + 1} consecutive valid frames for horizon {horizon} "
                                f"(longest episode: {longest} frames); use a shorter horizon")
            self._starts[horizon] = table
        return self._starts[horizon]

    def draw(self, rng: np.random.Generator, batch_size: int, horizon: int) -> list[tuple[int, int]]:
        """(episode index, start) of ``batch_size`` windows drawn uniformly over all valid starts."""
        table = self.starts(horizon)
        counts = np.array([s.size for _, s in table])
        flat = rng.integers(0, counts.sum(), size=batch_size)
        bounds = np.cumsum(counts)
        picks = []
        for f in flat:
            k = int(np.searchsorted(bounds, f, side="right"))
            offset = f - (bounds[k - 1] if k else 0)
            picks.append((table[k][0], int(table[k][1][offset])))
        return picks

    def sample(self, rng: np.random.Generator, batch_size: int, horizon: int,
               rows: slice | None = None) -> dict[str, np.ndarray]:
        """A random batch; ``rows``: build only these rows of it (the draws are those of the whole batch)."""
        picks = self.draw(rng, batch_size, horizon)
        return self.windows(picks if rows is None else picks[rows], horizon)

    def fixed(self, count: int, batch_size: int, horizon: int, seed: int = 12345) -> list[dict[str, np.ndarray]]:
        """``count`` reproducible batches (validation), independent of the training draws."""
        rng = np.random.default_rng([seed, 7919])
        return [self.sample(rng, batch_size, horizon) for _ in range(count)]

    def windows(self, picks: Sequence[tuple[int, int]], horizon: int) -> dict[str, np.ndarray]:
        """Batch arrays for (episode index, start) pairs: rollout inputs at s..s+H-1, targets at s+1..s+H."""
        keys = ("history", "qpos0", "qvel0", "goal", "effort", "voltage", "temperature", "target_qpos", "force",
                "force_valid", "condition", "condition_mask")
        out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
        past = self.history_length - 1
        shift = self.label_shift
        for index, start in picks:
            ep = self.episodes[index]
            frames = np.arange(start, start + horizon)
            history_index = np.arange(start - past, start)
            history = ep.features[np.clip(history_index, 0, None)]
            history[history_index < 0] = self.pad_frame
            labels = frames + shift
            out["history"].append(history)
            out["qpos0"].append(ep.qpos[start])
            out["qvel0"].append(ep.qvel[start])
            out["goal"].append(ep.goal[frames])
            out["effort"].append(ep.effort[frames])
            out["voltage"].append(ep.voltage[frames])
            out["temperature"].append(ep.temperature[frames])
            out["target_qpos"].append(ep.qpos[frames + 1])
            out["force"].append(ep.force[labels])
            out["force_valid"].append(ep.force_valid[labels])
            condition = ep.condition[labels]
            out["condition"].append(np.nan_to_num(condition))
            out["condition_mask"].append(np.isfinite(condition) & ep.condition_supervised)
        return {k: np.stack(v) for k, v in out.items()}
