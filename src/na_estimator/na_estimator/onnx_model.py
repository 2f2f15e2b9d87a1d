"""ONNX Runtime wrapper: execution-provider fallback, contract check, warm-up, one-window inference.

One-window inference runs through a preallocated I/O binding: the input window is written into a buffer that
ONNX Runtime reads in place, and the outputs land in preallocated arrays (no allocation per call). One file is
one inference variant (metadata ``inference_variant``); which file of a model package the estimator loads is
decided in na_estimator.model_loader."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from na_description import RobotSpec, load_spec
from na_description.model_contract import INPUT_NAME, OUTPUT_NAMES, ContractError, ModelContract, check_contract

DEFAULT_PROVIDERS = ("TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider")
LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProviderChoice:
    requested: tuple[str, ...]
    available: tuple[str, ...]
    in_use: str

    def describe(self) -> str:
        order = list(self.requested)
        skipped = order[: order.index(self.in_use)] if self.in_use in order else order
        note = f" (not available here: {', '.join(skipped)})" if skipped else ""
        return f"execution provider {self.in_use}{note}"


class ModelLoadError(RuntimeError):
    """The model file is missing, unreadable, or does not meet the contract."""


class OnnxActuatorModel:
    """An exported NeuralActuator model ready for one-sample inference."""

    def __init__(self, path: str | Path, spec: RobotSpec | None = None,
                 providers: Sequence[str] = DEFAULT_PROVIDERS, intra_op_threads: int = 1,
                 warmup_runs: int = 10, spin: bool = True) -> None:
        import onnxruntime as ort

        self.path = Path(path)
        self.spec = spec or load_spec()
        if not self.path.is_file():
            raise ModelLoadError(f"model file not found: {self.path}")
        available = tuple(ort.get_available_providers())
        chosen = [p for p in providers if p in available] or ["CPUExecutionProvider"]
        options = ort.SessionOptions()
        options.intra_op_num_threads = max(1, int(intra_op_threads))
        options.inter_op_num_threads = 1
        options.log_severity_level = 3
        options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        # With several intra-op threads, idle workers spin by default: faster on free cores, slower on busy ones.
        options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spin else "0")
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        try:
            self.session = ort.InferenceSession(str(self.path), sess_options=options, providers=chosen)
        except Exception as exc:  # onnxruntime raises several private exception types
            raise ModelLoadError(f"ONNX Runtime cannot load {self.path}: {exc}") from exc
        self.provider = ProviderChoice(tuple(providers), available, self.session.get_providers()[0])
        metadata = dict(self.session.get_modelmeta().custom_metadata_map)
        try:
            self.contract: ModelContract = check_contract(metadata, self.spec)
        except ContractError as exc:
            raise ModelLoadError(f"{self.path}: {exc}") from exc
        self._check_signature()
        self.metadata = metadata
        self.variant = metadata.get("inference_variant", "fp32")
        self._input = np.empty((1, self.contract.history_length, len(self.contract.feature_names)), np.float32)
        self._input[0] = self.contract.feature_mean
        self._bind(ort)
        for _ in range(max(0, warmup_runs)):
            self.infer(np.broadcast_to(self.contract.feature_mean, self._input.shape[1:]))

    def _bind(self, ort) -> None:
        """Preallocated input and outputs for one window (shapes from one plain run)."""
        first = self.session.run(list(OUTPUT_NAMES), {INPUT_NAME: self._input})
        self._outputs = [np.empty(value.shape, np.float32) for value in first]
        self._binding = self.session.io_binding()
        self._binding.bind_ortvalue_input(INPUT_NAME, ort.OrtValue.ortvalue_from_numpy(self._input))
        for name, buffer in zip(OUTPUT_NAMES, self._outputs, strict=True):
            self._binding.bind_output(name, "cpu", 0, np.float32, list(buffer.shape), buffer.ctypes.data)
        self._views = [buffer[0] for buffer in self._outputs]

    def _check_signature(self) -> None:
        inputs = self.session.get_inputs()
        outputs = [o.name for o in self.session.get_outputs()]
        if [i.name for i in inputs] != [INPUT_NAME]:
            raise ModelLoadError(f"{self.path}: inputs are {[i.name for i in inputs]}, expected ['{INPUT_NAME}']")
        missing = [name for name in OUTPUT_NAMES if name not in outputs]
        if missing:
            raise ModelLoadError(f"{self.path}: outputs {missing} missing (has {outputs})")
        shape = inputs[0].shape
        want = (self.contract.history_length, len(self.contract.feature_names))
        if len(shape) != 3 or tuple(shape[1:]) != want:
            raise ModelLoadError(f"{self.path}: input shape {shape} does not match [batch, {want[0]}, {want[1]}]")

    def infer(self, window: np.ndarray) -> tuple[dict[str, np.ndarray], float]:
        """Outputs for one ``[L, F]`` window (batch dimension dropped) and the wall time in s.

        The arrays are views of the preallocated outputs: valid until the next call (copy to keep them)."""
        self._input[0] = window
        start = time.perf_counter()
        self.session.run_with_iobinding(self._binding)
        elapsed = time.perf_counter() - start
        return dict(zip(OUTPUT_NAMES, self._views, strict=True)), elapsed

    def infer_batch(self, windows: np.ndarray) -> dict[str, np.ndarray]:
        values = self.session.run(OUTPUT_NAMES, {INPUT_NAME: np.asarray(windows, dtype=np.float32)})
        return dict(zip(OUTPUT_NAMES, values, strict=True))
