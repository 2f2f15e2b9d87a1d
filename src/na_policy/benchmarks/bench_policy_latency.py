"""Policy node rate and latency through DDS: follower states in, commands out, the node in its own process.

* the installed ``policy`` executable on a policy file (``--policy``, e.g. ``policy_output/force.npz`` of
  ``na-policy train``; default: a force policy of the shipped size with random weights, written to a
  temporary directory), started with ``start_duration:=0``;
* this process plays the follower driver and the estimator: ``na_msgs/ArmState`` at ``--state-rate`` Hz (the
  driver's 100 Hz) and ``/estimator/force`` + ``/estimator/contact`` with each state;
* a listener process (multiprocessing, spawn) takes the time each ``/follower/command`` arrives and the
  node's ``/diagnostics`` (separate processes: neither waits for the other's Python).

Figures: commands per second (the policy's 60 Hz), the command interval, and the input-to-command latency: the
receipt of each command minus the publication of the state it answered (the newest state sent before it),
p50/p99/max; beside it the node's own state-callback-to-publish time from its ``/diagnostics``. Runs on a
private ``ROS_DOMAIN_ID`` with localhost-only discovery; the node is stopped at the end.

    python src/na_policy/benchmarks/bench_policy_latency.py --seconds 60 --policy policy_output/force.npz
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from na_common.dds_transport import use_udp_transport
from na_common.machine import machine_line

POSE = [0.0, 0.15, -0.46, 1.66, -0.26]


def machine() -> str:
    return f"machine: {machine_line()}; Python {platform.python_version()}"


def random_policy(folder: Path) -> Path:
    from na_description import load_spec
    from na_policy.features import observation_size
    from na_policy.policy_file import Policy
    from na_policy.train import TrainConfig

    config = TrainConfig(variant="force")
    rng = np.random.default_rng(0)
    sizes = [observation_size("force"), *config.hidden, config.chunk * 5]
    kernels = [rng.normal(0, 0.05, (a, b)).astype(np.float32) for a, b in itertools.pairwise(sizes)]
    biases = [np.zeros(b, np.float32) for b in sizes[1:]]
    policy = Policy(variant="force", chunk=config.chunk, joint_names=list(load_spec().joint_names), kernels=kernels,
                    biases=biases, obs_mean=np.zeros(sizes[0], np.float32), obs_std=np.ones(sizes[0], np.float32),
                    act_mean=np.zeros(sizes[-1], np.float32), act_std=np.full(sizes[-1], 1e-3, np.float32),
                    start_pose=np.asarray(POSE))
    return policy.save(folder / "random_force.npz")


def listen(seconds: float, ready, results) -> None:
    """Listener process: receipt times (``time.perf_counter``, CLOCK_MONOTONIC, shared by all processes) of
    the commands and the policy node's latest /diagnostics values, for ``seconds`` after ``ready`` is set."""
    import rclpy
    from diagnostic_msgs.msg import DiagnosticArray
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor

    from na_common import topics
    from na_msgs.msg import JointCommand

    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bench_policy_listener", context=context)
    received: list[float] = []
    diagnostics: dict[str, str] = {}

    def on_diagnostics(msg) -> None:
        for status in msg.status:
            if status.name == "policy":
                diagnostics.update({kv.key: kv.value for kv in status.values})

    node.create_subscription(JointCommand, topics.FOLLOWER_COMMAND, lambda _m: received.append(time.perf_counter()),
                             100)
    node.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, on_diagnostics, 10)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    ready.set()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        executor.spin_once(timeout_sec=0.05)
    results.put((received, diagnostics))
    executor.shutdown()
    node.destroy_node()
    rclpy.try_shutdown(context=context)


def run(policy: Path, seconds: float, state_rate: float) -> int:
    import multiprocessing as mp

    import rclpy
    from geometry_msgs.msg import WrenchStamped
    from rclpy.context import Context

    from na_common import topics
    from na_common.ament import find_executable
    from na_msgs.msg import ArmState, Contact

    executable = find_executable("na_policy", "policy")
    node_process = subprocess.Popen([str(executable), "--ros-args", "-p", f"policy_path:={policy}",
                                     "-p", "start_duration:=0.0", "-p", "start_settle:=0.0"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    spawn = mp.get_context("spawn")
    ready, results = spawn.Event(), spawn.Queue()
    warm_up = 10.0
    listener = spawn.Process(target=listen, args=(warm_up + seconds + 2.0, ready, results), daemon=True)
    listener.start()
    context = Context()
    rclpy.init(context=context)
    node = rclpy.create_node("bench_policy", context=context)
    publishers = (node.create_publisher(ArmState, topics.FOLLOWER_ARM_STATE, 10),
                  node.create_publisher(WrenchStamped, topics.ESTIMATED_FORCE, 10),
                  node.create_publisher(Contact, topics.ESTIMATED_CONTACT, 10))
    types = (ArmState, WrenchStamped, Contact)
    sent: list[float] = []
    lock = threading.Lock()
    try:
        ready.wait(30.0)
        deadline = time.monotonic() + 30.0
        while publishers[0].get_subscription_count() == 0:
            if node_process.poll() is not None or time.monotonic() > deadline:
                print("the policy node did not come up", file=sys.stderr)
                return 1
            time.sleep(0.05)
        period = 1.0 / state_rate
        warm_end = time.monotonic() + warm_up             # discovery, the estimator wait, first commands
        while time.monotonic() < warm_end:
            _publish(node, publishers, types, [], lock)
            time.sleep(period)
        print(f"measuring {seconds:.0f} s: states at {state_rate:g} Hz -> policy node ({policy.name})", flush=True)
        start = time.perf_counter()
        next_at = start
        while time.perf_counter() - start < seconds:
            next_at += period
            _publish(node, publishers, types, sent, lock)
            delay = next_at - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        elapsed = time.perf_counter() - start
        received, diagnostics = results.get(timeout=30.0)
        received = np.asarray(received)
        received = received[(received >= start) & (received <= start + elapsed + 0.05)]
        _report(np.asarray(sent), received, elapsed, diagnostics)
        return 0
    finally:
        listener.join(timeout=10.0)
        node.destroy_node()
        rclpy.try_shutdown(context=context)
        os.killpg(node_process.pid, signal.SIGINT)
        try:
            node_process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(node_process.pid, signal.SIGKILL)


def _publish(node, publishers, types, sent, lock) -> None:
    state_pub, force_pub, contact_pub = publishers
    arm_state, wrench_stamped, contact = types
    stamp = node.get_clock().now().to_msg()
    force = wrench_stamped()
    force.header.stamp, force.wrench.force.z = stamp, 3.0
    force_pub.publish(force)                                     # the estimate of the previous state, as live
    contact_pub.publish(contact(header=force.header, probability=0.9, in_contact=True))
    state = arm_state(role="follower", name=["joint1", "joint2", "joint3", "joint4", "gripper"], position=POSE)
    state.header.stamp = stamp
    with lock:
        sent.append(time.perf_counter())
    state_pub.publish(state)


def _report(sent: np.ndarray, received: np.ndarray, seconds: float, diagnostics: dict[str, str]) -> None:
    index = np.searchsorted(sent, received, side="right") - 1
    valid = index >= 0
    latency = (received[valid] - sent[index[valid]]) * 1e3
    gaps = np.diff(received) * 1e3
    print(machine())
    print(f"commands: {len(received)} in {seconds:.1f} s = {len(received) / seconds:.2f} per s "
          f"(target 60; states sent {len(sent)})")
    print(f"command interval: mean {gaps.mean():.2f} ms, p1 {np.percentile(gaps, 1):.2f} ms, "
          f"p99 {np.percentile(gaps, 99):.2f} ms, max {gaps.max():.2f} ms")
    print(f"input-to-command latency (state published -> command received): p50 {np.percentile(latency, 50):.2f} ms, "
          f"p99 {np.percentile(latency, 99):.2f} ms, max {latency.max():.2f} ms (bar: p99 <= 5 ms)")
    print(f"policy node, state callback -> command published: p50 {diagnostics.get('latency_p50_ms', '?')} ms, "
          f"p99 {diagnostics.get('latency_p99_ms', '?')} ms; network {diagnostics.get('inference_p50_ms', '?')} ms "
          f"(p50); status holds {diagnostics.get('holds', '?')}, clamped {diagnostics.get('clamped', '?')}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--policy", type=Path, default=None, help="policy file (default: random weights)")
    parser.add_argument("--seconds", type=float, default=30.0, help="measurement time (default %(default)s)")
    parser.add_argument("--state-rate", type=float, default=100.0, help="follower states per second (default 100)")
    parser.add_argument("--domain", type=int, default=None, help="ROS_DOMAIN_ID (default: 90 + pid % 10)")
    args = parser.parse_args(argv)
    os.environ["ROS_DOMAIN_ID"] = str(args.domain if args.domain is not None else 90 + os.getpid() % 10)
    os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    use_udp_transport()
    with tempfile.TemporaryDirectory(prefix="na_policy_bench_") as tmp:
        policy = args.policy.resolve() if args.policy else random_policy(Path(tmp))
        return run(policy, args.seconds, args.state_rate)


if __name__ == "__main__":
    sys.exit(main())
