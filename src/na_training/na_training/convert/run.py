"""``convert``: every bag in worker processes, their episodes taken in bag order into one NAD.

Episodes whose metadata marks them void (the recorder saw an arm driver trip or a bus go silent:
``void``, ``void_reason``) are left out, named with their reason and listed under ``void`` in the
report; ``keep_void`` (``--keep-void``) converts them, listed under ``void_kept``.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from na_description import SpecError, load_spec
from na_training.align import NS_PER_S
from na_training.convert.bag import expand_bag_paths, recorded_topics
from na_training.convert.config import DEFAULT_CONFIG, ConvertError, validate_config
from na_training.convert.job import BagOutcome, EpisodeJob, convert_bag
from na_training.convert.records import totals
from na_training.nad import NadWriter, build_columns
from na_training.progress import ItemProgress
from na_training.workers import OrderedWorkers, available_cpus


@dataclass
class ConvertResult:
    out: Path
    episodes: int
    frames: int
    skipped: list[dict[str, str]]
    report: dict[str, Any]
    void: list[dict[str, Any]] = field(default_factory=list)   # void episodes left out: source_bag, episode, reason
    messages: int = 0              # messages in the converted and skipped bags, every topic
    seconds: float = 0.0           # wall-clock time of the conversion


def default_jobs() -> int:
    """Worker processes ``convert`` uses unless told: one per CPU this process may use."""
    return available_cpus()


def _outcome(path: Path, result: Any) -> BagOutcome:
    """A task's outcome; a worker that died or failed unexpectedly stops the run with the bag's name."""
    try:
        return result()
    except BrokenProcessPool as err:
        raise ConvertError(f"{path}: the worker process converting this bag died ({err})") from err
    except Exception as err:
        raise ConvertError(f"{path}: conversion failed ({type(err).__name__}: {err})") from err


def convert(bags: Sequence[str | Path], out: str | Path, *, config: Mapping[str, Any] | None = None,
            rate_hz: float | None = None, seed: int | None = None, overwrite: bool = False,
            skip_bad: bool = False, progress: bool = True, jobs: int | None = None,
            robot: str | None = None, keep_void: bool = False) -> ConvertResult:
    """Convert episode bags to a NAD at ``out`` (written atomically; nothing is written on error).

    ``jobs`` worker processes convert the bags (default: one per CPU); the dataset is the same
    byte for byte whatever their number. ``robot``: the arm the bags were recorded with (a shipped spec
    name such as ``so101``, or a spec path; default the OpenManipulator-X). Episodes marked void are left
    out (``ConvertResult.void``, the report's ``void``) unless ``keep_void``.
    """
    started = time.perf_counter()
    config = copy.deepcopy(dict(config) if config is not None else DEFAULT_CONFIG)
    validate_config(config)
    try:
        spec = load_spec(robot)
    except SpecError as exc:
        raise ConvertError(f"--robot: {exc}") from None
    if rate_hz is not None and (not np.isfinite(rate_hz) or rate_hz <= 0):
        raise ConvertError(f"--rate must be a positive number of Hz, got {rate_hz}")
    jobs = default_jobs() if jobs is None else jobs
    if jobs < 1:
        raise ConvertError(f"--jobs must be at least 1, got {jobs}")
    split_seed = int(config["split_seed"] if seed is None else seed)
    paths = expand_bag_paths(bags)
    with OrderedWorkers(min(jobs, len(paths))) as workers:
        recorded = _recorded_topics_of(paths, workers)
        truth_topics = {config["topics"]["truth_wrench"], config["topics"]["truth_contact"]}
        with_truth = any(truth_topics & set(topics) for topics in recorded)
        optional = ("load",) if spec.effort_signal == "load" else ()
        columns = build_columns(spec.joint_names, [spec.condition_joint], with_truth, optional)
        job = EpisodeJob(config=config, robot=spec.name, joint_names=list(spec.joint_names), with_truth=with_truth,
                         columns=columns, effort_signal=spec.effort_signal, condition_joint=spec.condition_joint,
                         period_ns=round(NS_PER_S / rate_hz) if rate_hz is not None else None, keep_void=keep_void)
        writer = NadWriter(out, columns, overwrite=overwrite)
        try:
            converted = _convert_all(paths, recorded, job, writer, workers, skip_bad=skip_bad, progress=progress)
            report = {"episodes": converted.reports, "skipped": converted.skipped,
                      "incomplete": converted.incomplete, "void": converted.void, "void_kept": converted.void_kept,
                      "totals": totals(converted.reports)}
            writer.finish(_dataset_info(spec, job, rate_hz, converted.native_dt_ns), report, split_seed)
        except BaseException:
            workers.close()          # no worker may still write into the folder that is removed
            writer.abort()
            raise
    return ConvertResult(out=Path(out), episodes=len(converted.reports), frames=report["totals"]["frames"],
                         skipped=converted.skipped, report=report, messages=sum(sum(t.values()) for t in recorded),
                         seconds=time.perf_counter() - started, void=converted.void)


@dataclass
class _Converted:
    """What the bags gave: report rows of the episodes, skipped bags, native frame steps (ns)."""

    reports: list[dict[str, Any]] = field(default_factory=list)
    skipped: list[dict[str, str]] = field(default_factory=list)
    native_dt_ns: list[float] = field(default_factory=list)
    incomplete: list[dict[str, Any]] = field(default_factory=list)   # episodes whose recording did not finish
    void: list[dict[str, Any]] = field(default_factory=list)         # void episodes left out
    void_kept: list[dict[str, Any]] = field(default_factory=list)    # void episodes converted (keep_void)


def _convert_all(paths: Sequence[Path], recorded: Sequence[Mapping[str, int]], job: EpisodeJob, writer: NadWriter,
                 workers: OrderedWorkers, *, skip_bad: bool, progress: bool) -> _Converted:
    """Convert every bag in the workers and take their episodes in bag order."""
    done = _Converted()
    shown = ItemProgress("convert", len(paths), "bag", enabled=progress)
    try:
        tasks = [(job, path, writer.staged_path(k)) for k, path in enumerate(paths)]
        for k, result in enumerate(workers.run(convert_bag, tasks)):
            outcome = _outcome(paths[k], result)
            shown.advance(sum(recorded[k].values()), skipped=outcome.error is not None or outcome.void is not None)
            if outcome.void is not None:
                done.void.append({"source_bag": paths[k].as_posix(), "episode": paths[k].name,
                                  "reason": outcome.void})
                continue
            if outcome.error is not None:
                if not skip_bad:
                    raise ConvertError(outcome.error)
                done.skipped.append({"source_bag": paths[k].as_posix(), "error": outcome.error})
                continue
            index = writer.add_staged_episode(outcome.row, outcome.staged)
            done.reports.append({"episode_index": index, "source_bag": paths[k].as_posix(), **outcome.report})
            if not outcome.row["complete"]:
                done.incomplete.append({"episode_index": index, "source_bag": paths[k].as_posix(),
                                        "recovered": outcome.row["recovered"]})
            if outcome.void_kept is not None:
                done.void_kept.append({"episode_index": index, "source_bag": paths[k].as_posix(),
                                       "reason": outcome.void_kept})
            if outcome.native_dt_ns is not None:
                done.native_dt_ns.append(outcome.native_dt_ns)
    finally:
        shown.close()
    if not done.reports:
        raise ConvertError("no episode could be converted" + "".join(f"\n  {s['error']}" for s in done.skipped)
                           + "".join(f"\n  {v['source_bag']}: void: {v['reason']} (--keep-void converts it)"
                                     for v in done.void))
    return done


def _dataset_info(spec: Any, job: EpisodeJob, rate_hz: float | None, native_dt_ns: Sequence[float]
                  ) -> dict[str, Any]:
    """meta/info.json fields the converter knows (the writer adds the schema, splits and columns)."""
    period_ns = job.period_ns
    frame_period = period_ns / NS_PER_S if period_ns else (float(np.median(native_dt_ns)) / NS_PER_S
                                                           if native_dt_ns else None)
    columns = job.columns
    return {
        "robot": spec.name,
        "base_frame": spec.base_frame,
        "joint_names": job.joint_names,
        "condition_joints": [job.condition_joint],
        "effort_signal": job.effort_signal,
        "resampled": period_ns is not None,
        "rate_hz": (1.0 / frame_period) if frame_period else None,
        "frame_period_s": frame_period,
        "force_label": {"frame": spec.base_frame, "unit": "N",
                        "convention": "force the environment exerts on the robot at the tool point"},
        "feature_columns": [c.name for c in columns if c.group in
                            ("command", "leader", "proprioception", "telemetry")],
        "label_columns": [c.name for c in columns if c.group == "label"],
        "evaluation_columns": [c.name for c in columns if c.group == "evaluation"],
        "converter": {"config": job.config, "rate_hz": rate_hz},
    }


def _recorded_topics_of(paths: Sequence[Path], workers: OrderedWorkers, batch: int = 32) -> list[dict[str, int]]:
    """:func:`~na_training.convert.bag.recorded_topics` of every bag, read by the workers in batches."""
    batches = [(list(paths[k:k + batch]),) for k in range(0, len(paths), batch)]
    recorded: list[dict[str, int]] = []
    for (some,), result in zip(batches, workers.run(_recorded_topics_batch, batches), strict=True):
        try:
            recorded.extend(result())
        except BrokenProcessPool as err:
            raise ConvertError(f"the worker process reading the metadata of {some[0]} ... {some[-1]} died "
                               f"({err})") from err
    return recorded


def _recorded_topics_batch(paths: Sequence[Path]) -> list[dict[str, int]]:
    return [recorded_topics(path) for path in paths]
