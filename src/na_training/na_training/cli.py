"""``na-train``: convert bags to NAD, fit the NeuralActuator through MJX, evaluate, compare, export ONNX.

Each verb's parser comes from its own module; ``fit`` is here and imports its JAX and MuJoCo modules when it
runs.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from na_common.config_files import shipped_names
from na_description import SpecError, load_spec
from na_description.spec import robot_option_help
from na_training import TRAIN_CONFIG_DIR
from na_training.adapt import add_adapt_parser
from na_training.baselines.compare import add_compare_parser
from na_training.convert.cli import add_convert_parser
from na_training.evaluate import add_eval_parser
from na_training.export_cli import add_export_parser
from na_training.lerobot_export import add_export_lerobot_parser
from na_training.lerobot_import import add_import_lerobot_parser
from na_training.monitor_cli import add_monitor_parser
from na_training.nad import NadError, load_nad, read_info, robot_spec

DEFAULT_CONFIG = "tiny"


def enable_compile_cache() -> None:
    """Persist XLA compilations (MJX compiles for minutes on a CPU): ``NA_JAX_CACHE`` or ~/.cache/na_training/jax;
    ``NA_JAX_CACHE=off`` disables it."""
    import os

    import jax

    where = os.environ.get("NA_JAX_CACHE", str(Path.home() / ".cache" / "na_training" / "jax"))
    if where.lower() != "off":
        jax.config.update("jax_compilation_cache_dir", where)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)


def _load_episodes(nad: str) -> tuple[list, list, str]:
    info = read_info(nad)
    train, val = load_nad(nad, "train"), load_nad(nad, "val")
    if not train:
        raise ValueError(f"{nad}: the train split is empty")
    return train, val, str(info.get("dataset_id", ""))


def describe_recipe(config, trainer) -> str:
    """One line on what the run trains and how (printed at the start of ``na-train fit``)."""
    if config.recipe != "hybrid":
        return f"recipe rollout (paper): every head through MJX rollouts, horizon curriculum {list(config.curriculum)}"
    hybrid = config.hybrid
    text = (f"recipe hybrid: force/gate/condition heads on {len(trainer.train_windows):,} recorded windows "
            f"({hybrid.batch_size} per step)")
    if hybrid.rollout_every:
        text += (f"; torque surrogate through MJX rollouts every {hybrid.rollout_every} step(s) from step "
                 f"{hybrid.rollout_start}, batch {config.batch_size}, horizons {list(config.curriculum)}")
    if hybrid.torque_weight > 0:
        text += "; inverse-dynamics warm start of the torque head"
    return text


def describe_parallel(config, parallel) -> str:
    """One line on how the global batch is split (printed at the start of a data-parallel ``na-train fit``)."""
    count = parallel.device_count
    sizes = [f"rollout batch {config.batch_size} ({config.batch_size // count} per device)"]
    if config.recipe == "hybrid":
        sizes.append(f"recorded windows {config.hybrid.batch_size} ({config.hybrid.batch_size // count} per device)")
    return f"data-parallel over {parallel.describe()}: " + ", ".join(sizes)


def start_parallel(args: argparse.Namespace):
    """Join the multi-process run if asked (before any other JAX call); the data-parallel setup of ``--devices``
    (None: one device in one process, plain jit)."""
    from na_training.parallel import DataParallel, initialize_distributed, select_devices  # lazy: jax

    if args.coordinator or args.distributed:
        initialize_distributed(args.coordinator, args.num_processes, args.process_id, args.init_timeout)
    elif args.num_processes is not None or args.process_id is not None:
        raise ValueError("--num-processes and --process-id need --coordinator HOST:PORT")
    import jax

    devices = select_devices(args.devices)
    return DataParallel(devices) if len(devices) > 1 or jax.process_count() > 1 else None


def run_fit(args: argparse.Namespace) -> int:
    from na_training.config import ConfigError, for_robot, load_config  # lazy: jax, flax (its model config)

    try:
        parallel = start_parallel(args)
    except ValueError as err:
        print(f"na-train fit: error: {err}", file=sys.stderr)
        return 2
    enable_compile_cache()
    primary = parallel is None or parallel.is_primary
    try:
        config = load_config(args.config)
        if args.steps is not None:
            config = replace(config, steps=args.steps)
        if args.seed is not None:
            config = replace(config, seed=args.seed)
        spec = robot_spec(read_info(args.nad), args.robot) if args.nad and not args.synthetic else \
            load_spec(args.robot)
        config = for_robot(config, spec)
        if args.synthetic:
            if spec.name != load_spec().name:
                raise ValueError("--synthetic episodes are simulated on the OpenManipulator-X only")
            from na_training.synthetic import synthetic_episode  # lazy: mujoco

            train = [synthetic_episode(args.synthetic_frames, seed=1000 + k) for k in range(args.synthetic)]
            val = [synthetic_episode(args.synthetic_frames, seed=2000 + k) for k in range(max(1, args.synthetic // 8))]
            dataset_id = f"synthetic-{args.synthetic}x{args.synthetic_frames}"
        elif args.nad:
            train, val, dataset_id = _load_episodes(args.nad)
        else:
            print("na-train fit: error: give --nad NAD (or --synthetic N for a self-check)", file=sys.stderr)
            return 2
        config = replace(config, dataset_id=dataset_id)
        from na_training.model import parameter_count  # lazy: jax, flax
        from na_training.train import Trainer  # lazy: jax, mujoco, orbax

        quiet = args.quiet or not primary       # several processes: process 0 speaks for all
        log = None if quiet else print
        if log and config.recipe == "hybrid" and config.hybrid.torque_weight > 0:
            log("computing inverse-dynamics torque labels and recorded windows ...")
        trainer = Trainer(config, train, val, run_dir=args.out, spec=spec, log=log, parallel=parallel)
        if primary:
            print(f"NeuralActuator: {parameter_count(trainer.model):,} parameters; {len(train)} train / {len(val)} "
                  f"val episodes; {describe_recipe(config, trainer)}; run directory {args.out}")
            if parallel is not None:
                print(describe_parallel(config, parallel))
        try:
            last = trainer.fit(resume=not args.no_resume, progress=not quiet)
        finally:
            trainer.close()     # also on an error: Orbax's background tasks must end before the interpreter
    except (ConfigError, NadError, SpecError, ValueError, FileNotFoundError, FloatingPointError) as err:
        print(f"na-train fit: error: {err}", file=sys.stderr)
        return 2
    if last and primary:
        parts = [f"step {trainer.state.step}", f"loss {last['loss']:.4g}"]
        if "force_mae" in last:
            parts.append(f"force MAE {last['force_mae']:.4g} N")
        arm = last.get("arm_mae_rad", last.get("rollout_arm_mae_rad"))
        if arm is not None:
            parts.append(f"rollout arm MAE {np.degrees(arm):.3g} deg")
        print("done: " + ", ".join(parts))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="na-train", description="NeuralActuator training tools: bag -> NAD conversion, training through "
                                     "differentiable MuJoCo MJX, evaluation, comparison with the classical "
                                     "baselines, ONNX export.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_convert_parser(sub)

    fit = sub.add_parser("fit", help="train a NeuralActuator on a NAD dataset",
                         description="Train the NeuralActuator Transformer: the torque surrogate by back-propagating "
                                     "pose losses through MJX rollouts, the force/gate/condition heads supervised "
                                     "directly (inside the rollout, recipe 'rollout', or on recorded windows, recipe "
                                     "'hybrid'). Resumes from the latest checkpoint in --out unless --no-resume.")
    shipped = ", ".join(shipped_names(TRAIN_CONFIG_DIR))
    fit.add_argument("--config", default=DEFAULT_CONFIG,
                     help=f"training config: a YAML file or a shipped name ({shipped}; default {DEFAULT_CONFIG}; "
                          "'paper' is the paper-sized model for a GPU)")
    fit.add_argument("--nad", help="NAD dataset directory (train and val splits are used)")
    fit.add_argument("--robot", help=robot_option_help("default: the NAD's robot; given, it must match it"))
    fit.add_argument("--out", required=True, help="run directory: run.json, metrics.jsonl, checkpoints/")
    fit.add_argument("--steps", type=int, help="total optimisation steps (overrides the config)")
    fit.add_argument("--seed", type=int, help="random seed (overrides the config)")
    fit.add_argument("--no-resume", action="store_true", help="start from scratch even if --out has checkpoints")
    fit.add_argument("--synthetic", type=int, default=0, metavar="N",
                     help="train on N synthetic episodes from the simulator instead of a NAD (self-check)")
    fit.add_argument("--synthetic-frames", type=int, default=400, help="frames per synthetic episode (default 400)")
    fit.add_argument("--quiet", action="store_true",
                     help="no progress output (default: a bar on a terminal, a line every few seconds otherwise)")
    scaling = fit.add_argument_group("scaling (data-parallel over devices and processes; see TRAINING.md, Scaling)")
    scaling.add_argument("--devices", type=int, metavar="N",
                         help="devices to split each batch over (default: all visible; the batch sizes must be "
                              "multiples of N)")
    scaling.add_argument("--coordinator", metavar="HOST:PORT",
                         help="multi-process run: address of process 0 (it listens there), with --num-processes and "
                              "--process-id")
    scaling.add_argument("--num-processes", type=int, metavar="N", help="processes in the run (with --coordinator)")
    scaling.add_argument("--process-id", type=int, metavar="I", help="this process, 0 .. N-1 (with --coordinator)")
    scaling.add_argument("--distributed", action="store_true",
                         help="multi-process run set up from the cluster environment JAX detects (SLURM, Open MPI)")
    scaling.add_argument("--init-timeout", type=float, default=300.0, metavar="S",
                         help="seconds to wait for the coordinator and the other processes (default 300)")
    fit.set_defaults(handler=run_fit)

    add_export_parser(sub)

    add_eval_parser(sub)
    add_compare_parser(sub)
    add_monitor_parser(sub)
    add_adapt_parser(sub)
    add_import_lerobot_parser(sub)
    add_export_lerobot_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.handler(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
