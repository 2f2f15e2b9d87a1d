"""ROS 2 side of the live rig (optional, ``na-sim rig --ros``): publishes the simulator's ground
truth and the scripted operator's grasp state so that recordings, the estimator demo and system
tests can compare against them. Topics as docs/INTERFACES.md: ``/sim/truth/wrench`` (force the
environment exerts on the tool, base frame), ``/sim/truth/contact``, ``/episode/grasp``; and, once a
second, the rig's own health on ``/diagnostics`` (status ``sim_rig: physics``: ERROR when the physics fell
behind wall time past its margin or a bus process died), so that recorders and live evaluations can
tell a run on a rig that kept pace from one that did not."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from na_common import topics
from na_common.dds_transport import use_udp_transport
from na_common.diagnostics import RIG_PACE_STATUS
from na_sim.child_process import ChildProcess, say_goodbye, serve, take_realtime

TRUTH_RATE_HZ = 100.0
HEALTH_PERIOD_S = 1.0


class TruthPublisher:
    """A private rclpy context and node, spun on its own thread, publishing ``truth()`` at 100 Hz."""

    def __init__(self, truth: Callable[[], Any], frame_id: str = "world", rate_hz: float = TRUTH_RATE_HZ,
                 rig_health: Callable[[], dict[str, Any]] | None = None) -> None:
        import rclpy
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        from rclpy.context import Context
        from std_msgs.msg import Bool

        from na_common.ros_node import make_executor

        self._truth, self._frame_id = truth, frame_id
        self._wrench_cls, self._bool_cls = WrenchStamped, Bool
        self.context = Context()
        use_udp_transport()
        rclpy.init(context=self.context, args=[])
        self.node = rclpy.create_node("sim_truth", context=self.context)
        self.wrench_pub = self.node.create_publisher(WrenchStamped, topics.TRUTH_WRENCH, 10)
        self.contact_pub = self.node.create_publisher(Bool, topics.TRUTH_CONTACT, 10)
        self.grasp_pub = self.node.create_publisher(Bool, topics.GRASP, 10)
        self.node.create_timer(1.0 / rate_hz, self._publish)
        self._rig_health = rig_health
        if rig_health is not None:
            self.diagnostics_pub = self.node.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
            self.node.create_timer(HEALTH_PERIOD_S, self._publish_health)
        self.executor = make_executor(self.context)
        self.executor.add_node(self.node)
        self._thread = threading.Thread(target=self._spin, name="na_sim_truth", daemon=True)
        self.error: BaseException | None = None

    def _spin(self) -> None:
        try:
            while self.context.ok():
                self.executor.spin_once(timeout_sec=0.1)
        except BaseException as exc:   # surfaced to the rig's supervisor
            if self.context.ok():
                self.error = exc

    def _publish(self) -> None:
        truth = self._truth()
        stamp = self.node.get_clock().now().to_msg()
        wrench = self._wrench_cls()
        wrench.header.stamp, wrench.header.frame_id = stamp, self._frame_id
        fx, fy, fz = (float(v) for v in truth.force_base)
        wrench.wrench.force.x, wrench.wrench.force.y, wrench.wrench.force.z = fx, fy, fz
        self.wrench_pub.publish(wrench)
        self.contact_pub.publish(self._bool_cls(data=bool(truth.contact)))
        self.grasp_pub.publish(self._bool_cls(data=bool(truth.grasp)))

    def _publish_health(self) -> None:
        from na_common.ros_node import diagnostic_array, diagnostic_status

        health = self._rig_health()
        status = diagnostic_status(RIG_PACE_STATUS, "na-sim rig", health["level"], health["message"],
                                   health["values"])
        self.diagnostics_pub.publish(diagnostic_array(self.node, [status]))

    def start(self) -> TruthPublisher:
        self._thread.start()
        return self

    def stop(self) -> None:
        import rclpy

        rclpy.try_shutdown(context=self.context)
        self._thread.join(timeout=2.0)
        self.node.destroy_node()


@dataclass(frozen=True)
class TruthSetup:
    record_path: str              # the physics' record (na_sim.rig_record)
    stall_margin: float           # s behind wall time that counts as a stall (ERROR on /diagnostics)


def _serve_truth(control, setup: TruthSetup) -> None:
    """Child process: the truth publisher at normal priority, fed from the physics' record."""
    from na_sim.rig_record import PaceStatus, RigRecordReader

    take_realtime(0)
    reader = RigRecordReader(setup.record_path)
    publisher = TruthPublisher(reader.truth, rig_health=PaceStatus(reader, setup.stall_margin).status).start()
    serve(control, {}, lambda _request: {"alive": publisher.error is None})
    publisher.stop()
    reader.close()
    say_goodbye(control, {})


def start_truth_publisher(setup: TruthSetup) -> ChildProcess:
    """The ROS side of the rig in a process of its own (rclpy never shares the physics' interpreter)."""
    return ChildProcess(_serve_truth, setup, "truth-publisher")
