"""Conversion throughput of ``na-train convert`` on synthetic episode bags (prints numbers).

Writes ``--episodes`` bags of ``--seconds`` each with na_teleop's EpisodeWriter (follower, leader
and command at 100 Hz, F/T at ``--ft-rate``), then times the conversion with and without resampling
to the paper's 0.017 s frames. Usage: ``python src/na_training/benchmarks/convert_throughput.py``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from na_common.episode_bag import EpisodeWriter, make_header, message_class
from na_description import load_spec
from na_training.convert import convert

T0 = 1_000_000_000_000  # ns


def _arm_state(stamp: int, q: np.ndarray, role: str, names: list[str]):
    n = len(names)
    return message_class("na_msgs/msg/ArmState")(
        header=make_header(stamp, "world"), role=role, name=names, position=q, gripper_slide=0.005,
        goal_gripper_slide=0.005, velocity=q * 0.1, goal_position=q, current=np.full(n, 0.1), pwm=np.zeros(n),
        input_voltage=np.full(n, 12.0), temperature=np.full(n, 30.0), hardware_error=np.zeros(n, np.uint8),
        stale=np.zeros(n, bool), timeout_errors=0, crc_errors=0, partial_errors=0, dropped_cycles=0,
        bus_cycle_duration=0.002)


def _wrench(stamp: int, force: np.ndarray):
    vec = message_class("geometry_msgs/msg/Vector3")
    wrench = message_class("geometry_msgs/msg/Wrench")(force=vec(x=force[0], y=force[1], z=force[2]),
                                                       torque=vec(x=0.0, y=0.0, z=0.0))
    return message_class("geometry_msgs/msg/WrenchStamped")(header=make_header(stamp, "ft_sensor"), wrench=wrench)


def write_episode(out: Path, seconds: float, ft_rate: float, names: list[str]) -> int:
    command_type = message_class("na_msgs/msg/JointCommand")
    meta = {"task": "push", "payload_grams": 0.0, "force_source": "ft_sensor", "condition": "nominal",
            "source": "generated"}
    count = 0
    with EpisodeWriter(out, meta) as writer:
        for topic, msgtype in (("/follower/arm_state", "na_msgs/msg/ArmState"),
                               ("/leader/arm_state", "na_msgs/msg/ArmState"),
                               ("/follower/command", "na_msgs/msg/JointCommand"),
                               ("/ft/wrench", "geometry_msgs/msg/WrenchStamped")):
            writer.add_topic(topic, msgtype)
        ft_period = int(1e9 / ft_rate)
        next_ft = T0
        for k in range(int(seconds * 100) + 1):
            stamp = T0 + k * 10_000_000
            q = np.sin(stamp / 1e9 + np.arange(len(names)))
            while next_ft <= stamp:
                writer.write("/ft/wrench", next_ft, _wrench(next_ft, np.array([0.0, 0.0, 1.0])))
                next_ft += ft_period
                count += 1
            writer.write("/follower/command", stamp - 2_000_000, command_type(
                header=make_header(stamp - 2_000_000), name=names, position=q, gripper_slide=0.005))
            writer.write("/leader/arm_state", stamp - 3_000_000, _arm_state(stamp - 3_000_000, q, "leader", names))
            writer.write("/follower/arm_state", stamp, _arm_state(stamp, q, "follower", names))
            count += 3
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--ft-rate", type=float, default=500.0, help="F/T sample rate (Hz)")
    args = parser.parse_args()
    names = load_spec().joint_names
    with tempfile.TemporaryDirectory() as tmp:
        bags = Path(tmp) / "bags"
        start = time.perf_counter()
        messages = sum(write_episode(bags, args.seconds, args.ft_rate, names) for _ in range(args.episodes))
        print(f"wrote {args.episodes} bags, {messages} messages in {time.perf_counter() - start:.2f} s")
        for label, rate in (("native 100 Hz", None), ("resampled 1/0.017 Hz", 1 / 0.017)):
            start = time.perf_counter()
            result = convert([bags], Path(tmp) / f"nad_{rate}", rate_hz=rate, progress=False)
            elapsed = time.perf_counter() - start
            print(f"{label}: {result.frames} frames from {messages} messages in {elapsed:.2f} s "
                  f"({messages / elapsed:,.0f} messages/s, {args.episodes * args.seconds / elapsed:.1f} "
                  "recorded s per s)")


if __name__ == "__main__":
    main()
