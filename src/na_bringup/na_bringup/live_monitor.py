"""A node that collects the estimator's output and the rig's ground truth for :mod:`live_eval`, and feeds
an :class:`~na_bringup.live_integrity.IntegrityWatch` with the arm states, ``/diagnostics`` and the
estimates, so that a phase run on a tripped arm or a rig that fell behind is known to be void."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from na_bringup.live_integrity import IntegrityWatch
from na_common import topics
from na_common.stamps import split_ns, stamp_seconds


@dataclass
class Recording:
    estimate_stamps: list[float] = field(default_factory=list)
    estimate_force: list[list[float]] = field(default_factory=list)
    estimate_contact: list[bool] = field(default_factory=list)
    inference_latency: list[float] = field(default_factory=list)
    receive_delay: list[float] = field(default_factory=list)
    truth_stamps: list[float] = field(default_factory=list)
    truth_force: list[list[float]] = field(default_factory=list)

    def arrays(self) -> dict[str, np.ndarray]:
        return {name: np.asarray(value, dtype=float) for name, value in self.__dict__.items()}


def status_level(status) -> int:
    """The level of a ``diagnostic_msgs/DiagnosticStatus`` as an int (rclpy gives a byte)."""
    return status.level[0] if isinstance(status.level, bytes) else int(status.level)


class GraphWatch:
    """Feeds an :class:`IntegrityWatch` from ``node``'s subscriptions to both arm states and ``/diagnostics``.

    ``accept(msg)`` filters messages (e.g. a probe's own injected states, or those of an earlier run);
    ``on_status(stamp, status)`` sees every accepted diagnostic status too. Replace ``watch`` per run.
    """

    def __init__(self, node, watch: IntegrityWatch | None = None, accept=lambda msg: True, on_status=None) -> None:
        from diagnostic_msgs.msg import DiagnosticArray

        from na_msgs.msg import ArmState

        self.watch = watch or IntegrityWatch()
        self._accept, self._on_status = accept, on_status
        node.create_subscription(ArmState, topics.LEADER_ARM_STATE, lambda m: self._state("leader", m), 100)
        node.create_subscription(ArmState, topics.FOLLOWER_ARM_STATE, lambda m: self._state("follower", m), 100)
        node.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._diagnostics, 50)

    def _state(self, arm: str, msg) -> None:
        if self._accept(msg):
            self.watch.arm_state(arm, stamp_seconds(msg.header.stamp), msg.stale, msg.dropped_cycles)

    def _diagnostics(self, msg) -> None:
        if not self._accept(msg):
            return
        stamp = stamp_seconds(msg.header.stamp)
        for status in msg.status:
            self.watch.diagnostic(stamp, status.name, status_level(status), status.message)
            if self._on_status is not None:
                self._on_status(stamp, status)


class LiveMonitor:
    """Subscribes to /estimator/estimate and /sim/truth/wrench in the given rclpy context, and watches the
    graph's integrity (:class:`GraphWatch`)."""

    def __init__(self, context, watch: IntegrityWatch | None = None) -> None:
        import rclpy
        from geometry_msgs.msg import WrenchStamped

        from na_msgs.msg import ActuatorEstimate, ArmState

        self.node = rclpy.create_node("na_live_monitor", context=context)
        self.recording = Recording()
        self.active = False
        self.all_estimate_stamps: set[tuple[int, int]] = set()
        self.injected: list[tuple[int, int]] = []
        self.last_state = None
        self.node.create_subscription(ActuatorEstimate, topics.ESTIMATE, self._on_estimate, 100)
        self.node.create_subscription(WrenchStamped, topics.TRUTH_WRENCH, self._on_truth, 100)
        self.node.create_subscription(ArmState, topics.FOLLOWER_ARM_STATE, self._on_state, 100)
        self.state_pub = self.node.create_publisher(ArmState, topics.FOLLOWER_ARM_STATE, 10)
        self._injected_keys: set[tuple[int, int]] = set()
        self.graph = GraphWatch(self.node, watch, accept=lambda msg: not self._injected(msg))

    @property
    def watch(self) -> IntegrityWatch:
        return self.graph.watch

    @watch.setter
    def watch(self, watch: IntegrityWatch) -> None:
        self.graph.watch = watch

    def _injected(self, msg) -> bool:
        return (msg.header.stamp.sec, msg.header.stamp.nanosec) in self._injected_keys

    def now(self) -> float:
        """Seconds on the node's ROS clock (the clock of the stamps the watch compares)."""
        return self._now()

    def _on_state(self, msg) -> None:
        if not self._injected(msg):                 # our own stale probe is not the driver's state
            self.last_state = msg

    def inject_stale(self, count: int, age: float = 0.5) -> int:
        """Publish ``count`` copies of the latest follower state stamped ``age`` s in the past (as a
        delayed or replayed message would arrive); returns how many were sent. The estimator must not
        turn any of them into an estimate (see :meth:`stale_estimated`)."""
        from builtin_interfaces.msg import Time

        if self.last_state is None:
            return 0
        now_ns = self.node.get_clock().now().nanoseconds
        for k in range(count):
            sec, nanosec = split_ns(now_ns - int(age * 1e9) + k * 1000)
            msg = self.last_state
            msg.header.stamp = Time(sec=sec, nanosec=nanosec)
            self.injected.append((msg.header.stamp.sec, msg.header.stamp.nanosec))
            self._injected_keys.add(self.injected[-1])
            self.state_pub.publish(msg)
        return count

    def stale_estimated(self) -> int:
        """How many injected stale states came back as estimates (must be 0)."""
        return len(set(self.injected) & self.all_estimate_stamps)

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    def _on_estimate(self, msg) -> None:
        self.all_estimate_stamps.add((msg.header.stamp.sec, msg.header.stamp.nanosec))
        if not self._injected(msg):
            self.watch.estimate(stamp_seconds(msg.header.stamp))
        if not self.active:
            return
        rec, stamp = self.recording, stamp_seconds(msg.header.stamp)
        rec.estimate_stamps.append(stamp)
        rec.estimate_force.append([msg.force.x, msg.force.y, msg.force.z])
        rec.estimate_contact.append(bool(msg.in_contact))
        rec.inference_latency.append(msg.inference_latency)
        rec.receive_delay.append(self._now() - stamp)

    def _on_truth(self, msg) -> None:
        if not self.active:
            return
        force = msg.wrench.force
        self.recording.truth_stamps.append(stamp_seconds(msg.header.stamp))
        self.recording.truth_force.append([force.x, force.y, force.z])
