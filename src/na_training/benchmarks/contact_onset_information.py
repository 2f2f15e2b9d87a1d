"""How soon after a push's first touch does the servo telemetry leave the range it keeps without a push?

A protective stop can react no faster than the signals it reads. This script asks that of the recorded telemetry
itself, with no model in between: for every push episode of a NAD (tasks ``push_*``, simulator truth force), the
frame of first touch (true |F| reaching ``--touch`` N), and for each signal of the arm joints (the spec's effort
signal, velocity, and tracking error = command - position) its change over ``--within`` ms. The range a signal
keeps without a push is the largest such change in any other nominal episode of the NAD (free motion, payloads,
the no-push passes beside the fixture): a detector that never fires there (0 false stops) must see a larger
change. A push counts as visible when some joint's change, over a span ending inside the first ``--within`` ms
after first touch, exceeds that range. The range is taken on the same recording, so the counts are an upper
bound for a detector tuned elsewhere.

    python src/na_training/benchmarks/contact_onset_information.py --nad NAD [--within 50] [--touch 0.2]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from na_training.episode import Episode
from na_training.nad import SPLITS, load_usable, read_info, robot_spec

PUSH_PREFIX = "push_"


def signals(episode: Episode) -> dict[str, np.ndarray]:
    """The arm joints' signals ``[T, n_arm]`` a stop could read, gaps held."""
    return {episode.spec.effort_signal: episode.arm(episode.spec.effort_signal),
            "velocity": episode.arm("velocity"),
            "tracking": episode.arm("command_position") - episode.arm("position")}


def changes(values: np.ndarray, lag: int) -> np.ndarray:
    """|x[k] - x[k - lag]| ``[T - lag, n]``."""
    return np.abs(values[lag:] - values[:-lag])


def first_touch(episode: Episode, touch_n: float) -> int | None:
    force = episode.truth_force
    if force is None:
        return None
    reached = np.flatnonzero(np.linalg.norm(np.nan_to_num(force), axis=1) >= touch_n)
    return int(reached[0]) if reached.size else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nad", type=Path, required=True, help="a NAD with push episodes and simulator truth force")
    parser.add_argument("--within", type=float, default=50.0, help="ms after first touch (default 50)")
    parser.add_argument("--touch", type=float, default=0.2, help="true |F| of first touch, N (default 0.2)")
    args = parser.parse_args(argv)
    if args.within <= 0 or args.touch <= 0:
        parser.error("--within and --touch must be positive")
    try:
        spec = robot_spec(read_info(args.nad), None)
        episodes = [e for split in SPLITS for e in load_usable(args.nad, split, [])]
    except (OSError, ValueError, KeyError) as err:
        print(f"contact_onset_information: {args.nad}: {err}", file=sys.stderr)
        return 2
    nominal = [e for e in episodes if e.is_nominal]
    pushes = [e for e in nominal if e.task.startswith(PUSH_PREFIX)]
    others = [e for e in nominal if not e.task.startswith(PUSH_PREFIX)]
    if not pushes or not others or pushes[0].truth_force is None:
        print(f"contact_onset_information: {args.nad} needs push episodes with truth force and other nominal "
              "episodes", file=sys.stderr)
        return 2
    period = float(np.median(np.concatenate([np.diff(e.time) for e in episodes])))
    lag = max(1, round(args.within * 1e-3 / period))
    ranges: dict[str, np.ndarray] = {}
    for episode in others:
        for name, values in signals(episode).items():
            largest = np.nanmax(changes(values, lag), axis=0)
            ranges[name] = largest if name not in ranges else np.fmax(ranges[name], largest)
    visible = dict.fromkeys(ranges, 0)
    any_visible, counted, force_then = 0, 0, []
    for episode in pushes:
        onset = first_touch(episode, args.touch)
        if onset is None or onset < lag or onset + lag >= len(episode):
            continue
        counted += 1
        seen = False
        for name, values in signals(episode).items():
            # spans of `lag` frames ending 1 .. lag frames after first touch
            span = changes(values[onset + 1 - lag:onset + lag + 1], lag)
            hit = bool(np.any(span > ranges[name]))
            visible[name] += hit
            seen |= hit
        any_visible += seen
        force_then.append(float(np.linalg.norm(np.nan_to_num(episode.truth_force[onset + lag]))))
    joints = ", ".join(spec.arm_joint_names)
    print(f"{args.nad}: {spec.name}, frame period {1e3 * period:.1f} ms, a span of {lag} frames "
          f"({1e3 * lag * period:.0f} ms); ranges from {len(others)} nominal episodes without a push "
          f"({sum(float(e.time[-1] - e.time[0]) for e in others) / 60:.1f} min)")
    for name, largest in ranges.items():
        print(f"  largest change over the span without a push ({joints}): {name} {np.round(largest, 3).tolist()}")
    median = f"; true |F| one span after first touch: median {np.median(force_then):.1f} N" if force_then else ""
    print(f"{counted} pushes (first touch at |F| >= {args.touch} N){median}")
    found = ", ".join(f"{name} {count}" for name, count in visible.items())
    print(f"pushes whose telemetry leaves that range within one span of first touch: {found}; "
          f"any signal {any_visible} of {counted}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
