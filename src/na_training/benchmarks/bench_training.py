"""Training throughput of the NeuralActuator through the MJX simulator on this machine.

Frames per second = batch x horizon / wall time of one optimisation step (model + simulator,
forward and backward through the whole rollout, optimiser update), after compilation. Also prints
the forward-only rollout rate and the compile time. Data: synthetic episodes of the arm model.

    python src/na_training/benchmarks/bench_training.py                       # paper config, short run
    python src/na_training/benchmarks/bench_training.py --config tiny --horizon 16
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace
from pathlib import Path

import jax
import numpy as np


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="paper", help="training config: a file or a shipped name (default paper)")
    parser.add_argument("--batch", type=int, default=16, help="batch size (paper: 16)")
    parser.add_argument("--horizon", type=int, default=32,
                        help="rollout horizon (paper curriculum 128-320; shorter keeps CPU compile time down)")
    parser.add_argument("--steps", type=int, default=3, help="timed steps after the compile step")
    parser.add_argument("--no-cache", action="store_true", help="do not use the persistent XLA cache")
    args = parser.parse_args()
    if not args.no_cache:
        jax.config.update("jax_compilation_cache_dir",
                          os.environ.get("NA_JAX_CACHE", str(Path.home() / ".cache" / "na_training" / "jax")))

    from na_training.config import load_config
    from na_training.model import parameter_count
    from na_training.synthetic import synthetic_episode
    from na_training.train import Trainer

    config = load_config(args.config)
    config = replace(config, batch_size=args.batch, curriculum=((0, args.horizon),), eval_every=10**9)
    episodes = [synthetic_episode(args.horizon + 60, seed=s) for s in range(4)]
    trainer = Trainer(config, episodes, run_dir=None)
    frames = args.batch * args.horizon
    print(f"config {args.config}: {parameter_count(trainer.model):,} parameters, batch {args.batch}, horizon "
          f"{args.horizon}, {config.sim.substeps} substeps/frame, sim float64={config.sim.float64}, "
          f"remat={config.sim.remat}, devices {jax.devices()}")

    start = time.perf_counter()
    trainer.step()
    compile_s = time.perf_counter() - start
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        trainer.step()
        times.append(time.perf_counter() - start)
    step_s = float(np.median(times))

    batch = trainer.train_batch(0)
    forward = jax.jit(trainer._loss_impl)
    jax.block_until_ready(forward(trainer.state.params, batch))
    start = time.perf_counter()
    for _ in range(args.steps):
        jax.block_until_ready(forward(trainer.state.params, batch))
    forward_s = (time.perf_counter() - start) / args.steps

    print(f"compile + first step: {compile_s:.1f} s")
    print(f"train step (fwd+bwd+update): {step_s * 1e3:.0f} ms median of {args.steps} -> "
          f"{frames / step_s:.0f} frames/s ({frames / step_s * config.sim.substeps:.0f} sim substeps/s)")
    print(f"forward-only rollout: {forward_s * 1e3:.0f} ms -> {frames / forward_s:.0f} frames/s")


if __name__ == "__main__":
    main()
