"""Batch-1 inference time against the pause before each call: why one inference at 60 Hz takes longer than
back to back.

The estimator infers once per state, 16.7 ms apart at the paper's 60 Hz control rate. Each call here runs one
window through ``OnnxActuatorModel.infer`` (the estimator's own path) after a pause of a given length, in which
the thread either spins (it keeps its CPU, so the vCPU never idles) or sleeps. If the time grows with the pause
while spinning too, the model's weights and code were pushed out of the caches by other work on the same
caches in the meantime, not lost because the CPU went idle.

    python src/na_estimator/benchmarks/bench_inference_gap.py --model PKG/model.onnx
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from na_common.machine import machine_line

DEFAULT_GAPS_MS = (0.0, 0.5, 1.0, 2.0, 5.0, 16.7)     # 16.7 ms: one period of the 60 Hz control rate
SECONDS_PER_CELL = 3.0


def pause(seconds: float, spin: bool) -> None:
    end = time.perf_counter() + seconds
    if not spin:
        time.sleep(seconds)
    while time.perf_counter() < end:
        pass


def time_after_gap(infer, window: np.ndarray, gap_s: float, spin: bool, calls: int) -> np.ndarray:
    times = np.empty(calls)
    for k in range(calls):
        pause(gap_s, spin)
        began = time.perf_counter()
        infer(window)
        times[k] = time.perf_counter() - began
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, required=True, help="an exported model file (one variant)")
    parser.add_argument("--gaps-ms", type=float, nargs="+", default=list(DEFAULT_GAPS_MS),
                        help="pauses before each call, ms (default: 0 0.5 1 2 5 16.7)")
    parser.add_argument("--rounds", type=int, default=2, help="passes over every gap and mode (default 2)")
    args = parser.parse_args(argv)
    if args.rounds < 1 or any(g < 0 for g in args.gaps_ms):
        print("bench_inference_gap: error: --rounds must be at least 1 and every gap >= 0", file=sys.stderr)
        return 2
    from na_estimator.onnx_model import ModelLoadError, OnnxActuatorModel

    try:
        model = OnnxActuatorModel(args.model, providers=["CPUExecutionProvider"], intra_op_threads=1)
    except ModelLoadError as exc:
        print(f"bench_inference_gap: error: {exc}", file=sys.stderr)
        return 2
    shape = (model.contract.history_length, len(model.contract.feature_names))
    window = np.broadcast_to(model.contract.feature_mean, shape).astype(np.float32)
    times: dict[tuple[float, bool], list[np.ndarray]] = {}
    for _ in range(args.rounds):
        for gap_ms in args.gaps_ms:
            for spin in (True, False):
                calls = max(20, min(400, int(SECONDS_PER_CELL / (gap_ms * 1e-3 + 5e-4))))
                times.setdefault((gap_ms, spin), []).append(
                    time_after_gap(model.infer, window, gap_ms * 1e-3, spin, calls))
    print(f"machine: {machine_line()}")
    print(f"model: {args.model} (inference variant {model.variant}); batch 1 on one thread; {args.rounds} "
          f"round(s), about {SECONDS_PER_CELL:g} s of calls per gap, mode and round")
    print(f"{'pause before each call':>24}  {'spinning p50 / p99 ms':>22}  {'sleeping p50 / p99 ms':>22}")
    for gap_ms in args.gaps_ms:
        cells = []
        for spin in (True, False):
            values = np.concatenate(times[gap_ms, spin]) * 1e3
            cells.append(f"{np.median(values):.3f} / {np.percentile(values, 99):.3f}")
        print(f"{gap_ms:>21g} ms  {cells[0]:>22}  {cells[1]:>22}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
