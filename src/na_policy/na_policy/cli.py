"""``na-policy``: behaviour cloning on the ``press_hold`` task, with and without the estimator's force.

  na-policy demos --model demo_output/model.onnx --out policy_output
  na-policy train --demos policy_output/bags --out policy_output
  na-policy eval  --model demo_output/model.onnx --policies policy_output --trials 20

``demos`` records scripted-expert demonstrations through the real recording path on the simulated rig (the
estimator runs alongside and is recorded); ``train`` fits the two policies (``proprio``: joint positions;
``force``: plus the estimator's force and contact) in JAX/Flax on the CPU; ``eval`` runs seeded trials of each
on the live rig (rig, follower driver, estimator and the policy node as separate processes) and prints the
table: success rate, mean peak force, mean time to success; plus a plot. The estimator model comes from the
demo: ``./scripts/demo.sh`` writes ``demo_output/model.onnx``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from na_policy.features import FEATURE_SETS

DEMO_SEED = 100          # demonstrations use seeds DEMO_SEED, DEMO_SEED + 1, ...
EVAL_SEED = 1000         # trials use seeds from here: fixtures never seen in a demonstration


def _model(path: str) -> Path:
    model = Path(path).expanduser().resolve()
    if not model.is_file():
        raise SystemExit(f"na-policy: estimator model not found: {model} (./scripts/demo.sh writes "
                         "demo_output/model.onnx)")
    return model


def cmd_demos(args: argparse.Namespace) -> int:
    from na_policy.demos import record_demos

    if args.demos < 1:
        raise SystemExit(f"na-policy demos: --demos must be >= 1, got {args.demos}")
    out = Path(args.out).resolve()
    seeds = list(range(args.seed, args.seed + args.demos))
    print(f"[demos] recording {args.demos} press_hold demonstrations (seeds {seeds[0]}-{seeds[-1]}) into "
          f"{out / 'bags'}", flush=True)
    bags = record_demos(_model(args.model), out, seeds, log=lambda line: print(line, flush=True))
    print(f"[demos] done: {bags}")
    return 0


def successful(episodes: list) -> list:
    """Only demonstrations in which the expert met the task (ground truth recorded on the simulated rig); one line
    for each one left out."""
    import numpy as np

    from na_sim.press_task import contact_from_truth, score_press

    kept = []
    for ep in episodes:
        known = np.isfinite(ep.truth_force_z)
        contact = contact_from_truth(ep.truth_force_z[known], ep.payload_grams / 1000.0)
        if known.any() and not score_press(ep.time[known], contact).success:
            print(f"[train] leaving out {ep.name}: the expert did not hold the force band", flush=True)
            continue
        kept.append(ep)
    if not kept:
        raise ValueError("no demonstration met the task")
    return kept


def cmd_train(args: argparse.Namespace) -> int:
    from na_description import load_spec
    from na_policy.dataset import load_demos
    from na_policy.train import TrainConfig, fit

    out = Path(args.out).resolve()
    variants = list(FEATURE_SETS) if args.variant == "both" else [args.variant]
    episodes = successful(load_demos(args.demos, log=lambda line: print(f"[train] {line}", flush=True)))
    names = list(load_spec().joint_names)
    for variant in variants:
        config = TrainConfig(variant=variant, chunk=args.chunk, steps=args.steps, seed=args.seed)
        policy = fit(episodes, config, names, log=lambda line: print(f"[train] {line}", flush=True))
        path = policy.save(out / f"{variant}.npz")
        print(f"[train] wrote {path} (L1 {policy.info['train_l1']:.4f}, {policy.info['seconds']:.0f} s)", flush=True)
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from na_policy.evaluate import evaluate, plot_results, table_lines

    if args.trials < 1:
        raise SystemExit(f"na-policy eval: --trials must be >= 1, got {args.trials}")
    folder = Path(args.policies).resolve()
    variants = list(FEATURE_SETS) if args.variant == "both" else [args.variant]
    policies = {v: folder / f"{v}.npz" for v in variants}
    for variant, path in policies.items():
        if not path.is_file():
            raise SystemExit(f"na-policy eval: no {variant} policy at {path} (na-policy train writes it)")
    out = Path(args.out).resolve() if args.out else folder / "eval"
    seeds = list(range(args.seed, args.seed + args.trials))
    started = time.monotonic()
    voided: list[dict] = []
    results = evaluate(_model(args.model), policies, seeds, out, loss_at=args.estimator_loss_at,
                       log=lambda line: print(line, flush=True), voided=voided)
    for line in table_lines(results):
        print(line)
    plot = plot_results([r for r in results if not r.void], out / "eval.png")
    (out / "results.json").write_text(json.dumps({"trials": [r.as_dict() for r in results], "voided": voided},
                                                 indent=1) + "\n")
    still_void = [r for r in results if r.void]
    print(f"[eval] {len(results)} trials in {time.monotonic() - started:.0f} s; {len(voided)} void attempt(s) run "
          f"again, {len(still_void)} trial(s) without a valid attempt; results {out / 'results.json'}, plot {plot}")
    for v in voided:
        print(f"[eval]   void: {v['variant']} seed {v['seed']} attempt {v['attempt']}: {v['reason']}")
    return 1 if still_void else 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="na-policy", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demos = sub.add_parser("demos", help="record scripted-expert demonstrations on the simulated rig")
    demos.add_argument("--model", required=True, help="estimator ONNX model (demo_output/model.onnx of na-demo)")
    demos.add_argument("--out", default="policy_output", help="output folder, bags in OUT/bags (default %(default)s)")
    demos.add_argument("--demos", type=int, default=40, help="demonstrations, one seed each (default %(default)s)")
    demos.add_argument("--seed", type=int, default=DEMO_SEED, help="first seed (default %(default)s)")
    demos.set_defaults(func=cmd_demos)
    train = sub.add_parser("train", help="fit the proprio and force policies (JAX/Flax, CPU)")
    train.add_argument("--demos", required=True, help="folder of demonstration bags (OUT/bags of na-policy demos)")
    train.add_argument("--out", default="policy_output", help="writes OUT/{proprio,force}.npz (default %(default)s)")
    train.add_argument("--variant", choices=["both", *FEATURE_SETS], default="both",
                       help="proprio: joint positions; force: plus the estimator's force and contact (default both)")
    train.add_argument("--steps", type=int, default=3000, help="optimiser steps per policy (default %(default)s)")
    train.add_argument("--chunk", type=int, default=10, help="actions per prediction (default %(default)s)")
    train.add_argument("--seed", type=int, default=0, help="initialisation and batch order (default 0)")
    train.set_defaults(func=cmd_train)
    ev = sub.add_parser("eval", help="seeded trials of each policy on the live simulated rig: table and plot")
    ev.add_argument("--model", required=True, help="estimator ONNX model (the one the demonstrations used)")
    ev.add_argument("--policies", default="policy_output", help="folder with proprio.npz and force.npz "
                                                               "(default %(default)s)")
    ev.add_argument("--variant", choices=["both", *FEATURE_SETS], default="both", help="policies to run (default both)")
    ev.add_argument("--trials", type=int, default=20, help="trials per policy (default %(default)s)")
    ev.add_argument("--seed", type=int, default=EVAL_SEED, help="first trial seed (default %(default)s)")
    ev.add_argument("--out", default=None, help="results and plot (default POLICIES/eval)")
    ev.add_argument("--estimator-loss-at", type=float, default=None, metavar="S",
                    help="stop the estimator S s into each trial of a force policy (the policy must hold and say why)")
    ev.set_defaults(func=cmd_eval)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("demos", "eval"):
        from na_policy.live import stop_on_signals

        stop_on_signals()
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("na-policy: interrupted", file=sys.stderr)
        return 130
    except (ValueError, RuntimeError) as exc:
        print(f"na-policy {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
