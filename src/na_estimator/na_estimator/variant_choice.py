"""Which inference variant of a model package the estimator runs, decided on the machine it runs on.

Pure logic (no ONNX Runtime here): ``auto`` takes the cached choice for this key, else times the variants
(an injected ``measure``) and takes the fastest batch-1 p50, and remembers it; a variant name forces that one.
The exporter's own timing is not used: it was measured on the exporting machine (often a GPU workstation),
and which int8 kernels are fastest depends on the CPU's instruction sets (src/na_estimator/benchmarks/README.md).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from na_estimator.variant_cache import CacheKey, VariantCache

AUTO = "auto"
TIMING_BUDGET_S = 1.0          # start-up timing of all variants together (the loads come on top)
TIMING_CALLS = 20              # calls per variant and round
WARMUP_CALLS = 10

Measure = Callable[[Sequence[str]], Mapping[str, float]]


class VariantChoiceError(ValueError):
    """A forced variant that the package does not have (one line)."""


@dataclass(frozen=True)
class VariantChoice:
    variant: str
    how: str                                   # forced | only | cached | timed
    timings_ms: dict[str, float] = field(default_factory=dict)
    note: str = ""                             # where the choice is cached, or why it could not be

    def describe(self) -> str:
        """One line for the log and /diagnostics: the choice and why."""
        timings = ", ".join(f"{name} {ms:.3f}" for name, ms in sorted(self.timings_ms.items(), key=lambda kv: kv[1]))
        why = {"forced": "forced by the inference_variant parameter",
               "only": "the only variant in the package",
               "cached": f"cached choice for this CPU (batch-1 p50 ms: {timings})",
               "timed": f"fastest timed here (batch-1 p50 ms: {timings})"}[self.how]
        return f"inference variant {self.variant}: {why}" + (f"; {self.note}" if self.note else "")


def fastest(timings_ms: Mapping[str, float]) -> str:
    """The variant with the lowest time (the first listed on a tie)."""
    return min(timings_ms, key=lambda name: timings_ms[name])


def choose_variant(requested: str, available: Sequence[str], measure: Measure, cache: VariantCache | None = None,
                   key: CacheKey | None = None) -> VariantChoice:
    """The variant to run: ``requested`` (a name, or ``auto``) among ``available`` (the package's variants that
    are present on disk). ``auto`` with one variant takes it; else a cached choice for ``key`` that is still
    available; else ``measure(available)`` (batch-1 ms per variant) picks the fastest, stored under ``key``."""
    if requested != AUTO:
        if requested not in available:
            raise VariantChoiceError(f"inference_variant '{requested}' is not available in this model package "
                                     f"(available: {', '.join(available) or 'none'}; or 'auto')")
        return VariantChoice(requested, "forced")
    if not available:
        raise VariantChoiceError("no inference variant of this model package is available")
    if len(available) == 1:
        return VariantChoice(available[0], "only")
    if cache is not None and key is not None:
        cached = cache.get(key)
        if cached is not None and cached.variant in available:
            return VariantChoice(cached.variant, "cached", cached.timings_ms, f"from {cache.path}")
    timings = {name: float(ms) for name, ms in measure(available).items() if name in available}
    if not timings:
        raise VariantChoiceError("timing gave no figure for any variant")
    chosen = fastest(timings)
    note = ""
    if cache is not None and key is not None:
        problem = cache.put(key, chosen, timings)
        note = problem or f"cached in {cache.path}"
    return VariantChoice(chosen, "timed", timings, note)


def time_calls(calls: Mapping[str, Callable[[], object]], budget_s: float = TIMING_BUDGET_S,
               calls_per_round: int = TIMING_CALLS, warmup: int = WARMUP_CALLS,
               clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """Batch-1 ms per variant: rounds of ``calls_per_round`` calls each, interleaved across the variants, until
    ``budget_s`` is spent (at least one round); a variant's figure is the median of its round medians, an
    estimate of the p50 the estimator will see (a shared machine slows some rounds, and interleaving spreads
    that over all variants). The lowest round median, used before, favoured a variant with occasional fast
    rounds: on a CPU without AVX-512 it picked fp32 at 0.763 ms over int8-mixed at 0.795 ms, whose p50 over
    5,000 calls was 6 % lower."""
    for call in calls.values():
        for _ in range(warmup):
            call()
    rounds: dict[str, list[float]] = {name: [] for name in calls}
    start = clock()
    while True:
        for name, call in calls.items():
            samples = np.empty(calls_per_round)
            for k in range(calls_per_round):
                began = clock()
                call()
                samples[k] = clock() - began
            rounds[name].append(float(np.median(samples)) * 1e3)
        if clock() - start >= budget_s:
            return {name: float(np.median(medians)) for name, medians in rounds.items()}
