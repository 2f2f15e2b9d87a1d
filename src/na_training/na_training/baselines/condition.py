"""Motor-condition baselines (paper Sec. IV-G, Table XI) on 64-step windows with 50 % overlap.

Three classifiers of one joint's condition (Joint 3 by default; positive class = restricted):
a threshold on the window's mean |current| (threshold chosen on the training windows), and an
RBF SVM and a Random Forest (200 trees, depth 15) on the paper's 20 handcrafted window features,
standardised with the training windows' statistics only (the scaler sits inside each pipeline,
so it is fitted on training windows and merely applied to test windows).

The 20 features (paper Sec. IV-G, our concrete definitions), for current i (A), velocity q̇,
position q and command g (the goal sent to the follower, NAD command_position) of the joint over one window:
  current stats  : mean, std, max, min, skewness, excess kurtosis of i
  tracking error : mean |e|, max |e|, std e, with e = g − q (rad)
  temporal       : mean |di/dt|, max |di/dt| (A/s), mean |q̈| (rad/s², from q̇), trend = slope of i over t (A/s)
  spectral       : power of the dominant non-DC frequency of detrended i, low/high power ratio
                   (split at LOW_HIGH_SPLIT_HZ), normalised spectral entropy
  physics        : mean |i| while |q̇| > MOTION_VELOCITY, mean|i| / (mean|q̇| + VELOCITY_FLOOR), mean |i·q̇|
  asymmetry      : mean |i| of the second half − mean |i| of the first half
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import kurtosis, skew
from sklearn.ensemble import RandomForestClassifier
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler
from sklearn.svm import SVC

from na_training.baselines.metrics import classification_metrics
from na_training.episode import RESTRICTED, Episode


def condition_experiment(train: Sequence[Episode], test: Sequence[Episode]) -> tuple[list[Episode], list[Episode]]:
    """The episodes of the motor-condition experiment (paper Sec. IV-G): those of every task that is
    also recorded restricted (``pick_place`` with ``pick_place_restricted``), both conditions. Every
    method is scored on these; other episodes carry a nominal label but are not part of it."""
    def base(task: str) -> str:
        return task.removesuffix("_restricted")

    labelled = [e for e in (*train, *test) if e.condition_label is not None]
    tasks = {base(e.task) for e in labelled if e.condition_label == RESTRICTED}
    # Without any restricted episode there is no such experiment: keep every labelled episode so that
    # a learned condition head can still be scored (the baselines then say they cannot be trained).
    keep = {id(e) for e in labelled if not tasks or base(e.task) in tasks}
    return [e for e in train if id(e) in keep], [e for e in test if id(e) in keep]

WINDOW_SIZE = 64          # frames (paper Sec. IV-G)
WINDOW_OVERLAP = 0.5      # 50 % (paper Sec. IV-G)
LOW_HIGH_SPLIT_HZ = 2.0   # teleoperated motion lies below ~2 Hz; above it is vibration and noise
MOTION_VELOCITY = 0.05    # rad/s, ≈2 XM430 velocity units (0.229 rpm each; docs/REFERENCES.md, XM430-W350)
VELOCITY_FLOOR = 0.01     # rad/s, keeps the current-to-velocity ratio finite at rest
RF_TREES, RF_DEPTH = 200, 15   # paper Sec. IV-G

FEATURE_NAMES = (
    "current_mean", "current_std", "current_max", "current_min", "current_skewness", "current_kurtosis",
    "tracking_error_abs_mean", "tracking_error_abs_max", "tracking_error_std",
    "current_rate_abs_mean", "current_rate_abs_max", "acceleration_abs_mean", "current_trend",
    "dominant_frequency_power", "low_high_power_ratio", "spectral_entropy",
    "current_in_motion", "current_velocity_ratio", "power_estimate",
    "current_half_asymmetry",
)


def window_starts(n_frames: int, size: int = WINDOW_SIZE, overlap: float = WINDOW_OVERLAP) -> np.ndarray:
    """First frame of every complete window; hop = size·(1 − overlap); a partial tail is dropped."""
    if size < 4:
        raise ValueError(f"window size must be at least 4 frames, got {size}")
    if not 0.0 <= overlap < 1.0:
        raise ValueError(f"overlap must be in [0, 1), got {overlap}")
    hop = max(1, round(size * (1.0 - overlap)))
    if n_frames < size:
        return np.zeros(0, dtype=int)
    return np.arange(0, n_frames - size + 1, hop)


def _windows(signal: np.ndarray, starts: np.ndarray, size: int) -> np.ndarray:
    return signal[starts[:, None] + np.arange(size)[None, :]]


def window_features(current: np.ndarray, velocity: np.ndarray, position: np.ndarray, goal: np.ndarray,
                    time: np.ndarray) -> np.ndarray:
    """The 20 features of each window; inputs [N_windows, size] -> [N_windows, 20]."""
    dt = np.diff(time, axis=1)
    t_rel = time - time[:, :1]
    abs_i = np.abs(current)
    error = goal - position
    with np.errstate(invalid="ignore", divide="ignore"):
        stats = [current.mean(1), current.std(1), current.max(1), current.min(1),
                 np.nan_to_num(skew(current, axis=1)), np.nan_to_num(kurtosis(current, axis=1))]
    tracking = [np.abs(error).mean(1), np.abs(error).max(1), error.std(1)]
    current_rate = np.abs(np.diff(current, axis=1) / dt)
    t_centred = t_rel - t_rel.mean(1, keepdims=True)
    trend = (t_centred * (current - current.mean(1, keepdims=True))).sum(1) / (t_centred ** 2).sum(1)
    temporal = [current_rate.mean(1), current_rate.max(1), np.abs(np.diff(velocity, axis=1) / dt).mean(1), trend]
    detrended = current - current.mean(1, keepdims=True)
    power = np.abs(np.fft.rfft(detrended, axis=1))[:, 1:] ** 2 / current.shape[1]
    freqs = np.fft.rfftfreq(current.shape[1])[1:][None, :] / dt.mean(1, keepdims=True)
    low = np.where(freqs <= LOW_HIGH_SPLIT_HZ, power, 0.0).sum(1)
    high = np.where(freqs > LOW_HIGH_SPLIT_HZ, power, 0.0).sum(1)
    share = power / np.maximum(power.sum(1, keepdims=True), 1e-300)
    entropy = -(share * np.log(np.where(share > 0, share, 1.0))).sum(1) / np.log(power.shape[1])
    spectral = [power.max(1), low / (high + 1e-12), np.where(power.sum(1) > 0, entropy, 0.0)]
    moving = np.abs(velocity) > MOTION_VELOCITY
    in_motion = np.where(moving.any(1), (abs_i * moving).sum(1) / np.maximum(moving.sum(1), 1), 0.0)
    physics = [in_motion, abs_i.mean(1) / (np.abs(velocity).mean(1) + VELOCITY_FLOOR),
               np.abs(current * velocity).mean(1)]
    half = current.shape[1] // 2
    asymmetry = [abs_i[:, half:].mean(1) - abs_i[:, :half].mean(1)]
    features = np.column_stack(stats + tracking + temporal + spectral + physics + asymmetry)
    assert features.shape[1] == len(FEATURE_NAMES)
    return features


@dataclass
class WindowSet:
    """Windows of many episodes: features [N, 20], mean |current| [N], restricted flag [N]."""

    features: np.ndarray
    abs_current_mean: np.ndarray
    restricted: np.ndarray
    episode_ids: np.ndarray
    starts: np.ndarray

    def __len__(self) -> int:
        return int(self.features.shape[0])


def episode_windows(episode: Episode, joint_index: int, size: int = WINDOW_SIZE,
                    overlap: float = WINDOW_OVERLAP) -> WindowSet:
    """Windows of one episode, labelled with the episode's condition; the goal of the tracking error is the
    command sent to the follower."""
    starts = window_starts(len(episode), size, overlap)
    j = joint_index
    arrays = (episode.arm(episode.spec.effort_signal)[:, j], episode.arm("velocity")[:, j],
              episode.arm("position")[:, j], episode.arm("command_position")[:, j], episode.time)
    columns = [_windows(x, starts, size) for x in arrays]
    features = window_features(*columns) if starts.size else np.zeros((0, len(FEATURE_NAMES)))
    restricted = np.full(starts.size, episode.condition_label == RESTRICTED)
    return WindowSet(features, np.abs(columns[0]).mean(1) if starts.size else np.zeros(0), restricted,
                     np.full(starts.size, episode.name, dtype=object), starts)


def build_windows(episodes: Sequence[Episode], joint_index: int, size: int = WINDOW_SIZE,
                  overlap: float = WINDOW_OVERLAP) -> WindowSet:
    """Windows of every episode with a condition label (windows never cross episodes)."""
    parts = [episode_windows(e, joint_index, size, overlap) for e in episodes if e.condition_label is not None]
    if not parts:
        return WindowSet(np.zeros((0, len(FEATURE_NAMES))), np.zeros(0), np.zeros(0, bool),
                         np.zeros(0, dtype=object), np.zeros(0, int))
    return WindowSet(*(np.concatenate([getattr(p, f) for p in parts]) for f in
                       ("features", "abs_current_mean", "restricted", "episode_ids", "starts")))


class CurrentThresholdClassifier:
    """Restricted when the window's mean |current| exceeds a threshold chosen for training accuracy."""

    name = "Threshold"

    def __init__(self) -> None:
        self.threshold: float | None = None

    def fit(self, windows: WindowSet) -> dict:
        score = windows.abs_current_mean
        levels = np.unique(score)
        candidates = np.concatenate([[levels[0] - 1e-9], 0.5 * (levels[1:] + levels[:-1]), [levels[-1]]])
        accuracy = [np.mean((score > c) == windows.restricted) for c in candidates]
        self.threshold = float(candidates[int(np.argmax(accuracy))])
        return {"threshold_A": self.threshold, "train_accuracy": float(np.max(accuracy))}

    def score(self, windows: WindowSet) -> np.ndarray:
        return windows.abs_current_mean

    def predict(self, windows: WindowSet) -> np.ndarray:
        if self.threshold is None:
            raise RuntimeError("threshold classifier not fitted")
        return windows.abs_current_mean > self.threshold


class FeatureClassifier:
    """A StandardScaler + sklearn classifier pipeline on the 20 window features."""

    def __init__(self, name: str, estimator) -> None:
        self.name = name
        self.pipeline = Pipeline([("scale", StandardScaler()), ("classify", estimator)])

    def fit(self, windows: WindowSet) -> dict:
        if len(np.unique(windows.restricted)) < 2:
            raise ValueError(f"{self.name}: training windows hold a single condition; need both")
        self.pipeline.fit(windows.features, windows.restricted)
        return {"train_windows": len(windows)}

    def score(self, windows: WindowSet) -> np.ndarray:
        classifier = self.pipeline.named_steps["classify"]
        if hasattr(classifier, "decision_function"):
            return self.pipeline.decision_function(windows.features)
        return self.pipeline.predict_proba(windows.features)[:, list(classifier.classes_).index(True)]

    def predict(self, windows: WindowSet) -> np.ndarray:
        return self.pipeline.predict(windows.features).astype(bool)


def make_condition_baselines(seed: int = 0) -> list:
    """Threshold, RBF SVM and Random Forest (200 trees, max depth 15), as in the paper."""
    return [CurrentThresholdClassifier(),
            FeatureClassifier("SVM (RBF)", SVC(kernel="rbf", C=1.0, gamma="scale", random_state=seed)),
            FeatureClassifier("Random Forest", RandomForestClassifier(n_estimators=RF_TREES, max_depth=RF_DEPTH,
                                                                      random_state=seed, n_jobs=1))]


def episode_level(windows: WindowSet, predicted: np.ndarray) -> dict:
    """A window classifier at the episode level: restricted when most of the episode's windows say so."""
    names = list(dict.fromkeys(windows.episode_ids.tolist()))
    truth = np.array([bool(windows.restricted[windows.episode_ids == n][0]) for n in names])
    share = np.array([float(np.mean(predicted[windows.episode_ids == n])) for n in names])
    decision = share > 0.5
    return {**classification_metrics(truth, decision, share), "episodes": len(names),
            "misclassified": int(np.count_nonzero(truth != decision))}


def evaluate_condition_baselines(train: WindowSet, test: WindowSet, seed: int = 0) -> dict:
    """Fit each baseline on the training windows, score it on the test windows (same metric code), and at the
    episode level by majority of windows."""
    results = {}
    for method in make_condition_baselines(seed):
        fit_report = method.fit(train)
        predicted = method.predict(test)
        metrics = classification_metrics(test.restricted, predicted, method.score(test))
        results[method.name] = {**metrics, "fit": fit_report, "granularity": f"{WINDOW_SIZE}-frame windows",
                                "episode": episode_level(test, predicted)}
    return results
