"""Bag -> NAD conversion on real rosbag2 bags written here with na_teleop's EpisodeWriter (MCAP) and
rosbags' sqlite3 writer: labels, alignment tolerance, resampling, splits, determinism, errors."""

from __future__ import annotations

import argparse
import dataclasses
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml

from na_common.fixture import rotation_from_rpy
from na_training import convert as conv
from na_training.convert import job as convert_job
from na_training.convert import run as convert_run
from na_training.convert.bag import BagContents, read_bag
from na_training.convert.cli import configure_parser, main_convert, run_convert
from na_training.convert.config import DEFAULT_CONFIG
from na_training.convert.job import convert_bag
from na_training.convert.run import ConvertResult
from na_training.convert.streams import ARM_VECTOR_FIELDS, Stream
from na_training.labels import ft_force_label, payload_force_label
from na_training.nad import NadError, load_nad, read_info

JOINTS = ["joint1", "joint2", "joint3", "joint4", "gripper"]
T0 = 1_000 * 1_000_000_000          # ns, episode start (ROS time 1000 s)
MS = 1_000_000                      # ns
PERIOD = 10 * MS                    # 100 Hz, the recorded rate


def _msg(msgtype: str, **fields):
    from na_common.episode_bag import message_class

    return message_class(msgtype)(**fields)


def _header(stamp: int):
    from na_common.episode_bag import make_header

    return make_header(stamp, "world")


def arm_state(stamp: int, q: Sequence[float], role: str = "follower", *, stale: Sequence[bool] | None = None,
              hardware_error: Sequence[int] | None = None):
    n = len(JOINTS)
    q = np.asarray(q, dtype=float)
    return _msg("na_msgs/msg/ArmState", header=_header(stamp), role=role, name=JOINTS, position=q,
                gripper_slide=0.005 + 0.001 * q[4], goal_gripper_slide=0.005, velocity=0.5 * q, goal_position=q + 0.01,
                current=0.1 + q, pwm=np.full(n, 0.2), load=np.zeros(0), input_voltage=np.full(n, 12.0),
                temperature=np.full(n, 31.0),
                hardware_error=np.asarray(hardware_error if hardware_error is not None else np.zeros(n), np.uint8),
                stale=np.asarray(stale if stale is not None else np.zeros(n), bool), timeout_errors=0, crc_errors=0,
                partial_errors=0, dropped_cycles=0, bus_cycle_duration=0.002)


def command(stamp: int, q: Sequence[float]):
    return _msg("na_msgs/msg/JointCommand", header=_header(stamp), name=JOINTS, position=np.asarray(q, float),
                gripper_slide=0.004)


def wrench(stamp: int, force: Sequence[float]):
    vector3 = "geometry_msgs/msg/Vector3"
    return _msg("geometry_msgs/msg/WrenchStamped", header=_header(stamp), wrench=_msg(
        "geometry_msgs/msg/Wrench", force=_msg(vector3, x=float(force[0]), y=float(force[1]), z=float(force[2])),
        torque=_msg(vector3, x=0.0, y=0.0, z=0.0)))


def boolean(value: bool):
    return _msg("std_msgs/msg/Bool", data=bool(value))


def trajectory(stamp: int) -> np.ndarray:
    """Joint positions linear in time (so linear resampling is exact): q_k = (k+1) * 0.1 rad/s * t."""
    t = (stamp - T0) / 1e9
    return 0.1 * t * np.arange(1, len(JOINTS) + 1)


TYPES = {"/follower/arm_state": "na_msgs/msg/ArmState", "/leader/arm_state": "na_msgs/msg/ArmState",
         "/follower/command": "na_msgs/msg/JointCommand", "/ft/wrench": "geometry_msgs/msg/WrenchStamped",
         "/episode/grasp": "std_msgs/msg/Bool", "/sim/truth/wrench": "geometry_msgs/msg/WrenchStamped",
         "/sim/truth/contact": "std_msgs/msg/Bool"}


def standard_streams(frames: int = 101, command_offset: int = -2 * MS, leader_offset: int = -3 * MS,
                     follower_stamps: Sequence[int] | None = None) -> dict[str, list]:
    """Follower at 100 Hz, command and leader a few ms before each follower sample."""
    stamps = list(follower_stamps) if follower_stamps is not None else [T0 + k * PERIOD for k in range(frames)]
    return {
        "/follower/arm_state": [(s, arm_state(s, trajectory(s))) for s in stamps],
        "/follower/command": [(s + command_offset, command(s + command_offset, trajectory(s) + 0.05))
                              for s in stamps],
        "/leader/arm_state": [(s + leader_offset, arm_state(s + leader_offset, trajectory(s) + 0.05, "leader"))
                              for s in stamps],
    }


@pytest.fixture
def write_bag(tmp_path: Path) -> Callable[..., Path]:
    """Write one episode bag with EpisodeWriter: ``write_bag(streams, **metadata) -> bag path``."""
    from na_common.episode_bag import EpisodeWriter

    def _write(streams: dict[str, list], out: Path | None = None, types: dict[str, str] | None = None,
               **metadata) -> Path:
        meta = {"task": "free_motion", "payload_grams": 0.0, "force_source": "none", "condition": "nominal",
                "source": "generated", "seed": 7}
        meta.update(metadata)
        with EpisodeWriter(out or tmp_path / "bags", meta) as writer:
            for topic in streams:
                writer.add_topic(topic, {**TYPES, **(types or {})}[topic])
            records = sorted(((stamp, topic, msg) for topic, items in streams.items() for stamp, msg in items),
                             key=lambda r: (r[0], r[1]))
            for stamp, topic, msg in records:
                writer.write(topic, stamp, msg)
        return writer.path

    return _write


def run(bags: Sequence[Path] | Path, out: Path, **kwargs) -> ConvertResult:
    kwargs.setdefault("progress", False)
    kwargs.setdefault("jobs", 1)
    return conv.convert([bags] if isinstance(bags, Path) else list(bags), out, **kwargs)


# ------------------------------------------------------------------------------------ labels core

def test_rotation_from_rpy_matches_hand_computed_rotations() -> None:
    # yaw +90 deg maps base x to y; pitch +90 deg maps x to -z; roll +90 deg maps y to z.
    assert np.allclose(rotation_from_rpy(0, 0, np.pi / 2) @ [1, 0, 0], [0, 1, 0])
    assert np.allclose(rotation_from_rpy(0, np.pi / 2, 0) @ [1, 0, 0], [0, 0, -1])
    assert np.allclose(rotation_from_rpy(np.pi / 2, 0, 0) @ [0, 1, 0], [0, 0, 1])
    # Fixed axes: roll first, then yaw. x stays x under roll, then yaw turns it to y.
    assert np.allclose(rotation_from_rpy(np.pi / 2, 0, np.pi / 2) @ [1, 0, 0], [0, 1, 0])


def test_ft_label_is_minus_rotated_tared_sensor_force() -> None:
    rotation = rotation_from_rpy(0, 0, np.pi / 2)
    label = ft_force_label(np.array([[3.0, 0.0, 1.0]]), rotation, tare=[1.0, 0.0, 0.0])
    assert np.allclose(label, [[0.0, -2.0, -1.0]])


def test_payload_label_only_while_grasped() -> None:
    label = payload_force_label(np.array([False, True, False]), 250.0)
    assert np.allclose(label, [[0, 0, 0], [0, 0, -0.25 * 9.81], [0, 0, 0]])


# ------------------------------------------------------------------------------------ round trip

def test_free_motion_round_trip(write_bag, tmp_path: Path) -> None:
    streams = standard_streams()
    bag = write_bag(streams)
    result = run(bag, tmp_path / "nad")
    (episode,) = load_nad(tmp_path / "nad")
    assert result.episodes == 1 and len(episode) == 101
    follower = [m for _, m in streams["/follower/arm_state"]]
    assert np.array_equal(episode.per_joint("position"), np.array([m.position for m in follower]))
    assert np.array_equal(episode.per_joint("current"), np.array([m.current for m in follower]))
    # Command held from 2 ms earlier: it is the one of the same follower step.
    sent = np.array([m.position for _, m in streams["/follower/command"]])
    assert np.array_equal(episode.per_joint("command_position"), sent)
    assert np.allclose(episode.time, np.arange(101) * 0.01)
    assert np.array_equal(episode.force, np.zeros((101, 3))) and episode.force_valid.all()
    assert not episode.contact.any() and episode.valid.all()
    assert np.array_equal(episode.condition, np.ones(101))
    assert episode.meta["task_instance"] == "free_motion_0g_nominal" and episode.meta["frame_count"] == 101
    assert episode.meta["source_bag"] == bag.as_posix()
    info = read_info(tmp_path / "nad")
    assert info["joint_names"] == JOINTS and info["rate_hz"] == pytest.approx(100.0)
    assert {c["name"]: c["unit"] for c in info["columns"]}["current_joint1"] == "A"
    assert "truth_force_x" not in episode.columns
    assert episode.features().shape == (101, 36)


def test_payload_label_during_grasp_intervals_only(write_bag, tmp_path: Path) -> None:
    streams = standard_streams()
    # Grasp from between samples 30 and 31 (bag time) until between samples 60 and 61.
    streams["/episode/grasp"] = [(T0 + 30 * PERIOD + 5 * MS, boolean(True)),
                                 (T0 + 60 * PERIOD + 5 * MS, boolean(False))]
    run(write_bag(streams, task="lift", payload_grams=300.0, force_source="payload"), tmp_path / "nad")
    (episode,) = load_nad(tmp_path / "nad")
    grasped = (np.arange(101) >= 31) & (np.arange(101) <= 60)
    assert np.array_equal(episode.contact, grasped)
    assert np.allclose(episode.force[grasped], [0.0, 0.0, -0.3 * 9.81])
    assert np.array_equal(episode.force[~grasped], np.zeros(((~grasped).sum(), 3)))
    assert episode.force_valid.all()


def test_ft_label_from_metadata_fixture_with_window_mean_and_gaps(write_bag, tmp_path: Path) -> None:
    streams = standard_streams()
    f_sensor = np.array([2.0, -1.0, 4.0])
    ft = []
    for k in range(0, 1001):                        # 1 kHz sensor
        stamp = T0 + k * MS
        if 495 <= k <= 545:                         # 51 ms without readings
            continue
        loaded = 200 <= k <= 700
        ft.append((stamp, wrench(stamp, f_sensor if loaded else np.zeros(3))))
    streams["/ft/wrench"] = ft
    fixture = {"position": [0.2, 0.0, 0.05], "rpy": [0.0, 0.0, np.pi / 2]}
    run(write_bag(streams, task="push", force_source="ft_sensor", fixture=fixture), tmp_path / "nad")
    (episode,) = load_nad(tmp_path / "nad")
    frame_ms = np.arange(101) * 10
    # Window +-5 ms must hold a reading: frames 50..54 (500..540 ms) have none.
    no_reading = (frame_ms >= 501 - 5) & (frame_ms <= 544 + 5)
    assert np.array_equal(~episode.force_valid.all(axis=1), no_reading)
    assert np.isnan(episode.stack(["force_x", "force_y", "force_z"])[no_reading]).all()   # stored: no label
    assert not episode.force[no_reading].any()
    # Fully loaded windows: R = yaw 90 deg maps (fx, fy, fz) to (-fy, fx, fz); label = -R f = (-1, -2, -4).
    inside = (frame_ms >= 205) & (frame_ms <= 695) & ~no_reading
    assert np.allclose(episode.force[inside], [-1.0, -2.0, -4.0])
    assert episode.contact[inside].all() and not episode.contact[frame_ms < 190].any()
    unloaded = (frame_ms < 190) | (frame_ms > 710)
    assert np.allclose(episode.force[unloaded], 0.0)


def test_ft_label_uses_config_fixture_and_tare_without_metadata_fixture(write_bag, tmp_path: Path) -> None:
    streams = standard_streams(frames=51)
    streams["/ft/wrench"] = [(T0 + k * 2 * MS, wrench(T0 + k * 2 * MS, [1.0, 0.5, 3.0])) for k in range(251)]
    config = conv.load_config()
    config["fixture"] = {"position": [0, 0, 0], "rpy": [0.0, np.pi / 2, 0.0]}
    config["tare"]["force"] = [0.0, 0.5, 0.0]
    run(write_bag(streams, force_source="ft_sensor"), tmp_path / "nad", config=config)
    (episode,) = load_nad(tmp_path / "nad")
    # pitch 90 deg: R (fx, fy, fz) = (fz, fy, -fx); tared (1, 0, 3) -> (3, 0, -1); label = (-3, 0, 1).
    assert np.allclose(episode.force, [-3.0, 0.0, 1.0])


def test_truth_columns_are_kept_but_never_the_label(write_bag, tmp_path: Path) -> None:
    streams = standard_streams(frames=21)
    streams["/sim/truth/wrench"] = [(s, wrench(s, [0.0, 0.0, -5.0])) for s, _ in streams["/follower/arm_state"]]
    streams["/sim/truth/contact"] = [(T0, boolean(True))]
    first = write_bag(streams)
    second = write_bag(standard_streams(frames=21))
    run([first, second], tmp_path / "nad")
    with_truth, without_truth = load_nad(tmp_path / "nad")
    assert np.allclose(with_truth.truth_force, [0.0, 0.0, -5.0]) and with_truth.columns["truth_valid"].all()
    assert with_truth.columns["truth_contact"].all()
    assert np.array_equal(with_truth.force, np.zeros((21, 3)))          # force_source none: label stays zero
    assert not without_truth.columns["truth_valid"].any() and np.isnan(without_truth.truth_force).all()
    assert read_info(tmp_path / "nad")["evaluation_columns"][:3] == ["truth_force_x", "truth_force_y",
                                                                       "truth_force_z"]


# ------------------------------------------------------------------------------------ alignment

def test_command_tolerance_is_honoured(write_bag, tmp_path: Path) -> None:
    follower = [T0 + k * PERIOD for k in range(101)]
    streams = standard_streams(follower_stamps=follower)
    # Commands start 50 ms in, and stop for 40 ms in the middle (samples 40..43 missing).
    streams["/follower/command"] = [(s - 2 * MS, command(s - 2 * MS, trajectory(s)))
                                    for k, s in enumerate(follower) if k >= 5 and not 40 <= k <= 43]
    result = run(write_bag(streams), tmp_path / "nad")
    (episode,) = load_nad(tmp_path / "nad")
    report = result.report["episodes"][0]
    assert report["dropped_head"] == 5 and report["dropped_tail"] == 0 and len(episode) == 96
    # Frame k sees command k-1 (12 ms old, within 15 ms) only at k=40; 41..43 are 22..42 ms old.
    stale_command = np.isin(np.arange(5, 101), [41, 42, 43])
    assert np.array_equal(~episode.columns["aligned"], stale_command)
    assert report["misaligned"] == 3 and report["misaligned_by_stream"]["command"] == 3
    assert np.array_equal(episode.valid, ~stale_command)
    valid = episode.valid
    expected_starts = [s for s in range(len(episode) - 49) if valid[s:s + 50].all()]
    assert episode.valid_window_starts(50).tolist() == expected_starts and expected_starts


@pytest.mark.parametrize(("offset_ms", "dropped_head", "misaligned"), [(14, 0, 1), (16, 2, 0)])
def test_command_age_limit_boundary(write_bag, tmp_path: Path, offset_ms: int, dropped_head: int,
                                    misaligned: int) -> None:
    streams = standard_streams(frames=11)
    early = T0 - offset_ms * MS
    streams["/follower/command"] = [(early, command(early, np.zeros(5)))] + [
        (T0 + k * PERIOD - 2 * MS, command(T0 + k * PERIOD - 2 * MS, np.zeros(5))) for k in range(2, 11)]
    report = run(write_bag(streams), tmp_path / "nad").report["episodes"][0]
    # Frame 0 sees the early command offset_ms old (limit 15 ms); frame 1 sees it 10 ms older still:
    # 14 ms -> frame 0 kept, frame 1 flagged; 16 ms -> frames 0 and 1 are the head and dropped.
    assert (report["dropped_head"], report["misaligned"]) == (dropped_head, misaligned)


def test_stale_and_hardware_error_frames_are_flagged(write_bag, tmp_path: Path) -> None:
    streams = standard_streams(frames=21)
    stale = [True, False, False, False, False]
    streams["/follower/arm_state"][7] = (T0 + 7 * PERIOD, arm_state(T0 + 7 * PERIOD, trajectory(T0), stale=stale))
    streams["/follower/arm_state"][9] = (T0 + 9 * PERIOD, arm_state(T0 + 9 * PERIOD, trajectory(T0),
                                                                    hardware_error=[0, 0, 32, 0, 0]))
    result = run(write_bag(streams), tmp_path / "nad")
    (episode,) = load_nad(tmp_path / "nad")
    assert np.flatnonzero(~episode.valid).tolist() == [7, 9]
    assert episode.columns["hardware_error_joint3"][9] == 32 and episode.columns["stale_joint1"][7]
    report = result.report["episodes"][0]
    assert (report["invalid_stale"], report["invalid_hardware_error"], report["invalid_frames"]) == (1, 1, 2)


def test_resampling_to_paper_frames(write_bag, tmp_path: Path) -> None:
    jitter = np.random.default_rng(3).integers(-2 * MS, 2 * MS, size=101)
    jitter[0] = jitter[-1] = 0
    follower = [T0 + k * PERIOD + int(j) for k, j in enumerate(jitter)]
    streams = standard_streams(follower_stamps=follower)
    run(write_bag(streams), tmp_path / "nad", rate_hz=1 / 0.017)
    (episode,) = load_nad(tmp_path / "nad")
    assert len(episode) == 1000 // 17 + 1
    assert np.all(np.diff(episode.columns["stamp_ns"]) == 17 * MS)
    # Positions are linear in time, so interpolation must reproduce them at the new stamps.
    expected = np.array([trajectory(int(s)) for s in episode.columns["stamp_ns"]])
    assert np.allclose(episode.per_joint("position"), expected, atol=1e-12)
    info = read_info(tmp_path / "nad")
    assert info["resampled"] and info["frame_period_s"] == pytest.approx(0.017)


# ------------------------------------------------------------------------------------ splits, determinism

def test_splits_8_1_1_per_instance_and_reproducible(write_bag, tmp_path: Path) -> None:
    bags = [write_bag(standard_streams(frames=3), task="circle") for _ in range(10)]
    bags += [write_bag(standard_streams(frames=3), task="push", payload_grams=100.0) for _ in range(3)]
    run(bags, tmp_path / "a", seed=4)
    run(bags, tmp_path / "b", seed=4)
    rows = pq.read_table(tmp_path / "a" / "meta" / "episodes.parquet").to_pylist()
    by_instance: dict[str, list[str]] = {}
    for row in rows:
        by_instance.setdefault(row["task_instance"], []).append(row["split"])
    assert sorted(by_instance["circle_0g_nominal"]) == ["test"] + ["train"] * 8 + ["val"]
    assert sorted(by_instance["push_100g_nominal"]) == ["test", "train", "val"]
    assert (tmp_path / "a" / "meta" / "episodes.parquet").read_bytes() == \
        (tmp_path / "b" / "meta" / "episodes.parquet").read_bytes()
    assert {len(load_nad(tmp_path / "a", split=s)) for s in ("val", "test")} == {2}


def test_rerun_is_byte_identical(write_bag, tmp_path: Path) -> None:
    streams = standard_streams(frames=31)
    streams["/episode/grasp"] = [(T0 + 95 * MS, boolean(True))]
    bags = [write_bag(streams, force_source="payload", payload_grams=50.0), write_bag(standard_streams(frames=31))]
    run(bags, tmp_path / "one", rate_hz=50.0)
    run(bags, tmp_path / "two", rate_hz=50.0)
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*") if p.is_file())
    assert len(files) == 5
    for rel in files:
        assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes(), rel


def test_sqlite3_generic_bag_with_metadata_defaults(tmp_path: Path) -> None:
    from rosbags.rosbag2 import StoragePlugin, Writer

    from na_common.episode_bag import serialize, typestore

    bag = tmp_path / "plain_sqlite"
    streams = standard_streams(frames=11)
    with Writer(bag, version=8, storage_plugin=StoragePlugin.SQLITE3) as writer:
        connections = {t: writer.add_connection(t, TYPES[t], typestore=typestore()) for t in streams}
        for stamp, topic, msg in sorted((s, t, m) for t, items in streams.items() for s, m in items):
            writer.write(connections[topic], stamp, serialize(msg, TYPES[topic]))
    with pytest.raises(conv.ConvertError, match="no episode metadata"):
        run(bag, tmp_path / "nad")
    config = conv.load_config()
    config["metadata_defaults"] = {"task": "free", "payload_grams": 0, "force_source": "none",
                                   "condition": "restricted_joint3", "source": "live"}
    run(bag, tmp_path / "nad", config=config)
    (episode,) = load_nad(tmp_path / "nad")
    assert len(episode) == 11 and np.array_equal(episode.condition, np.zeros(11))
    assert episode.meta["condition_label"] == 0.0


# ------------------------------------------------------------------------------------ older message layouts

ARM_STATE_LOAD_LINE = "float64[] load"


def _old_typestore():
    """The suite's types with ArmState as it was before ``load`` was added (same type name)."""
    from rosbags.typesys import Stores, get_types_from_msg, get_typestore

    from na_common.episode_bag.messages import find_na_msgs_dir

    store = get_typestore(Stores.ROS2_JAZZY)
    types: dict = {}
    for msg_file in sorted(find_na_msgs_dir().glob("*.msg")):
        text = msg_file.read_text()
        if msg_file.stem == "ArmState":
            lines = text.splitlines(keepends=True)
            kept = [line for line in lines if not line.startswith(ARM_STATE_LOAD_LINE)]
            assert len(kept) == len(lines) - 1
            text = "".join(kept)
        types.update(get_types_from_msg(text, f"na_msgs/msg/{msg_file.stem}"))
    store.register(types)
    return store


def _write_plain_bag(bag: Path, streams: dict[str, list], store, metadata: dict) -> Path:
    """An MCAP episode bag written with rosbags and ``store`` (message definitions stored in the bag)."""
    from rosbags.rosbag2 import StoragePlugin, Writer

    from na_common.episode_bag.metadata import metadata_to_custom_data, validate_metadata

    with Writer(bag, version=9, storage_plugin=StoragePlugin.MCAP) as writer:
        for key, value in metadata_to_custom_data(validate_metadata(metadata)).items():
            writer.set_custom_data(key, value)
        connections = {t: writer.add_connection(t, TYPES[t], typestore=store) for t in streams}
        for stamp, topic, msg in sorted(((s, t, m) for t, items in streams.items() for s, m in items),
                                        key=lambda r: (r[0], r[1])):
            writer.write(connections[topic], stamp, bytes(store.serialize_cdr(msg, TYPES[topic])))
    return bag


def _as_old_arm_state(store, message):
    msgtype = "na_msgs/msg/ArmState"
    fields = [name for name, _ in store.fielddefs[msgtype][1]]
    assert "load" not in fields
    return store.types[msgtype](**{name: getattr(message, name) for name in fields})


def test_bag_with_the_old_arm_state_layout_converts(tmp_path: Path) -> None:
    old_store = _old_typestore()
    from na_common.episode_bag import typestore

    streams = standard_streams(frames=41)
    for topic in ("/follower/arm_state", "/leader/arm_state"):
        for k, (_, message) in enumerate(streams[topic]):
            message.current = message.current + 0.01 * k          # values that differ message to message
            message.temperature = message.temperature + k
    old_streams = {topic: [(stamp, _as_old_arm_state(old_store, m)) if TYPES[topic] == "na_msgs/msg/ArmState"
                           else (stamp, m) for stamp, m in items] for topic, items in streams.items()}
    metadata = {"task": "free_motion", "payload_grams": 0.0, "force_source": "none", "condition": "nominal",
                "source": "live"}
    old_bag = _write_plain_bag(tmp_path / "old" / "episode_000001", old_streams, old_store, metadata)
    for _, message in streams["/follower/arm_state"]:
        message.load = np.full(len(JOINTS), 0.3)
    new_bag = _write_plain_bag(tmp_path / "new" / "episode_000001", streams, typestore(), metadata)

    # The old bag's messages are shorter: the installed definition cannot read them, the stored one can.
    from na_common.episode_bag import read_raw_messages
    from na_training.cdr_columns import CdrError, message_groups

    raw = read_raw_messages(old_bag, ["/follower/arm_state"])["/follower/arm_state"]
    assert raw.schema is not None and raw.schema.encoding == "ros2msg" and "load" not in raw.schema.text.split()
    with pytest.raises(CdrError, match="message ends at byte"):
        message_groups(raw, typestore().fielddefs)

    config = conv.load_config()
    old, new = read_bag(old_bag, config, JOINTS), read_bag(new_bag, config, JOINTS)
    reference = _reference_read_bag(old_bag, config, JOINTS)
    for role, stream in reference.streams.items():
        assert np.array_equal(old.streams[role].stamps, stream.stamps), role
        for key, values in stream.values.items():
            nan_is_equal = values.dtype.kind == "f"       # load: NaN where the message has none
            assert np.array_equal(old.streams[role].values[key], values, equal_nan=nan_is_equal), (role, key)
            if key != "load":                             # the old layout has no load; the new bag's is below
                assert np.array_equal(new.streams[role].values[key], values), (role, key)
    if "load" in new.streams["follower"].values:
        written = np.array([np.asarray(m.load, float) for _, m in streams["/follower/arm_state"]])
        assert np.array_equal(new.streams["follower"].values["load"], written)
    follower = [m for _, m in streams["/follower/arm_state"]]
    for key in ARM_VECTOR_FIELDS:
        written = np.array([np.asarray(getattr(m, key), float) for m in follower])
        assert np.array_equal(old.streams["follower"].values[key], written), key

    run(old_bag, tmp_path / "nad_old")
    run(new_bag, tmp_path / "nad_new")
    (episode,) = load_nad(tmp_path / "nad_old")
    (again,) = load_nad(tmp_path / "nad_new")
    assert len(episode) == 41
    assert np.array_equal(episode.per_joint("position"), np.array([m.position for m in follower]))
    assert np.array_equal(episode.per_joint("current"), np.array([m.current for m in follower]))
    assert np.array_equal(episode.per_joint("temperature"), np.array([m.temperature for m in follower]))
    assert np.array_equal(episode.features(), again.features())


# ------------------------------------------------------------------------------------ errors

def test_missing_topic_is_named(write_bag, tmp_path: Path) -> None:
    bag = write_bag(standard_streams(frames=5), force_source="payload", payload_grams=100.0)
    with pytest.raises(conv.ConvertError, match=r"missing topic\(s\) /episode/grasp"):
        run(bag, tmp_path / "nad")
    assert not (tmp_path / "nad").exists()


def test_non_monotonic_follower_stamps(write_bag, tmp_path: Path) -> None:
    streams = standard_streams(frames=10)
    # Recorded in order (bag time), but the 7th header stamp repeats the 5th.
    bag_time = T0 + 6 * PERIOD
    streams["/follower/arm_state"][6] = (bag_time, arm_state(T0 + 4 * PERIOD, np.zeros(5)))
    bag = write_bag(streams)
    with pytest.raises(conv.ConvertError, match="/follower/arm_state: stamp does not increase at message 6"):
        run(bag, tmp_path / "nad")


def test_wrong_message_type_on_a_topic(write_bag, tmp_path: Path) -> None:
    streams = standard_streams(frames=5)
    streams["/leader/arm_state"] = [(s, command(s, np.zeros(5))) for s, _ in streams["/leader/arm_state"]]
    bag = write_bag(streams, types={"/leader/arm_state": "na_msgs/msg/JointCommand"})
    with pytest.raises(conv.ConvertError, match="/leader/arm_state has type 'na_msgs/msg/JointCommand'"):
        run(bag, tmp_path / "nad")


def test_empty_bag_and_silent_required_topic(write_bag, tmp_path: Path) -> None:
    bag = write_bag({"/follower/arm_state": []})
    with pytest.raises(conv.ConvertError, match="empty"):
        run(bag, tmp_path / "nad")
    streams = standard_streams(frames=5)
    streams["/ft/wrench"] = []
    with pytest.raises(conv.ConvertError, match=r"no messages on required topic\(s\) /ft/wrench \(ft\)"):
        run(write_bag(streams, force_source="ft_sensor"), tmp_path / "nad")


def test_skip_bad_keeps_the_good_bags_and_reports_the_bad(write_bag, tmp_path: Path) -> None:
    good = write_bag(standard_streams(frames=5))
    bad = write_bag({"/follower/arm_state": []})
    result = run([good, bad], tmp_path / "nad", skip_bad=True)
    assert result.episodes == 1 and result.skipped[0]["source_bag"] == bad.as_posix()
    report = json.loads((tmp_path / "nad" / "meta" / "report.json").read_text())
    assert "empty" in report["skipped"][0]["error"]


def test_existing_output_is_not_replaced_without_overwrite(write_bag, tmp_path: Path) -> None:
    bag = write_bag(standard_streams(frames=5))
    out = tmp_path / "nad"
    run(bag, out)
    before = (out / "meta" / "info.json").read_bytes()
    with pytest.raises(NadError, match="--overwrite"):
        run(bag, out)
    assert (out / "meta" / "info.json").read_bytes() == before
    run(bag, out, overwrite=True, rate_hz=50.0)
    assert read_info(out)["resampled"]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".nad")]


def test_config_file_matches_builtin_defaults_and_rejects_unknown_keys(tmp_path: Path) -> None:
    assert conv.load_config("convert") == DEFAULT_CONFIG   # the shipped file states the defaults
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"tolerance": {"comand_s": 0.01}}))
    with pytest.raises(conv.ConvertError, match="unknown key 'comand_s'"):
        conv.load_config(bad)


# ------------------------------------------------------------------------------------ CLI

def test_cli_converts_prints_report_and_reports_errors(write_bag, tmp_path: Path, capsys) -> None:
    bag_dir = tmp_path / "bags"
    write_bag(standard_streams(frames=5), out=bag_dir)
    status = main_convert([str(bag_dir), "--out", str(tmp_path / "nad"), "--frame-period", "0.017",
                                "--seed", "3", "--quiet"])
    assert status == 0 and "1 episodes" in capsys.readouterr().out
    assert read_info(tmp_path / "nad")["split_seed"] == 3
    status = main_convert([str(tmp_path / "missing"), "--out", str(tmp_path / "nad2"), "--quiet"])
    assert status == 2 and "bag path not found" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main_convert(["--help"])
    assert exit_info.value.code == 0 and "--frame-period" in capsys.readouterr().out


# ------------------------------------------------------------------------------------ generated bags

def test_generated_bags_labels_agree_with_simulator_truth(tmp_path: Path) -> None:
    """na-sim generate (the simulated rig) -> convert: the F/T label, made from the noisy sensor-frame
    readings and the episode's fixture, matches the rig's truth force on the robot; payload labels
    follow the operator's grasp flag."""
    from na_sim.generate import GenerateOptions, generate, plan_episodes
    from na_sim.tasks import make_task

    options = GenerateOptions(tasks=["push_px", "pick_place"], payloads=[200.0], quick=True, out=tmp_path / "bags")
    episodes = [make_task(task, seed, grams, quick=True) for task, grams, seed in plan_episodes(options)]
    # Long enough for the first press and 1 s of the grasp (when they come depends on the episode's seed).
    seconds = max(max(e.press_intervals[0][1] for e in episodes if e.press_intervals),
                  max(e.grasp_intervals[0][0] + 1.0 for e in episodes if e.grasp_intervals))
    generate(dataclasses.replace(options, max_seconds=seconds), progress=False, log=lambda _: None)
    result = run(tmp_path / "bags", tmp_path / "nad", rate_hz=1 / 0.017)
    assert result.report["totals"]["misaligned"] == 0 and result.report["totals"]["invalid_frames"] == 0
    push, pick = load_nad(tmp_path / "nad")
    assert push.meta["force_source"] == "ft_sensor" and pick.meta["force_source"] == "payload"
    in_contact = push.columns["truth_contact"] & push.force_valid.all(axis=1)
    assert in_contact.sum() >= 5
    truth = push.truth_force[in_contact]
    assert np.linalg.norm(truth, axis=1).mean() > 1.0
    assert np.abs(push.force[in_contact] - truth).mean() < 0.1 * np.abs(truth).mean()
    assert pick.contact.any() and np.allclose(pick.force[pick.contact], [0.0, 0.0, -0.2 * 9.81])
    assert np.array_equal(pick.force[~pick.contact], np.zeros(((~pick.contact).sum(), 3)))


# ------------------------------------------------------------------------------------ reading = deserialising

def _reference_stream(role: str, samples: list[tuple[int, object]]) -> Stream:
    """A stream as the converter read it before reading CDR columns: each message deserialised by rosbags,
    its fields put in joint order one message at a time."""
    messages = [m for _, m in samples]
    if role in ("grasp", "truth_contact"):
        return Stream(np.asarray([s for s, _ in samples], dtype=np.int64),
                           {"data": np.asarray([bool(m.data) for m in messages], dtype=np.float64)})
    stamps = np.asarray([m.header.stamp.sec * 1_000_000_000 + m.header.stamp.nanosec for m in messages],
                        dtype=np.int64)
    if role in ("ft", "truth_wrench"):
        force = [[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z] for m in messages]
        return Stream(stamps, {"force": np.asarray(force, dtype=np.float64).reshape(-1, 3)})
    order = [[list(m.name).index(j) for j in JOINTS] if len(m.name) else list(range(5)) for m in messages]
    pairs = list(zip(messages, order, strict=True))
    if role == "command":
        return Stream(stamps, {"position": np.asarray([np.asarray(m.position, np.float64)[o] for m, o in pairs]),
                                    "gripper_slide": np.asarray([float(m.gripper_slide) for m in messages])})
    values = {key: np.asarray([np.asarray(getattr(m, key), np.float64)[o] for m, o in pairs])
              for key in ("position", "velocity", "goal_position", "current", "pwm", "input_voltage", "temperature")}
    for key, dtype in (("hardware_error", np.uint8), ("stale", bool)):
        values[key] = np.asarray([np.asarray(getattr(m, key), dtype)[o] if len(getattr(m, key)) else
                                  np.zeros(5, dtype) for m, o in pairs])
    # Present Load: only Feetech servos have it (an XM430 message carries none: NaN)
    values["load"] = np.asarray([np.asarray(m.load, np.float64)[o] if len(getattr(m, "load", ())) else
                                 np.full(5, np.nan) for m, o in pairs])
    for key in ("gripper_slide", "goal_gripper_slide", "bus_cycle_duration"):
        values[key] = np.asarray([float(getattr(m, key)) for m in messages])
    return Stream(stamps, values)


def _reference_read_bag(path, config, joint_names, robot=None) -> BagContents:
    """read_bag through rosbags' EpisodeReader and deserialiser (the previous implementation's path)."""
    from na_common.episode_bag import EpisodeReader, validate_metadata

    with EpisodeReader(path) as reader:
        metadata = validate_metadata(reader.metadata)
        counts = {name: t.count for name, t in reader.topics.items()}
        wanted = {role: topic for role, topic in config["topics"].items() if topic in reader.topics}
        by_topic: dict[str, list] = {topic: [] for topic in wanted.values()}
        for topic, stamp, message in reader.messages(sorted(by_topic)):
            by_topic[topic].append((int(stamp), message))
    streams = {role: _reference_stream(role, by_topic[topic]) for role, topic in wanted.items()}
    return BagContents(path=Path(path), metadata=metadata, streams=streams, topic_counts=counts)


@pytest.fixture(scope="module")
def generated_bags(tmp_path_factory) -> Path:
    """A few short episodes of the simulated rig: F/T, payload and free-motion tasks."""
    from na_sim.generate import GenerateOptions, generate

    out = tmp_path_factory.mktemp("generated") / "bags"
    generate(GenerateOptions(tasks=["push_px", "pick_place", "circle_cw"], payloads=[200.0], quick=True,
                             max_seconds=3.0, out=out), progress=False, log=lambda _: None)
    return out


def _odd_bags(write_bag, out: Path) -> None:
    """Hand-built bags whose messages differ in layout: joint order, empty flag sequences, extra joints."""
    streams = standard_streams(frames=40)
    reordered = ["gripper", "joint3", "joint1", "joint2", "joint4"]
    for k in (3, 4, 17):
        state = streams["/follower/arm_state"][k][1]
        state.name = reordered
        for key in ("position", "velocity", "goal_position", "current", "pwm", "input_voltage", "temperature"):
            setattr(state, key, np.asarray(getattr(state, key))[[JOINTS.index(j) for j in reordered]])
        state.hardware_error = np.zeros(0, np.uint8)
        state.stale = np.array([True, False, False, False, False])
    for k in (5, 30):
        cmd = streams["/follower/command"][k][1]
        cmd.name = [*JOINTS, "wrist_camera"]
        cmd.position = np.append(cmd.position, 9.0)
    for k in (8,):
        streams["/leader/arm_state"][k][1].name = []
    streams["/ft/wrench"] = [(T0 + k * 5 * MS, wrench(T0 + k * 5 * MS, [0.1 * k, 2.0, -1.0])) for k in range(79)]
    write_bag(streams, out=out, task="push", force_source="ft_sensor")


def test_read_bag_equals_deserialising_every_message(generated_bags: Path, write_bag, tmp_path: Path) -> None:
    _odd_bags(write_bag, generated_bags.parent / "odd")
    bags = conv.expand_bag_paths([generated_bags, generated_bags.parent / "odd"])
    config = conv.load_config()
    for bag in bags:
        new, old = read_bag(bag, config, JOINTS), _reference_read_bag(bag, config, JOINTS)
        assert new.metadata == old.metadata and new.topic_counts == old.topic_counts
        assert set(new.streams) == set(old.streams), bag
        for role, stream in old.streams.items():
            assert np.array_equal(new.streams[role].stamps, stream.stamps), (bag, role)
            assert set(new.streams[role].values) == set(stream.values)
            for key, values in stream.values.items():
                got = new.streams[role].values[key]
                assert got.dtype == values.dtype, (bag, role, key)
                assert np.array_equal(got, values, equal_nan=values.dtype.kind == "f"), (bag, role, key)


def _dataset_files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_dataset_bytes_equal_the_deserialising_converter(generated_bags: Path, tmp_path: Path, monkeypatch) -> None:
    run(generated_bags, tmp_path / "columns", rate_hz=1 / 0.017)
    monkeypatch.setattr(convert_job, "read_bag", _reference_read_bag)
    run(generated_bags, tmp_path / "reference", rate_hz=1 / 0.017)
    files = sorted(p.relative_to(tmp_path / "reference") for p in (tmp_path / "reference").rglob("*") if p.is_file())
    assert len(files) == 3 + 3
    for rel in files:
        assert (tmp_path / "columns" / rel).read_bytes() == (tmp_path / "reference" / rel).read_bytes(), rel


# ------------------------------------------------------------------------------------ worker processes

def test_jobs_give_the_same_bytes_with_skipped_bags(generated_bags: Path, write_bag, tmp_path: Path) -> None:
    bags = conv.expand_bag_paths([generated_bags])
    _odd_bags(write_bag, tmp_path / "odd")
    broken = write_bag({"/follower/arm_state": []}, out=tmp_path / "broken")         # empty: skipped
    bags = [bags[0], broken, *bags[1:], *conv.expand_bag_paths([tmp_path / "odd"])]
    results = {jobs: run(bags, tmp_path / f"jobs{jobs}", rate_hz=50.0, skip_bad=True, seed=5, jobs=jobs)
               for jobs in (1, 2, 3)}
    assert results[1].episodes == len(bags) - 1 and results[1].skipped[0]["source_bag"] == broken.as_posix()
    one = _dataset_files(tmp_path / "jobs1")
    assert len(one) == 3 + results[1].episodes
    for jobs in (2, 3):
        assert _dataset_files(tmp_path / f"jobs{jobs}") == one
    assert not list((tmp_path).glob(".jobs*"))                  # no temporary folders left


def test_a_bad_bag_in_a_worker_stops_the_run_naming_it(generated_bags: Path, write_bag, tmp_path: Path) -> None:
    bad = write_bag(standard_streams(frames=5), out=tmp_path / "bad", force_source="payload", payload_grams=10.0)
    bags = [*conv.expand_bag_paths([generated_bags]), bad]
    out = tmp_path / "nad"
    with pytest.raises(conv.ConvertError, match=rf"^{bad}: missing topic\(s\) /episode/grasp"):
        run(bags, out, jobs=2)
    assert not out.exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".nad")]


def _die_on_bad(job, path, staged):
    """A stand-in for convert_bag whose worker process dies on bags named 'episode_000002'."""
    import os

    if path.name == "episode_000002":
        os._exit(3)
    return _real_convert_bag(job, path, staged)


_real_convert_bag = convert_bag


def test_a_worker_that_dies_is_reported_with_its_bag(write_bag, tmp_path: Path, monkeypatch) -> None:
    bags = [write_bag(standard_streams(frames=5)) for _ in range(3)]
    monkeypatch.setattr(convert_run, "convert_bag", _die_on_bad)
    with pytest.raises(conv.ConvertError, match=rf"^{bags[1]}: the worker process converting this bag died"):
        run(bags, tmp_path / "nad", jobs=2)
    assert not (tmp_path / "nad").exists() and not [p for p in tmp_path.iterdir() if p.name.startswith(".nad")]


def test_cli_jobs_option(write_bag, tmp_path: Path, capsys) -> None:
    bag_dir = tmp_path / "bags"
    for _ in range(2):
        write_bag(standard_streams(frames=5), out=bag_dir)
    assert main_convert([str(bag_dir), "--out", str(tmp_path / "nad"), "--jobs", "2", "--quiet"]) == 0
    assert "2 episodes" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main_convert([str(bag_dir), "--out", str(tmp_path / "nad0"), "--jobs", "0"])
    assert "--jobs: must be at least 1" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ progress

class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_progress_in_a_log_is_plain_periodic_lines() -> None:
    import io

    from na_training.progress import ItemProgress

    stream, clock = io.StringIO(), _Clock()
    shown = ItemProgress("convert", 4, "bag", stream=stream, interval_s=10.0, clock=clock)
    for k in range(4):
        clock.now = 6.0 * (k + 1)
        shown.advance(messages=1000, skipped=k == 2)
    shown.close()
    lines = stream.getvalue().splitlines()
    assert "\r" not in stream.getvalue()
    assert lines == ["convert: 2/4 bags, 2,000 messages (167 messages/s), 12.0 s",
                     "convert: 4/4 bags, 1 skipped, 4,000 messages (167 messages/s), 24.0 s"]


def test_progress_on_a_terminal_is_a_bar() -> None:
    import io

    from na_training.progress import ItemProgress

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    stream = Terminal()
    shown = ItemProgress("convert", 2, "bag", stream=stream)
    shown.advance(messages=10)
    shown.advance(messages=10)
    shown.close()
    assert "\r" in stream.getvalue() and "2/2" in stream.getvalue()
    quiet = Terminal()
    ItemProgress("convert", 1, "bag", stream=quiet, enabled=False).advance(5)
    assert quiet.getvalue() == ""


# ------------------------------------------------------------------------------------ broken storage

def test_broken_storage_and_metadata_are_one_line_errors(write_bag, tmp_path: Path) -> None:
    truncated = write_bag(standard_streams(frames=5), out=tmp_path / "truncated")
    mcap = next(truncated.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[:-50])
    broken_yaml = write_bag(standard_streams(frames=5), out=tmp_path / "yaml")
    (broken_yaml / "metadata.yaml").write_text("rosbag2_bagfile_information: [\n  unclosed\n")
    for bag, reason in ((truncated, "truncated"), (broken_yaml, "is not rosbag2 metadata")):
        with pytest.raises(conv.ConvertError) as error:
            run(bag, tmp_path / "nad", jobs=2)
        assert str(bag) in str(error.value) and reason in str(error.value) and "\n" not in str(error.value)
        assert not (tmp_path / "nad").exists()


def test_a_recovered_episode_is_marked_and_named(write_bag, tmp_path: Path, capsys) -> None:
    """An episode repaired after its recorder was killed enters NAD marked complete=false, recovered=true, and
    the converter says so (it is still data, up to the last chunk the recorder flushed)."""
    import shutil

    from na_common.bag_repair import recover_episode
    from na_common.episode_bag import EpisodeWriter

    finished = write_bag(standard_streams(), out=tmp_path / "bags")
    killed = tmp_path / "bags" / "episode_000002"
    meta = {"task": "free_motion", "payload_grams": 0.0, "force_source": "none", "condition": "nominal",
            "source": "live", "episode_id": 2}
    writer = EpisodeWriter(tmp_path / "bags", meta)
    streams = standard_streams()
    for topic in streams:
        writer.add_topic(topic, TYPES[topic])
    for stamp, topic, msg in sorted(((s, t, m) for t, items in streams.items() for s, m in items),
                                    key=lambda r: (r[0], r[1])):
        writer.write(topic, stamp, msg)
    writer.flush()                                        # what a killed recorder leaves on disk
    snapshot = tmp_path / "snapshot"
    shutil.copytree(killed, snapshot)
    writer.close()
    shutil.rmtree(killed)
    snapshot.rename(killed)
    recover_episode(killed)

    args = configure_parser(argparse.ArgumentParser()).parse_args(
        [str(finished), str(killed), "--out", str(tmp_path / "nad"), "--quiet", "--jobs", "1"])
    assert run_convert(args) == 0
    note = capsys.readouterr().err
    assert "incomplete (recovered after its recorder was killed)" in note and "episode_000002" in note
    episodes = {e.meta["source_bag"]: e for e in load_nad(tmp_path / "nad")}
    assert episodes[killed.as_posix()].meta["recovered"] and not episodes[killed.as_posix()].meta["complete"]
    assert not episodes[finished.as_posix()].meta["recovered"] and episodes[finished.as_posix()].meta["complete"]


# ------------------------------------------------------------------------------------ void episodes

TRIP_REASON = ("/follower/arm_driver: trip: follower tripped, torque off and holding: servo 13 (joint3): no valid "
               "reply for 0.52 s (error timeout 0.50 s); call /follower/arm_driver/reboot")


def void_metadata() -> dict:
    """Episode metadata as the recorder writes it after a follower trip (docs/INTERFACES.md, Episode bags)."""
    return {"source": "live", "void": True, "void_reason": TRIP_REASON, "faults": [
        {"kind": "trip", "status": "/follower/arm_driver: trip", "level": "ERROR", "message": TRIP_REASON[30:],
         "hardware_id": "/dev/ttyUSB1", "since_ns": T0 + 300 * MS, "until_ns": None, "void": True}]}


def test_void_episodes_are_left_out_named_with_their_reason_and_kept_on_request(write_bag, tmp_path: Path,
                                                                                capsys) -> None:
    bags = tmp_path / "bags"
    good = write_bag(standard_streams(frames=20), out=bags, source="live", void=False, void_reason="", faults=[])
    tripped = write_bag(standard_streams(frames=20), out=bags, **void_metadata())
    assert (good.name, tripped.name) == ("episode_000001", "episode_000002")

    result = run([good, tripped], tmp_path / "nad")
    assert result.episodes == 1 and not result.skipped
    assert result.void == [{"source_bag": tripped.as_posix(), "episode": "episode_000002", "reason": TRIP_REASON}]
    report = json.loads((tmp_path / "nad" / "meta" / "report.json").read_text())
    assert report["void"] == result.void and report["void_kept"] == []
    assert [e.meta["source_bag"] for e in load_nad(tmp_path / "nad")] == [good.as_posix()]

    kept = run([good, tripped], tmp_path / "kept", keep_void=True)
    assert kept.episodes == 2 and kept.void == []
    report = json.loads((tmp_path / "kept" / "meta" / "report.json").read_text())
    assert report["void"] == [] and report["void_kept"] == [
        {"episode_index": 1, "source_bag": tripped.as_posix(), "reason": TRIP_REASON}]

    parser = configure_parser(argparse.ArgumentParser())
    assert run_convert(parser.parse_args([str(bags), "--out", str(tmp_path / "cli"), "--quiet",
                                               "--jobs", "1"])) == 0
    out = capsys.readouterr().out
    skipped = [line for line in out.splitlines() if line.startswith("skipped ")]
    assert skipped == [f"skipped episode_000002 ({tripped.as_posix()}): void: {TRIP_REASON} (--keep-void converts it)"]
    assert "1 episodes" in out and "1 void episode(s) left out" in out
    assert run_convert(parser.parse_args([str(bags), "--out", str(tmp_path / "cli_kept"), "--quiet",
                                               "--jobs", "1", "--keep-void"])) == 0
    captured = capsys.readouterr()
    assert "2 episodes" in captured.out and "skipped" not in captured.out
    assert "episode_000002" in captured.err and "void" in captured.err


def test_only_void_episodes_is_an_error_that_names_them(write_bag, tmp_path: Path) -> None:
    tripped = write_bag(standard_streams(frames=5), **void_metadata())
    with pytest.raises(conv.ConvertError, match="no episode could be converted") as info:
        run(tripped, tmp_path / "nad")
    assert f"{tripped.as_posix()}: void: {TRIP_REASON}" in str(info.value)
