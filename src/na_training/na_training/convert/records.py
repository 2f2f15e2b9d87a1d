"""What the dataset says about each converted bag: its ``meta/episodes.parquet`` row, and the
``meta/report.json`` totals and text table."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from na_training import labels
from na_training.convert.bag import BagContents
from na_training.convert.frames import EpisodeFrames


def episode_row(contents: BagContents, frames: EpisodeFrames, condition_joint: str) -> dict[str, Any]:
    """The episodes.parquet fields of one converted bag."""
    meta = contents.metadata
    n_frames = len(frames.data["time"])
    return {
        "episode_id": str(meta.get("episode_id", contents.path.name)),
        "task": meta["task"],
        "task_instance": meta["task_instance"],
        "payload_grams": float(meta["payload_grams"]),
        "force_source": meta["force_source"],
        "condition": meta["condition"],
        "condition_label": labels.condition_labels(meta["condition"], condition_joint)[condition_joint],
        "frame_count": n_frames,
        "duration_s": float(frames.data["time"][-1]) if n_frames else 0.0,
        "source_bag": contents.path.as_posix(),
        "source": meta.get("source", ""),
        "seed": None if meta.get("seed") is None else int(meta["seed"]),
        "operator": meta.get("operator", ""),
        "notes": meta.get("notes", ""),
        "complete": bool(meta.get("complete", True)),
        "recovered": bool(meta.get("recovered", False)),
    }


REPORT_FIELDS = ("follower_samples", "frames", "dropped_head", "dropped_tail", "misaligned", "invalid_frames",
                 "force_invalid", "contact_frames")


def totals(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return {key: int(sum(row[key] for row in rows)) for key in REPORT_FIELDS}


def format_report(report: Mapping[str, Any]) -> str:
    """The per-episode report as a fixed-width text table."""
    header = ("episode", *REPORT_FIELDS)
    rows = [[str(r["episode_index"])] + [str(r[k]) for k in REPORT_FIELDS] for r in report["episodes"]]
    rows.append(["total"] + [str(report["totals"][k]) for k in REPORT_FIELDS])
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]
    lines = ["  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True))]
    lines += ["  ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    lines += [f"skipped {s['source_bag']}: {s['error']}" for s in report["skipped"]]
    return "\n".join(lines)
