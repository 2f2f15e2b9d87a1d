"""The condition monitor (``na_common.condition_monitor``) scored at three levels on labelled episodes.

Labels: an episode of the condition experiment is restricted or nominal as a whole (the rig restricts the
condition joint for the whole episode; the restriction acts only while the joint works against it, so a
restricted episode also has frames that look nominal). Every frame and window inherits the episode's label.

* frame: the monitor's evidence as the score (AUC), its degraded state as the decision;
* window: the paper's 64-frame windows with 50 % overlap (the condition baselines' windows), the evidence and
  state at each window's last frame (what a causal monitor knows when the window ends);
* episode: degraded at the end of the episode (the state latches) as the decision, the highest evidence as the
  score, and for restricted episodes the time the monitor took to decide.

False alarms: nominal episodes in which the supervised motor reached degraded, per 10 min of nominal operation
(every nominal episode of the split counts, not only the condition experiment's: pushes and payloads too).

Each episode comes with the model's per-frame outputs: its condition scores [T, n] and its contact probability
[T] (frames in contact add no evidence; ``MonitorSettings.contact_limit``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from dataclasses import asdict

import numpy as np

from na_common.condition_monitor import DEGRADED, MonitorSettings, run_monitor
from na_training.baselines.condition import WINDOW_SIZE, window_starts
from na_training.baselines.metrics import classification_metrics
from na_training.episode import RESTRICTED, Episode

ALARM_PERIOD_S = 600.0      # false alarms are counted per this much nominal operation


def _episode_monitor(episode: Episode, outputs: Mapping[str, np.ndarray], joint_index: int,
                     settings: MonitorSettings) -> tuple[np.ndarray, np.ndarray, float]:
    evidence, state, decided = run_monitor(episode.time, np.asarray(outputs["condition"], dtype=float), settings,
                                           outputs.get("contact_prob"))
    return evidence[:, joint_index], state[:, joint_index] >= DEGRADED, float(decided[joint_index])


def monitor_levels(labelled: Sequence[tuple[Episode, Mapping[str, np.ndarray]]],
                   nominal: Sequence[tuple[Episode, Mapping[str, np.ndarray]]],
                   joint_index: int, settings: MonitorSettings | None = None) -> dict:
    """Scores of the monitor on ``labelled`` (episode, the model's outputs: ``condition`` [T, n] and
    ``contact_prob`` [T]) pairs of the condition experiment; false alarms on ``nominal`` pairs (every nominal
    episode of the split)."""
    settings = settings or MonitorSettings()
    frame_truth, frame_score, frame_decision = [], [], []
    window_truth, window_score, window_decision = [], [], []
    episode_truth, episode_score, episode_decision, decision_times = [], [], [], []
    for episode, outputs in labelled:
        evidence, degraded, decided = _episode_monitor(episode, outputs, joint_index, settings)
        positive = episode.condition_label == RESTRICTED
        frame_truth.append(np.full(len(episode), positive))
        frame_score.append(evidence)
        frame_decision.append(degraded)
        ends = window_starts(len(episode)) + WINDOW_SIZE - 1
        window_truth.append(np.full(ends.size, positive))
        window_score.append(evidence[ends])
        window_decision.append(degraded[ends])
        episode_truth.append(positive)
        episode_score.append(float(evidence.max()) if len(evidence) else 0.0)
        episode_decision.append(bool(degraded[-1]) if len(degraded) else False)
        if positive:
            decision_times.append(decided)
    results: dict = {"settings": asdict(settings)}
    if frame_truth:
        results["frame"] = classification_metrics(np.concatenate(frame_truth), np.concatenate(frame_decision),
                                                  np.concatenate(frame_score))
        results["window"] = classification_metrics(np.concatenate(window_truth), np.concatenate(window_decision),
                                                   np.concatenate(window_score))
        results["window"]["windows"] = int(sum(len(w) for w in window_truth))
        truth, decision = np.asarray(episode_truth), np.asarray(episode_decision)
        results["episode"] = {**classification_metrics(truth, decision, np.asarray(episode_score)),
                              "episodes": int(truth.size), "misclassified": int(np.count_nonzero(truth != decision))}
        times = np.asarray(decision_times, dtype=float)
        decided = times[np.isfinite(times)]
        results["decision_time_s"] = {"restricted_episodes": int(times.size), "decided": int(decided.size),
                                      "median": float(np.median(decided)) if decided.size else None,
                                      "max": float(decided.max()) if decided.size else None}
    alarms, seconds = 0, 0.0
    for episode, outputs in nominal:
        _, degraded, _ = _episode_monitor(episode, outputs, joint_index, settings)
        alarms += int(degraded.any())
        seconds += float(episode.time[-1] - episode.time[0]) if len(episode) > 1 else 0.0
    results["false_alarms"] = {"alarms": alarms, "nominal_s": seconds,
                               "per_10_min": alarms * ALARM_PERIOD_S / seconds if seconds > 0 else None}
    return results



def add_monitor_arguments(parser: argparse.ArgumentParser) -> None:
    """The monitor's settings as options (``compare`` and ``monitor``)."""
    defaults = MonitorSettings()
    parser.add_argument("--monitor-drift", type=float, default=defaults.drift,
                        help="condition monitor: restricted score a frame must exceed to add evidence "
                             "(default: %(default)s)")
    parser.add_argument("--monitor-suspect", type=float, default=defaults.suspect_s,
                        help="condition monitor: evidence (s) from which a motor is suspect (default: %(default)s)")
    parser.add_argument("--monitor-degraded", type=float, default=defaults.degraded_s,
                        help="condition monitor: evidence (s) from which a motor is degraded, latched "
                             "(default: %(default)s)")
    parser.add_argument("--monitor-contact-limit", type=float, default=defaults.contact_limit,
                        help="condition monitor: the model's contact probability above which a frame adds no "
                             "evidence; 1 counts every frame (default: %(default)s)")


def monitor_settings(args: argparse.Namespace) -> MonitorSettings:
    """Settings from the options of :func:`add_monitor_arguments`; ValueError names a bad one."""
    return MonitorSettings(drift=args.monitor_drift, suspect_s=args.monitor_suspect, degraded_s=args.monitor_degraded,
                           contact_limit=args.monitor_contact_limit)
