"""One bag's streams aligned to frames and labelled.

Frames are the follower samples (or a uniform grid with ``--rate``/``--frame-period``), streams
aligned by header stamp. Rules (defaults in ``na_training/config/convert.yaml``):

* command and leader: the latest sample at or before the frame, at most 15 ms old;
* F/T: mean of the samples within +-5 ms of the frame, per channel (no sample -> label invalid);
* ``/episode/grasp`` and ``/sim/truth/contact`` (``std_msgs/Bool``, no header): the latest state
  at or before the frame by bag time, false before the first message;
* ``/sim/truth/wrench``: nearest sample within 15 ms;
* resampling: follower values are linearly interpolated between the bracketing samples (hardware
  error bits and stale flags are taken from the earlier one); a bracket wider than 50 ms marks
  the frame misaligned.

Frames before every required stream has started or after one has ended are dropped; interior
frames that miss a tolerance are kept, flagged ``aligned = false`` and counted in the report.
The force, contact and condition labels come from ``na_training.labels``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from na_training import align, labels
from na_training.align import NS_PER_S
from na_training.convert.bag import BagContents
from na_training.convert.config import ConvertError
from na_training.convert.streams import ARM_OPTIONAL_VECTOR_FIELDS, Stream
from na_training.labels import LabelError, fixture_from_mapping
from na_training.nad import AXES


@dataclass
class EpisodeFrames:
    """Aligned frames of one episode plus what the report says about it."""

    data: dict[str, np.ndarray]
    report: dict[str, Any]
    has_truth: bool


def _ns(seconds: float) -> int:
    return round(float(seconds) * NS_PER_S)


def _follower_at(follower: Stream, targets: np.ndarray, resampled: bool, gap_ns: int
                 ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    if not resampled:
        return dict(follower.values), np.ones(len(targets), dtype=bool)
    out = {}
    for key, values in follower.values.items():
        if key in ("hardware_error", "stale"):
            index = np.searchsorted(follower.stamps, targets, side="right") - 1
            out[key] = values[np.clip(index, 0, None)]
        else:
            out[key] = align.interpolate_linear(follower.stamps, values, targets)
    return out, align.bracket_gap(follower.stamps, targets) <= gap_ns


def align_episode(contents: BagContents, config: Mapping[str, Any], joint_names: Sequence[str],
                  period_ns: int | None, effort_signal: str, condition_joint: str) -> EpisodeFrames:
    """Align one bag's streams to frames and make the labels (``effort_signal`` and ``condition_joint``: the
    robot spec's; a frame is valid only where its effort signal is finite)."""
    path, streams = contents.path, contents.streams
    tol = config["tolerance"]
    follower = streams["follower"]
    if len(follower) == 0:
        raise ConvertError(f"{path}: no messages on {config['topics']['follower']} (nothing to align to)")
    resampled = period_ns is not None
    targets = (align.uniform_grid(follower.stamps[0], follower.stamps[-1], period_ns) if resampled
               else follower.stamps.copy())
    state, follower_ok = _follower_at(follower, targets, resampled, _ns(tol["follower_gap_s"]))

    checks = {"follower": follower_ok}
    command = streams["command"]
    command_position, checks["command"] = align.hold_within(command.stamps, command.values["position"], targets,
                                                            _ns(tol["command_s"]))
    command_slide, _ = align.hold_within(command.stamps, command.values["gripper_slide"], targets,
                                         _ns(tol["command_s"]))
    n = len(joint_names)
    if "leader" in streams:
        leader = streams["leader"]
        leader_position, leader_ok = align.hold_within(leader.stamps, leader.values["position"], targets,
                                                       _ns(tol["leader_s"]))
        leader_slide, _ = align.hold_within(leader.stamps, leader.values["gripper_slide"], targets,
                                            _ns(tol["leader_s"]))
        if config["require_leader"]:
            checks["leader"] = leader_ok
    else:
        leader_position, leader_slide = np.full((len(targets), n), np.nan), np.full(len(targets), np.nan)

    # Drop the head and tail where a required stream has not started or has ended.
    started = np.logical_and.reduce(list(checks.values()))
    if not started.any():
        raise ConvertError(f"{path}: no frame where every required stream ({', '.join(checks)}) is within "
                           "tolerance; check the stamps and the tolerance section of the config")
    first, last = int(np.argmax(started)), len(started) - int(np.argmax(started[::-1])) - 1
    keep = slice(first, last + 1)
    targets = targets[keep]
    aligned = started[keep]

    frames: dict[str, np.ndarray] = {"stamp_ns": targets, "time": (targets - targets[0]) / NS_PER_S}
    for k, j in enumerate(joint_names):
        frames[f"command_position_{j}"] = command_position[keep, k]
        frames[f"leader_position_{j}"] = leader_position[keep, k]
        for key in ("position", "velocity", "goal_position", "current", "pwm", "input_voltage", "temperature",
                    "hardware_error", "stale", *ARM_OPTIONAL_VECTOR_FIELDS):
            frames[f"{key}_{j}"] = state[key][keep, k]
    frames["command_gripper_slide"] = command_slide[keep]
    frames["leader_gripper_slide"] = leader_slide[keep]
    for key in ("gripper_slide", "goal_gripper_slide", "bus_cycle_duration"):
        frames[key] = state[key][keep]

    stale = state["stale"][keep].any(axis=1)
    hardware_error = state["hardware_error"][keep].any(axis=1)
    if not np.isfinite(state[effort_signal][keep]).any():
        raise ConvertError(f"{path}: the follower ArmState carries no {effort_signal} values, which this robot's "
                           f"model reads as effort (a bag of another robot? see --robot)")
    numeric = np.concatenate([state[k][keep].reshape(len(targets), -1) for k in
                              ("position", "velocity", effort_signal, "input_voltage", "temperature",
                               "gripper_slide")], axis=1)
    non_finite = ~np.isfinite(numeric).all(axis=1) | ~np.isfinite(command_position[keep]).all(axis=1)
    frames["aligned"] = aligned
    frames["frame_valid"] = aligned & ~stale & ~hardware_error & ~non_finite

    force_report = _label_frames(frames, contents, config, targets, condition_joint)
    has_truth = _truth_frames(frames, streams, config, targets)

    misaligned = {name: int((~ok[keep]).sum()) for name, ok in checks.items()}
    report = {
        "follower_samples": len(follower),
        "frames": len(targets),
        "dropped_head": first,
        "dropped_tail": len(started) - last - 1,
        "misaligned": int((~aligned).sum()),
        "misaligned_by_stream": misaligned,
        "invalid_stale": int(stale.sum()),
        "invalid_hardware_error": int(hardware_error.sum()),
        "invalid_non_finite": int(non_finite.sum()),
        "invalid_frames": int((~frames["frame_valid"]).sum()),
        **force_report,
    }
    return EpisodeFrames(data=frames, report=report, has_truth=has_truth)


def _label_frames(frames: dict[str, np.ndarray], contents: BagContents, config: Mapping[str, Any],
                  targets: np.ndarray, condition_joint: str) -> dict[str, Any]:
    meta, streams, path = contents.metadata, contents.streams, contents.path
    t = len(targets)
    source = meta["force_source"]
    try:
        labels.check_force_source(source)
        condition = labels.condition_labels(meta["condition"], condition_joint)
        if source == "ft_sensor":
            fixture = fixture_from_mapping(meta["fixture"], f"{path}: metadata fixture") \
                if meta.get("fixture") else fixture_from_mapping(config["fixture"], "config fixture")
            ft = streams["ft"]
            tare = np.asarray(config["tare"]["force"], dtype=np.float64)
            initial = float(config["tare"]["initial_seconds"])
            if initial > 0 and len(ft):
                window = ft.stamps <= ft.stamps[0] + _ns(initial)
                tare = tare + np.nanmean(ft.values["force"][window], axis=0)
            sensor, valid = align.window_mean(ft.stamps, ft.values["force"], targets,
                                              _ns(config["tolerance"]["ft_half_window_s"]))
            force = labels.ft_force_label(np.where(valid, sensor, 0.0), fixture.rotation, tare)
            # A rotated channel mixes sensor channels: it is valid only if all of them were.
            valid = np.repeat(valid.all(axis=1, keepdims=True), 3, axis=1)
            contact = labels.contact_from_force(force, valid, float(config["contact_threshold_n"]))
        elif source == "payload":
            grasp = align.hold_state(streams["grasp"].stamps, streams["grasp"].values["data"], targets, 0.0) > 0.5
            force = labels.payload_force_label(grasp, float(meta["payload_grams"]))
            channels = set(config["payload_valid_channels"])      # checked by validate_config
            valid = np.tile([a in channels for a in AXES], (t, 1))
            contact = grasp
        else:
            force, valid, contact = np.zeros((t, 3)), np.ones((t, 3), dtype=bool), np.zeros(t, dtype=bool)
    except LabelError as err:
        raise ConvertError(f"{path}: {err}") from err
    force = np.where(valid, force, np.nan)
    for k, a in enumerate(AXES):
        frames[f"force_{a}"] = force[:, k]
        frames[f"force_valid_{a}"] = valid[:, k]
    frames["contact"] = contact
    frames[f"condition_{condition_joint}"] = np.full(t, condition[condition_joint])
    return {"force_invalid": int((~valid).any(axis=1).sum()), "contact_frames": int(contact.sum())}


def _truth_frames(frames: dict[str, np.ndarray], streams: Mapping[str, Stream], config: Mapping[str, Any],
                  targets: np.ndarray) -> bool:
    if "truth_wrench" not in streams and "truth_contact" not in streams:
        return False
    t = len(targets)
    if "truth_wrench" in streams:
        wrench = streams["truth_wrench"]
        force, ok = align.nearest_within(wrench.stamps, wrench.values["force"], targets,
                                         _ns(config["tolerance"]["truth_s"]))
    else:
        force, ok = np.full((t, 3), np.nan), np.zeros(t, dtype=bool)
    for k, a in enumerate(AXES):
        frames[f"truth_force_{a}"] = force[:, k]
    if "truth_contact" in streams:
        contact = streams["truth_contact"]
        frames["truth_contact"] = align.hold_state(contact.stamps, contact.values["data"], targets, 0.0) > 0.5
    else:
        frames["truth_contact"] = np.zeros(t, dtype=bool)
    frames["truth_valid"] = ok
    return True


def add_missing_truth(frames: dict[str, np.ndarray]) -> None:
    t = len(frames["time"])
    for a in AXES:
        frames[f"truth_force_{a}"] = np.full(t, np.nan)
    frames["truth_contact"] = np.zeros(t, dtype=bool)
    frames["truth_valid"] = np.zeros(t, dtype=bool)
