"""Build script of the na_bringup package (ament_python)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "na_bringup"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/launch", glob("launch/*.launch.xml")),
        (f"share/{PACKAGE}/config", glob("config/*.yaml")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="NeuralActuator maintainers",
    maintainer_email="maintainers@neuralactuator.invalid",
    description="Bring-up of the NeuralActuator rig: XML launch files, node parameter files, the na-launch "
                "runner, the live-graph helpers and the end-to-end demo (na-demo).",
    license="Apache-2.0",
    entry_points={"console_scripts": [
        "na-launch = na_bringup.launch_xml:main",
        "na-demo = na_bringup.demo:main",
    ]},
)
