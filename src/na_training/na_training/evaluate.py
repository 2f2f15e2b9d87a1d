"""``na-train eval``: the paper's evaluation tables for a trained run on a NAD split.

Two prediction modes, both from the same checkpoint (EMA weights):

- **rollout** (paper Tables III-VI): from the start of every episode, the model drives the MJX arm
  for ``H`` frames with recorded commands and telemetry and simulated position/velocity
  (:func:`na_training.rollout.rollout`, the training rollout without gradients). Per-joint MAE (deg),
  gripper single-finger slide MAE (mm) and force MAE (N) over the first ``H`` frames, for
  H = 100/300/500/600 (paper Sec. IV-A: ``MAE_j(T) = 1/N sum_n 1/T sum_t |q - q_hat|``; frames are
  pooled per task/payload group, so an episode shorter than ``H`` contributes what it has, and the
  report says which did);
- **streaming** (the live estimator and ``na-train compare``): causal windows of *recorded* features
  over the whole episode: force MAE per task/payload, false-contact rate on episodes without
  contact, Joint-3 condition accuracy/precision/recall/AUC on condition episodes.

The output at t is compared with the label stamped at t (the paper's offline evaluators, Appendix
B-a), and every number comes from :mod:`na_training.baselines.metrics`, the metric code of the
comparison, on the same episode selection (:mod:`na_training.baselines.compare`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from na_description.features import feature_names, history_windows
from na_description.spec import robot_option_help
from na_training.baselines.condition import condition_experiment
from na_training.baselines.metrics import (
    classification_metrics,
    false_contact_rate,
    force_mae,
    force_mae_by_group,
    group_key,
)
from na_training.batches import RECORDED_INPUTS, recorded_inputs
from na_training.config import config_from_dict, for_robot
from na_training.episode import RESTRICTED, Episode, fill_gaps
from na_training.nad import NadError, load_usable, read_info, robot_spec
from na_training.onset_lag import lag_summary, press_lags
from na_training.progress import is_terminal

HORIZONS = (100, 300, 500, 600)          # paper Tables III-VI (600 steps ~ 10 s at 60 Hz)
ROLLOUT_BATCH = 8                        # episodes per compiled rollout call (fixed shape: one compilation)
STREAM_BATCH = 1024                      # windows per compiled forward call
RAD_TO_DEG = 180.0 / math.pi
M_TO_MM = 1000.0


class EvaluationError(ValueError):
    """A run, NAD or split that cannot be evaluated (the message says why)."""


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ inputs

def resolve_run(path: str | Path) -> tuple[Path, int | None]:
    """A run directory (latest checkpoint) or one of its ``checkpoints/N`` directories (step N)."""
    path = Path(path)
    if not path.exists():
        raise EvaluationError(f"run {path} does not exist")
    if (path / "run.json").is_file():
        return path, None
    if path.name.isdigit() and path.parent.name == "checkpoints" and (path.parent.parent / "run.json").is_file():
        return path.parent.parent, int(path.name)
    raise EvaluationError(f"{path} is neither a training run directory (with run.json) nor RUN/checkpoints/N")


def check_compatibility(description: dict[str, Any], info: dict[str, Any], expected_features: Sequence[str]) -> None:
    """Refuse a NAD whose robot, joints or feature contract differ from the run's (message says which)."""
    problems = []
    run_joints, nad_joints = list(description.get("joint_names", [])), list(info.get("joint_names", []))
    if run_joints != nad_joints:
        problems.append(f"joint names differ (run {run_joints}, NAD {nad_joints})")
    if description.get("robot") and info.get("robot") and description["robot"] != info["robot"]:
        problems.append(f"robot differs (run {description['robot']!r}, NAD {info['robot']!r})")
    run_features = list(description.get("feature_names", []))
    if run_features != list(expected_features):
        missing = sorted(set(expected_features) - set(run_features))
        extra = sorted(set(run_features) - set(expected_features))
        problems.append(f"features differ from this NAD's feature contract ({len(run_features)} in the run, "
                        f"{len(expected_features)} here; not in run: {missing[:5]}, only in run: {extra[:5]})")
    if problems:
        raise EvaluationError("the NAD does not match the run: " + "; ".join(problems))


def load_split(nad: str | Path, split: str, skipped: list[str]) -> list[Episode]:
    """The split's episodes; unusable ones (too short, a joint without samples) are left out and listed in
    ``skipped``, as ``na-train compare`` does."""
    before = len(skipped)
    episodes = load_usable(nad, split, skipped)
    for message in skipped[before:]:
        _log(f"[eval] {message}")
    return episodes


def group_of(episode: Episode) -> str:
    """The task/payload group of an episode's table row."""
    return group_key(episode.task, episode.payload_grams)


# ------------------------------------------------------------------------------------ rollout mode

def rollout_inputs(episodes: Sequence[Episode], pad_frame: np.ndarray, history_length: int, horizon: int
                   ) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Batch arrays for rollouts of ``horizon`` frames from each episode's first frame.

    Inputs after an episode's last usable frame repeat that frame, and gaps (invalid frames) hold the
    last good sample, so one bad frame cannot poison the rest of a rollout (its errors are masked);
    ``frames`` gives, per episode, how many rollout steps have a recorded next state (min(horizon, T - 1))."""
    batch: dict[str, list[np.ndarray]] = {k: [] for k in ("history", "qpos0", "qvel0", *RECORDED_INPUTS)}
    frames = []
    for ep in episodes:
        usable = min(horizon, len(ep) - 1)
        index = np.minimum(np.arange(horizon), usable - 1)
        batch["history"].append(np.broadcast_to(pad_frame, (history_length - 1, pad_frame.shape[0])))
        batch["qpos0"].append(np.nan_to_num(fill_gaps(ep.qpos)[0]))
        batch["qvel0"].append(np.nan_to_num(fill_gaps(ep.qvel)[0]))
        for key, values in recorded_inputs(ep).items():
            batch[key].append(np.nan_to_num(fill_gaps(values))[index])
        frames.append(usable)
    return {k: np.stack(v).astype(float) for k, v in batch.items()}, np.asarray(frames)


class RolloutEvaluator:
    """The training rollout, jitted once for a fixed batch and horizon, forward only."""

    def __init__(self, model, config, spec) -> None:
        import jax
        from flax import nnx

        from na_training.rollout import ArmSimulator, enable_float64, rollout

        enable_float64(config.sim.float64)
        self.simulator = ArmSimulator(spec, replace(config.sim, remat=False))
        graphdef, params, rest = nnx.split(model, nnx.Param, ...)
        self._params = params
        self._run = jax.jit(lambda p, batch: rollout(graphdef, p, rest, self.simulator, batch))
        self.history_length = model.config.history_length
        self.pad_frame = np.asarray(model.feature_mean[...], dtype=float)

    def run(self, episodes: Sequence[Episode], horizon: int, progress: bool = True) -> list[dict[str, np.ndarray]]:
        """Per episode: simulated ``qpos`` [T, n] (states 1..T) and ``force`` [T, 3] (outputs at 0..T-1)."""
        results = []
        chunks = range(0, len(episodes), ROLLOUT_BATCH)
        shown = progress and is_terminal(sys.stderr)        # a bar only on a terminal
        for start in tqdm(chunks, desc=f"rollouts ({horizon} steps)", unit="batch", disable=not shown,
                          file=sys.stderr):
            chunk = list(episodes[start:start + ROLLOUT_BATCH])
            padded = chunk + [chunk[0]] * (ROLLOUT_BATCH - len(chunk))      # fixed shape: no recompilation
            batch, frames = rollout_inputs(padded, self.pad_frame, self.history_length, horizon)
            outputs = self._run(self._params, batch)
            qpos, force = np.asarray(outputs["qpos"]), np.asarray(outputs["force"])
            for k in range(len(chunk)):
                results.append({"qpos": qpos[k, :frames[k]], "force": force[k, :frames[k]]})
        return results


def rollout_tables(episodes: Sequence[Episode], rollouts: Sequence[dict[str, np.ndarray]],
                   horizons: Sequence[int], n_arm: int, joint_names: Sequence[str], grip_scale: float = M_TO_MM
                   ) -> dict[str, Any]:
    """Per horizon and task/payload group: joint MAE (deg), gripper MAE (its coordinate times ``grip_scale``: slide
    m -> mm by default), force MAE (N)."""
    tables: dict[str, Any] = {}
    for horizon in horizons:
        per_group: dict[str, dict[str, list]] = {}
        short = []
        for ep, out in zip(episodes, rollouts, strict=True):
            frames = min(horizon, out["qpos"].shape[0])
            if frames < horizon:
                short.append(ep.name)
            valid = ep.valid[1:frames + 1]                           # recorded next state exists and is valid
            error = np.abs(out["qpos"][:frames] - ep.qpos[1:frames + 1])[valid]
            entry = per_group.setdefault(group_of(ep), {"joint": [], "grip": [], "pred": [], "label": [], "mask": []})
            entry["joint"].append(error[:, :n_arm] * RAD_TO_DEG)
            entry["grip"].append(error[:, n_arm] * grip_scale)
            entry["pred"].append(out["force"][:frames])
            entry["label"].append(ep.force[:frames])
            entry["mask"].append(ep.force_mask[:frames])
        rows = {}
        for group in sorted(per_group):
            entry = per_group[group]
            joint, grip = np.concatenate(entry["joint"]), np.concatenate(entry["grip"])
            row = {name: float(np.mean(joint[:, j])) if joint.size else math.nan
                   for j, name in enumerate(joint_names[:n_arm])}
            row["gripper"] = float(np.mean(grip)) if grip.size else math.nan
            row["force"] = force_mae(np.concatenate(entry["pred"]), np.concatenate(entry["label"]),
                                     np.concatenate(entry["mask"]))
            row["episodes"] = len(entry["joint"])
            rows[group] = row
        columns = [*joint_names[:n_arm], "gripper", "force"]
        rows["avg"] = {c: _nanmean([r[c] for r in rows.values()]) for c in columns}
        rows["avg"]["episodes"] = sum(r["episodes"] for g, r in rows.items() if g != "avg")
        tables[str(horizon)] = {"rows": rows, "shorter_episodes": short}
    return tables


def _nanmean(values: Sequence[float]) -> float:
    finite = [v for v in values if np.isfinite(v)]
    return float(np.mean(finite)) if finite else math.nan


# ------------------------------------------------------------------------------------ streaming mode

class StreamingPredictor:
    """Causal windows of recorded features through the model, as the live estimator sees them."""

    def __init__(self, model) -> None:
        from na_training.model import jit_forward

        self._forward = jit_forward(model)
        self.history_length = model.config.history_length
        self.pad_frame = np.asarray(model.feature_mean[...], dtype=float)

    def __call__(self, episode: Episode) -> dict[str, np.ndarray]:
        windows = history_windows(episode.filled_features(), self.pad_frame, self.history_length).astype(np.float32)
        parts: dict[str, list[np.ndarray]] = {"force": [], "contact_prob": [], "condition": []}
        for start in range(0, len(windows), STREAM_BATCH):
            chunk = windows[start:start + STREAM_BATCH]
            padded = np.concatenate([chunk, np.repeat(chunk[-1:], STREAM_BATCH - len(chunk), axis=0)])
            outputs = self._forward(padded)
            for key in parts:
                parts[key].append(np.asarray(outputs[key])[:len(chunk)])
        merged = {k: np.concatenate(v) for k, v in parts.items()}
        merged["contact_prob"] = merged["contact_prob"].reshape(-1)
        return merged


def condition_episodes(episodes: Sequence[Episode], tasks: Sequence[str] = ()) -> list[Episode]:
    """Episodes of the condition experiment: the training config's condition tasks (plus any episode
    labelled restricted) when it names them, else the selection ``na-train compare`` uses."""
    if not tasks:
        return condition_experiment([], episodes)[1]
    return [e for e in episodes if e.condition_label is not None
            and (e.task in tasks or e.condition_label == RESTRICTED)]


LAG_THRESHOLD_N = 3.0     # default threshold of the contact-onset lag (the protective stop's example setting)


def onset_lag(episodes: Sequence[Episode], outputs: Sequence[dict[str, np.ndarray]],
              threshold_n: float = LAG_THRESHOLD_N) -> dict[str, Any]:
    """Contact-onset lag of the streaming force estimate over the presses of the episodes without a payload:
    against the simulator truth where the NAD has it, else the force label."""
    lags = []
    sources = set()
    for episode, output in zip(episodes, outputs, strict=True):
        if episode.payload_grams > 0.0:
            continue                      # a held payload is contact by label, not a press
        truth = episode.truth_force
        if truth is not None and "truth_contact" in episode.columns:
            force, contact = np.nan_to_num(truth), episode.columns["truth_contact"].astype(bool)
            sources.add("simulator truth")
        elif episode.has_force_label:
            force, contact = episode.force, episode.contact
            sources.add("force label")
        else:
            continue
        lags += press_lags(episode.time, contact, force, output["force"], threshold_n)
    return {**lag_summary(lags), "threshold_n": threshold_n, "against": sorted(sources)}


def streaming_tables(episodes: Sequence[Episode], outputs: Sequence[dict[str, np.ndarray]],
                     condition_index: int, condition_tasks: Sequence[str],
                     lag_threshold_n: float = LAG_THRESHOLD_N) -> dict[str, Any]:
    """Force MAE per task/payload, false-contact rate, contact-onset lag, Joint-3 condition metrics (same
    selection as compare)."""
    by_episode = {id(e): o for e, o in zip(episodes, outputs, strict=True)}
    nominal = [e for e in episodes if e.is_nominal]
    force_set = [e for e in nominal if e.has_force_label]
    quiet_set = [e for e in nominal if e.has_no_contact()]
    result: dict[str, Any] = {
        "force_mae": force_mae_by_group([group_of(e) for e in force_set],
                                        [by_episode[id(e)]["force"] for e in force_set],
                                        [e.force for e in force_set], [e.force_mask for e in force_set]),
        "false_contact_rate": false_contact_rate([by_episode[id(e)]["contact_prob"] > 0.5 for e in quiet_set]),
        "no_contact_episodes": len(quiet_set),
        "no_contact_tasks": sorted({e.task for e in quiet_set}),
        "onset_lag": onset_lag(nominal, [by_episode[id(e)] for e in nominal], lag_threshold_n),
    }
    labelled = condition_episodes(episodes, condition_tasks)
    if labelled:
        score = np.concatenate([1.0 - by_episode[id(e)]["condition"][:, condition_index] for e in labelled])
        truth = np.concatenate([np.full(len(e), e.condition_label == RESTRICTED) for e in labelled])
        result["condition"] = {**classification_metrics(truth, score > 0.5, score), "episodes": len(labelled),
                               "tasks": sorted({e.task for e in labelled})}
    else:
        result["condition"] = None
    return result


# ------------------------------------------------------------------------------------ report

def _fmt(value: Any, digits: int = 3, percent: bool = False) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "n/a"
    return f"{100 * value:.1f} %" if percent else f"{value:.{digits}f}"


def markdown_report(results: dict[str, Any]) -> str:
    n_arm_names = results["arm_joint_names"]
    head = [f"J{k + 1} (deg)" for k in range(len(n_arm_names))]
    lines = [f"# NeuralActuator evaluation: {results['split']} split ({results['episodes']} episodes)", "",
             f"Run `{results['run']}` (checkpoint step {results['checkpoint_step']}), NAD `{results['nad']}`.", "",
             "## Rollouts from the episode start (recorded-telemetry-conditioned MJX)", ""]
    for horizon, table in results["rollout"].items():
        grip = f"Grip ({results.get('gripper_unit', 'mm')})"
        lines += [f"### {horizon} steps", "", "| task | episodes | " + " | ".join(head) + f" | {grip} | F (N) |",
                  "|---" * (len(head) + 4) + "|"]
        for group, row in table["rows"].items():
            label = "**Avg**" if group == "avg" else group
            lines.append(f"| {label} | {row['episodes']} | " + " | ".join(_fmt(row[j]) for j in n_arm_names)
                         + f" | {_fmt(row['gripper'])} | {_fmt(row['force'])} |")
        if table["shorter_episodes"]:
            lines.append(f"\n{len(table['shorter_episodes'])} episode(s) shorter than {horizon} steps "
                         "contribute all the frames they have.")
        lines.append("")
    stream = results["streaming"]
    force = stream["force_mae"]
    lines += ["## Streaming estimates (recorded features, causal windows, as the live estimator)", "",
              "| task/payload | force MAE (N) |", "|---|---|"]
    lines += [f"| {'**Avg**' if g == 'avg' else g} | {_fmt(v)} |" for g, v in force.items()]
    quiet_tasks = ", ".join(stream["no_contact_tasks"]) or "none"
    lines += ["", f"False-contact rate on {stream['no_contact_episodes']} no-contact episode(s) "
              f"({quiet_tasks}): {_fmt(stream['false_contact_rate'], percent=True)}", ""]
    lag = stream.get("onset_lag")
    if lag and lag["presses"]:
        lines += [f"Contact-onset lag (true |F| reaches {lag['threshold_n']:g} N -> estimated |F| reaches it; "
                  f"{lag['presses']} presses, against the {' / '.join(lag['against'])}): p50 "
                  f"{_fmt(lag['p50_ms'], 0)} ms, p95 {_fmt(lag['p95_ms'], 0)} ms, max {_fmt(lag['max_ms'], 0)} ms; "
                  f"{lag['missed']} never reached it", ""]
    lines += [f"## {results.get('condition_joint', 'joint3')} condition (positive = restricted, score = 1 - c, "
              "frames)", ""]
    condition = stream["condition"]
    if condition is None:
        lines.append("n/a: the split has no condition episodes.")
    else:
        lines += ["| accuracy | precision | recall | AUC | frames | restricted frames | episodes |",
                  "|---|---|---|---|---|---|---|",
                  f"| {_fmt(condition['accuracy'], percent=True)} | {_fmt(condition['precision'], percent=True)} | "
                  f"{_fmt(condition['recall'], percent=True)} | {_fmt(condition['auc'])} | {condition['samples']} | "
                  f"{condition['positives']} | {condition['episodes']} |"]
    if results.get("skipped"):
        lines += ["", "## Skipped episodes", ""] + [f"- {note}" for note in results["skipped"]]
    if results.get("plots"):
        lines += ["", "## Plots", ""] + [f"- `{p}`" for p in results["plots"]]
    return "\n".join(lines) + "\n"


def _json_safe(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    return value


def plot_forces(episodes: Sequence[Episode], streaming: Sequence[dict[str, np.ndarray]],
                rollouts: Sequence[dict[str, np.ndarray]], out_dir: Path, count: int) -> list[Path]:
    """PNG plots of predicted against labelled force for the ``count`` episodes with the largest labels
    (one per task/payload group first)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    strength = [float(np.max(np.abs(np.where(e.force_mask, e.force, 0.0)))) if e.has_force_label else 0.0
                for e in episodes]
    groups = [group_of(e) for e in episodes]
    order = sorted(range(len(episodes)), key=lambda k: -strength[k])
    chosen, seen = [], set()
    for k in order:
        if len(chosen) < count and groups[k] not in seen:
            chosen.append(k)
            seen.add(groups[k])
    chosen += [k for k in order if k not in chosen][:max(0, count - len(chosen))]
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for k in chosen:
        ep, time = episodes[k], episodes[k].time - episodes[k].time[0]
        figure, axes = plt.subplots(3, 1, sharex=True, figsize=(9, 6.5))
        label = np.where(ep.force_mask, ep.force, np.nan)
        frames = rollouts[k]["force"].shape[0]
        for axis, name in enumerate("xyz"):
            axes[axis].plot(time, label[:, axis], color="black", lw=1.5, label="label")
            axes[axis].plot(time, streaming[k]["force"][:, axis], color="tab:blue", lw=1, label="streaming")
            axes[axis].plot(time[:frames], rollouts[k]["force"][:, axis], color="tab:orange", lw=1, ls="--",
                            label=f"rollout ({frames} steps)")
            axes[axis].set_ylabel(f"F{name} (N)")
            axes[axis].grid(alpha=0.3)
        axes[0].legend(loc="upper right", fontsize=8)
        axes[-1].set_xlabel("time (s)")
        axes[0].set_title(f"episode {ep.name}: {groups[k]}")
        figure.tight_layout()
        path = out_dir / f"force_{ep.name}_{groups[k].replace('/', '_')}.png"
        figure.savefig(path, dpi=100)
        plt.close(figure)
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------------ driver

def evaluate(run: str | Path, nad: str | Path, split: str = "test", out: str | Path | None = None,
             horizons: Sequence[int] = HORIZONS, plots: int = 4, progress: bool = True,
             robot: str | None = None, lag_threshold_n: float = LAG_THRESHOLD_N) -> dict[str, Any]:
    """Evaluate a run (or RUN/checkpoints/N) on a NAD split; writes eval.json, eval.md and plots to ``out``."""
    from na_training.train import load_run, load_trained_model

    if not horizons or any(h < 1 for h in horizons):
        raise EvaluationError(f"horizons must be positive integers, got {list(horizons)}")
    run_dir, step = resolve_run(run)
    if not Path(nad).exists():
        raise EvaluationError(f"NAD {nad} does not exist")
    info = read_info(nad)
    spec = robot_spec(info, robot)
    description = load_run(run_dir)
    check_compatibility(description, info, feature_names(spec))
    config = for_robot(config_from_dict(description["config"], f"{run_dir}/run.json"), spec)
    grip_scale, grip_unit = (RAD_TO_DEG, "deg") if spec.gripper.unit == "rad" else (M_TO_MM, "mm")
    _log(f"[eval] loading the {split} split of {nad}")
    skipped: list[str] = []
    episodes = load_split(nad, split, skipped)
    if not episodes:
        raise EvaluationError(f"{nad}: the {split} split has no episodes")
    model, description = load_trained_model(run_dir, step=step)
    _log(f"[eval] {len(episodes)} episodes, {sum(len(e) for e in episodes)} frames; "
         f"checkpoint step {description['checkpoint_step']}")

    longest = max(len(e) - 1 for e in episodes)
    rollout_length = min(max(horizons), longest)
    _log(f"[eval] rollouts of {rollout_length} steps from each episode start (compiling once)")
    rollouts = RolloutEvaluator(model, config, spec).run(episodes, rollout_length, progress)
    predictor = StreamingPredictor(model)
    shown = progress and is_terminal(sys.stderr)
    streaming = [predictor(e) for e in tqdm(episodes, desc="streaming", unit="episode", disable=not shown,
                                            file=sys.stderr)]
    condition_tasks = tuple(config.loss.condition_tasks)
    results: dict[str, Any] = {
        "run": str(run_dir), "checkpoint_step": description["checkpoint_step"], "nad": str(nad),
        "dataset_id": info.get("dataset_id"), "split": split, "episodes": len(episodes),
        "frames": int(sum(len(e) for e in episodes)), "horizons": list(horizons),
        "arm_joint_names": list(spec.arm_joint_names), "skipped": skipped,
        "rollout": rollout_tables(episodes, rollouts, horizons, spec.n_arm, spec.joint_names, grip_scale),
        "gripper_unit": grip_unit,
        "condition_joint": config.loss.condition_joint,
        "streaming": streaming_tables(episodes, streaming, spec.joint_names.index(config.loss.condition_joint),
                                      condition_tasks, lag_threshold_n),
    }
    out_dir = Path(out) if out is not None else run_dir / f"eval_{split}"
    out_dir.mkdir(parents=True, exist_ok=True)
    if plots > 0:
        results["plots"] = [str(p) for p in plot_forces(episodes, streaming, rollouts, out_dir / "plots", plots)]
    (out_dir / "eval.json").write_text(json.dumps(_json_safe(results), indent=2, sort_keys=True) + "\n")
    report = markdown_report(results)
    (out_dir / "eval.md").write_text(report)
    print(report)
    _log(f"[eval] wrote {out_dir / 'eval.md'}, {out_dir / 'eval.json'}"
         + (f" and {len(results['plots'])} plot(s)" if plots > 0 else ""))
    return results


def add_eval_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``eval`` to an ``na-train`` sub-parser set (handler: :func:`run_eval`)."""
    parser = subparsers.add_parser(
        "eval", help="paper-format evaluation tables of a trained run on a NAD split",
        description="Evaluate a trained run on a NAD split: rollout MAE per joint (deg), gripper slide (mm) and "
                    "force (N) at 100/300/500/600 steps from each episode start (MJX, recorded telemetry), "
                    "streaming force MAE per task/payload, false-contact rate on no-contact episodes, the "
                    "contact-onset lag of the force estimate on the pushes, Joint-3 "
                    "condition accuracy/precision/recall/AUC; force plots (PNG). Prints the tables and writes "
                    "eval.md and eval.json.")
    parser.add_argument("run", metavar="RUN_OR_CKPT", help="run directory of 'na-train fit' or RUN/checkpoints/N")
    parser.add_argument("--nad", required=True, help="NAD v1 dataset directory")
    parser.add_argument("--robot", help=robot_option_help("default: the NAD's robot; given, it must match it"))
    parser.add_argument("--split", default="test", choices=("train", "val", "test"), help="split (default: test)")
    parser.add_argument("--out", help="output directory (default: RUN/eval_SPLIT)")
    parser.add_argument("--horizons", type=int, nargs="+", default=list(HORIZONS),
                        help="rollout horizons in steps (default: 100 300 500 600)")
    parser.add_argument("--plots", type=int, default=4, help="episodes to plot (default 4; 0: none)")
    parser.add_argument("--lag-threshold", type=float, default=LAG_THRESHOLD_N, metavar="N",
                        help="force (N) of the contact-onset lag: true |F| reaching it -> estimated |F| reaching it "
                             f"(default {LAG_THRESHOLD_N:g}; what a protective stop at that threshold waits for)")
    parser.add_argument("--quiet", action="store_true", help="no progress bars")
    parser.set_defaults(handler=run_eval)
    return parser


def run_eval(args: argparse.Namespace) -> int:
    try:
        if not (math.isfinite(args.lag_threshold) and args.lag_threshold > 0.0):
            raise EvaluationError(f"--lag-threshold must be a positive force in N, got {args.lag_threshold}")
        evaluate(args.run, args.nad, args.split, args.out, args.horizons, args.plots, progress=not args.quiet,
                 robot=args.robot, lag_threshold_n=args.lag_threshold)
    except (EvaluationError, NadError, FileNotFoundError, ValueError) as err:
        print(f"na-train eval: error: {err}", file=sys.stderr)
        return 2
    return 0
