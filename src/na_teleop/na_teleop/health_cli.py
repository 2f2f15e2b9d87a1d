"""na-health: per-episode servo health report (plots + JSON + markdown) from recorded episode bags.

Every bag is read and checked before anything is written, so bad input (not a bag, a bag without arm states, a bag
of another robot than ``--robot``) ends with one line on stderr, exit code 2 and no output folder. Progress lines go
to stderr.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from na_teleop.health_report import HealthInputError, episode_paths, markdown, read_episode, spec_for, summarise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="na-health", description="Servo health report of recorded episode bags: condition over time (when the "
        "bag has estimator output), temperature, effort margins against the datasheet and hardware error bits.")
    parser.add_argument("bag", metavar="BAG_OR_DIR", help="an episode bag folder, or a folder of episode_NNNNNN bags")
    parser.add_argument("--out", default="health_report", help="output folder (default: %(default)s)")
    parser.add_argument("--robot", default=None, help="refuse bags of another robot (spec name, e.g. so101)")
    return parser


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        wanted = spec_for(args.robot)
        paths = episode_paths(args.bag)
        series = []
        for k, path in enumerate(paths, 1):
            series.append(read_episode(path, wanted))
            _progress(f"[{k}/{len(paths)}] read {path.name}: {series[-1].time.size} arm states")
    except HealthInputError as err:
        print(f"na-health: {err}", file=sys.stderr)
        return 2
    from na_teleop.health_plots import plot_episode  # matplotlib only once there is something to plot

    out = Path(args.out)
    summaries = []
    for k, episode in enumerate(series, 1):
        summary = summarise(episode)
        summary["plot"] = str(plot_episode(episode, out / f"{episode.name}.png").relative_to(out))
        (out / f"{episode.name}.json").write_text(json.dumps(summary, indent=2) + "\n")
        summaries.append(summary)
        _progress(f"[{k}/{len(series)}] {episode.name}: {summary['level']}")
    (out / "summary.json").write_text(json.dumps(summaries, indent=2) + "\n")
    (out / "summary.md").write_text(markdown(summaries))
    print(out / "summary.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
