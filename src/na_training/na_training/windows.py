"""Windows of *recorded* features with their labels: what the directly supervised heads learn from.

The deployed estimator feeds the model causal windows of recorded telemetry (``HistoryWindow``);
every window here is built by the same contract function, :func:`na_description.features.history_windows`
(mean-frame padding before the episode start), so the force, contact-gate and condition heads are
trained on exactly the inputs they will see live. A window ending at frame t is paired with the
labels at ``t + label_shift`` and with the inverse-dynamics torque label at t (the effort that
drives the simulator from t to t + 1), when torque labels are given.

Windows are kept only where the window's frames and its label frame are valid.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from na_description.features import history_windows
from na_training.batches import DataError, condition_labels
from na_training.config import GATE_TARGETS
from na_training.episode import Episode


def gate_target(episode: Episode, rule: str, threshold: float) -> np.ndarray:
    """Per-frame contact target: the recorded contact label (NAD ``contact``) or ``|f| > threshold`` on the
    force label (paper Sec. III-D)."""
    if rule not in GATE_TARGETS:
        raise ValueError(f"gate target {rule!r} is not one of {GATE_TARGETS}")
    if rule == "contact":
        return episode.contact
    return np.linalg.norm(episode.force, axis=1) > threshold


class RecordedWindows:
    """Every usable causal window of the episodes (float32 ``[N, L, F]``) and its labels ``[N, ...]``;
    ``condition_joint``/``condition_tasks``: the condition labels that supervise
    (:func:`na_training.batches.condition_labels`)."""

    def __init__(self, episodes: Sequence[Episode], pad_frame: np.ndarray, history_length: int, *,
                 label_shift: int = 0, gate_rule: str = "contact", contact_threshold: float = 0.01,
                 torque_labels: Sequence[np.ndarray] | None = None, condition_joint: str | None = None,
                 condition_tasks: Sequence[str] = ()) -> None:
        if not episodes:
            raise DataError("no episodes to build windows from")
        if label_shift < 0:
            raise DataError(f"label_shift must be >= 0, got {label_shift}")
        if torque_labels is not None and len(torque_labels) != len(episodes):
            raise DataError("one torque label array per episode is needed")
        parts: dict[str, list[np.ndarray]] = {k: [] for k in (
            "windows", "force", "force_valid", "contact", "condition", "condition_mask", "torque", "torque_valid",
            "episode", "frame")}
        for index, ep in enumerate(episodes):
            frames = np.arange(len(ep))
            labels = frames + label_shift
            usable = (labels < len(ep)) & ep.history_valid(history_length)
            usable[usable] &= ep.valid[labels[usable]]
            if not np.any(usable):
                continue
            frames, labels = frames[usable], labels[usable]
            features = np.where(ep.valid[:, None], ep.features(), 0.0)      # invalid frames never enter a kept window
            parts["windows"].append(history_windows(features, pad_frame, history_length)[frames].astype(np.float32))
            parts["force"].append(ep.force[labels].astype(np.float32))
            parts["force_valid"].append(ep.force_valid[labels])
            parts["contact"].append(gate_target(ep, gate_rule, contact_threshold)[labels])
            condition, supervised = condition_labels(ep, condition_joint, condition_tasks)
            parts["condition"].append(np.nan_to_num(condition[labels]).astype(np.float32))
            parts["condition_mask"].append(supervised[labels])
            if torque_labels is not None:
                torque = np.asarray(torque_labels[index], dtype=float)[frames]
                parts["torque"].append(np.nan_to_num(torque).astype(np.float32))
                parts["torque_valid"].append(np.all(np.isfinite(torque), axis=1))
            parts["episode"].append(np.full(frames.size, index))
            parts["frame"].append(frames)
        if not parts["windows"]:
            raise DataError(f"no episode has a valid window of {history_length} frames")
        self.arrays = {k: np.concatenate(v) for k, v in parts.items() if v}
        self.history_length = history_length
        self.has_torque = torque_labels is not None

    def __len__(self) -> int:
        return int(self.arrays["windows"].shape[0])

    def take(self, index: np.ndarray) -> dict[str, np.ndarray]:
        """The batch of the given window indices (model inputs ``windows`` plus labels)."""
        keys = [k for k in self.arrays if k not in ("episode", "frame")]
        return {k: self.arrays[k][index] for k in keys}

    def sample(self, rng: np.random.Generator, batch_size: int, rows: slice | None = None) -> dict[str, np.ndarray]:
        """``batch_size`` windows drawn uniformly with replacement; ``rows``: only these rows of the batch."""
        index = rng.integers(0, len(self), size=batch_size)
        return self.take(index if rows is None else index[rows])

    def fixed(self, count: int, batch_size: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
        """Up to ``count`` reproducible batches without repetition (validation)."""
        order = np.random.default_rng([seed, 104729]).permutation(len(self))
        batches = [order[k:k + batch_size] for k in range(0, len(order), batch_size)][:count]
        # the last batch is topped up from the start so that every batch has the compiled shape
        return [self.take(np.resize(b, batch_size)) for b in batches]


def augment_offsets(batch: dict[str, np.ndarray], rng: np.random.Generator, offsets: dict[str, float],
                    names: Sequence[str], rows: slice | None = None, total_rows: int | None = None) -> None:
    """Add, in place, one uniform offset in [-a, a] per window and channel to the features whose name starts
    with ``prefix + "."`` for each ``prefix: a`` of ``offsets`` (the same offset on all frames of a window).

    ``rows``/``total_rows``: ``batch`` holds these rows of a ``total_rows``-row batch (one process's share);
    the offsets drawn are those of the whole batch, so the share gets what the whole batch would."""
    windows = batch["windows"]
    total = windows.shape[0] if total_rows is None else total_rows
    for prefix, amplitude in offsets.items():
        if amplitude <= 0:
            continue
        columns = [k for k, name in enumerate(names) if name.startswith(prefix + ".")]
        shift = rng.uniform(-amplitude, amplitude, size=(total, 1, len(columns)))
        if rows is not None:
            shift = shift[rows]
        windows[:, :, columns] += shift.astype(windows.dtype)

