"""One simulator frame of each robot with XLA's CPU fusion emitters on and off (why na_training turns them off).

Each robot's differentiable arm (``na_training.rollout.ArmSimulator``, float32, a batch of 16 states) advances
one data frame (4 MuJoCo substeps on the OpenManipulator-X, 5 on the SO-101) under ``jax.jit``; the median of
``--repeats`` calls is printed per robot and setting. Each setting runs in a fresh process, because XLA reads
``XLA_FLAGS`` only when its CPU backend starts.

    python src/na_training/benchmarks/bench_xla_cpu_emitters.py
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

from na_common.machine import machine_line

ROBOTS = ("open_manipulator_x", "so101")
SETTINGS = {"fusion emitters off (na_training default)": "--xla_cpu_use_fusion_emitters=false",
            "fusion emitters on (XLA default)": "--xla_cpu_use_fusion_emitters=true"}
BATCH = 16


def time_frames(robot: str, repeats: int) -> float:
    """Median ms of one jitted batched frame of ``robot`` (run in the child process)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from na_description import load_spec
    from na_training.config import SimConfig
    from na_training.rollout import ArmSimulator

    simulator = ArmSimulator(load_spec(robot), SimConfig(float64=False, remat=False))
    model = simulator.mj_model
    advance = jax.jit(jax.vmap(simulator.advance_coordinates))
    qpos = jnp.zeros((BATCH, model.nq), jnp.float32)
    qvel = jnp.zeros((BATCH, model.nv), jnp.float32)
    torque = jnp.zeros((BATCH, simulator.spec.n_motors), jnp.float32)
    jax.block_until_ready(advance(qpos, qvel, torque))            # compile
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        jax.block_until_ready(advance(qpos, qvel, torque))
        times.append(time.perf_counter() - began)
    return float(np.median(times) * 1e3)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=30, help="timed calls per robot and setting (default 30)")
    parser.add_argument("--child", nargs=2, metavar=("ROBOT", "REPEATS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(f"{time_frames(args.child[0], int(args.child[1])):.3f}")
        return 0
    print(f"machine: {machine_line()}; one frame, batch {BATCH}, float32, median of {args.repeats}")
    results: dict[str, dict[str, float]] = {}
    for label, flag in SETTINGS.items():
        other = " ".join(f for f in os.environ.get("XLA_FLAGS", "").split() if "xla_cpu_use_fusion_emitters" not in f)
        env = {**os.environ, "XLA_FLAGS": f"{other} {flag}".strip()}
        for robot in ROBOTS:
            out = subprocess.run([sys.executable, __file__, "--child", robot, str(args.repeats)], env=env,
                                 capture_output=True, text=True, check=True)
            results.setdefault(robot, {})[label] = float(out.stdout.strip().splitlines()[-1])
            print(f"  {robot:<20} {label:<42} {results[robot][label]:8.3f} ms", flush=True)
    off, on = SETTINGS
    for robot, row in results.items():
        print(f"  {robot}: emitters on / off = {row[on] / row[off]:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
