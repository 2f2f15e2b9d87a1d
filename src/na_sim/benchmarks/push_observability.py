"""How much of a push shows in the servos' effort register, per push axis and arm joint, on the simulated rig.

Plays quick ``push_*`` episodes offline (no ROS, no bus: the follower's goal is the planned pose) and, in every
frame with tool-fixture contact above ``--min-force`` N, compares two joint torques:

* the torque the contact puts on the joint, ``J(contact point)^T f`` summed over the contacts (MuJoCo);
* the torque the effort register implies for a servo driving its load: effort / full scale x the datasheet stall
  torque (the SO-101's Present Load, the OpenManipulator-X's Present Current against its stall current).

For each joint it prints the least-squares slope of the second against the first (1: the register carries the
push; near 0: the push does not show in it) and the share of contact frames in which the joint was back-driven
(its torque against its motion). A geared servo that the load back-drives holds the output mostly by gear
friction: the simulated STS3215 then holds ``1 / (eta_f * eta_b)`` = 6.2 times the torque per amp it drives
with (the XM430: 2.1 times), so the register under-reads the push. ``src/na_sim/README.md`` discusses the figures.

    python src/na_sim/benchmarks/push_observability.py --robot so101
    python src/na_sim/benchmarks/push_observability.py --robot omx_x --episodes 3
"""

from __future__ import annotations

import argparse
from pathlib import Path

import mujoco
import numpy as np

from na_description import load_spec
from na_description.datasheet_margins import datasheet_reference
from na_description.servo_tables import servo_table
from na_sim.generate import GenerateOptions, load_rig_config, start_episode
from na_sim.ik import Kinematics
from na_sim.rig import Rig
from na_sim.tasks import PUSH_AXES, make_task

FRAME_PERIOD_S = 0.01          # the follower goal is updated at the drivers' 100 Hz
BACKDRIVE_SPEED_RAD_S = 0.01   # a joint moving against its torque faster than this counts as back-driven


def contact_torque(model: mujoco.MjModel, data: mujoco.MjData) -> np.ndarray:
    """Joint torques (sim dofs) of every contact force acting on the robot: sum of J(p)^T f."""
    torque = np.zeros(model.nv)
    force6 = np.zeros(6)
    jacobian = np.zeros((3, model.nv))
    for i in range(data.ncon):
        contact = data.contact[i]
        mujoco.mj_contactForce(model, data, i, force6)
        on_geom2 = contact.frame.reshape(3, 3).T @ force6[:3]     # contact frame -> world, force on geom2
        for geom, force in ((contact.geom1, -on_geom2), (contact.geom2, on_geom2)):
            body = model.geom_bodyid[geom]
            if body == 0:
                continue
            mujoco.mj_jac(model, data, jacobian, None, contact.pos, body)
            torque += jacobian.T @ force
    return torque


def measure(rig: Rig, kinematics: Kinematics, task: str, seed: int, min_force: float,
            effort_to_torque: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[float]]:
    """(external torque [N, n_arm], effort-implied torque [N, n_arm], back-driven flags [N, n_arm], |F|) of the
    contact frames of one quick episode."""
    spec, config = rig.spec, rig.config
    episode = make_task(task, seed, 0.0, quick=True, spec=spec, kinematics=kinematics,
                        fixture_half_size=float(config.fixture_half_size[0]), tool_radius=config.tool_collider_radius)
    times = np.arange(0.0, episode.duration, FRAME_PERIOD_S)
    poses = episode.poses(times)
    start_episode(rig, episode, poses[0])
    n_arm = spec.n_arm
    dofs = rig._dof_slice
    direction = rig._a                        # servo side -> sim side
    effort_name = "pwm" if spec.effort_signal == "load" else "current"
    external, implied, backdriven, forces = [], [], [], []
    for pose in poses:
        rig.set_leader_pose(pose)
        rig.set_follower_goal(pose)
        truth = rig.step(FRAME_PERIOD_S)
        force = float(np.linalg.norm(truth.contact_force_base))
        if not truth.contact or force < min_force:
            continue
        applied = rig.data.qfrc_applied[dofs][:n_arm]
        velocity = rig.data.qvel[dofs][:n_arm]
        external.append(-contact_torque(rig.model, rig.data)[dofs][:n_arm])      # what the servos must hold
        effort = np.asarray(getattr(rig.follower, effort_name), dtype=float)
        implied.append((direction * effort)[:n_arm] * effort_to_torque)
        backdriven.append(-np.sign(applied) * velocity > BACKDRIVE_SPEED_RAD_S)
        forces.append(force)
    shape = (-1, n_arm)
    return (np.reshape(external, shape), np.reshape(implied, shape), np.reshape(backdriven, shape), forces)


def slope(x: np.ndarray, y: np.ndarray) -> float:
    """Least-squares slope of y on x with an intercept; NaN when x barely varies."""
    if x.size < 3 or np.std(x) < 1e-3:
        return float("nan")
    return float(np.polyfit(x, y, 1)[0])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--robot", default="omx_x", help="omx_x (default) or so101")
    parser.add_argument("--episodes", type=int, default=2, help="quick episodes per push axis (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="rig seed; episode i of an axis uses seed + i")
    parser.add_argument("--min-force", type=float, default=1.0, help="contact frames counted above this |F| (N)")
    args = parser.parse_args(argv)
    config = load_rig_config(GenerateOptions(tasks=["push_px"], out=Path("unused"), robot=args.robot))
    spec = load_spec(config.robot)
    reference = datasheet_reference(spec)
    effort_to_torque = servo_table(spec).STALL_TORQUE_12V / reference.effort_full_scale
    rig = Rig(config, seed=args.seed, spec=spec)
    kinematics = Kinematics(spec)
    joints = spec.arm_joint_names
    print(f"{spec.name}: effort = {reference.effort_signal} ({reference.effort_source}); "
          f"slope of effort-implied torque on contact torque, and back-driven share, per arm joint")
    print(f"{'push':8} {'frames':>6} {'|F| p50':>8}  " + "  ".join(f"{j[:13]:>13}" for j in joints))
    for axis in PUSH_AXES:
        parts = [measure(rig, kinematics, f"push_{axis}", args.seed + i, args.min_force, effort_to_torque)
                 for i in range(args.episodes)]
        external = np.concatenate([p[0] for p in parts])
        implied = np.concatenate([p[1] for p in parts])
        backdriven = np.concatenate([p[2] for p in parts])
        forces = [f for p in parts for f in p[3]]
        if not forces:
            print(f"push_{axis:3} {0:6d}  (no contact above {args.min_force} N)")
            continue
        cells = []
        for k in range(len(joints)):
            # joints the push barely loads (< 0.1 N*m at the median) are left blank
            if np.median(np.abs(external[:, k])) < 0.1:
                cells.append(f"{'-':>13}")
                continue
            cells.append(f"{slope(external[:, k], implied[:, k]):6.2f} / {backdriven[:, k].mean():4.0%}")
        print(f"push_{axis:3} {len(forces):6d} {np.median(forces):6.1f} N  " + "  ".join(cells))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
