"""A strong data-driven force baseline: a plain MLP on the recorded windows the estimator sees.

The classical observers of the paper (ID-Linear, ID-Friction, GMO) are weak bars for a learned
model. This baseline is the plainest learned one: the same causal 9-frame windows of recorded
features (:class:`na_training.windows.RecordedWindows`, the feature contract's ``history_windows``),
z-scored with the training statistics, flattened, through two GELU layers of 256 units to the 3-D
force; Huber loss, AdamW, a cosine schedule, a fixed number of steps. No gate, no simulator, no
history beyond the window. Trained on the train split in a few CPU minutes; deterministic from its
seed (fixed initialisation, fixed batch order, CPU XLA). Contact decisions come from the same
|f|-threshold detector the classical methods use (:class:`na_training.baselines.contact.ContactDetector`).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
import numpy as np
import optax

from na_description import RobotSpec
from na_description.features import NORMALISED_CLIP, FeatureStats, history_windows
from na_training.episode import Episode
from na_training.windows import RecordedWindows

PREDICT_BATCH = 4096


@dataclass(frozen=True)
class MLPConfig:
    hidden: int = 256
    layers: int = 2
    learning_rate: float = 1e-3
    weight_decay: float = 1e-4
    batch_size: int = 1024
    steps: int = 6000
    huber_beta: float = 0.1        # N
    history_length: int = 9
    seed: int = 0


def init_mlp(key: jax.Array, sizes: Sequence[int]) -> list[dict[str, jax.Array]]:
    """Dense layers with LeCun-normal weights and zero biases (float32)."""
    layers = []
    for k, (n_in, n_out) in zip(jax.random.split(key, len(sizes) - 1), itertools.pairwise(sizes),
                                strict=True):
        layers.append({"w": jax.random.normal(k, (n_in, n_out), jnp.float32) / np.sqrt(n_in),
                       "b": jnp.zeros(n_out, jnp.float32)})
    return layers


def mlp_apply(layers: list[dict[str, jax.Array]], x: jax.Array) -> jax.Array:
    for layer in layers[:-1]:
        x = jax.nn.gelu(x @ layer["w"] + layer["b"])
    return x @ layers[-1]["w"] + layers[-1]["b"]


def huber(error: jax.Array, beta: float) -> jax.Array:
    magnitude = jnp.abs(error)
    return jnp.where(magnitude < beta, 0.5 * error**2 / beta, magnitude - 0.5 * beta)


class MLPForce:
    """``fit`` on training episodes, ``estimate`` the force of one episode (the baselines' interface)."""

    name = "MLP (recorded windows)"

    def __init__(self, config: MLPConfig | None = None, spec: RobotSpec | None = None) -> None:
        self.config = config or MLPConfig()
        self.spec = spec                         # the arm of the features (std floors per unit); None: the default
        self.layers: list[dict[str, jax.Array]] | None = None
        self.stats: FeatureStats | None = None
        self._predict = jax.jit(lambda layers, x: mlp_apply(layers, self._normalise(x)))

    def _normalise(self, windows: jax.Array) -> jax.Array:
        z = (windows - jnp.asarray(self.stats.mean, jnp.float32)) / jnp.asarray(self.stats.std, jnp.float32)
        return jnp.clip(z, -NORMALISED_CLIP, NORMALISED_CLIP).reshape(windows.shape[0], -1)

    def fit(self, episodes: Sequence[Episode]) -> dict:
        """Train on the force-labelled windows of ``episodes``."""
        self.stats = FeatureStats.fit([ep.features()[ep.valid] for ep in episodes], self.spec)
        data = RecordedWindows(episodes, self.stats.mean, self.config.history_length, label_shift=0)
        labelled = np.flatnonzero(np.all(data.arrays["force_valid"], axis=1))
        if labelled.size == 0:
            raise ValueError("no force-labelled training window")
        windows = data.arrays["windows"][labelled]
        force = data.arrays["force"][labelled]
        cfg = self.config
        schedule = optax.warmup_cosine_decay_schedule(0.0, cfg.learning_rate, min(200, cfg.steps // 10 + 1),
                                                      max(cfg.steps, 2), cfg.learning_rate * 0.01)
        optimizer = optax.adamw(schedule, weight_decay=cfg.weight_decay)
        sizes = [windows.shape[1] * windows.shape[2], *[cfg.hidden] * cfg.layers, 3]
        layers = init_mlp(jax.random.PRNGKey(cfg.seed), sizes)
        opt_state = optimizer.init(layers)

        @jax.jit
        def step(layers, opt_state, x, y):
            def loss(layers):
                return jnp.mean(huber(mlp_apply(layers, self._normalise(x)) - y, cfg.huber_beta))
            value, grads = jax.value_and_grad(loss)(layers)
            updates, opt_state = optimizer.update(grads, opt_state, layers)
            return optax.apply_updates(layers, updates), opt_state, value

        rng = np.random.default_rng(cfg.seed)
        started = time.perf_counter()
        for _ in range(cfg.steps):
            pick = rng.integers(0, windows.shape[0], size=cfg.batch_size)
            layers, opt_state, value = step(layers, opt_state, windows[pick], force[pick])
        self.layers = jax.block_until_ready(layers)
        return {"config": asdict(cfg), "train_windows": int(windows.shape[0]), "final_loss": float(value),
                "seconds": round(time.perf_counter() - started, 1), "notes": []}

    def estimate(self, episode: Episode) -> np.ndarray:
        """Force ``[T, 3]`` from the episode's causal windows (as the live estimator builds them), gaps held
        from the last good frame (as ``na-train compare`` feeds a model)."""
        return self.predict_features(episode.filled_features())

    def predict_features(self, features: np.ndarray) -> np.ndarray:
        """Force ``[T, 3]`` from an episode's recorded feature matrix ``[T, F]``."""
        if self.layers is None:
            raise RuntimeError("fit the MLP baseline before estimating")
        windows = history_windows(features, self.stats.mean, self.config.history_length).astype(np.float32)
        parts = []
        for start in range(0, windows.shape[0], PREDICT_BATCH):
            chunk = windows[start:start + PREDICT_BATCH]
            padded = np.concatenate([chunk, np.repeat(chunk[-1:], PREDICT_BATCH - len(chunk), axis=0)])
            parts.append(np.asarray(self._predict(self.layers, padded))[:len(chunk)])
        return np.concatenate(parts).astype(float)

