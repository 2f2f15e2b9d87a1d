"""Contact from a force estimate: |f| above a threshold tuned on training contact labels."""

from __future__ import annotations

import numpy as np

from na_training.baselines.metrics import balanced_accuracy

# Without contact labels to tune on, declare contact above this quantile of the free-motion |f|.
FALLBACK_QUANTILE = 0.99


def tune_contact_threshold(force_norm: np.ndarray, contact: np.ndarray, max_candidates: int = 400) -> dict:
    """Threshold on |f| (N) that maximises balanced accuracy of ``|f| > threshold`` on the labels.

    Candidates are midpoints between sorted distinct |f| quantiles; ties go to the smallest
    threshold. With only one class in ``contact`` the rule falls back to FALLBACK_QUANTILE of
    |f| over the non-contact frames (or all frames), and says so.
    """
    norm = np.asarray(force_norm, dtype=float).reshape(-1)
    contact = np.asarray(contact, dtype=bool).reshape(-1)
    keep = np.isfinite(norm)
    norm, contact = norm[keep], contact[keep]
    if norm.size == 0:
        raise ValueError("no finite force estimates to tune the contact threshold on")
    if contact.all() or not contact.any():
        reference = norm[~contact] if (~contact).any() else norm
        threshold = float(np.quantile(reference, FALLBACK_QUANTILE))
        return {"threshold": threshold, "balanced_accuracy": float("nan"),
                "rule": f"{FALLBACK_QUANTILE:.0%} quantile of |f| (training labels have a single class)"}
    levels = np.unique(np.quantile(norm, np.linspace(0.0, 1.0, max_candidates)))
    candidates = np.concatenate([[levels[0] - 1e-9], 0.5 * (levels[1:] + levels[:-1]), [levels[-1]]])
    scores = np.array([balanced_accuracy(contact, norm > c) for c in candidates])
    best = int(np.argmax(scores))
    return {"threshold": float(candidates[best]), "balanced_accuracy": float(scores[best]),
            "rule": "max balanced accuracy on training contact labels"}


class ContactDetector:
    """Declares contact when the estimated force magnitude exceeds a tuned threshold."""

    def __init__(self, threshold: float | None = None) -> None:
        self.threshold = threshold

    def fit(self, forces: list[np.ndarray], contacts: list[np.ndarray]) -> dict:
        norm = np.concatenate([np.linalg.norm(f, axis=1) for f in forces])
        report = tune_contact_threshold(norm, np.concatenate(contacts))
        self.threshold = report["threshold"]
        return report

    def predict(self, force: np.ndarray) -> np.ndarray:
        if self.threshold is None:
            raise RuntimeError("contact threshold not tuned: call fit() first")
        return np.linalg.norm(np.asarray(force), axis=1) > self.threshold
