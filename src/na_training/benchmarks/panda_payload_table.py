"""The Panda payload benchmark in the layout of the NeuralActuator paper's Tab. IX, from the project's own outputs.

Reads the test split of a Panda NAD, ``eval.json`` of ``na-train eval --horizons 100 500`` and ``comparison.json`` of
``na-train compare`` on the same NAD, and prints one row per task and payload:

- NeuralActuator F@100 / F@500: force MAE (N, the three components against [0, 0, -m g]) over the first 100 / 500
  frames of each test episode during the MJX rollout from its start (``eval.json``, as the paper's columns);
- NeuralActuator on recorded telemetry, the best classical observer, and the MLP over whole test episodes
  (``comparison.json``: the estimator's causal streaming path and the baselines on commanded torque);
- two trivial predictors computed here over the same frames: always zero, and the training split's mean force;
- the paper's Tab. IX values (a real Panda, future-state-conditioned commands; ours are causal).

    python src/na_training/benchmarks/panda_payload_table.py --nad NAD --eval RUN/eval_test/eval.json \\
        --compare COMPARE/comparison.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from na_training.baselines.metrics import force_mae, group_key
from na_training.nad import load_nad

# The NeuralActuator paper, Tab. IX (real Panda, 200-600 g lift and hold): F@100 and F@500 per payload (N).
PAPER_F100 = {200: 0.42, 300: 0.35, 400: 0.36, 500: 0.27, 600: 0.30}
PAPER_F500 = {200: 0.31, 300: 0.28, 400: 0.27, 500: 0.26, 600: 0.28}
CLASSICAL = ("ID-Linear", "ID-Friction", "GMO")


def trivial_rows(nad: Path, horizons: tuple[int, ...]) -> dict[str, dict[str, float]]:
    """Per group: always-zero and training-mean MAE over the first H frames (``"zero@H"``, ``"mean@H"``) and over
    whole episodes (``"zero"``, ``"mean"``)."""
    train = [e for e in load_nad(nad, "train") if e.has_force_label]
    labelled = np.concatenate([e.force[e.force_mask.all(axis=-1)] for e in train])
    mean = labelled.mean(axis=0)
    rows: dict[str, dict[str, list]] = {}
    for episode in load_nad(nad, "test"):
        if not episode.has_force_label:
            continue
        entry = rows.setdefault(group_key(episode.task, episode.payload_grams), {})
        for horizon in (*horizons, None):
            frames = len(episode) if horizon is None else min(horizon, len(episode))
            suffix = "" if horizon is None else f"@{horizon}"
            label, mask = episode.force[:frames], episode.force_mask[:frames]
            entry.setdefault(f"zero{suffix}", []).append((np.zeros_like(label), label, mask))
            entry.setdefault(f"mean{suffix}", []).append((np.broadcast_to(mean, label.shape), label, mask))
    return {group: {key: force_mae(*(np.concatenate(parts) for parts in zip(*items, strict=True)))
                    for key, items in entry.items()} for group, entry in rows.items()}


def table(nad: Path, evaluation: dict, comparison: dict) -> str:
    horizons = (100, 500)
    trivial = trivial_rows(nad, horizons)
    force = comparison["force_mae"]
    lines = ["| task / payload | NA F@100 | NA F@500 | zero F@100 | zero F@500 | NA recorded | best classical | MLP "
             "| zero | train mean | paper F@100 | paper F@500 |", "|" + "---|" * 12]
    for group in sorted(trivial):
        grams = int(group.split("/")[1].rstrip("g"))
        rollout = [evaluation["rollout"][str(h)]["rows"].get(group, {}).get("force", float("nan")) for h in horizons]
        best = min(CLASSICAL, key=lambda m: force[m][group])
        cells = [group, *(f"{v:.3f}" for v in rollout), *(f"{trivial[group][f'zero@{h}']:.3f}" for h in horizons),
                 f"{force['NeuralActuator'][group]:.3f}", f"{force[best][group]:.3f} ({best})",
                 f"{force['MLP (recorded windows)'][group]:.3f}" if "MLP (recorded windows)" in force else "–",
                 f"{trivial[group]['zero']:.3f}", f"{trivial[group]['mean']:.3f}",
                 f"{PAPER_F100[grams]:.2f}", f"{PAPER_F500[grams]:.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nad", type=Path, required=True, help="the Panda NAD (its train and test splits)")
    parser.add_argument("--eval", type=Path, required=True, help="eval.json of na-train eval --horizons 100 500")
    parser.add_argument("--compare", type=Path, required=True, help="comparison.json of na-train compare")
    args = parser.parse_args(argv)
    for path in (args.eval, args.compare):
        if not path.is_file():
            print(f"panda_payload_table: error: {path} does not exist", file=sys.stderr)
            return 2
    print(table(args.nad, json.loads(args.eval.read_text()), json.loads(args.compare.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
