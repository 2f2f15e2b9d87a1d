"""Neural Actuation Dataset v1 (NAD): column schema, deterministic Parquet writer, loader, splits.

Layout (docs/ARCHITECTURE.md "NAD v1")::

    NAD/meta/info.json             schema version, robot, rate, joint names, columns with units
    NAD/meta/episodes.parquet      one row per episode (id, task, instance, payload, split, ...)
    NAD/meta/report.json           what the converter dropped, flagged or could not align
    NAD/data/episode_NNNNNN.parquet one row per aligned frame

Every file is written deterministically (sorted JSON keys, fixed Parquet settings, no wall-clock
times), so converting the same bags twice gives byte-identical datasets.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from na_description import RobotSpec, SpecError, load_spec
from na_training.episode import AXES, Episode

SCHEMA_NAME = "NAD"
SCHEMA_VERSION = "1.0"
SPLITS = ("train", "val", "test")

# Fixed Parquet settings: the output bytes depend only on the data and the pyarrow version.
_PARQUET_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": False,
    "write_statistics": True,
    "row_group_size": 1 << 20,
}


class NadError(ValueError):
    """A NAD directory is missing, malformed or of an unsupported schema version."""


@dataclass(frozen=True)
class Column:
    """One frame column: Parquet name, numpy dtype, SI unit, role group and meaning."""

    name: str
    dtype: str
    unit: str
    group: str        # time | command | leader | proprioception | telemetry | alignment | label | evaluation
    description: str


# Per-motor fields of the follower ArmState stored per joint as ``<field>_<joint>``: unit, group, dtype.
ARM_STATE_JOINT_FIELDS: dict[str, tuple[str, str, str]] = {
    "position": ("rad", "proprioception", "float64"),
    "velocity": ("rad/s", "proprioception", "float64"),
    "goal_position": ("rad", "telemetry", "float64"),
    "current": ("A", "telemetry", "float64"),
    "pwm": ("1", "telemetry", "float64"),
    "input_voltage": ("V", "telemetry", "float64"),
    "temperature": ("degC", "telemetry", "float64"),
    "hardware_error": ("bitmask", "telemetry", "uint8"),
    "stale": ("bool", "telemetry", "bool"),
}
# Per-joint ArmState fields only some servo families have (columns only for robots whose spec reads them).
OPTIONAL_ARM_STATE_JOINT_FIELDS: dict[str, tuple[str, str, str]] = {
    "load": ("1", "telemetry", "float64"),     # Feetech Present Load, signed fraction of maximum output
}
# Scalar fields of the follower ArmState.
ARM_STATE_SCALAR_FIELDS: dict[str, tuple[str, str]] = {
    "gripper_slide": ("m", "proprioception"),
    "goal_gripper_slide": ("m", "telemetry"),
    "bus_cycle_duration": ("s", "telemetry"),
}


def build_columns(joint_names: Sequence[str], condition_joints: Sequence[str], with_truth: bool,
                  optional_fields: Sequence[str] = ()) -> list[Column]:
    """The ordered column list of an episode file for a robot's joints; ``optional_fields`` names the
    :data:`OPTIONAL_ARM_STATE_JOINT_FIELDS` the robot records (``("load",)`` for a Feetech arm)."""
    unknown = [f for f in optional_fields if f not in OPTIONAL_ARM_STATE_JOINT_FIELDS]
    if unknown:
        raise NadError(f"unknown optional ArmState fields {unknown} (known: {list(OPTIONAL_ARM_STATE_JOINT_FIELDS)})")
    cols = [
        Column("time", "float64", "s", "time", "frame time since the first frame of the episode"),
        Column("stamp_ns", "int64", "ns", "time", "ROS time of the frame (follower bus-read completion)"),
    ]
    cols += [Column(f"command_position_{j}", "float64", "rad", "command",
                    "goal position sent to the follower (/follower/command; gripper: servo angle)")
             for j in joint_names]
    cols.append(Column("command_gripper_slide", "float64", "m", "command", "commanded single-finger slide"))
    cols += [Column(f"leader_position_{j}", "float64", "rad", "leader", "leader arm joint position")
             for j in joint_names]
    cols.append(Column("leader_gripper_slide", "float64", "m", "leader", "leader single-finger slide"))
    fields = {**ARM_STATE_JOINT_FIELDS, **{f: OPTIONAL_ARM_STATE_JOINT_FIELDS[f] for f in optional_fields}}
    for name, (unit, group, dtype) in fields.items():
        cols += [Column(f"{name}_{j}", dtype, unit, group, f"follower {name.replace('_', ' ')}") for j in joint_names]
    for name, (unit, group) in ARM_STATE_SCALAR_FIELDS.items():
        cols.append(Column(name, "float64", unit, group, f"follower {name.replace('_', ' ')}"))
    cols += [
        Column("aligned", "bool", "bool", "alignment", "every required stream had a sample within tolerance"),
        Column("frame_valid", "bool", "bool", "alignment",
               "aligned, no stale servo, no hardware error and finite follower values"),
    ]
    cols += [Column(f"force_{a}", "float64", "N", "label",
                    f"external force on the tool, base frame, {a} (environment on robot)") for a in AXES]
    cols += [Column(f"force_valid_{a}", "bool", "bool", "label", f"force_{a} is a real label") for a in AXES]
    cols.append(Column("contact", "bool", "bool", "label", "contact label (|f| > threshold, or payload grasped)"))
    cols += [Column(f"condition_{j}", "float64", "1", "label", f"condition of {j}: 1 nominal, 0 restricted")
             for j in condition_joints]
    if with_truth:
        cols += [Column(f"truth_force_{a}", "float64", "N", "evaluation",
                        f"simulator truth external force on the tool, base frame, {a} (evaluation only)")
                 for a in AXES]
        cols += [
            Column("truth_contact", "bool", "bool", "evaluation", "simulator truth contact (evaluation only)"),
            Column("truth_valid", "bool", "bool", "evaluation", "truth values are present for this frame"),
        ]
    return cols


# ----------------------------------------------------------------------------------------- splits

def split_counts(n_episodes: int) -> tuple[int, int, int]:
    """Train/val/test counts for one task instance (8:1:1, paper Table A15).

    ``val = test = round(n / 10)`` (half up, at least 1 once there are 3 episodes); 2 episodes
    give one train and one test; a single episode is train.
    """
    if n_episodes <= 0:
        return 0, 0, 0
    if n_episodes == 1:
        return 1, 0, 0
    if n_episodes == 2:
        return 1, 0, 1
    held_out = max(1, int(np.floor(n_episodes / 10 + 0.5)))
    return n_episodes - 2 * held_out, held_out, held_out


def assign_splits(instances: Mapping[str, str], seed: int) -> dict[str, str]:
    """Split per task instance, reproducibly from ``seed``.

    ``instances`` maps a stable episode key (e.g. the episode id) to its task instance. The
    permutation of each instance depends only on the seed, the instance name and the sorted keys
    of that instance, so adding a new task instance never reshuffles another one.
    """
    by_instance: dict[str, list[str]] = {}
    for key, instance in instances.items():
        by_instance.setdefault(instance, []).append(key)
    splits: dict[str, str] = {}
    for instance, keys in sorted(by_instance.items()):
        keys = sorted(keys)
        instance_hash = int.from_bytes(hashlib.sha256(instance.encode()).digest()[:8], "little")
        order = np.random.default_rng([int(seed), instance_hash]).permutation(len(keys))
        n_train, n_val, _ = split_counts(len(keys))
        for rank, idx in enumerate(order):
            splits[keys[idx]] = "train" if rank < n_train else "val" if rank < n_train + n_val else "test"
    return splits


SPLIT_RULE = ("8:1:1 per task instance from the seed: val = test = round(n/10) (at least 1 from n = 3); "
              "n = 2: 1 train + 1 test; n = 1: train")


# ----------------------------------------------------------------------------------------- writer

EPISODE_META_COLUMNS: dict[str, pa.DataType] = {
    "episode_index": pa.int64(),
    "episode_id": pa.string(),
    "task": pa.string(),
    "task_instance": pa.string(),
    "payload_grams": pa.float64(),
    "force_source": pa.string(),
    "condition": pa.string(),
    "condition_label": pa.float64(),
    "split": pa.string(),
    "frame_count": pa.int64(),
    "duration_s": pa.float64(),
    "source_bag": pa.string(),
    "source": pa.string(),
    "seed": pa.int64(),
    "operator": pa.string(),
    "notes": pa.string(),
    "complete": pa.bool_(),
    "recovered": pa.bool_(),          # repaired after its recorder was killed (complete is then false)
    "data_file": pa.string(),
}


def episode_file_name(index: int) -> str:
    return f"episode_{index:06d}.parquet"


def _write_json(path: Path, payload: Mapping[str, Any]) -> None:
    path.write_text(json.dumps(payload, indent=2, sort_keys=True, allow_nan=False) + "\n")


def write_episode_table(path: Path, columns: Sequence[Column], data: Mapping[str, np.ndarray]) -> None:
    """Write one episode's frames; every schema column must be present and of one length."""
    lengths = {name: len(np.asarray(data[c.name])) for c in columns if (name := c.name) in data}
    missing = [c.name for c in columns if c.name not in data]
    if missing:
        raise NadError(f"episode data lacks columns: {', '.join(missing)}")
    if len(set(lengths.values())) > 1:
        raise NadError(f"episode columns differ in length: {sorted(set(lengths.values()))}")
    fields, arrays = [], []
    for c in columns:
        values = np.ascontiguousarray(np.asarray(data[c.name]).astype(c.dtype, copy=False))
        fields.append(pa.field(c.name, pa.from_numpy_dtype(values.dtype), nullable=False,
                               metadata={"unit": c.unit, "group": c.group}))
        arrays.append(pa.array(values))
    schema = pa.schema(fields, metadata={"nad_schema_version": SCHEMA_VERSION})
    pq.write_table(pa.Table.from_arrays(arrays, schema=schema), path, **_PARQUET_OPTIONS)


class NadWriter:
    """Writes a NAD into a temporary sibling directory and moves it into place on :meth:`finish`.

    Nothing is written at ``out`` until every episode has been converted, so a failed conversion
    leaves an existing dataset untouched.
    """

    def __init__(self, out: str | Path, columns: Sequence[Column], *, overwrite: bool = False) -> None:
        self.out = Path(out).resolve()
        if self.out.exists() and (not self.out.is_dir() or any(self.out.iterdir())):
            if not overwrite:
                raise NadError(f"output {out} exists and is not empty (pass --overwrite to replace it)")
            if not (self.out / "meta" / "info.json").is_file():
                raise NadError(f"output {out} is not a NAD (no meta/info.json); --overwrite only replaces a NAD")
        self.columns = list(columns)
        self._tmp = self.out.parent / f".{self.out.name}.partial-{os.getpid()}"
        if self._tmp.exists():
            shutil.rmtree(self._tmp)
        (self._tmp / "data").mkdir(parents=True)
        (self._tmp / "meta").mkdir()
        (self._tmp / "staged").mkdir()
        self._episodes: list[dict[str, Any]] = []

    def add_episode(self, meta: Mapping[str, Any], data: Mapping[str, np.ndarray]) -> int:
        """Write one episode's frames; ``meta`` holds the episodes.parquet fields except index/split/file."""
        index = len(self._episodes)
        write_episode_table(self._tmp / "data" / episode_file_name(index), self.columns, data)
        return self._register(meta, index)

    def staged_path(self, key: int) -> Path:
        """Where a worker writes an episode file (:func:`write_episode_table` with :attr:`columns`)
        before its episode index is known; ``key`` (e.g. the bag's position) tells the files apart."""
        return self._tmp / "staged" / f"{key:06d}.parquet"

    def add_staged_episode(self, meta: Mapping[str, Any], staged: Path) -> int:
        """Take a staged episode file as the next episode (renamed to its ``data/`` name)."""
        index = len(self._episodes)
        Path(staged).rename(self._tmp / "data" / episode_file_name(index))
        return self._register(meta, index)

    def _register(self, meta: Mapping[str, Any], index: int) -> int:
        self._episodes.append(dict(meta, episode_index=index, data_file=f"data/{episode_file_name(index)}", split=""))
        return index

    def finish(self, info: Mapping[str, Any], report: Mapping[str, Any], split_seed: int) -> Path:
        """Assign splits, write meta/ and move the dataset to ``out``; returns ``out``."""
        shutil.rmtree(self._tmp / "staged")        # emptied as the staged episodes were taken
        keys = [f"{row['episode_id']}#{row['episode_index']}" for row in self._episodes]
        splits = assign_splits({k: row["task_instance"] for k, row in zip(keys, self._episodes, strict=True)},
                               split_seed)
        for key, row in zip(keys, self._episodes, strict=True):
            row["split"] = splits[key]
        table = pa.table({name: pa.array([row.get(name) for row in self._episodes], type=dtype)
                          for name, dtype in EPISODE_META_COLUMNS.items()})
        pq.write_table(table, self._tmp / "meta" / "episodes.parquet", **_PARQUET_OPTIONS)
        counts = {s: sum(row["split"] == s for row in self._episodes) for s in SPLITS}
        full_info = dict(info)
        full_info.update(
            schema=SCHEMA_NAME,
            schema_version=SCHEMA_VERSION,
            episode_count=len(self._episodes),
            frame_count=int(sum(row["frame_count"] for row in self._episodes)),
            split_seed=int(split_seed),
            split_rule=SPLIT_RULE,
            split_counts=counts,
            columns=[{"name": c.name, "dtype": c.dtype, "unit": c.unit, "group": c.group,
                      "description": c.description} for c in self.columns],
        )
        full_info["dataset_id"] = self._content_hash()
        _write_json(self._tmp / "meta" / "info.json", full_info)
        _write_json(self._tmp / "meta" / "report.json", report)
        replace_directory(self._tmp, self.out)
        return self.out

    def abort(self) -> None:
        """Remove the partial output (call when conversion fails)."""
        shutil.rmtree(self._tmp, ignore_errors=True)

    def _content_hash(self) -> str:
        digest = hashlib.sha256()
        for path in [*sorted((self._tmp / "data").iterdir()), self._tmp / "meta" / "episodes.parquet"]:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        return "nad-" + digest.hexdigest()[:16]



def replace_directory(staged: Path, out: Path) -> None:
    """Put the fully written folder ``staged`` at ``out``; an older ``out`` is moved aside first and removed
    only once the new one is in place, so a reader never finds half a dataset."""
    backup = None
    if out.exists():
        backup = out.parent / f".{out.name}.old-{os.getpid()}"
        out.rename(backup)
    staged.rename(out)
    if backup is not None:
        shutil.rmtree(backup)


# ----------------------------------------------------------------------------------------- loader

def robot_spec(info: Mapping[str, Any], robot: str | None = None) -> RobotSpec:
    """The robot spec of a NAD (its ``info.json`` ``robot``); ``robot`` (a --robot option) must name the same arm."""
    recorded = str(info.get("robot") or "")
    try:
        spec = load_spec(recorded or None)
        if robot is not None and load_spec(robot).name != spec.name:
            raise NadError(f"the dataset was recorded with robot '{spec.name}', not '{load_spec(robot).name}' "
                           f"(--robot {robot})")
    except SpecError as exc:
        raise NadError(f"dataset robot: {exc}") from None
    return spec


def read_info(path: str | Path) -> dict[str, Any]:
    """``meta/info.json`` of a NAD, checked for schema name and major version."""
    info_path = Path(path) / "meta" / "info.json"
    if not info_path.is_file():
        raise NadError(f"{path} is not a NAD directory (no meta/info.json)")
    try:
        info = json.loads(info_path.read_text())
    except json.JSONDecodeError as err:
        raise NadError(f"{info_path}: invalid JSON ({err})") from err
    if info.get("schema") != SCHEMA_NAME:
        raise NadError(f"{info_path}: schema is {info.get('schema')!r}, expected {SCHEMA_NAME!r}")
    version = str(info.get("schema_version", ""))
    if version.split(".")[0] != SCHEMA_VERSION.split(".")[0]:
        raise NadError(f"{info_path}: schema version {version!r} is not supported (this loader reads "
                       f"{SCHEMA_VERSION.split('.')[0]}.x)")
    return info


def read_episode_table(path: str | Path) -> list[dict[str, Any]]:
    """Rows of ``meta/episodes.parquet`` as dictionaries, in episode order."""
    table_path = Path(path) / "meta" / "episodes.parquet"
    if not table_path.is_file():
        raise NadError(f"{path}: missing meta/episodes.parquet")
    return pq.read_table(table_path).to_pylist()


def load_nad(path: str | Path, split: str | Sequence[str] | None = None) -> list[Episode]:
    """Load a NAD: every episode, or those of one split (``train``/``val``/``test``) or several."""
    root = Path(path)
    info = read_info(root)
    spec = robot_spec(info)
    if list(info.get("joint_names", [])) != spec.joint_names:
        raise NadError(f"{root}: joint names {info.get('joint_names')} are not those of {spec.name} "
                       f"{spec.joint_names}")
    wanted: set[str] | None = None
    if split is not None:
        wanted = {split} if isinstance(split, str) else set(split)
        unknown = wanted - set(SPLITS)
        if unknown:
            raise NadError(f"unknown split {sorted(unknown)} (choose from {', '.join(SPLITS)})")
    episodes = []
    for row in read_episode_table(root):
        if wanted is not None and row["split"] not in wanted:
            continue
        data_path = root / row["data_file"]
        if not data_path.is_file():
            raise NadError(f"{root}: episode {row['episode_index']} data file {row['data_file']} is missing")
        table = pq.read_table(data_path)
        columns = {name: table.column(name).to_numpy() for name in table.column_names}
        expected = [c["name"] for c in info["columns"]]
        missing = [name for name in expected if name not in columns]
        if missing:
            raise NadError(f"{data_path}: missing columns {', '.join(missing)}")
        episodes.append(Episode(meta=row, columns=columns, info=info, spec=spec))
    return episodes


def load_usable(path: str | Path, split: str, skipped: list[str]) -> list[Episode]:
    """The split's episodes that the observers and the metrics can use (:meth:`Episode.unusable_reason`); each
    other one is left out with a line in ``skipped``."""
    usable = []
    for episode in load_nad(path, split):
        reason = episode.unusable_reason()
        if reason is None:
            usable.append(episode)
        else:
            skipped.append(f"episode {episode.meta.get('episode_id', '?')} skipped: {reason}")
    return usable
