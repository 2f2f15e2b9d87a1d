"""Build script of the na_common package (ament_python)."""

from setuptools import find_packages, setup

PACKAGE = "na_common"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["*.xml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="NeuralActuator maintainers",
    maintainer_email="maintainers@neuralactuator.invalid",
    description="ROS-free pieces shared by every NeuralActuator package: topic names, the episode bag format, "
                "published wire-protocol constants, named config files, and the node runner.",
    license="Apache-2.0",
    entry_points={"console_scripts": []},
)
