"""Int8 variants with 8-bit weights are not chosen on an x86 CPU without VNNI, where their products saturate:
the pure rule on CPU descriptions and package records, and the loader that applies it to a real package."""

from __future__ import annotations

import json

import pytest

from na_common.machine import CpuInfo
from na_description import load_spec
from na_estimator import model_loader
from na_estimator.int8_saturation import saturating_variants, sums_int8_pairs_in_16_bits
from na_estimator.model_loader import load_model

SPEC = load_spec()
CPU = ["CPUExecutionProvider"]
AVX2 = CpuInfo("AMD EPYC (family 25, model 1)", ("avx2", "fma"), 2, True)
AVX512_NO_VNNI = CpuInfo("Intel Xeon (family 6, model 85)", ("avx2", "fma", "avx512f", "avx512bw"), 2, True)
AVX512_VNNI = CpuInfo("AMD EPYC (family 25, model 17)", ("avx2", "fma", "avx512f", "avx512bw", "avx512_vnni"), 2, True)
AVX_VNNI = CpuInfo("Intel Core (family 6, model 151)", ("avx2", "fma", "avx_vnni"), 8, True)
ARM = CpuInfo("Neoverse-N1", ("asimd", "asimddp"), 4, False)
# records as the exporter writes them: before 7-bit weights (no bits) and since (7)
OLD_RECORDS = [{"name": "fp32", "passed": True}, {"name": "int8-dynamic", "passed": True},
               {"name": "int8-static", "passed": True}]
NEW_RECORDS = [{"name": "fp32", "passed": True}, {"name": "int8-dynamic", "passed": True, "int8_weight_bits": 7},
               {"name": "int8-static", "passed": True, "int8_weight_bits": 7}]


@pytest.mark.parametrize(("cpu", "saturates"), [(AVX2, True), (AVX512_NO_VNNI, True), (AVX512_VNNI, False),
                                                (AVX_VNNI, False), (ARM, False)])
def test_only_x86_without_vnni_sums_int8_pairs_in_16_bits(cpu, saturates) -> None:
    assert sums_int8_pairs_in_16_bits(cpu) is saturates


def test_eight_bit_variants_are_flagged_on_a_cpu_without_vnni_only() -> None:
    old = {"variant_checks": json.dumps(OLD_RECORDS)}
    flagged = saturating_variants(old, AVX2)
    assert set(flagged) == {"int8-dynamic", "int8-static"}
    assert all(name in reason and "VNNI" in reason and "\n" not in reason for name, reason in flagged.items())
    assert saturating_variants(old, AVX512_VNNI) == {} and saturating_variants(old, ARM) == {}
    assert saturating_variants({"variant_checks": json.dumps(NEW_RECORDS)}, AVX2) == {}
    assert saturating_variants({"variant_checks": "not json"}, AVX2) == {}
    assert saturating_variants({}, AVX2) == {}


def test_auto_leaves_out_saturating_variants_with_one_warning_each(package_builder, monkeypatch) -> None:
    package = package_builder(checks=[OLD_RECORDS[0], OLD_RECORDS[1], NEW_RECORDS[2]])
    monkeypatch.setattr(model_loader, "cpu_info", lambda: AVX2)
    warnings: list[str] = []
    model, choice = load_model(package, SPEC, providers=CPU, warn=warnings.append)
    assert set(choice.timings_ms) == {"fp32", "int8-static"} and model.variant in choice.timings_ms
    assert len(warnings) == 1 and "int8-dynamic" in warnings[0] and "\n" not in warnings[0]
    assert "left out: int8-dynamic" in choice.describe()            # the log line and /diagnostics say so too


def test_a_vnni_cpu_times_every_variant(package_builder, monkeypatch) -> None:
    package = package_builder(checks=OLD_RECORDS)
    monkeypatch.setattr(model_loader, "cpu_info", lambda: AVX512_VNNI)
    warnings: list[str] = []
    _, choice = load_model(package, SPEC, providers=CPU, warn=warnings.append)
    assert set(choice.timings_ms) == {"fp32", "int8-dynamic", "int8-static"} and not warnings


def test_a_forced_saturating_variant_runs_with_a_warning(package_builder, monkeypatch) -> None:
    package = package_builder(checks=OLD_RECORDS)
    monkeypatch.setattr(model_loader, "cpu_info", lambda: AVX2)
    warnings: list[str] = []
    model, choice = load_model(package, SPEC, variant="int8-dynamic", providers=CPU, warn=warnings.append)
    assert (model.variant, choice.how) == ("int8-dynamic", "forced")
    assert len(warnings) == 1 and "forces it" in warnings[0]


def test_a_package_whose_main_file_saturates_falls_back_to_a_listed_variant(package_builder, monkeypatch) -> None:
    package = package_builder(variants=("int8-dynamic", "fp32"), checks=OLD_RECORDS[:2])
    monkeypatch.setattr(model_loader, "cpu_info", lambda: AVX2)
    model, choice = load_model(package, SPEC, providers=CPU, warn=lambda _: None)
    assert (model.variant, choice.how) == ("fp32", "only")
