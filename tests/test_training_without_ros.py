"""Training needs no ROS: the whole ``na-train`` CLI runs in a virtual environment that holds what
requirements.txt installs (and what those packages require) and nothing else: no rclpy, no ROS message package,
no node package of this suite; ``na_training``, ``na_description`` and ``na_common`` come from their sources.

In that environment the child process also installs an import hook that records (and refuses) any attempt to
import a ROS or node module, imports every ``na_training`` module, asks every verb for its ``--help`` and runs a tiny
``convert -> fit -> export -> compare -> monitor`` on bags that this test generated beforehand (outside, with the
simulated rig).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sysconfig
import textwrap
import venv
from pathlib import Path

import pytest

CHILD = textwrap.dedent('''
    import importlib.abc, sys

    NODE_PACKAGES = ("na_estimator", "na_driver", "na_teleop", "na_bringup", "na_policy", "na_msgs")
    refused = []

    class RefuseRos(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            top = name.split(".")[0]
            if (top in ("rclpy", "rosidl_runtime_py", "rosidl_parser", "rmw", "rcl_interfaces", "launch",
                        "launch_ros") or top.endswith(("_msgs", "_srvs", "_interfaces")) or top in NODE_PACKAGES):
                refused.append(name)
                raise ModuleNotFoundError(f"No module named {name!r} (refused: training must not need it)")
            return None

    import importlib.util
    installed = sorted(name for name in ("rclpy", "rosidl_runtime_py", "std_msgs", "diagnostic_msgs", "na_msgs",
                                         "na_estimator", "na_driver", "na_bringup")
                       if importlib.util.find_spec(name) is not None)
    sys.meta_path.insert(0, RefuseRos())

    import contextlib, io, json, pkgutil, importlib
    from pathlib import Path

    import na_training
    modules = sorted(m.name for m in pkgutil.walk_packages(na_training.__path__, "na_training.")
                     if not m.name.endswith("__main__"))
    for name in modules:
        importlib.import_module(name)

    from na_training.cli import build_parser, main
    verbs = sorted(build_parser()._subparsers._group_actions[0].choices)
    for verb in verbs:
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.suppress(SystemExit):
            main([verb, "--help"])
        assert "usage: na-train " + verb in out.getvalue(), verb

    root = Path(sys.argv[1])
    steps = [["convert", str(root / "bags"), "--out", str(root / "nad"), "--quiet"],
             ["fit", "--config", "tiny", "--nad", str(root / "nad"), "--out", str(root / "run"), "--steps", "3",
              "--quiet"],
             ["export", str(root / "run"), "--out", str(root / "model.onnx"), "--nad", str(root / "nad")],
             ["compare", "--nad", str(root / "nad"), "--model", str(root / "model.onnx"), "--no-mlp",
              "--out", str(root / "compare")],
             ["monitor", "--nad", str(root / "nad"), "--model", str(root / "model.onnx"),
              "--out", str(root / "monitor")]]
    codes = [main(step) for step in steps]
    print(json.dumps({"installed": installed, "prefix": sys.prefix, "modules": len(modules), "verbs": verbs,
                      "exits": codes,
                      "refused": sorted(set(refused)),
                      "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("rclpy",) + NODE_PACKAGES)}))
''')


REPO = Path(__file__).resolve().parents[1]
TRAINING_SOURCES = [REPO / "src" / name for name in ("na_training", "na_description", "na_common")]


def required_distributions(requirements: Path) -> set[str]:
    """The distributions requirements.txt names and, recursively, what they require (markers of this Python)."""
    from packaging.requirements import Requirement

    def key(name: str) -> str:
        return name.lower().replace("_", "-").replace(".", "-")

    todo = [Requirement(line.split("#")[0].strip()).name for line in requirements.read_text().splitlines()
            if line.split("#")[0].strip()]
    seen: set[str] = set()
    while todo:
        name = key(todo.pop())
        if name in seen:
            continue
        try:
            requires = importlib.metadata.requires(name) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        seen.add(name)
        for text in requires:
            requirement = Requirement(text)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                todo.append(requirement.name)
    return seen


def ros_free_environment(root: Path) -> Path:
    """A virtual environment whose site-packages link to this environment's copies of the required
    distributions only (the ROS 2 wheels and this suite's packages stay out); returns its Python."""
    site = Path(sysconfig.get_paths()["purelib"])
    wanted = required_distributions(REPO / "requirements.txt")
    linked = root / "site-packages"
    linked.mkdir(parents=True)
    for dist in importlib.metadata.distributions():
        if dist.metadata["Name"].lower().replace("_", "-").replace(".", "-") not in wanted:
            continue
        for top in {Path(f).parts[0] for f in dist.files or () if not str(f).startswith("..")}:
            if (site / top).exists() and not (linked / top).exists():
                (linked / top).symlink_to(site / top)
    venv.EnvBuilder(with_pip=False).create(root / "venv")
    python = root / "venv" / "bin" / "python"
    venv_site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip()
    (Path(venv_site) / "training_dependencies.pth").write_text(f"{linked}\n")
    return python


@pytest.mark.slow
def test_the_training_cli_runs_without_ros(tmp_path: Path) -> None:
    from na_sim.generate import GenerateOptions, generate

    generate(GenerateOptions(tasks=["push_px", "pick_place", "circle_cw", "go_up_stay", "circle_ccw"], episodes=2,
                             payloads=[200.0], quick=True, max_seconds=3.0, out=tmp_path / "bags"),
             progress=False, log=lambda _: None)
    python = ros_free_environment(tmp_path / "env")
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", str(tmp_path)), "LANG": "C.UTF-8",
           "PYTHONPATH": os.pathsep.join(map(str, TRAINING_SOURCES)), "XLA_FLAGS": os.environ.get("XLA_FLAGS", "")}
    result = subprocess.run([str(python), "-c", CHILD, str(tmp_path)], capture_output=True, text=True,
                            timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["prefix"] == str(tmp_path / "env" / "venv")
    assert report["installed"] == [], f"not a ROS-free environment: {report['installed']} importable"
    assert report["refused"] == [] and report["loaded"] == []
    assert report["modules"] >= 30
    assert {"convert", "fit", "export", "eval", "compare", "monitor"} <= set(report["verbs"])
    assert report["exits"] == [0, 0, 0, 0, 0]
    assert (tmp_path / "model.onnx").is_file() and (tmp_path / "run" / "run.json").is_file()
    monitor = json.loads((tmp_path / "monitor" / "monitor.json").read_text())
    assert monitor["summary"]["episodes"] == len(monitor["episodes"]) > 0
    comparison = json.loads((tmp_path / "compare" / "comparison.json").read_text())
    assert comparison, "compare wrote an empty comparison"
