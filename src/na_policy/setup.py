"""Build script of the na_policy package (ament_python)."""

from setuptools import find_packages, setup

PACKAGE = "na_policy"

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
    description="Behaviour-cloning policies for the press_hold task, with and without the estimator's force: "
                "demonstrations, training (JAX/Flax), the policy node and the live evaluation (CLI na-policy).",
    license="Apache-2.0",
    entry_points={"console_scripts": [
        "policy = na_policy.policy_node:main",
        "na-policy = na_policy.cli:main",
    ]},
)
