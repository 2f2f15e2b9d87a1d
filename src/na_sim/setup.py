"""Build script of the na_sim package (ament_python)."""

from setuptools import find_packages, setup

PACKAGE = "na_sim"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["config/*.yaml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="NeuralActuator maintainers",
    maintainer_email="maintainers@neuralactuator.invalid",
    description="Simulated rig: servo physics, DYNAMIXEL Protocol 2.0 and F/T sensor emulators, scripted operator tasks, fault injection and the offline episode generator.",
    license="Apache-2.0",
    entry_points={"console_scripts": ["na-sim = na_sim.cli:main"]},
)
