"""``na-train export``: a trained run to ONNX (the model contract in its metadata, checked against JAX);
``na-train adapt --export`` runs the same command."""

from __future__ import annotations

import argparse
import sys
from typing import Any

import numpy as np


def configure_export_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of ``export`` on ``parser``."""
    parser.add_argument("run", metavar="RUN", help="run directory written by 'na-train fit'")
    parser.add_argument("--out", required=True, help="output .onnx path (the package's main file)")
    parser.add_argument("--variants", default="fp32,int8-dynamic,int8-static",
                        help="inference variants to try, from fp32,int8-dynamic,int8-static,int8-mixed (default "
                             "fp32,int8-dynamic,int8-static; int8-mixed adds a per-layer search; 'fp32' alone "
                             "writes fp32 only)")
    parser.add_argument("--keep-variants", "--int8", action="store_true",
                        help="also write the variants that failed the checks beside OUT (not in the package)")
    parser.add_argument("--nad", help="NAD dataset for real check windows")
    parser.add_argument("--split", default="test", choices=("train", "val", "test"), help="split for --nad")
    parser.add_argument("--check-windows", type=int, default=64, help="real windows per episode (default 64)")
    parser.add_argument("--step", type=int, help="checkpoint step (default: latest)")
    parser.add_argument("--raw-weights", action="store_true", help="export the raw instead of the EMA weights")
    parser.set_defaults(handler=run_export)
    return parser


def add_export_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``export`` on ``na-train``'s subparsers."""
    description = ("Export the EMA weights of a run directory to ONNX with the normalisation inside the graph, check "
                   "ONNX Runtime against JAX (max |diff| <= 1e-4) on random and, with --nad, real windows. With --nad, "
                   "int8 variants are checked too; every variant within 0.01 N of JAX is kept as one package: the "
                   "fastest on this machine as OUT, the others beside it (OUT_STEM.<variant>.onnx, named in OUT's "
                   "metadata), and the estimator picks among them on the machine it runs on.")
    parser = subparsers.add_parser("export", help="export a trained run to ONNX (model contract, metadata)",
                                   description=description)
    return configure_export_parser(parser)


def run_export(args: argparse.Namespace) -> int:
    from na_training.export import ExportError, export_model, windows_from_nad  # lazy: onnx, jax, flax
    from na_training.train import load_trained_model  # lazy: jax, mujoco, orbax

    try:
        model, description = load_trained_model(args.run, step=args.step, use_ema=not args.raw_weights)
        windows = calibration = None
        if args.nad:
            pad, length = np.asarray(description["feature_stats"]["mean"]), model.config.history_length
            windows, _ = windows_from_nad(args.nad, args.split, args.check_windows, pad, length)
            calibration, _ = windows_from_nad(args.nad, "train", args.check_windows, pad, length, seed=1)
        report = export_model(model, description, args.out, windows, calibration_windows=calibration,
                              variants=args.variants.split(","), keep_variants=args.keep_variants)
    except (ExportError, FileNotFoundError, ValueError) as err:
        print(f"na-train export: error: {err}", file=sys.stderr)
        return 2
    for line in report.lines():
        print(line)
    return 0
