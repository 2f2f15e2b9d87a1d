"""ONNX export: contract names and shapes, metadata, ONNX Runtime == JAX within 1e-4, int8 variant."""

import json

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from na_description import load_spec
from na_estimator.features import FEATURE_NAMES, SCHEMA_VERSION, FeatureStats
from na_training.config import config_from_dict
from na_training.export import (
    FP32_TOLERANCE,
    INPUT_NAME,
    OUTPUT_NAMES,
    ExportError,
    export_model,
    jax_outputs,
    onnx_outputs,
    read_metadata,
)
from na_training.model import build_model, parameter_count
from na_training.train import describe_run


@pytest.fixture(scope="module")
def exported(tmp_path_factory, synthetic_episodes):
    config = config_from_dict({"model": {"d_model": 16, "num_heads": 2, "d_ff": 32, "num_blocks": 1,
                                         "head_hidden": 16}, "dataset_id": "nad-test"})
    frames = np.concatenate([ep.features for ep in synthetic_episodes])
    stats = FeatureStats.fit(frames)
    model = build_model(config.model, seed=7)
    model.set_feature_stats(stats.mean, stats.std)
    description = describe_run(config, stats, load_spec(), parameter_count(model), step=12)
    from na_estimator.features import history_windows

    real = history_windows(synthetic_episodes[0].features, stats.mean)[::10]
    labels = synthetic_episodes[0].force[::10]
    out = tmp_path_factory.mktemp("export") / "model.onnx"
    report = export_model(model, description, out, real, force_labels=labels, int8=True)
    return model, description, report, real


def test_graph_meets_the_model_contract(exported):
    _, _, report, _ = exported
    session = ort.InferenceSession(str(report.path), providers=["CPUExecutionProvider"])
    (feature_input,) = session.get_inputs()
    assert feature_input.name == INPUT_NAME
    assert feature_input.shape[1:] == [9, 36] and not isinstance(feature_input.shape[0], int)
    assert [o.name for o in session.get_outputs()] == list(OUTPUT_NAMES)
    outputs = session.run(None, {INPUT_NAME: np.zeros((4, 9, 36), np.float32)})
    assert [o.shape for o in outputs] == [(4, 5), (4, 3), (4, 1), (4, 3), (4, 5)]
    onnx.checker.check_model(onnx.load(str(report.path)))


def test_metadata_holds_the_contract(exported):
    _, description, report, _ = exported
    meta = read_metadata(report.path)
    assert meta["schema_version"] == SCHEMA_VERSION
    assert json.loads(meta["feature_names"]) == FEATURE_NAMES
    assert int(meta["history_length"]) == 9
    assert json.loads(meta["joint_names"]) == load_spec().joint_names
    assert json.loads(meta["effort_bounds"]) == [5.0, 5.0, 5.0, 5.0, 1.5]
    assert meta["dataset_id"] == "nad-test"
    assert json.loads(meta["training_config"])["model"]["d_model"] == 16
    np.testing.assert_allclose(json.loads(meta["feature_mean"]), description["feature_stats"]["mean"])


def test_onnx_runtime_matches_jax_on_random_and_real_windows(exported):
    model, _, report, real = exported
    assert max(report.max_abs_diff.values()) <= FP32_TOLERANCE
    rng = np.random.default_rng(11)
    random_windows = np.asarray(model.feature_mean[...]) + 3 * rng.standard_normal((32, 9, 36))
    for windows in (random_windows, real):
        ours, theirs = jax_outputs(model, windows), onnx_outputs(report.path, windows)
        for name in OUTPUT_NAMES:
            assert np.max(np.abs(ours[name] - theirs[name])) <= FP32_TOLERANCE, name


def test_int8_variant_runs_and_reports_its_force_error(exported):
    _, _, report, real = exported
    assert report.int8_path is not None and report.int8_path.is_file()
    assert np.isfinite(report.int8_force_mae_increase)
    assert read_metadata(report.int8_path)["schema_version"] == SCHEMA_VERSION
    assert onnx_outputs(report.int8_path, real)["force"].shape == (len(real), 3)
    assert any("int8" in line for line in report.lines())


def test_wrong_feature_schema_is_refused(exported, tmp_path):
    model, description, _, _ = exported
    with pytest.raises(ExportError, match="schema"):
        export_model(model, dict(description, schema_version="na-features/0"), tmp_path / "x.onnx")
    assert not (tmp_path / "x.onnx").exists()
