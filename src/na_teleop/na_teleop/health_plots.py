"""One PNG per episode of the health report: condition (when recorded), temperature, effort margin, error bits."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")                      # files only: no display needed
import matplotlib.pyplot as plt
import numpy as np

from na_description.datasheet_margins import (
    EFFORT_WARNING_FRACTION,
    datasheet_reference,
    effort_margin,
)
from na_teleop.health_report import EpisodeSeries


def plot_episode(series: EpisodeSeries, out: Path) -> Path:
    """Write ``out`` (PNG) with one panel per signal, one line per motor; returns ``out``."""
    reference = datasheet_reference(series.spec)
    names = series.spec.joint_names
    panels = 3 + (series.condition is not None)
    fig, axes = plt.subplots(panels, 1, figsize=(10, 2.6 * panels), sharex=True, constrained_layout=True)
    axes = list(np.atleast_1d(axes))
    if series.condition is not None:
        ax = axes.pop(0)
        for k, name in enumerate(names):
            ax.plot(series.condition_time, series.condition[:, k], label=name, lw=1)
        ax.set_ylabel("condition (1 = normal)")
        ax.set_ylim(-0.05, 1.05)
        ax.legend(loc="lower left", ncol=len(names), fontsize="small")
    ax_t, ax_e, ax_b = axes
    for k, name in enumerate(names):
        ax_t.plot(series.time, series.temperature[:, k], label=name, lw=1)
        ax_e.plot(series.time, effort_margin(series.effort[:, k], reference), label=name, lw=1)
        ax_b.step(series.time, series.hardware_error[:, k], where="post", label=name, lw=1)
    ax_t.axhline(reference.temperature_limit_c, color="r", ls="--", lw=1, label="shutdown limit")
    ax_t.set_ylabel("temperature (degC)")
    ax_t.legend(loc="upper left", ncol=len(names) + 1, fontsize="small")
    ax_e.axhline(1.0 - EFFORT_WARNING_FRACTION, color="orange", ls="--", lw=1, label="near stall")
    ax_e.axhline(0.0, color="r", ls="--", lw=1, label="stall")
    ax_e.set_ylabel(f"effort margin\n({reference.effort_signal} vs stall)")
    ax_e.legend(loc="lower left", ncol=len(names) + 2, fontsize="small")
    ax_b.set_ylabel("error bits")
    ax_b.set_xlabel("time (s)")
    fig.suptitle(f"{series.name}: {series.spec.name} ({reference.servo_model})")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
