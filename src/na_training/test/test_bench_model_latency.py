"""bench_model_latency.py times a random-weight package on a machine without the export toolchain: its JAX
network, rebuilt from the package's metadata alone, must be the network that was exported.

The oracle is ONNX Runtime run directly on the exported file; the tolerance (1e-4 on every output, fp32 against
fp32) is this test's own."""

import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from na_description.features import NUM_FEATURES
from na_training.export import read_metadata

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_model_latency.py"
FP32_LIMIT = 1e-4


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_model_latency", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module            # its dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def package(bench, tmp_path_factory):
    rng = np.random.default_rng(3)
    stats = (rng.normal(0.0, 2.0, NUM_FEATURES), rng.uniform(0.5, 3.0, NUM_FEATURES))
    out = tmp_path_factory.mktemp("package")
    bench.export_paper_network(out, config_path="tiny", seed=17, stats=stats)
    return out / "model.onnx"


def test_the_rebuilt_network_is_the_exported_one(bench, package):
    metadata = read_metadata(package)
    model = bench.network_of_package(metadata)
    history = int(metadata["history_length"])
    rng = np.random.default_rng(4)
    mean, std = (np.asarray(json.loads(metadata[key])) for key in ("feature_mean", "feature_std"))
    windows = (mean + std * rng.standard_normal((6, history, NUM_FEATURES))).astype(np.float32)
    session = ort.InferenceSession(str(package), providers=["CPUExecutionProvider"])
    names = [output.name for output in session.get_outputs()]
    expected = dict(zip(names, session.run(names, {session.get_inputs()[0].name: windows}), strict=True))
    for forward in (bench.jax_forward, bench.jax_forward_closed_over):   # both JAX calls the speed-up is read against
        rebuilt = {key: np.asarray(value) for key, value in forward(model)(windows).items()}
        assert set(expected) <= set(rebuilt)
        for name, value in expected.items():
            assert np.max(np.abs(rebuilt[name] - value)) < FP32_LIMIT, (forward.__name__, name)


def test_another_seed_gives_another_network(bench, package):
    """The check above could fail: the metadata's seed decides the weights."""
    metadata = read_metadata(package)
    config = json.loads(metadata["training_config"])
    other = bench.network_of_package({**metadata, "training_config": json.dumps({**config, "seed": 18})})
    same = bench.network_of_package(metadata)
    windows = np.zeros((1, int(metadata["history_length"]), NUM_FEATURES), np.float32)
    force = [np.asarray(bench.jax_forward(m)(windows)["force"]) for m in (same, other)]
    assert np.max(np.abs(force[0] - force[1])) > 1e-3


def test_a_trained_package_has_no_rebuilt_network(bench, package):
    metadata = read_metadata(package)
    assert bench.network_of_package({**metadata, "dataset_id": "nad-omx-seed59"}) is None
