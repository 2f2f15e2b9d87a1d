"""Episode bag format: write real rosbag2 MCAP bags with rosbags and read them back."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml
from rosbags.highlevel import AnyReader
from rosbags.rosbag2 import StoragePlugin, Writer

from na_common import episode_bag as eb
from na_common.episode_bag.metadata import void_reason

NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]
T0 = 1_700_000_000_000_000_000


def _metadata(**overrides):
    meta = {"task": "pick_place", "payload_grams": 200, "force_source": "payload", "condition": "nominal",
            "source": "generated", "seed": 7, "operator": "tester",
            "fixture": {"position": [0.25, 0.0, 0.05], "rpy": [0.0, 0.0, 0.0]}}
    meta.update(overrides)
    return meta


def _arm_state(stamp_ns: int, k: int):
    cls = eb.message_class(eb.ARM_STATE)
    pos = np.linspace(-0.5, 0.5, 5) + 0.01 * k
    return cls(header=eb.make_header(stamp_ns, "world"), role="follower", name=NAMES, position=pos,
               gripper_slide=0.01, goal_gripper_slide=0.012, velocity=np.full(5, 0.1 * k),
               goal_position=pos + 0.02, current=np.full(5, 0.3), pwm=np.full(5, 0.2), load=np.zeros(0),
               input_voltage=np.full(5, 12.0), temperature=np.full(5, 35.0),
               hardware_error=np.array([0, 0, 32, 0, 0], dtype=np.uint8), stale=np.array([False] * 4 + [True]),
               timeout_errors=k, crc_errors=0, partial_errors=0, dropped_cycles=0, bus_cycle_duration=0.002)


def _write_episode(out_dir, n=20, **meta):
    writer = eb.EpisodeWriter(out_dir, _metadata(**meta))
    sidecar_before = json.loads(writer.sidecar_path.read_text())
    writer.add_topic("/follower/arm_state", eb.ARM_STATE)
    writer.add_topic("/follower/command", eb.JOINT_COMMAND)
    writer.add_topic("/ft/wrench", eb.WRENCH_STAMPED)
    writer.add_topic("/episode/grasp", eb.BOOL)
    writer.add_topic("/follower/joint_states", eb.JOINT_STATE)
    cmd_cls, wrench_cls = eb.message_class(eb.JOINT_COMMAND), eb.message_class(eb.WRENCH_STAMPED)
    vec, wrench = eb.message_class("geometry_msgs/msg/Vector3"), eb.message_class("geometry_msgs/msg/Wrench")
    js_cls, bool_cls = eb.message_class(eb.JOINT_STATE), eb.message_class(eb.BOOL)
    # Write out of stamp order across topics on purpose: the reader must sort.
    for k in range(n):
        stamp = T0 + k * 10_000_000
        writer.write("/follower/command", stamp + 1, cmd_cls(header=eb.make_header(stamp + 1), name=NAMES,
                                                             position=np.full(5, 0.1 * k), gripper_slide=0.0))
        writer.write("/follower/arm_state", stamp, _arm_state(stamp, k))
        writer.write("/follower/joint_states", stamp, js_cls(header=eb.make_header(stamp), name=NAMES,
                                                            position=np.zeros(5), velocity=np.zeros(5),
                                                            effort=np.zeros(0)))
        if k % 2 == 0:
            writer.write("/ft/wrench", stamp + 5, wrench_cls(
                header=eb.make_header(stamp + 5, "ft_sensor"),
                wrench=wrench(force=vec(x=0.0, y=0.0, z=-float(k)), torque=vec(x=0.0, y=0.0, z=0.0))))
    writer.write("/episode/grasp", T0, bool_cls(data=True))
    path = writer.close()
    return path, sidecar_before


def test_layout_sidecar_and_custom_data(tmp_path):
    path, sidecar_before = _write_episode(tmp_path, n=20, episode_id=3)
    assert path == tmp_path / "episode_000003"
    assert (path / "episode_000003_0.mcap").is_file()
    assert sidecar_before["complete"] is False and sidecar_before["stop_stamp"] is None

    sidecar = json.loads((path / "episode.json").read_text())
    assert sidecar["complete"] is True
    assert sidecar["start_stamp"] == T0 and sidecar["stop_stamp"] == T0 + 19 * 10_000_000 + 1  # last command
    assert sidecar["topics"]["/follower/arm_state"] == {"type": eb.ARM_STATE, "count": 20}
    assert sidecar["topics"]["/ft/wrench"]["count"] == 10
    assert sidecar["task_instance"] == "pick_place_200g_nominal"

    info = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["storage_identifier"] == "mcap"
    assert info["relative_file_paths"] == ["episode_000003_0.mcap"]
    custom = info["custom_data"]
    assert all(isinstance(v, str) for v in custom.values())
    assert custom["task"] == "pick_place" and custom["complete"] == "true" and custom["source"] == "generated"


def test_round_trip_messages_and_metadata(tmp_path):
    path, _ = _write_episode(tmp_path, n=12)
    assert path.name == "episode_000001"
    with eb.EpisodeReader(path) as reader:
        meta = reader.metadata
        assert meta["payload_grams"] == 200.0 and meta["seed"] == 7 and meta["episode_id"] == 1
        assert meta["fixture"] == {"position": [0.25, 0.0, 0.05], "rpy": [0.0, 0.0, 0.0]}
        assert meta["complete"] is True
        topics = reader.topics
        assert topics["/follower/arm_state"].count == 12 and topics["/follower/arm_state"].msgtype == eb.ARM_STATE
        assert topics["/episode/grasp"].count == 1

        stamps = [stamp for _, stamp, _ in reader.messages()]
        assert stamps == sorted(stamps) and len(stamps) == 12 * 3 + 6 + 1

        states = list(reader.messages("/follower/arm_state"))
        topic, stamp, msg = states[5]
        assert topic == "/follower/arm_state" and eb.stamp_to_ns(msg.header.stamp) == stamp == T0 + 50_000_000
        assert list(msg.name) == NAMES and msg.role == "follower"
        np.testing.assert_allclose(msg.position, np.linspace(-0.5, 0.5, 5) + 0.05)
        assert list(msg.hardware_error) == [0, 0, 32, 0, 0] and list(msg.stale) == [False] * 4 + [True]
        assert msg.timeout_errors == 5

        wrenches = [m for _, _, m in reader.messages(["/ft/wrench"])]
        assert [w.wrench.force.z for w in wrenches] == [-float(k) for k in range(0, 12, 2)]
        assert wrenches[0].header.frame_id == "ft_sensor"
        (_, _, grasp), = reader.messages("/episode/grasp")
        assert grasp.data is True


def test_plain_anyreader_opens_bag(tmp_path):
    path, _ = _write_episode(tmp_path, n=5)
    with AnyReader([path]) as reader:  # no default type store: the bag carries its definitions
        conns = [c for c in reader.connections if c.topic == "/follower/command"]
        msgs = [reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages(connections=conns)]
    assert len(msgs) == 5 and msgs[3].position[0] == pytest.approx(0.3)


def test_next_episode_number_and_no_overwrite(tmp_path):
    _write_episode(tmp_path, n=2)
    second, _ = _write_episode(tmp_path, n=2)
    assert second.name == "episode_000002"
    with pytest.raises(eb.EpisodeBagError, match="exists already"):
        eb.EpisodeWriter(tmp_path, _metadata(episode_id=2))
    assert [p.name for p in eb.list_episodes(tmp_path)] == ["episode_000001", "episode_000002"]


@pytest.mark.parametrize(("key", "value", "match"), [
    ("force_source", "gauge", "force_source"),
    ("condition", "broken", "condition"),
    ("payload_grams", "heavy", "payload_grams"),
])
def test_bad_metadata_is_rejected(tmp_path, key, value, match):
    with pytest.raises(eb.EpisodeBagError, match=match):
        eb.EpisodeWriter(tmp_path, _metadata(**{key: value}))
    assert not any(tmp_path.iterdir())


def test_writer_errors(tmp_path):
    writer = eb.EpisodeWriter(tmp_path, _metadata())
    with pytest.raises(eb.EpisodeBagError, match="unknown message type"):
        writer.add_topic("/x", "na_msgs/msg/NoSuchType")
    with pytest.raises(eb.EpisodeBagError, match="add_topic"):
        writer.write("/never/added", T0, None)
    writer.close(complete=False)
    assert json.loads(writer.sidecar_path.read_text())["complete"] is False
    with pytest.raises(eb.EpisodeBagError, match="closed"):
        writer.add_topic("/y", eb.BOOL)


def test_reader_errors(tmp_path):
    with pytest.raises(eb.EpisodeBagError, match="not found"):
        eb.EpisodeReader(tmp_path / "missing")
    (tmp_path / "empty").mkdir()
    with pytest.raises(eb.EpisodeBagError, match=r"no metadata\.yaml"):
        eb.EpisodeReader(tmp_path / "empty")
    # A writer that never closed (as after SIGKILL): MCAP without metadata.yaml.
    writer = eb.EpisodeWriter(tmp_path / "killed", _metadata())
    writer.add_topic("/episode/grasp", eb.BOOL)
    writer.write("/episode/grasp", T0, eb.message_class(eb.BOOL)(data=False))
    with pytest.raises(eb.EpisodeBagError, match=r"did not finish.*the recorder repairs"):
        eb.EpisodeReader(writer.path)
    writer.abort()


def test_a_truncated_storage_file_is_named_as_such(tmp_path):
    path = _write_episode(tmp_path)[0]
    mcap = next(path.glob("*.mcap"))
    mcap.write_bytes(mcap.read_bytes()[:-40])            # lose the footer and the end magic
    with pytest.raises(eb.EpisodeBagError, match=r"episode_\d+: its storage file is truncated or corrupt"):
        eb.EpisodeReader(path)


def test_reads_sqlite3_bag_and_sidecar_only_metadata(tmp_path):
    """A plain rosbag2 sqlite3 bag (no custom_data) takes its metadata from the sidecar."""
    path = tmp_path / "episode_000009"
    store = eb.typestore()
    with Writer(path, version=8, storage_plugin=StoragePlugin.SQLITE3) as writer:
        conn = writer.add_connection("/follower/arm_state", eb.ARM_STATE, typestore=store)
        for k in (2, 0, 1):
            writer.write(conn, T0 + k, eb.serialize(_arm_state(T0 + k, k), eb.ARM_STATE))
    with pytest.raises(eb.EpisodeBagError, match="no episode metadata"):
        eb.EpisodeReader(path)
    (path / "episode.json").write_text(json.dumps({**_metadata(), "complete": True, "topics": {}}))
    with eb.EpisodeReader(path) as reader:
        assert reader.metadata["task"] == "pick_place" and "topics" not in reader.metadata
        stamps = [stamp for _, stamp, _ in reader.messages("/follower/arm_state")]
        assert stamps == [T0, T0 + 1, T0 + 2]
        with pytest.raises(eb.EpisodeBagError, match="no topic"):
            list(reader.messages("/nope"))


def test_numpy_metadata_values_are_stored_as_plain_json(tmp_path):
    meta = _metadata(seed=np.int64(4), fixture={"position": np.array([0.2, 0.0, 0.1]), "rpy": [0.0, 0.0, 0.0]})
    path = eb.EpisodeWriter(tmp_path, meta).close()
    with eb.EpisodeReader(path) as reader:
        assert reader.metadata["seed"] == 4 and reader.metadata["fixture"]["position"] == [0.2, 0.0, 0.1]
    with pytest.raises(eb.EpisodeBagError, match="cannot be stored"):
        eb.EpisodeWriter(tmp_path, _metadata(notes_extra=object()))


def test_integrity_keys_round_trip_and_update_the_sidecar_while_recording(tmp_path):
    fault = {"kind": "trip", "status": "/follower/arm_driver: trip", "level": "ERROR", "message": "tripped",
             "hardware_id": "/dev/ttyUSB1", "since_ns": T0, "until_ns": None, "void": True}
    writer = eb.EpisodeWriter(tmp_path, _metadata(source="live", faults=[], void=False, void_reason=""))
    writer.update_metadata({"faults": [fault], "void": True, "void_reason": "/follower/arm_driver: trip: tripped"})
    sidecar = json.loads(writer.sidecar_path.read_text())           # at once, before the episode ends
    assert sidecar["void"] is True and sidecar["faults"] == [fault] and sidecar["complete"] is False
    path = writer.close()
    custom = yaml.safe_load((path / "metadata.yaml").read_text())["rosbag2_bagfile_information"]["custom_data"]
    assert custom["void"] == "true" and json.loads(custom["faults"]) == [fault]
    with eb.EpisodeReader(path) as reader:
        meta = reader.metadata
    assert meta["void"] is True and meta["faults"] == [fault]
    assert void_reason(meta) == "/follower/arm_driver: trip: tripped"
    assert void_reason({"void": False, "void_reason": "x"}) is None and void_reason({}) is None
    with pytest.raises(eb.EpisodeBagError, match="'faults' must be a list"):
        eb.validate_metadata(_metadata(faults="tripped"))
