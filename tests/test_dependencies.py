"""Dependency direction between the packages, checked on the source: imports run from nodes and tools
to cores, never back; the training package runs without ROS.

Only the installed modules (``src/PKG/PKG/``) are walked: tests and the benchmark scripts beside a package
are tools, and may drive a package with another (e.g. the driver benchmark talks to the emulator)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROS_MODULES = ("rclpy", "na_msgs", "rcl_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs",
               "diagnostic_msgs", "visualization_msgs", "std_srvs", "builtin_interfaces", "ament_index_python")


def imports_of(package: str) -> dict[str, set[str]]:
    """Module file -> every module name it imports (also inside functions), for one package's modules."""
    found: dict[str, set[str]] = {}
    for path in (SRC / package / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[str(path.relative_to(SRC))] = names
    return found


def offenders(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(f"{file} imports {name}" for file, names in imports_of(package).items()
                  for name in names if name.split(".")[0] in forbidden)


# Lower layers never import higher ones (package -> packages it must not import).
LAYERS = {
    "na_common": ("na_description", "na_sim", "na_driver", "na_teleop", "na_estimator", "na_training",
                  "na_bringup", "na_policy"),
    "na_description": ("na_common", "na_sim", "na_driver", "na_teleop", "na_estimator", "na_training",
                       "na_bringup", "na_policy"),
    "na_teleop": ("na_sim", "na_training", "na_estimator", "na_driver", "na_bringup", "na_policy"),
    "na_driver": ("na_sim", "na_training", "na_estimator", "na_teleop", "na_bringup", "na_policy"),
    "na_estimator": ("na_sim", "na_training", "na_teleop", "na_driver", "na_bringup", "na_policy"),
    "na_sim": ("na_training", "na_estimator", "na_teleop", "na_driver", "na_bringup", "na_policy"),
    "na_training": ("na_sim", "na_teleop", "na_driver", "na_bringup", "na_policy"),
    "na_bringup": ("na_policy",),
}


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_imports_point_down_the_layers(package: str) -> None:
    assert offenders(package, LAYERS[package]) == []


def test_training_needs_no_ros() -> None:
    """na_training (the training image has no ROS) imports neither rclpy nor any message package."""
    assert offenders("na_training", ROS_MODULES) == []


def test_only_one_common_module_imports_rclpy() -> None:
    users = {file for file, names in imports_of("na_common").items()
             if any(n.split(".")[0] in ROS_MODULES for n in names)}
    assert users <= {"na_common/na_common/ros_node.py"}


def test_the_walker_sees_imports_inside_functions(tmp_path) -> None:
    """The oracle itself: a lazy import inside a function counts (a ROS import cannot hide there)."""
    source = "def f():\n    import rclpy\n    from na_msgs.msg import ArmState\n"
    names = {n.module if isinstance(n, ast.ImportFrom) else n.names[0].name
             for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import | ast.ImportFrom)}
    assert names == {"rclpy", "na_msgs.msg"}


def test_evaluation_and_comparison_are_peers() -> None:
    """``na-train eval`` and ``na-train compare`` share episodes and metrics from their own modules; neither
    reaches into the other (private helpers borrowed across tools are how copies start)."""
    found = imports_of("na_training")
    assert "na_training.baselines.compare" not in found["na_training/na_training/evaluate.py"]
    assert "na_training.evaluate" not in found["na_training/na_training/baselines/compare.py"]
