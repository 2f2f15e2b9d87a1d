"""``na-train import-lerobot`` on LeRobot datasets in the layouts and spellings found in the wild, each built here
with pyarrow from known encoder steps: motor names ``shoulder_pan.pos`` / ``main_shoulder_pan`` / ``motor_1..6`` /
``joint_0..5``, nested name lists, alphabetical order; robot_type spellings; degrees, range units and raw steps with
no unit recorded; calibration files by path or robot id (old folder name, overflowed offsets); v2 one-file-per-
episode layout and v3 files whose episodes cross a file boundary. Each imports to the joint radians and Present Load
worked out here from the steps, or is refused in one line that names what is ambiguous or missing."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from na_training.cli import main
from na_training.nad import load_nad, read_info

MOTORS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
FPS = 30
FRAMES = (40, 36)                                     # two episodes
# A LeRobot calibration of an SO-101 follower (steps after homing), and one with an overflowed homing offset.
RANGES = {"shoulder_pan": (760, 3340), "shoulder_lift": (850, 3200), "elbow_flex": (900, 3150),
          "wrist_flex": (880, 3250), "wrist_roll": (0, 4095), "gripper": (2030, 3450)}


def calibration_json(overflow: bool = False) -> dict:
    return {m: {"id": k + 1, "drive_mode": 0, "homing_offset": 2050 if overflow and m == "elbow_flex" else -300 + k,
                "range_min": RANGES[m][0], "range_max": RANGES[m][1]} for k, m in enumerate(MOTORS)}


def steps_of(episode: int, frames: int, reach: float) -> np.ndarray:
    """Whole encoder steps ``[T, 6]``: each motor walks about the middle of its range, ``reach`` of its half-range."""
    rng = np.random.default_rng(episode)
    out = np.empty((frames, len(MOTORS)))
    for k, m in enumerate(MOTORS):
        lo, hi = RANGES[m]
        middle, half = (lo + hi) / 2.0, (hi - lo) / 2.0
        walk = np.sin(np.linspace(0, 3.0, frames) + k) * reach * half + rng.normal(0, 4.0, frames)
        out[:, k] = np.clip(np.rint(middle + walk), lo, hi)
    return out


def degrees(steps: np.ndarray, middle: np.ndarray) -> np.ndarray:
    """LeRobot's DEGREES normalisation (motors_bus.py), the gripper 0..100 of its range."""
    out = (steps - middle) * 360.0 / 4095.0
    lo, hi = RANGES["gripper"]
    out[:, 5] = (steps[:, 5] - lo) / (hi - lo) * 100.0
    return out


def range_units(steps: np.ndarray) -> np.ndarray:
    """LeRobot's RANGE_M100_100 (gripper RANGE_0_100) with drive_mode 0."""
    lo = np.array([RANGES[m][0] for m in MOTORS], float)
    hi = np.array([RANGES[m][1] for m in MOTORS], float)
    out = (steps - lo) / (hi - lo) * 200.0 - 100.0
    out[:, 5] = (steps[:, 5] - lo[5]) / (hi[5] - lo[5]) * 100.0
    return out


def radians(steps: np.ndarray) -> np.ndarray:
    """The suite's joint angle of a step (so101.yaml: homing 0, direction +1; 4096 steps per turn about 2048)."""
    return (steps - 2048.0) * 2.0 * math.pi / 4096.0


CALIBRATED_MIDDLE = np.array([sum(RANGES[m]) / 2.0 for m in MOTORS])


def write_dataset(root: Path, *, names: list[str], state: Callable[[int, int], np.ndarray],
                  action: Callable[[int, int], np.ndarray] | None = None, robot_type: str | None = "so101_follower",
                  version: str = "v3.0", names_form: str = "list", load_names: list[str] | None = None,
                  load: Callable[[int, int], np.ndarray] | None = None, load_in_state: bool = True,
                  files: list[tuple[int, int, int]] | None = None, episode_meta: bool = True) -> Path:
    """A LeRobot dataset. ``names``: the six position names (any order; values are given in MOTORS order and put in
    that order); ``load``: Present Load ``[T, 6]`` (MOTORS order) as state entries ``load_names`` or a feature
    ``observation.effort``; ``files``: v3 data file of each (episode, first row, end row) part."""
    order = [next(i for i, m in enumerate(MOTORS) if n == m or n.endswith(m) or m in n) for n in names] \
        if not names[0].startswith(("motor_", "joint_")) else \
        [int(n.split("_")[1]) - (1 if n.startswith("motor_") else 0) for n in names]
    wrap = {"list": lambda n: n, "motors": lambda n: {"motors": n}, "nested": lambda n: [n]}[names_form]
    state_names = list(names) + (list(load_names) if load is not None and load_in_state else [])
    features = {"observation.state": {"dtype": "float32", "shape": [len(state_names)], "names": wrap(state_names)},
                "action": {"dtype": "float32", "shape": [6], "names": wrap(list(names))}}
    if load is not None and not load_in_state:
        features["observation.effort"] = {"dtype": "float32", "shape": [6], "names": wrap(list(load_names))}
    features.update({k: {"dtype": t, "shape": [1], "names": None} for k, t in
                     (("timestamp", "float32"), ("frame_index", "int64"), ("episode_index", "int64"),
                      ("index", "int64"), ("task_index", "int64"))})
    v3 = version.startswith("v3")
    info = {"codebase_version": version, "robot_type": robot_type, "fps": FPS, "total_episodes": len(FRAMES),
            "total_frames": sum(FRAMES), "total_tasks": 1, "chunks_size": 1000,
            "data_path": "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet" if v3 else
            "data/chunk-{episode_chunk:03d}/episode_{episode_index:06d}.parquet", "features": features}
    (root / "meta").mkdir(parents=True)
    (root / "meta" / "info.json").write_text(json.dumps(info))
    load_order = [next(i for i, m in enumerate(MOTORS) if m in n or n.endswith(m)) for n in load_names or []] \
        if load_names and not load_names[0].startswith(("motor_", "joint_")) else order
    rows, first = [], 0
    for episode, frames in enumerate(FRAMES):
        pos = state(episode, frames)[:, order]
        act = (action or state)(episode, frames)[:, order]
        data = {"observation.state": pos, "action": act}
        if load is not None:
            ld = load(episode, frames)[:, load_order]
            data["observation.state" if load_in_state else "observation.effort"] = \
                np.concatenate([pos, ld], axis=1) if load_in_state else ld
        data.update(timestamp=np.arange(frames) / FPS, frame_index=np.arange(frames),
                    episode_index=np.full(frames, episode), index=first + np.arange(frames),
                    task_index=np.zeros(frames, int))
        rows.append(data)
        first += frames
    if v3:
        pq.write_table(pa.table({"task_index": [0], "__index_level_0__": ["pick the cube"]}),
                       root / "meta" / "tasks.parquet")
        parts = files or [(e, 0, n) for e, n in enumerate(FRAMES)]
        by_file: dict[int, list[dict]] = {}
        for k, (episode, start, stop) in enumerate(parts):
            file = k if files else 0
            by_file.setdefault(file, []).append({key: v[start:stop] for key, v in rows[episode].items()})
        for file, chunks in by_file.items():
            _write_frames(root / "data" / "chunk-000" / f"file-{file:03d}.parquet", chunks)
        if episode_meta:
            starts = np.cumsum([0, *FRAMES])
            path = root / "meta" / "episodes" / "chunk-000" / "file-000.parquet"
            path.parent.mkdir(parents=True)
            pq.write_table(pa.table({"episode_index": list(range(len(FRAMES))), "tasks": [["pick the cube"]] * 2,
                                     "length": list(FRAMES), "data/chunk_index": [0, 0], "data/file_index": [0, 0],
                                     "dataset_from_index": starts[:-1].tolist(),
                                     "dataset_to_index": starts[1:].tolist()}), path)
    else:
        (root / "meta" / "tasks.jsonl").write_text(json.dumps({"task_index": 0, "task": "pick the cube"}) + "\n")
        (root / "meta" / "episodes.jsonl").write_text("".join(
            json.dumps({"episode_index": e, "tasks": ["pick the cube"], "length": n}) + "\n"
            for e, n in enumerate(FRAMES)))
        for episode, data in enumerate(rows):
            _write_frames(root / "data" / "chunk-000" / f"episode_{episode:06d}.parquet", [data])
    return root


def _write_frames(path: Path, chunks: list[dict]) -> None:
    columns = {}
    for key in chunks[0]:
        values = np.concatenate([c[key] for c in chunks])
        if values.ndim == 2:
            columns[key] = pa.array(list(values.astype(np.float32)), pa.list_(pa.float32()))
        else:
            columns[key] = pa.array(values.astype(np.float32 if key == "timestamp" else np.int64))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path)


def loads(episode: int, frames: int) -> np.ndarray:
    """Signed Present Load in 0.1 % units, MOTORS order."""
    return np.stack([(-1) ** k * (50 * (k + 1) + episode + np.arange(frames)) for k in range(6)], axis=1)


def run(*argv: str) -> int:
    return main(["import-lerobot", *argv, "--quiet"])


def imported(tmp_path: Path, dataset: Path, *options: str) -> list:
    out = tmp_path / "nad"
    assert run(str(dataset), "--out", str(out), *options) == 0
    return load_nad(out)


def refused(tmp_path: Path, capsys: pytest.CaptureFixture[str], dataset: Path, *options: str) -> str:
    out = tmp_path / "nad_refused"
    assert run(str(dataset), "--out", str(out), *options) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("na-train import-lerobot: error:") and "\n" not in err
    assert not out.exists() and not any(p.name.startswith(".nad_refused") for p in tmp_path.iterdir())
    return err


def check_arm(episodes: list, expected: Callable[[int, int], np.ndarray], with_gripper: bool = True) -> None:
    """Every arm joint (and the gripper, when its steps give it) at the radians of the steps."""
    for e, ep in enumerate(episodes):
        want = expected(e, FRAMES[e])
        upto = 6 if with_gripper else 5
        for k, motor in enumerate(MOTORS[:upto]):
            np.testing.assert_allclose(ep.columns[f"position_{motor}"], want[:, k], atol=2e-6, err_msg=motor)
            np.testing.assert_allclose(ep.columns[f"command_position_{motor}"], want[:, k], atol=2e-6)


def check_load(episodes: list) -> None:
    for e, ep in enumerate(episodes):
        np.testing.assert_allclose(ep.per_joint("load"), loads(e, FRAMES[e]) / 1000.0, atol=1e-6)


# ----------------------------------------------------------------------------------------- imported

def test_alphabetical_names_degrees_beyond_100(tmp_path: Path) -> None:
    """shoulder_pan.pos in alphabetical order, loads interleaved in the state, wrist_roll past 100 degrees."""
    names = sorted(f"{m}.pos" for m in MOTORS)
    wide = lambda e, n: degrees(steps_of(e, n, 0.9), np.full(6, 2048.0))          # noqa: E731
    dataset = write_dataset(tmp_path / "ds", names=names, state=wide, robot_type="so101",
                            load=loads, load_names=sorted(f"{m}.load" for m in MOTORS))
    episodes = imported(tmp_path, dataset)
    check_arm(episodes, lambda e, n: radians(steps_of(e, n, 0.9)), with_gripper=False)
    check_load(episodes)
    statements = read_info(tmp_path / "nad")["converter"]["statements"]
    assert any("joint units: degrees" in s and "beyond the +-100" in s for s in statements)
    assert any("Present Load in 0.1 % units" in s for s in statements)


def test_v2_main_prefix_range_units_calibration_by_robot_id(tmp_path: Path) -> None:
    """An older v2.1 recording: {"motors": [main_...]}, Present Load as observation.effort, robot_type so100, range
    units with no unit recorded; the calibration found by id in the old so101_follower folder."""
    names = [f"main_{m}" for m in MOTORS]
    folder = tmp_path / "calibration" / "robots" / "so101_follower"
    folder.mkdir(parents=True)
    (folder / "my_arm.json").write_text(json.dumps(calibration_json()))
    dataset = write_dataset(tmp_path / "ds", names=names, names_form="motors", version="v2.1", robot_type="so100",
                            state=lambda e, n: range_units(steps_of(e, n, 0.95)), load=loads, load_names=names,
                            load_in_state=False)
    episodes = imported(tmp_path, dataset, "--robot-id", "my_arm", "--calibration-dir", str(tmp_path / "calibration"))
    check_arm(episodes, lambda e, n: radians(steps_of(e, n, 0.95)))
    check_load(episodes)
    statements = read_info(tmp_path / "nad")["converter"]["statements"]
    assert any("joint units: range" in s and "grid" in s for s in statements), statements
    assert any("SO-100" in s for s in statements) and any("so101_follower/my_arm.json" in s for s in statements)


def test_generic_motor_numbers_degree_grid_and_raw_load_words(tmp_path: Path) -> None:
    """motor_1..6 in reverse order, robot_type so-100, degrees within +-100 about the calibrated middles (told by
    the degree grid), Present Load stored as the raw word with its sign in bit 10."""
    names = [f"motor_{k}" for k in range(6, 0, -1)]
    raw = lambda e, n: np.where(loads(e, n) < 0, 1024 - loads(e, n), loads(e, n))     # noqa: E731
    dataset = write_dataset(tmp_path / "ds", names=names, robot_type="so-100", load=raw,
                            load_names=[f"motor_{k}.load" for k in range(6, 0, -1)],
                            state=lambda e, n: degrees(steps_of(e, n, 0.5), CALIBRATED_MIDDLE))
    calibration = tmp_path / "follower.json"
    calibration.write_text(json.dumps(calibration_json()))
    episodes = imported(tmp_path, dataset, "--calibration", str(calibration))
    check_arm(episodes, lambda e, n: radians(steps_of(e, n, 0.5)))
    check_load(episodes)
    statements = read_info(tmp_path / "nad")["converter"]["statements"]
    assert any("degree grid" in s for s in statements) and any("bit 10" in s for s in statements)


def test_joint_numbers_nested_names_and_files_crossing(tmp_path: Path) -> None:
    """joint_0..5 in a nested names list; three v3 data files, episode 0 continuing in the second file."""
    names = [f"joint_{k}" for k in range(6)]
    state = lambda e, n: degrees(steps_of(e, n, 0.9), np.full(6, 2048.0))             # noqa: E731
    dataset = write_dataset(tmp_path / "ds", names=names, names_form="nested", state=state, load=loads,
                            load_names=[f"joint_{k}.load" for k in range(6)],
                            files=[(0, 0, 25), (0, 25, 40), (1, 0, 36)])
    assert len(list((dataset / "data" / "chunk-000").iterdir())) == 3
    episodes = imported(tmp_path, dataset)
    assert [len(ep) for ep in episodes] == list(FRAMES)
    check_arm(episodes, lambda e, n: radians(steps_of(e, n, 0.9)), with_gripper=False)
    check_load(episodes)


def test_raw_steps_and_overflowed_homing_offset_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    names = [f"{m}.pos" for m in MOTORS]
    calibration = tmp_path / "follower.json"
    calibration.write_text(json.dumps(calibration_json(overflow=True)))
    dataset = write_dataset(tmp_path / "ds", names=names, state=lambda e, n: steps_of(e, n, 0.9), load=loads,
                            load_names=[f"{m}.load" for m in MOTORS])
    out = tmp_path / "nad"
    assert main(["import-lerobot", str(dataset), "--out", str(out), "--calibration", str(calibration)]) == 0
    printed = capsys.readouterr().out
    assert "raw encoder steps" in printed and "homing_offset 2050" in printed and "overflowed" in printed
    check_arm(load_nad(out), lambda e, n: radians(steps_of(e, n, 0.9)))


def test_no_robot_type_and_calibration_folder(tmp_path: Path) -> None:
    """No robot_type: the arm told by the motor names; --calibration names LeRobot's folder, --robot-id the file."""
    folder = tmp_path / "calibration" / "robots" / "so_follower"
    folder.mkdir(parents=True)
    (folder / "arm2.json").write_text(json.dumps(calibration_json()))
    dataset = write_dataset(tmp_path / "ds", names=[f"{m}.pos" for m in MOTORS], robot_type=None, load=loads,
                            load_names=[f"{m}.load" for m in MOTORS],
                            state=lambda e, n: range_units(steps_of(e, n, 0.95)))
    episodes = imported(tmp_path, dataset, "--calibration", str(tmp_path / "calibration"), "--robot-id", "arm2")
    check_arm(episodes, lambda e, n: radians(steps_of(e, n, 0.95)))
    statements = read_info(tmp_path / "nad")["converter"]["statements"]
    assert any("told from the motor names" in s for s in statements)
    assert any("so_follower/arm2.json" in s for s in statements)


# ----------------------------------------------------------------------------------------- refused

def _ambiguous(e: int, n: int) -> np.ndarray:
    """Degrees within +-100, moved off every grid (as a resampled or filtered recording would be)."""
    return degrees(steps_of(e, n, 0.5), np.full(6, 2048.0)) + 0.0137


@pytest.mark.parametrize(("kind", "expected"), [
    ("ambiguous", "joint units are ambiguous"),
    ("range_without_calibration", "without the arm's calibration file"),
    ("omx", "ROBOTIS's OMX"),
    ("bimanual", "duplicated"),
    ("unnamed", "names no motors"),
    ("calibration_id", "no LeRobot calibration for robot id 'nobody'"),
    ("fraction_load", "fit both a signed fraction and 0.1 % register units"),
    ("gripper", "not LeRobot's 0..100 gripper range"),
    ("length", "meta/episodes says 40 frames"),
])
def test_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str, expected: str) -> None:
    names = [f"{m}.pos" for m in MOTORS]
    options: dict = {"names": names, "state": _ambiguous, "load": loads, "load_names": [f"{m}.load" for m in MOTORS]}
    extra: list[str] = []
    if kind == "range_without_calibration":
        options["state"] = lambda e, n: range_units(steps_of(e, n, 0.95))
    elif kind == "omx":
        options["robot_type"] = "omx_follower"
    elif kind == "bimanual":
        options["names"] = [f"left_{m}.pos" for m in MOTORS[:3]] + [f"right_{m}.pos" for m in MOTORS[:3]]
    elif kind == "calibration_id":
        extra = ["--robot-id", "nobody", "--calibration-dir", str(tmp_path / "none")]
    elif kind == "fraction_load":
        options["load"] = lambda e, n: loads(e, n) / 1000.0
        extra = ["--joint-units", "degrees"]
    elif kind == "gripper":
        options["state"] = lambda e, n: degrees(steps_of(e, n, 0.5), np.full(6, 2048.0)) * [1, 1, 1, 1, 1, 3]
        extra = ["--joint-units", "degrees"]
    elif kind == "length":
        options["files"] = [(0, 0, 30), (1, 0, 36)]
        extra = ["--joint-units", "degrees"]
    dataset = write_dataset(tmp_path / "ds", **options)
    if kind == "unnamed":
        info = json.loads((dataset / "meta" / "info.json").read_text())
        info["features"]["observation.state"]["names"] = None
        (dataset / "meta" / "info.json").write_text(json.dumps(info))
    err = refused(tmp_path, capsys, dataset, *extra)
    assert expected in err, err


def test_ambiguous_units_import_once_named(tmp_path: Path) -> None:
    names = [f"{m}.pos" for m in MOTORS]
    dataset = write_dataset(tmp_path / "ds", names=names, state=_ambiguous, load=loads,
                            load_names=[f"{m}.load" for m in MOTORS])
    shift = 0.0137 * 4095.0 / 360.0 * 2.0 * math.pi / 4096.0
    episodes = imported(tmp_path, dataset, "--joint-units", "degrees")
    check_arm(episodes, lambda e, n: radians(steps_of(e, n, 0.5)) + shift, with_gripper=False)
