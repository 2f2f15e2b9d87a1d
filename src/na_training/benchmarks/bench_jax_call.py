"""What one batch-1 ``jax.jit`` call of the paper-sized NeuralActuator costs, by how the weights reach it.

The speed-up of ONNX Runtime over ``jax.jit`` (issue 28) is only as fair as the JAX call it is measured against.
Three ways of calling the same jitted network on one window, interleaved in rounds on one XLA thread:

* ``nnx.State`` per call: the weights as the ``nnx.State`` that ``nnx.split`` returns, an argument of every call
  (how ``na_training.model.jit_forward`` called the network before; jit flattens that state in Python each time);
* flat weight list per call: the state's leaves as a list of arrays (``jit_forward`` now; flattened in C++);
* weights closed over: the weights are compile-time constants of the jitted function (no weight arguments).

    python src/na_training/benchmarks/bench_jax_call.py [--rounds 12 --calls 400]
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
from bench_model_latency import (  # this folder's model benchmark
    SINGLE_THREAD_XLA_FLAGS,
    jax_forward_closed_over,
    paper_network,
)
from timing import median_time  # this folder's shared timing helper

from na_common.machine import machine_line

REFERENCE = "flat weight list per call (jit_forward)"


def call_forms(seed: int) -> dict:
    """name -> zero-argument callable that runs one batch-1 window through the network (median_time waits for it)."""
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from na_training.model import jit_forward

    model, _ = paper_network(seed=seed)
    shape = (1, model.config.history_length, model.config.num_features)
    window = jnp.asarray(np.random.default_rng(seed).normal(size=shape).astype(np.float32))
    graphdef, state = nnx.split(model)
    state_per_call = jax.jit(lambda weights, features: nnx.merge(graphdef, weights)(features))
    flat_per_call = jit_forward(model)
    closed_over = jax_forward_closed_over(model)
    return {
        "nnx.State per call (before)": lambda: state_per_call(state, window),
        REFERENCE: lambda: flat_per_call(window),
        "weights closed over": lambda: closed_over(window),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds (default 12)")
    parser.add_argument("--calls", type=int, default=400, help="timed calls per form and round (default 400)")
    parser.add_argument("--seed", type=int, default=0, help="weights and window (default 0)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or args.calls < 1:
        print("bench_jax_call: error: --rounds and --calls must be at least 1", file=sys.stderr)
        return 2
    os.environ.setdefault("XLA_FLAGS", SINGLE_THREAD_XLA_FLAGS)
    forms = call_forms(args.seed)
    for call in forms.values():
        median_time(call, 50)                            # compile and warm up
    medians: dict[str, list[float]] = {name: [] for name in forms}
    for r in range(args.rounds):
        for name, call in forms.items():
            medians[name].append(median_time(call, args.calls) * 1e3)
        if sys.stderr.isatty():
            print(f"\rround {r + 1}/{args.rounds}", end="", file=sys.stderr, flush=True)
    if sys.stderr.isatty():
        print(file=sys.stderr)
    print(f"machine: {machine_line()}")
    print(f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}; batch 1, {args.calls} calls per form in each of "
          f"{args.rounds} interleaved rounds; p50 ms per round, then the median of the rounds")
    width = max(len(name) for name in medians)
    reference = np.asarray(medians[REFERENCE])
    for name, values in medians.items():
        # Paired by round: this machine's speed drifts between rounds, a ratio within a round does not.
        ratio = np.median(np.asarray(values) / reference)
        print(f"{name:<{width}}  {np.median(values):.3f}  x{ratio:.2f} of jit_forward's time in the same round  "
              f"({' '.join(f'{v:.3f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
