"""Build script of the na_bringup package (ament_python).

The launch files and node parameter files live at the repository's top level (``launch/``,
``config/``) and are installed from there to ``share/na_bringup/{launch,config}``. setuptools wants
data files relative to the working directory, and colcon runs this script both in the package
folder and (``--symlink-install``) in its build folder, so the paths are taken from this file's
real location and made relative to wherever it runs.
"""

import os
from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "na_bringup"
REPOSITORY = Path(__file__).resolve().parents[2]     # src/na_bringup/setup.py -> the repository


def top_level(folder: str, pattern: str) -> list[str]:
    """The files of a top-level folder matching ``pattern``, relative to the working directory."""
    files = sorted((REPOSITORY / folder).glob(pattern))
    if not files:
        raise SystemExit(f"{PACKAGE}: no {folder}/{pattern} in {REPOSITORY} (the package builds inside its "
                         "repository: src/na_bringup beside the top-level launch/ and config/)")
    return [os.path.relpath(path) for path in files]


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", top_level("launch", "*.launch.xml")),
        (f"share/{PACKAGE}/config", top_level("config", "*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="NeuralActuator maintainers",
    maintainer_email="maintainers@neuralactuator.invalid",
    description="Bring-up of the NeuralActuator rig: XML launch files and node parameter files (from the "
                "repository's launch/ and config/), the na-launch runner, the live-graph helpers and the "
                "end-to-end demo (na-demo).",
    license="Apache-2.0",
    entry_points={"console_scripts": [
        "na-launch = na_bringup.launch_xml:main",
        "na-demo = na_bringup.demo:main",
    ]},
)
