"""Fixtures for the estimator tests: a small hand-built ONNX model that meets the model contract."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from na_description import load_spec
from na_description.features import HISTORY_LENGTH, SCHEMA_VERSION, feature_names


def build_contract_model(path: Path, *, seed: int = 0, metadata_overrides: dict[str, str] | None = None,
                         history: int = HISTORY_LENGTH, robot: str | None = None) -> Path:
    """A real ONNX graph with the contract's names and metadata: normalise, average the window,
    linear heads, sigmoid gate, gated force. Weights are random but fixed by ``seed``. ``robot``: the
    arm it is made for (default the OpenManipulator-X)."""
    spec = load_spec(robot)
    names = feature_names(spec)
    n_features, n_motors = len(names), spec.n_motors
    rng = np.random.default_rng(seed)
    mean = rng.normal(0.0, 1.0, n_features).astype(np.float32)
    std = rng.uniform(0.5, 2.0, n_features).astype(np.float32)
    weights = {
        "w_torque": rng.normal(0, 0.2, (n_features, n_motors)),
        "w_force": rng.normal(0, 0.5, (n_features, 3)),
        "w_gate": rng.normal(0, 0.5, (n_features, 1)),
        "w_condition": rng.normal(0, 0.5, (n_features, n_motors)),
    }
    initializers = [numpy_helper.from_array(mean, "mean"), numpy_helper.from_array(std, "std")]
    initializers += [numpy_helper.from_array(w.astype(np.float32), k) for k, w in weights.items()]
    nodes = [
        helper.make_node("Sub", ["features", "mean"], ["centred"]),
        helper.make_node("Div", ["centred", "std"], ["normalised"]),
        helper.make_node("ReduceMean", ["normalised"], ["pooled"], axes=[1], keepdims=0),
        helper.make_node("MatMul", ["pooled", "w_torque"], ["torque_surrogate"]),
        helper.make_node("MatMul", ["pooled", "w_force"], ["force_raw"]),
        helper.make_node("MatMul", ["pooled", "w_gate"], ["gate_logit"]),
        helper.make_node("Sigmoid", ["gate_logit"], ["contact_prob"]),
        helper.make_node("Mul", ["contact_prob", "force_raw"], ["force"]),
        helper.make_node("MatMul", ["pooled", "w_condition"], ["condition_logit"]),
        helper.make_node("Sigmoid", ["condition_logit"], ["condition"]),
    ]
    graph = helper.make_graph(
        nodes, "contract_test_model",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", history, n_features])],
        [helper.make_tensor_value_info("torque_surrogate", TensorProto.FLOAT, ["batch", n_motors]),
         helper.make_tensor_value_info("force_raw", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("contact_prob", TensorProto.FLOAT, ["batch", 1]),
         helper.make_tensor_value_info("force", TensorProto.FLOAT, ["batch", 3]),
         helper.make_tensor_value_info("condition", TensorProto.FLOAT, ["batch", n_motors])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    metadata = {
        "schema_version": SCHEMA_VERSION,
        "feature_names": json.dumps(names),
        "feature_mean": json.dumps(mean.tolist()),
        "feature_std": json.dumps(std.tolist()),
        "history_length": str(history),
        "joint_names": json.dumps(spec.joint_names),
        "effort_bounds": json.dumps(spec.effort_bounds.tolist()),
        "dataset_id": "test",
        "robot": spec.name,
        "outputs": json.dumps(["torque_surrogate", "force_raw", "contact_prob", "force", "condition"]),
    }
    metadata.update(metadata_overrides or {})
    for key, value in metadata.items():
        model.metadata_props.add(key=key, value=value)
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


@pytest.fixture
def contract_model(tmp_path: Path) -> Path:
    return build_contract_model(tmp_path / "model.onnx")


@pytest.fixture
def model_builder(tmp_path: Path):
    """Build variants: ``model_builder(name, **kwargs)``."""
    return lambda name, **kwargs: build_contract_model(tmp_path / name, **kwargs)


def build_package(directory: Path, variants: tuple[str, ...] = ("fp32", "int8-dynamic", "int8-static"),
                  checks: list[dict] | None = None) -> Path:
    """A model package as ``na-train export`` writes it: ``model.onnx`` is ``variants[0]``, the others sit beside
    it and are named with their sha256 in its ``variant_files`` (here all are fp32 graphs with other seeds).
    ``checks``: the main file's ``variant_checks`` records (none by default)."""
    from na_description.model_package import file_sha256, sibling_name

    main = directory / "model.onnx"
    listed = {}
    for seed, name in enumerate(variants[1:], start=1):
        path = build_contract_model(directory / sibling_name(main, name), seed=seed,
                                    metadata_overrides={"inference_variant": name, "variant_files": "{}"})
        listed[name] = {"file": path.name, "sha256": file_sha256(path)}
    overrides = {"inference_variant": variants[0], "variant_files": json.dumps(listed)}
    if checks is not None:
        overrides["variant_checks"] = json.dumps(checks)
    return build_contract_model(main, metadata_overrides=overrides)


@pytest.fixture
def model_package(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A three-variant package; the user cache directory of the variant choice is private to the test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return build_package(tmp_path)


@pytest.fixture
def package_builder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``package_builder(variants=..., checks=...)``: a package as ``build_package`` makes it, in this test's
    directory; the user cache directory of the variant choice is private to the test."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return lambda **kwargs: build_package(tmp_path, **kwargs)
