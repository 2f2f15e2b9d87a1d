"""One NAD episode as LeRobot frame features (the export side of ``LEROBOT.md``'s mapping table).

Frames come from a NAD (``na-train convert`` of the bags, at the export's frame rate, or a NAD given directly);
LeRobot needs them uniform at an integer ``fps``, so a NAD at another rate is resampled here with the converter's
own rules (``align``: follower values interpolated linearly, commands, flags and labels held). The estimator's
outputs are not in a NAD: where a bag recorded them (``/estimator/force``, ``/estimator/contact``) they are read
from the bag and held onto the frames.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from na_common import topics
from na_description import RobotSpec
from na_training import align
from na_training.episode import Episode
from na_training.lerobot_robots import (
    CONTACT_FEATURE,
    ESTIMATE_CONTACT_FEATURE,
    ESTIMATE_FORCE_FEATURE,
    FORCE_FEATURE,
    FORCE_VALID_FEATURE,
    Channel,
)
from na_training.lerobot_units import Calibration, to_lerobot_positions

ESTIMATE_MAX_AGE_NS = 100_000_000       # an estimate older than 0.1 s at a frame is not held onto it
HELD_PREFIXES = ("command_", "leader_", "hardware_error_", "stale_", "force_valid_", "condition_")
LABELLED_FORCE_SOURCES = ("ft_sensor", "payload")
HELD_COLUMNS = ("aligned", "frame_valid", "contact", "truth_contact", "truth_valid")


def resample_columns(columns: Mapping[str, np.ndarray], period_ns: int) -> dict[str, np.ndarray]:
    """A NAD episode's columns on a uniform grid of ``period_ns`` from its first frame stamp."""
    stamps = np.asarray(columns["stamp_ns"], dtype=np.int64)
    targets = align.uniform_grid(stamps[0], stamps[-1], period_ns)
    out: dict[str, np.ndarray] = {"stamp_ns": targets, "time": (targets - targets[0]) / align.NS_PER_S}
    for name, values in columns.items():
        if name in out:
            continue
        if name in HELD_COLUMNS or name.startswith(HELD_PREFIXES) or values.dtype.kind in "biu":
            held = align.hold_state(stamps, values.astype(np.float64), targets, default=np.nan)
            out[name] = held.astype(values.dtype)
        else:
            out[name] = align.interpolate_linear(stamps, values, targets)
    return out


def read_estimates(bag: Path, stamps_ns: np.ndarray) -> dict[str, np.ndarray] | None:
    """The estimator's force (N, base frame) and contact held onto the frame stamps, or None when the bag did not
    record them. Contact columns: probability, in_contact, valid (an estimate at most 0.1 s old)."""
    from na_common.episode_bag import EpisodeReader, stamp_to_ns

    wanted = [topics.ESTIMATED_FORCE, topics.ESTIMATED_CONTACT]
    with EpisodeReader(bag) as reader:
        if not set(wanted) <= set(reader.topics):
            return None
        series: dict[str, list] = {topic: [] for topic in wanted}
        for topic, _, msg in reader.messages(wanted):
            stamp = stamp_to_ns(msg.header.stamp)
            if topic == topics.ESTIMATED_FORCE:
                f = msg.wrench.force
                series[topic].append((stamp, f.x, f.y, f.z))
            else:
                series[topic].append((stamp, msg.probability, float(msg.in_contact)))
    if not all(series.values()):
        return None
    out = {}
    for topic, feature in ((topics.ESTIMATED_FORCE, ESTIMATE_FORCE_FEATURE),
                           (topics.ESTIMATED_CONTACT, ESTIMATE_CONTACT_FEATURE)):
        rows = np.asarray(sorted(series[topic]), dtype=np.float64)
        held, ok = align.hold_within(rows[:, 0].astype(np.int64), rows[:, 1:], stamps_ns, ESTIMATE_MAX_AGE_NS)
        held[~ok] = 0.0
        out[feature] = held if topic == topics.ESTIMATED_FORCE else np.column_stack([held, ok.astype(float)])
    return out


@dataclass
class FrameFeatures:
    """One episode's LeRobot feature arrays (float64 until written) and how many non-finite values were filled."""

    values: dict[str, np.ndarray]
    filled: dict[str, int]


def _fill(values: np.ndarray) -> tuple[np.ndarray, int]:
    """Non-finite values replaced by the last finite value before them (the first finite one at the head, 0 when a
    column has none): LeRobot's loaders and statistics take no NaN."""
    values = np.array(values, dtype=np.float64).reshape(len(values), -1)
    bad = ~np.isfinite(values)
    count = int(bad.sum())
    if count:
        for k in range(values.shape[1]):
            column, missing = values[:, k], bad[:, k]
            if missing.all():
                column[:] = 0.0
                continue
            index = np.where(~missing, np.arange(len(column)), -1)
            index = np.maximum.accumulate(index)
            first = int(np.argmax(~missing))
            index[index < 0] = first
            column[:] = column[index]
    return values, count


def episode_features(episode: Episode, spec: RobotSpec, channels: Sequence[Channel], joint_units: str,
                     calibration: Calibration | None, with_force: bool,
                     estimates: Mapping[str, np.ndarray] | None) -> FrameFeatures:
    """The LeRobot features of one NAD episode: state and action in LeRobot's position units, the telemetry
    channels in the units their names give, force labels (0 where invalid, with their validity) and estimates."""
    raw: dict[str, np.ndarray] = {
        "observation.state": to_lerobot_positions(episode.per_joint("position"), spec, joint_units, calibration),
        "action": to_lerobot_positions(episode.per_joint("command_position"), spec, joint_units, calibration),
    }
    for channel in channels:
        raw[channel.feature] = episode.per_joint(channel.field) * channel.scale
    if with_force:
        raw[FORCE_FEATURE] = episode.force
        raw[FORCE_VALID_FEATURE] = episode.force_valid.astype(np.float64)
        raw[CONTACT_FEATURE] = episode.contact.astype(np.float64)[:, None]
    for feature, values in (estimates or {}).items():
        raw[feature] = values
    filled: dict[str, int] = {}
    out: dict[str, np.ndarray] = {}
    for feature, values in raw.items():
        out[feature], count = _fill(values)
        if count:
            filled[feature] = count
    return FrameFeatures(out, filled)


def recorded_channels(episodes: Sequence[Episode], channels: Sequence[Channel]) -> list[Channel]:
    """The channels with at least one finite value in the dataset (a channel never recorded is left out)."""
    kept = []
    for channel in channels:
        columns = [f"{channel.field}_{j}" for j in episodes[0].spec.joint_names]
        if all(c in episodes[0].columns for c in columns) and any(
                np.isfinite(ep.stack(columns)).any() for ep in episodes):
            kept.append(channel)
    return kept


def has_force_labels(episodes: Sequence[Episode]) -> bool:
    """Whether any episode's force labels come from a sensor or a payload (free-motion zeros alone are not exported)."""
    return any(ep.meta.get("force_source") in LABELLED_FORCE_SOURCES and ep.force_valid.any() for ep in episodes)


__all__ = ["FrameFeatures", "episode_features", "has_force_labels", "read_estimates", "recorded_channels",
           "resample_columns"]
