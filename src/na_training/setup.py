"""Build script of the na_training package (ament_python)."""

from setuptools import find_packages, setup

PACKAGE = "na_training"

setup(
    name=PACKAGE,
    version="0.1.0",
    packages=find_packages(exclude=["test"]),
    package_data={PACKAGE: ["config/*.yaml", "config/train/*.yaml"]},
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
    ],
    install_requires=["setuptools"],
    zip_safe=True,
    maintainer="NeuralActuator maintainers",
    maintainer_email="maintainers@neuralactuator.invalid",
    description="Bag to NAD conversion, the NeuralActuator model in JAX/Flax, MJX rollout training, evaluation, classical baselines and ONNX export (CLI na-train).",
    license="Apache-2.0",
    entry_points={"console_scripts": [
        "na-train = na_training.cli:main",
    ]},
)
