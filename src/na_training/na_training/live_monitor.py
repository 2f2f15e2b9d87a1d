"""A node that collects the estimator's output and the rig's ground truth for :mod:`live_eval`."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


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


class LiveMonitor:
    """Subscribes to /estimator/estimate and /sim/truth/wrench in the given rclpy context."""

    def __init__(self, context) -> None:
        import rclpy
        from geometry_msgs.msg import WrenchStamped

        from na_msgs.msg import ActuatorEstimate

        self.node = rclpy.create_node("na_live_monitor", context=context)
        self.recording = Recording()
        self.active = False
        self.node.create_subscription(ActuatorEstimate, "/estimator/estimate", self._on_estimate, 100)
        self.node.create_subscription(WrenchStamped, "/sim/truth/wrench", self._on_truth, 100)

    def _now(self) -> float:
        return self.node.get_clock().now().nanoseconds * 1e-9

    @staticmethod
    def _stamp(header) -> float:
        return header.stamp.sec + header.stamp.nanosec * 1e-9

    def _on_estimate(self, msg) -> None:
        if not self.active:
            return
        rec, stamp = self.recording, self._stamp(msg.header)
        rec.estimate_stamps.append(stamp)
        rec.estimate_force.append([msg.force.x, msg.force.y, msg.force.z])
        rec.estimate_contact.append(bool(msg.in_contact))
        rec.inference_latency.append(msg.inference_latency)
        rec.receive_delay.append(self._now() - stamp)

    def _on_truth(self, msg) -> None:
        if not self.active:
            return
        force = msg.wrench.force
        self.recording.truth_stamps.append(self._stamp(msg.header))
        self.recording.truth_force.append([force.x, force.y, force.z])
