"""The NeuralActuator Transformer in Flax NNX (paper Sec. III-D).

Input: raw SI feature windows ``[B, L, F]`` (the contract of ``na_description.features``); the
z-score normalisation (training statistics, clip +-10) is part of the model state and applied
inside, so exported graphs take raw features. Encoder: input projection + learned positions,
pre-norm blocks with query-dependent gated attention (Eq. 5-8) and a GELU feed-forward, final
LayerNorm, temporal mean pooling. Heads (SiLU hidden layers): torque surrogate, a force-specific
hidden feature with two linear readouts (raw force, contact-gate logit), per-motor condition.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from na_description.features import HISTORY_LENGTH, NORMALISED_CLIP, NUM_FEATURES


@dataclass(frozen=True)
class ModelConfig:
    """Architecture sizes. Defaults are the paper's (d=192, 4 heads, ff=384, 4 blocks, 9 tokens).

    ``head_hidden`` is not given by the paper; 160 puts the 36-feature model at 1.440 M parameters,
    the paper's 1.44 M (Table XII)."""

    num_features: int = NUM_FEATURES
    history_length: int = HISTORY_LENGTH
    n_motors: int = 5
    d_model: int = 192
    num_heads: int = 4
    d_ff: int = 384
    num_blocks: int = 4
    head_hidden: int = 160
    # Not in the paper (one shared trunk): a second encoder of the same size for the torque surrogate, so
    # that rollout gradients and the direct force/gate/condition losses do not compete for one trunk.
    separate_torque_trunk: bool = False

    def to_dict(self) -> dict:
        return asdict(self)


class FeatureNorm(nnx.Variable):
    """Normalisation statistics: model state, saved and exported with it, never trained."""


class GatedSelfAttention(nnx.Module):
    """Multi-head self-attention whose concatenated head outputs are gated elementwise by
    sigmoid(U Wg), Wg produced in the same projection as the queries (paper Eq. 6)."""

    def __init__(self, d_model: int, num_heads: int, *, rngs: nnx.Rngs) -> None:
        if d_model % num_heads:
            raise ValueError(f"d_model {d_model} is not divisible by num_heads {num_heads}")
        self.num_heads = num_heads
        self.query_gate = nnx.Linear(d_model, 2 * d_model, rngs=rngs)
        self.key = nnx.Linear(d_model, d_model, rngs=rngs)
        self.value = nnx.Linear(d_model, d_model, rngs=rngs)
        self.out = nnx.Linear(d_model, d_model, rngs=rngs)

    def __call__(self, u: jax.Array) -> jax.Array:
        batch, length, d_model = u.shape
        head_dim = d_model // self.num_heads
        query, gate = jnp.split(self.query_gate(u), 2, axis=-1)

        def heads(x: jax.Array) -> jax.Array:
            return x.reshape(batch, length, self.num_heads, head_dim).transpose(0, 2, 1, 3)

        scores = heads(query) @ heads(self.key(u)).transpose(0, 1, 3, 2) / np.sqrt(head_dim)
        attended = jax.nn.softmax(scores, axis=-1) @ heads(self.value(u))
        concatenated = attended.transpose(0, 2, 1, 3).reshape(batch, length, d_model)
        return self.out(concatenated * jax.nn.sigmoid(gate))


class EncoderBlock(nnx.Module):
    """Pre-norm residual block: gated attention, then a GELU feed-forward (paper Eq. 5-8)."""

    def __init__(self, d_model: int, num_heads: int, d_ff: int, *, rngs: nnx.Rngs) -> None:
        self.attention_norm = nnx.LayerNorm(d_model, rngs=rngs)
        self.attention = GatedSelfAttention(d_model, num_heads, rngs=rngs)
        self.ff_norm = nnx.LayerNorm(d_model, rngs=rngs)
        self.ff_in = nnx.Linear(d_model, d_ff, rngs=rngs)
        self.ff_out = nnx.Linear(d_ff, d_model, rngs=rngs)

    def __call__(self, h: jax.Array) -> jax.Array:
        z = h + self.attention(self.attention_norm(h))
        # Exact (erf) GELU: the ONNX export writes the same formula.
        return z + self.ff_out(jax.nn.gelu(self.ff_in(self.ff_norm(z)), approximate=False))


class MLPHead(nnx.Module):
    """One SiLU hidden layer and a linear readout."""

    def __init__(self, d_in: int, hidden: int, d_out: int, *, rngs: nnx.Rngs) -> None:
        self.hidden = nnx.Linear(d_in, hidden, rngs=rngs)
        self.readout = nnx.Linear(hidden, d_out, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.readout(jax.nn.silu(self.hidden(x)))


class Encoder(nnx.Module):
    """Input projection + learned positions, pre-norm blocks, final LayerNorm, temporal mean pooling."""

    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs) -> None:
        d = config.d_model
        self.input_projection = nnx.Linear(config.num_features, d, rngs=rngs)
        # Explicit float32: the trainer turns x64 on for the simulator, the network stays float32.
        self.positions = nnx.Param(nnx.initializers.normal(0.02)(rngs.params(), (config.history_length, d),
                                                                 jnp.float32))
        self.blocks = nnx.List([EncoderBlock(d, config.num_heads, config.d_ff, rngs=rngs)
                                for _ in range(config.num_blocks)])
        self.final_norm = nnx.LayerNorm(d, rngs=rngs)

    def __call__(self, x: jax.Array) -> jax.Array:
        h = self.input_projection(x) + self.positions[...]
        for block in self.blocks:
            h = block(h)
        return self.final_norm(h).mean(axis=1)


class NeuralActuator(nnx.Module):
    def __init__(self, config: ModelConfig, *, rngs: nnx.Rngs) -> None:
        self.config = config
        d = config.d_model
        self.feature_mean = FeatureNorm(jnp.zeros(config.num_features, jnp.float32))
        self.feature_std = FeatureNorm(jnp.ones(config.num_features, jnp.float32))
        self.encoder = Encoder(config, rngs=rngs)
        self.torque_encoder = Encoder(config, rngs=rngs) if config.separate_torque_trunk else None
        self.torque_head = MLPHead(d, config.head_hidden, config.n_motors, rngs=rngs)
        self.force_hidden = nnx.Linear(d, config.head_hidden, rngs=rngs)
        self.force_readout = nnx.Linear(config.head_hidden, 3, rngs=rngs)
        self.gate_readout = nnx.Linear(config.head_hidden, 1, rngs=rngs)
        self.condition_head = MLPHead(d, config.head_hidden, config.n_motors, rngs=rngs)

    def set_feature_stats(self, mean: np.ndarray, std: np.ndarray) -> None:
        self.feature_mean[...] = jnp.asarray(mean, jnp.float32)
        self.feature_std[...] = jnp.asarray(std, jnp.float32)

    def _normalise(self, features: jax.Array) -> jax.Array:
        x = features.astype(jnp.float32)
        return jnp.clip((x - self.feature_mean[...]) / self.feature_std[...], -NORMALISED_CLIP, NORMALISED_CLIP)

    def torque_surrogate(self, features: jax.Array) -> jax.Array:
        """Only the torque surrogate ``[B, n]`` (what the rollout needs when no other head is trained in it)."""
        x = self._normalise(features)
        return self.torque_head((self.torque_encoder or self.encoder)(x))

    def __call__(self, features: jax.Array) -> dict[str, jax.Array]:
        """Raw feature windows ``[B, L, F]`` -> outputs of the model contract (docs/ARCHITECTURE.md)."""
        x = self._normalise(features)
        pooled = self.encoder(x)
        torque_pooled = pooled if self.torque_encoder is None else self.torque_encoder(x)
        force_feature = jax.nn.silu(self.force_hidden(pooled))
        force_raw = self.force_readout(force_feature)
        gate_logit = self.gate_readout(force_feature)
        contact_prob = jax.nn.sigmoid(gate_logit)
        condition_logit = self.condition_head(pooled)
        return {
            "torque_surrogate": self.torque_head(torque_pooled),
            "force_raw": force_raw,
            "contact_logit": gate_logit,
            "contact_prob": contact_prob,
            "force": contact_prob * force_raw,
            "condition_logit": condition_logit,
            "condition": jax.nn.sigmoid(condition_logit),
        }


def parameter_count(model: nnx.Module) -> int:
    """Trainable parameters (normalisation statistics excluded)."""
    return sum(int(np.prod(p.shape)) for p in jax.tree.leaves(nnx.state(model, nnx.Param)))


def jit_forward(model: NeuralActuator):
    """A jitted ``features -> outputs`` function of the model's current weights (eager NNX is slow).

    The weights go in as a flat list of arrays, which jit flattens in C++: an ``nnx.State`` argument is flattened
    in Python on every call, which made a paper-sized batch-1 call 1.16-1.20x slower
    (benchmarks/bench_jax_call.py)."""
    graphdef, state = nnx.split(model)
    leaves, treedef = jax.tree.flatten(state)
    forward = jax.jit(lambda weights, features: nnx.merge(graphdef, jax.tree.unflatten(treedef, weights))(features))
    return lambda features: forward(leaves, jnp.asarray(features))


def build_model(config: ModelConfig, seed: int = 0) -> NeuralActuator:
    return NeuralActuator(config, rngs=nnx.Rngs(seed))
