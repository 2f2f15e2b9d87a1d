"""``na-train export-lerobot``: generated episodes of both arms become LeRobot v3.0 datasets laid out as LeRobot's
loader reads them, and bags -> export -> import gives back the positions, commands and effort channels of the bags
(the NAD ``na-train convert`` makes at the same frame rate) within the float32 resolution of the exported units.
LeRobot itself is not a dependency: the test that opens an export with ``LeRobotDataset`` runs where lerobot is
importable, or with ``NA_LEROBOT_PYTHON`` naming a Python that has it, and is skipped otherwise."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from na_training import convert as conv
from na_training.cli import main
from na_training.nad import load_nad, read_info

FPS = {"so101": 30, "open_manipulator_x": 59}
# float32 of the exported unit at the values these episodes reach: degrees (< 200), percent, mA, V, degC, N.
RESOLUTION = {"position": 1e-6, "command_position": 1e-6, "velocity": 1e-5, "load": 1e-6, "current": 1e-6,
              "pwm": 1e-6, "input_voltage": 2e-6, "temperature": 5e-6}
COMPARED = {"so101": ("position", "command_position", "velocity", "load", "current", "input_voltage", "temperature"),
            "open_manipulator_x": ("position", "command_position", "velocity", "current", "pwm", "input_voltage",
                                   "temperature")}


@pytest.fixture(scope="module")
def bags(tmp_path_factory) -> dict[str, Path]:
    """Short generated episodes: SO-101 go_up_stay with and without a payload, OpenManipulator-X push_px (F/T)."""
    from na_sim.generate import GenerateOptions, generate

    root = tmp_path_factory.mktemp("lerobot_bags")
    generate(GenerateOptions(tasks=["go_up_stay"], payloads=[0.0, 200.0], quick=True, max_seconds=3.0,
                             robot="so101", out=root / "so101"), progress=False, log=lambda _: None)
    generate(GenerateOptions(tasks=["push_px"], quick=True, max_seconds=3.0, out=root / "open_manipulator_x"),
             progress=False, log=lambda _: None)
    return {"so101": root / "so101", "open_manipulator_x": root / "open_manipulator_x"}


def export(*argv: str) -> int:
    return main(["export-lerobot", *argv, "--jobs", "1", "--quiet"])


def reference(bag_dir: Path, robot: str, out: Path) -> list:
    """What the bags hold at the export's frames: na-train convert at the same rate."""
    conv.convert([bag_dir], out, rate_hz=float(FPS[robot]), robot=robot, jobs=1, progress=False)
    return load_nad(out)


@pytest.mark.parametrize("robot", ["so101", "open_manipulator_x"])
def test_round_trip_bags_export_import(bags: dict[str, Path], tmp_path: Path, robot: str) -> None:
    assert export(str(bags[robot]), "--out", str(tmp_path / "lerobot")) == 0
    assert main(["import-lerobot", str(tmp_path / "lerobot"), "--out", str(tmp_path / "nad"), "--quiet"]) == 0
    back, ref = load_nad(tmp_path / "nad"), reference(bags[robot], robot, tmp_path / "ref")
    assert read_info(tmp_path / "nad")["converter"]["joint_units"] == "degrees"
    assert [len(e) for e in back] == [len(e) for e in ref]
    for got, want in zip(back, ref, strict=True):
        for field in COMPARED[robot]:
            np.testing.assert_allclose(got.per_joint(field), want.per_joint(field), rtol=1e-6,
                                       atol=RESOLUTION[field], err_msg=f"{robot} {field}")
        np.testing.assert_allclose(got.time, want.time, atol=1e-6)
        assert np.array_equal(got.force_valid, want.force_valid) and np.array_equal(got.contact, want.contact)
        np.testing.assert_allclose(got.force[want.force_valid], want.force[want.force_valid], atol=1e-5)
        for key in ("task", "task_instance", "payload_grams", "force_source", "condition", "operator", "episode_id"):
            assert got.meta[key] == want.meta[key], key


def test_layout_follows_lerobot_v3(bags: dict[str, Path], tmp_path: Path) -> None:
    out = tmp_path / "lerobot"
    assert export(str(bags["so101"]), "--out", str(out)) == 0
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["codebase_version"] == "v3.0" and info["robot_type"] == "so101_follower" and info["fps"] == 30
    assert info["data_path"] == "data/chunk-{chunk_index:03d}/file-{file_index:03d}.parquet"
    assert info["video_path"] is None and info["total_episodes"] == 2 and info["total_tasks"] == 1
    motors = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    features = info["features"]
    assert features["observation.state"]["names"] == [f"{m}.pos" for m in motors] == features["action"]["names"]
    assert features["observation.load"]["names"] == [f"{m}.load_pct" for m in motors]
    assert features["observation.force"]["names"] == ["force.x_N", "force.y_N", "force.z_N"]
    assert features["observation.contact"]["shape"] == [1]
    assert list(features)[-5:] == ["timestamp", "frame_index", "episode_index", "index", "task_index"]
    data = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet")
    assert set(data.column_names) == set(features) and data.num_rows == info["total_frames"]
    assert data.schema.field("observation.contact").type == "float"           # shape [1] -> a scalar column
    episodes = pq.read_table(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    for key in ("episode_index", "tasks", "length", "data/chunk_index", "data/file_index", "dataset_from_index",
                "dataset_to_index", "meta/episodes/chunk_index", "meta/episodes/file_index",
                "stats/observation.state/mean", "payload_grams", "operator", "condition", "split"):
        assert key in episodes[0], key
    assert episodes[1]["dataset_from_index"] == episodes[0]["dataset_to_index"] == episodes[0]["length"]
    assert [e["payload_grams"] for e in episodes] == [0.0, 200.0]
    tasks = pq.read_table(out / "meta" / "tasks.parquet")
    assert tasks.column("__index_level_0__").to_pylist() == ["go_up_stay"]
    assert json.loads(tasks.schema.metadata[b"pandas"])["index_columns"] == ["__index_level_0__"]
    stats = json.loads((out / "meta" / "stats.json").read_text())
    state = np.stack(data.column("observation.state").to_numpy(zero_copy_only=False))
    np.testing.assert_allclose(stats["observation.state"]["mean"], state.mean(axis=0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(stats["observation.state"]["max"], state.max(axis=0), rtol=1e-6)
    assert stats["timestamp"]["count"] == [info["total_frames"]]
    assert set(stats["action"]) == {"min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"}
    # LeRobot's degrees: (steps - 2048) * 360 / 4095 of the bag's servo angle
    ref = reference(bags["so101"], "so101", tmp_path / "ref")[0]
    steps = ref.per_joint("position")[:, :5] * 4096 / (2 * math.pi)
    np.testing.assert_allclose(state[: len(ref), :5], steps * 360 / 4095, atol=1e-4)


def test_several_data_files_and_range_units(bags: dict[str, Path], tmp_path: Path) -> None:
    """Tiny data files (one episode each) and range units about a calibration; the import reads both back."""
    calibration = tmp_path / "follower.json"
    motors = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    calibration.write_text(json.dumps({m: {"id": k + 1, "drive_mode": int(m == "elbow_flex"), "homing_offset": 0,
                                           "range_min": 100, "range_max": 4000} for k, m in enumerate(motors)}))
    out = tmp_path / "lerobot"
    assert export(str(bags["so101"]), "--out", str(out), "--joint-units", "range", "--calibration", str(calibration),
                  "--max-file-mb", "0.001") == 0
    files = sorted(p.name for p in (out / "data" / "chunk-000").iterdir())
    assert files == ["file-000.parquet", "file-001.parquet"]
    rows = pq.read_table(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    assert [r["data/file_index"] for r in rows] == [0, 1]
    assert main(["import-lerobot", str(out), "--out", str(tmp_path / "nad"), "--calibration", str(calibration),
                 "--quiet"]) == 0
    assert read_info(tmp_path / "nad")["converter"]["joint_units"] == "range"
    for got, want in zip(load_nad(tmp_path / "nad"), reference(bags["so101"], "so101", tmp_path / "ref"),
                         strict=True):
        np.testing.assert_allclose(got.per_joint("position"), want.per_joint("position"), atol=1e-5)


def test_a_nad_is_exported_at_its_rate_or_resampled(bags: dict[str, Path], tmp_path: Path) -> None:
    ref = reference(bags["open_manipulator_x"], "open_manipulator_x", tmp_path / "nad59")
    assert export(str(tmp_path / "nad59"), "--out", str(tmp_path / "kept")) == 0
    info = json.loads((tmp_path / "kept" / "meta" / "info.json").read_text())
    assert info["fps"] == 59 and info["total_frames"] == sum(len(e) for e in ref)
    assert info["neural_actuator"]["source"] == "nad"
    conv.convert([bags["open_manipulator_x"]], tmp_path / "native", jobs=1, progress=False)      # 100 Hz samples
    assert export(str(tmp_path / "native"), "--out", str(tmp_path / "resampled"), "--fps", "50") == 0
    info = json.loads((tmp_path / "resampled" / "meta" / "info.json").read_text())
    native = load_nad(tmp_path / "native")[0]
    assert info["fps"] == 50 and info["total_frames"] == int((native.time[-1]) * 50) + 1
    assert "resampled" in info["neural_actuator"]["statements"][0]


def _estimator_bag(root: Path) -> Path:
    """One OpenManipulator-X episode at 100 Hz with the estimator's force and contact recorded beside it."""
    from na_common.episode_bag import EpisodeWriter, make_header, message_class

    def msg(kind: str, **fields):
        return message_class(kind)(**fields)

    joints = ["joint1", "joint2", "joint3", "joint4", "gripper"]
    t0, period = 5_000_000_000_000, 10_000_000
    meta = {"task": "press", "payload_grams": 0.0, "force_source": "none", "condition": "nominal",
            "source": "generated", "seed": 3, "operator": "estimator test"}
    with EpisodeWriter(root, meta) as writer:
        for topic, kind in (("/follower/arm_state", "na_msgs/msg/ArmState"),
                            ("/leader/arm_state", "na_msgs/msg/ArmState"),
                            ("/follower/command", "na_msgs/msg/JointCommand"),
                            ("/estimator/force", "geometry_msgs/msg/WrenchStamped"),
                            ("/estimator/contact", "na_msgs/msg/Contact")):
            writer.add_topic(topic, kind)
        for k in range(120):
            stamp, q = t0 + k * period, 0.002 * k * np.arange(1, 6)
            state = dict(header=make_header(stamp, "world"), name=joints, position=q, gripper_slide=0.01,
                         goal_gripper_slide=0.01, velocity=np.full(5, 0.2), goal_position=q, current=np.full(5, 0.1),
                         pwm=np.full(5, 0.2), load=np.zeros(0), input_voltage=np.full(5, 12.0),
                         temperature=np.full(5, 30.0), hardware_error=np.zeros(5, np.uint8), stale=np.zeros(5, bool),
                         timeout_errors=0, crc_errors=0, partial_errors=0, dropped_cycles=0, bus_cycle_duration=0.002)
            writer.write("/follower/command", stamp - 2_000_000, msg(
                "na_msgs/msg/JointCommand", header=make_header(stamp - 2_000_000, "world"), name=joints, position=q,
                gripper_slide=0.01))
            writer.write("/leader/arm_state", stamp - 1_000_000, msg("na_msgs/msg/ArmState", role="leader", **state))
            writer.write("/follower/arm_state", stamp, msg("na_msgs/msg/ArmState", role="follower", **state))
            vec = "geometry_msgs/msg/Vector3"
            force = msg(vec, x=0.01 * k, y=-1.0, z=2.0)
            writer.write("/estimator/force", stamp + 1_000_000, msg(
                "geometry_msgs/msg/WrenchStamped", header=make_header(stamp, "world"),
                wrench=msg("geometry_msgs/msg/Wrench", force=force, torque=msg(vec, x=0.0, y=0.0, z=0.0))))
            writer.write("/estimator/contact", stamp + 1_000_000, msg(
                "na_msgs/msg/Contact", header=make_header(stamp, "world"), probability=0.5 + 0.004 * k,
                in_contact=k >= 60))
    return writer.path


def test_estimator_outputs_are_exported(tmp_path: Path) -> None:
    bag = _estimator_bag(tmp_path / "bags")
    out = tmp_path / "lerobot"
    assert export(str(bag), "--out", str(out), "--fps", "50") == 0
    info = json.loads((out / "meta" / "info.json").read_text())
    assert info["robot_type"] == "open_manipulator_x"
    assert info["features"]["observation.force_estimate"]["names"] == ["force.x_N", "force.y_N", "force.z_N"]
    assert info["features"]["observation.contact_estimate"]["names"] == ["contact_probability", "in_contact",
                                                                         "estimate_valid"]
    assert "observation.force" not in info["features"]             # no F/T sensor, no payload: no force labels
    data = pq.read_table(out / "data" / "chunk-000" / "file-000.parquet")
    force = np.stack(data.column("observation.force_estimate").to_numpy(zero_copy_only=False))
    contact = np.stack(data.column("observation.contact_estimate").to_numpy(zero_copy_only=False))
    k = (frame_stamps(bag, tmp_path / "ref") - 5_000_000_000_000) // 10_000_000      # the follower sample index
    np.testing.assert_allclose(force[:, 0], 0.01 * k, atol=1e-5)
    np.testing.assert_allclose(force[:, 1:], np.tile([-1.0, 2.0], (len(k), 1)))
    np.testing.assert_allclose(contact[:, 0], 0.5 + 0.004 * k, atol=1e-5)
    assert np.array_equal(contact[:, 1], (k >= 60).astype(np.float32)) and np.all(contact[:, 2] == 1.0)
    episodes = pq.read_table(out / "meta" / "episodes" / "chunk-000" / "file-000.parquet").to_pylist()
    assert episodes[0]["operator"] == "estimator test" and episodes[0]["tasks"] == ["press"]


def frame_stamps(bag: Path, out: Path) -> np.ndarray:
    """The frame stamps (ns) the export's frames are taken at: the converter's 50 Hz grid."""
    conv.convert([bag], out, rate_hz=50.0, robot="open_manipulator_x", jobs=1, progress=False)
    return load_nad(out)[0].columns["stamp_ns"]


@pytest.mark.parametrize(("case", "expected"), [
    ("missing", "bag path not found"),
    ("range", "--joint-units range needs the arm's LeRobot calibration"),
    ("exists", "exists and is not empty"),
    ("fps", "--fps must be a whole number"),
    ("robot", "unknown robot 'so102'"),
])
def test_bad_input_is_refused_in_one_line(bags: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          case: str, expected: str) -> None:
    out = tmp_path / "lerobot"
    source = str(tmp_path / "nowhere") if case == "missing" else str(bags["so101"])
    extra = {"range": ["--joint-units", "range"], "fps": ["--fps", "0"], "robot": ["--robot", "so102"]}.get(case, [])
    if case == "exists":
        out.mkdir()
        (out / "keep.txt").write_text("mine")
    assert export(source, "--out", str(out), *extra) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("na-train export-lerobot: error:") and "\n" not in err and expected in err, err
    assert (out / "keep.txt").read_text() == "mine" if case == "exists" else not out.exists()
    assert not any(p.name.startswith(".lerobot") for p in tmp_path.iterdir())


# ----------------------------------------------------------------------------------------- LeRobot itself

OPEN_SCRIPT = textwrap.dedent("""
    import sys, numpy as np
    from lerobot.datasets.lerobot_dataset import LeRobotDataset
    ds = LeRobotDataset("local/na_export", root=sys.argv[1])
    keys = ["observation.state", "action", "observation.load", "observation.current", "observation.force"]
    frames = [ds[i] for i in range(len(ds))]
    out = {k: np.stack([f[k].numpy() for f in frames]) for k in keys}
    out["episode_index"] = np.array([int(f["episode_index"]) for f in frames])
    out["task"] = np.array([f["task"] for f in frames])
    out["length"] = np.array(len(ds)); out["episodes"] = np.array(ds.num_episodes); out["fps"] = np.array(ds.fps)
    np.savez(sys.argv[2], **out)
""")


def _lerobot_python() -> list[str] | None:
    try:
        import lerobot.datasets.lerobot_dataset  # noqa: F401
        return [sys.executable]
    except ImportError:
        python = os.environ.get("NA_LEROBOT_PYTHON")
        return [python] if python else None


def test_lerobot_dataset_opens_the_export(bags: dict[str, Path], tmp_path: Path) -> None:
    """LeRobotDataset(repo_id, root=export) yields every frame; state, action, load and current equal the bag's."""
    python = _lerobot_python()
    if python is None:
        pytest.skip("lerobot is not importable here (set NA_LEROBOT_PYTHON to a Python with lerobot installed)")
    out = tmp_path / "lerobot"
    assert export(str(bags["so101"]), "--out", str(out)) == 0
    script = tmp_path / "open.py"
    script.write_text(OPEN_SCRIPT)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_CACHE=str(tmp_path / "hf_cache"))
    subprocess.run([*python, str(script), str(out), str(tmp_path / "frames.npz")], check=True, env=env,
                   timeout=600)
    frames = np.load(tmp_path / "frames.npz")
    ref = reference(bags["so101"], "so101", tmp_path / "ref")
    assert int(frames["length"]) == sum(len(e) for e in ref) and int(frames["episodes"]) == 2
    assert int(frames["fps"]) == 30 and set(frames["task"]) == {"go_up_stay"}
    for index, want in enumerate(ref):
        rows = frames["episode_index"] == index
        steps = want.per_joint("position")[:, :5] * 4096 / (2 * math.pi)
        np.testing.assert_allclose(frames["observation.state"][rows, :5], steps * 360 / 4095, atol=1e-4)
        command = want.per_joint("command_position")[:, :5] * 4096 / (2 * math.pi)
        np.testing.assert_allclose(frames["action"][rows, :5], command * 360 / 4095, atol=1e-4)
        np.testing.assert_allclose(frames["observation.load"][rows], want.per_joint("load") * 100.0, atol=1e-4)
        np.testing.assert_allclose(frames["observation.current"][rows], want.per_joint("current") * 1000.0,
                                   atol=1e-3)
