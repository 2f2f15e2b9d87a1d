"""NAD v1 schema, deterministic writer, loader and splits (no bags: synthetic frames)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from na_training import nad

JOINTS = ["joint1", "joint2", "joint3", "joint4", "gripper"]


def synthetic_frames(columns: list[nad.Column], frames: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    data: dict[str, np.ndarray] = {}
    for column in columns:
        if column.dtype == "bool":
            data[column.name] = rng.random(frames) > 0.2
        elif column.dtype == "uint8":
            data[column.name] = rng.integers(0, 2, frames).astype(np.uint8) * 32
        elif column.dtype == "int64":
            data[column.name] = 10**12 + np.arange(frames, dtype=np.int64) * 10_000_000
        else:
            data[column.name] = rng.normal(size=frames)
    data["time"] = np.arange(frames) * 0.01
    return data


def episode_meta(task: str, instance: str, frames: int) -> dict:
    return {"episode_id": task, "task": task, "task_instance": instance, "payload_grams": 0.0,
            "force_source": "none", "condition": "nominal", "condition_label": 1.0, "frame_count": frames,
            "duration_s": (frames - 1) * 0.01, "source_bag": f"bags/{task}", "source": "generated", "seed": 1,
            "operator": "", "notes": "", "complete": True}


def write_dataset(out: Path, episodes: int = 3, frames: int = 20, seed: int = 0, **kwargs) -> list[dict]:
    columns = nad.build_columns(JOINTS, ["joint3"], with_truth=False)
    writer = nad.NadWriter(out, columns, **kwargs)
    written = []
    for k in range(episodes):
        data = synthetic_frames(columns, frames, seed=k)
        writer.add_episode(episode_meta(f"task{k}", "instance_a", frames), data)
        written.append(data)
    writer.finish({"robot": "open_manipulator_x", "joint_names": JOINTS, "condition_joints": ["joint3"]},
                  {"episodes": []}, split_seed=seed)
    return written


# ----------------------------------------------------------------------------------- splits

@pytest.mark.parametrize("n", range(1, 31))
def test_split_counts_sum_and_ratio(n: int) -> None:
    train, val, test = nad.split_counts(n)
    assert train + val + test == n
    assert val == (test if n != 2 else 0)
    if n >= 3:
        assert train >= 1 and val >= 1
        assert abs(val - n / 10) <= 0.5 or (n < 5 and val == 1)    # at least one held out from n = 3
    if n % 10 == 0:
        assert (train, val, test) == (8 * n // 10, n // 10, n // 10)


def test_assign_splits_deterministic_and_independent_per_instance() -> None:
    first = {f"a{k}": "A" for k in range(10)}
    splits = nad.assign_splits(first, seed=5)
    assert sorted(splits.values()) == ["test"] + ["train"] * 8 + ["val"]
    assert nad.assign_splits(dict(reversed(list(first.items()))), seed=5) == splits
    with_other = nad.assign_splits({**first, **{f"b{k}": "B" for k in range(7)}}, seed=5)
    assert {k: with_other[k] for k in first} == splits
    assigned_by_seed = {tuple(sorted(nad.assign_splits(first, seed=s).items())) for s in range(6)}
    assert len(assigned_by_seed) > 1


# ----------------------------------------------------------------------------------- writer / loader

def test_round_trip_keeps_values_dtypes_and_units(tmp_path: Path) -> None:
    written = write_dataset(tmp_path / "nad")
    episodes = nad.load_nad(tmp_path / "nad")
    assert [e.index for e in episodes] == [0, 1, 2]
    for episode, data in zip(episodes, written, strict=True):
        for name, values in data.items():
            assert np.array_equal(episode.columns[name], values), name
        assert episode.columns["stale_joint1"].dtype == bool
        assert episode.columns["hardware_error_joint3"].dtype == np.uint8
        assert episode.per_joint("current").shape == (20, 5)
        assert np.array_equal(episode.force[:, 1], np.where(data["force_valid_y"], data["force_y"], 0.0))
        assert np.array_equal(episode.force_valid[:, 1], data["force_valid_y"])
        assert np.array_equal(episode.condition, data["condition_joint3"])
    schema = pq.read_schema(tmp_path / "nad" / "data" / "episode_000000.parquet")
    assert schema.field("current_joint2").metadata[b"unit"] == b"A"
    info = nad.read_info(tmp_path / "nad")
    assert info["schema_version"] == nad.SCHEMA_VERSION and info["episode_count"] == 3
    assert info["frame_count"] == 60 and info["dataset_id"].startswith("nad-")
    assert sum(info["split_counts"].values()) == 3


def test_writer_output_is_byte_identical(tmp_path: Path) -> None:
    write_dataset(tmp_path / "a")
    write_dataset(tmp_path / "b")
    files = sorted(p.relative_to(tmp_path / "a") for p in (tmp_path / "a").rglob("*") if p.is_file())
    assert files and all((tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes() for f in files)


def test_split_filter(tmp_path: Path) -> None:
    write_dataset(tmp_path / "nad", episodes=10)
    counts = {s: len(nad.load_nad(tmp_path / "nad", split=s)) for s in nad.SPLITS}
    assert counts == {"train": 8, "val": 1, "test": 1}
    assert len(nad.load_nad(tmp_path / "nad", split=["val", "test"])) == 2
    with pytest.raises(nad.NadError, match="unknown split"):
        nad.load_nad(tmp_path / "nad", split="validation")


def test_existing_output_protected_and_failed_write_leaves_nothing(tmp_path: Path) -> None:
    out = tmp_path / "nad"
    write_dataset(out)
    with pytest.raises(nad.NadError, match="not empty"):
        nad.NadWriter(out, nad.build_columns(JOINTS, ["joint3"], False))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "keep.txt").write_text("mine")
    with pytest.raises(nad.NadError, match="not a NAD"):
        nad.NadWriter(tmp_path / "notes", nad.build_columns(JOINTS, ["joint3"], False), overwrite=True)
    assert (tmp_path / "notes" / "keep.txt").read_text() == "mine"
    columns = nad.build_columns(JOINTS, ["joint3"], False)
    writer = nad.NadWriter(tmp_path / "other", columns)
    short = synthetic_frames(columns, 5, seed=1)
    short["position_joint1"] = short["position_joint1"][:3]
    with pytest.raises(nad.NadError, match="differ in length"):
        writer.add_episode(episode_meta("t", "i", 5), short)
    del short["position_joint1"]
    with pytest.raises(nad.NadError, match="lacks columns: position_joint1"):
        writer.add_episode(episode_meta("t", "i", 5), short)
    writer.abort()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nad", "notes"]


def test_loader_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(nad.NadError, match="not a NAD directory"):
        nad.load_nad(tmp_path)
    write_dataset(tmp_path / "nad")
    info_path = tmp_path / "nad" / "meta" / "info.json"
    info = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**info, "schema_version": "2.0"}))
    with pytest.raises(nad.NadError, match=re.escape("schema version '2.0' is not supported")):
        nad.load_nad(tmp_path / "nad")
    info_path.write_text(json.dumps(info))
    (tmp_path / "nad" / "data" / "episode_000001.parquet").unlink()
    with pytest.raises(nad.NadError, match=re.escape("episode 1 data file data/episode_000001.parquet is missing")):
        nad.load_nad(tmp_path / "nad")


def test_valid_window_starts_and_features(tmp_path: Path) -> None:
    write_dataset(tmp_path / "nad", episodes=1, frames=30)
    (episode,) = nad.load_nad(tmp_path / "nad")
    valid = episode.valid
    for length in (1, 5, 9):
        expected = [s for s in range(len(episode) - length + 1) if valid[s:s + length].all()]
        assert episode.valid_window_starts(length).tolist() == expected
    assert episode.valid_window_starts(31).size == 0
    features = episode.features()
    assert features.shape == (30, 36)
    # The contract's goal position is the command column; its first feature is joint1's command.
    assert np.array_equal(features[:, 0], episode.columns["command_position_joint1"])
