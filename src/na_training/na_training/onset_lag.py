"""How late an estimate sees a contact: per press, the time from the true force reaching a threshold to the
estimate reaching it (what a protective stop on the estimate waits for before it can act).

A press is a run of true contact (runs closer than ``merge_gap_s`` are one press); it counts when its true force
magnitude reaches ``threshold_n``. The estimate's crossing is looked for from ``lead_s`` before the press starts
to its end; a press whose estimate never crosses is a miss. Pure numpy; ``na-train eval`` prints the table.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MERGE_GAP_S = 0.3       # contact runs closer than this are one press
LEAD_S = 0.1            # an estimate may cross this long before the true contact starts (label alignment)


@dataclass(frozen=True)
class PressLag:
    onset_s: float                       # the press' first true contact frame (episode time)
    true_crossing_s: float               # the true force magnitude first at or above the threshold
    estimate_crossing_s: float | None    # the estimate's first crossing; None: it never crossed (a miss)

    @property
    def lag_s(self) -> float | None:
        return None if self.estimate_crossing_s is None else self.estimate_crossing_s - self.true_crossing_s


def _runs(flags: np.ndarray, time: np.ndarray, merge_gap_s: float) -> list[tuple[int, int]]:
    """[start, end) frame index pairs of the True runs, runs closer than ``merge_gap_s`` merged."""
    edges = np.diff(np.concatenate([[0], flags.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    runs: list[list[int]] = []
    for start, end in zip(starts, ends, strict=True):
        if runs and time[start] - time[runs[-1][1] - 1] <= merge_gap_s:
            runs[-1][1] = end
        else:
            runs.append([start, end])
    return [(start, end) for start, end in runs]


def press_lags(time: np.ndarray, true_contact: np.ndarray, true_force: np.ndarray, estimate: np.ndarray,
               threshold_n: float, *, merge_gap_s: float = MERGE_GAP_S, lead_s: float = LEAD_S) -> list[PressLag]:
    """Per press of one episode: ``true_force`` and ``estimate`` are ``[T, 3]`` (N), ``true_contact`` ``[T]``."""
    time = np.asarray(time, dtype=float)
    true_magnitude = np.linalg.norm(np.asarray(true_force, dtype=float), axis=1)
    estimate_magnitude = np.linalg.norm(np.nan_to_num(np.asarray(estimate, dtype=float)), axis=1)
    out = []
    for start, end in _runs(np.asarray(true_contact, dtype=bool), time, merge_gap_s):
        above = np.flatnonzero(true_magnitude[start:end] >= threshold_n)
        if not above.size:
            continue
        window = (time >= time[start] - lead_s) & (np.arange(len(time)) < end)
        crossed = np.flatnonzero(window & (estimate_magnitude >= threshold_n))
        out.append(PressLag(float(time[start]), float(time[start + above[0]]),
                            float(time[crossed[0]]) if crossed.size else None))
    return out


def lag_summary(lags: Sequence[PressLag]) -> dict[str, float | int | None]:
    """Presses, misses and the lag's p50 / p95 / max in ms over the presses the estimate saw."""
    seen = np.array([p.lag_s for p in lags if p.lag_s is not None], dtype=float) * 1e3
    return {"presses": len(lags), "missed": int(sum(p.lag_s is None for p in lags)),
            "p50_ms": float(np.percentile(seen, 50)) if seen.size else None,
            "p95_ms": float(np.percentile(seen, 95)) if seen.size else None,
            "max_ms": float(seen.max()) if seen.size else None}
