"""Added latency of the teleop node over real DDS.

Starts the installed ``teleop`` executable as its own process, publishes leader ArmState
samples at a fixed rate (each stamped when published, with a unique joint1 value) plus a
follower state, and receives the JointCommands. Prints p50/p99/max of

* stamp in -> publish out: ``command.header.stamp - leader.header.stamp`` (one DDS hop plus the
  teleop callback; both stamps come from the same system clock), and
* round trip: command received here - leader stamp (two DDS hops plus the callback).

Usage: python src/na_teleop/benchmarks/bench_teleop_latency.py [--rate 100] [--duration 10]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

# Isolated, localhost-only DDS for the benchmark and the teleop process it starts.
os.environ.setdefault("ROS_DOMAIN_ID", str(150 + os.getpid() % 50))
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")

import numpy as np
import rclpy
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node

from na_common import topics
from na_common.ament import find_executable
from na_common.dds_transport import use_udp_transport
from na_description import load_spec
from na_msgs.msg import ArmState, JointCommand
from na_teleop.teleop_core import TeleopConfig, TeleopCore

STEP_RAD = 1e-5   # joint1 increment per sample: identifies which leader sample a command answers


def stamp_ns(stamp) -> int:
    return stamp.sec * 1_000_000_000 + stamp.nanosec


def percentiles(values_ms: np.ndarray) -> str:
    p50, p99 = np.percentile(values_ms, [50, 99])
    return f"p50 {p50:.3f} ms  p99 {p99:.3f} ms  max {values_ms.max():.3f} ms  (n={values_ms.size})"


def core_step_time_us(samples: int = 20_000) -> np.ndarray:
    """Wall time of one TeleopCore.on_leader call (mapping, clamps, step limit), no ROS."""
    spec = load_spec()
    core = TeleopCore(TeleopConfig.from_spec(spec, soft_start_duration=0.0))
    core.on_follower(np.zeros(spec.n_motors), np.zeros(spec.n_motors), 0.0)
    leader = np.zeros(spec.n_motors)
    times = np.empty(samples)
    for k in range(samples):
        leader[0] = (k % 100) * 1e-3
        start = time.perf_counter_ns()
        core.on_leader(leader, k * 0.01)
        times[k] = (time.perf_counter_ns() - start) / 1e3
    return times


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=100.0, help="leader sample rate, Hz (driver default 100)")
    parser.add_argument("--duration", type=float, default=10.0, help="measured seconds")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds discarded at the start")
    options = parser.parse_args(argv)
    use_udp_transport()   # this process and the teleop process it starts

    executable = find_executable("na_teleop", "teleop")
    if executable is None:
        print("teleop executable not installed: run ./scripts/bootstrap.sh and source .venv/na_env.sh")
        return 2
    spec = load_spec()
    teleop = subprocess.Popen([str(executable), "--ros-args", "-p", "soft_start_duration:=0.0",
                               "-p", "warn_throttle_period:=30.0"], start_new_session=True)
    rclpy.init()
    node = Node("teleop_latency_bench")
    executor = SingleThreadedExecutor()
    executor.add_node(node)
    leader_pub = node.create_publisher(ArmState, topics.LEADER_ARM_STATE, 10)
    follower_pub = node.create_publisher(ArmState, topics.FOLLOWER_ARM_STATE, 10)
    sent: dict[int, int] = {}
    results: list[tuple[int, int, int]] = []    # (leader stamp, command stamp, received) ns

    def on_command(msg: JointCommand) -> None:
        received = time.time_ns()
        index = round(msg.position[0] / STEP_RAD)
        if index in sent:
            results.append((sent.pop(index), stamp_ns(msg.header.stamp), received))

    node.create_subscription(JointCommand, topics.FOLLOWER_COMMAND, on_command, 10)

    def state(role: str, joint1: float) -> ArmState:
        msg = ArmState(role=role, name=spec.joint_names, position=[joint1, 0.0, 0.0, 0.0, 0.0],
                       current=[0.0] * spec.n_motors)
        msg.header.stamp = node.get_clock().now().to_msg()
        return msg

    try:
        print("[bench] waiting for the teleop process to connect ...", flush=True)
        deadline = time.monotonic() + 30.0
        while (leader_pub.get_subscription_count() == 0 or follower_pub.get_subscription_count() == 0
               or node.count_publishers(topics.FOLLOWER_COMMAND) == 0):
            if time.monotonic() > deadline or teleop.poll() is not None:
                print("[bench] teleop did not come up")
                return 1
            executor.spin_once(timeout_sec=0.05)
        for _ in range(20):
            follower_pub.publish(state("follower", 0.0))
            executor.spin_once(timeout_sec=0.01)
        period = 1.0 / options.rate
        total = int((options.duration + options.warmup) * options.rate)
        warmup = int(options.warmup * options.rate)
        next_time = time.monotonic()
        for k in range(1, total + 1):
            msg = state("leader", k * STEP_RAD)
            if k > warmup:
                sent[k] = stamp_ns(msg.header.stamp)
            leader_pub.publish(msg)
            if k % 10 == 0:
                follower_pub.publish(state("follower", k * STEP_RAD))
            next_time += period
            while (remaining := next_time - time.monotonic()) > 0:
                executor.spin_once(timeout_sec=remaining)
            if k % int(options.rate) == 0:
                print(f"[bench] {k}/{total} samples sent, {len(results)} commands matched", flush=True)
        end = time.monotonic() + 1.0
        while sent and time.monotonic() < end:
            executor.spin_once(timeout_sec=0.01)
    finally:
        teleop.send_signal(2)
        try:
            teleop.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            teleop.kill()
        executor.shutdown()
        node.destroy_node()
        rclpy.try_shutdown()

    if not results:
        print("[bench] no commands received")
        return 1
    data = np.array(results, dtype=np.int64)
    in_to_out = (data[:, 1] - data[:, 0]) / 1e6
    round_trip = (data[:, 2] - data[:, 0]) / 1e6
    print(f"teleop latency at {options.rate:.0f} Hz over {options.duration:.0f} s, separate processes, "
          f"{os.environ.get('RMW_IMPLEMENTATION', 'default RMW')}:")
    print(f"  stamp in -> publish out : {percentiles(in_to_out)}")
    print(f"  round trip (2 DDS hops): {percentiles(round_trip)}")
    print(f"  commands lost: {len(sent)} of {len(sent) + len(results)}")
    core_us = core_step_time_us()
    p50, p99 = np.percentile(core_us, [50, 99])
    print(f"  core step alone (no ROS): p50 {p50:.1f} us  p99 {p99:.1f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
