"""The five node executables share one shell (na_common.ros_node): ``--help`` lists every parameter the
shipped parameter files set, with its default; a bad parameter ends the process with exit code 2 and a
line naming it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from na_common.ament import find_executable

CONFIG_DIR = Path(__file__).resolve().parents[1] / "src" / "na_bringup" / "config"
# executable -> the parameter files written for it
NODES = {
    ("na_driver", "arm_driver"): ["leader_arm.yaml", "follower_arm.yaml", "so101_leader_arm.yaml",
                                  "so101_follower_arm.yaml"],
    ("na_driver", "ft_driver"): ["ft_netft.yaml", "ft_serial.yaml"],
    ("na_estimator", "estimator"): ["estimator.yaml"],
    ("na_teleop", "recorder"): ["recorder.yaml"],
    ("na_teleop", "teleop"): ["teleop.yaml", "so101_teleop.yaml"],
}


def run(package: str, executable: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    path = find_executable(package, executable)
    assert path is not None, f"{package}/{executable} is not installed"
    return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(("package", "executable"), list(NODES), ids=[e for _, e in NODES])
def test_help_lists_every_parameter_of_its_parameter_files(package: str, executable: str) -> None:
    result = run(package, executable, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {executable} --ros-args")
    listed = {line.split()[0] for line in result.stdout.split("parameters (default):")[1].splitlines() if line.strip()}
    for name in NODES[package, executable]:
        parameters = yaml.safe_load((CONFIG_DIR / name).read_text())["/**"]["ros__parameters"]
        assert set(parameters) <= listed, f"{executable} --help lacks {sorted(set(parameters) - listed)} of {name}"
    assert all(line.rstrip().endswith(")") for line in result.stdout.splitlines() if line.startswith("  "))


@pytest.mark.node
@pytest.mark.parametrize(("package", "executable", "arguments", "named"), [
    ("na_estimator", "estimator", [], "model_path"),
    ("na_estimator", "estimator", ["-p", "model_path:=/x.onnx", "-p", "stale_timeout:=soon"], "stale_timeout"),
    ("na_teleop", "teleop", ["-p", "joint_sign:=[1.0, 1.0]"], "joint_sign"),
    ("na_teleop", "recorder", ["-p", "storage:=sqlite3"], "storage"),
    ("na_driver", "arm_driver", ["-p", "port:=/dev/null", "-p", "role:=leader", "-p", "servo_ids:=[1, 2, 3, 4, 5]"],
     "servo_ids"),
], ids=["estimator-no-model", "estimator-type", "teleop", "recorder", "arm_driver-robot-fact"])
def test_a_bad_parameter_exits_2_naming_it(package: str, executable: str, arguments: list[str], named: str) -> None:
    result = run(package, executable, "--ros-args", *arguments)
    assert result.returncode == 2, result.stderr
    fatal = [line for line in result.stderr.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and named in fatal[0], result.stderr
