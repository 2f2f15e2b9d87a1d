"""The inference-variant choice as a pure core: injected timings -> choice, the per-CPU cache (hit, miss,
invalidated by another CPU, ISA, runtime or model), a forced variant, and start-up timing on a fake clock."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import pytest

from na_estimator.variant_cache import CacheKey, VariantCache, default_cache_dir
from na_estimator.variant_choice import AUTO, VariantChoiceError, choose_variant, fastest, time_calls

VARIANTS = ["fp32", "int8-dynamic", "int8-static", "int8-mixed"]
TIMINGS = {"fp32": 0.49, "int8-dynamic": 0.366, "int8-static": 0.447, "int8-mixed": 0.472}   # issue 28's no-AVX-512 row
KEY = CacheKey(cpu="AMD EPYC", isa="avx2 fma", runtime="1.32.0", model_sha256="a" * 64, threads=1,
               provider="CPUExecutionProvider")


class Measure:
    """Injected timings; counts the calls (a cache hit or a forced variant must not time anything)."""

    def __init__(self, timings: dict[str, float]) -> None:
        self.timings, self.calls = timings, 0

    def __call__(self, names: Sequence[str]) -> dict[str, float]:
        self.calls += 1
        return {name: self.timings[name] for name in names}


def test_the_fastest_timed_variant_is_chosen_and_the_reason_names_every_timing() -> None:
    measure = Measure(TIMINGS)
    choice = choose_variant(AUTO, VARIANTS, measure)
    assert (choice.variant, choice.how, measure.calls) == ("int8-dynamic", "timed", 1)
    text = choice.describe()
    assert "int8-dynamic" in text and all(f"{ms:.3f}" in text for ms in TIMINGS.values())
    assert fastest({"a": 1.0, "b": 1.0}) == "a"


def test_a_cached_choice_is_used_without_timing_and_survives_a_new_cache_object(tmp_path) -> None:
    first = choose_variant(AUTO, VARIANTS, Measure(TIMINGS), VariantCache(tmp_path), KEY)
    assert first.how == "timed" and str(tmp_path) in first.note
    again = Measure({name: 1.0 for name in VARIANTS})
    hit = choose_variant(AUTO, VARIANTS, again, VariantCache(tmp_path), KEY)
    assert (hit.variant, hit.how, again.calls) == ("int8-dynamic", "cached", 0)
    assert hit.timings_ms == pytest.approx(TIMINGS, abs=1e-4)


@pytest.mark.parametrize("change", [{"cpu": "Intel Xeon"}, {"isa": "avx2 fma avx512f avx512_vnni"},
                                    {"runtime": "1.33.0"}, {"model_sha256": "b" * 64}, {"threads": 2}])
def test_another_cpu_isa_runtime_model_or_thread_count_misses_the_cache(tmp_path, change) -> None:
    cache = VariantCache(tmp_path)
    choose_variant(AUTO, VARIANTS, Measure(TIMINGS), cache, KEY)
    elsewhere = Measure({**TIMINGS, "int8-static": 0.1})
    choice = choose_variant(AUTO, VARIANTS, elsewhere, cache, dataclasses.replace(KEY, **change))
    assert (choice.variant, choice.how, elsewhere.calls) == ("int8-static", "timed", 1)
    # both entries are kept: going back to the first machine is a hit again
    assert choose_variant(AUTO, VARIANTS, Measure({}), cache, KEY).how == "cached"


def test_a_cached_variant_no_longer_on_disk_is_timed_again(tmp_path) -> None:
    cache = VariantCache(tmp_path)
    choose_variant(AUTO, VARIANTS, Measure(TIMINGS), cache, KEY)
    measure = Measure(TIMINGS)
    choice = choose_variant(AUTO, ["fp32", "int8-static"], measure, cache, KEY)
    assert (choice.variant, choice.how, measure.calls) == ("int8-static", "timed", 1)


def test_a_damaged_cache_file_is_a_miss_and_is_rewritten(tmp_path) -> None:
    cache = VariantCache(tmp_path)
    cache.path.write_text("{not json")
    assert choose_variant(AUTO, VARIANTS, Measure(TIMINGS), cache, KEY).how == "timed"
    assert KEY.digest() in json.loads(cache.path.read_text())


def test_an_unwritable_cache_still_chooses_and_says_why(tmp_path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    choice = choose_variant(AUTO, VARIANTS, Measure(TIMINGS), VariantCache(blocker / "sub"), KEY)
    assert choice.variant == "int8-dynamic" and "cannot write" in choice.note


def test_a_forced_variant_is_taken_without_timing() -> None:
    measure = Measure(TIMINGS)
    choice = choose_variant("int8-static", VARIANTS, measure)
    assert (choice.variant, choice.how, measure.calls) == ("int8-static", "forced", 0)
    assert "forced" in choice.describe()


def test_a_forced_variant_the_package_lacks_is_a_one_line_error() -> None:
    with pytest.raises(VariantChoiceError) as error:
        choose_variant("int8-mixed", ["fp32", "int8-dynamic"], Measure(TIMINGS))
    message = str(error.value)
    assert "\n" not in message and "'int8-mixed'" in message and "fp32, int8-dynamic" in message


def test_a_package_of_one_is_not_timed() -> None:
    measure = Measure(TIMINGS)
    assert choose_variant(AUTO, ["fp32"], measure).how == "only" and measure.calls == 0


def test_the_cache_lives_in_the_user_cache_directory(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "neuralactuator"
    assert VariantCache().path.parent == tmp_path / "neuralactuator"


def test_start_up_timing_stays_in_its_budget_and_a_slow_round_does_not_decide() -> None:
    now = [0.0]
    cost = {"fp32": 0.5e-3, "int8-dynamic": 0.3e-3}
    slow_round = {"n": 0}

    def clock() -> float:
        return now[0]

    def call(name: str):
        def run() -> None:
            slow_round["n"] += 1
            # the first 30 calls (warm-up and the first round) run 4x slower, as on a busy machine
            now[0] += cost[name] * (4 if slow_round["n"] <= 30 else 1)
        return run

    timings = time_calls({name: call(name) for name in cost}, budget_s=0.1, calls_per_round=10, warmup=5,
                         clock=clock)
    assert timings == pytest.approx({"fp32": 0.5, "int8-dynamic": 0.3})
    assert now[0] < 0.1 + 2 * 10 * 4 * 0.5e-3 + 2 * 5 * 4 * 0.5e-3    # the budget, one round and the warm-up


def test_start_up_timing_picks_the_steady_variant_over_one_with_rare_fast_rounds() -> None:
    now, calls_made = [0.0], {"fp32": 0, "int8-mixed": 0}

    def clock() -> float:
        return now[0]

    def call(name: str):
        def run() -> None:
            calls_made[name] += 1
            if name == "fp32":         # one round in four at 0.4 ms, the others at 0.9 ms
                now[0] += 0.4e-3 if (calls_made[name] // 10) % 4 == 0 else 0.9e-3
            else:
                now[0] += 0.8e-3
        return run

    timings = time_calls({name: call(name) for name in calls_made}, budget_s=0.5, calls_per_round=10, warmup=0,
                         clock=clock)
    assert fastest(timings) == "int8-mixed"
    assert timings["fp32"] == pytest.approx(0.9) and timings["int8-mixed"] == pytest.approx(0.8)
