"""The exported model's contract (docs/ARCHITECTURE.md "Model contract"): tensor names, metadata keys and
the check that a model fits the estimator's feature code and the arm.

Pure Python/numpy: the exporter (na_training.export) writes what this module reads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from na_description import RobotSpec
from na_description.features import SCHEMA_VERSION, feature_names

INPUT_NAME = "features"
OUTPUT_NAMES = ("torque_surrogate", "force_raw", "contact_prob", "force", "condition")
METADATA_KEYS = ("schema_version", "feature_names", "feature_units", "feature_mean", "feature_std", "history_length",
                 "joint_names", "effort_bounds", "training_config", "dataset_id", "robot", "parameter_count",
                 "checkpoint_step", "outputs")
# Written by the exporter's variant choice (optional for the estimator): which inference variant this file is
# (fp32, int8-dynamic, int8-static, int8-mixed), every candidate's check against JAX and timing on the exporting
# machine, the graph passes applied, and (the package's main file only) the other accepted variants' files
# (na_description.model_package).
VARIANT_KEYS = ("inference_variant", "variant_checks", "graph_passes", "variant_files")
REQUIRED_KEYS = ("schema_version", "feature_names", "feature_mean", "history_length", "joint_names",
                 "effort_bounds")


class ContractError(ValueError):
    """A model whose metadata does not meet the estimator's contract; the message says what differs."""


@dataclass(frozen=True)
class ModelContract:
    schema_version: str
    feature_names: list[str]
    history_length: int
    joint_names: list[str]
    effort_bounds: np.ndarray
    feature_mean: np.ndarray       # the pad frame for the start of the history window
    dataset_id: str


def _json(metadata: Mapping[str, str], key: str):
    try:
        return json.loads(metadata[key])
    except (json.JSONDecodeError, TypeError) as exc:
        raise ContractError(f"model metadata '{key}' is not valid JSON: {exc}") from exc


def _list_difference(what: str, expected: list[str], got: list[str]) -> str:
    missing = [n for n in expected if n not in got]
    extra = [n for n in got if n not in expected]
    if missing or extra:
        return f"{what} differ: model lacks {missing}, model has extra {extra}"
    first = next(i for i, (a, b) in enumerate(zip(expected, got, strict=True)) if a != b)
    return f"{what} are in a different order: position {first} is '{got[first]}' in the model, '{expected[first]}' here"


def check_contract(metadata: Mapping[str, str], spec: RobotSpec) -> ModelContract:
    """Parse the model's metadata and refuse it unless it matches this feature code and this arm."""
    missing = [key for key in REQUIRED_KEYS if key not in metadata]
    if missing:
        raise ContractError(f"model metadata lacks {missing}; was it exported by na-train export?")
    robot = str(metadata.get("robot", ""))
    if robot and robot != spec.name:       # models exported before the robot key carry no name
        raise ContractError(f"model was trained for robot '{robot}', this arm is '{spec.name}' "
                            f"(choose the arm's model, or the robot it was trained for)")
    problems: list[str] = []
    if metadata["schema_version"] != SCHEMA_VERSION:
        problems.append(f"feature schema is '{metadata['schema_version']}' in the model, '{SCHEMA_VERSION}' here")
    names = list(_json(metadata, "feature_names"))
    expected_names = feature_names(spec)
    if names != expected_names:
        problems.append(_list_difference("feature names", expected_names, names))
    joints = list(_json(metadata, "joint_names"))
    if joints != spec.joint_names:
        problems.append(f"joint names are {joints} in the model, {spec.joint_names} on this arm")
    bounds = np.asarray(_json(metadata, "effort_bounds"), dtype=float).reshape(-1)
    mean = np.asarray(_json(metadata, "feature_mean"), dtype=float).reshape(-1)
    if mean.shape[0] != len(names):
        problems.append(f"feature_mean has {mean.shape[0]} values for {len(names)} features")
    if bounds.shape[0] != len(joints):
        problems.append(f"effort_bounds has {bounds.shape[0]} values for {len(joints)} joints")
    try:
        history = int(metadata["history_length"])
    except ValueError:
        problems.append(f"history_length '{metadata['history_length']}' is not an integer")
        history = 0
    if history < 1:
        problems.append("history_length must be at least 1")
    if "outputs" in metadata and list(_json(metadata, "outputs")) != list(OUTPUT_NAMES):
        problems.append(f"outputs are {_json(metadata, 'outputs')}, expected {list(OUTPUT_NAMES)}")
    if problems:
        raise ContractError("model does not match this estimator: " + "; ".join(problems))
    return ModelContract(SCHEMA_VERSION, names, history, joints, bounds, mean, metadata.get("dataset_id", ""))
