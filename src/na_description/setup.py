"""Build script of the na_description package (ament_python)."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "na_description"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["robots/*.xml", "robots/*.yaml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/robots", glob("na_description/robots/*")),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="NeuralActuator maintainers",
    maintainer_email="maintainers@neuralactuator.invalid",
    description="MJCF model, robot spec and kinematics of the OpenManipulator-X arms, and the DYNAMIXEL XM430-W350 control table and units shared by the emulator and the driver.",
    license="Apache-2.0",
    entry_points={"console_scripts": []},
)
