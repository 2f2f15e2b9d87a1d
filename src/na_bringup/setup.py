"""Build script of the na_bringup package (ament_python).

The launch files and node parameter files live at the repository's top level (``launch/``,
``config/``); ``src/na_bringup/launch`` and ``src/na_bringup/config`` are relative symlinks to them,
so they install to ``share/na_bringup/{launch,config}`` as package files, whatever the build or
install folder.
"""

from pathlib import Path

from setuptools import find_packages, setup

PACKAGE = "na_bringup"
# The package folder, also when colcon --symlink-install runs this file through its link in the build folder.
HERE = Path(__file__).resolve().parent


def linked_files(folder: str, pattern: str) -> list[str]:
    """``folder/NAME`` for each file of the package's link ``folder`` matching ``pattern``.

    Listed in the package folder, not the working directory: colcon --symlink-install runs setup.py in
    the build folder, whose links to a file that was since removed would otherwise still be listed.
    """
    names = sorted(path.name for path in (HERE / folder).glob(pattern))
    if not names:
        raise SystemExit(f"{PACKAGE}: no {folder}/{pattern}; the package's {folder}/ links to the repository's "
                         "top-level folder, so the package builds only inside its repository")
    return [f"{folder}/{name}" for name in names]


setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", linked_files("launch", "*.launch.xml")),
        (f"share/{PACKAGE}/config", linked_files("config", "*.yaml")),
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
        "na-launch = na_bringup.launch_run:main",
        "na-demo = na_bringup.demo:main",
    ]},
)
