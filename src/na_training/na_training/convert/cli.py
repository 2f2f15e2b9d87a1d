"""``na-train convert``: its options, the run and what it prints."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from na_common.cli_types import positive_float, positive_int
from na_description.spec import robot_option_help
from na_training.convert.config import ConvertError, load_config, robot_config_path
from na_training.convert.records import format_report
from na_training.convert.run import convert, default_jobs
from na_training.labels import LabelError
from na_training.nad import NadError

EPILOG = ("Frames are the follower samples (or a uniform grid when resampling). Defaults "
          "(na_training/config/convert.yaml): command and leader latest sample at most 15 ms old, F/T mean within "
          "+-5 ms, grasp latest state. Labels: F/T force -R(f - tare) in the base frame, payload "
          "[0, 0, -m g] while grasped. Splits 8:1:1 per task instance. Output: DIR/meta/{info.json,"
          "episodes.parquet,report.json}, DIR/data/episode_NNNNNN.parquet. Exit status 2 on a bad bag "
          "or option (nothing is written).")


def configure_parser(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.epilog = EPILOG
    parser.add_argument("bags", nargs="+", metavar="BAG",
                        help="episode bag directories (rosbag2 MCAP or sqlite3), or folders holding them")
    parser.add_argument("--out", required=True, metavar="NAD", help="output dataset directory")
    timing = parser.add_mutually_exclusive_group()
    timing.add_argument("--rate", type=positive_float, metavar="HZ",
                        help="resample to a uniform rate (default: keep the follower samples)")
    timing.add_argument("--frame-period", type=positive_float, metavar="S",
                        help="resample to frames of S seconds (e.g. 0.017, the paper's frame)")
    parser.add_argument("--config", metavar="YAML",
                        help="converter config (fixture, tare, tolerances; a file or the shipped name 'convert'); "
                             "default: the robot's convert_<robot>.yaml where it has one (panda: no leader arm), "
                             "else the built-in defaults")
    parser.add_argument("--robot", help=robot_option_help() + "; a bag of another arm is refused")
    parser.add_argument("--seed", type=int, help="split seed (default: split_seed of the config, 0)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output directory")
    parser.add_argument("--skip-bad", action="store_true",
                        help="skip bags that cannot be converted (listed in the report) instead of stopping")
    parser.add_argument("--keep-void", action="store_true",
                        help="also convert episodes whose metadata marks them void (the recorder saw an arm driver "
                             "trip or a bus go silent); by default they are left out, each named with its reason")
    parser.add_argument("--jobs", type=positive_int, metavar="N",
                        help="bags converted in N worker processes (default: one per CPU, here "
                             f"{default_jobs()}); the dataset does not depend on N")
    parser.add_argument("--quiet", action="store_true",
                        help="no progress (a bar on a terminal, a line every 10 s in a log) and no report table")
    parser.set_defaults(handler=run_convert)
    return parser


def add_convert_parser(subparsers: Any) -> argparse.ArgumentParser:
    """Register ``convert`` on an ``argparse`` subparsers object (used by ``na-train``)."""
    parser = subparsers.add_parser(
        "convert", help="convert episode bags to a NAD v1 dataset",
        description="Convert rosbag2 episode bags into the Neural Actuation Dataset (NAD v1): align the "
                    "streams to the follower samples, make force/contact/condition labels, split 8:1:1 per "
                    "task instance and write Parquet plus meta/ (info, episodes, report).")
    return configure_parser(parser)


def run_convert(args: argparse.Namespace) -> int:
    """Run a parsed ``convert`` command; returns the exit status."""
    try:
        config = load_config(args.config if args.config is not None else robot_config_path(args.robot))
        rate = 1.0 / args.frame_period if args.frame_period else args.rate
        result = convert(args.bags, args.out, config=config, rate_hz=rate, seed=args.seed,
                         overwrite=args.overwrite, skip_bad=args.skip_bad, progress=not args.quiet, jobs=args.jobs,
                         robot=args.robot, keep_void=args.keep_void)
    except (ConvertError, NadError, LabelError) as err:
        print(f"na-train convert: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(format_report(result.report))
    for void in result.void:
        print(f"skipped {void['episode']} ({void['source_bag']}): void: {void['reason']} (--keep-void converts it)")
    print(f"wrote {result.out}: {result.episodes} episodes, {result.frames} frames"
          + (f", {len(result.skipped)} bag(s) skipped" if result.skipped else "")
          + (f", {len(result.void)} void episode(s) left out" if result.void else "")
          + f" ({result.messages:,} messages in {result.seconds:.1f} s)")
    for episode in result.report["incomplete"]:
        how = "recovered after its recorder was killed" if episode["recovered"] else "stopped before it finished"
        print(f"note: episode {episode['episode_index']} ({episode['source_bag']}) is incomplete ({how}); it is "
              "kept, marked complete=false in meta/episodes.parquet", file=sys.stderr)
    for void in result.report["void_kept"]:
        print(f"note: episode {void['episode_index']} ({void['source_bag']}) is void ({void['reason']}); it is kept "
              "(--keep-void), listed under void_kept in meta/report.json", file=sys.stderr)
    return 0


def main_convert(argv: Sequence[str] | None = None) -> int:
    """Standalone entry point: ``python -m na_training.convert BAGS... --out NAD``."""
    parser = configure_parser(argparse.ArgumentParser(
        prog="na-train convert", description="Convert rosbag2 episode bags into a NAD v1 dataset."))
    return run_convert(parser.parse_args(argv))
