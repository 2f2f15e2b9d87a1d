"""Load a model package for the estimator with the inference variant chosen on this machine.

The main file is loaded first (its contract is checked there); with ``auto`` and more than one variant on
disk, the others are loaded too and timed against it on the estimator's own path (``OnnxActuatorModel.infer``)
unless this CPU's choice is cached (na_estimator.variant_cache). Only the chosen model is kept. An int8 variant
whose weights saturate on this CPU is not a candidate (na_estimator.int8_saturation).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np

from na_common.machine import cpu_info
from na_description import RobotSpec
from na_description.model_package import PackageError, file_sha256, read_package
from na_estimator.int8_saturation import saturating_variants
from na_estimator.onnx_model import DEFAULT_PROVIDERS, ModelLoadError, OnnxActuatorModel
from na_estimator.variant_cache import CacheKey, VariantCache
from na_estimator.variant_choice import AUTO, VariantChoice, VariantChoiceError, choose_variant, time_calls

TIMING_WINDOWS = 16            # distinct input windows cycled through while timing


def cache_key(model: OnnxActuatorModel, threads: int) -> CacheKey:
    import onnxruntime

    cpu = cpu_info()
    return CacheKey(cpu.model, " ".join(cpu.isa), onnxruntime.__version__, file_sha256(model.path), int(threads),
                    model.provider.in_use)


def timing_windows(model: OnnxActuatorModel, count: int = TIMING_WINDOWS, seed: int = 0) -> np.ndarray:
    """Windows around the training distribution (feature mean and std of the metadata; std 1 without it)."""
    mean = model.contract.feature_mean
    std = np.asarray(json.loads(model.metadata.get("feature_std") or "null") or np.ones_like(mean), float)
    rng = np.random.default_rng(seed)
    shape = (count, model.contract.history_length, len(mean))
    return (mean + std * rng.standard_normal(shape)).astype(np.float32)


def load_model(path: str | Path, spec: RobotSpec | None = None, *, variant: str = AUTO,
               providers: Sequence[str] = DEFAULT_PROVIDERS, intra_op_threads: int = 1,
               cache: VariantCache | None = None,
               warn: Callable[[str], None] = lambda _: None) -> tuple[OnnxActuatorModel, VariantChoice]:
    """The model of ``variant`` (a name, or ``auto``) from the package whose main file is ``path``, and why it
    was chosen. Raises ModelLoadError (one line) for a forced variant the package lacks or cannot load; with
    ``auto``, a listed variant missing on disk is skipped and reported through ``warn``."""

    def load(file: Path) -> OnnxActuatorModel:
        return OnnxActuatorModel(file, spec, providers=providers, intra_op_threads=intra_op_threads)

    main = load(Path(path))
    try:
        package = read_package(main.path, main.metadata)
    except PackageError as exc:
        raise ModelLoadError(str(exc)) from None
    loaded = {package.default: main}
    files: dict[str, Path] = {package.default: main.path}
    for name in package.names[1:]:
        try:
            files[name] = package.path(name)
        except PackageError as exc:
            if variant == name:
                raise ModelLoadError(str(exc)) from None
            if variant == AUTO:
                warn(f"{exc}; choosing among the others")

    left_out = []
    for name, reason in saturating_variants(main.metadata, cpu_info()).items():
        if variant == name:
            warn(f"{reason}; running it because inference_variant forces it")
        elif variant == AUTO and name in files and len(files) > 1:
            del files[name]
            left_out.append(name)
            warn(f"{reason}; choosing among the others")

    def measure(names: Sequence[str]) -> dict[str, float]:
        for name in names:
            if name not in loaded:
                loaded[name] = load(files[name])
        windows = timing_windows(main)
        return time_calls({name: _cycling(loaded[name], windows) for name in names})

    key = cache_key(main, intra_op_threads) if variant == AUTO and len(files) > 1 else None
    try:
        choice = choose_variant(variant, list(files), measure, cache or VariantCache(), key)
    except VariantChoiceError as exc:
        raise ModelLoadError(f"{main.path.name}: {exc}") from None
    if left_out:
        why = f"left out: {', '.join(left_out)} (8-bit int8 weights saturate on this CPU without VNNI)"
        choice = replace(choice, note=f"{choice.note}; {why}" if choice.note else why)
    return _checked(loaded.get(choice.variant) or load(files[choice.variant]), choice), choice


def _checked(model: OnnxActuatorModel, choice: VariantChoice) -> OnnxActuatorModel:
    if model.variant != choice.variant:
        raise ModelLoadError(f"{model.path} says it is variant '{model.variant}', its package lists it as "
                             f"'{choice.variant}'")
    return model


def _cycling(model: OnnxActuatorModel, windows: np.ndarray) -> Callable[[], object]:
    """One inference per call, on the next of ``windows``."""
    state = {"k": 0}

    def call() -> object:
        state["k"] = (state["k"] + 1) % len(windows)
        return model.infer(windows[state["k"]])
    return call
