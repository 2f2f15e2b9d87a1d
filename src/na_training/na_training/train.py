"""The training loop: BPTT through the MJX rollout, AdamW + warm-up/cosine, EMA, validation,
Orbax checkpoints with the run description beside them, resume, JSON-lines metrics, progress bar.

Run directory layout::

    RUN/run.json          config, feature schema + normalisation stats, robot, dataset id (written first)
    RUN/metrics.jsonl     one JSON object per logged step / validation
    RUN/checkpoints/N/    Orbax checkpoint of step N: params, EMA params, optimiser state
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
import orbax.checkpoint as ocp
from flax import nnx
from tqdm import tqdm

from na_description import RobotSpec, load_spec
from na_estimator.features import SCHEMA_VERSION, FeatureStats, feature_names
from na_training.batches import DataError, TrainingEpisode, WindowSampler
from na_training.config import TrainConfig, config_from_dict
from na_training.losses import rollout_losses
from na_training.model import NeuralActuator, build_model, parameter_count
from na_training.rollout import ArmSimulator, enable_float64, rollout

RUN_FILE = "run.json"


def learning_rate_schedule(config: TrainConfig) -> optax.Schedule:
    optim = config.optim
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=optim.learning_rate, warmup_steps=max(optim.warmup_steps, 1),
        decay_steps=max(optim.decay_steps, optim.warmup_steps + 1),
        end_value=optim.learning_rate * optim.final_lr_fraction)


def make_optimizer(config: TrainConfig) -> optax.GradientTransformation:
    return optax.chain(optax.clip_by_global_norm(config.optim.grad_clip),
                       optax.adamw(learning_rate_schedule(config), weight_decay=config.optim.weight_decay))


def fit_feature_stats(episodes: Sequence[TrainingEpisode], spec: RobotSpec) -> FeatureStats:
    frames = [ep.features[ep.valid] for ep in episodes]
    return FeatureStats.fit(np.concatenate(frames, axis=0), spec)


def describe_run(config: TrainConfig, stats: FeatureStats, spec: RobotSpec, n_parameters: int,
                 step: int = 0) -> dict[str, Any]:
    """What an exported model needs besides its weights (written to RUN/run.json, read by the exporter)."""
    return {"config": config.to_dict(), "schema_version": SCHEMA_VERSION, "feature_names": feature_names(spec),
            "feature_stats": stats.to_dict(), "robot": spec.name, "joint_names": spec.joint_names,
            "effort_bounds": [float(v) for v in spec.effort_bounds], "dataset_id": config.dataset_id,
            "parameter_count": n_parameters, "checkpoint_step": step}


@dataclass
class TrainState:
    step: int
    params: nnx.State
    ema: nnx.State
    opt_state: Any


class Trainer:
    """Owns the model, the simulator, the jitted step functions and the run directory."""

    def __init__(self, config: TrainConfig, train_episodes: Sequence[TrainingEpisode],
                 val_episodes: Sequence[TrainingEpisode] = (), run_dir: str | Path | None = None,
                 spec: RobotSpec | None = None, stats: FeatureStats | None = None) -> None:
        enable_float64(config.sim.float64)
        self.config = config
        self.spec = spec or load_spec()
        if config.model.n_motors != self.spec.n_motors:
            raise DataError(f"model.n_motors is {config.model.n_motors}, the robot has {self.spec.n_motors} motors")
        self.stats = stats or fit_feature_stats(train_episodes, self.spec)
        self.model = build_model(config.model, seed=config.seed)
        self.model.set_feature_stats(self.stats.mean, self.stats.std)
        self.graphdef, params, self.rest = nnx.split(self.model, nnx.Param, ...)
        self.simulator = ArmSimulator(self.spec, config.sim)
        self.train_sampler = WindowSampler(train_episodes, self.stats.mean, config.model.history_length,
                                           config.label_shift)
        self.val_sampler = (WindowSampler(val_episodes, self.stats.mean, config.model.history_length,
                                          config.label_shift) if val_episodes else None)
        self.optimizer = make_optimizer(config)
        self.state = TrainState(0, params, jax.tree.map(jnp.array, params), self.optimizer.init(params))
        self.run_dir = Path(run_dir) if run_dir else None
        self.condition_channel = self.spec.joint_names.index(config.loss.condition_joint)
        # One compiled rollout for training and validation (same batch shapes): MJX compiles slowly on CPUs.
        self._loss_and_grad = jax.jit(jax.value_and_grad(self._loss_impl, has_aux=True))
        self._apply_gradients = jax.jit(self._apply_gradients_impl)
        self._manager: ocp.CheckpointManager | None = None

    # ------------------------------------------------------------------ pure functions (jitted)
    def _loss_impl(self, params: nnx.State, batch: dict[str, jax.Array]) -> tuple[jax.Array, dict[str, jax.Array]]:
        outputs = rollout(self.graphdef, params, self.rest, self.simulator, batch)
        return rollout_losses(outputs, batch, self.config.loss, self.spec.n_arm, self.condition_channel)

    def _apply_gradients_impl(self, params, ema, opt_state, grads):
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        decay = self.config.optim.ema_decay
        ema = jax.tree.map(lambda e, p: decay * e + (1.0 - decay) * p, ema, params)
        return params, ema, opt_state, optax.tree.norm(grads)

    # ------------------------------------------------------------------ batches
    def train_batch(self, step: int) -> dict[str, np.ndarray]:
        """The batch of ``step``: a function of (seed, step) only, so resumed runs draw the same windows."""
        rng = np.random.default_rng([self.config.seed, step])
        batch = self.train_sampler.sample(rng, self.config.batch_size, self.config.horizon_at(step))
        noise = self.config.sim.initial_position_noise
        if noise > 0:
            n_arm = self.spec.n_arm
            batch["qpos0"][:, :n_arm] += rng.uniform(-noise, noise, size=(batch["qpos0"].shape[0], n_arm))
        return batch

    def step(self) -> dict[str, float]:
        """One optimisation step; returns its metrics."""
        batch = self.train_batch(self.state.step)
        (_, parts), grads = self._loss_and_grad(self.state.params, batch)
        params, ema, opt_state, grad_norm = self._apply_gradients(self.state.params, self.state.ema,
                                                                  self.state.opt_state, grads)
        self.state = TrainState(self.state.step + 1, params, ema, opt_state)
        return {k: float(v) for k, v in parts.items()} | {"grad_norm": float(grad_norm)}

    def validate(self, use_ema: bool = True) -> dict[str, float]:
        """Mean losses over fixed validation windows at the current horizon (no initial noise)."""
        if self.val_sampler is None:
            return {}
        horizon = self.config.horizon_at(self.state.step)
        try:
            batches = self.val_sampler.fixed(self.config.eval_batches, self.config.batch_size, horizon,
                                             seed=self.config.seed)
        except DataError:
            return {}
        params = self.state.ema if use_ema else self.state.params
        totals: dict[str, float] = {}
        for batch in batches:
            (_, parts), _ = self._loss_and_grad(params, batch)
            for k, v in parts.items():
                totals[k] = totals.get(k, 0.0) + float(v) / len(batches)
        return totals

    def evaluate_batch(self, batch: dict[str, np.ndarray], use_ema: bool = False) -> dict[str, float]:
        """Losses of one batch (of the training batch size: shares the compiled training rollout)."""
        (_, parts), _ = self._loss_and_grad(self.state.ema if use_ema else self.state.params, batch)
        return {k: float(v) for k, v in parts.items()}

    def export_model(self, use_ema: bool = True) -> NeuralActuator:
        """A model instance with the current (EMA) weights and the normalisation stats."""
        return nnx.merge(self.graphdef, self.state.ema if use_ema else self.state.params, self.rest)

    # ------------------------------------------------------------------ run directory
    def run_description(self) -> dict[str, Any]:
        return describe_run(self.config, self.stats, self.spec, parameter_count(self.model), self.state.step)

    def _checkpoints(self) -> ocp.CheckpointManager:
        if self._manager is None:
            if self.run_dir is None:
                raise ValueError("this trainer has no run directory")
            self._manager = ocp.CheckpointManager(
                (self.run_dir / "checkpoints").resolve(),
                options=ocp.CheckpointManagerOptions(max_to_keep=self.config.keep_checkpoints, create=True))
        return self._manager

    def _tree(self) -> dict[str, Any]:
        return {"params": self.state.params, "ema": self.state.ema, "opt_state": self.state.opt_state}

    def save(self) -> None:
        manager = self._checkpoints()
        manager.save(self.state.step, args=ocp.args.StandardSave(self._tree()), force=True)
        manager.wait_until_finished()

    def restore(self, step: int | None = None) -> bool:
        """Load the latest (or given) checkpoint of the run directory; False when there is none."""
        manager = self._checkpoints()
        step = manager.latest_step() if step is None else step
        if step is None:
            return False
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, self._tree())
        tree = manager.restore(step, args=ocp.args.StandardRestore(abstract))
        self.state = TrainState(int(step), tree["params"], tree["ema"], tree["opt_state"])
        return True

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()
            self._manager = None

    def fit(self, steps: int | None = None, *, resume: bool = True, progress: bool = True,
            on_metrics: Callable[[dict[str, Any]], None] | None = None) -> dict[str, float]:
        """Train up to ``steps`` total steps (default: config.steps), logging, validating, checkpointing."""
        total = self.config.steps if steps is None else steps
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            run_file = self.run_dir / RUN_FILE
            if run_file.exists() and resume:
                previous = json.loads(run_file.read_text())
                if previous.get("config", {}).get("model") != self.config.to_dict()["model"]:
                    raise ValueError(f"{run_file}: the run directory holds a different model; use another --out")
            run_file.write_text(json.dumps(self.run_description(), indent=2) + "\n")
            if resume and self.restore():
                print(f"resumed from step {self.state.step}")
        metrics_file = open(self.run_dir / "metrics.jsonl", "a") if self.run_dir else None   # noqa: SIM115
        last: dict[str, float] = {}
        bar = tqdm(total=total, initial=self.state.step, disable=not progress, unit="step", dynamic_ncols=True)
        window_start, window_frames = time.perf_counter(), 0
        try:
            while self.state.step < total:
                horizon = self.config.horizon_at(self.state.step)
                last = self.step()
                window_frames += horizon * self.config.batch_size
                step = self.state.step
                if not np.isfinite(last["loss"]):
                    raise FloatingPointError(f"loss became {last['loss']} at step {step}")
                elapsed = time.perf_counter() - window_start
                rate = window_frames / elapsed if elapsed > 0 else 0.0
                bar.update(1)
                bar.set_postfix(loss=f"{last['loss']:.4g}", frames_s=f"{rate:.0f}", H=horizon)
                record: dict[str, Any] | None = None
                if step % self.config.log_every == 0 or step == total:
                    record = {"step": step, "split": "train", "horizon": horizon, "frames_per_s": rate,
                              "lr": float(learning_rate_schedule(self.config)(step)), **last}
                    window_start, window_frames = time.perf_counter(), 0
                if step % self.config.eval_every == 0 or step == total:
                    val = self.validate()
                    if val:
                        self._emit(metrics_file, {"step": step, "split": "val", "horizon": horizon, **val}, on_metrics)
                if record is not None:
                    self._emit(metrics_file, record, on_metrics)
                if self.run_dir is not None and (step % self.config.checkpoint_every == 0 or step == total):
                    self.save()
        finally:
            bar.close()
            if metrics_file:
                metrics_file.close()
        return last

    @staticmethod
    def _emit(handle, record: dict[str, Any], callback) -> None:
        if handle is not None:
            handle.write(json.dumps(record) + "\n")
            handle.flush()
        if callback is not None:
            callback(record)


def load_run(run_dir: str | Path) -> dict[str, Any]:
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a training run directory (no {RUN_FILE})")
    return json.loads(path.read_text())


def load_trained_model(run_dir: str | Path, step: int | None = None, use_ema: bool = True
                       ) -> tuple[NeuralActuator, dict[str, Any]]:
    """Rebuild the model of a run directory from its checkpoint (latest unless ``step``)."""
    description = load_run(run_dir)
    config = config_from_dict(description["config"], f"{run_dir}/{RUN_FILE}")
    stats = FeatureStats.from_dict(description["feature_stats"])
    model = build_model(config.model, seed=config.seed)
    model.set_feature_stats(stats.mean, stats.std)
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    optimizer = make_optimizer(config)
    tree = {"params": params, "ema": params, "opt_state": optimizer.init(params)}
    manager = ocp.CheckpointManager((Path(run_dir) / "checkpoints").resolve())
    try:
        step = manager.latest_step() if step is None else step
        if step is None:
            raise FileNotFoundError(f"{run_dir}: no checkpoint")
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, tree)
        restored = manager.restore(step, args=ocp.args.StandardRestore(abstract))
    finally:
        manager.close()
    description["checkpoint_step"] = int(step)
    return nnx.merge(graphdef, restored["ema" if use_ema else "params"], rest), description
