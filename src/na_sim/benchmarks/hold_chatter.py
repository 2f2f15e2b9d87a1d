"""Does a held follower joint sit still between physics steps, or chatter?

Holds the follower at its rig config's initial pose and at the arm stretched out horizontally, with no
payload and with 500 g, and after 2 s of settling steps the rig one physics step at a time for ``--seconds``.
Per arm joint it prints the share of steps in which the joint's speed reverses while above 0.05 rad/s
on both sides (a real held joint: 0 %), the RMS speed, and the RMS change of its servo's output torque
from one step to the next. A servo whose torque switches between its driving and back-driven gear
efficiency within one step shows up here first (``src/na_sim/README.md`` discusses the figures).

    python src/na_sim/benchmarks/hold_chatter.py --robot so101
    python src/na_sim/benchmarks/hold_chatter.py --robot omx_x --seconds 2
"""

from __future__ import annotations

import argparse

import numpy as np

from na_description import load_spec
from na_sim.generate import GenerateOptions, load_rig_config
from na_sim.rig import Rig

REVERSAL_SPEED_RAD_S = 0.05     # a reversal counts when the speed exceeds this on both sides of it
SETTLE_S = 2.0


def hold(rig: Rig, pose: np.ndarray, payload_kg: float | None, seconds: float) -> tuple[np.ndarray, ...]:
    """(reversal share, RMS speed rad/s, RMS torque change N·m) per arm joint over ``seconds`` of holding."""
    rig.reset(rig.seed, pose=pose)
    rig.configure_follower()
    rig.set_payload(payload_kg)
    rig.advance(SETTLE_S)
    n_arm = rig.spec.n_arm
    speeds, torques = [], []
    for _ in range(round(seconds / rig.config.timestep_s)):
        truth = rig.step()
        speeds.append(truth.joint_velocity[:n_arm])
        torques.append(truth.servo_torque[:n_arm])
    speed, torque = np.asarray(speeds), np.asarray(torques)
    fast = np.abs(speed) > REVERSAL_SPEED_RAD_S
    reversal = (np.sign(speed[1:]) != np.sign(speed[:-1])) & fast[1:] & fast[:-1]
    return (reversal.mean(axis=0), np.sqrt(np.mean(np.square(speed), axis=0)),
            np.sqrt(np.mean(np.square(np.diff(torque, axis=0)), axis=0)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="so101", help="so101 (default) or omx_x")
    parser.add_argument("--seconds", type=float, default=2.0, help="seconds of holding measured per case (default 2)")
    parser.add_argument("--seed", type=int, default=3, help="rig seed (default 3)")
    args = parser.parse_args(argv)
    config = load_rig_config(GenerateOptions(tasks=["go_up_stay"], out=None, robot=args.robot))
    spec = load_spec(config.robot)
    rig = Rig(config, seed=args.seed, spec=spec)
    stretched = np.zeros(spec.n_motors)
    stretched[spec.n_arm:] = np.asarray(config.initial_pose, dtype=float)[spec.n_arm:]
    joints = spec.arm_joint_names
    print(f"{spec.name}: physics step {rig.config.timestep_s * 1e3:.2f} ms; per arm joint: speed reversals above "
          f"{REVERSAL_SPEED_RAD_S} rad/s (share of steps) / RMS speed (rad/s) / RMS torque change per step (N·m)")
    print(f"{'hold':22} " + "  ".join(f"{name[:20]:>20}" for name in joints))
    for pose_name, pose in (("initial pose", np.asarray(config.initial_pose, dtype=float)), ("stretched", stretched)):
        for payload in (None, 0.5):
            reversal, speed, change = hold(rig, pose, payload, args.seconds)
            label = f"{pose_name}, {0 if payload is None else payload * 1e3:.0f} g"
            cells = [f"{r:4.0%} {s:5.3f} {c:6.3f}" for r, s, c in zip(reversal, speed, change, strict=True)]
            print(f"{label:22} " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
