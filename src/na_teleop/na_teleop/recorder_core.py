"""Episode recorder core (ROS-free): one episode bag at a time, durable chunks, per-episode report.

The node feeds it raw CDR messages from ``raw=True`` subscriptions, so nothing is deserialised on
the recording path. Durability: the bag's MCAP chunk is closed and fsynced every
``flush_period`` s, so a recorder killed with SIGKILL loses at most that much; the episode's
sidecar says ``complete=false`` until ``stop`` and :func:`na_common.bag_repair.recover_episode`
makes such a bag readable again (the recorder does it for leftovers at start-up).

Integrity: the node hands every /diagnostics array to :meth:`RecorderCore.on_diagnostics`; the faults of an
episode (:mod:`na_teleop.episode_faults`: a tripped arm driver, a lost bus, a silent servo, any other ERROR)
go into its metadata as ``faults``, ``void`` and ``void_reason`` (the sidecar at once, metadata.yaml on stop).
"""

from __future__ import annotations

import errno
import json
import shutil
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from na_common.bag_repair import RepairReport, recover_incomplete_episodes
from na_common.diagnostics import StatusReport
from na_common.episode_bag import EpisodeBagError, EpisodeWriter
from na_common.episode_bag.messages import cdr_header_stamp_ns, has_header
from na_common.episode_bag.metadata import FAULTS_KEY, VOID_KEY, VOID_REASON_KEY, task_instance_id
from na_teleop.episode_faults import Fault, FaultMonitor

REPORT_NAME = "report.json"


class RecorderError(RuntimeError):
    """A recording request that cannot be carried out; the message says why."""


@dataclass
class TopicStats:
    count: int = 0
    first_ns: int | None = None
    last_ns: int | None = None
    max_gap_ns: int = 0

    def add(self, stamp_ns: int) -> None:
        if self.last_ns is not None:
            self.max_gap_ns = max(self.max_gap_ns, stamp_ns - self.last_ns)
        if self.first_ns is None:
            self.first_ns = stamp_ns
        self.last_ns = stamp_ns
        self.count += 1

    def rate(self) -> float:
        if self.count < 2 or self.first_ns is None or self.last_ns is None or self.last_ns <= self.first_ns:
            return 0.0
        return (self.count - 1) / ((self.last_ns - self.first_ns) * 1e-9)


@dataclass
class EpisodeReport:
    episode_id: int
    path: str
    complete: bool
    duration: float
    topics: dict[str, dict[str, float]] = field(default_factory=dict)
    missing_topics: list[str] = field(default_factory=list)
    error: str = ""
    void: bool = False
    void_reason: str = ""
    faults: list[str] = field(default_factory=list)     # one line per fault seen during the episode

    def lines(self) -> list[str]:
        head = f"episode {self.episode_id:06d}: {self.duration:.1f} s, {'complete' if self.complete else 'INCOMPLETE'}"
        if self.void:
            head += f", VOID ({self.void_reason}; na-train convert leaves it out)"
        rows = [f"  {name:28s} {t['count']:7.0f} msgs {t['rate_hz']:7.1f} Hz  max gap {t['max_gap_s'] * 1e3:6.1f} ms"
                for name, t in self.topics.items()]
        rows += [f"  {name:28s} no messages" for name in self.missing_topics]
        rows += [f"  fault: {line}" for line in self.faults]
        return [head, *rows] + ([f"  error: {self.error}"] if self.error else [])


class RecorderCore:
    def __init__(self, output_dir: str | Path, topics: Mapping[str, str] | None = None, *, flush_period: float = 1.0,
                 min_free_bytes: int = 100 * 2**20, defaults: Mapping[str, Any] | None = None,
                 configured_topics: list[str] | None = None) -> None:
        self.output_dir = Path(output_dir).expanduser()
        self.topics: dict[str, str] = {}   # topic -> type, grows as publishers are discovered
        self._stamped: dict[str, bool] = {}  # topic -> its messages carry a header stamp
        self.flush_period = flush_period
        self.min_free_bytes = min_free_bytes
        self.defaults = dict(defaults or {})
        self.configured_topics = list(configured_topics or [])  # reported as missing when never seen
        self.writer: EpisodeWriter | None = None
        self.stats: dict[str, TopicStats] = {}
        self._last_flush = 0.0
        self.error = ""
        self.repair = RepairReport()
        self.faults = FaultMonitor()
        for name, msgtype in (topics or {}).items():
            self.add_topic(name, msgtype)

    # -- set-up ----------------------------------------------------------------------------
    def prepare(self) -> RepairReport:
        """Create/check the output directory and repair episodes left by a killed recorder (those that cannot
        be repaired are set aside, never a reason not to start)."""
        try:
            self.output_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise RecorderError(f"cannot create output directory {self.output_dir}: {exc.strerror}") from exc
        self._check_writable()
        self.repair = recover_incomplete_episodes(self.output_dir)
        return self.repair

    def _check_writable(self) -> None:
        probe = self.output_dir / ".write_test"
        try:
            probe.write_bytes(b"")
            probe.unlink()
        except OSError as exc:
            raise RecorderError(f"output directory {self.output_dir} is not writable: {exc.strerror}") from exc
        free = shutil.disk_usage(self.output_dir).free
        if free < self.min_free_bytes:
            raise RecorderError(f"only {free / 2**20:.0f} MiB free in {self.output_dir} "
                                f"(need {self.min_free_bytes / 2**20:.0f} MiB)")

    def add_topic(self, name: str, msgtype: str) -> None:
        """Record ``name`` from now on (also in the episode being recorded)."""
        self.topics[name] = msgtype
        self._stamped[name] = has_header(msgtype)
        if self.writer is not None and name not in self.stats:
            try:
                self.writer.add_topic(name, msgtype)
            except EpisodeBagError as exc:
                self.error = f"cannot record {name}: {exc}"
                return
            self.stats[name] = TopicStats()

    # -- episodes --------------------------------------------------------------------------
    @property
    def recording(self) -> bool:
        return self.writer is not None

    def start(self, info: Mapping[str, Any], stamp_ns: int) -> EpisodeWriter:
        if self.writer is not None:
            raise RecorderError(f"already recording {self.writer.path.name}; stop or discard it first")
        self._check_writable()
        meta = {**self.defaults, **{k: v for k, v in info.items() if v not in ("", None)}}
        if not meta.get("task"):
            raise RecorderError("an episode needs a task name")
        meta.setdefault("payload_grams", 0.0)
        meta.setdefault("force_source", "payload" if float(meta["payload_grams"]) > 0 else "none")
        meta.setdefault("condition", "nominal")
        meta["source"] = "live"
        meta["start_stamp"] = int(stamp_ns)
        meta["task_instance"] = task_instance_id(meta["task"], float(meta["payload_grams"]), meta["condition"])
        self.faults.begin()                # a fault that is active now belongs to the episode too
        meta.update(self.faults.metadata())
        try:
            writer = EpisodeWriter(self.output_dir, meta)
            for topic, msgtype in self.topics.items():
                writer.add_topic(topic, msgtype)
        except (EpisodeBagError, ValueError, OSError) as exc:
            self.faults.end()
            raise RecorderError(f"cannot start an episode: {exc}") from exc
        self.writer = writer
        self.stats = {topic: TopicStats() for topic in self.topics}
        self.error = ""
        self._last_flush = time.monotonic()
        return writer

    def on_message(self, topic: str, stamp_ns: int, raw_cdr: bytes) -> None:
        """Write one message of the current episode (ignored when not recording)."""
        writer = self.writer
        if writer is None or topic not in self.stats:
            return
        try:
            writer.write_raw(topic, stamp_ns, raw_cdr)
        except OSError as exc:
            self._fail(exc)
            return
        # Rates and gaps in the report use the sample time (header stamp) where the message has one:
        # receive times bunch up while discovery settles. The bag's log time stays the receive time.
        self.stats[topic].add(cdr_header_stamp_ns(raw_cdr) if self._stamped.get(topic) else stamp_ns)
        now = time.monotonic()
        if now - self._last_flush >= self.flush_period:
            self._last_flush = now
            try:
                writer.flush()
            except OSError as exc:
                self._fail(exc)

    def on_diagnostics(self, statuses: Iterable[StatusReport], stamp_ns: int) -> list[Fault]:
        """One /diagnostics array; returns the faults that began with it. During an episode a new fault is
        written to the episode's sidecar at once (a recorder killed later keeps it)."""
        new = self.faults.update(statuses, stamp_ns)
        writer = self.writer
        if new and writer is not None and self.faults.recording:
            try:
                writer.update_metadata(self.faults.metadata())
            except OSError as exc:
                self._fail(exc)
        return new

    def _fail(self, exc: OSError) -> None:
        """A write failed (disk full, device gone): end the episode loudly, keep what is on disk."""
        reason = "disk full" if exc.errno == errno.ENOSPC else (exc.strerror or str(exc))
        self.error = f"writing {self.writer.path if self.writer else '?'} failed: {reason}"
        if self.writer is not None:
            self.writer.abort()
            self.writer = None
            self.faults.end()

    def stop(self, stamp_ns: int, complete: bool = True) -> EpisodeReport:
        """Finish the episode; ``complete=False`` when the recorder shuts down mid-episode."""
        writer = self._require_writer()
        writer.metadata.update(self.faults.end())
        try:
            path = writer.close(complete=complete, stop_stamp_ns=stamp_ns)
        except OSError as exc:
            self._fail(exc)
            raise RecorderError(self.error) from exc
        finally:
            self.writer = None
        report = self._report(writer, path, complete=complete, stop_ns=stamp_ns)
        (path / REPORT_NAME).write_text(json.dumps(report.__dict__, indent=2, sort_keys=True) + "\n")
        return report

    def discard(self) -> Path:
        writer = self._require_writer()
        writer.abort()
        self.writer = None
        self.faults.end()
        shutil.rmtree(writer.path, ignore_errors=True)
        return writer.path

    def _require_writer(self) -> EpisodeWriter:
        if self.writer is None:
            raise RecorderError("not recording" + (f" ({self.error})" if self.error else ""))
        return self.writer

    def _report(self, writer: EpisodeWriter, path: Path, complete: bool, stop_ns: int) -> EpisodeReport:
        start_ns = int(writer.metadata.get("start_stamp") or stop_ns)
        meta = writer.metadata
        report = EpisodeReport(int(meta["episode_id"]), str(path), complete, max(0.0, (stop_ns - start_ns) * 1e-9),
                               error=self.error, void=bool(meta.get(VOID_KEY)),
                               void_reason=meta.get(VOID_REASON_KEY, ""),
                               faults=[f"{f['status']}: {f['message']}" for f in meta.get(FAULTS_KEY, [])])
        for topic in sorted(set(self.configured_topics) - set(self.stats)):
            report.missing_topics.append(topic)
        for topic, stats in self.stats.items():
            if stats.count == 0:
                report.missing_topics.append(topic)
            else:
                report.topics[topic] = {"count": stats.count, "rate_hz": round(stats.rate(), 3),
                                        "max_gap_s": round(stats.max_gap_ns * 1e-9, 6)}
        return report

    def live_status(self, now_ns: int) -> dict[str, Any]:
        """Counts and rates of the episode being recorded (for the CLI display)."""
        if self.writer is None:
            return {"recording": False, "error": self.error}
        start_ns = int(self.writer.metadata["start_stamp"])
        return {"recording": True, "episode": self.writer.path.name, "task": self.writer.metadata["task"],
                "elapsed": max(0.0, (now_ns - start_ns) * 1e-9), "error": self.error,
                "void": bool(self.writer.metadata.get(VOID_KEY)),
                "topics": {t: {"count": s.count, "rate_hz": round(s.rate(), 1)} for t, s in self.stats.items()}}

