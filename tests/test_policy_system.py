"""The policy node closing the loop on the simulated rig, processes started as policy.launch.xml describes: the
rig with a press_hold fixture and nobody on the leader, the follower arm driver and the policy node. The test
plays the estimator's two output topics (its own process and model are tested in test_estimator_system.py).

The node moves the arm to its start pose and commands it at 60 Hz; when the estimator's topics stop, it holds
the arm, says why on /diagnostics, and no process dies."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from na_bringup.sim_graph import launched, ros_env, sim_rig
from na_sim.press_task import make_press_episode

pytestmark = pytest.mark.system           # 10-20 s on 2 cores

SEED = 5                     # a light object (46 g): the arm sags little at the start pose
START_TOLERANCE = 0.08       # rad: the follower reached the start pose (position servo under gravity: ~0.03 off)
RATE_FLOOR = 45.0            # commands/s over 2 s; the policy's rate is 60 (exact figures: the benchmark)
HOLD_DRIFT = 0.01            # rad: the arm holds still after the stop


def hold_policy(path, start_pose):
    """A force policy (one linear layer) that always commands ``start_pose``: action = start - measured."""
    from na_policy.features import observation_size
    from na_policy.policy_file import Policy

    inputs, chunk = observation_size("force"), 2
    kernel = np.zeros((inputs, chunk * 5), np.float32)
    for k in range(chunk):
        kernel[:5, 5 * k: 5 * k + 5] = -np.eye(5)
    mean = np.zeros(inputs, np.float32)
    mean[:5] = start_pose
    return Policy(variant="force", chunk=chunk, joint_names=["joint1", "joint2", "joint3", "joint4", "gripper"],
                  kernels=[kernel], biases=[np.zeros(chunk * 5, np.float32)], obs_mean=mean,
                  obs_std=np.ones(inputs, np.float32), act_mean=np.zeros(chunk * 5, np.float32),
                  act_std=np.ones(chunk * 5, np.float32), start_pose=np.asarray(start_pose, dtype=float)).save(path)


class FakeEstimatorAndWatcher:
    """Publishes /estimator/force and /estimator/contact at 100 Hz while ``publishing``; records commands,
    follower states and the policy's /diagnostics."""

    def __init__(self, ros_graph) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped

        from na_msgs.msg import ArmState, Contact, JointCommand

        self.node = ros_graph.probe("fake_estimator")
        self.publishing = True
        self.force_pub = self.node.create_publisher(WrenchStamped, "/estimator/force", 10)
        self.contact_pub = self.node.create_publisher(Contact, "/estimator/contact", 10)
        self.WrenchStamped, self.Contact = WrenchStamped, Contact
        self.lock = threading.Lock()
        self.commands: list[tuple[float, list[float]]] = []
        self.states: list[tuple[float, list[float]]] = []
        self.statuses: list[tuple[float, int, str]] = []
        self.node.create_subscription(JointCommand, "/follower/command", self._on_command, 100)
        self.node.create_subscription(ArmState, "/follower/arm_state", self._on_state, 100)
        self.node.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 20)
        self.node.create_timer(0.01, self._publish)

    def _publish(self) -> None:
        if not self.publishing:
            return
        msg = self.WrenchStamped()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        self.force_pub.publish(msg)
        self.contact_pub.publish(self.Contact(header=msg.header, probability=0.05, in_contact=False))

    def _on_command(self, msg) -> None:
        with self.lock:
            self.commands.append((time.monotonic(), list(msg.position)))

    def _on_state(self, msg) -> None:
        with self.lock:
            self.states.append((time.monotonic(), list(msg.position)))

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            if status.name == "policy":
                level = status.level[0] if isinstance(status.level, bytes) else int(status.level)
                with self.lock:
                    self.statuses.append((time.monotonic(), level, status.message))

    def between(self, series: str, start: float, end: float) -> np.ndarray:
        with self.lock:
            return np.array([v for t, v in getattr(self, series) if start <= t < end])


def wait(condition, timeout: float, graphs, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        for graph in graphs:
            graph.check_alive()
        assert time.monotonic() < deadline, f"waited {timeout:.0f} s for {what}"
        time.sleep(0.05)


def test_policy_closes_the_loop_and_holds_on_estimator_loss(ros_graph, tmp_path) -> None:
    episode = make_press_episode(SEED)
    policy = hold_policy(tmp_path / "hold.npz", episode.start_pose)
    watcher = FakeEstimatorAndWatcher(ros_graph)
    sim_dir, logs = tmp_path / "sim", tmp_path / "logs"
    with ros_graph.spinning(), \
            sim_rig(sim_dir, logs, task="press_hold", options=f"--task-seed {SEED} --fixture-only") as (rig, _, _), \
            launched("policy.launch.xml", {"policy": str(policy), "start_estimator": "false", "sim": "true",
                                           "sim_dir": str(sim_dir)}, logs, env=ros_env()) as graph:
        graphs = (rig, graph)
        wait(lambda: len(watcher.commands) > 0, 90.0, graphs, "the policy's first command")
        first = watcher.commands[0][0]
        wait(lambda: time.monotonic() > first + 4.0, 10.0, graphs, "the move to the start pose")   # 2 s blend
        now = time.monotonic()
        commands = watcher.between("commands", now - 2.0, now)
        assert len(commands) / 2.0 >= RATE_FLOOR
        position = watcher.between("states", now - 0.2, now)[-1]
        np.testing.assert_allclose(position[:4], episode.start_pose[:4], atol=START_TOLERANCE)
        assert any(level == 0 and message == "running" for _, level, message in watcher.statuses)

        watcher.publishing = False                                    # the estimator is lost
        stopped = time.monotonic()
        wait(lambda: time.monotonic() > stopped + 3.0, 10.0, graphs, "the hold")
        said = [(level, message) for t, level, message in watcher.statuses if t > stopped]
        assert any(level == 2 and "estimator lost" in message for level, message in said), said
        held = watcher.between("commands", stopped + 1.5, stopped + 3.0)    # the node's timeout is 1 s
        assert len(held) / 1.5 >= RATE_FLOOR                         # still commanding: the hold pose
        assert np.max(np.ptp(held, axis=0)) < 1e-9
        states = watcher.between("states", stopped + 1.5, stopped + 3.0)
        assert np.max(np.ptp(states[:, :4], axis=0)) < HOLD_DRIFT
        for g in graphs:
            g.check_alive()                                           # nothing crashed
