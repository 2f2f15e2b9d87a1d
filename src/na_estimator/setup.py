"""Build script of the na_estimator package (ament_python)."""

from setuptools import find_packages, setup

PACKAGE = "na_estimator"

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
    description="The feature contract shared with training, the ONNX Runtime model wrapper, the estimator node and its latency benchmark.",
    license="Apache-2.0",
    entry_points={"console_scripts": [
        "estimator = na_estimator.estimator_node:main",
    ]},
)
