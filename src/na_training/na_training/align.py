"""Time alignment of recorded streams onto frame stamps (pure numpy, integer nanoseconds).

Every function takes sorted source stamps (ns), the source values (first axis = samples) and the
target frame stamps (ns), and returns the values at the targets plus a mask saying where the
stated tolerance was met. Nothing here knows about ROS messages.
"""

from __future__ import annotations

import numpy as np

NS_PER_S = 1_000_000_000


class AlignmentError(ValueError):
    """Stamps that cannot be aligned (not monotonic, wrong shapes)."""


def check_monotonic(stamps: np.ndarray, what: str, strict: bool) -> None:
    """Raise if ``stamps`` decrease (or repeat, when ``strict``), naming the first offending sample."""
    stamps = np.asarray(stamps, dtype=np.int64)
    steps = np.diff(stamps)
    bad = np.flatnonzero(steps <= 0 if strict else steps < 0)
    if bad.size:
        k = int(bad[0]) + 1
        kind = "does not increase" if strict else "goes backwards"
        raise AlignmentError(f"{what}: stamp {kind} at message {k} ({int(stamps[k - 1])} ns -> {int(stamps[k])} ns; "
                             f"{bad.size} such step(s)); stamps must be monotonic")


def uniform_grid(start_ns: int, stop_ns: int, period_ns: int) -> np.ndarray:
    """Stamps ``start + k * period`` up to and including ``stop``."""
    if period_ns <= 0:
        raise AlignmentError(f"resampling period must be positive, got {period_ns} ns")
    count = (int(stop_ns) - int(start_ns)) // int(period_ns) + 1
    return int(start_ns) + np.arange(max(count, 0), dtype=np.int64) * int(period_ns)


def hold_within(stamps: np.ndarray, values: np.ndarray, targets: np.ndarray, tolerance_ns: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Latest sample at or before each target, accepted when it is at most ``tolerance_ns`` old.

    Returns ``(values_at_targets, ok)``; where no sample is that recent, the latest older sample
    is still held (NaN before the first sample) and ``ok`` is False.
    """
    values = np.asarray(values)
    index = np.searchsorted(stamps, targets, side="right") - 1
    have = index >= 0
    safe = np.clip(index, 0, None)
    age = np.where(have, np.asarray(targets, dtype=np.int64) - np.asarray(stamps, dtype=np.int64)[safe], -1)
    ok = have & (age <= tolerance_ns)
    out = values[safe].astype(np.float64) if len(values) else np.full((len(targets), *values.shape[1:]), np.nan)
    out[~have] = np.nan
    return out, ok


def hold_state(stamps: np.ndarray, values: np.ndarray, targets: np.ndarray, default: float) -> np.ndarray:
    """Latest sample at or before each target with no age limit (a state topic such as a Bool flag)."""
    values = np.asarray(values, dtype=np.float64)
    index = np.searchsorted(stamps, targets, side="right") - 1
    if not len(values):
        return np.full(len(targets), default)
    return np.where(index >= 0, values[np.clip(index, 0, None)], default)


def window_mean(stamps: np.ndarray, values: np.ndarray, targets: np.ndarray, half_window_ns: int
                ) -> tuple[np.ndarray, np.ndarray]:
    """Mean of the samples with ``|stamp - target| <= half_window_ns``, per channel.

    Non-finite samples are left out channel by channel. Returns ``(mean [T, C], ok [T, C])``;
    ``ok`` is False (and the mean NaN) where a channel had no finite sample in the window.
    """
    values = np.asarray(values, dtype=np.float64).reshape(len(stamps), -1)
    targets = np.asarray(targets, dtype=np.int64)
    lo = np.searchsorted(stamps, targets - half_window_ns, side="left")
    hi = np.searchsorted(stamps, targets + half_window_ns, side="right")
    finite = np.isfinite(values)
    sums = np.vstack([np.zeros((1, values.shape[1])), np.cumsum(np.where(finite, values, 0.0), axis=0)])
    counts = np.vstack([np.zeros((1, values.shape[1])), np.cumsum(finite, axis=0)])
    n = counts[hi] - counts[lo]
    ok = n > 0
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = np.where(ok, (sums[hi] - sums[lo]) / np.maximum(n, 1), np.nan)
    return mean, ok


def nearest_within(stamps: np.ndarray, values: np.ndarray, targets: np.ndarray, tolerance_ns: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Nearest sample (earlier on a tie) to each target, accepted within ``tolerance_ns``."""
    values = np.asarray(values, dtype=np.float64)
    targets = np.asarray(targets, dtype=np.int64)
    if not len(stamps):
        return np.full((len(targets), *values.shape[1:]), np.nan), np.zeros(len(targets), dtype=bool)
    stamps = np.asarray(stamps, dtype=np.int64)
    after = np.clip(np.searchsorted(stamps, targets, side="left"), 0, len(stamps) - 1)
    before = np.clip(after - 1, 0, None)
    pick = np.where(np.abs(stamps[before] - targets) <= np.abs(stamps[after] - targets), before, after)
    ok = np.abs(stamps[pick] - targets) <= tolerance_ns
    out = values[pick].copy()
    out[~ok] = np.nan
    return out, ok


def interpolate_linear(stamps: np.ndarray, values: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Linear interpolation between the bracketing samples (targets must lie inside the stamp span)."""
    stamps = np.asarray(stamps, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    hi = np.clip(np.searchsorted(stamps, targets, side="left"), 1, len(stamps) - 1) if len(stamps) > 1 else None
    if hi is None:
        return np.repeat(values[:1], len(targets), axis=0)
    lo = hi - 1
    span = (stamps[hi] - stamps[lo]).astype(np.float64)
    weight = ((np.asarray(targets, dtype=np.int64) - stamps[lo]) / span).reshape(-1, *([1] * (values.ndim - 1)))
    return values[lo] * (1.0 - weight) + values[hi] * weight


def bracket_gap(stamps: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """Duration (ns) between the samples that bracket each target (0 where a sample hits it exactly)."""
    stamps = np.asarray(stamps, dtype=np.int64)
    targets = np.asarray(targets, dtype=np.int64)
    hi = np.clip(np.searchsorted(stamps, targets, side="left"), 0, len(stamps) - 1)
    exact = stamps[hi] == targets
    lo = np.clip(hi - 1, 0, None)
    return np.where(exact, 0, stamps[hi] - stamps[lo])
