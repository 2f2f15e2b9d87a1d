"""Runs of the scaling tests, each in its own process (device count and jax.distributed are fixed when JAX
starts): ``python scaling_worker.py MODE OUT [options]`` trains the tiny model a few steps in both recipes
and writes the per-step losses and the final parameters to ``OUT/<mode>[-<process>].npz``.

Modes: ``single`` (plain jit on one device, no mesh: the reference), ``mesh`` (data-parallel over every
visible device), ``process`` (data-parallel over ``--num-processes`` processes joined by jax.distributed).
"""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

STEPS = 3
SEED = 5


def configs():
    """The tiny model in both recipes: one rollout horizon, no validation, the hybrid rollout every 2nd step."""
    from na_training.config import HybridConfig, load_config

    tiny = replace(load_config("tiny"), curriculum=((0, 8),), steps=STEPS, log_every=1, eval_every=10**6,
                   checkpoint_every=STEPS, seed=SEED)
    hybrid = replace(tiny, recipe="hybrid", hybrid=HybridConfig(batch_size=16, torque_weight=5.0, rollout_every=2,
                                                                 augment_temperature=2.0, augment_voltage=0.2))
    return {"rollout": tiny, "hybrid": hybrid}


def episodes():
    from na_training.synthetic import synthetic_episode

    return [synthetic_episode(150, seed=seed) for seed in range(2)]


def flat(tree) -> np.ndarray:
    import jax

    return np.concatenate([np.asarray(leaf, dtype=np.float64).ravel() for leaf in jax.tree.leaves(tree)])


def train(mode: str, out: Path, recipes: list[str], parallel) -> None:
    import jax

    from na_training.train import Trainer

    results: dict[str, np.ndarray] = {}
    for recipe in recipes:
        config = configs()[recipe]
        run_dir = out / f"run-{mode}-{recipe}"
        trainer = Trainer(config, episodes(), run_dir=run_dir, parallel=parallel)
        results[f"{recipe}_initial"] = flat(trainer.state.params)
        records: list[dict] = []
        trainer.fit(resume=False, progress=False, on_metrics=records.append)
        results[f"{recipe}_losses"] = np.array([r["loss"] for r in records if r["split"] == "train"])
        results[f"{recipe}_params"] = flat(trainer.state.params)
        results[f"{recipe}_ema"] = flat(trainer.state.ema)
        if parallel is not None:
            results[f"{recipe}_params_replicated"] = np.array(all(
                leaf.sharding.is_fully_replicated for leaf in jax.tree.leaves(trainer.state.params)))
            command = trainer._rollout_input(0)["command"]
            results[f"{recipe}_batch_devices"] = np.array(len(command.sharding.device_set))
            results[f"{recipe}_batch_rows_here"] = np.array(sum(s.data.shape[0] for s in command.addressable_shards))
        trainer.close()
    if jax.process_index() == 0:
        np.savez(out / f"{mode}.npz", **results)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("single", "mesh", "process"))
    parser.add_argument("out", type=Path)
    parser.add_argument("--recipes", default="rollout,hybrid")
    parser.add_argument("--coordinator")
    parser.add_argument("--num-processes", type=int)
    parser.add_argument("--process-id", type=int)
    args = parser.parse_args()
    if args.mode == "process":
        from na_training.parallel import initialize_distributed

        initialize_distributed(args.coordinator, args.num_processes, args.process_id, timeout_s=120)
    import jax

    jax.config.update("jax_compilation_cache_dir",
                      os.environ.get("NA_JAX_CACHE", str(Path.home() / ".cache" / "na_training" / "jax")))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    from na_training.parallel import DataParallel

    parallel = None if args.mode == "single" else DataParallel()
    train(args.mode, args.out, args.recipes.split(","), parallel)
    print(f"{args.mode}: done on {jax.device_count()} device(s)", file=sys.stderr)


if __name__ == "__main__":
    main()
