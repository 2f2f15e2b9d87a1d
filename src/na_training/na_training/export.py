"""ONNX export of a trained NeuralActuator (docs/ARCHITECTURE.md "Model contract").

Graph: input ``features [batch, L, F]`` float32 raw SI features (normalisation inside the graph);
outputs ``torque_surrogate [batch, n]``, ``force_raw [batch, 3]``, ``contact_prob [batch, 1]``,
``force [batch, 3]``, ``condition [batch, n]``. The graph is traced from the Flax model with
jax2onnx, then its input/outputs are given the contract names. ``metadata_props`` (all strings,
JSON where structured): see :data:`METADATA_KEYS`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx

from na_estimator.contract import INPUT_NAME, METADATA_KEYS, OUTPUT_NAMES
from na_estimator.features import FEATURE_UNITS, SCHEMA_VERSION
from na_training.model import NeuralActuator, jit_forward

OPSET = 17
FP32_TOLERANCE = 1e-4


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
                    model_name="neural_actuator", opset=OPSET)
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


def build_metadata(description: Mapping[str, Any]) -> dict[str, str]:
    """``metadata_props`` from a run description (``na_training.train.Trainer.run_description``)."""
    config = description["config"]
    stats = description["feature_stats"]
    metadata = {
        "schema_version": str(description["schema_version"]),
        "feature_names": json.dumps(description["feature_names"]),
        "feature_units": json.dumps(FEATURE_UNITS if len(FEATURE_UNITS) == len(description["feature_names"])
                                    else []),
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


def jax_outputs(model: NeuralActuator, windows: np.ndarray) -> dict[str, np.ndarray]:
    out = jit_forward(model)(np.asarray(windows, dtype=np.float32))
    return {name: np.asarray(out[name]) for name in OUTPUT_NAMES}


def onnx_outputs(path: str | Path, windows: np.ndarray) -> dict[str, np.ndarray]:
    import onnxruntime as ort

    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    values = session.run(list(OUTPUT_NAMES), {INPUT_NAME: np.asarray(windows, dtype=np.float32)})
    return dict(zip(OUTPUT_NAMES, values, strict=True))


def max_abs_difference(a: Mapping[str, np.ndarray], b: Mapping[str, np.ndarray]) -> dict[str, float]:
    return {name: float(np.max(np.abs(a[name] - b[name]))) for name in OUTPUT_NAMES}


@dataclass
class ExportReport:
    path: Path
    export_seconds: float
    max_abs_diff: dict[str, float]
    int8_path: Path | None = None
    int8_force_mae_increase: float | None = None
    int8_max_abs_diff: dict[str, float] = field(default_factory=dict)

    def lines(self) -> list[str]:
        worst = max(self.max_abs_diff.values()) if self.max_abs_diff else float("nan")
        text = [f"wrote {self.path} in {self.export_seconds:.1f} s; ONNX Runtime vs JAX max |diff| {worst:.2e} "
                f"(limit {FP32_TOLERANCE:g})"]
        if self.int8_path is not None:
            text.append(f"wrote {self.int8_path} (dynamic int8); force max |diff| vs JAX "
                        f"{self.int8_max_abs_diff.get('force', float('nan')):.3g} N, force MAE increase "
                        f"{self.int8_force_mae_increase:.3g} N over fp32 on the check windows")
        return text


def quantize_int8(source: str | Path, target: str | Path) -> Path:
    """Dynamic int8 weight quantisation (onnxruntime.quantization.quantize_dynamic); metadata kept."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(source), str(target), weight_type=QuantType.QInt8)
    quantized = onnx.load(str(target))
    if not quantized.metadata_props:
        quantized.metadata_props.extend(onnx.load(str(source), load_external_data=False).metadata_props)
        onnx.save(quantized, str(target))
    return Path(target)


def export_model(model: NeuralActuator, description: Mapping[str, Any], out: str | Path,
                 check_windows: np.ndarray | None = None, *, force_labels: np.ndarray | None = None,
                 int8: bool = False, seed: int = 0) -> ExportReport:
    """Write ``out`` (ONNX with metadata), check it against JAX on random and the given real windows.

    ``force_labels [N, 3]`` (optional, paired with ``check_windows``) make the int8 force error
    increase a MAE against labels; without them it is measured against the fp32 model's force."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if description.get("schema_version") != SCHEMA_VERSION:
        raise ExportError(f"run has feature schema {description.get('schema_version')!r}, this exporter writes "
                          f"{SCHEMA_VERSION!r}")
    start = time.perf_counter()
    proto = trace_to_onnx(model)
    for key, value in build_metadata(description).items():
        proto.metadata_props.add(key=key, value=value)
    proto.doc_string = "NeuralActuator (na_training): raw SI feature windows in, normalisation inside the graph"
    onnx.checker.check_model(proto)
    onnx.save(proto, str(out))
    elapsed = time.perf_counter() - start

    config = model.config
    rng = np.random.default_rng(seed)
    mean = np.asarray(model.feature_mean[...])
    std = np.asarray(model.feature_std[...])
    windows = mean + std * rng.standard_normal((16, config.history_length, config.num_features))
    if check_windows is not None and len(check_windows):
        windows = np.concatenate([windows, np.asarray(check_windows)], axis=0)
    windows = windows.astype(np.float32)
    reference = jax_outputs(model, windows)
    diff = max_abs_difference(reference, onnx_outputs(out, windows))
    report = ExportReport(out, elapsed, diff)
    if max(diff.values()) > FP32_TOLERANCE:
        raise ExportError(f"{out}: ONNX Runtime differs from JAX by {diff} (limit {FP32_TOLERANCE})")
    if int8:
        int8_path = quantize_int8(out, out.with_name(out.stem + ".int8.onnx"))
        quantized = onnx_outputs(int8_path, windows)
        report.int8_path = int8_path
        report.int8_max_abs_diff = max_abs_difference(reference, quantized)
        if force_labels is not None and check_windows is not None and len(force_labels) == len(check_windows):
            real = slice(16, None)
            base = float(np.mean(np.abs(reference["force"][real] - force_labels)))
            report.int8_force_mae_increase = float(np.mean(np.abs(quantized["force"][real] - force_labels))) - base
        else:
            report.int8_force_mae_increase = float(np.mean(np.abs(quantized["force"] - reference["force"])))
    return report
