"""``na-train adapt``: recalibrate a trained model to a new or worn arm from a few trajectories (paper Sec. IV-E).

Fine-tuning starts from the parent run's EMA weights and trains every head on the new NAD's train split
(its val split for the validation records), with the parent's recipe and loss weights. Choices, since
the paper gives only "70 epochs" for its 12 trajectories:

- an epoch is one pass of the rollout frames over the train split: ``ceil(frames / (batch x horizon))``
  steps, the horizon being the parent curriculum's last one (capped to the shortest episode);
- the learning rate peaks at a quarter of the parent's (``--lr`` overrides), with a warm-up of 5 % of
  the steps and a cosine decay to 5 % over the run: large enough to move the torque surrogate to the
  new friction and efficiency, small enough to keep what the force heads learned;
- the feature statistics stay the parent's (the exported model's input normalisation and pad frame do
  not change under the estimator) unless ``--refit-stats``.

The new run's ``run.json`` names its parent (run, checkpoint step, dataset) and the adaptation data;
``--export`` writes the ONNX model through ``na-train export``'s own code. ``--compare`` evaluates the
parent and the adapted run on the new NAD's test split and writes the before/after table in the paper's
Tab. VIII form (joint MAE in degrees, gripper in mm, force in N at several rollout horizons) and a
progress plot of the validation rollout error over the epochs (Fig. 11 style).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from na_description.features import FeatureStats, feature_names
from na_training.evaluate import EvaluationError, check_compatibility, evaluate
from na_training.export_cli import configure_export_parser, run_export
from na_training.nad import load_nad, read_info, robot_spec

ADAPT_LR_FACTOR = 0.25
DEFAULT_EPOCHS = 70
MIN_TRAIN_FRAMES = 200          # below this a "recalibration" is noise fitting
TABLE_HORIZONS = (100, 300, 500)


class AdaptError(ValueError):
    """Bad input for ``na-train adapt``; the message names the problem."""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def adaptation_plan(config, train_frames: int, epochs: int, shortest: int, learning_rate: float | None):
    """The fine-tuning config: steps for ``epochs`` passes, one horizon, the adaptation learning rate."""
    horizon = max(1, min(config.max_horizon, shortest - config.model.history_length - 2))
    steps_per_epoch = max(1, math.ceil(train_frames / (config.batch_size * horizon)))
    steps = epochs * steps_per_epoch
    peak = float(learning_rate) if learning_rate is not None else config.optim.learning_rate * ADAPT_LR_FACTOR
    optim = replace(config.optim, learning_rate=peak, warmup_steps=max(1, steps // 20), decay_steps=steps)
    adapted = replace(config, optim=optim, steps=steps, curriculum=((0, horizon),), eval_every=steps_per_epoch * 5,
                      checkpoint_every=steps, eval_batches=max(1, config.eval_batches))
    return adapted, steps_per_epoch


def adapt_run(parent: str | Path, nad: str | Path, out: str | Path, *, epochs: int = DEFAULT_EPOCHS,
              learning_rate: float | None = None, refit_stats: bool = False, seed: int | None = None,
              progress: bool = True) -> dict[str, Any]:
    """Fine-tune ``parent`` on ``nad``; writes the new run to ``out`` and returns its provenance."""
    from na_training.config import config_from_dict, for_robot  # lazy: jax, flax (its model config)
    from na_training.train import Trainer, TrainState, load_run, load_trained_model  # lazy: jax, mujoco, orbax

    if epochs < 1:
        raise AdaptError(f"--epochs must be at least 1, got {epochs}")
    parent, nad, out = Path(parent), Path(nad), Path(out)
    if not (nad / "meta" / "info.json").is_file():
        raise AdaptError(f"{nad} is not a NAD (no meta/info.json)")
    if out.exists() and any(out.iterdir()):
        raise AdaptError(f"{out} exists and is not empty; choose another --out (nothing was written)")
    description = load_run(parent)            # one-line errors for a missing or damaged run.json
    if not (parent / "checkpoints").is_dir() or not any((parent / "checkpoints").iterdir()):
        raise AdaptError(f"{parent} has no checkpoint to adapt from")
    info = read_info(nad)
    spec = robot_spec(info)
    try:
        check_compatibility(description, info, feature_names(spec))
    except EvaluationError as err:
        raise AdaptError(str(err)) from None
    config = for_robot(config_from_dict(description["config"], f"{parent}/run.json"), spec)
    if seed is not None:
        config = replace(config, seed=seed)
    train, val = load_nad(nad, "train"), load_nad(nad, "val")
    frames = sum(len(e) for e in train)
    if not train or frames < MIN_TRAIN_FRAMES:
        raise AdaptError(f"{nad}: the train split has {len(train)} episode(s), {frames} frames; adaptation needs "
                         f"at least {MIN_TRAIN_FRAMES} frames")
    shortest = min(len(e) for e in train + val)
    adapted, steps_per_epoch = adaptation_plan(config, frames, epochs, shortest, learning_rate)
    adapted = replace(adapted, dataset_id=str(info.get("dataset_id", "")))
    parent_stats = FeatureStats.from_dict(description["feature_stats"])
    model, parent_description = load_trained_model(parent)          # EMA weights, one-line error if damaged
    _log(f"[adapt] {parent} (step {parent_description['checkpoint_step']}) -> {out}: {len(train)} train / "
         f"{len(val)} val episodes, {frames} frames; {epochs} epochs x {steps_per_epoch} steps, horizon "
         f"{adapted.max_horizon}, peak learning rate {adapted.optim.learning_rate:.2e}"
         + ("; feature statistics refitted" if refit_stats else "; the parent's feature statistics"))
    trainer = Trainer(adapted, train, val, run_dir=out, spec=spec, stats=None if refit_stats else parent_stats,
                      log=_log if progress else None)
    import jax
    from flax import nnx

    _, params, _ = nnx.split(model, nnx.Param, ...)
    if refit_stats:      # the parent's weights with this trainer's statistics (set in its model state)
        trainer.model.set_feature_stats(trainer.stats.mean, trainer.stats.std)
    trainer.state = TrainState(0, params, jax.tree.map(lambda x: x, params), trainer.optimizer.init(params))
    trainer.provenance = {
        "adapted_from": {"run": str(parent.resolve()), "checkpoint_step": parent_description["checkpoint_step"],
                         "dataset_id": description.get("dataset_id", description.get("config", {}).get("dataset_id"))},
        "adaptation": {"nad": str(nad.resolve()), "dataset_id": info.get("dataset_id"), "epochs": epochs,
                       "steps_per_epoch": steps_per_epoch, "train_frames": frames,
                       "learning_rate": adapted.optim.learning_rate, "refit_stats": refit_stats},
    }
    try:
        last = trainer.fit(resume=False, progress=progress)      # saves the last step's checkpoint
    finally:
        trainer.close()
    _log(f"[adapt] done: step {trainer.state.step}, loss {last.get('loss', float('nan')):.4g}")
    return trainer.provenance


# ------------------------------------------------------------------------------------ before/after

def before_after(parent: Path, adapted: Path, nad: Path, out: Path, horizons=TABLE_HORIZONS) -> dict[str, Any]:
    """Evaluate both runs on the NAD's test split; the paper's Tab. VIII layout plus the reductions."""
    results = {}
    for name, run in (("before", parent), ("after", adapted)):
        results[name] = evaluate(run, nad, "test", out / f"eval_{name}", horizons=horizons, plots=0, progress=False)
    rows = {}
    for name, result in results.items():
        avg = {h: result["rollout"][str(h)]["rows"]["avg"] for h in horizons}
        joints = [k for k in avg[horizons[0]] if k not in ("gripper", "force", "episodes")]
        rows[name] = {"joints_deg": {h: [avg[h][j] for j in joints] for h in horizons},
                      "gripper": {h: avg[h]["gripper"] for h in horizons},
                      "force_n": {h: avg[h]["force"] for h in horizons},
                      "tracking_deg": float(np.mean([np.mean([avg[h][j] for j in joints]) for h in horizons])),
                      "streaming_force_mae_n": _streaming_avg(result)}
    summary = {
        "rows": rows, "horizons": list(horizons), "joints": joints,
        "gripper_unit": results["after"].get("gripper_unit", "mm"),
        "tracking_reduction": 1.0 - rows["after"]["tracking_deg"] / rows["before"]["tracking_deg"],
        "force_change": rows["after"]["streaming_force_mae_n"] / rows["before"]["streaming_force_mae_n"] - 1.0,
    }
    (out / "adapt_table.json").write_text(json.dumps(summary, indent=2) + "\n")
    (out / "adapt_table.md").write_text(adapt_markdown(summary))
    return summary


def _streaming_avg(result: dict[str, Any]) -> float:
    force = result.get("streaming", {}).get("force_mae", {})
    return float(force.get("avg", math.nan)) if isinstance(force, dict) else math.nan


def adapt_markdown(summary: dict[str, Any]) -> str:
    horizons, joints = summary["horizons"], summary["joints"]
    grip = f"Grip ({summary.get('gripper_unit', 'mm')})"
    head = " | ".join(f"{h}: {', '.join(['J' + str(k + 1) for k in range(len(joints))])} (deg), {grip}, F (N)"
                      for h in horizons)
    lines = ["# Adaptation: before and after on the new arm's test split (paper Tab. VIII layout)", "",
             f"| model | {head} | mean J (deg) | streaming force MAE (N) |",
             "|---|" + "---|" * (len(horizons) + 2)]
    for name in ("before", "after"):
        row = summary["rows"][name]
        cells = [", ".join(f"{v:.2f}" for v in row["joints_deg"][h]) + f", {row['gripper'][h]:.2f}, "
                 f"{row['force_n'][h]:.3f}" for h in horizons]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {row['tracking_deg']:.2f} | "
                     f"{row['streaming_force_mae_n']:.4f} |")
    lines += ["", f"Tracking error (mean of J1-J{len(joints)} over the horizons) reduced by "
                  f"{summary['tracking_reduction'] * 100:.1f} %; streaming force MAE changed by "
                  f"{summary['force_change'] * 100:+.1f} %.", ""]
    return "\n".join(lines)


def progress_plot(run: Path, out_png: Path, steps_per_epoch: int) -> Path | None:
    """Validation rollout arm error over the adaptation epochs (Fig. 11 style)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    val = [r for r in records if r.get("split") == "val"]
    key = next((k for k in ("rollout_arm_mae_rad", "arm_mae_rad") if val and k in val[0]), None)
    if key is None:
        return None
    epochs = [r["step"] / steps_per_epoch for r in val]
    fig, axis = plt.subplots(figsize=(6, 3.5))
    axis.plot(epochs, [math.degrees(r[key]) for r in val], "o-")
    axis.set_xlabel("epoch")
    axis.set_ylabel("validation rollout joint error (deg)")
    axis.set_title("Adaptation progress")
    fig.tight_layout()
    fig.savefig(out_png, dpi=100)
    plt.close(fig)
    return out_png


# ------------------------------------------------------------------------------------ CLI

DESCRIPTION = (
    "Fine-tune a trained run on a few trajectories of a new or worn arm (paper Sec. IV-E): every head, from the "
    "parent's EMA weights, on NEW_NAD's train split (val split for validation), keeping the parent's feature "
    "statistics unless --refit-stats. Writes a new run with its provenance; --export writes model.onnx, "
    "--compare the before/after table on NEW_NAD's test split and a progress plot.")


def add_adapt_parser(subparsers) -> argparse.ArgumentParser:
    parser = subparsers.add_parser("adapt", help="recalibrate a trained run to a new arm from a few trajectories",
                                   description=DESCRIPTION)
    parser.add_argument("--from", dest="parent", required=True, metavar="RUN", help="run directory to start from")
    parser.add_argument("--nad", required=True, help="NAD recorded on the new arm")
    parser.add_argument("--out", required=True, help="new run directory (must not exist or be empty)")
    parser.add_argument("--epochs", type=int, default=DEFAULT_EPOCHS, help=f"passes over the train split "
                        f"(default {DEFAULT_EPOCHS}, the paper's)")
    parser.add_argument("--lr", type=float, default=None,
                        help=f"peak learning rate (default: {ADAPT_LR_FACTOR} x the parent's)")
    parser.add_argument("--refit-stats", action="store_true", help="refit the feature statistics on the new NAD")
    parser.add_argument("--seed", type=int, default=None, help="batch seed (default: the parent's)")
    parser.add_argument("--export", action="store_true", help="also write OUT/model.onnx (checked against JAX)")
    parser.add_argument("--compare", action="store_true",
                        help="evaluate parent and adapted run on NEW_NAD's test split: adapt_table.md/.json, plot")
    parser.add_argument("--quiet", action="store_true", help="no progress output")
    parser.set_defaults(handler=run_adapt)
    return parser


def run_adapt(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        provenance = adapt_run(args.parent, args.nad, out, epochs=args.epochs, learning_rate=args.lr,
                               refit_stats=args.refit_stats, seed=args.seed, progress=not args.quiet)
        if args.export:        # na-train export's own path: variants checked against JAX on the new NAD
            export_args = configure_export_parser(argparse.ArgumentParser()).parse_args(
                [str(out), "--out", str(out / "model.onnx"), "--nad", str(args.nad)])
            if run_export(export_args) != 0:
                raise AdaptError(f"the export of {out} failed (message above); the adapted run is kept")
        if args.compare:
            summary = before_after(Path(args.parent), out, Path(args.nad), out)
            print(adapt_markdown(summary))
            plot = progress_plot(out, out / "adapt_progress.png", provenance["adaptation"]["steps_per_epoch"])
            _log(f"[adapt] wrote {out / 'adapt_table.md'}" + (f" and {plot}" if plot else ""))
    except (AdaptError, EvaluationError, ValueError, FileNotFoundError, FloatingPointError) as err:
        print(f"na-train adapt: error: {err}", file=sys.stderr)
        return 2
    return 0
