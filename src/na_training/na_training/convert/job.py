"""Converting one bag in a worker process: read, align and label it and write its episode file."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from na_common.episode_bag.metadata import void_reason
from na_training.convert.bag import bag_metadata, read_bag
from na_training.convert.config import ConvertError
from na_training.convert.frames import add_missing_truth, align_episode
from na_training.convert.records import episode_row
from na_training.nad import Column, write_episode_table


@dataclass(frozen=True)
class EpisodeJob:
    """What converting one bag needs besides the bag (sent to every worker task; picklable)."""

    config: dict[str, Any]
    robot: str
    joint_names: list[str]
    period_ns: int | None
    effort_signal: str
    condition_joint: str
    with_truth: bool
    columns: list[Column]
    keep_void: bool = False


@dataclass
class BagOutcome:
    """One converted bag (its episode file staged at ``staged``), or why it could not be converted."""

    path: Path
    row: dict[str, Any] | None = None
    report: dict[str, Any] | None = None
    native_dt_ns: float | None = None
    staged: Path | None = None
    error: str | None = None
    void: str | None = None          # the episode is void (the recorded reason) and was left out
    void_kept: str | None = None     # the episode is void (the recorded reason) and was converted (keep_void)


def convert_bag(job: EpisodeJob, path: Path, staged: Path) -> BagOutcome:
    """Read, align and label one bag and write its episode file to ``staged`` (runs in a worker)."""
    try:
        if not job.keep_void and (reason := void_reason(bag_metadata(path, job.config)[1])) is not None:
            return BagOutcome(path, void=reason)          # left out before any message is read
        contents = read_bag(path, job.config, job.joint_names, job.robot)
        frames = align_episode(contents, job.config, job.joint_names, job.period_ns, job.effort_signal,
                               job.condition_joint)
    except ConvertError as err:
        return BagOutcome(path, error=str(err))
    if job.with_truth and not frames.has_truth:
        add_missing_truth(frames.data)
    write_episode_table(staged, job.columns, frames.data)
    stamps = frames.data["stamp_ns"]
    return BagOutcome(path, row=episode_row(contents, frames, job.condition_joint), report=frames.report,
                      staged=staged, native_dt_ns=float(np.median(np.diff(stamps))) if len(stamps) > 1 else None,
                      void_kept=void_reason(contents.metadata))
