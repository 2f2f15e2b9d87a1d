"""The NeuralActuator model: paper-sized parameter count, output contract, normalisation inside."""

import numpy as np
import pytest
from flax import nnx

from na_description.features import NORMALISED_CLIP, NUM_FEATURES
from na_training.model import ModelConfig, build_model, jit_forward, parameter_count

PAPER_PARAMETERS = 1.44e6   # paper Table XII; docs/REFERENCES.md, Paper
TINY = ModelConfig(d_model=16, num_heads=2, d_ff=32, num_blocks=1, head_hidden=16)


def test_paper_config_parameter_count_is_within_5_percent_of_paper():
    count = parameter_count(nnx.eval_shape(lambda: build_model(ModelConfig())))   # shapes only, no init
    print(f"paper config: {count:,} parameters")
    assert abs(count - PAPER_PARAMETERS) / PAPER_PARAMETERS < 0.05
    assert ModelConfig().num_features == NUM_FEATURES == 36


def test_tiny_forward_shapes_and_ranges():
    model = build_model(TINY, seed=1)
    out = jit_forward(model)(np.random.default_rng(0).normal(size=(3, 9, NUM_FEATURES)))
    assert out["torque_surrogate"].shape == (3, 5)
    assert out["force_raw"].shape == (3, 3) and out["force"].shape == (3, 3)
    assert out["contact_prob"].shape == (3, 1) and out["condition"].shape == (3, 5)
    prob = np.asarray(out["contact_prob"])
    assert np.all((prob > 0) & (prob < 1))
    np.testing.assert_allclose(out["force"], prob * np.asarray(out["force_raw"]), rtol=1e-6)
    assert np.all((np.asarray(out["condition"]) > 0) & (np.asarray(out["condition"]) < 1))


def test_jitted_forward_equals_the_eager_model():
    """The jitted call (weights passed as a flat list of arrays) computes what the NNX module itself computes."""
    model = build_model(TINY, seed=6)
    x = np.random.default_rng(7).normal(size=(2, 9, NUM_FEATURES)).astype(np.float32)
    eager = model(x)
    jitted = jit_forward(model)(x)
    assert set(jitted) == set(eager)
    for name in eager:
        np.testing.assert_allclose(np.asarray(jitted[name]), np.asarray(eager[name]), rtol=1e-5, atol=1e-6)


def test_normalisation_is_part_of_the_model():
    rng = np.random.default_rng(2)
    mean, std = rng.normal(size=NUM_FEATURES) * 100, rng.uniform(1, 50, NUM_FEATURES)
    raw = mean + std * rng.normal(size=(2, 9, NUM_FEATURES))
    model = build_model(TINY, seed=3)
    unit = jit_forward(model)((raw - mean) / std)["torque_surrogate"]
    model.set_feature_stats(mean, std)
    forward = jit_forward(model)
    scaled = forward(raw)["torque_surrogate"]
    np.testing.assert_allclose(scaled, unit, atol=1e-4)
    # Beyond +-10 sigma the input is clipped: a huge outlier gives the same output as 10 sigma.
    far, edge = raw.copy(), raw.copy()
    far[:, :, 0] = mean[0] + 1e6 * std[0]
    edge[:, :, 0] = mean[0] + NORMALISED_CLIP * std[0]
    np.testing.assert_allclose(forward(far)["force"], forward(edge)["force"], atol=1e-6)


def test_history_tokens_matter_and_heads_must_divide():
    model = build_model(TINY, seed=4)
    x = np.random.default_rng(5).normal(size=(1, 9, NUM_FEATURES))
    y = x.copy()
    y[0, 0] += 1.0                          # change only the oldest token
    forward = jit_forward(model)
    assert not np.allclose(forward(x)["torque_surrogate"], forward(y)["torque_surrogate"])
    with pytest.raises(ValueError, match="divisible"):
        build_model(ModelConfig(d_model=18, num_heads=4))


def test_parameters_are_float32_even_with_x64_enabled():
    import jax

    previous = jax.config.jax_enable_x64
    jax.config.update("jax_enable_x64", True)
    try:
        model = build_model(TINY, seed=6)
        dtypes = {str(p.dtype) for p in jax.tree.leaves(nnx.state(model))}
    finally:
        jax.config.update("jax_enable_x64", previous)
    assert dtypes == {"float32"}
