"""The comparison behind ``na-train compare``: every method scored on the same test episodes with the same metrics.

Force baselines (ID-Linear, ID-Friction, GMO) and the condition baselines are fitted on the
train split, then every method, including the learned model when one is given, is evaluated on
the test split: force MAE per task/payload (nominal episodes with force labels), false-contact
rate on episodes without contact, contact detection, and condition classification at each
method's native granularity (64-frame windows for the baselines, frames for the model). Force
baselines are fitted and scored on nominal episodes only: a restricted joint's extra torque is
not a tool force.

The core, :func:`compare_episodes`, works from :class:`na_training.episode.Episode`; :func:`run_comparison`
loads them from a NAD (``na_training.nad.load_usable``) and runs an exported ONNX model over them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tqdm import tqdm

from na_common.condition_monitor import MonitorSettings
from na_description.features import history_windows
from na_description.rigid_body import RigidBodyModel
from na_description.servo_tables import datasheet_torque_per_effort
from na_description.spec import RobotSpec, load_spec, robot_option_help
from na_training.baselines.condition import (
    WINDOW_SIZE,
    build_windows,
    condition_experiment,
    evaluate_condition_baselines,
)
from na_training.baselines.contact import ContactDetector
from na_training.baselines.dynamics import InverseDynamicsCache
from na_training.baselines.id_friction import IDFriction
from na_training.baselines.id_linear import MIN_SLOPE_FRACTION, IDLinear
from na_training.baselines.metrics import (
    classification_metrics,
    false_contact_rate,
    force_mae_by_group,
    group_key,
)
from na_training.baselines.mlp import MLPConfig, MLPForce
from na_training.baselines.momentum_observer import MomentumObserver
from na_training.condition_levels import add_monitor_arguments, monitor_levels, monitor_settings
from na_training.episode import RESTRICTED, Episode
from na_training.nad import load_usable, read_info, robot_spec
from na_training.progress import is_terminal

LEARNED = "NeuralActuator"
DATA_DRIVEN = (MLPForce.name,)   # learned baselines: not part of "best classical"
# Predictor of a learned model: episode -> {"force": [T, 3], "contact_prob": [T], "condition": [T, n_motors]}
Predictor = Callable[[Episode], dict[str, np.ndarray]]


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ core

def _force_methods(spec: RobotSpec, mlp: MLPConfig | None = None) -> list:
    cache = InverseDynamicsCache(RigidBodyModel(spec))
    # The lowest slope of the effort-to-torque maps: a small share of the servo's datasheet torque per effort
    # unit (id_linear.DEFAULT_MIN_SLOPE for the XM430's current).
    per_unit, unit = datasheet_torque_per_effort(spec)
    min_slope = MIN_SLOPE_FRACTION * per_unit
    linear = IDLinear(cache, min_slope=min_slope, effort_unit=unit)
    methods = [linear, IDFriction(cache, min_slope=min_slope, effort_unit=unit), MomentumObserver(linear)]
    return methods + ([MLPForce(mlp, spec)] if mlp is not None else [])


def _estimate_all(method, episodes: Sequence[Episode], label: str) -> list[np.ndarray]:
    return [method.estimate(e) for e in tqdm(episodes, desc=label, unit="episode", leave=False, file=sys.stderr,
                                                    disable=not is_terminal(sys.stderr))]


def compare_episodes(train: Sequence[Episode], test: Sequence[Episode],
                     predictor: Predictor | None = None, seed: int = 0,
                     condition_joint: str | None = None, spec: RobotSpec | None = None,
                     mlp: MLPConfig | None = None, monitor: MonitorSettings | None = None) -> dict:
    """Fit the baselines on ``train``, score them (and ``predictor``) on ``test``; a JSON-ready dict.

    ``monitor``: settings of the condition monitor run on the model's condition scores (default the shipped).
    ``mlp``: also the data-driven MLP baseline (:mod:`.mlp`) with this config.
    ``condition_joint``: the supervised joint of the condition experiment (default the spec's)."""
    spec = spec or load_spec()
    condition_joint = condition_joint or spec.condition_joint
    if not test:
        raise ValueError("no test episodes to compare on")
    force_test = [e for e in test if e.is_nominal and e.has_force_label]
    quiet_test = [e for e in test if e.is_nominal and e.has_no_contact()]
    contact_test = [e for e in test if e.is_nominal]
    results: dict = {
        "episodes": {"train": len(train), "test": len(test), "force_test": len(force_test),
                     "no_contact_test": len(quiet_test)},
        "force_mae": {}, "false_contact_rate": {}, "contact": {}, "condition": {}, "fits": {}, "notes": [],
        "condition_joint": condition_joint,
    }
    if spec.effort_signal != "current":
        results["notes"].append(f"{spec.name}: the current-based observers (ID-Linear, ID-Friction, momentum "
                                f"observer) read the servos' {spec.effort_signal} signal through the effort-to-"
                                "torque scale they fit per joint")
    groups = [group_key(e.task, e.payload_grams) for e in force_test]

    def score_force(name: str, forces: list[np.ndarray], contacts: list[np.ndarray], contact_score: list) -> None:
        by_id = {id(e): k for k, e in enumerate(test)}
        results["force_mae"][name] = force_mae_by_group(
            groups, [forces[by_id[id(e)]] for e in force_test], [e.force for e in force_test],
            [e.force_mask for e in force_test])
        results["false_contact_rate"][name] = false_contact_rate([contacts[by_id[id(e)]] for e in quiet_test])
        if contact_test:
            results["contact"][name] = classification_metrics(
                np.concatenate([e.contact for e in contact_test]),
                np.concatenate([contacts[by_id[id(e)]] for e in contact_test]),
                np.concatenate([contact_score[by_id[id(e)]] for e in contact_test]))

    fit_train = [e for e in train if e.is_nominal]
    for method in _force_methods(spec, mlp):
        try:
            _log(f"[compare] fitting {method.name} on {len(fit_train)} nominal training episodes")
            results["fits"][method.name] = report = method.fit(fit_train)
        except ValueError as err:      # e.g. no free-motion frames to fit the current map on
            results["notes"].append(f"{method.name} skipped: {err}")
            _log(f"[compare] {method.name} skipped: {err}")
            continue
        results["notes"] += [f"{method.name}: {note}" for note in report.get("notes", [])]
        detector = ContactDetector()
        report["contact"] = detector.fit(_estimate_all(method, fit_train, f"{method.name} train"),
                                         [e.contact for e in fit_train])
        forces = _estimate_all(method, test, f"{method.name} test")
        score_force(method.name, forces, [detector.predict(f) for f in forces],
                    [np.linalg.norm(f, axis=1) for f in forces])

    joint_index = spec.joint_names.index(condition_joint)
    condition_train, condition_test = condition_experiment(train, test)
    train_windows = build_windows(condition_train, joint_index)
    test_windows = build_windows(condition_test, joint_index)
    if len(np.unique(train_windows.restricted)) == 2 and len(test_windows) > 0:
        _log(f"[compare] condition baselines on {len(train_windows)} train / {len(test_windows)} test windows")
        results["condition"] = evaluate_condition_baselines(train_windows, test_windows, seed)
    else:
        results["notes"].append("condition baselines skipped: the train split needs both conditions and the "
                                f"test split at least one {WINDOW_SIZE}-frame window")

    if predictor is not None:
        _log(f"[compare] running {LEARNED} on {len(test)} test episodes")
        outputs = [predictor(e) for e in tqdm(test, desc=LEARNED, unit="episode", leave=False, file=sys.stderr,
                                                  disable=not is_terminal(sys.stderr))]
        probs = [np.asarray(o["contact_prob"], dtype=float).reshape(-1) for o in outputs]
        score_force(LEARNED, [np.asarray(o["force"], dtype=float) for o in outputs], [p > 0.5 for p in probs], probs)
        in_experiment = {id(e) for e in condition_test}
        labelled = [(e, o) for e, o in zip(test, outputs, strict=True) if id(e) in in_experiment]
        if labelled and "condition" in outputs[0]:
            # the model's condition score is 1 for nominal: restricted score = 1 − score (positive class)
            restricted_score = np.concatenate([1.0 - np.asarray(o["condition"])[:, joint_index] for _, o in labelled])
            truth = np.concatenate([np.full(len(e), e.condition_label == RESTRICTED) for e, _ in labelled])
            results["condition"][LEARNED] = {**classification_metrics(truth, restricted_score > 0.5, restricted_score),
                                             "granularity": "frames"}
            nominal = [(e, o) for e, o in zip(test, outputs, strict=True) if e.is_nominal]
            results["condition_monitor"] = monitor_levels(labelled, nominal, joint_index, monitor)
    results["best_classical_to_learned_force_mae"] = _best_ratio(results["force_mae"])
    results["mlp_to_learned_force_mae"] = _best_ratio(results["force_mae"], (MLPForce.name,))
    return results


def _best_ratio(force_mae: dict, reference: Sequence[str] | None = None) -> float | None:
    """Best average force MAE among ``reference`` methods (default: the classical ones) / the learned model's."""
    learned = force_mae.get(LEARNED, {}).get("avg")
    names = [k for k in force_mae if k != LEARNED and k not in DATA_DRIVEN] if reference is None else reference
    classical = [force_mae[k]["avg"] for k in names if k in force_mae and np.isfinite(force_mae[k]["avg"])]
    if learned is None or not classical or not np.isfinite(learned) or learned <= 0:
        return None
    return float(min(classical) / learned)


# ------------------------------------------------------------------------------------ report

def _fmt(value, percent: bool = False) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    return f"{100 * value:.1f} %" if percent else f"{value:.3f}"


def markdown_report(results: dict) -> str:
    """Paper-style tables (Tables VII and XI) as Markdown."""
    lines = [f"# Comparison on the {results.get('split', 'test')} split ({results['episodes']['test']} episodes)", ""]
    force = results["force_mae"]
    if force:
        columns = [*sorted({g for v in force.values() for g in v if g != "avg"}), "avg"]
        lines += ["## Force MAE (N) per task/payload", "",
                  "| method | " + " | ".join(columns) + " | false contact |",
                  "|---" * (len(columns) + 2) + "|"]
        lines += [f"| {name} | " + " | ".join(_fmt(v.get(c)) for c in columns)
                  + f" | {_fmt(results['false_contact_rate'].get(name), True)} |" for name, v in force.items()]
        ratio = results.get("best_classical_to_learned_force_mae")
        if ratio is not None:
            lines += ["", f"Best classical force MAE / {LEARNED} force MAE = {ratio:.2f}"]
        ratio = results.get("mlp_to_learned_force_mae")
        if ratio is not None:
            lines += ["", f"{MLPForce.name} force MAE / {LEARNED} force MAE = {ratio:.2f}"]
        lines.append("")
    if results["condition"]:
        lines += [f"## Condition ({results.get('condition_joint', 'joint3')}, positive = restricted)", "",
                  "| method | accuracy | precision | recall | AUC | granularity |", "|---|---|---|---|---|---|"]
        lines += [f"| {name} | {_fmt(m['accuracy'], True)} | {_fmt(m['precision'], True)} | "
                  f"{_fmt(m['recall'], True)} | {_fmt(m['auc'])} | {m['granularity']} |"
                  for name, m in results["condition"].items()]
        lines.append("")
        lines += _monitor_report(results)
    if results["notes"]:
        lines += ["## Notes", ""] + [f"- {n}" for n in results["notes"]] + [""]
    return "\n".join(lines)


def _monitor_report(results: dict) -> list[str]:
    """The condition monitor at three levels beside the window baselines (the baselines at the episode level by
    majority of windows)."""
    monitor = results.get("condition_monitor")
    if not monitor or "window" not in monitor:
        return []
    settings = monitor["settings"]
    lines = ["## Condition monitor (evidence accumulated over time; positive = restricted episode)", "",
             f"Settings: drift {settings['drift']}, suspect at {settings['suspect_s']} s, degraded at "
             f"{settings['degraded_s']} s of evidence; "
             + (f"frames whose contact probability is above {settings['contact_limit']} add none"
                if settings["contact_limit"] < 1.0 else "every frame counts") + ". Decision = degraded.", "",
             "| method | level | accuracy | precision | recall | AUC | episodes misclassified |",
             "|---|---|---|---|---|---|---|"]
    for level in ("frame", "window", "episode"):
        m = monitor[level]
        wrong = str(m.get("misclassified", "")) if level == "episode" else ""
        lines.append(f"| {LEARNED} monitor | {level} | {_fmt(m['accuracy'], True)} | {_fmt(m['precision'], True)} | "
                     f"{_fmt(m['recall'], True)} | {_fmt(m['auc'])} | {wrong} |")
    for name, m in results["condition"].items():
        if name == LEARNED:
            continue
        lines.append(f"| {name} | window | {_fmt(m['accuracy'], True)} | {_fmt(m['precision'], True)} | "
                     f"{_fmt(m['recall'], True)} | {_fmt(m['auc'])} | |")
        if "episode" in m:
            e = m["episode"]
            lines.append(f"| {name} | episode (majority of windows) | {_fmt(e['accuracy'], True)} | "
                         f"{_fmt(e['precision'], True)} | {_fmt(e['recall'], True)} | {_fmt(e['auc'])} | "
                         f"{e['misclassified']} |")
    times, alarms = monitor["decision_time_s"], monitor["false_alarms"]
    median = "–" if times["median"] is None else f"{times['median']:.1f} s"
    worst = "–" if times["max"] is None else f"{times['max']:.1f} s"
    rate = "–" if alarms["per_10_min"] is None else f"{alarms['per_10_min']:.2f}"
    lines += ["", f"Time to decide degraded: {times['decided']} of {times['restricted_episodes']} restricted episodes, "
              f"median {median}, longest {worst}. False alarms: {alarms['alarms']} in "
              f"{alarms['nominal_s'] / 60:.1f} min of nominal episodes ({rate} per 10 min).", ""]
    return lines


def _json_safe(value):
    if isinstance(value, dict):
        return {str(k): _json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(v) for v in value]
    if isinstance(value, np.ndarray):
        return _json_safe(value.tolist())
    if isinstance(value, (np.floating, float)):
        return float(value) if math.isfinite(float(value)) else None
    if isinstance(value, (np.integer, np.bool_)):
        return value.item()
    return value


def write_report(results: dict, out_dir: str | Path) -> dict[str, Path]:
    """``comparison.json`` (NaN as null) and ``comparison.md`` in ``out_dir``."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"json": out / "comparison.json", "markdown": out / "comparison.md"}
    paths["json"].write_text(json.dumps(_json_safe(results), indent=2, sort_keys=True) + "\n")
    paths["markdown"].write_text(markdown_report(results))
    return paths


# ------------------------------------------------------------------------------------ NAD and model adapters

class OnnxPredictor:
    """Runs an exported ``model.onnx`` over whole NAD episodes with causal history windows."""

    def __init__(self, model_path: str | Path, spec: RobotSpec | None = None, batch_size: int = 512) -> None:
        import onnxruntime as ort

        from na_description.model_contract import check_contract

        try:
            self.session = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
        except Exception as err:      # onnxruntime's own exception types (InvalidProtobuf, NoSuchFile, ...)
            first_line = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
            raise ValueError(f"{model_path} is not a readable ONNX model ({first_line})") from None
        self.meta = dict(self.session.get_modelmeta().custom_metadata_map)
        # the estimator's check: feature schema, names and order, joints; a model for other features is refused
        check_contract(self.meta, spec or load_spec())
        self.input_name = self.session.get_inputs()[0].name
        self.history = int(self.session.get_inputs()[0].shape[1]) if isinstance(
            self.session.get_inputs()[0].shape[1], int) else int(self.meta.get("history_length", 9))
        self.pad_frame = self._pad_frame()
        self.batch_size = batch_size

    def _pad_frame(self) -> np.ndarray | None:
        """The training mean frame pads history before an episode start, if the model has it
        (docs/REFERENCES.md, Authors' setup)."""
        for key in ("feature_stats", "feature_mean", "pad_frame"):
            if key in self.meta:
                value = json.loads(self.meta[key])
                return np.asarray(value["mean"] if isinstance(value, dict) else value, dtype=float)
        return None

    def __call__(self, episode: Episode) -> dict[str, np.ndarray]:
        features = episode.filled_features()
        pad = self.pad_frame if self.pad_frame is not None else features[0]
        windows = history_windows(features, pad, self.history).astype(np.float32)
        outputs: dict[str, list[np.ndarray]] = {}
        names = [o.name for o in self.session.get_outputs()]
        for start in range(0, windows.shape[0], self.batch_size):
            values = self.session.run(None, {self.input_name: windows[start:start + self.batch_size]})
            for name, value in zip(names, values, strict=True):
                outputs.setdefault(name, []).append(value)
        merged = {name: np.concatenate(parts) for name, parts in outputs.items()}
        missing = [k for k in ("force", "contact_prob") if k not in merged]
        if missing:
            raise ValueError(f"the ONNX model has no output(s) {missing} (outputs: {names})")
        result = {"force": merged["force"], "contact_prob": merged["contact_prob"].reshape(-1)}
        if "condition" in merged:
            result["condition"] = merged["condition"]
        return result


def resolve_model(model_path: str | Path, out_dir: str | Path) -> Path:
    """An ``.onnx`` file as is; a training run directory (checkpoint) exported to ``out_dir/model.onnx`` first."""
    path = Path(model_path)
    if path.is_file():
        return path
    if path.is_dir():
        from na_training.export import export_model
        from na_training.train import load_trained_model

        model, description = load_trained_model(path)
        target = Path(out_dir) / "model.onnx"
        target.parent.mkdir(parents=True, exist_ok=True)
        _log(f"[compare] exporting the checkpoint in {path} to {target}")
        export_model(model, description, target)
        return target
    raise ValueError(f"model {path} is neither an .onnx file nor a training run directory")


def run_comparison(nad_path: str | Path, model_path: str | Path | None, out_dir: str | Path, seed: int = 0,
                   mlp: MLPConfig | None = None, robot: str | None = None, split: str = "test",
                   monitor: MonitorSettings | None = None) -> dict:
    """Load a NAD, fit the baselines on its train split, compare on its ``split`` (test; val to choose
    settings on), write the reports.

    ``model_path``: exported ``model.onnx``, a training run directory (exported first), or None
    for the baselines alone. ``robot``: must name the NAD's robot when given.
    """
    # The model is checked before the (long) NAD load: against the NAD's robot when its info is readable.
    has_info = (Path(nad_path) / "meta" / "info.json").is_file()
    spec = robot_spec(read_info(nad_path), robot) if has_info else load_spec(robot)
    model_file = resolve_model(model_path, out_dir) if model_path is not None else None
    predictor = OnnxPredictor(model_file, spec) if model_file is not None else None   # refused before any work
    _log(f"[compare] loading {nad_path}")
    skipped: list[str] = []
    train, test = (load_usable(nad_path, name, skipped) for name in ("train", split))
    for message in skipped:
        _log(f"[compare] {message}")
    if not train or not test:
        raise ValueError(f"{nad_path}: need train and {split} episodes (found {len(train)} train, {len(test)} {split})")
    results = compare_episodes(train, test, predictor, seed=seed, spec=spec, mlp=mlp, monitor=monitor)
    results["split"] = split
    results["notes"] += skipped
    results["dataset"] = str(nad_path)
    results["model"] = None if model_file is None else str(model_file)
    paths = write_report(results, out_dir)
    print(markdown_report(results))
    _log(f"[compare] wrote {paths['markdown']} and {paths['json']}")
    return results


# ------------------------------------------------------------------------------------ CLI

COMPARE_DESCRIPTION = (
    "Fit ID-Linear, ID-Friction, the momentum observer, a plain MLP on recorded windows and the condition baselines "
    "(threshold, RBF SVM, Random Forest) on the train split of a NAD, then score them and the exported model on the "
    "test split with "
    "the same metrics (paper Tables VII and XI). Prints the tables and writes comparison.md and comparison.json.")


def add_compare_parser(subparsers) -> argparse.ArgumentParser:
    """Add ``compare`` to an ``na-train`` sub-parser set; its ``handler`` default is :func:`run_compare`."""
    parser = subparsers.add_parser("compare", help="compare the learned model with the classical baselines on a "
                                   "NAD test split", description=COMPARE_DESCRIPTION)
    configure_compare_parser(parser)
    return parser


def configure_compare_parser(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--nad", required=True, type=Path, help="NAD v1 dataset directory")
    parser.add_argument("--robot", help=robot_option_help("default: the NAD's robot; given, it must match it"))
    parser.add_argument("--model", type=Path, default=None,
                        help="exported model.onnx or a training run directory (omit: baselines only)")
    parser.add_argument("--out", type=Path, default=Path("compare_out"), help="output directory (default: %(default)s)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the Random Forest/SVM and of the MLP baseline (default: %(default)s)")
    parser.add_argument("--no-mlp", action="store_true", help="leave out the MLP baseline (it trains for minutes)")
    parser.add_argument("--mlp-steps", type=int, default=MLPConfig.steps,
                        help="training steps of the MLP baseline (default: %(default)s)")
    parser.add_argument("--split", choices=("test", "val"), default="test",
                        help="split to score on (default: %(default)s; val to choose settings without the test split)")
    add_monitor_arguments(parser)
    parser.set_defaults(handler=run_compare)


def run_compare(args: argparse.Namespace) -> int:
    """Handler of ``na-train compare``: 0 on success, 2 with a message on bad input."""
    for path, what in ((args.nad, "NAD directory"), (args.model, "model")):
        if path is not None and not Path(path).exists():
            print(f"na-train compare: error: {what} {path} does not exist", file=sys.stderr)
            return 2
    if args.mlp_steps < 1:
        print(f"na-train compare: error: --mlp-steps must be >= 1, got {args.mlp_steps}", file=sys.stderr)
        return 2
    mlp = None if args.no_mlp else MLPConfig(steps=args.mlp_steps, seed=args.seed)
    try:
        monitor = monitor_settings(args)
        run_comparison(args.nad, args.model, args.out, args.seed, mlp, args.robot, args.split, monitor)
    except (ValueError, FileNotFoundError) as err:
        print(f"na-train compare: error: {err}", file=sys.stderr)
        return 2
    return 0


def main_compare(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point with the same arguments as ``na-train compare``."""
    parser = argparse.ArgumentParser(prog="na-train compare", description=COMPARE_DESCRIPTION)
    configure_compare_parser(parser)
    return run_compare(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main_compare())
