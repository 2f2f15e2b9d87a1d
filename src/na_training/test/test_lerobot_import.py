"""``na-train import-lerobot``: a small LeRobot v3 dataset written here with pyarrow becomes a NAD whose
values, units, splits and features are checked against numbers worked out in this file; every dataset
that cannot be imported is refused in one line, and nothing is written."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from na_training.cli import main
from na_training.nad import load_nad, read_info

# The SO-101's motors as LeRobot names them, deliberately not in the spec's order.
STATE_MOTORS = ["gripper", "shoulder_pan", "elbow_flex", "shoulder_lift", "wrist_roll", "wrist_flex"]
ACTION_MOTORS = ["wrist_flex", "gripper", "shoulder_lift", "elbow_flex", "wrist_roll", "shoulder_pan"]
SPEC_ORDER = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
JAW_LOWER, JAW_UPPER = -0.174533, 1.74533          # so101.yaml gripper limits, typed again
FPS = 30
# Episodes: (LeRobot episode index, task index, frames, data file)
EPISODES = [(0, 0, 40, 0), (1, 1, 30, 0), (2, 0, 25, 1)]
TASKS = ["pick the cube", "push the block"]


def deg_to_rad(deg: np.ndarray) -> np.ndarray:
    """LeRobot degrees (steps - middle) * 360 / 4095 back to the servo's steps and on to rad (4096 per turn)."""
    return np.asarray(deg, dtype=np.float64) * 4095.0 / 360.0 * (2.0 * math.pi / 4096.0)


def motor_degrees(episode: int, frames: int) -> dict[str, np.ndarray]:
    """Known positions in degrees per motor (gripper: 0..100): ramps with a slope per motor."""
    t = np.arange(frames) / FPS
    values = {m: (10.0 * (k + 1) + episode) + (3.0 * (k + 1)) * t for k, m in enumerate(SPEC_ORDER[:5])}
    values["gripper"] = 20.0 + 10.0 * t + episode
    return values


def motor_load(episode: int, frames: int) -> dict[str, np.ndarray]:
    """Signed Present Load in 0.1 % units per motor."""
    return {m: (-1) ** k * (100.0 * (k + 1) + episode + np.arange(frames)) for k, m in enumerate(SPEC_ORDER)}


def write_dataset(root: Path, *, version: str = "v3.0", robot_type: str = "so101_follower",
                  drop_feature: str | None = None, load: str = "state", rename: dict[str, str] | None = None) -> Path:
    """A LeRobot v3 dataset: info.json, tasks, episode metadata and two data files (episodes 0, 1 | 2).

    ``load``: "state" (observation.state <motor>.load entries), "feature" (observation.load) or "none".
    ``rename`` renames motors in every name list (a dataset of other motors)."""
    rename = rename or {}
    state_names = [f"{rename.get(m, m)}.pos" for m in STATE_MOTORS]
    if load == "state":
        state_names += [f"{rename.get(m, m)}.load" for m in reversed(STATE_MOTORS)]
    action_names = [f"{rename.get(m, m)}.pos" for m in ACTION_MOTORS]
    features = {
        "observation.state": {"dtype": "float32", "shape": [len(state_names)], "names": state_names},
        "action": {"dtype": "float32", "shape": [6], "names": action_names},
        "timestamp": {"dtype": "float32", "shape": [1], "names": None},
        "frame_index": {"dtype": "int64", "shape": [1], "names": None},
        "episode_index": {"dtype": "int64", "shape": [1], "names": None},
        "index": {"dtype": "int64", "shape": [1], "names": None},
        "task_index": {"dtype": "int64", "shape": [1], "names": None},
    }
    if load == "feature":
        features["observation.load"] = {"dtype": "float32", "shape": [6], "names": list(reversed(STATE_MOTORS))}
    if drop_feature:
        features.pop(drop_feature)
    info = {"codebase_version": version, "robot_type": robot_type, "fps": FPS, "total_episodes": len(EPISODES),
            "total_frames": sum(e[2] for e in EPISODES), "total_tasks": len(TASKS), "chunks_size": 1000,
            "data_files_size_in_mb": 100, "video_files_size_in_mb": 200, "splits": {"train": "0:3"},
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet", "video_path": None,
            "features": features}
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(info, indent=2))
    pq.write_table(pa.table({"task_index": pa.array(range(len(TASKS)), pa.int64()), "__index_level_0__": TASKS}),
                   root / "meta" / "tasks.parquet")
    files: dict[int, list[dict]] = {}
    first = 0
    for episode, task, frames, file in EPISODES:
        pos, ld = motor_degrees(episode, frames), motor_load(episode, frames)
        state = np.stack([pos[m] for m in STATE_MOTORS], axis=1)
        if load == "state":
            state = np.concatenate([state, np.stack([ld[m] for m in reversed(STATE_MOTORS)], axis=1)], axis=1)
        action = np.stack([pos[m] + 1.0 for m in ACTION_MOTORS], axis=1)       # command 1 unit ahead
        order = np.random.default_rng(episode).permutation(frames)            # rows not in frame order
        rows = {"observation.state": state[order], "action": action[order],
                "timestamp": (np.arange(frames) / FPS)[order], "frame_index": np.arange(frames)[order],
                "episode_index": np.full(frames, episode), "index": (first + np.arange(frames))[order],
                "task_index": np.full(frames, task)}
        if load == "feature":
            rows["observation.load"] = np.stack([ld[m] for m in reversed(STATE_MOTORS)], axis=1)[order]
        files.setdefault(file, []).append(rows)
        first += frames
    for file, parts in files.items():
        columns = {}
        for key in parts[0]:
            if key == drop_feature:
                continue
            values = np.concatenate([p[key] for p in parts])
            if values.ndim == 2:
                columns[key] = pa.array(list(values.astype(np.float32)), pa.list_(pa.float32(), values.shape[1]))
            else:
                columns[key] = pa.array(values.astype(np.float32 if key == "timestamp" else np.int64))
        path = root / "data" / "chunk-000" / f"file-{file:03d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(pa.table(columns), path)
    episodes_meta = root / "meta" / "episodes" / "chunk-000" / "file-000.parquet"
    episodes_meta.parent.mkdir(parents=True)
    pq.write_table(pa.table({"episode_index": [e[0] for e in EPISODES], "length": [e[2] for e in EPISODES],
                             "tasks": [[TASKS[e[1]]] for e in EPISODES]}), episodes_meta)
    return root


def run(*argv: str) -> int:
    """``na-train import-lerobot``; these datasets stay within +-100, so degrees are named unless a test names units."""
    units = [] if "--joint-units" in argv else ["--joint-units", "degrees"]
    return main(["import-lerobot", *argv, *units, "--quiet"])


def test_import_maps_values_and_units(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "lerobot")
    out = tmp_path / "nad"
    assert run(str(dataset), "--out", str(out)) == 0
    info = read_info(out)
    assert info["robot"] == "so101" and info["effort_signal"] == "load"
    assert info["joint_names"] == SPEC_ORDER and info["condition_joints"] == ["elbow_flex"]
    assert info["frame_period_s"] == pytest.approx(1 / 30)
    assert {c["name"]: c["unit"] for c in info["columns"]}["load_elbow_flex"] == "1"
    episodes = load_nad(out)
    assert [len(ep) for ep in episodes] == [e[2] for e in EPISODES]
    for ep, (source, task, frames, _) in zip(episodes, EPISODES, strict=True):
        assert ep.meta["task"] == TASKS[task] and ep.meta["force_source"] == "none"
        pos, ld = motor_degrees(source, frames), motor_load(source, frames)
        for k, joint in enumerate(SPEC_ORDER[:5]):
            np.testing.assert_allclose(ep.columns[f"position_{joint}"], deg_to_rad(pos[joint].astype(np.float32)),
                                       atol=1e-9)
            np.testing.assert_allclose(ep.columns[f"command_position_{joint}"],
                                       deg_to_rad((pos[joint] + 1.0).astype(np.float32)), atol=1e-9)
            # a ramp of 3 (k+1) deg/s: finite differences give it exactly (up to float32 storage)
            np.testing.assert_allclose(ep.columns[f"velocity_{joint}"], deg_to_rad(3.0 * (k + 1)), rtol=1e-4)
        jaw = JAW_LOWER + pos["gripper"].astype(np.float32).astype(np.float64) / 100.0 * (JAW_UPPER - JAW_LOWER)
        np.testing.assert_allclose(ep.columns["position_gripper"], jaw, atol=1e-9)
        np.testing.assert_allclose(ep.columns["gripper_slide"], jaw, atol=1e-9)      # the SO-101 jaw: rad = rad
        for joint in SPEC_ORDER:
            np.testing.assert_allclose(ep.columns[f"load_{joint}"], ld[joint] / 1000.0, atol=1e-6)
            assert np.all(ep.columns[f"input_voltage_{joint}"] == 12.0)
            assert np.all(ep.columns[f"temperature_{joint}"] == 25.0)
        np.testing.assert_allclose(ep.time, np.arange(frames) / 30.0, atol=1e-6)
        assert ep.valid.all() and not ep.contact.any() and not ep.force_valid.any() and not ep.force.any()
        assert np.isnan(ep.stack(["force_x", "force_y", "force_z"])).all()          # stored as no label
        assert np.all(ep.condition == 1.0)
        assert ep.features().shape == (frames, 43)


def test_splits_per_task_and_load_as_feature(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "lerobot", load="feature")
    out = tmp_path / "nad"
    assert run(str(dataset), "--out", str(out), "--seed", "3") == 0
    info = read_info(out)
    # "pick the cube": 2 episodes -> 1 train + 1 test; "push the block": 1 episode -> train
    assert info["split_counts"] == {"train": 2, "val": 0, "test": 1}
    episodes = load_nad(out)
    by_task = {t: sorted(ep.meta["split"] for ep in episodes if ep.meta["task"] == t) for t in TASKS}
    assert by_task == {"pick the cube": ["test", "train"], "push the block": ["train"]}
    np.testing.assert_allclose(episodes[1].columns["load_gripper"], motor_load(1, 30)["gripper"] / 1000.0, atol=1e-6)


def test_calibrated_range_mode(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "lerobot")
    calibration = {m: {"id": k + 1, "drive_mode": 0, "homing_offset": 0, "range_min": 1000 + 10 * k,
                       "range_max": 3000 + 20 * k} for k, m in enumerate(SPEC_ORDER)}
    (tmp_path / "follower.json").write_text(json.dumps(calibration))
    out = tmp_path / "nad"
    assert run(str(dataset), "--out", str(out), "--joint-units", "range", "--calibration",
               str(tmp_path / "follower.json")) == 0
    ep = load_nad(out)[0]
    pos = motor_degrees(0, 40)
    for joint in SPEC_ORDER:
        low, high = calibration[joint]["range_min"], calibration[joint]["range_max"]
        value = pos[joint].astype(np.float32).astype(np.float64)
        share = value / 100.0 if joint == "gripper" else (value + 100.0) / 200.0
        steps = low + share * (high - low)
        np.testing.assert_allclose(ep.columns[f"position_{joint}"], (steps - 2048) * 2 * math.pi / 4096, atol=1e-9)


@pytest.mark.parametrize(("kind", "expected"), [
    ("no_state", "no 'observation.state' feature"),
    ("no_action", "no 'action' feature"),
    ("no_load", "no Present Load column"),
    ("motor_names", "missing ['elbow_flex']"),
    ("version", "codebase_version v1.6 is not supported"),
    ("robot", "robot_type 'koch_follower' is not an arm this suite models"),
    ("range", "without the arm's calibration file"),
])
def test_bad_input_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str,
                                          expected: str) -> None:
    options = {"no_state": {"drop_feature": "observation.state"}, "no_action": {"drop_feature": "action"},
               "no_load": {"load": "none"}, "motor_names": {"rename": {"elbow_flex": "elbow"}},
               "version": {"version": "v1.6"}, "robot": {"robot_type": "koch_follower"}}.get(kind, {})
    dataset = write_dataset(tmp_path / "lerobot", **options)
    out = tmp_path / "nad"
    extra = ["--joint-units", "range"] if kind == "range" else []
    assert run(str(dataset), "--out", str(out), *extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("na-train import-lerobot: error:") and "\n" not in err
    assert expected in err
    assert not out.exists() and not any(p.name.startswith(".nad") for p in tmp_path.iterdir())


def test_episode_split_over_two_data_files(tmp_path: Path) -> None:
    dataset = write_dataset(tmp_path / "lerobot")
    second = dataset / "data" / "chunk-000" / "file-001.parquet"
    table = pq.read_table(second)                          # episode 2, 25 rows
    pq.write_table(table.slice(0, 10), second)
    pq.write_table(table.slice(10), dataset / "data" / "chunk-000" / "file-002.parquet")
    out = tmp_path / "nad"
    assert run(str(dataset), "--out", str(out)) == 0
    ep = load_nad(out)[2]
    assert len(ep) == 25
    np.testing.assert_allclose(ep.columns["position_shoulder_pan"],
                               deg_to_rad(motor_degrees(2, 25)["shoulder_pan"].astype(np.float32)), atol=1e-9)
