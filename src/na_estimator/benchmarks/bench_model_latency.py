"""Model latency of the NeuralActuator: ONNX Runtime fp32 / int8 against jax.jit, beside the paper's Table XII.

One sample at a time on one thread (ONNX Runtime intra-op 1, XLA CPU single-threaded), timed
through ``OnnxActuatorModel.infer`` -- the estimator's own inference path -- and through the
training code's ``jit_forward`` (outputs blocked on). Then throughput in samples/s at batch 32.
Warm-up calls are excluded. The paper measured JAX JIT on an RTX 5080 GPU (Table XII; docs/REFERENCES.md, Paper);
the figures here are from this machine's CPU, so compare orders of magnitude, not digits.

    python src/na_estimator/benchmarks/bench_model_latency.py                      # paper-sized, random weights
    python src/na_estimator/benchmarks/bench_model_latency.py --samples 20000
    python src/na_estimator/benchmarks/bench_model_latency.py --run runs/demo      # a training run
    python src/na_estimator/benchmarks/bench_model_latency.py --model model.onnx   # an exported model
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PAPER_CONFIG = "paper"   # the shipped training config of the paper-sized model
# One XLA CPU thread, like ONNX Runtime's intra-op 1 (jax is imported lazily, after main() sets it).
SINGLE_THREAD_XLA_FLAGS = "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1"
CPU_ONLY = ("CPUExecutionProvider",)

# Paper Table XII (docs/REFERENCES.md, Paper): JAX JIT on an RTX 5080, batch 1 unless noted.
PAPER_MEAN_MS = 0.25
PAPER_P95_MS = 0.31
PAPER_HZ_BATCH1 = 4019.0
PAPER_SAMPLES_PER_S_BATCH32 = 10992.0


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Timing:
    """Single-sample latencies (s) and batched throughput of one back end."""

    label: str
    latencies: np.ndarray
    batch_samples_per_s: float

    @property
    def mean_ms(self) -> float:
        return float(self.latencies.mean() * 1e3)

    def percentile_ms(self, q: float) -> float:
        return float(np.percentile(self.latencies, q) * 1e3)

    @property
    def hz(self) -> float:
        return 1.0 / float(self.latencies.mean())


@dataclass
class Networks:
    """The ONNX files to time and, where the architecture is known, the same network in Flax."""

    fp32: Path
    int8: Path
    description: str
    flax_model: object | None      # na_training.model.NeuralActuator
    notes: list[str]


# ---------------------------------------------------------------- building / exporting the network
def synthetic_description(config, mean: np.ndarray, std: np.ndarray, n_parameters: int) -> dict:
    """A run description (as ``na_training.train.describe_run`` writes) for an untrained network."""
    from na_description import load_spec
    from na_estimator.features import FeatureStats
    from na_training.train import describe_run

    return describe_run(config, FeatureStats(np.asarray(mean, float), np.asarray(std, float)), load_spec(),
                        n_parameters, step=0)


def export_paper_network(out_dir: Path, *, config_path: str | Path = PAPER_CONFIG, seed: int = 0,
                         stats: tuple[np.ndarray, np.ndarray] | None = None, int8: bool = True):
    """Paper-sized NeuralActuator with random weights exported to ``out_dir/model.onnx`` (+ ``.int8.onnx``).

    ``stats`` (feature mean, std) sets the in-graph normalisation; default: zero mean, the per-unit
    std floors of the feature contract. Returns the Flax model and the export report."""
    from dataclasses import replace

    from na_estimator.features import NUM_FEATURES, std_floors
    from na_training.config import load_config
    from na_training.export import export_model
    from na_training.model import build_model, parameter_count

    config = replace(load_config(config_path), dataset_id="benchmark-random-weights", seed=seed)
    mean, std = stats if stats is not None else (np.zeros(NUM_FEATURES), std_floors())
    model = build_model(config.model, seed=seed)
    model.set_feature_stats(mean, std)
    description = synthetic_description(config, mean, std, parameter_count(model))
    report = export_model(model, description, out_dir / "model.onnx", int8=int8, seed=seed)
    return model, report


def networks_from_defaults(out_dir: Path, config_path: Path, seed: int) -> Networks:
    from na_training.model import parameter_count

    log(f"building the paper-sized network ({config_path.name}, random weights) and exporting fp32 + int8 ONNX ...")
    start = time.perf_counter()
    model, report = export_paper_network(out_dir, config_path=config_path, seed=seed)
    log(f"  exported in {time.perf_counter() - start:.1f} s")
    return Networks(report.path, report.int8_path,
                    f"paper-sized NeuralActuator ({config_path.name}), {parameter_count(model):,} parameters, "
                    f"random weights (seed {seed})", model, report.lines())


def networks_from_run(run_dir: Path, out_dir: Path) -> Networks:
    from na_training.export import export_model
    from na_training.model import parameter_count
    from na_training.train import load_trained_model

    log(f"loading the training run {run_dir} and exporting fp32 + int8 ONNX ...")
    model, description = load_trained_model(run_dir)
    report = export_model(model, description, out_dir / "model.onnx", int8=True)
    return Networks(report.path, report.int8_path,
                    f"run {run_dir} (step {description['checkpoint_step']}), {parameter_count(model):,} parameters",
                    model, report.lines())


def networks_from_onnx(path: Path, out_dir: Path, seed: int) -> Networks:
    """An exported model; its int8 variant is quantised here, and the Flax network of the same
    architecture (from the ``training_config`` metadata, random weights: latency does not depend on
    the weight values) stands in for the JAX row."""
    from na_training.config import config_from_dict
    from na_training.export import quantize_int8, read_metadata
    from na_training.model import build_model

    if not path.is_file():
        raise FileNotFoundError(f"model file not found: {path}")
    log(f"quantising {path} to dynamic int8 ...")
    int8 = quantize_int8(path, out_dir / (path.stem + ".int8.onnx"))
    metadata = read_metadata(path)
    notes: list[str] = []
    flax_model = None
    if metadata.get("training_config"):
        config = config_from_dict(json.loads(metadata["training_config"]), f"{path} training_config")
        flax_model = build_model(config.model, seed=seed)
        flax_model.set_feature_stats(np.asarray(json.loads(metadata["feature_mean"])),
                                     np.asarray(json.loads(metadata["feature_std"])))
        notes.append("JAX row: the same architecture rebuilt from the model's training_config, random weights")
    else:
        notes.append("JAX row skipped: the model has no training_config metadata to rebuild its architecture from")
    return Networks(path, int8, f"{path} ({metadata.get('parameter_count', '?')} parameters)", flax_model, notes)


# ---------------------------------------------------------------- timing
def sample_windows(contract, std: np.ndarray, count: int, seed: int) -> np.ndarray:
    """``count`` distinct plausible windows around the training mean (cycled, so no cache effects)."""
    rng = np.random.default_rng(seed)
    shape = (count, contract.history_length, len(contract.feature_names))
    return (contract.feature_mean + std * rng.standard_normal(shape)).astype(np.float32)


def time_single(call: Callable[[np.ndarray], object], windows: np.ndarray, samples: int, warmup: int,
                label: str) -> np.ndarray:
    for k in range(warmup):
        call(windows[k % len(windows)])
    latencies = np.empty(samples)
    report_every = max(1, samples // 4)
    for k in range(samples):
        window = windows[k % len(windows)]
        start = time.perf_counter()
        call(window)
        latencies[k] = time.perf_counter() - start
        if (k + 1) % report_every == 0:
            log(f"  {label}: {k + 1}/{samples} samples, mean so far {latencies[: k + 1].mean() * 1e3:.3f} ms")
    return latencies


def time_batches(call: Callable[[np.ndarray], object], batches: np.ndarray, rounds: int, warmup: int) -> float:
    """Samples/s over ``rounds`` calls, each on one ``[batch, L, F]`` array."""
    for k in range(warmup):
        call(batches[k % len(batches)])
    start = time.perf_counter()
    for k in range(rounds):
        call(batches[k % len(batches)])
    return rounds * batches.shape[1] / (time.perf_counter() - start)


def time_onnx(path: Path, label: str, windows: np.ndarray, batches: np.ndarray, args) -> Timing:
    from na_estimator.onnx_model import OnnxActuatorModel

    model = OnnxActuatorModel(path, providers=CPU_ONLY, intra_op_threads=args.threads)
    log(f"timing {label} ({model.provider.describe()}) ...")
    latencies = time_single(model.infer, windows, args.samples, args.warmup, label)
    throughput = time_batches(model.infer_batch, batches, args.batch_rounds, max(1, args.warmup // 20))
    return Timing(label, latencies, throughput)


def time_jax(flax_model, windows: np.ndarray, batches: np.ndarray, args) -> Timing:
    import jax

    from na_training.model import jit_forward

    forward = jit_forward(flax_model)

    def call(features: np.ndarray):
        return jax.block_until_ready(forward(features))

    log(f"timing JAX jit (devices {jax.devices()}) ...")
    latencies = time_single(lambda window: call(window[None]), windows, args.samples, args.warmup, "JAX jit fp32")
    throughput = time_batches(call, batches, args.batch_rounds, max(1, args.warmup // 20))
    return Timing("JAX jit fp32", latencies, throughput)


# ---------------------------------------------------------------- report
def machine_line() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return f"{cpu}, {os.cpu_count()} logical CPUs, load average {load} (shared machine: figures are indicative)"


def format_table(timings: list[Timing], batch_size: int, jax_timing: Timing | None) -> str:
    header = (f"{'back end':<30}{'mean ms':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'Hz (b=1)':>11}"
              f"{f'samples/s (b={batch_size})':>22}{'mean / JAX':>12}")
    rows = [header, "-" * len(header)]
    for t in timings:
        ratio = f"{t.mean_ms / jax_timing.mean_ms:.2f}x" if jax_timing is not None else "n/a"
        rows.append(f"{t.label + ' (this CPU)':<30}{t.mean_ms:>9.3f}{t.percentile_ms(50):>9.3f}"
                    f"{t.percentile_ms(95):>9.3f}{t.percentile_ms(99):>9.3f}{t.hz:>11,.0f}"
                    f"{t.batch_samples_per_s:>22,.0f}{ratio:>12}")
    rows.append(f"{'paper Table XII (JAX, RTX 5080)':<30}{PAPER_MEAN_MS:>9.2f}{'-':>9}{PAPER_P95_MS:>9.2f}{'-':>9}"
                f"{PAPER_HZ_BATCH1:>11,.0f}{PAPER_SAMPLES_PER_S_BATCH32:>22,.0f}{'':>12}")
    return "\n".join(rows)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="NeuralActuator model latency: ONNX Runtime fp32/int8 (the estimator's path) vs jax.jit, one "
                    "sample on one thread, plus batch-32 throughput, printed beside the paper's Table XII.",
        epilog="Default network: the paper-sized model (training config 'paper') with random weights; latency "
               "does not depend on the weight values.")
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--model", type=Path, help="an exported ONNX model (its int8 variant is quantised here)")
    source.add_argument("--run", type=Path, help="a training run directory (exported here, fp32 and int8)")
    parser.add_argument("--config", default=PAPER_CONFIG,
                        help=f"training config whose model section sizes the random-weight network (default: "
                             f"{PAPER_CONFIG})")
    parser.add_argument("--samples", type=int, default=5000,
                        help="timed single-sample calls per back end (default 5000)")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls before timing (default 200)")
    parser.add_argument("--batch-size", type=int, default=32, help="batch size of the throughput test (default 32)")
    parser.add_argument("--batch-rounds", type=int, default=300, help="timed batched calls (default 300)")
    parser.add_argument("--threads", type=int, default=1,
                        help="ONNX Runtime intra-op threads (default 1; with 1, XLA runs single-threaded too)")
    parser.add_argument("--no-jax", action="store_true", help="skip the jax.jit row")
    parser.add_argument("--keep", type=Path, help="write the exported ONNX files here instead of a temporary directory")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights and input windows")
    return parser


def run(args: argparse.Namespace) -> str:
    from na_estimator.onnx_model import OnnxActuatorModel

    with tempfile.TemporaryDirectory(prefix="na_bench_model_") as tmp:
        out_dir = args.keep or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        if args.run:
            networks = networks_from_run(args.run, out_dir)
        elif args.model:
            networks = networks_from_onnx(args.model, out_dir, args.seed)
        else:
            networks = networks_from_defaults(out_dir, args.config, args.seed)
        probe = OnnxActuatorModel(networks.fp32, providers=CPU_ONLY, warmup_runs=0)
        std = np.asarray(json.loads(probe.metadata.get("feature_std", "[]"))
                         or np.ones(len(probe.contract.feature_names)))
        windows = sample_windows(probe.contract, std, 512, args.seed)
        batches = sample_windows(probe.contract, std, 8 * args.batch_size, args.seed + 1).reshape(
            8, args.batch_size, *windows.shape[1:])
        timings = [time_onnx(networks.fp32, "ORT fp32", windows, batches, args),
                   time_onnx(networks.int8, "ORT int8 (dynamic)", windows, batches, args)]
        jax_timing = None
        if networks.flax_model is not None and not args.no_jax:
            jax_timing = time_jax(networks.flax_model, windows, batches, args)
            timings.append(jax_timing)
        lines = [
            f"Model latency: one sample, {args.threads} thread(s), {args.samples:,} timed samples after "
            f"{args.warmup} warm-up calls; throughput over {args.batch_rounds} batches of {args.batch_size}",
            f"network: {networks.description}",
            f"machine: {machine_line()}",
            f"XLA_FLAGS={os.environ.get('XLA_FLAGS', '')!r}",
            *[f"note: {n}" for n in networks.notes],
            "",
            format_table(timings, args.batch_size, jax_timing),
        ]
        return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # onnxruntime.quantization logs a pre-processing hint on the root logger for every model: not our business.
    logging.getLogger().setLevel(logging.ERROR)
    if args.threads == 1:
        os.environ.setdefault("XLA_FLAGS", SINGLE_THREAD_XLA_FLAGS)
    for name in ("samples", "batch_size", "batch_rounds", "threads"):
        if getattr(args, name) < 1:
            print(f"bench_model_latency: error: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    if args.warmup < 0:
        print("bench_model_latency: error: --warmup must be >= 0", file=sys.stderr)
        return 2
    try:
        print(run(args))
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        print(f"bench_model_latency: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
