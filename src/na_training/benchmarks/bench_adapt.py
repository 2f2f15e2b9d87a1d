"""Adaptation time on this machine beside the paper's (Sec. IV-E: 70 epochs over 7,810 frames in 356 s on a GPU).

Builds an adaptation set of the paper's size from simulated episodes (12 trajectories, ~7,800 frames),
plans the fine-tuning exactly as ``na-train adapt`` does (``na_training.adapt.adaptation_plan``), times
``--steps`` optimisation steps after compilation and extrapolates to the plan's step count. Prints the
machine, the per-step time and the projected 70-epoch time for each config:

    python src/na_training/benchmarks/bench_adapt.py                       # paper and cpu configs
    python src/na_training/benchmarks/bench_adapt.py --configs cpu --steps 20
"""

from __future__ import annotations

import argparse
import time

from na_common.machine import machine_line

PAPER_SECONDS = 356.0
PAPER_FRAMES = 7_810
TRAJECTORIES = 12


def measure(config_name: str, steps: int, epochs: int) -> dict:
    import jax

    from na_training.adapt import adaptation_plan
    from na_training.config import load_config
    from na_training.synthetic import synthetic_episode
    from na_training.train import Trainer

    frames_each = PAPER_FRAMES // TRAJECTORIES
    episodes = [synthetic_episode(frames_each, seed=500 + k) for k in range(TRAJECTORIES)]
    base = load_config(config_name)
    config, steps_per_epoch = adaptation_plan(base, sum(len(e) for e in episodes), epochs,
                                              min(len(e) for e in episodes), None)
    trainer = Trainer(config, episodes, run_dir=None)
    start = time.perf_counter()
    trainer.step()                                        # compiles (the first step of each kind)
    trainer.step()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(steps):
        trainer.step()
    jax.block_until_ready(trainer.state.params)
    per_step = (time.perf_counter() - start) / steps
    trainer.close()
    total_steps = epochs * steps_per_epoch
    return {"config": config_name, "devices": str(jax.devices()), "per_step_s": per_step, "compile_s": compile_s,
            "steps": total_steps, "steps_per_epoch": steps_per_epoch, "projected_s": per_step * total_steps,
            "horizon": config.max_horizon, "batch": config.batch_size}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=["paper", "cpu"], help="training configs (default paper cpu)")
    parser.add_argument("--steps", type=int, default=10, help="timed steps after the compile (default 10)")
    parser.add_argument("--epochs", type=int, default=70, help="epochs of the plan (default 70, the paper's)")
    args = parser.parse_args()
    print(f"machine: {machine_line()}")
    print(f"adaptation set: {TRAJECTORIES} simulated trajectories, {PAPER_FRAMES // TRAJECTORIES * TRAJECTORIES} "
          f"frames; paper: {PAPER_FRAMES} frames, {args.epochs} epochs in {PAPER_SECONDS:.0f} s (GPU)")
    for name in args.configs:
        result = measure(name, args.steps, args.epochs)
        print(f"{name}: {result['steps']} steps ({result['steps_per_epoch']}/epoch, batch {result['batch']} x "
              f"horizon {result['horizon']}), {result['per_step_s'] * 1e3:.0f} ms/step after a "
              f"{result['compile_s']:.0f} s compile -> {result['projected_s']:.0f} s for {args.epochs} epochs "
              f"({result['projected_s'] / PAPER_SECONDS:.2f}x the paper's {PAPER_SECONDS:.0f} s); {result['devices']}")
    print(f"machine at the end: {machine_line()}")


if __name__ == "__main__":
    main()
