"""``na-sim``: the simulated rig's command line (``generate`` episodes offline, run the live ``rig``)."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import os
import sys
from pathlib import Path

from na_common.cli_types import positive_float, positive_int
from na_sim.tasks import PAYLOAD_TASKS

GENERATE_EPILOG = """\
task ids:
  circle_cw circle_ccw            tool-space circles (clockwise / counter-clockwise from above)
  sweep_joint1 .. sweep_joint4    one joint over ~90 %% of its feasible range
  sweep_gripper                   gripper over ~90 %% of its range
  lean_extend                     lean back and extend forward
  pick_place go_up_stay           with --payloads (0 = empty gripper)
  push_px push_nx push_py         press the F/T fixture along +X/-X/+Y/-Y/+Z/-Z (5-20 N)
  push_ny push_pz push_nz
  nopush_px .. nopush_nz          same commanded motion as push_* (same seed), fixture absent
  pick_place_restricted           the rig's restricted joint (rubber bands; OpenManipulator-X Joint 3,
                                  SO-101 elbow_flex), payloads 0 and 200 g
groups: all, free (circles, sweeps, lean_extend), payload (pick_place, go_up_stay), push, nopush,
        contact (push + nopush), condition (pick_place, pick_place_restricted)

payloads (grams) apply to %(payload_tasks)s; default: the robot's task profile, the paper's sets
(OpenManipulator-X, Tab. A15: pick_place / go_up_stay 0 100 200 300 400 500, pick_place_restricted 0 200;
SO-101, Tab. A16: pick_place / go_up_stay 0 200 300 400 500).
Episode i of a task uses seed SEED+i, so push_* and nopush_* runs pair up.
robots: omx_x (OpenManipulator-X, default) and so101 (SO-101) run every task; the numbers behind them
(poses, ranges, press depths, payload sets) are the robot's task profile, na_sim/config/tasks_<robot>.yaml;
a robot whose profile lists fewer tasks gets only those (and groups hold only those).
panda (Franka Emika Panda) has no servo bus: it is simulated with its own 1 kHz joint impedance controller
(na_sim/config/torque_arm_panda.yaml) and runs go_up_stay and pick_place with 200-600 g; its bags have no
leader arm and no F/T stream (convert them with --robot panda).

examples:
  na-sim generate --tasks all --episodes 10 --seed 0 --out data/episodes
  na-sim generate --tasks push_px nopush_px --episodes 2 --out /tmp/eps --quick
  na-sim generate --tasks pick_place --payloads 250 --episodes 3 --out /tmp/eps
  na-sim generate --robot so101 --tasks payload free --episodes 2 --out /tmp/so101_eps
  na-sim generate --robot panda --tasks payload --episodes 2 --out /tmp/panda_eps
"""


def _payloads(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.replace(",", " ").split()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"payloads must be numbers in grams, got '{text}'") from None
    if not values or any(not v >= 0 for v in values):
        raise argparse.ArgumentTypeError(f"payloads must be masses >= 0 g, got '{text}'")
    return values


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="na-sim", description="NeuralActuator simulated rig: generate episode bags offline or run the live rig.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    gen = sub.add_parser(
        "generate", formatter_class=argparse.RawDescriptionHelpFormatter,
        help="play scripted operator tasks on the simulated rig and write episode bags (no ROS needed)",
        description="Play scripted operator tasks (paper Table A15) on the simulated rig, as fast as the CPU "
                    "allows, and write one rosbag2 MCAP episode per run into OUT/episode_NNNNNN/ with the "
                    "topics and metadata the live recorder writes (docs/INTERFACES.md).",
        epilog=GENERATE_EPILOG % {"payload_tasks": ", ".join(PAYLOAD_TASKS)})
    gen.add_argument("--tasks", nargs="+", required=True, metavar="TASK",
                     help="task ids or groups, space or comma separated (see below)")
    gen.add_argument("--episodes", type=positive_int, default=1, metavar="N",
                     help="episodes per task (and per payload for payload tasks); default 1")
    gen.add_argument("--seed", type=int, default=0,
                     help="run seed (>= 0): the same seed gives the same bags; runs at other seeds share no "
                          "commanded motion, so one can hold out another (default 0)")
    gen.add_argument("--out", type=Path, required=True, metavar="DIR",
                     help="output directory; new episodes get the next free episode_NNNNNN numbers")
    gen.add_argument("--payloads", type=_payloads, metavar="GRAMS",
                     help="payload masses for payload tasks, e.g. '100,250,500' (any mass; 0 = empty)")
    gen.add_argument("--quick", action="store_true",
                     help="shorter episodes (fewer repetitions, shorter holds) for smoke tests")
    gen.add_argument("--max-seconds", type=positive_float, metavar="S",
                     help="cut every episode after S simulated seconds")
    gen.add_argument("--ft-always", action="store_true",
                     help="write /ft/wrench in every episode (default: only force_source=ft_sensor tasks)")
    gen.add_argument("--robot", metavar="ROBOT",
                     help="robot of the simulated rig: omx_x / open_manipulator_x (default), so101 or panda; selects "
                          "its rig config (sim_rig, sim_rig_so101; panda: torque_arm_panda) and task profile")
    gen.add_argument("--rig-config", type=Path, metavar="YAML",
                     help="rig configuration: a YAML file or a name shipped in na_sim/config/ (default: the robot's, "
                          "sim_rig or sim_rig_so101); its robot: key must match --robot")
    gen.add_argument("--no-progress", action="store_true", help="no progress bar (logs only)")
    gen.add_argument("--jobs", type=positive_int, default=os.cpu_count() or 1,
                     help="episodes simulated in parallel worker processes (default: CPU count); "
                          "the bags do not depend on it")
    gen.set_defaults(handler=_generate)

    rig = sub.add_parser("rig", help="run the live simulated rig (servo emulators on ptys, F/T emulator)",
                         description="Run the live simulated rig: physics in real time, DYNAMIXEL Protocol 2.0 "
                                     "servo emulators on pseudo-terminals and the F/T sensor emulator.")
    live = _live_rig_module()
    if live is not None:
        live.add_rig_arguments(rig)
    rig.set_defaults(handler=_rig)
    return parser


def _live_rig_module():
    """``na_sim.live_rig`` (the live rig's entry point), or None when this build lacks it."""
    if importlib.util.find_spec("na_sim.live_rig") is None:
        return None
    return importlib.import_module("na_sim.live_rig")


def _generate(args: argparse.Namespace) -> int:
    from na_sim.generate import GenerateError, GenerateOptions, generate
    from na_sim.rig_config import RigConfigError
    from na_sim.tasks import TaskError

    options = GenerateOptions(tasks=args.tasks, episodes=args.episodes, seed=args.seed, out=args.out,
                              payloads=args.payloads, quick=args.quick, max_seconds=args.max_seconds,
                              ft_always=args.ft_always, rig_config=args.rig_config, robot=args.robot)
    try:
        generate(options, progress=not args.no_progress, jobs=args.jobs)
    except (GenerateError, TaskError, RigConfigError) as err:
        print(f"na-sim generate: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("na-sim generate: interrupted; finished episodes are kept, the last one is marked incomplete",
              file=sys.stderr)
        return 130
    return 0


def _rig(args: argparse.Namespace) -> int:
    live = _live_rig_module()
    if live is None:
        print("na-sim rig: the live rig (module na_sim.live_rig) is not part of this build; "
              "use 'na-sim generate' for offline episodes", file=sys.stderr)
        return 2
    return int(live.run_live_rig(args) or 0)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
