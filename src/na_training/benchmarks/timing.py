"""Shared by the training benchmarks: the median wall time of a JAX call, finished on the device."""

from __future__ import annotations

import time
from collections.abc import Callable


def median_time(function: Callable[[], object], repeats: int) -> float:
    """Median seconds of ``repeats`` calls of ``function`` (each waited for with ``jax.block_until_ready``)."""
    import jax

    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(function())
        times.append(time.perf_counter() - start)
    times.sort()
    return times[len(times) // 2]
