"""Training needs no ROS: the whole ``na-train`` CLI runs in a Python where rclpy and every ROS message package
are missing, and where no node package of this suite can be imported either.

The child process installs an import hook that refuses those modules before anything else is imported, then
imports every ``na_training`` module, asks every verb for its ``--help`` and runs a tiny
``convert -> fit -> export -> compare`` on bags that this test generated beforehand (outside the hook, with the
simulated rig).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
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

    sys.meta_path.insert(0, RefuseRos())
    try:                                             # the hook works (rclpy is installed in this environment)
        import rclpy  # noqa: F401
        hook_works = False
    except ModuleNotFoundError:
        hook_works = True

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
    print(json.dumps({"hook_works": hook_works, "modules": len(modules), "verbs": verbs, "exits": codes,
                      "refused": sorted(set(refused)),
                      "loaded": sorted(m for m in sys.modules if m.split(".")[0] in ("rclpy",) + NODE_PACKAGES)}))
''')


@pytest.mark.slow
def test_the_training_cli_runs_without_ros(tmp_path: Path) -> None:
    from na_sim.generate import GenerateOptions, generate

    generate(GenerateOptions(tasks=["push_px", "pick_place", "circle_cw", "go_up_stay", "circle_ccw"], episodes=2,
                             payloads=[200.0], quick=True, max_seconds=3.0, out=tmp_path / "bags"),
             progress=False, log=lambda _: None)
    result = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["hook_works"] and "rclpy" in report["refused"]
    assert report["loaded"] == []
    assert report["modules"] >= 30
    assert {"convert", "fit", "export", "eval", "compare", "monitor"} <= set(report["verbs"])
    assert report["exits"] == [0, 0, 0, 0, 0]
    assert (tmp_path / "model.onnx").is_file() and (tmp_path / "run" / "run.json").is_file()
    monitor = json.loads((tmp_path / "monitor" / "monitor.json").read_text())
    assert monitor["summary"]["episodes"] == len(monitor["episodes"]) > 0
    comparison = json.loads((tmp_path / "compare" / "comparison.json").read_text())
    assert comparison, "compare wrote an empty comparison"
