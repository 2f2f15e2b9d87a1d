"""Reading the frames of a LeRobot dataset episode by episode, wherever its rows are.

v3 keeps many episodes per ``data/chunk-XXX/file-YYY.parquet`` and an episode may continue in the next file
(``meta/episodes`` gives its ``dataset_from_index`` .. ``dataset_to_index``); v2 keeps one episode per
``data/chunk-XXX/episode_NNNNNN.parquet``. Rows are gathered by their ``episode_index`` column across every file,
put in ``frame_index`` order, and checked against the episode table's length.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from na_training.lerobot_format import LeRobotFormatError, vector_column
from na_training.lerobot_names import Signal

INDEX_COLUMNS = ("episode_index", "frame_index", "timestamp")


@dataclass
class EpisodeSource:
    """One LeRobot episode's raw frames (values in spec order, dataset units), sorted by frame_index."""

    lerobot_index: int
    task_index: int
    frame_index: np.ndarray
    timestamp: np.ndarray
    values: dict[str, np.ndarray]          # signal -> [T, n]; extra features -> [T, width]


def _read_file(path: Path, signals: Mapping[str, Signal], extra: Sequence[str]) -> list[EpisodeSource]:
    """The episodes (or parts of episodes) in one data file."""
    present = pq.read_schema(path).names
    missing = [c for c in INDEX_COLUMNS if c not in present]
    if missing:
        raise LeRobotFormatError(f"{path}: no column(s) {', '.join(missing)}")
    features = sorted({s.feature for s in signals.values()} | set(extra))
    absent = [f for f in features if f not in present]
    if absent:
        raise LeRobotFormatError(f"{path}: no column(s) {', '.join(absent)} named in meta/info.json")
    wanted = [*INDEX_COLUMNS, *features] + (["task_index"] if "task_index" in present else [])
    table = pq.read_table(path, columns=wanted)            # images and other columns are not read
    matrices = {key: vector_column(table, key, path) for key in features}
    values: dict[str, np.ndarray] = {}
    for name, signal in signals.items():
        matrix = matrices[signal.feature]
        if matrix.shape[1] <= int(signal.index.max()):
            raise LeRobotFormatError(f"{path}: column {signal.feature!r} has {matrix.shape[1]} values per frame, "
                                     "fewer than its names in meta/info.json")
        values[name] = matrix[:, signal.index]
    values.update({key: matrices[key] for key in extra})
    episode = table.column("episode_index").to_numpy().astype(np.int64)
    frame = table.column("frame_index").to_numpy().astype(np.int64)
    stamp = table.column("timestamp").to_numpy().astype(np.float64)
    task = table.column("task_index").to_numpy().astype(np.int64) if "task_index" in table.column_names else \
        np.zeros(len(episode), dtype=np.int64)
    parts = []
    for index in np.unique(episode):
        rows = np.flatnonzero(episode == index)
        rows = rows[np.argsort(frame[rows], kind="stable")]
        parts.append(EpisodeSource(int(index), int(task[rows[0]]), frame[rows], stamp[rows],
                                   {name: v[rows] for name, v in values.items()}))
    return parts


def _merge(parts: Sequence[EpisodeSource]) -> EpisodeSource:
    """Parts of one episode from several files, in frame_index order."""
    if len(parts) == 1:
        return parts[0]
    frame = np.concatenate([p.frame_index for p in parts])
    order = np.argsort(frame, kind="stable")
    values = {k: np.concatenate([p.values[k] for p in parts])[order] for k in parts[0].values}
    stamp = np.concatenate([p.timestamp for p in parts])[order]
    return EpisodeSource(parts[0].lerobot_index, parts[0].task_index, frame[order], stamp, values)


def read_all_episodes(files: Sequence[Path], signals: Mapping[str, Signal], extra: Sequence[str],
                      episode_rows: Mapping[int, Mapping[str, Any]], root: Path) -> list[EpisodeSource]:
    """Every episode of the dataset, parts from different files joined; refuses an episode whose frame count
    differs from its ``meta/episodes`` length or whose frame indices repeat."""
    parts: dict[int, list[EpisodeSource]] = {}
    for path in files:
        for part in _read_file(path, signals, extra):
            parts.setdefault(part.lerobot_index, []).append(part)
    episodes = []
    for index in sorted(parts):
        source = _merge(parts[index])
        if np.unique(source.frame_index).size != source.frame_index.size:
            raise LeRobotFormatError(f"{root}: episode {index}: frame_index values repeat across the data files")
        row = episode_rows.get(index)
        length = row.get("length") if row else None
        if length is not None and int(length) != len(source.timestamp):
            where = (f" (index {row['dataset_from_index']}..{row['dataset_to_index']})"
                     if "dataset_from_index" in row and "dataset_to_index" in row else "")
            raise LeRobotFormatError(f"{root}: episode {index}: meta/episodes says {int(length)} frames{where}, the "
                                     f"data files hold {len(source.timestamp)}")
        episodes.append(source)
    return episodes
