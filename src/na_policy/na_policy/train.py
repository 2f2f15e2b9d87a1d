"""Behaviour cloning in JAX/Flax on the CPU: an MLP maps one observation to a chunk of future commands.

Loss: L1 between normalised predicted and demonstrated action chunks (commands relative to the measured
position). Adam with a cosine-decayed learning rate; Gaussian noise on the normalised observations
(``obs_noise``) so that the policy sees states near, not only on, the demonstrations. The result is
exported to a :class:`~na_policy.policy_file.Policy` and its numpy forward pass is checked against Flax.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from na_policy.dataset import DemoEpisode, samples
from na_policy.features import std_floor
from na_policy.policy_file import Policy

ACTION_STD_FLOOR = 1e-3       # rad


@dataclass
class TrainConfig:
    variant: str = "force"
    chunk: int = 10
    hidden: tuple[int, ...] = (256, 256)
    steps: int = 3000
    batch: int = 256
    learning_rate: float = 1e-3
    obs_noise: float = 0.05        # std of the noise on normalised observations
    seed: int = 0


def _mlp(hidden: tuple[int, ...], out: int):
    import flax.linen as nn

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x):
            for width in hidden:
                x = nn.relu(nn.Dense(width)(x))
            return nn.Dense(out)(x)

    return MLP()


def fit(episodes: list[DemoEpisode], config: TrainConfig, joint_names: list[str],
        log: Callable[[str], None] = print, progress_every: float = 5.0) -> Policy:
    import jax
    import jax.numpy as jnp
    import optax

    obs, actions = samples(episodes, config.variant, config.chunk)
    n_joints = actions.shape[-1]
    actions = actions.reshape(len(actions), -1)
    obs_mean, act_mean = obs.mean(0), actions.mean(0)
    obs_std = np.maximum(obs.std(0), std_floor(config.variant)).astype(np.float32)
    act_std = np.maximum(actions.std(0), ACTION_STD_FLOOR).astype(np.float32)
    x = jnp.asarray((obs - obs_mean) / obs_std)
    y = jnp.asarray((actions - act_mean) / act_std)
    model = _mlp(config.hidden, y.shape[1])
    key = jax.random.PRNGKey(config.seed)
    params = model.init(key, x[:1])
    schedule = optax.cosine_decay_schedule(config.learning_rate, config.steps)
    optimizer = optax.adam(schedule)
    state = optimizer.init(params)

    def loss_fn(p, xb, yb):
        return jnp.mean(jnp.abs(model.apply(p, xb) - yb))

    @jax.jit
    def step(p, s, k):
        k_batch, k_noise = jax.random.split(k)
        index = jax.random.randint(k_batch, (config.batch,), 0, x.shape[0])
        xb = x[index] + config.obs_noise * jax.random.normal(k_noise, (config.batch, x.shape[1]))
        loss, grads = jax.value_and_grad(loss_fn)(p, xb, y[index])
        updates, s = optimizer.update(grads, s, p)
        return optax.apply_updates(p, updates), s, loss

    log(f"training the '{config.variant}' policy on {len(episodes)} demonstrations ({len(x)} samples, "
        f"{x.shape[1]} inputs -> {config.chunk} x {n_joints} actions), {config.steps} steps")
    started = last_report = time.monotonic()
    loss = float("nan")
    for k in range(config.steps):
        key, sub = jax.random.split(key)
        params, state, loss = step(params, state, sub)
        if time.monotonic() - last_report > progress_every or k == config.steps - 1:
            last_report = time.monotonic()
            log(f"  step {k + 1}/{config.steps}: L1 loss {float(loss):.4f} ({last_report - started:.0f} s)")
    full_loss = float(loss_fn(params, x, y))
    dense = [params["params"][f"Dense_{k}"] for k in range(len(config.hidden) + 1)]
    policy = Policy(variant=config.variant, chunk=config.chunk, joint_names=list(joint_names),
                    kernels=[np.asarray(d["kernel"], dtype=np.float32) for d in dense],
                    biases=[np.asarray(d["bias"], dtype=np.float32) for d in dense],
                    obs_mean=obs_mean.astype(np.float32), obs_std=obs_std, act_mean=act_mean.astype(np.float32),
                    act_std=act_std, start_pose=np.mean([ep.command[0] for ep in episodes], axis=0),
                    info={"config": asdict(config), "demonstrations": len(episodes), "samples": len(x),
                          "train_l1": full_loss, "seconds": round(time.monotonic() - started, 1)})
    # The exported numpy forward pass must be the Flax model's.
    probe = obs[: min(64, len(obs))]
    flax_out = np.asarray(model.apply(params, jnp.asarray((probe - obs_mean) / obs_std))) * act_std + act_mean
    numpy_out = np.stack([policy.act_chunk(o).reshape(-1) for o in probe])
    if not np.allclose(flax_out, numpy_out, atol=1e-4):
        raise RuntimeError(f"exported policy differs from the Flax model by {np.max(np.abs(flax_out - numpy_out))}")
    return policy
