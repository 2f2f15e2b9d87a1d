"""Training throughput through the MJX simulator on this machine, before and after in one run.

Frames per second = batch x horizon / wall time of one rollout loss + gradient evaluation (model and
simulator, forward and backward through the whole horizon), after compilation; median of ``--steps``.

- **before**: the rollout as configured before the hybrid recipe: every head inside the rollout
  (recipe ``rollout``), simulator in float64, ``jax.checkpoint`` on every frame;
- **after**: the config's recipe and simulator settings (``cpu.yaml``: only the torque
  path in the rollout, float32, no remat), at the same model size, batch and horizon.

Each runs in its own process (float64 is a process-wide JAX switch). Also printed: where the time of
an ``after`` step goes (the same rollout with the simulator replaced by a plain integrator = model
share; a rollout with fixed torques = simulator share), the recorded-window step of the hybrid recipe
(windows/s), and the float32 simulator's drift from CPU MuJoCo (float64) under the same torques.
Other jobs on the machine slow both sides alike; compare the two numbers of one run.

    python src/na_training/benchmarks/bench_training.py                           # cpu.yaml, batch 16, H 32
    python src/na_training/benchmarks/bench_training.py --config paper
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from dataclasses import replace

from timing import median_time  # this folder's shared timing helper


def measure(args: argparse.Namespace, side: str) -> dict:
    """One side of the comparison, in this process."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    if not args.no_cache:
        from na_training.cli import enable_compile_cache

        enable_compile_cache()
    from na_training.config import load_config
    from na_training.model import parameter_count
    from na_training.rollout import rollout
    from na_training.synthetic import TORQUE_PER_AMP, synthetic_episode
    from na_training.train import Trainer

    config = load_config(args.config)
    if side == "before":
        config = replace(config, recipe="rollout", sim=replace(config.sim, float64=True, remat=True))
    config = replace(config, batch_size=args.batch, curriculum=((0, args.horizon),), eval_every=10**9)
    episodes = [synthetic_episode(args.horizon + 60, seed=s) for s in range(4)]
    trainer = Trainer(config, episodes, run_dir=None)
    batch = trainer.train_batch(0)
    params = trainer.state.params
    frames = args.batch * args.horizon
    result = {"side": side, "parameters": parameter_count(trainer.model), "recipe": config.recipe,
              "float64": config.sim.float64, "remat": config.sim.remat,
              "heads_in_rollout": config.recipe == "rollout" or config.hybrid.rollout_heads}
    start = time.perf_counter()
    jax.block_until_ready(trainer._loss_and_grad(params, batch))
    result["compile_s"] = time.perf_counter() - start
    step_s = median_time(lambda: trainer._loss_and_grad(params, batch), args.steps)
    result["frames_per_s"] = frames / step_s
    forward = jax.jit(trainer._loss_impl)
    jax.block_until_ready(forward(params, batch))
    result["forward_frames_per_s"] = frames / median_time(lambda: forward(params, batch), args.steps)
    if side == "before":
        return result

    # Where the time goes: the model part (simulator swapped for a plain integrator) and the simulator part.
    simulator = trainer.simulator
    heads = result["heads_in_rollout"]

    def plain(qpos, qvel, torque):
        qvel = qvel.at[simulator.dof_index].add(simulator.spec.frame_period * torque.astype(qvel.dtype))
        return qpos + simulator.spec.frame_period * qvel, qvel

    real = simulator.advance_coordinates
    simulator.advance_coordinates = plain
    model_only = jax.jit(jax.grad(lambda p, b: jnp.sum(rollout(trainer.graphdef, p, trainer.rest, simulator, b,
                                                               heads=heads)["qpos"])))
    jax.block_until_ready(model_only(params, batch))
    result["model_share_s"] = median_time(lambda: model_only(params, batch), args.steps)
    simulator.advance_coordinates = real

    def simulate(torques, qpos0):
        state = jax.vmap(simulator.initial_state)(qpos0, jnp.zeros_like(qpos0))

        def frame(carry, torque):
            qpos, qvel = jax.vmap(simulator.advance_coordinates)(carry[0], carry[1], torque)
            return (qpos, qvel), qpos[:, simulator.qpos_index]
        return jax.lax.scan(frame, (state.qpos, state.qvel), torques)[1]

    torques = jnp.zeros((args.horizon, args.batch, simulator.spec.n_motors), simulator.dtype)
    sim_grad = jax.jit(jax.grad(lambda t, q: jnp.sum(simulate(t, q))))
    qpos0 = jnp.asarray(batch["qpos0"], simulator.dtype)
    jax.block_until_ready(sim_grad(torques, qpos0))
    result["simulator_share_s"] = median_time(lambda: sim_grad(torques, qpos0), args.steps)
    result["step_s"] = step_s

    if trainer.hybrid:
        supervised = trainer.supervised_batch(0)
        weight = jnp.float32(1.0)
        jax.block_until_ready(trainer._supervised_grad(params, supervised, weight))
        window_s = median_time(lambda: trainer._supervised_grad(params, supervised, weight), args.steps)
        result["windows_per_s"] = config.hybrid.batch_size / window_s

    # float32 drift: the synthetic episode was made by CPU MuJoCo (float64) under known torques.
    episode = synthetic_episode(args.drift_frames + 20, seed=11)
    def trajectory(torques, qpos, qvel):
        def frame(carry, torque):
            carry = simulator.advance_coordinates(carry[0], carry[1], torque)
            return carry, carry[0][simulator.qpos_index]
        return jax.lax.scan(frame, (qpos, qvel), torques)[1]

    one = jax.jit(trajectory)
    state = simulator.initial_state(jnp.asarray(episode.qpos[0]), jnp.asarray(episode.qvel[0]))
    qpos = np.asarray(one(jnp.asarray(episode.effort[:args.drift_frames] * TORQUE_PER_AMP, simulator.dtype),
                          state.qpos, state.qvel))
    drift = np.abs(qpos - episode.qpos[1:args.drift_frames + 1])[:, :simulator.spec.n_arm]
    result["drift_deg"] = float(np.degrees(drift.max()))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="cpu", help="training config: a file or a shipped name (default cpu)")
    parser.add_argument("--batch", type=int, default=16, help="rollout batch (default 16)")
    parser.add_argument("--horizon", type=int, default=32, help="rollout horizon (default 32)")
    parser.add_argument("--steps", type=int, default=5, help="timed evaluations after the compile (median)")
    parser.add_argument("--drift-frames", type=int, default=100, help="frames of the float32 drift check")
    parser.add_argument("--no-cache", action="store_true", help="do not use the persistent XLA cache")
    parser.add_argument("--side", choices=("before", "after"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.side:
        print(json.dumps(measure(args, args.side)))
        return
    results = {}
    for side in ("before", "after"):
        command = [sys.executable, __file__, "--side", side, "--config", args.config, "--batch", str(args.batch),
                   "--horizon", str(args.horizon), "--steps", str(args.steps), "--drift-frames", str(args.drift_frames)]
        if args.no_cache:
            command.append("--no-cache")
        print(f"[bench] measuring {side} ...", flush=True)
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results[side] = json.loads(output.strip().splitlines()[-1])
    before, after = results["before"], results["after"]
    frames = args.batch * args.horizon
    print(f"config {args.config}: {after['parameters']:,} parameters, batch {args.batch}, horizon {args.horizon}")
    for r in (before, after):
        print(f"  {r['side']:6s}: recipe {r['recipe']}, heads in rollout {r['heads_in_rollout']}, sim float64 "
              f"{r['float64']}, remat {r['remat']}: {r['frames_per_s']:.0f} frames/s train (fwd+bwd), "
              f"{r['forward_frames_per_s']:.0f} forward only; compile {r['compile_s']:.0f} s")
    print(f"  speed-up: {after['frames_per_s'] / before['frames_per_s']:.1f}x train, "
          f"{after['forward_frames_per_s'] / before['forward_frames_per_s']:.1f}x forward")
    print(f"  after, per step of {frames} frames: {after['step_s'] * 1e3:.0f} ms; model part (plain integrator "
          f"instead of MJX) {after['model_share_s'] * 1e3:.0f} ms, simulator part (fixed torques) "
          f"{after['simulator_share_s'] * 1e3:.0f} ms")
    if "windows_per_s" in after:
        print(f"  recorded-window step: {after['windows_per_s']:.0f} windows/s")
    print(f"  float32 simulator vs CPU MuJoCo float64 under the same torques: max joint drift "
          f"{after['drift_deg']:.2g} deg over {args.drift_frames} frames")


if __name__ == "__main__":
    main()
