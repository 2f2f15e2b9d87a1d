#!/usr/bin/env python3
"""Figures of the simulated rig's hidden physics: datasheet checks of the XM430 model, how wrong
a linear current->torque map is (R² per joint), payload and Joint 3 restriction current deltas,
and the real-time factor of ``Rig.step``.

    python src/na_sim/benchmarks/physics_figures.py            # all figures, a few seconds
    python src/na_sim/benchmarks/physics_figures.py --seconds 20 --seed 3
"""

from __future__ import annotations

import argparse
import math
import time

import numpy as np

from na_description import xm430
from na_sim.rig import Rig
from na_sim.servo_banks import no_load_speed, stall_torque
from na_sim.servo_params import ServoParams

FRAME = 0.017


def follower_current(rig: Rig) -> np.ndarray:
    return xm430.current_units_to_amp([r.get("present_current") for r in rig.follower_registers])


def sinusoid_goals(pose0: np.ndarray, seconds: float) -> np.ndarray:
    t = np.arange(int(seconds / FRAME))[:, None] * FRAME
    return pose0 + np.array([0.6, 0.5, 0.5, 0.6, 0.5]) * np.sin(2 * np.pi * np.array([0.35, 0.45, 0.55, 0.65, 0.4]) * t)


def make_rig(seed: int, pose=None) -> Rig:
    rig = Rig(seed=seed)
    if pose is not None:
        rig.reset(seed, pose=pose)
    rig.configure_follower()
    rig.advance(0.3)
    return rig


def track(rig: Rig, goals: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    currents, torques = [], []
    for goal in goals:
        rig.set_follower_goal(goal)
        torques.append(rig.step(FRAME).servo_torque)
        currents.append(follower_current(rig))
    return np.array(currents), np.array(torques)


def datasheet_figures() -> None:
    params = ServoParams.from_yaml(n_servos=1, seed=None)
    for volts, ref_torque, ref_current in ((12.0, 4.1, 2.3), (11.1, 3.8, 2.1)):
        torque, current = stall_torque(params, volts)
        print(f"stall @ {volts:4.1f} V: {torque[0]:.3f} N·m, {current[0]:.3f} A   "
              f"(datasheet {ref_torque} N·m, {ref_current} A)")
    speed, current = no_load_speed(params, 12.0)
    print(f"no-load @ 12 V: {speed[0] * 60 / (2 * math.pi):.2f} rpm, {current[0]:.3f} A   (datasheet 46 rpm)")


def linearity_figures(seed: int, seconds: float) -> None:
    rig = make_rig(seed)
    currents, torques = track(rig, sinusoid_goals(np.array(rig.config.initial_pose), seconds))
    print(f"linear fit tau = Kt*i + b over {seconds:.0f} s of sinusoidal tracking ({len(currents)} frames):")
    for j, name in enumerate(rig.spec.joint_names):
        design = np.c_[currents[:, j], np.ones(len(currents))]
        coef, *_ = np.linalg.lstsq(design, torques[:, j], rcond=None)
        residual = torques[:, j] - design @ coef
        r2 = 1.0 - residual.var() / torques[:, j].var()
        print(f"  {name:8s} R² = {r2:5.3f}   Kt_fit = {coef[0]:6.3f} N·m/A   residual RMS = "
              f"{residual.std():.3f} N·m")


def hold(rig: Rig) -> np.ndarray:
    rig.advance(1.0)
    return np.mean([(rig.step(FRAME), follower_current(rig))[1] for _ in range(40)], axis=0)


def load_figures(seed: int, seconds: float) -> None:
    rig = make_rig(seed)
    empty = hold(rig)
    for grams in (100, 300, 500):
        rig.set_payload(grams / 1000)
        loaded = hold(rig)
        print(f"holding current change with {grams} g (joints 1-5, A): {np.round(np.abs(loaded) - np.abs(empty), 3)}")
    goals = sinusoid_goals(np.array([0.0, -0.6, 0.6, 0.3, 0.0]), min(seconds, 6.0))
    mean_abs = {}
    for restricted in (False, True):
        rig = make_rig(seed, pose=goals[0])
        rig.set_joint3_restriction(restricted)
        currents, _ = track(rig, goals)
        mean_abs[restricted] = np.mean(np.abs(currents), axis=0)
    print(f"mean |current| with Joint 3 restricted minus nominal (A): {np.round(mean_abs[True] - mean_abs[False], 3)}")


def speed_figures(seed: int, seconds: float) -> None:
    """CPU time of Rig.step (registers are exchanged once per call, so longer calls are cheaper)."""
    rig = make_rig(seed)
    pose0 = np.array(rig.config.initial_pose)
    for dt in (FRAME, 0.01, 0.005, rig.config.timestep_s):
        calls = int(seconds / dt)
        goals = sinusoid_goals(pose0, calls * dt + FRAME)
        start, cpu_start = time.perf_counter(), time.process_time()
        for k in range(calls):
            goal = goals[int(k * dt / FRAME)]
            rig.set_leader_pose(goal)
            rig.set_follower_goal(goal)
            rig.step(dt)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
        simulated = calls * dt
        print(f"Rig.step({dt * 1e3:5.2f} ms): {cpu / calls * 1e3:.3f} ms CPU per call, "
              f"{simulated / cpu:5.1f}x real time on CPU time, {simulated / wall:5.1f}x on wall time")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0, help="simulated seconds per trajectory (default 6)")
    parser.add_argument("--seed", type=int, default=0, help="rig seed: servo spread and noise (default 0)")
    args = parser.parse_args(argv)
    if args.seconds <= 0:
        parser.error("--seconds must be positive")
    print("== XM430-W350 model vs datasheet")
    datasheet_figures()
    print("== linear current->torque map")
    linearity_figures(args.seed, args.seconds)
    print("== payload and restriction")
    load_figures(args.seed, args.seconds)
    print("== speed")
    speed_figures(args.seed, args.seconds)


if __name__ == "__main__":
    main()
