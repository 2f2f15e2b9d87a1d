"""Data-parallel scaling of the training steps: 1 device against N devices on this machine.

Weak scaling, the way data-parallel training is used: each device keeps ``--per-device-batch`` rollout
windows and ``--per-device-windows`` recorded windows, so N devices train on an N times larger global batch.
Measured after compilation, median of ``--steps``:

- rollout frames/s = global rollout batch x horizon / time of one rollout loss + gradient (model and MJX
  simulator, forward and backward over the horizon, gradient all-reduce);
- windows/s = global recorded-window batch / time of one recorded-window loss + gradient (hybrid recipe);
- scaling efficiency = rate on N devices / (N x rate on 1 device).

Each device count runs in its own process. On a CPU-only machine the N devices are forced host devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``) sharing the same cores, so expect little gain there;
on a GPU machine the same code uses the real GPUs.

    python src/na_training/benchmarks/bench_scaling.py                          # cpu.yaml, 1 vs 2 devices
    python src/na_training/benchmarks/bench_scaling.py --config paper --devices 1,8
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from dataclasses import replace

from timing import median_time  # this folder's shared timing helper

from na_common.machine import machine_line


def measure(args: argparse.Namespace, devices: int) -> dict:
    """Throughput on ``devices`` devices, in this process."""
    import jax

    if not args.no_cache:
        from na_training.cli import enable_compile_cache

        enable_compile_cache()
    from na_training.config import load_config
    from na_training.parallel import DataParallel, select_devices
    from na_training.synthetic import synthetic_episode
    from na_training.train import Trainer

    config = load_config(args.config)
    config = replace(config, recipe="hybrid", batch_size=args.per_device_batch * devices,
                     curriculum=((0, args.horizon),), eval_every=10**9,
                     hybrid=replace(config.hybrid, batch_size=args.per_device_windows * devices, rollout_every=1))
    episodes = [synthetic_episode(args.horizon + 200, seed=s) for s in range(4)]
    parallel = DataParallel(select_devices(devices))
    trainer = Trainer(config, episodes, parallel=parallel)
    params = trainer.state.params
    result = {"devices": devices, "device_kind": jax.devices()[0].device_kind, "platform": jax.devices()[0].platform,
              "rollout_batch": config.batch_size, "windows_batch": config.hybrid.batch_size}

    batch = trainer._rollout_input(0)
    start = time.perf_counter()
    jax.block_until_ready(trainer._loss_and_grad(params, batch))
    result["rollout_compile_s"] = time.perf_counter() - start
    step_s = median_time(lambda: trainer._loss_and_grad(params, batch), args.steps)
    result["frames_per_s"] = config.batch_size * args.horizon / step_s

    supervised = trainer._supervised_input(0)
    weight = trainer._scalar(0.0)
    jax.block_until_ready(trainer._supervised_grad(params, supervised, weight))
    window_s = median_time(lambda: trainer._supervised_grad(params, supervised, weight), args.steps)
    result["windows_per_s"] = config.hybrid.batch_size / window_s
    return result


def machine() -> str:
    return f"{platform.node()}: {machine_line()}, Python {platform.python_version()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="cpu", help="training config: a file or a shipped name (default cpu)")
    parser.add_argument("--devices", default="1,2", help="device counts to compare (default 1,2)")
    parser.add_argument("--per-device-batch", type=int, default=8, help="rollout windows per device (default 8)")
    parser.add_argument("--per-device-windows", type=int, default=1024,
                        help="recorded windows per device (default 1024)")
    parser.add_argument("--horizon", type=int, default=32, help="rollout horizon (default 32)")
    parser.add_argument("--steps", type=int, default=5, help="timed evaluations after the compile (median)")
    parser.add_argument("--no-cache", action="store_true", help="do not use the persistent XLA cache")
    parser.add_argument("--measure", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args, args.measure)))
        return
    counts = [int(c) for c in args.devices.split(",")]
    print(machine())
    forced = not _has_accelerator()          # CPU only: N forced host devices on the same cores
    results = []
    for count in counts:
        command = [sys.executable, __file__, "--measure", str(count), "--config", args.config,
                   "--per-device-batch", str(args.per_device_batch), "--per-device-windows",
                   str(args.per_device_windows), "--horizon", str(args.horizon), "--steps", str(args.steps)]
        if args.no_cache:
            command.append("--no-cache")
        env = dict(os.environ)
        if forced:
            env["XLA_FLAGS"] = f"{env.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}".strip()
        print(f"[bench] measuring {count} device(s) ...", flush=True)
        output = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
        results.append(json.loads(output.strip().splitlines()[-1]))
    base = results[0]
    print(f"config {args.config} (hybrid steps), horizon {args.horizon}, per device: {args.per_device_batch} rollout "
          f"windows, {args.per_device_windows} recorded windows; devices: {base['platform'].upper()} "
          f"({base['device_kind']})")
    for r in results:
        scale = r["devices"] / base["devices"]
        print(f"  {r['devices']} device(s): {r['frames_per_s']:8.0f} rollout frames/s (efficiency "
              f"{r['frames_per_s'] / (scale * base['frames_per_s']):.0%}), {r['windows_per_s']:8.0f} windows/s "
              f"(efficiency {r['windows_per_s'] / (scale * base['windows_per_s']):.0%}); global batch "
              f"{r['rollout_batch']} / {r['windows_batch']}, rollout compile {r['rollout_compile_s']:.0f} s")


def _has_accelerator() -> bool:
    """Whether JAX sees a GPU/TPU (asked in a child process, so this one stays free to set XLA_FLAGS)."""
    probe = "import jax; print(jax.default_backend())"
    backend = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.strip()
    return backend not in ("", "cpu")


if __name__ == "__main__":
    main()
