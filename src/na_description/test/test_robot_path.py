"""An arm added as files: ``$NA_ROBOT_PATH`` folders are searched for ``<name>.yaml`` after the shipped robots."""

from __future__ import annotations

from pathlib import Path

import pytest

from na_description import SpecError, load_spec
from na_description.features import feature_names, feature_units
from na_description.spec import known_robots

SHIPPED = Path(__file__).resolve().parents[1] / "na_description" / "robots"


def _copy_arm(folder: Path, name: str) -> Path:
    """The OpenManipulator-X spec and MJCF under another robot name, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    text = (SHIPPED / "open_manipulator_x.yaml").read_text().replace("name: open_manipulator_x", f"name: {name}")
    (folder / f"{name}.yaml").write_text(text)
    (folder / "open_manipulator_x.xml").write_text((SHIPPED / "open_manipulator_x.xml").read_text())
    (folder / f"tasks_{name}.yaml").write_text(f"robot: {name}\n")    # a companion file, not a robot
    return folder


@pytest.fixture(autouse=True)
def _fresh_spec_cache():
    load_spec.cache_clear()
    yield
    load_spec.cache_clear()


def test_a_robot_on_the_search_path_loads_by_name(tmp_path, monkeypatch) -> None:
    first, second = _copy_arm(tmp_path / "a", "arm_a"), _copy_arm(tmp_path / "b", "arm_b")
    monkeypatch.setenv("NA_ROBOT_PATH", f"{first}:{second}")
    spec = load_spec("arm_b")
    assert spec.name == "arm_b" and spec.source == (second / "arm_b.yaml").resolve()
    assert spec.mjcf_path == (second / "open_manipulator_x.xml").resolve()
    assert {"arm_a", "arm_b", "open_manipulator_x", "so101"} <= set(known_robots())
    assert not any(name.startswith("tasks_") for name in known_robots())


def test_a_shipped_robot_wins_over_a_file_of_the_same_name_on_the_path(tmp_path, monkeypatch) -> None:
    folder = tmp_path / "shadow"
    folder.mkdir()
    (folder / "so101.yaml").write_text("name: not_so101\n")
    monkeypatch.setenv("NA_ROBOT_PATH", str(folder))
    assert load_spec("so101").name == "so101"


def test_an_unknown_robot_names_the_search_path(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("NA_ROBOT_PATH", str(tmp_path))
    with pytest.raises(SpecError, match=r"unknown robot 'nowhere_arm'.*NA_ROBOT_PATH"):
        load_spec("nowhere_arm")
    with pytest.raises(SpecError, match="unknown robot"):
        load_spec("tasks_nowhere_arm")


def test_feature_units_follow_the_effort_signal() -> None:
    omx, so101 = feature_units(load_spec("open_manipulator_x")), feature_units(load_spec("so101"))
    assert len(omx) == len(feature_names(load_spec("open_manipulator_x")))
    assert len(so101) == len(feature_names(load_spec("so101")))
    # the OpenManipulator-X reads Present Current (mA features), the SO-101 Present Load (percent of maximum)
    assert "mA" in omx and "%" not in omx
    assert "%" in so101 and "mA" not in so101
    assert omx.count("mA") == 5 and so101.count("%") == 6        # one effort feature per servo
