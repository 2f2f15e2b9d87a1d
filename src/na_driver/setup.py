"""Build script of the na_driver package (ament_python)."""

from setuptools import find_packages, setup

PACKAGE = "na_driver"

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
    description="DYNAMIXEL arm driver node and F/T sensor driver node (ATI Net F/T RDT over UDP, serial line sensor).",
    license="Apache-2.0",
    entry_points={
        "console_scripts": [
            "arm_driver = na_driver.arm_driver_node:main",
            "ft_driver = na_driver.ft_driver_node:main",
        ],
    },
)
