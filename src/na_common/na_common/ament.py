"""Finding installed packages through the ament index, without ROS Python packages.

A package ``P`` is installed under prefix ``X`` when ``X/share/ament_index/resource_index/packages/P``
exists; ``AMENT_PREFIX_PATH`` lists the prefixes (what ``ament_index_python`` reads too). This
module lets ROS-free code (training, the simulator, bag I/O) find share files and executables.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def prefixes() -> list[Path]:
    return [Path(p) for p in os.environ.get("AMENT_PREFIX_PATH", "").split(os.pathsep) if p]


def package_prefix(package: str, search: Iterable[str | Path] | None = None) -> Path | None:
    """Install prefix of ``package`` (first match on ``search`` or AMENT_PREFIX_PATH), or None."""
    for prefix in (prefixes() if search is None else [Path(p) for p in search]):
        if (prefix / "share" / "ament_index" / "resource_index" / "packages" / package).is_file():
            return prefix
    return None


def package_share(package: str) -> Path | None:
    """``<prefix>/share/<package>`` of an installed package, or None."""
    prefix = package_prefix(package)
    return None if prefix is None else prefix / "share" / package


def find_executable(package: str, executable: str) -> Path | None:
    """``<prefix>/lib/<package>/<executable>`` if it exists and is executable, else None."""
    prefix = package_prefix(package)
    if prefix is None:
        return None
    path = prefix / "lib" / package / executable
    return path if path.is_file() and os.access(path, os.X_OK) else None
