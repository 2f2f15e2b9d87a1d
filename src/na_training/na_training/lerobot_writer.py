"""Writes a LeRobot v3.0 dataset from per-episode feature arrays, as ``LeRobotDataset(repo_id, root=...)`` opens it.

Episodes are appended to ``data/chunk-XXX/file-YYY.parquet`` until a file would pass ``data_files_size_in_mb``
(LeRobot's rule; a new chunk folder every ``chunks_size`` files), each whole in one file. Everything is written
into a staging folder beside the output and moved into place by :meth:`LeRobotWriter.finish`, so a failed export
leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from na_training.lerobot_format import (
    CODEBASE_VERSION,
    DATA_PATH,
    DEFAULT_CHUNK_SIZE,
    DEFAULT_FEATURES,
    DEFAULT_VIDEO_FILE_MB,
    EPISODES_PATH,
    INFO_PATH,
    STATS_PATH,
    aggregate_stats,
    feature_stats,
    stats_json,
    write_json,
    write_tasks,
)
from na_training.nad import replace_directory

MB = 1024 * 1024
INDEX_BYTES = 4 + 4 * 8            # timestamp float32 + four int64 index columns per frame


class LeRobotWriteError(ValueError):
    """The output cannot be written; the message names the path."""


class LeRobotWriter:
    """Collects episodes (``add_episode``) and writes the dataset on ``finish``; ``abort`` removes the staging."""

    def __init__(self, out: str | Path, features: Mapping[str, Sequence[str]], fps: int, *,
                 overwrite: bool = False, max_file_mb: float = 100.0, chunk_size: int = DEFAULT_CHUNK_SIZE) -> None:
        self.out = Path(out).resolve()
        if self.out.exists() and (not self.out.is_dir() or any(self.out.iterdir())):
            if not overwrite:
                raise LeRobotWriteError(f"output {out} exists and is not empty (pass --overwrite to replace it)")
            if not (self.out / INFO_PATH).is_file():
                raise LeRobotWriteError(f"output {out} is not a LeRobot dataset (no meta/info.json); --overwrite "
                                        "only replaces one")
        if max_file_mb <= 0 or chunk_size < 1:
            raise LeRobotWriteError("the data file size and the chunk size must be positive")
        self.features = {key: list(names) for key, names in features.items()}
        self.fps, self.max_file_mb, self.chunk_size = int(fps), float(max_file_mb), int(chunk_size)
        self._tmp = self.out.parent / f".{self.out.name}.partial-{os.getpid()}"
        if self._tmp.exists():
            shutil.rmtree(self._tmp)
        self._tmp.mkdir(parents=True)
        self._tasks: list[str] = []
        self._rows: list[dict[str, Any]] = []
        self._stats: list[dict[str, dict[str, np.ndarray]]] = []
        self._pending: list[pa.Table] = []          # episodes of the data file being filled
        self._file = (0, 0)
        self._file_bytes = 0
        self._frames = 0
        self._bytes_per_frame = INDEX_BYTES + 4 * sum(len(n) for n in self.features.values())

    def add_episode(self, values: Mapping[str, np.ndarray], task: str, meta: Mapping[str, Any]) -> int:
        """One episode: ``values[feature]`` ``[T, width]`` for every feature; ``meta`` extra episode columns."""
        index = len(self._rows)
        length = len(next(iter(values.values())))
        if length < 1:
            raise LeRobotWriteError(f"episode {index} has no frames")
        if task not in self._tasks:
            self._tasks.append(task)
        frame = np.arange(length, dtype=np.int64)
        columns = {key: np.asarray(values[key], dtype=np.float32).reshape(length, -1) for key in self.features}
        columns["timestamp"] = (frame / self.fps).astype(np.float32)
        columns["frame_index"] = frame
        columns["episode_index"] = np.full(length, index, dtype=np.int64)
        columns["index"] = self._frames + frame
        columns["task_index"] = np.full(length, self._tasks.index(task), dtype=np.int64)
        size = length * self._bytes_per_frame
        if self._pending and self._file_bytes + size >= self.max_file_mb * MB:
            self._flush()
            chunk, file = self._file
            self._file = (chunk + 1, 0) if file + 1 >= self.chunk_size else (chunk, file + 1)
        self._pending.append(self._table(columns))
        self._file_bytes += size
        stats = {key: feature_stats(columns[key]) for key in columns}
        self._stats.append(stats)
        row = {"episode_index": index, "tasks": [task], "length": length,
               "data/chunk_index": self._file[0], "data/file_index": self._file[1],
               "dataset_from_index": self._frames, "dataset_to_index": self._frames + length,
               "meta/episodes/chunk_index": 0, "meta/episodes/file_index": 0}
        row.update({f"stats/{key}/{name}": np.asarray(v).tolist() for key, per in stats.items()
                    for name, v in per.items()})
        row.update(meta)
        self._rows.append(row)
        self._frames += length
        return index

    def _table(self, columns: Mapping[str, np.ndarray]) -> pa.Table:
        arrays = {}
        for key, values in columns.items():
            if key in self.features and values.shape[1] > 1:
                width = values.shape[1]
                arrays[key] = pa.FixedSizeListArray.from_arrays(pa.array(values.ravel(), pa.float32()), width)
            elif key in self.features:          # shape (1,): LeRobot reads a scalar column (datasets.Value)
                arrays[key] = pa.array(values[:, 0], pa.float32())
            else:
                arrays[key] = pa.array(values)
        return pa.table(arrays)

    def _flush(self) -> None:
        if not self._pending:
            return
        path = self._tmp / DATA_PATH.format(chunk_index=self._file[0], file_index=self._file[1])
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.concat_tables(self._pending), path, compression="snappy")
        self._pending, self._file_bytes = [], 0

    def finish(self, robot_type: str, extra_info: Mapping[str, Any]) -> Path:
        """Write the last data file, ``meta/`` (info, tasks, episodes, stats) and move the dataset into place."""
        if not self._rows:
            raise LeRobotWriteError("no episodes to write")
        self._flush()
        write_tasks(self._tmp, self._tasks)
        episodes = self._tmp / EPISODES_PATH.format(chunk_index=0, file_index=0)
        episodes.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.Table.from_pylist(self._rows), episodes, compression="snappy")
        keys = list(self._stats[0])
        write_json(self._tmp / STATS_PATH, stats_json({key: aggregate_stats([s[key] for s in self._stats])
                                                       for key in keys}))
        features = {key: {"dtype": "float32", "shape": [len(names)], "names": names}
                    for key, names in self.features.items()}
        features.update(DEFAULT_FEATURES)
        info = {"codebase_version": CODEBASE_VERSION, "robot_type": robot_type,
                "total_episodes": len(self._rows), "total_frames": self._frames, "total_tasks": len(self._tasks),
                "chunks_size": self.chunk_size,
                "data_files_size_in_mb": int(self.max_file_mb) if self.max_file_mb.is_integer() else self.max_file_mb,
                "video_files_size_in_mb": DEFAULT_VIDEO_FILE_MB, "fps": self.fps,
                "splits": {"train": f"0:{len(self._rows)}"}, "data_path": DATA_PATH, "video_path": None,
                "features": features, **extra_info}
        write_json(self._tmp / INFO_PATH, info)
        replace_directory(self._tmp, self.out)
        return self.out

    def abort(self) -> None:
        shutil.rmtree(self._tmp, ignore_errors=True)

