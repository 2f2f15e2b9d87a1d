"""Where the installed launch and parameter files are: ``share/na_bringup/{launch,config}``, installed from
the repository's top-level ``launch/`` and ``config/``."""

from __future__ import annotations

from pathlib import Path

from na_common.ament import package_share

PACKAGE = "na_bringup"


def share_dir() -> Path:
    """``share/na_bringup`` of the sourced workspace (the same lookup as ``get_package_share_directory``)."""
    share = package_share(PACKAGE)
    if share is None:
        raise FileNotFoundError(f"package {PACKAGE} is not installed on AMENT_PREFIX_PATH "
                                "(source .venv/na_env.sh, or install/setup.bash of the workspace)")
    return share


def launch_file(name: str) -> Path:
    """An installed launch file by name, e.g. ``collect.launch.xml``."""
    return share_dir() / "launch" / name


def config_file(name: str) -> Path:
    """An installed parameter file by name, e.g. ``follower_arm.yaml``."""
    return share_dir() / "config" / name
