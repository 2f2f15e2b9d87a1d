"""Random rollout windows across episodes: the training view of :class:`na_training.episode.Episode`.

A rollout window starting at frame s takes its first simulated state from s, the recorded inputs
(:func:`recorded_inputs`) of frames s .. s+H-1, the next-state targets of s+1 .. s+H and the labels of
``label_shift`` frames later.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from na_training.episode import Episode


class DataError(ValueError):
    """Episodes that cannot be used for training (none, too short, no valid window)."""


# Per-frame recorded inputs of a rollout, in the order the rollout reads them.
RECORDED_INPUTS = ("command", "effort", "voltage", "temperature", "next_qpos", "next_qvel")


def recorded_inputs(episode: Episode) -> dict[str, np.ndarray]:
    """The recorded per-frame rollout inputs ``[T, n]``: the command (the model's goal input), the spec's effort
    signal, the supply voltage and the temperature, and the recorded state one frame later in simulator
    coordinates (what a replayed channel is set to after the frame; the last frame repeats)."""
    following = np.r_[np.arange(1, len(episode)), max(len(episode) - 1, 0)]
    return {"command": episode.command_position, "effort": episode.effort, "voltage": episode.input_voltage,
            "temperature": episode.temperature, "next_qpos": episode.qpos[following],
            "next_qvel": episode.qvel[following]}


def condition_labels(episode: Episode, joint: str | None = None, tasks: Sequence[str] = ()
                     ) -> tuple[np.ndarray, np.ndarray]:
    """Per-frame condition label of ``joint`` (default the spec's condition joint) and where it supervises the
    condition head: recorded, in an episode of one of ``tasks`` (every task when empty)."""
    label = episode.condition_of(joint or episode.spec.condition_joint)
    supervised = not tasks or episode.task in tasks
    return label, np.isfinite(label) & supervised


class WindowSampler:
    """Random rollout windows across episodes (uniform over all valid starts) and fixed validation sets.

    ``condition_joint``/``condition_tasks``: the condition labels that supervise (:func:`condition_labels`)."""

    def __init__(self, episodes: Sequence[Episode], pad_frame: np.ndarray, history_length: int,
                 label_shift: int = 1, condition_joint: str | None = None, condition_tasks: Sequence[str] = ()
                 ) -> None:
        if not episodes:
            raise DataError("no episodes to sample from")
        self.episodes = list(episodes)
        self.pad_frame = np.asarray(pad_frame, dtype=float)
        self.history_length = history_length
        self.label_shift = label_shift
        self._inputs = [recorded_inputs(ep) for ep in self.episodes]
        self._condition = [condition_labels(ep, condition_joint, condition_tasks) for ep in self.episodes]
        self._starts: dict[int, list[tuple[int, np.ndarray]]] = {}

    def starts(self, horizon: int) -> list[tuple[int, np.ndarray]]:
        """(episode index, starts) of the episodes with windows of ``horizon`` steps whose frames are all valid."""
        if horizon not in self._starts:
            span = max(horizon, horizon + self.label_shift - 1)
            table = [(i, ep.valid_window_starts(span + 1)) for i, ep in enumerate(self.episodes)]
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
        keys = ("history", "qpos0", "qvel0", *RECORDED_INPUTS, "target_qpos", "force", "force_valid", "condition",
                "condition_mask")
        out: dict[str, list[np.ndarray]] = {k: [] for k in keys}
        past = self.history_length - 1
        shift = self.label_shift
        for index, start in picks:
            ep = self.episodes[index]
            frames = np.arange(start, start + horizon)
            history_index = np.arange(start - past, start)
            history = ep.features()[np.clip(history_index, 0, None)]
            history[history_index < 0] = self.pad_frame
            labels = frames + shift
            out["history"].append(history)
            out["qpos0"].append(ep.qpos[start])
            out["qvel0"].append(ep.qvel[start])
            for key, values in self._inputs[index].items():
                out[key].append(values[frames])
            out["target_qpos"].append(ep.qpos[frames + 1])
            out["force"].append(ep.force[labels])
            out["force_valid"].append(ep.force_valid[labels])
            condition, supervised = self._condition[index]
            out["condition"].append(np.nan_to_num(condition[labels]))
            out["condition_mask"].append(supervised[labels])
        return {k: np.stack(v) for k, v in out.items()}
