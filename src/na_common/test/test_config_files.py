"""Named config files: a path is taken as given, a bare name is looked up among the shipped files."""

from __future__ import annotations

import pytest

from na_common.config_files import ConfigFileError, resolve_config, shipped_names


@pytest.fixture
def shipped(tmp_path):
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / "cpu.yaml").write_text("a: 1\n")
    (folder / "paper.yaml").write_text("a: 2\n")
    return folder


def test_a_name_resolves_to_the_shipped_file_with_or_without_suffix(shipped, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resolve_config("cpu", shipped) == shipped / "cpu.yaml"
    assert resolve_config("paper.yaml", shipped) == shipped / "paper.yaml"
    assert shipped_names(shipped) == ["cpu", "paper"]


def test_an_existing_path_wins_over_a_shipped_name(shipped, tmp_path, monkeypatch):
    own = tmp_path / "cpu.yaml"
    own.write_text("a: 3\n")
    monkeypatch.chdir(tmp_path)
    assert resolve_config("cpu.yaml", shipped) == own.relative_to(tmp_path)
    assert resolve_config(own, shipped) == own


def test_unknown_names_and_missing_paths_say_what_exists(shipped, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigFileError, match=r"training config 'cpuu' not found.*shipped: cpu, paper"):
        resolve_config("cpuu", shipped, "training config")
    with pytest.raises(ConfigFileError, match="no such file"):
        resolve_config(tmp_path / "nowhere" / "x.yaml", shipped)
