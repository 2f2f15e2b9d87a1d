"""Conversion and training inputs per robot: an SO-101 bag becomes a NAD with Present Load columns and the
elbow as its condition joint; a bag of the other arm, or one without the effort signal, is refused in one line."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from na_training import convert as conv
from na_training.nad import NadError, load_nad, read_info, robot_spec

SO101_JOINTS = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
OMX_JOINTS = ["joint1", "joint2", "joint3", "joint4", "gripper"]
T0 = 2_000 * 1_000_000_000
PERIOD = 10_000_000                  # ns, 100 Hz


def _msg(msgtype: str, **fields):
    from na_common.episode_bag import message_class

    return message_class(msgtype)(**fields)


def _state(stamp: int, joints: list[str], k: int, role: str, with_load: bool):
    from na_common.episode_bag import make_header

    n = len(joints)
    q = 0.01 * k * np.arange(1, n + 1)
    load = 0.05 * np.sin(0.1 * k + np.arange(n)) if with_load else np.zeros(0)
    return _msg("na_msgs/msg/ArmState", header=make_header(stamp, "world"), role=role, name=joints, position=q,
                gripper_slide=0.2, goal_gripper_slide=0.2, velocity=np.full(n, 0.1), goal_position=q,
                current=np.full(n, 0.05), pwm=np.zeros(n), load=load, input_voltage=np.full(n, 12.0),
                temperature=np.full(n, 30.0), hardware_error=np.zeros(n, np.uint8), stale=np.zeros(n, bool),
                timeout_errors=0, crc_errors=0, partial_errors=0, dropped_cycles=0, bus_cycle_duration=0.003)


def write_bag(out: Path, joints: list[str], frames: int = 60, with_load: bool = True,
              condition: str = "nominal", robot: str | None = None) -> tuple[Path, np.ndarray]:
    """One episode bag of an arm with ``joints``; returns the bag and the follower loads written."""
    from na_common.episode_bag import EpisodeWriter, make_header

    meta = {"task": "go_up_stay", "payload_grams": 0.0, "force_source": "none", "condition": condition,
            "source": "generated", "seed": 1}
    if robot is not None:
        meta["robot"] = robot
    loads = []
    with EpisodeWriter(out, meta) as writer:
        writer.add_topic("/follower/arm_state", "na_msgs/msg/ArmState")
        writer.add_topic("/leader/arm_state", "na_msgs/msg/ArmState")
        writer.add_topic("/follower/command", "na_msgs/msg/JointCommand")
        for k in range(frames):
            stamp = T0 + k * PERIOD
            command = _msg("na_msgs/msg/JointCommand", header=make_header(stamp - 2_000_000, "world"), name=joints,
                           position=np.full(len(joints), 0.1), gripper_slide=0.2)
            writer.write("/follower/command", stamp - 2_000_000, command)
            writer.write("/leader/arm_state", stamp - 1_000_000,
                         _state(stamp - 1_000_000, joints, k, "leader", with_load=False))
            state = _state(stamp, joints, k, "follower", with_load)
            loads.append(np.asarray(state.load, float))
            writer.write("/follower/arm_state", stamp, state)
    return writer.path, np.array(loads)


def test_an_so101_bag_becomes_a_nad_with_load_columns_and_the_elbow_condition(tmp_path: Path) -> None:
    bag, loads = write_bag(tmp_path / "bags", SO101_JOINTS)
    restricted, _ = write_bag(tmp_path / "bags", SO101_JOINTS, condition="restricted_elbow_flex")
    conv.convert([bag, restricted], tmp_path / "nad", robot="so101", progress=False, jobs=1)
    info = read_info(tmp_path / "nad")
    assert info["robot"] == "so101" and info["joint_names"] == SO101_JOINTS
    assert info["condition_joints"] == ["elbow_flex"] and robot_spec(info).name == "so101"
    episodes = {e.meta["condition"]: e for split in ("train", "val", "test") for e in load_nad(tmp_path / "nad", split)}
    nominal = episodes["nominal"]
    np.testing.assert_array_equal(nominal.per_joint("load"), loads)
    assert nominal.valid.all()
    assert np.all(nominal.columns["condition_elbow_flex"] == 1.0)
    assert np.all(episodes["restricted_elbow_flex"].columns["condition_elbow_flex"] == 0.0)
    features = nominal.features()
    assert features.shape == (len(loads), 43)
    np.testing.assert_allclose(features[:, 12:18], 100.0 * loads)       # load.<joint> follows the 6 goals + 6
    with pytest.raises(NadError, match="recorded with robot 'so101', not 'open_manipulator_x'"):
        robot_spec(info, "omx_x")


def test_a_bag_of_the_other_arm_is_refused_naming_the_joints(tmp_path: Path) -> None:
    so101_bag, _ = write_bag(tmp_path / "so", SO101_JOINTS)
    with pytest.raises(conv.ConvertError) as refused:
        conv.convert([so101_bag], tmp_path / "nad_omx", robot="omx_x", progress=False, jobs=1)
    message = str(refused.value)
    assert "\n" not in message and "missing ['joint1', 'joint2', 'joint3', 'joint4']" in message
    assert not (tmp_path / "nad_omx").exists()
    omx_bag, _ = write_bag(tmp_path / "omx", OMX_JOINTS, with_load=False)
    with pytest.raises(conv.ConvertError, match=r"missing \['shoulder_pan'"):
        conv.convert([omx_bag], tmp_path / "nad_so", robot="so101", progress=False, jobs=1)


def test_a_bag_whose_metadata_names_another_robot_is_refused(tmp_path: Path) -> None:
    # joint names alone would pass: the metadata's robot decides
    mislabelled, _ = write_bag(tmp_path / "bags", OMX_JOINTS, with_load=False, robot="so101")
    with pytest.raises(conv.ConvertError) as refused:
        conv.convert([mislabelled], tmp_path / "nad", robot="omx_x", progress=False, jobs=1)
    assert "recorded with robot 'so101'" in str(refused.value) and "\n" not in str(refused.value)
    named, _ = write_bag(tmp_path / "named", SO101_JOINTS, robot="so101")
    conv.convert([named], tmp_path / "nad_so", robot="so101", progress=False, jobs=1)
    assert read_info(tmp_path / "nad_so")["robot"] == "so101"


def test_an_so101_bag_without_present_load_is_refused(tmp_path: Path) -> None:
    bag, _ = write_bag(tmp_path / "bags", SO101_JOINTS, with_load=False)
    with pytest.raises(conv.ConvertError, match="carries no load values"):
        conv.convert([bag], tmp_path / "nad", robot="so101", progress=False, jobs=1)
    with pytest.raises(conv.ConvertError, match="unknown robot 'so102'"):
        conv.convert([bag], tmp_path / "nad", robot="so102", progress=False, jobs=1)
