"""A new arm is a profile, not code: a three-joint arm defined only in ``tests/three_joint_arm/`` (spec, MJCF,
task profile, rig config) goes through ``na-sim generate -> na-train convert -> fit -> export -> compare`` with
that folder on ``$NA_ROBOT_PATH`` and nothing in the packages written for it.

Without the folder on the path the same bags are refused in one line naming the robot: the arm really is
found through the search path, not through something shipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ARM_DIR = Path(__file__).with_name("three_joint_arm")
ARM = "tri3"


def run(args: list[str], robot_path: str | None, timeout: float = 600) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("NA_ROBOT_PATH", None)
    if robot_path is not None:
        env["NA_ROBOT_PATH"] = robot_path
    return subprocess.run([sys.executable, "-m", *args], env=env, capture_output=True, text=True, timeout=timeout)


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-3000:])
    return result


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("tri3")
    path = str(ARM_DIR)
    # two episodes per task instance: one train and one test episode each (the 8:1:1 rule at n = 2)
    ok(run(["na_sim.cli", "generate", "--robot", ARM, "--tasks", "go_up_stay", "pick_place", "--episodes", "2",
            "--payloads", "200", "--quick", "--max-seconds", "4", "--seed", "11", "--jobs", "1", "--no-progress",
            "--out", str(root / "bags")], path))
    ok(run(["na_training.cli", "convert", str(root / "bags"), "--robot", ARM, "--out", str(root / "nad"),
            "--quiet"], path))
    ok(run(["na_training.cli", "fit", "--config", "tiny", "--nad", str(root / "nad"), "--out", str(root / "run"),
            "--steps", "3", "--quiet"], path))
    ok(run(["na_training.cli", "export", str(root / "run"), "--out", str(root / "model.onnx"), "--nad",
            str(root / "nad")], path))
    ok(run(["na_training.cli", "compare", "--nad", str(root / "nad"), "--model", str(root / "model.onnx"),
            "--no-mlp", "--out", str(root / "compare")], path))
    return root


@pytest.mark.slow
def test_the_three_joint_arm_goes_through_the_offline_pipeline(pipeline: Path) -> None:
    bags = sorted((pipeline / "bags").glob("episode_*"))
    assert len(bags) == 4
    info = json.loads((pipeline / "nad" / "meta" / "info.json").read_text())
    assert info["robot"] == ARM
    run_description = json.loads((pipeline / "run" / "run.json").read_text())
    assert run_description["robot"] == ARM
    assert run_description["joint_names"] == ["yaw", "shoulder", "elbow", "gripper"]
    comparison = json.loads((pipeline / "compare" / "comparison.json").read_text())
    force = comparison["force_mae"]
    assert {"NeuralActuator", "ID-Linear", "ID-Friction", "GMO"} <= set(force)
    for method, rows in force.items():
        assert set(rows) == {"go_up_stay/200g", "pick_place/200g", "avg"}, method
        assert all(0.0 < value < 50.0 for value in rows.values()), (method, rows)   # finite, scored on test frames
    assert comparison["condition_joint"] == "elbow"


@pytest.mark.slow
def test_the_model_knows_its_arm_has_four_channels(pipeline: Path) -> None:
    import onnxruntime

    session = onnxruntime.InferenceSession(str(pipeline / "model.onnx"))
    metadata = session.get_modelmeta().custom_metadata_map
    assert metadata.get("robot") == ARM, metadata.get("robot")
    assert json.loads(metadata["joint_names"]) == ["yaw", "shoulder", "elbow", "gripper"]


@pytest.mark.slow
def test_without_the_search_path_the_bags_are_refused_naming_the_arm(pipeline: Path, tmp_path: Path) -> None:
    result = run(["na_training.cli", "convert", str(pipeline / "bags"), "--robot", ARM, "--out",
                  str(tmp_path / "nad"), "--quiet"], robot_path=None)
    assert result.returncode != 0
    assert "tri3" in result.stderr and "Traceback" not in result.stderr, result.stderr[-2000:]
    assert not (tmp_path / "nad" / "meta" / "info.json").exists()
