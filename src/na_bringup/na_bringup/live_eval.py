"""Scoring the live estimator against the simulated rig's ground truth (ROS-free).

Estimates (``/estimator/estimate``) are matched to the ground-truth force (``/sim/truth/wrench``)
by stamp: each estimate, stamped with the follower state it came from, takes the truth sample
nearest in time within ``tolerance`` s. Contact is scored against ``|f_truth| > contact_threshold``
(the same "external force present" target the gate is trained on: payload weight or fixture push).

Beside the estimator, the score holds informed trivial predictors a learned model must beat: always
0 N, a constant force (e.g. the mean force label of the training data), and the better of
"always contact" / "never contact".
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class LiveScore:
    estimates: int                # estimates received
    matched: int                  # estimates with a truth sample within the tolerance
    force_mae: float              # N, mean over matched estimates and the three components
    zero_force_mae: float         # N, the same metric for a predictor that always says 0 N
    constant_force_mae: float     # N, the same metric for a constant force (nan when none was given)
    contact_accuracy: float       # fraction of matched estimates whose in_contact equals the truth
    constant_contact_accuracy: float  # the better of always-contact and never-contact
    inference_p50_ms: float
    inference_p99_ms: float
    end_to_end_p50_ms: float      # state stamp (bus read) -> estimate received
    end_to_end_p99_ms: float

    def lines(self) -> list[str]:
        constant = "" if np.isnan(self.constant_force_mae) else \
            f", training-mean force: {self.constant_force_mae:.3f} N"
        return [
            f"force MAE {self.force_mae:.3f} N (always-zero predictor: {self.zero_force_mae:.3f} N{constant}) "
            f"over {self.matched} of {self.estimates} estimates",
            f"contact accuracy {self.contact_accuracy * 100:.1f} % "
            f"(best constant contact answer: {self.constant_contact_accuracy * 100:.1f} %)",
            f"inference latency p50 {self.inference_p50_ms:.3f} ms, p99 {self.inference_p99_ms:.3f} ms; "
            f"state->estimate p50 {self.end_to_end_p50_ms:.2f} ms, p99 {self.end_to_end_p99_ms:.2f} ms",
        ]


def match_nearest(query: np.ndarray, reference: np.ndarray, tolerance: float) -> np.ndarray:
    """Index into sorted ``reference`` of the nearest stamp for each query stamp; -1 beyond ``tolerance``."""
    if reference.size == 0:
        return np.full(query.shape, -1)
    right = np.clip(np.searchsorted(reference, query), 1, reference.size - 1) if reference.size > 1 \
        else np.zeros(query.shape, dtype=int)
    left = np.maximum(right - 1, 0)
    pick = np.where(np.abs(reference[left] - query) <= np.abs(reference[right] - query), left, right)
    return np.where(np.abs(reference[pick] - query) <= tolerance, pick, -1)


def score_live(estimate_stamps: np.ndarray, estimate_force: np.ndarray, estimate_contact: np.ndarray,
               inference_latency: np.ndarray, receive_delay: np.ndarray, truth_stamps: np.ndarray,
               truth_force: np.ndarray, *, tolerance: float = 0.02, contact_threshold: float = 0.5,
               constant_force: np.ndarray | None = None) -> LiveScore:
    """Score matched estimates; ``constant_force`` (3,) adds a constant predictor (e.g. the training mean)."""
    order = np.argsort(truth_stamps)
    truth_stamps, truth_force = truth_stamps[order], truth_force[order]
    index = match_nearest(np.asarray(estimate_stamps, dtype=float), truth_stamps, tolerance)
    ok = index >= 0
    if not np.any(ok):
        raise ValueError("no estimate could be matched to a ground-truth sample (are the clocks and topics right?)")
    truth = truth_force[index[ok]]
    force = np.asarray(estimate_force)[ok]
    truth_contact = np.linalg.norm(truth, axis=1) > contact_threshold
    in_contact = float(np.mean(truth_contact))
    constant_mae = float("nan") if constant_force is None else \
        float(np.mean(np.abs(np.asarray(constant_force, dtype=float).reshape(1, 3) - truth)))

    def pct(values: np.ndarray, q: float) -> float:
        return float(np.percentile(values, q) * 1e3) if values.size else float("nan")

    return LiveScore(
        estimates=len(estimate_stamps), matched=int(ok.sum()),
        force_mae=float(np.mean(np.abs(force - truth))), zero_force_mae=float(np.mean(np.abs(truth))),
        constant_force_mae=constant_mae,
        contact_accuracy=float(np.mean(np.asarray(estimate_contact)[ok] == truth_contact)),
        constant_contact_accuracy=max(in_contact, 1.0 - in_contact),
        inference_p50_ms=pct(np.asarray(inference_latency), 50),
        inference_p99_ms=pct(np.asarray(inference_latency), 99),
        end_to_end_p50_ms=pct(np.asarray(receive_delay), 50), end_to_end_p99_ms=pct(np.asarray(receive_delay), 99),
    )
