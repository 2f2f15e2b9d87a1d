"""Build script of the na_teleop package (ament_python)."""

from setuptools import find_packages, setup

PACKAGE = "na_teleop"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="NeuralActuator maintainers",
    maintainer_email="maintainers@neuralactuator.invalid",
    description="Leader-to-follower teleoperation node, episode recorder node, its keyboard CLI and the servo "
                "health report of recorded episodes (na-health).",
    license="Apache-2.0",
    entry_points={"console_scripts": [
        "teleop = na_teleop.executables:teleop",
        "recorder = na_teleop.executables:recorder",
        "na-record = na_teleop.record_cli:main",
        "na-health = na_teleop.health_cli:main",
    ]},
)
