"""The demo trains each robot for the steps of its own demo training config, unless --train-steps is given."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from na_bringup.demo import Demo, build_parser
from na_training import TRAIN_CONFIG_DIR


def steps_passed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> tuple[str, int]:
    args = build_parser().parse_args(["--out", str(tmp_path / "demo"), *argv])
    demo = Demo(args)
    commands: list[list[str]] = []
    monkeypatch.setattr(Demo, "run", lambda self, name, command, metrics=None: commands.append(command))
    demo.train(tmp_path / "nad")
    (command,) = commands
    return command[command.index("--config") + 1], int(command[command.index("--steps") + 1])


@pytest.mark.parametrize("robot", ["omx_x", "so101"])
def test_the_default_is_the_robot_configs_steps(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, robot: str) -> None:
    config, steps = steps_passed(tmp_path, monkeypatch, ["--robot", robot])
    shipped = yaml.safe_load((TRAIN_CONFIG_DIR / f"{config}.yaml").read_text())
    assert steps == shipped["steps"] > 0
    assert config == ("demo_so101" if robot == "so101" else "demo")


def test_train_steps_overrides_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert steps_passed(tmp_path, monkeypatch, ["--robot", "so101", "--train-steps", "37"]) == ("demo_so101", 37)
