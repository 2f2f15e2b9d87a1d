"""Recorder node: subscribes (raw CDR) to the configured topics as their publishers appear and
hands the bytes to RecorderCore; /diagnostics to its fault monitor (trips and silent buses void an
episode); start/stop/discard services; a JSON status topic for na-record."""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

from na_common import topics
from na_common.episode_bag import stamp_to_ns
from na_common.ros_node import declare_and_read, run_node, status_reports, usage
from na_msgs.srv import DiscardEpisode, StartEpisode, StopEpisode
from na_teleop.recorder_core import RecorderCore, RecorderError

DEFAULT_TOPICS = list(topics.EPISODE_TOPICS)
METADATA_KEYS = ("task", "payload_grams", "force_source", "condition", "operator", "robot")
DEFAULTS: dict[str, Any] = {
    "output_dir": "~/na_episodes",
    "storage": "mcap",
    "topics": DEFAULT_TOPICS,
    "task": "",
    "payload_grams": 0.0,
    "force_source": "none",
    "condition": "nominal",
    "operator": "",
    "robot": "",
    "chunk_period": 1.0,
    "min_free_mb": 100,
    "discovery_period": 0.5,
}
DESCRIPTIONS = {
    "output_dir": "directory that receives episode_NNNNNN/ bags",
    "storage": "rosbag2 storage plugin; only mcap is supported",
    "topics": "topics recorded in every episode (when published)",
    **{key: f"default episode metadata: {key}" for key in METADATA_KEYS},
    "robot": "episode metadata: the robot spec's name (open_manipulator_x, so101); empty: not recorded",
    "chunk_period": "s; the open chunk is written and fsynced at least this often",
    "min_free_mb": "MiB; refuse to start an episode with less free disk space",
    "discovery_period": "s between looks for the configured topics on the graph",
}


def message_class(msgtype: str):
    package, kind, name = msgtype.split("/")
    return getattr(importlib.import_module(f"{package}.{kind}"), name)


class RecorderNode(Node):
    def __init__(self, **node_kwargs) -> None:
        super().__init__("recorder", **node_kwargs)
        p = declare_and_read(self, DEFAULTS, DESCRIPTIONS)
        self.configured = list(p["topics"])
        if p["storage"] != "mcap":
            raise RecorderError(f"storage '{p['storage']}' is not supported; use mcap")
        self.core = RecorderCore(p["output_dir"], flush_period=p["chunk_period"],
                                 min_free_bytes=p["min_free_mb"] * 2**20,
                                 defaults={key: p[key] for key in METADATA_KEYS if p[key] != ""},
                                 configured_topics=self.configured)
        for warning in self.core.prepare().warnings():
            self.get_logger().warning(warning)
        self.qos = QoSProfile(depth=200, reliability=ReliabilityPolicy.RELIABLE)
        self._recorded_topics: dict[str, object] = {}
        self.create_service(StartEpisode, "~/start", self._on_start)
        self.create_service(StopEpisode, "~/stop", self._on_stop)
        self.create_service(DiscardEpisode, "~/discard", self._on_discard)
        self.status_pub = self.create_publisher(String, "~/status", 10)
        self.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics, 50)
        self.create_timer(p["discovery_period"], self._discover)
        self.create_timer(0.5, self._publish_status)
        self._discover()
        self.get_logger().info(f"recording to {self.core.output_dir}; topics: {', '.join(self.configured)}")

    def _discover(self) -> None:
        graph = dict(self.get_topic_names_and_types())
        for topic in self.configured:
            if topic in self._recorded_topics or topic not in graph or not graph[topic]:
                continue
            msgtype = graph[topic][0]
            try:
                cls = message_class(msgtype)
            except (ImportError, AttributeError, ValueError):
                self.get_logger().error(f"cannot record {topic}: message type {msgtype} is not importable")
                self._recorded_topics[topic] = None
                continue
            self._recorded_topics[topic] = self.create_subscription(
                cls, topic, lambda raw, t=topic: self._on_message(t, raw), self.qos, raw=True)
            self.core.add_topic(topic, msgtype)
            self.get_logger().info(f"recording {topic} ({msgtype})")

    def _on_message(self, topic: str, raw: bytes) -> None:
        was_recording = self.core.recording
        self.core.on_message(topic, self.get_clock().now().nanoseconds, raw)
        if was_recording and not self.core.recording:
            self.get_logger().error(f"episode ended by a write error: {self.core.error}")

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        stamp_ns = stamp_to_ns(msg.header.stamp) or self.get_clock().now().nanoseconds
        for fault in self.core.on_diagnostics(status_reports(msg), stamp_ns):
            if self.core.recording and fault.voids:
                self.get_logger().error(f"{self.core.writer.path.name} is void: {fault.describe()}")
            else:
                self.get_logger().warning(f"fault: {fault.describe()}")

    def _on_start(self, request, response):
        info = request.info
        meta = {"task": info.task, "payload_grams": info.payload_grams or None, "force_source": info.force_source,
                "condition": info.condition, "operator": info.operator_name, "notes": info.notes}
        try:
            writer = self.core.start(meta, self.get_clock().now().nanoseconds)
        except RecorderError as exc:
            response.success, response.message = False, str(exc)
            self.get_logger().error(str(exc))
            return response
        response.success, response.episode_id, response.path = True, writer.path.name, str(writer.path)
        response.message = f"recording {writer.path.name} ({writer.metadata['task']})"
        self.get_logger().info(response.message)
        return response

    def _on_stop(self, _request, response):
        try:
            report = self.core.stop(self.get_clock().now().nanoseconds)
        except RecorderError as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success, response.path = True, report.path
        response.episode_id = f"episode_{report.episode_id:06d}"
        response.duration = report.duration
        response.message_count = int(sum(t["count"] for t in report.topics.values()))
        response.message = "\n".join(report.lines())
        for line in report.lines():
            self.get_logger().info(line)
        return response

    def _on_discard(self, _request, response):
        try:
            path = self.core.discard()
        except RecorderError as exc:
            response.success, response.message = False, str(exc)
            return response
        response.success, response.episode_id, response.message = True, path.name, f"discarded {path}"
        self.get_logger().info(response.message)
        return response

    def _publish_status(self) -> None:
        status = self.core.live_status(self.get_clock().now().nanoseconds)
        self.status_pub.publish(String(data=json.dumps(status)))

    def close(self) -> None:
        """End a running episode (marked incomplete: it was cut short), then destroy the node."""
        if self.core.recording:
            report = self.core.stop(self.get_clock().now().nanoseconds, complete=False)
            print("\n".join(report.lines()), file=sys.stderr)
        self.destroy_node()


HELP_SUMMARY = ("Episode recorder: one rosbag2 MCAP per episode of the configured topics; services ~/start,\n"
                "~/stop, ~/discard (na_msgs), a JSON ~/status topic for na-record. Parameter file:\n"
                "config/recorder.yaml.")


def main(argv: list[str] | None = None) -> int:
    return run_node("recorder", lambda: usage("recorder", HELP_SUMMARY, DEFAULTS, DESCRIPTIONS), RecorderNode,
                    startup_errors=(RecorderError,), argv=argv)


if __name__ == "__main__":
    sys.exit(main())
