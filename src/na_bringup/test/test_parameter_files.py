"""The node parameter files carry what a rig tunes, never a robot fact: servo IDs, joint names, homing
offsets, drive directions, the gripper map and the joint limits live in the robot spec only."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

CONFIG_DIR = Path(__file__).resolve().parents[3] / "config"     # the repository's config/
SPEC_FILE = Path(__file__).resolve().parents[2] / "na_description" / "na_description" / "robots" / \
    "open_manipulator_x.yaml"


def spec_facts() -> tuple[set[str], dict[str, list]]:
    """From the spec YAML itself: the keys that hold robot facts, and the fact lists a file could copy."""
    raw = yaml.safe_load(SPEC_FILE.read_text())
    joints = raw["joints"]
    keys = {key for joint in joints for key in joint} | set(raw["gripper"]) | {"effort_bound", "joint_limit"}
    lists = {"servo IDs": [j["servo_id"] for j in joints], "joint names": [j["name"] for j in joints],
             "lower limits": [j["lower"] for j in joints], "upper limits": [j["upper"] for j in joints],
             "effort bounds": [j["effort"] for j in joints],
             "gripper angle points": raw["gripper"]["angle_points"],
             "gripper slide points": raw["gripper"]["slide_points"]}
    return keys, lists


def leaves(tree: dict, prefix: str = "") -> list[tuple[str, object]]:
    out = []
    for key, value in tree.items():
        out += leaves(value, f"{prefix}{key}.") if isinstance(value, dict) else [(f"{prefix}{key}", value)]
    return out


def same_list(a: object, b: list) -> bool:
    if not isinstance(a, list) or len(a) != len(b) or len(b) < 2:
        return False
    if all(isinstance(v, str) for v in a + b):
        return a == b
    try:
        return bool(np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float)))
    except (TypeError, ValueError):
        return False


def restated_facts(parameters: dict) -> list[str]:
    """Each parameter that names a robot fact, copies one of the spec's lists or mentions a joint name."""
    fact_keys, fact_lists = spec_facts()
    problems = []
    for key, value in leaves(parameters):
        base = key.rsplit(".", 1)[-1]
        for prefix in ("gripper_", "joint_"):
            base = base.removeprefix(prefix)
        if base in fact_keys or base.removesuffix("s") in fact_keys:
            problems.append(f"{key}: a robot fact ({base})")
        problems += [f"{key}: restates the spec's {what}" for what, facts in fact_lists.items()
                     if same_list(value, facts)]
        items = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) and v in fact_lists["joint names"] for v in items):
            problems.append(f"{key}: names a joint")
    return problems


PARAMETER_FILES = sorted(CONFIG_DIR.glob("*.yaml"))


def test_the_node_parameter_files_are_found() -> None:
    names = {p.name for p in PARAMETER_FILES}
    assert {"leader_arm.yaml", "follower_arm.yaml", "teleop.yaml", "estimator.yaml"} <= names


@pytest.mark.parametrize("path", PARAMETER_FILES, ids=lambda p: p.name)
def test_no_parameter_file_restates_a_robot_fact(path: Path) -> None:
    content = yaml.safe_load(path.read_text())
    problems = [p for section in content.values() for p in restated_facts(section["ros__parameters"])]
    assert not problems, f"{path.name} restates the robot spec: {problems}"


def test_the_check_finds_restated_facts() -> None:
    """The oracle itself: the old driver parameter file's robot facts, under old and new names."""
    old = {"port": "/dev/ttyUSB1", "servo_ids": [11, 12, 13, 14, 15], "homing_offsets": [0.0] * 5,
           "drive_directions": [1] * 5, "gripper_angle_points": [-1.52, 0.92], "limits": {"upper": [0.0] * 5},
           "ids": [11, 12, 13, 14, 15], "tool_joint": "joint4", "open_at": [0.019, -0.01]}
    problems = restated_facts(old)
    for key in ("servo_ids", "homing_offsets", "drive_directions", "gripper_angle_points", "limits.upper", "ids",
                "tool_joint", "open_at"):
        assert any(p.startswith(f"{key}:") for p in problems), (key, problems)
    assert not any(p.startswith("port:") for p in problems)
    assert restated_facts({"joint_sign": [1.0] * 5, "joint_offset": [0.0] * 5, "baud_rate": 1000000}) == []
