"""One generated episode of a torque-commanded arm (:mod:`na_sim.torque_arm`) as the recorder's episode bag.

The scripted operator's pose at time t is the arm's goal at t (a causal command: what the robot's controller
is given at t, not a later measured state). Every control cycle the arm runs its controller; every
``publish_every`` cycles (one data frame) the state measured at that cycle is written as ``/follower/arm_state``
and ``/follower/joint_states``, the goal as ``/follower/command``, the held payload's weight as
``/sim/truth/wrench`` and ``/sim/truth/contact`` (no fixture: false); ``/episode/grasp`` on change and at 10 Hz.
There is no leader arm (convert with ``require_leader: false``) and no F/T sensor.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from na_common import episode_bag as eb
from na_common import topics
from na_description.arm_state import ArmStateFields
from na_sim.tasks import TaskEpisode
from na_sim.torque_arm import TorqueArm, TorqueArmReading

GRASP_RATE_HZ = 10.0
TOPICS = (topics.FOLLOWER_ARM_STATE, topics.FOLLOWER_JOINT_STATES, topics.FOLLOWER_COMMAND, topics.GRASP,
          topics.TRUTH_WRENCH, topics.TRUTH_CONTACT)


def episode_cycles(arm: TorqueArm, duration: float, max_seconds: float | None) -> int:
    """Control cycles of an episode: whole data frames."""
    seconds = duration if max_seconds is None else min(duration, max_seconds)
    frames = int(np.floor(seconds / arm.spec.frame_period + 1e-9))
    return frames * arm.config.publish_every


def arm_state_fields(arm: TorqueArm, reading: TorqueArmReading, goal: np.ndarray) -> ArmStateFields:
    """The follower's ArmState fields for one reading: the commanded torque in ``load``; the arm has no motor
    current or PWM (zeros), one supply voltage and the episode's joint temperature."""
    spec, n = arm.spec, arm.spec.n_motors
    grip = spec.gripper
    goal = np.asarray(goal, dtype=float)
    goal_slide = float(grip.angle_to_slide(goal[arm.g])) if arm.g is not None else float("nan")
    return ArmStateFields(
        role="follower", name=spec.joint_names, position=reading.position.copy(), gripper_slide=reading.gripper_slide,
        goal_gripper_slide=goal_slide, velocity=reading.velocity.copy(), goal_position=goal.copy(),
        current=np.zeros(n), pwm=np.zeros(n), load=reading.effort.copy(),
        input_voltage=np.full(n, arm.config.input_voltage), temperature=np.full(n, arm.temperature),
        hardware_error=np.zeros(n, dtype=np.uint8), stale=np.zeros(n, dtype=bool), timeout_errors=0, crc_errors=0,
        partial_errors=0, dropped_cycles=0, bus_cycle_duration=0.0)


def run_torque_episode(arm: TorqueArm, episode: TaskEpisode, writer: eb.EpisodeWriter, start_ns: int, *,
                       max_seconds: float | None = None, messages=None,
                       on_progress: Callable[[float], None] | None = None) -> tuple[float, float]:
    """Play ``episode`` on ``arm`` and write its topics to ``writer``; returns (simulated s, wall s in physics).
    ``messages``: the generator's message builders (:class:`na_sim.generate._Messages`)."""
    for topic in TOPICS:
        writer.add_topic(topic, topics.EPISODE_TOPICS[topic])
    dt = arm.config.control_period
    every = arm.config.publish_every
    n_cycles = episode_cycles(arm, episode.duration, max_seconds)
    goals = episode.poses(np.arange(n_cycles) * dt)
    arm.reset(goals[0], episode.seed)
    msgs = messages
    held, flagged = False, None            # payload attached in the physics; last grasp flag written
    grasp_every = max(1, round(1.0 / (GRASP_RATE_HZ * arm.spec.frame_period)))
    physics, clock = 0.0, time.perf_counter
    zero3 = np.zeros(3)
    for k in range(n_cycles):
        t = k * dt
        now_grasped = episode.grasped(t)
        if now_grasped != held:
            arm.set_payload(episode.payload_kg if now_grasped else None)
            held = now_grasped
        tick = clock()
        reading = arm.step(goals[k])
        physics += clock() - tick
        if k % every:
            continue
        frame = k // every
        t_ns = start_ns + round(t * 1e9)
        header = msgs.header(t_ns)
        fields = arm_state_fields(arm, reading, goals[k])
        writer.write(topics.FOLLOWER_ARM_STATE, t_ns, msgs.arm_state(header, fields))
        writer.write(topics.FOLLOWER_JOINT_STATES, t_ns, msgs.joint_state(header, fields))
        writer.write(topics.FOLLOWER_COMMAND, t_ns, msgs.command(header, goals[k]))
        if now_grasped != flagged or frame % grasp_every == 0:
            writer.write(topics.GRASP, t_ns, msgs.flag(now_grasped))
            flagged = now_grasped
        writer.write(topics.TRUTH_WRENCH, t_ns, msgs.wrench(header, arm.payload_force(), zero3))
        writer.write(topics.TRUTH_CONTACT, t_ns, msgs.flag(False))
        if on_progress is not None and frame % 100 == 99:
            on_progress(100 * every * dt)
    if on_progress is not None:
        on_progress((n_cycles // every % 100) * every * dt)
    return n_cycles * dt, physics
