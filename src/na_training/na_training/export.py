"""ONNX export of a trained NeuralActuator (docs/ARCHITECTURE.md "Model contract").

Graph: input ``features [batch, L, F]`` float32 raw SI features (normalisation inside the graph);
outputs ``torque_surrogate [batch, n]``, ``force_raw [batch, 3]``, ``contact_prob [batch, 1]``,
``force [batch, 3]``, ``condition [batch, n]``. The graph is traced from the Flax model with
jax2onnx (native LayerNormalization and Gelu), its input/outputs are given the contract names, and
:mod:`na_training.export_graph` removes the run-time shape arithmetic and fuses attention. ``metadata_props``
(all strings, JSON where structured): see :data:`METADATA_KEYS` and :data:`VARIANT_KEYS`.

Inference variants: the fp32 graph, and -- when real windows are given to check them on -- dynamic int8
(weights int8 per channel, activations quantised at run time), static int8 (QDQ, activation ranges
calibrated on NAD windows) and mixed int8 (dynamic int8 for the layers whose error, measured one by one on the
calibration windows, fits the budget; the rest fp32). Each is checked against the fp32 JAX model and timed
here (batch 1, one thread). Every variant whose force is within :data:`FORCE_TOLERANCE_N` and whose contact
probability is within :data:`CONTACT_TOLERANCE` of JAX on every real window is kept, as one model package
(na_description.model_package): the fastest here is ``out`` itself, the others sit beside it and are named in its
metadata, and the estimator picks among them on the machine it runs on (which int8 kernels win depends on the
CPU). Every candidate's figures on this machine are recorded in the metadata (``variant_checks``).

The int8 weights use 7 bits (``reduce_range``) so that the check made here holds on the robot's CPU too: on an x86
CPU without the VNNI instructions ONNX Runtime multiplies uint8 activations by int8 weights with an instruction
whose 16-bit pair sums saturate, which full 8-bit weights can overflow and 7-bit weights cannot (ONNX Runtime's
quantization guide). Measured on such a CPU: 8-bit dynamic int8 0.35 N off JAX, 7-bit 0.029 N, against 0.027 N for
8-bit weights on a VNNI CPU (src/na_estimator/benchmarks/README.md).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from na_common.machine import cpu_info
from na_description.features import SCHEMA_VERSION, feature_units, history_windows
from na_description.model_contract import INPUT_NAME, METADATA_KEYS, OUTPUT_NAMES, VARIANT_KEYS
from na_description.model_package import (
    INT8_WEIGHT_BITS_KEY,
    VARIANT_CHECKS_KEY,
    VARIANT_FILES_KEY,
    file_sha256,
    sibling_name,
)
from na_description.spec import SpecError, load_spec
from na_training.export_graph import (
    FP32_BASE_PASSES,
    FP32_PASSES,
    LAYOUT_PASSES,
    MATMUL_PASSES,
    gemm_to_matmul,
    optimise,
)
from na_training.model import NeuralActuator, jit_forward
from na_training.nad import load_nad
from na_training.onnx_graph import PassReport

OPSET = 20                    # ONNX Gelu needs opset 20; LayerNormalization 17
FP32_TOLERANCE = 1e-4         # fp32 ONNX Runtime vs fp32 JAX, every output, every window
FORCE_TOLERANCE_N = 0.01      # a quantised variant: force vs fp32 JAX on every real window (N)
CONTACT_TOLERANCE = 0.01      # ... and contact probability
VARIANTS = ("fp32", "int8-dynamic", "int8-static", "int8-mixed")
INT8_REDUCE_RANGE = True      # 7-bit int8 weights: no saturation on x86 CPUs without VNNI (see the module docstring)
MIXED_BUDGET = 0.5            # int8-mixed: quantise layers while the calibration error stays within this fraction
                              # of the limits (the rest of the margin is for the held-out check windows)
RANDOM_CHECK_WINDOWS = 16
TIMING_ROUNDS = 5             # interleaved rounds of TIMING_CALLS calls per variant; the best round's median counts
TIMING_CALLS = 200


class ExportError(RuntimeError):
    """The exported graph does not meet the model contract or does not match the JAX model."""


def _contract_outputs(model: NeuralActuator):
    def forward(features):
        out = model(features)
        return tuple(out[name] for name in OUTPUT_NAMES)
    return forward


def _rename(graph: onnx.GraphProto, old: str, new: str) -> None:
    for node in graph.node:
        node.input[:] = [new if name == old else name for name in node.input]
        node.output[:] = [new if name == old else name for name in node.output]
    for value in list(graph.input) + list(graph.output) + list(graph.value_info):
        if value.name == old:
            value.name = new


def trace_to_onnx(model: NeuralActuator) -> onnx.ModelProto:
    """The model's forward pass as ONNX with the contract's input/output names and a symbolic batch."""
    from jax2onnx import to_onnx

    logging.getLogger("onnx_ir.serde").setLevel(logging.ERROR)
    config = model.config
    proto = to_onnx(_contract_outputs(model), inputs=[("batch", config.history_length, config.num_features)],
                    model_name="neural_actuator", opset=OPSET, normalization_mode="prefer_native")
    graph = proto.graph
    if len(graph.input) != 1 or len(graph.output) != len(OUTPUT_NAMES):
        raise ExportError(f"traced graph has {len(graph.input)} inputs / {len(graph.output)} outputs")
    _rename(graph, graph.input[0].name, INPUT_NAME)
    # An output name may also feed other nodes; route each through an Identity named by the contract.
    outputs = list(graph.output)
    del graph.output[:]
    for value, name in zip(outputs, OUTPUT_NAMES, strict=True):
        graph.node.append(onnx.helper.make_node("Identity", [value.name], [name], name=f"output_{name}"))
        renamed = onnx.ValueInfoProto()
        renamed.CopyFrom(value)
        renamed.name = name
        graph.output.append(renamed)
    return proto


def _units_of(description: Mapping[str, Any]) -> list[str]:
    """The feature units of the run's arm; empty when its spec cannot be found here (the names still say which
    feature is which)."""
    try:
        units = feature_units(load_spec(description.get("robot") or None))
    except SpecError:
        return []
    return units if len(units) == len(description["feature_names"]) else []


def build_metadata(description: Mapping[str, Any]) -> dict[str, str]:
    """``metadata_props`` from a run description (``na_training.train.Trainer.run_description``)."""
    config = description["config"]
    stats = description["feature_stats"]
    metadata = {
        "schema_version": str(description["schema_version"]),
        "feature_names": json.dumps(description["feature_names"]),
        "feature_units": json.dumps(_units_of(description)),
        "feature_mean": json.dumps(stats["mean"]),
        "feature_std": json.dumps(stats["std"]),
        "history_length": str(config["model"]["history_length"]),
        "joint_names": json.dumps(description["joint_names"]),
        "effort_bounds": json.dumps(description["effort_bounds"]),
        "training_config": json.dumps(config, sort_keys=True),
        "dataset_id": str(description.get("dataset_id", "")),
        "robot": str(description.get("robot", "")),
        "parameter_count": str(description.get("parameter_count", "")),
        "checkpoint_step": str(description.get("checkpoint_step", "")),
        "outputs": json.dumps(list(OUTPUT_NAMES)),
    }
    missing = set(METADATA_KEYS) - set(metadata)
    if missing:
        raise ExportError(f"metadata lacks {sorted(missing)} of the model contract")
    return metadata


def read_metadata(path: str | Path) -> dict[str, str]:
    model = onnx.load(str(path), load_external_data=False)
    return {p.key: p.value for p in model.metadata_props}


def set_metadata(model: onnx.ModelProto, metadata: Mapping[str, str]) -> None:
    kept = {p.key: p.value for p in model.metadata_props}
    kept.update(metadata)
    del model.metadata_props[:]
    for key, value in kept.items():
        model.metadata_props.add(key=key, value=value)


def jax_outputs(model: NeuralActuator, windows: np.ndarray) -> dict[str, np.ndarray]:
    out = jit_forward(model)(np.asarray(windows, dtype=np.float32))
    return {name: np.asarray(out[name]) for name in OUTPUT_NAMES}


def _session(path: str | Path, threads: int = 1):
    """A CPU session with ``threads`` intra-op threads (0: ONNX Runtime's default, every core)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def onnx_outputs(path: str | Path, windows: np.ndarray) -> dict[str, np.ndarray]:
    """The graph's outputs for ``windows`` [n, L, F], one window per run, as the estimator runs it.

    One at a time, not as one batch: a dynamically quantised graph computes each activation's int8 scale over
    the whole input tensor, so a batch of windows gets other scales, and other errors, than a single window.
    On one intra-op thread, as the estimator's default. (A trained paper-sized model's int8-mixed variant was
    4.0e-3 N off JAX as one batch of 2,176 windows on every core, 8.4e-3 N as one batch on one thread, and its
    int8-dynamic variant 0.94 N as one batch, 0.20 N one window at a time.)"""
    session = _session(path, threads=1)
    windows = np.asarray(windows, dtype=np.float32)
    values = [session.run(list(OUTPUT_NAMES), {INPUT_NAME: windows[k:k + 1]}) for k in range(len(windows))]
    return {name: np.concatenate([v[i] for v in values]) for i, name in enumerate(OUTPUT_NAMES)}


def max_abs_difference(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> dict[str, float]:
    return {name: float(np.max(np.abs(a[name] - b[name]))) for name in OUTPUT_NAMES}


def windows_from_nad(nad: str | Path, split: str, per_episode: int, pad_frame: np.ndarray, history_length: int,
                     seed: int = 0) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Up to ``per_episode`` random windows (and their force labels) from each episode of a NAD split."""
    rng = np.random.default_rng(seed)
    windows, labels = [], []
    for ep in load_nad(nad, split):
        pick = rng.choice(len(ep), size=min(len(ep), per_episode), replace=False)
        windows.append(history_windows(ep.features(), pad_frame, history_length)[pick])
        labels.append(ep.force[pick])
    if not windows:
        return None, None
    return np.concatenate(windows), np.concatenate(labels)


# ---------------------------------------------------------------- variants
class _Windows:
    """Calibration data for ``quantize_static``: batches of windows."""

    def __init__(self, windows: np.ndarray, batch: int = 32) -> None:
        self._batches = iter([{INPUT_NAME: windows[k:k + batch].astype(np.float32)}
                              for k in range(0, len(windows), batch)])

    def get_next(self):
        return next(self._batches, None)


def _weight_matmuls(model: onnx.ModelProto) -> list[str]:
    constants = {i.name for i in model.graph.initializer}
    return [n.name for n in model.graph.node if n.op_type == "MatMul" and n.input[1] in constants]


def quantize_variant(name: str, source: Path, target: Path, calibration: np.ndarray | None = None,
                     nodes: Sequence[str] | None = None) -> Path:
    """An int8 copy of ``source`` (a MatMul-form fp32 graph): weight MatMuls only (``nodes``, default all), int8
    weights per output channel; ``int8-dynamic`` and ``int8-mixed`` quantise activations at run time,
    ``int8-static`` with ranges calibrated on ``calibration`` (QDQ)."""
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_dynamic, quantize_static

    nodes = list(_weight_matmuls(onnx.load(str(source))) if nodes is None else nodes)
    extra = {"DefaultTensorType": onnx.TensorProto.FLOAT}
    logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # quantiser hints on the root logger
    if name in ("int8-dynamic", "int8-mixed"):
        quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8, per_channel=True,
                         reduce_range=INT8_REDUCE_RANGE, op_types_to_quantize=["MatMul"], nodes_to_quantize=nodes,
                         extra_options=extra)
    elif name == "int8-static":
        if calibration is None or not len(calibration):
            raise ExportError("static int8 needs calibration windows")
        # MatMul outputs stay float: ONNX Runtime then runs MatMulIntegerToFloat instead of QLinearMatMul followed
        # by DequantizeLinear, which is faster and skips the output rounding (benchmarks README, levers).
        quantize_static(str(source), str(target), _Windows(calibration), quant_format=QuantFormat.QDQ,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8, per_channel=True,
                        reduce_range=INT8_REDUCE_RANGE, op_types_to_quantize=["MatMul"], nodes_to_quantize=nodes,
                        extra_options={**extra, "OpTypesToExcludeOutputQuantization": ["MatMul"]})
    else:
        raise ExportError(f"unknown variant {name!r}; known: {', '.join(VARIANTS)}")
    quantized = onnx.load(str(target))
    set_metadata(quantized, {p.key: p.value for p in onnx.load(str(source), load_external_data=False).metadata_props})
    onnx.save(quantized, str(target))
    return target


def _errors(path: Path, windows: np.ndarray, reference: Mapping[str, np.ndarray]) -> tuple[float, float]:
    outputs = onnx_outputs(path, windows)
    return (float(np.max(np.abs(outputs["force"] - reference["force"]))),
            float(np.max(np.abs(outputs["contact_prob"] - reference["contact_prob"]))))


def select_mixed(source: Path, calibration: np.ndarray, reference: Mapping[str, np.ndarray], work: Path
                 ) -> tuple[list[str], str]:
    """The weight MatMuls to quantise for ``int8-mixed``: each alone is scored by its force/contact error on the
    calibration windows (relative to the limits) per weight it saves; the longest prefix of that ranking whose
    combined error stays within ``MIXED_BUDGET`` of the limits (binary search) is chosen."""
    model = onnx.load(str(source))
    weights = {i.name: int(np.prod(i.dims)) for i in model.graph.initializer}
    nodes = {n.name: weights[n.input[1]] for n in model.graph.node if n.name in set(_weight_matmuls(model))}
    probe = work / "mixed_probe.onnx"

    def score(subset: Sequence[str]) -> float:
        force, contact = _errors(quantize_variant("int8-mixed", source, probe, nodes=subset), calibration, reference)
        return max(force / max(FORCE_TOLERANCE_N, 1e-12), contact / max(CONTACT_TOLERANCE, 1e-12))

    alone = {name: score([name]) for name in nodes}
    ranking = sorted(nodes, key=lambda name: alone[name] / nodes[name])
    good, bad = 0, len(ranking) + 1            # ranking[:good] is within the budget, ranking[:bad] is not known to be
    while bad - good > 1:
        middle = (good + bad) // 2
        if score(ranking[:middle]) <= MIXED_BUDGET:
            good = middle
        else:
            bad = middle
    chosen = ranking[:good]
    share = sum(nodes[n] for n in chosen) / max(1, sum(nodes.values()))
    return chosen, f"{len(chosen)} of {len(nodes)} weight MatMuls ({share:.0%} of the weights) in int8"


def time_batch1(paths: Mapping[str, Path], windows: np.ndarray, rounds: int = TIMING_ROUNDS,
                calls: int = TIMING_CALLS) -> dict[str, float]:
    """Batch-1 latency (ms) per variant, one intra-op thread: the best of ``rounds`` interleaved medians (a
    shared machine slows some rounds down; interleaving spreads that over all variants)."""
    sessions = {name: _session(path) for name, path in paths.items()}
    samples = np.ascontiguousarray(windows[: max(1, min(len(windows), 64))], dtype=np.float32)[:, None]
    best = {name: np.inf for name in sessions}
    for _ in range(rounds):
        for name, session in sessions.items():
            latencies = np.empty(calls)
            for k in range(calls):
                feed = {INPUT_NAME: samples[k % len(samples)]}
                start = time.perf_counter()
                session.run(None, feed)
                latencies[k] = time.perf_counter() - start
            best[name] = min(best[name], float(np.median(latencies[calls // 10:])) * 1e3)
    return best


@dataclass
class VariantCheck:
    name: str
    p50_ms: float                       # batch 1, one thread, at export time on the exporting machine
    max_abs_diff: dict[str, float]      # vs fp32 JAX over every check window
    force_max_abs_diff_n: float         # over the real windows (over all windows for fp32)
    contact_max_abs_diff: float
    passed: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        record = {"name": self.name, "p50_ms": round(self.p50_ms, 4), "passed": self.passed,
                  "force_max_abs_diff_n": self.force_max_abs_diff_n, "contact_max_abs_diff": self.contact_max_abs_diff,
                  "note": self.note}
        if self.name != "fp32":
            record[INT8_WEIGHT_BITS_KEY] = 7 if INT8_REDUCE_RANGE else 8
        return record

    def line(self) -> str:
        verdict = "passed" if self.passed else "failed"
        return (f"  {self.name:<13} batch-1 p50 {self.p50_ms:.3f} ms; force max |diff| vs JAX "
                f"{self.force_max_abs_diff_n:.2e} N, contact {self.contact_max_abs_diff:.2e}: {verdict}"
                + (f" ({self.note})" if self.note else ""))


@dataclass
class ExportReport:
    path: Path
    export_seconds: float
    max_abs_diff: dict[str, float]                 # the fp32 graph vs JAX, every output
    variant: str = "fp32"
    checks: list[VariantCheck] = field(default_factory=list)
    graph_passes: str = ""
    real_windows: int = 0
    kept: dict[str, Path] = field(default_factory=dict)     # every file written, by variant

    def lines(self) -> list[str]:
        worst = max(self.max_abs_diff.values()) if self.max_abs_diff else float("nan")
        text = [f"wrote {self.path} ({self.variant}, the fastest here) in {self.export_seconds:.1f} s; fp32 ONNX "
                f"Runtime vs JAX max |diff| {worst:.2e} (limit {FP32_TOLERANCE:g}); graph passes: {self.graph_passes}"]
        if self.checks:
            text.append(f"variants timed on {cpu_info().describe()} (force limit {FORCE_TOLERANCE_N:g} N, contact "
                        f"limit {CONTACT_TOLERANCE:g} on {self.real_windows} real windows):")
            text += [check.line() for check in self.checks]
        passed = {c.name for c in self.checks if c.passed}
        siblings = [p.name for n, p in self.kept.items() if n in passed and p != self.path]
        if siblings:
            text.append(f"package: {self.path.name} and {', '.join(siblings)} beside it (every variant that passed; "
                        "the estimator picks the fastest on its own machine, parameter inference_variant)")
        text += [f"also written, failed the checks: {p}" for n, p in self.kept.items() if n not in passed]
        return text


def _check(name: str, outputs: Mapping[str, np.ndarray], reference: Mapping[str, np.ndarray], real: slice,
           has_real: bool, p50_ms: float) -> VariantCheck:
    diff = max_abs_difference(reference, outputs)
    if name == "fp32":
        force, contact = diff["force"], diff["contact_prob"]
        return VariantCheck(name, p50_ms, diff, force, contact, max(diff.values()) <= FP32_TOLERANCE)
    force = float(np.max(np.abs(outputs["force"][real] - reference["force"][real])))
    contact = float(np.max(np.abs(outputs["contact_prob"][real] - reference["contact_prob"][real])))
    passed = has_real and force <= FORCE_TOLERANCE_N and contact <= CONTACT_TOLERANCE
    return VariantCheck(name, p50_ms, diff, force, contact, passed)


def export_model(model: NeuralActuator, description: Mapping[str, Any], out: str | Path,
                 check_windows: np.ndarray | None = None, *, calibration_windows: np.ndarray | None = None,
                 variants: Sequence[str] = VARIANTS, keep_variants: bool = False, seed: int = 0,
                 force_labels: np.ndarray | None = None) -> ExportReport:
    """Write the model package ``out``: every inference variant that matches JAX, the fastest here as ``out``
    and the others beside it (``OUT_STEM.<variant>.onnx``, named in ``out``'s metadata), each with the model
    contract in its metadata.

    The fp32 graph must match JAX within :data:`FP32_TOLERANCE` on random and the given real ``check_windows``
    or the export fails. The int8 variants are candidates only with real windows (``check_windows``); the
    static one is calibrated on ``calibration_windows`` (default: the check windows). ``keep_variants`` also
    writes the candidates that failed the checks beside ``out`` (not named in its metadata). ``force_labels`` is
    accepted for callers of the earlier interface and not used."""
    del force_labels
    out = Path(out)
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown or "fp32" not in variants:
        raise ExportError(f"variants must include fp32 and come from {', '.join(VARIANTS)}; got {list(variants)}")
    if description.get("schema_version") != SCHEMA_VERSION:
        raise ExportError(f"run has feature schema {description.get('schema_version')!r}, this exporter writes "
                          f"{SCHEMA_VERSION!r}")
    out.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    traced = trace_to_onnx(model)
    metadata = build_metadata(description)
    set_metadata(traced, metadata)
    traced.doc_string = "NeuralActuator (na_training): raw SI feature windows in, normalisation inside the graph"
    onnx.checker.check_model(traced)
    optimised, passes = optimise(traced, FP32_PASSES)

    config = model.config
    rng = np.random.default_rng(seed)
    mean, std = np.asarray(model.feature_mean[...]), np.asarray(model.feature_std[...])
    random_windows = mean + std * rng.standard_normal((RANDOM_CHECK_WINDOWS, config.history_length,
                                                       config.num_features))
    has_real = check_windows is not None and len(check_windows) > 0
    windows = np.concatenate([random_windows, np.asarray(check_windows)]) if has_real else random_windows
    windows = windows.astype(np.float32)
    real = slice(RANDOM_CHECK_WINDOWS, None)
    reference = jax_outputs(model, windows)

    with tempfile.TemporaryDirectory(prefix="na_export_") as tmp:
        work = Path(tmp)
        paths = {"fp32": work / "fp32.onnx"}
        onnx.save(optimised, str(paths["fp32"]))
        fp32_diff = max_abs_difference(reference, onnx_outputs(paths["fp32"], windows))
        note = ""
        if max(fp32_diff.values()) > FP32_TOLERANCE:         # a graph pass went wrong: fall back to the trace
            onnx.save(traced, str(paths["fp32"]))
            traced_diff = max_abs_difference(reference, onnx_outputs(paths["fp32"], windows))
            if max(traced_diff.values()) > FP32_TOLERANCE:
                raise ExportError(f"{out}: ONNX Runtime differs from JAX by {traced_diff} (limit {FP32_TOLERANCE})")
            note = f"graph passes differed from JAX by {max(fp32_diff.values()):.2e}; the traced graph is used"
            fp32_diff, passes.applied = traced_diff, {}
        quantised = [v for v in variants if v != "fp32"] if has_real else []
        notes = {"fp32": note}
        if quantised:
            matmul_form, _ = optimise(traced, MATMUL_PASSES)
            onnx.save(matmul_form, str(work / "matmul.onnx"))
            calibration = np.asarray(calibration_windows if calibration_windows is not None
                                     and len(calibration_windows) else check_windows, dtype=np.float32)
            for name in quantised:
                nodes, source = None, work / "matmul.onnx"
                if name == "int8-mixed":
                    nodes, notes[name] = select_mixed(source, calibration, jax_outputs(model, calibration), work)
                    if not nodes:
                        continue
                    # the layers left in fp32 keep their Gemm (faster than MatMul + Add)
                    mixed, _ = optimise(traced, FP32_BASE_PASSES)
                    gemm_to_matmul(mixed, PassReport(), only=set(nodes))
                    for run in LAYOUT_PASSES:
                        run(mixed, PassReport())
                    source = work / "mixed_fp32.onnx"
                    onnx.save(mixed, str(source))
                paths[name] = quantize_variant(name, source, work / f"{name}.onnx", calibration, nodes)
        timings = time_batch1(paths, windows[real] if has_real else windows)
        checks = [_check(name, onnx_outputs(paths[name], windows), reference, real, has_real, timings[name])
                  for name in paths]
        for check in checks:
            check.note = notes.get(check.name, "")
        if not checks[0].passed:
            raise ExportError(f"{out}: ONNX Runtime differs from JAX by {fp32_diff} (limit {FP32_TOLERANCE})")
        if not has_real and len(variants) > 1:
            checks[0].note = (checks[0].note + "; " if checks[0].note else "") + \
                "int8 variants not tried: no real windows to check them on (give a NAD)"
        if "int8-mixed" in quantised and "int8-mixed" not in paths:
            checks[0].note = (checks[0].note + "; " if checks[0].note else "") + \
                "int8-mixed: no layer stays within the budget in int8"
        chosen = min((c for c in checks if c.passed), key=lambda c: c.p50_ms)
        record = {VARIANT_CHECKS_KEY: json.dumps([c.to_dict() for c in checks]), "graph_passes": passes.describe()}
        kept = write_package(out, chosen.name, {c.name: paths[c.name] for c in checks if c.passed}, record,
                             {c.name: paths[c.name] for c in checks if not c.passed} if keep_variants else {})
    elapsed = time.perf_counter() - start
    return ExportReport(out, elapsed, fp32_diff, chosen.name, checks, passes.describe(),
                        len(windows) - RANDOM_CHECK_WINDOWS if has_real else 0, kept)


def write_package(out: Path, default: str, accepted: Mapping[str, Path], record: Mapping[str, str],
                  rejected: Mapping[str, Path]) -> dict[str, Path]:
    """The model package (na_description.model_package): ``default`` as ``out``, the other ``accepted`` variants
    beside it, named in ``out``'s ``variant_files`` with their sha256; ``rejected`` ones written beside it too
    but not named (for inspection). Returns every file written by variant."""
    written: dict[str, Path] = {}
    listed: dict[str, dict[str, str]] = {}
    for name, source in {**rejected, **accepted}.items():
        if name == default:
            continue
        variant = onnx.load(str(source))
        set_metadata(variant, {**record, "inference_variant": name, VARIANT_FILES_KEY: "{}"})
        written[name] = out.with_name(sibling_name(out, name))
        onnx.save(variant, str(written[name]))
        if name in accepted:
            listed[name] = {"file": written[name].name, "sha256": file_sha256(written[name])}
    main = onnx.load(str(accepted[default]))
    main_record = {**record, "inference_variant": default, VARIANT_FILES_KEY: json.dumps(listed)}
    assert set(main_record) == set(VARIANT_KEYS)
    set_metadata(main, main_record)
    onnx.save(main, str(out))
    written[default] = out
    return written
