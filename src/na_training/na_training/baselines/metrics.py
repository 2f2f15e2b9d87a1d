"""The one metric code every method (learned and classical) is scored with.

- force MAE: mean absolute error over the three force components of every valid frame (N);
  per task/payload group the frames of the group are pooled, and ``avg`` is the unweighted mean
  of the group values (the "Avg" column of the paper's Table VII);
- false-contact rate: share of frames declared in contact in episodes without any contact;
- condition classification: accuracy, precision, recall (positive class = restricted, as in the
  paper's Table XI) and ROC AUC from scores that grow with the positive class.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from scipy.stats import rankdata


def force_mae(predicted: np.ndarray, label: np.ndarray, valid: np.ndarray | None = None) -> float:
    """Componentwise MAE (N) over the frames (or entries) where ``valid``; NaN when none is valid."""
    predicted = np.asarray(predicted, dtype=float)
    label = np.asarray(label, dtype=float)
    if predicted.shape != label.shape:
        raise ValueError(f"force prediction {predicted.shape} and label {label.shape} shapes differ")
    mask = np.all(np.isfinite(label), axis=-1) if valid is None else np.asarray(valid, dtype=bool)
    if mask.ndim == predicted.ndim - 1:
        mask = np.broadcast_to(mask[..., None], predicted.shape)
    if mask.shape != predicted.shape:
        raise ValueError(f"validity mask shape {mask.shape} fits neither frames nor entries of {predicted.shape}")
    mask = mask & np.isfinite(label)
    if not np.any(mask):
        return float("nan")
    return float(np.mean(np.abs(predicted[mask] - label[mask])))


def group_key(task: str, payload_grams: float) -> str:
    """Table column name of a task/payload group, e.g. ``pick_place/200g``."""
    return f"{task}/{round(float(payload_grams)):d}g"


def force_mae_by_group(groups: Iterable[str], predicted: Iterable[np.ndarray], labels: Iterable[np.ndarray],
                       valid: Iterable[np.ndarray]) -> dict[str, float]:
    """MAE per group (frames pooled within a group) plus ``avg``, the mean over the groups."""
    pooled: dict[str, list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = {}
    for group, pred, label, mask in zip(groups, predicted, labels, valid, strict=True):
        pooled.setdefault(group, []).append((pred, label, mask))
    result = {}
    for group in sorted(pooled):
        preds, labs, masks = zip(*pooled[group], strict=True)
        result[group] = force_mae(np.concatenate(preds), np.concatenate(labs), np.concatenate(masks))
    finite = [v for v in result.values() if np.isfinite(v)]
    result["avg"] = float(np.mean(finite)) if finite else float("nan")
    return result


def false_contact_rate(contact_predictions: Iterable[np.ndarray]) -> float:
    """Share of frames declared in contact, over episodes known to have no contact at all."""
    frames = [np.asarray(p, dtype=bool).reshape(-1) for p in contact_predictions]
    total = sum(f.size for f in frames)
    if total == 0:
        return float("nan")
    return float(sum(int(np.count_nonzero(f)) for f in frames) / total)


def roc_auc(positive: np.ndarray, score: np.ndarray) -> float:
    """Area under the ROC curve = P(score of a positive > score of a negative), ties counted half."""
    positive = np.asarray(positive, dtype=bool).reshape(-1)
    score = np.asarray(score, dtype=float).reshape(-1)
    n_pos = int(np.count_nonzero(positive))
    n_neg = positive.size - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    ranks = rankdata(score)                               # average ranks handle ties
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def balanced_accuracy(positive: np.ndarray, predicted: np.ndarray) -> float:
    """Mean of the true-positive and true-negative rates (NaN for a class that is absent)."""
    positive = np.asarray(positive, dtype=bool)
    predicted = np.asarray(predicted, dtype=bool)
    rates = [np.mean(predicted[positive]) if positive.any() else np.nan,
             np.mean(~predicted[~positive]) if (~positive).any() else np.nan]
    return float(np.nanmean(rates))


def classification_metrics(positive: np.ndarray, predicted: np.ndarray, score: np.ndarray | None = None) -> dict:
    """Accuracy, precision, recall (0 when undefined, as the paper reports it) and AUC from ``score``."""
    positive = np.asarray(positive, dtype=bool).reshape(-1)
    predicted = np.asarray(predicted, dtype=bool).reshape(-1)
    if positive.shape != predicted.shape:
        raise ValueError(f"labels {positive.shape} and predictions {predicted.shape} differ in length")
    true_pos = int(np.count_nonzero(positive & predicted))
    return {
        "accuracy": float(np.mean(positive == predicted)) if positive.size else float("nan"),
        "precision": true_pos / int(np.count_nonzero(predicted)) if predicted.any() else 0.0,
        "recall": true_pos / int(np.count_nonzero(positive)) if positive.any() else 0.0,
        "auc": roc_auc(positive, score) if score is not None else float("nan"),
        "samples": int(positive.size),
        "positives": int(np.count_nonzero(positive)),
    }

