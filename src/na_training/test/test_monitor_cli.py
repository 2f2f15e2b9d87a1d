"""``na-train monitor``'s summary: false alarms are nominal episodes decided degraded per 10 min of nominal time."""

from __future__ import annotations

import pytest

from na_training.monitor_cli import markdown, summarise


def _row(name: str, nominal: bool, seconds: float, degraded_at: float | None) -> dict:
    return {"episode": name, "split": "test", "task": "pick_place", "condition_label": 1.0 if nominal else 0.0,
            "state": "degraded" if degraded_at is not None else "nominal", "degraded_at_s": degraded_at,
            "unsupervised_states": {}, "nominal": nominal, "duration_s": seconds}


def test_false_alarms_count_only_nominal_episodes_over_their_own_time():
    rows = [_row("a", True, 240.0, None), _row("b", True, 360.0, 12.0), _row("c", True, 300.0, None),
            _row("r", False, 120.0, 2.0), _row("s", False, 90.0, 75.0)]
    summary = summarise(rows, within_s=60.0)
    assert summary["episodes"] == 5 and summary["degraded"] == 3
    assert summary["degraded_within_s"] == 2            # b at 12 s and r at 2 s; s at 75 s is later
    assert summary["nominal_episodes"] == 3 and summary["nominal_s"] == pytest.approx(900.0)
    assert summary["false_alarms"] == 1
    assert summary["false_alarms_per_10_min"] == pytest.approx(600.0 / 900.0)
    text = markdown({"supervised_joint": "joint3", "episodes": rows, "summary": summary})
    assert "1 of 3 (15.0 min), 0.67 per 10 min" in text


def test_without_nominal_episodes_there_is_no_rate():
    summary = summarise([_row("r", False, 120.0, 2.0)], within_s=60.0)
    assert summary["false_alarms_per_10_min"] is None and summary["false_alarms"] == 0
    assert "labelled nominal" not in markdown({"supervised_joint": "joint3", "episodes": [], "summary": summary})
