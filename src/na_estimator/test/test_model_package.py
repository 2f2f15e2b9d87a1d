"""Model packages through the estimator's loader: ``auto`` times the variants once and then reads the cached
choice, a parameter forces one, and a variant missing on disk or not the exported file is a one-line error
(forced) or skipped with a warning (auto); a single exported file still loads as before."""

from __future__ import annotations

import onnx
import pytest

from na_description import load_spec
from na_estimator.model_loader import load_model
from na_estimator.onnx_model import ModelLoadError
from na_estimator.variant_cache import VariantCache

SPEC = load_spec()
CPU = ["CPUExecutionProvider"]


def test_auto_times_the_variants_once_then_reads_this_cpus_cached_choice(model_package, tmp_path) -> None:
    model, choice = load_model(model_package, SPEC, providers=CPU)
    assert choice.how == "timed" and set(choice.timings_ms) == {"fp32", "int8-dynamic", "int8-static"}
    assert model.variant == choice.variant and choice.variant in choice.describe()
    assert VariantCache().path == tmp_path / "cache" / "neuralactuator" / "inference_variants.json"
    again, cached = load_model(model_package, SPEC, providers=CPU)
    assert (cached.how, cached.variant, again.variant) == ("cached", choice.variant, choice.variant)


def test_another_model_file_is_timed_again(model_package, model_builder) -> None:
    load_model(model_package, SPEC, providers=CPU)
    listed = {p.key: p.value for p in onnx.load(str(model_package)).metadata_props}["variant_files"]
    model_builder(model_package.name, seed=9, metadata_overrides={"inference_variant": "fp32",
                                                                  "variant_files": listed})
    assert load_model(model_package, SPEC, providers=CPU)[1].how == "timed"


@pytest.mark.parametrize("variant", ["fp32", "int8-static"])
def test_a_forced_variant_loads_its_own_file(model_package, variant) -> None:
    model, choice = load_model(model_package, SPEC, variant=variant, providers=CPU)
    assert (model.variant, choice.how) == (variant, "forced")
    assert model.path.name == ("model.onnx" if variant == "fp32" else f"model.{variant}.onnx")


def test_a_forced_variant_missing_on_disk_is_a_one_line_error(model_package) -> None:
    (model_package.parent / "model.int8-static.onnx").unlink()
    with pytest.raises(ModelLoadError) as error:
        load_model(model_package, SPEC, variant="int8-static", providers=CPU)
    assert "\n" not in str(error.value) and "missing" in str(error.value) and "model.int8-static.onnx" in str(
        error.value)


def test_a_forced_variant_not_in_the_package_is_a_one_line_error(model_package) -> None:
    with pytest.raises(ModelLoadError) as error:
        load_model(model_package, SPEC, variant="int8-mixed", providers=CPU)
    assert "\n" not in str(error.value) and "'int8-mixed'" in str(error.value)


def test_a_sibling_that_is_not_the_exported_file_is_refused(model_package, model_builder) -> None:
    model_builder("model.int8-dynamic.onnx", seed=42, metadata_overrides={"inference_variant": "int8-dynamic"})
    with pytest.raises(ModelLoadError, match="sha256 differs"):
        load_model(model_package, SPEC, variant="int8-dynamic", providers=CPU)


def test_auto_skips_a_missing_variant_with_a_warning(model_package) -> None:
    (model_package.parent / "model.int8-dynamic.onnx").unlink()
    warnings: list[str] = []
    model, choice = load_model(model_package, SPEC, providers=CPU, warn=warnings.append)
    assert set(choice.timings_ms) == {"fp32", "int8-static"} and model.variant in choice.timings_ms
    assert len(warnings) == 1 and "int8-dynamic" in warnings[0] and "\n" not in warnings[0]


def test_a_single_exported_file_loads_as_before(contract_model, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model, choice = load_model(contract_model, SPEC, providers=CPU)
    assert (model.variant, choice.how) == ("fp32", "only")
    assert not (tmp_path / "cache").exists()

