"""The training loop: BPTT through the MJX rollout (and, in the hybrid recipe, direct losses on recorded
windows), AdamW + warm-up/cosine, EMA, validation, Orbax checkpoints with the run description beside
them, resume, JSON-lines metrics, progress that says what it is doing.

Run directory layout::

    RUN/run.json          config, feature schema + normalisation stats, robot, dataset id (written first)
    RUN/metrics.jsonl     one JSON object per logged step / validation
    RUN/checkpoints/N/    Orbax checkpoint of step N: params, EMA params, optimiser state

With a :class:`na_training.parallel.DataParallel` the steps run data-parallel over its mesh (batch rows
split, state replicated); with several processes each builds only its rows of every batch, process 0
writes run.json and metrics.jsonl, and Orbax writes each checkpoint once.
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

from na_description import RobotSpec, load_spec
from na_description.features import SCHEMA_VERSION, FeatureStats, feature_names
from na_training.batches import DataError, WindowSampler
from na_training.checkpoints import close_briefly, restore_checkpoint
from na_training.config import TrainConfig, config_from_dict, for_robot
from na_training.episode import Episode
from na_training.inverse_dynamics import InverseDynamics
from na_training.losses import rollout_losses, supervised_losses
from na_training.model import NeuralActuator, build_model, parameter_count
from na_training.parallel import DataParallel, compile_then_sync
from na_training.progress import StepProgress
from na_training.rollout import ArmSimulator, enable_float64, rollout
from na_training.windows import RecordedWindows, augment_offsets

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


def fit_feature_stats(episodes: Sequence[Episode], spec: RobotSpec) -> FeatureStats:
    frames = [ep.features()[ep.valid] for ep in episodes]
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
    """Owns the model, the simulator, the jitted step functions and the run directory.

    Two recipes (``config.recipe``): ``rollout``, the paper's pure form, where every head is trained inside
    the MJX rollout; ``hybrid``, where the force, gate and condition heads learn from recorded windows
    (:mod:`na_training.windows`) and the torque surrogate through rollouts every ``hybrid.rollout_every``
    steps (see :class:`na_training.config.HybridConfig`).

    ``parallel``: run the steps data-parallel over its devices (and processes); None: plain ``jax.jit`` on
    the default device."""

    def __init__(self, config: TrainConfig, train_episodes: Sequence[Episode],
                 val_episodes: Sequence[Episode] = (), run_dir: str | Path | None = None,
                 spec: RobotSpec | None = None, stats: FeatureStats | None = None,
                 log: Callable[[str], None] | None = None, parallel: DataParallel | None = None) -> None:
        self.spec = spec or load_spec()
        config = for_robot(config, self.spec)       # feature count, motors and condition joint of this arm
        enable_float64(config.sim.float64)
        self.parallel = parallel
        self.config = config
        self.log = log or (lambda text: None)
        if config.model.n_motors != self.spec.n_motors:
            raise DataError(f"model.n_motors is {config.model.n_motors}, the robot has {self.spec.n_motors} motors")
        self.stats = stats or fit_feature_stats(train_episodes, self.spec)
        self.model = build_model(config.model, seed=config.seed)
        self.model.set_feature_stats(self.stats.mean, self.stats.std)
        self.simulator = ArmSimulator(self.spec, config.sim)
        if self.simulator.offset_channels.any():
            # An offset surrogate starts at zero (readout zeroed, still trainable: its gradient is the hidden
            # activations), so the first rollouts are the PD actuators following the recorded command.
            readout = self.model.torque_head.readout
            readout.kernel.value = jnp.zeros_like(readout.kernel.value)
            readout.bias.value = jnp.zeros_like(readout.bias.value)
        self.graphdef, params, self.rest = nnx.split(self.model, nnx.Param, ...)
        self.hybrid = config.recipe == "hybrid"
        self.uses_rollouts = not self.hybrid or config.hybrid.rollout_every > 0
        self.train_sampler = self.val_sampler = None
        if self.uses_rollouts:
            self.train_sampler = self._rollout_windows(train_episodes)
            self.val_sampler = self._rollout_windows(val_episodes) if val_episodes else None
        self.train_windows = self.val_windows = None
        if self.hybrid:
            self.train_windows = self._recorded_windows(train_episodes)
            self.val_windows = self._recorded_windows(val_episodes) if val_episodes else None
        if parallel is not None:
            if self.uses_rollouts:
                parallel.check_batch_size(config.batch_size, "batch_size")
            if self.hybrid:
                parallel.check_batch_size(config.hybrid.batch_size, "hybrid.batch_size")
        self.optimizer = make_optimizer(config)
        self.state = TrainState(0, params, jax.tree.map(jnp.array, params), self.optimizer.init(params))
        if parallel is not None:
            self.state = TrainState(0, *parallel.replicate((params, self.state.ema, self.state.opt_state)))
        self.run_dir = Path(run_dir) if run_dir else None
        self.condition_channel = self.spec.joint_names.index(config.loss.condition_joint)
        self.effort_bounds = jnp.asarray(self.spec.effort_bounds, jnp.float32)
        # One compiled rollout for training and validation (same batch shapes): MJX compiles slowly on CPUs.
        # Sharded: the batch arrives row-split, the state replicated; GSPMD inserts the gradient all-reduce.
        jit = jax.jit if parallel is None else parallel.jit
        self._loss_and_grad = jit(jax.value_and_grad(self._loss_impl, has_aux=True))
        self._supervised_grad = jit(jax.value_and_grad(self._supervised_impl, has_aux=True))
        self._supervised_eval = jit(self._supervised_impl)
        self._hybrid_grad = jit(jax.value_and_grad(self._hybrid_impl, has_aux=True))
        self._apply_gradients = jit(self._apply_gradients_impl)
        self._compiled: set[tuple] = set()
        self._manager: ocp.CheckpointManager | None = None
        self.provenance: dict[str, Any] = {}

    def _rollout_windows(self, episodes: Sequence[Episode]) -> WindowSampler:
        loss = self.config.loss
        return WindowSampler(episodes, self.stats.mean, self.config.model.history_length, self.config.label_shift,
                             loss.condition_joint, loss.condition_tasks)

    def _recorded_windows(self, episodes: Sequence[Episode]) -> RecordedWindows:
        hybrid, loss = self.config.hybrid, self.config.loss
        torque = None
        if hybrid.torque_weight > 0:
            inverse = InverseDynamics(self.spec)
            torque = [inverse.episode_torques(ep) for ep in episodes]
        return RecordedWindows(episodes, self.stats.mean, self.config.model.history_length,
                               label_shift=hybrid.label_shift, gate_rule=hybrid.gate_target,
                               contact_threshold=loss.contact_threshold, torque_labels=torque,
                               condition_joint=loss.condition_joint, condition_tasks=loss.condition_tasks)

    # ------------------------------------------------------------------ pure functions (jitted)
    def _loss_impl(self, params: nnx.State, batch: dict[str, jax.Array]) -> tuple[jax.Array, dict[str, jax.Array]]:
        """The rollout loss (pose, plus the heads in the paper's recipe or with ``hybrid.rollout_heads``)."""
        heads = not self.hybrid or self.config.hybrid.rollout_heads
        outputs = rollout(self.graphdef, params, self.rest, self.simulator, batch, heads=heads)
        return rollout_losses(outputs, batch, self.config.loss, self.spec.n_arm, self.condition_channel, heads=heads,
                              frame_period=self.spec.frame_period)

    def _supervised_impl(self, params: nnx.State, batch: dict[str, jax.Array], torque_weight: jax.Array
                         ) -> tuple[jax.Array, dict[str, jax.Array]]:
        model = nnx.merge(self.graphdef, params, self.rest)
        outputs = model(batch["windows"])
        total, parts = supervised_losses(outputs, batch, self.config.loss, self.condition_channel,
                                         torque_weight=1.0 if self.train_windows.has_torque else 0.0,
                                         effort_bounds=self.effort_bounds)
        if "torque" in parts:         # the warm-start term is switched by the traced weight (one compilation)
            total = total + (torque_weight - 1.0) * parts["torque"]
            parts["loss"] = total
        return total, parts

    def _hybrid_impl(self, params: nnx.State, supervised: dict[str, jax.Array], rollout_batch: dict[str, jax.Array],
                     torque_weight: jax.Array) -> tuple[jax.Array, dict[str, jax.Array]]:
        direct, parts = self._supervised_impl(params, supervised, torque_weight)
        pose, rolled = self._loss_impl(params, rollout_batch)
        total = direct + self.config.hybrid.rollout_weight * pose
        parts = parts | {("rollout_" + k if k in parts else k): v for k, v in rolled.items()}
        parts["loss"] = total
        return total, parts

    def _apply_gradients_impl(self, params, ema, opt_state, grads):
        updates, opt_state = self.optimizer.update(grads, opt_state, params)
        params = optax.apply_updates(params, updates)
        decay = self.config.optim.ema_decay
        ema = jax.tree.map(lambda e, p: decay * e + (1.0 - decay) * p, ema, params)
        return params, ema, opt_state, optax.tree.norm(grads)

    # ------------------------------------------------------------------ batches
    def train_batch(self, step: int, rows: slice | None = None) -> dict[str, np.ndarray]:
        """The rollout batch of ``step``: a function of (seed, step) only, so resumed runs draw the same windows.

        ``rows``: only these rows of it (a process's share); every random draw is that of the whole batch."""
        rng = np.random.default_rng([self.config.seed, step])
        size = self.config.batch_size
        batch = self.train_sampler.sample(rng, size, self.config.horizon_at(step), rows)
        noise = self.config.sim.initial_position_noise
        if noise > 0:
            n_arm = self.spec.n_arm
            offsets = rng.uniform(-noise, noise, size=(size, n_arm))
            batch["qpos0"][:, :n_arm] += offsets if rows is None else offsets[rows]
        return batch

    def supervised_batch(self, step: int, rows: slice | None = None) -> dict[str, np.ndarray]:
        """The recorded-window batch of ``step`` (hybrid recipe), a function of (seed, step) only; ``rows``
        as in :meth:`train_batch`."""
        rng = np.random.default_rng([self.config.seed, step, 1])
        hybrid = self.config.hybrid
        batch = self.train_windows.sample(rng, hybrid.batch_size, rows)
        augment_offsets(batch, rng, {"temperature": hybrid.augment_temperature, "voltage": hybrid.augment_voltage},
                        feature_names(self.spec), rows, hybrid.batch_size)
        return batch

    # Where the batches go: numpy to plain jit; with a mesh, each process's rows onto its devices.
    def _rollout_input(self, step: int) -> dict[str, Any]:
        if self.parallel is None:
            return self.train_batch(step)
        size = self.config.batch_size
        return self.parallel.place_rows(self.train_batch(step, self.parallel.local_rows(size)), size)

    def _supervised_input(self, step: int) -> dict[str, Any]:
        if self.parallel is None:
            return self.supervised_batch(step)
        size = self.config.hybrid.batch_size
        return self.parallel.place_rows(self.supervised_batch(step, self.parallel.local_rows(size)), size)

    def _placed(self, batch: dict[str, np.ndarray]) -> dict[str, Any]:
        """A whole batch that every process builds alike (validation, evaluation)."""
        return batch if self.parallel is None else self.parallel.place_batch(batch)

    def _scalar(self, value: float) -> Any:
        return jnp.float32(value) if self.parallel is None else self.parallel.replicate(np.float32(value))

    def has_rollout(self, step: int) -> bool:
        """Whether optimisation step ``step`` (0-based) includes a rollout."""
        return not self.hybrid or self.config.hybrid.has_rollout(step)

    # ------------------------------------------------------------------ steps
    def _call(self, key: tuple, what: str, function: Callable, *args):
        """Run a jitted function, saying so when its first call for these shapes compiles it."""
        if key in self._compiled:
            return function(*args)
        self.log(f"compiling {what} ...")
        start = time.perf_counter()
        compile_then_sync(function, args, what)
        result = jax.block_until_ready(function(*args))
        self.log(f"compiled {what} in {time.perf_counter() - start:.0f} s")
        self._compiled.add(key)
        return result

    def _rollout_name(self, horizon: int, batch_size: int) -> str:
        return f"the rollout step (horizon {horizon}, batch {batch_size})"

    def _hybrid_name(self, horizon: int) -> str:
        return f"the hybrid step (recorded windows + rollout of horizon {horizon}, batch {self.config.batch_size})"

    def step(self) -> dict[str, float]:
        """One optimisation step; returns its metrics."""
        step = self.state.step
        params = self.state.params
        if not self.hybrid:
            batch = self._rollout_input(step)
            horizon = batch["command"].shape[1]
            (_, parts), grads = self._call(("rollout", horizon), self._rollout_name(horizon, self.config.batch_size),
                                           self._loss_and_grad, params, batch)
        else:
            supervised = self._supervised_input(step)
            weight = self._scalar(self.config.hybrid.torque_weight_at(step))
            if self.has_rollout(step):
                batch = self._rollout_input(step)
                horizon = batch["command"].shape[1]
                (_, parts), grads = self._call(("hybrid", horizon), self._hybrid_name(horizon), self._hybrid_grad,
                                               params, supervised, batch, weight)
            else:
                (_, parts), grads = self._call(("supervised",), "the recorded-window step", self._supervised_grad,
                                               params, supervised, weight)
        params, ema, opt_state, grad_norm = self._apply_gradients(params, self.state.ema, self.state.opt_state, grads)
        self.state = TrainState(step + 1, params, ema, opt_state)
        return {k: float(v) for k, v in parts.items()} | {"grad_norm": float(grad_norm)}

    def step_frames(self, step: int) -> tuple[int, int]:
        """(rollout frames, recorded windows) that optimisation step ``step`` processes."""
        frames = self.config.batch_size * self.config.horizon_at(step) if self.has_rollout(step) else 0
        return frames, (self.config.hybrid.batch_size if self.hybrid else 0)

    def validate(self, use_ema: bool = True) -> dict[str, float]:
        """Mean losses over fixed validation sets: recorded windows (hybrid) and rollout windows at the
        current horizon (no initial noise)."""
        params = self.state.ema if use_ema else self.state.params
        totals: dict[str, float] = {}

        def add(parts: dict, count: int, prefix: str = "") -> None:
            for k, v in parts.items():
                totals[prefix + k] = totals.get(prefix + k, 0.0) + float(v) / count

        if self.val_windows is not None:
            count = max(1, self.config.hybrid.eval_windows // self.config.hybrid.batch_size)
            batches = self.val_windows.fixed(count, self.config.hybrid.batch_size, seed=self.config.seed)
            weight = self._scalar(0.0)
            for batch in batches:
                _, parts = self._call(("supervised_eval",), "the recorded-window validation", self._supervised_eval,
                                      params, self._placed(batch), weight)
                add(parts, len(batches))
        if self.val_sampler is not None:
            horizon = self.config.horizon_at(self.state.step)
            try:
                batches = self.val_sampler.fixed(self.config.eval_batches, self.config.batch_size, horizon,
                                                 seed=self.config.seed)
            except DataError:
                batches = []
            for batch in batches:
                batch = self._placed(batch)
                if self.hybrid:      # the compiled hybrid step (no second compilation); its rollout parts
                    supervised = self._placed(self.train_windows.take(np.arange(self.config.hybrid.batch_size) % len(
                        self.train_windows)))
                    (_, parts), _ = self._call(("hybrid", horizon), self._hybrid_name(horizon), self._hybrid_grad,
                                               params, supervised, batch, self._scalar(0.0))
                    parts = {k: v for k, v in parts.items() if k.startswith("rollout_") or k in ("arm", "gripper_mm",
                                                                                                 "arm_mae_rad")}
                    parts = {(k if k.startswith("rollout_") else "rollout_" + k): v for k, v in parts.items()}
                else:
                    name = self._rollout_name(horizon, self.config.batch_size)
                    (_, parts), _ = self._call(("rollout", horizon), name, self._loss_and_grad, params, batch)
                add(parts, len(batches))
        return totals

    def evaluate_batch(self, batch: dict[str, np.ndarray], use_ema: bool = False) -> dict[str, float]:
        """Rollout losses of one batch (of the training batch size: shares the compiled training rollout)."""
        (_, parts), _ = self._loss_and_grad(self.state.ema if use_ema else self.state.params, self._placed(batch))
        return {k: float(v) for k, v in parts.items()}

    def export_model(self, use_ema: bool = True) -> NeuralActuator:
        """A model instance with the current (EMA) weights and the normalisation stats."""
        return nnx.merge(self.graphdef, self.state.ema if use_ema else self.state.params, self.rest)

    # ------------------------------------------------------------------ run directory
    def run_description(self) -> dict[str, Any]:
        """``run.json``: config, feature statistics, robot, dataset, and ``provenance`` (e.g. an adaptation's
        parent run and data)."""
        return describe_run(self.config, self.stats, self.spec, parameter_count(self.model),
                            self.state.step) | self.provenance

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
        # The target shardings are this trainer's (any device count): Orbax re-lays the saved arrays out.
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, self._tree())
        try:
            tree = restore_checkpoint(manager, step, abstract, self.run_dir)
        except ValueError:
            close_briefly(manager)
            self._manager = None
            raise
        self.state = TrainState(int(step), tree["params"], tree["ema"], tree["opt_state"])
        return True

    def close(self) -> None:
        if self._manager is not None:
            self._manager.close()
            self._manager = None

    def fit(self, steps: int | None = None, *, resume: bool = True, progress: bool = True,
            on_metrics: Callable[[dict[str, Any]], None] | None = None) -> dict[str, float]:
        """Train up to ``steps`` total steps (default: config.steps), logging, validating, checkpointing.

        ``progress``: a bar on a terminal, one line every few seconds otherwise (and compile notices)."""
        total = self.config.steps if steps is None else steps
        primary = jax.process_index() == 0       # several processes: one writes the files, one talks
        if self.run_dir is not None:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            run_file = self.run_dir / RUN_FILE
            if run_file.exists() and resume:
                previous = json.loads(run_file.read_text())
                if previous.get("config", {}).get("model") != self.config.to_dict()["model"]:
                    raise ValueError(f"{run_file}: the run directory holds a different model; use another --out")
            if primary:
                run_file.write_text(json.dumps(self.run_description(), indent=2) + "\n")
            if resume and self.restore() and primary:
                print(f"resumed from step {self.state.step}")
        metrics_file = (open(self.run_dir / "metrics.jsonl", "a")            # noqa: SIM115
                        if self.run_dir and primary else None)
        progress = progress and primary
        last: dict[str, float] = {}
        bar = StepProgress(total, self.state.step, enabled=progress)
        previous_log = self.log
        if progress:
            self.log = bar.note
        window_start, window_frames, window_windows = time.perf_counter(), 0, 0
        schedule = learning_rate_schedule(self.config)
        try:
            while self.state.step < total:
                horizon = self.config.horizon_at(self.state.step)
                frames, windows = self.step_frames(self.state.step)
                compiled_before = len(self._compiled)
                last = self.step()
                if len(self._compiled) != compiled_before:     # the compile is not training throughput
                    window_start, frames, windows = time.perf_counter(), 0, 0
                window_frames += frames
                window_windows += windows
                step = self.state.step
                if not np.isfinite(last["loss"]):
                    raise FloatingPointError(f"loss became {last['loss']} at step {step}")
                elapsed = time.perf_counter() - window_start
                rate = window_frames / elapsed if elapsed > 0 else 0.0
                window_rate = window_windows / elapsed if elapsed > 0 else 0.0
                shown = {"loss": f"{last['loss']:.4g}", "force_mae": f"{last.get('force_mae', float('nan')):.3f} N"}
                if "arm_mae_rad" in last:
                    shown["arm_mae"] = f"{np.degrees(last['arm_mae_rad']):.2f} deg"
                if self.uses_rollouts:
                    shown |= {"rollout": f"{rate:.0f} frames/s", "H": horizon}
                if self.hybrid:
                    shown["windows"] = f"{window_rate:.0f}/s"
                bar.update(step, shown)
                record: dict[str, Any] | None = None
                if step % self.config.log_every == 0 or step == total:
                    record = {"step": step, "split": "train", "horizon": horizon, "frames_per_s": rate,
                              "lr": float(schedule(step)), **last}
                    if self.hybrid:
                        record["windows_per_s"] = window_rate
                    window_start, window_frames, window_windows = time.perf_counter(), 0, 0
                if step % self.config.eval_every == 0 or step == total:
                    val = self.validate()
                    if val:
                        self._emit(metrics_file, {"step": step, "split": "val", "horizon": horizon, **val}, on_metrics)
                        bar.note(f"validation at step {step}: " + ", ".join(
                            f"{k} {val[k]:.4g}" for k in ("force_mae", "gate", "condition", "rollout_arm_mae_rad",
                                                          "arm_mae_rad") if k in val))
                    window_start, window_frames, window_windows = time.perf_counter(), 0, 0
                if record is not None:
                    self._emit(metrics_file, record, on_metrics)
                if self.run_dir is not None and (step % self.config.checkpoint_every == 0 or step == total):
                    self.save()
        finally:
            self.log = previous_log
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
    """``run.json`` of a run directory; a one-line ``ValueError`` when it is unreadable or incomplete."""
    path = Path(run_dir) / RUN_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir} is not a training run directory (no {RUN_FILE})")
    try:
        description = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); the run directory is damaged") from None
    if not isinstance(description, dict):
        raise ValueError(f"{path} is not a JSON object; the run directory is damaged")
    missing = [key for key in ("config", "feature_stats") if key not in description]
    if missing:
        raise ValueError(f"{path} lacks {missing}; was it written by na-train fit?")
    return description


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
        restored = restore_checkpoint(manager, step, abstract, run_dir)
    except BaseException:
        close_briefly(manager)
        raise
    manager.close()
    description["checkpoint_step"] = int(step)
    return nnx.merge(graphdef, restored["ema" if use_ema else "params"], rest), description
