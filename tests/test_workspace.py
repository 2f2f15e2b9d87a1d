"""Workspace layout: every package is a real, importable colcon package with its manifest."""

from __future__ import annotations

import ast
import importlib
import os
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYTHON_PACKAGES = ["na_common", "na_description", "na_sim", "na_driver", "na_teleop", "na_estimator", "na_training",
                   "na_bringup", "na_policy"]
ALL_PACKAGES = ["na_msgs", *PYTHON_PACKAGES]


def manifest(name: str) -> ET.Element:
    return ET.parse(ROOT / "src" / name / "package.xml").getroot()


@pytest.mark.parametrize("name", ALL_PACKAGES)
def test_package_manifest_is_format_3(name: str) -> None:
    root = manifest(name)
    assert root.get("format") == "3"
    assert root.findtext("name") == name
    build_type = root.find("export/build_type").text
    assert build_type == ("ament_cmake" if name == "na_msgs" else "ament_python")
    assert (ROOT / "src" / name / "test").is_dir() or name == "na_msgs"


@pytest.mark.parametrize("name", PYTHON_PACKAGES)
def test_python_package_layout_and_import(name: str) -> None:
    pkg = ROOT / "src" / name
    assert (pkg / "resource" / name).is_file()
    assert (pkg / "setup.cfg").is_file()
    setup_tree = ast.parse((pkg / "setup.py").read_text())
    assert any(isinstance(node, ast.Call) and getattr(node.func, "id", "") == "setup" for node in ast.walk(setup_tree))
    module = importlib.import_module(name)
    assert Path(module.__file__).resolve().is_relative_to(pkg.resolve())


@pytest.mark.parametrize("name", PYTHON_PACKAGES)
def test_internal_dependencies_are_declared(name: str) -> None:
    """Every na_* package a package imports is listed in its package.xml."""
    declared = {e.text for e in manifest(name) if e.tag in ("depend", "exec_depend", "build_depend")}
    imported: set[str] = set()
    for path in (ROOT / "src" / name / name).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    internal = {m for m in imported if m.startswith("na_") and m != name}
    assert internal <= declared, f"{name} imports {sorted(internal - declared)} without declaring them"


def test_messages_import_from_the_built_workspace() -> None:
    from na_msgs.msg import ActuatorEstimate, ArmState, Contact, JointCommand, MotorCondition
    from na_msgs.srv import DiscardEpisode, StartEpisode, StopEpisode

    state = ArmState(role=ArmState.ROLE_FOLLOWER, name=["joint1"], position=[0.1])
    assert state.position[0] == pytest.approx(0.1)
    for cls in (ActuatorEstimate, Contact, JointCommand, MotorCondition):
        assert cls().header.frame_id == ""
    assert StartEpisode.Request().info.payload_grams == 0.0
    assert StopEpisode.Response().success is False
    assert DiscardEpisode.Response().episode_id == ""


def test_every_message_field_states_its_unit() -> None:
    """Each field line in a .msg/.srv carries a comment (units or meaning)."""
    for path in sorted((ROOT / "src" / "na_msgs").glob("*/*.[ms][sr][gv]")):
        for line in path.read_text().splitlines():
            text = line.strip()
            if not text or text.startswith("#") or text == "---" or "=" in text.split("#")[0]:
                continue
            field_type = text.split()[0]
            if field_type in ("std_msgs/Header", "EpisodeInfo"):
                continue
            assert "#" in text, f"{path.name}: field without unit comment: {text}"


def test_session_has_its_own_dds_domain() -> None:
    # Localhost only: the middleware's own configuration (SYSTEM_DEFAULT), a Fast DDS profile on the loopback.
    assert os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] == "SYSTEM_DEFAULT"
    profile = Path(os.environ["FASTRTPS_DEFAULT_PROFILES_FILE"]).read_text()
    assert "<useBuiltinTransports>false</useBuiltinTransports>" in profile
    assert re.findall(r"<address>([^<]*)</address>", profile) and \
        set(re.findall(r"<address>([^<]*)</address>", profile)) == {"127.0.0.1"}
    assert 0 < int(os.environ["ROS_DOMAIN_ID"]) <= 101
