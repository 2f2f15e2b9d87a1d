"""A probe node for the live runs of ``na-policy demos`` and ``na-policy eval``: what the rig, the estimator and
the policy publish, collected in a private rclpy context (the processes run beside it, started through
:mod:`na_bringup.sim_graph` like the demo's)."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from na_bringup.live_integrity import IntegrityWatch
from na_bringup.live_monitor import GraphWatch, status_level
from na_common import topics
from na_common.dds_transport import use_udp_transport
from na_common.stamps import stamp_seconds


class LiveError(RuntimeError):
    """A live run did not get what it waited for; the message says what and where the logs are."""


STOP = threading.Event()
DIAGNOSTICS_SETTLE_S = 1.2    # drivers publish /diagnostics once a second: wait for the last word on a window


def stop_on_signals() -> None:
    """SIGINT and SIGTERM end a live run at its next wait (KeyboardInterrupt from :meth:`LiveProbe.spin_until`),
    so that the launched processes are stopped on the way out. (A signal arriving while rclpy waits is
    otherwise lost.)"""
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: STOP.set())


@dataclass
class Collected:
    truth_time: list[float] = field(default_factory=list)        # s, local monotonic on arrival
    truth_force_z: list[float] = field(default_factory=list)     # N, upward force on the tool
    command_time: list[float] = field(default_factory=list)      # s, local monotonic on arrival
    command: list[list[float]] = field(default_factory=list)
    state_position: list[list[float]] = field(default_factory=list)
    state_time: list[float] = field(default_factory=list)
    estimator_force: int = 0
    policy_status: list[tuple[float, int, str]] = field(default_factory=list)   # (time, level, message)
    policy_values: dict[str, str] = field(default_factory=dict)


POLICY_STATUS = "policy"      # the policy node's /diagnostics status (ERROR: it stopped, e.g. its estimator paused)


class LiveProbe:
    """Collects what a live run publishes and watches its integrity (:class:`IntegrityWatch`: arm states,
    /diagnostics), so that a run on a tripped arm or a rig that fell behind is known to be void."""

    def __init__(self) -> None:
        import rclpy
        from geometry_msgs.msg import WrenchStamped
        from rclpy.context import Context
        from rclpy.signals import SignalHandlerOptions

        from na_common.ros_node import make_executor
        from na_msgs.msg import ArmState, JointCommand

        self.context = Context()
        # No rclpy signal handler: the CLI's (stop_on_signals) ends the run.
        use_udp_transport()
        rclpy.init(context=self.context, signal_handler_options=SignalHandlerOptions.NO)
        self.node = rclpy.create_node("na_policy_probe", context=self.context)
        self.data = Collected()
        self.since = 0.0          # s (ROS time); messages stamped earlier are ignored (a previous run's, still queued)
        self.node.create_subscription(WrenchStamped, topics.TRUTH_WRENCH, self._on_truth, 100)
        self.node.create_subscription(JointCommand, topics.FOLLOWER_COMMAND, self._on_command, 100)
        self.node.create_subscription(ArmState, topics.FOLLOWER_ARM_STATE, self._on_state, 100)
        self.node.create_subscription(WrenchStamped, topics.ESTIMATED_FORCE, self._on_force, 100)
        self.executor = make_executor(self.context)
        self.executor.add_node(self.node)
        self.graph = GraphWatch(self.node, IntegrityWatch(), accept=self._fresh, on_status=self._on_status)

    @property
    def watch(self) -> IntegrityWatch:
        return self.graph.watch

    def reset(self, arms: tuple[str, ...] = ("leader", "follower"), voiding: tuple[str, ...] = ()) -> None:
        """Forget what was collected; from now on, take only messages stamped after this instant. ``arms``: the
        arm drivers this run starts (whose states the integrity watch expects); ``voiding``: more status names
        whose ERROR voids the run (the policy's stop when its estimator paused)."""
        self.data = Collected()
        self.since = self.now()
        self.graph.watch = IntegrityWatch(arms, voiding_statuses=voiding)

    def now(self) -> float:
        """Seconds on the node's ROS clock (the clock of the message stamps)."""
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _fresh(self, msg) -> bool:
        return stamp_seconds(msg.header.stamp) >= self.since

    def close(self) -> None:
        import rclpy

        self.executor.shutdown()
        self.node.destroy_node()
        rclpy.try_shutdown(context=self.context)

    # -- waiting ---------------------------------------------------------------------------------
    def spin_until(self, condition: Callable[[], bool], timeout: float, what: str, graphs: Iterable = (),
                   logs: str = "") -> None:
        """Spin until ``condition()``; a dead process of ``graphs`` or the timeout raises :class:`LiveError`."""
        deadline = time.monotonic() + timeout
        while not condition():
            if STOP.is_set():
                raise KeyboardInterrupt("stopped by a signal")
            for graph in graphs:
                graph.check_alive()
            if time.monotonic() > deadline:
                raise LiveError(f"waited {timeout:.0f} s for {what}" + (f"; logs in {logs}" if logs else ""))
            self.executor.spin_once(timeout_sec=0.02)

    def spin_for(self, seconds: float, graphs: Iterable = ()) -> None:
        end = time.monotonic() + seconds
        self.spin_until(lambda: time.monotonic() >= end, seconds + 5.0, "time to pass", graphs)

    def call(self, client, request, graphs: Iterable = (), timeout: float = 30.0):
        future = client.call_async(request)
        self.spin_until(future.done, timeout, f"the service {client.srv_name}", graphs)
        return future.result()

    # -- callbacks -------------------------------------------------------------------------------
    def _on_truth(self, msg) -> None:
        if not self._fresh(msg):
            return
        self.data.truth_time.append(time.monotonic())
        self.data.truth_force_z.append(float(msg.wrench.force.z))

    def _on_command(self, msg) -> None:
        if not self._fresh(msg):
            return
        self.data.command_time.append(time.monotonic())
        self.data.command.append(list(msg.position))

    def _on_state(self, msg) -> None:
        if not self._fresh(msg):
            return
        self.data.state_time.append(stamp_seconds(msg.header.stamp))
        self.data.state_position.append(list(msg.position))

    def _on_force(self, msg) -> None:
        if self._fresh(msg):
            self.data.estimator_force += 1

    def _on_status(self, _stamp: float, status) -> None:
        if status.name == POLICY_STATUS:
            self.data.policy_status.append((time.monotonic(), status_level(status), status.message))
            self.data.policy_values = {kv.key: kv.value for kv in status.values}

    def wait_until_steady(self, timeout: float, what: str, graphs: Iterable = (), logs: str = "",
                          extra: Callable[[], bool] = lambda: True) -> None:
        """Until every expected arm streamed a steady window without a fault (and ``extra()``)."""
        self.spin_until(lambda: self.watch.ready(self.now()) and extra(), timeout, f"a steady graph ({what})",
                        graphs, logs)

    def settle_diagnostics(self, graphs: Iterable = ()) -> None:
        """Spin long enough for the drivers' once-a-second /diagnostics to report the end of a window."""
        self.spin_for(DIAGNOSTICS_SETTLE_S, graphs)

    def truth_since(self, start: float) -> tuple[np.ndarray, np.ndarray]:
        t = np.asarray(self.data.truth_time)
        f = np.asarray(self.data.truth_force_z)
        keep = t >= start
        return t[keep] - start, f[keep]
