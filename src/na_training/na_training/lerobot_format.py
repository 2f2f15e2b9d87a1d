"""The LeRobot dataset layout (format v3.0, read also v2.x) as LeRobot's own loader expects it.

Followed from LeRobot's dataset code (``lerobot/datasets/utils.py``, ``lerobot_dataset.py``,
``compute_stats.py``; docs/REFERENCES.md, LeRobot dataset)::

    meta/info.json                           codebase_version, fps, robot_type, features, totals, path templates
    meta/tasks.parquet                       one row per task: task_index, the task text as the pandas index
    meta/episodes/chunk-XXX/file-YYY.parquet one row per episode: episode_index, tasks, length, data/chunk_index,
                                             data/file_index, dataset_from_index, dataset_to_index, stats/...
    meta/stats.json                          per feature: min, max, mean, std, count, q01 ... q99
    data/chunk-XXX/file-YYY.parquet          one row per frame, many episodes per file

Only numpy and pyarrow here: the suite does not depend on LeRobot (or pandas).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

CODEBASE_VERSION = "v3.0"
CHUNK_FILE = "chunk-{chunk_index:03d}/file-{file_index:03d}"
DATA_PATH = "data/" + CHUNK_FILE + ".parquet"
EPISODES_PATH = "meta/episodes/" + CHUNK_FILE + ".parquet"
TASKS_PATH = "meta/tasks.parquet"
INFO_PATH = "meta/info.json"
STATS_PATH = "meta/stats.json"
DEFAULT_CHUNK_SIZE = 1000               # files per chunk folder
DEFAULT_DATA_FILE_MB = 100              # a data file is closed once it would grow past this
DEFAULT_VIDEO_FILE_MB = 200
# The index columns every LeRobot frame carries (LeRobot's DEFAULT_FEATURES).
DEFAULT_FEATURES: dict[str, dict[str, Any]] = {
    "timestamp": {"dtype": "float32", "shape": [1], "names": None},
    "frame_index": {"dtype": "int64", "shape": [1], "names": None},
    "episode_index": {"dtype": "int64", "shape": [1], "names": None},
    "index": {"dtype": "int64", "shape": [1], "names": None},
    "task_index": {"dtype": "int64", "shape": [1], "names": None},
}
QUANTILES = (0.01, 0.10, 0.50, 0.90, 0.99)      # LeRobot's DEFAULT_QUANTILES -> stats keys q01 ... q99


class LeRobotFormatError(ValueError):
    """A LeRobot dataset's files are missing or malformed; the message names the file."""


# ----------------------------------------------------------------------------------------- stats

def _quantile_keys() -> list[str]:
    return [f"q{round(q * 100):02d}" for q in QUANTILES]


def feature_stats(values: np.ndarray) -> dict[str, np.ndarray]:
    """One episode's statistics of one feature ``[T]`` or ``[T, n]``, keyed as LeRobot's ``compute_episode_stats``
    (quantiles exact here; LeRobot estimates them from a histogram). Non-finite values are left out."""
    array = np.asarray(values, dtype=np.float64)
    array = array.reshape(len(array), -1)
    with np.errstate(all="ignore"):
        stats = {"min": np.nanmin(array, axis=0), "max": np.nanmax(array, axis=0), "mean": np.nanmean(array, axis=0),
                 "std": np.nanstd(array, axis=0), "count": np.array([len(array)])}
        for key, q in zip(_quantile_keys(), QUANTILES, strict=True):
            stats[key] = np.nanquantile(array, q, axis=0)
    return stats


def aggregate_stats(per_episode: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Episode statistics of one feature combined as LeRobot's ``aggregate_feature_stats`` does: exact min, max,
    mean and std (parallel variance), quantiles as the count-weighted mean of the episodes' quantiles."""
    counts = np.array([float(s["count"][0]) for s in per_episode])
    total = counts.sum()
    weights = (counts / total)[:, None]
    means = np.stack([s["mean"] for s in per_episode])
    mean = (means * weights).sum(axis=0)
    variance = ((np.stack([s["std"] for s in per_episode]) ** 2 + (means - mean) ** 2) * weights).sum(axis=0)
    out = {"min": np.min(np.stack([s["min"] for s in per_episode]), axis=0),
           "max": np.max(np.stack([s["max"] for s in per_episode]), axis=0),
           "mean": mean, "std": np.sqrt(variance), "count": np.array([int(total)])}
    for key in _quantile_keys():
        out[key] = (np.stack([s[key] for s in per_episode]) * weights).sum(axis=0)
    return out


def stats_json(stats: Mapping[str, Mapping[str, np.ndarray]]) -> dict[str, dict[str, list]]:
    """Stats as ``meta/stats.json`` holds them: lists per feature and statistic (NaN -> 0, JSON has none)."""
    return {feature: {key: np.nan_to_num(np.asarray(value)).tolist() for key, value in per.items()}
            for feature, per in stats.items()}


# ----------------------------------------------------------------------------------------- writing

def write_tasks(root: Path, tasks: Sequence[str]) -> None:
    """``meta/tasks.parquet`` as LeRobot writes it with pandas: column ``task_index``, the task text as the index
    (``__index_level_0__`` plus the pandas metadata that makes it the index again when read)."""
    pandas_meta = {
        "index_columns": ["__index_level_0__"],
        "column_indexes": [{"name": None, "field_name": None, "pandas_type": "unicode", "numpy_type": "object",
                            "metadata": {"encoding": "UTF-8"}}],
        "columns": [{"name": "task_index", "field_name": "task_index", "pandas_type": "int64",
                     "numpy_type": "int64", "metadata": None},
                    {"name": None, "field_name": "__index_level_0__", "pandas_type": "unicode",
                     "numpy_type": "object", "metadata": None}],
        "creator": {"library": "pyarrow", "version": pa.__version__},
        "pandas_version": "2.2.3",
    }
    schema = pa.schema([("task_index", pa.int64()), ("__index_level_0__", pa.string())],
                       metadata={b"pandas": json.dumps(pandas_meta).encode()})
    table = pa.table({"task_index": pa.array(range(len(tasks)), pa.int64()),
                      "__index_level_0__": pa.array(list(tasks), pa.string())}, schema=schema)
    path = root / TASKS_PATH
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def write_json(path: Path, payload: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=4, ensure_ascii=False, allow_nan=False) + "\n")


# ----------------------------------------------------------------------------------------- reading

def read_info(root: Path) -> dict[str, Any]:
    """``meta/info.json`` of a LeRobot dataset (any version), or a one-line error."""
    path = root / INFO_PATH
    if not path.is_file():
        raise LeRobotFormatError(f"{root} is not a LeRobot dataset (no meta/info.json)")
    try:
        info = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise LeRobotFormatError(f"{path}: invalid JSON ({err})") from None
    if not isinstance(info, dict) or not isinstance(info.get("features"), Mapping):
        raise LeRobotFormatError(f"{path}: no features")
    return info


def major_version(info: Mapping[str, Any]) -> str:
    """``v3`` of ``v3.0`` (``""`` when missing)."""
    return str(info.get("codebase_version", "")).split(".")[0]


def read_tasks(root: Path) -> dict[int, str]:
    """task_index -> task text from ``meta/tasks.parquet`` (v3) or ``meta/tasks.jsonl`` (v2); empty when neither."""
    parquet, jsonl = root / TASKS_PATH, root / "meta" / "tasks.jsonl"
    if parquet.is_file():
        rows = pq.read_table(parquet).to_pylist()
        text_key = next((k for k in ("task", "__index_level_0__") if rows and k in rows[0]), None)
        if text_key is None or "task_index" not in rows[0]:
            return {}
        return {int(r["task_index"]): str(r[text_key]) for r in rows}
    if jsonl.is_file():
        rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
        return {int(r["task_index"]): str(r["task"]) for r in rows}
    return {}


def read_episode_rows(root: Path) -> dict[int, dict[str, Any]]:
    """episode_index -> its ``meta/episodes`` row (v3 Parquet files, without the stats columns, or v2
    ``meta/episodes.jsonl``); empty when the dataset has no episode metadata."""
    rows: list[dict[str, Any]] = []
    for path in sorted((root / "meta" / "episodes").glob("chunk-*/file-*.parquet")):
        table = pq.read_table(path)
        keep = [c for c in table.column_names if not c.startswith("stats/")]
        rows += table.select(keep).to_pylist()
    jsonl = root / "meta" / "episodes.jsonl"
    if not rows and jsonl.is_file():
        rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
    try:
        return {int(r["episode_index"]): r for r in rows}
    except (KeyError, TypeError, ValueError):
        raise LeRobotFormatError(f"{root}/meta/episodes: rows without an episode_index") from None


def data_files(root: Path, version: str) -> list[Path]:
    """The frame files: ``data/chunk-*/file-*.parquet`` (v3, many episodes per file) or
    ``data/chunk-*/episode_*.parquet`` (v2, one episode per file), in chunk and file order."""
    pattern = "chunk-*/file-*.parquet" if version == "v3" else "chunk-*/episode_*.parquet"
    files = sorted((root / "data").glob(pattern))
    if not files:
        raise LeRobotFormatError(f"{root}: no data files (data/{pattern})")
    return files


def flatten_names(names: Any) -> list[str] | None:
    """A feature's ``names`` as one flat list of strings: a list, ``{"motors": [...]}`` (v2), a list of lists, or a
    mapping of several lists (concatenated in order); None when the feature names nothing."""
    if names is None:
        return None
    if isinstance(names, str):
        return [names]
    if isinstance(names, Mapping):
        parts = [flatten_names(v) for v in names.values()]
        return [n for part in parts if part for n in part] or None
    if isinstance(names, Sequence):
        flat: list[str] = []
        for entry in names:
            inner = flatten_names(entry)
            if inner:
                flat += inner
        return flat or None
    return None


def vector_column(table: pa.Table, key: str, path: Path) -> np.ndarray:
    """A list column (or a scalar column) as ``[T, width]`` float64."""
    if key not in table.column_names:
        raise LeRobotFormatError(f"{path}: no column {key!r}")
    column = table.column(key).combine_chunks()
    if not (pa.types.is_list(column.type) or pa.types.is_fixed_size_list(column.type)
            or pa.types.is_large_list(column.type)):
        return column.to_numpy(zero_copy_only=False).astype(np.float64).reshape(-1, 1)
    flat = column.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
    if len(column) and flat.size % len(column):
        raise LeRobotFormatError(f"{path}: column {key!r} has rows of different lengths")
    return flat.reshape(len(column), -1) if len(column) else flat.reshape(0, 0)
