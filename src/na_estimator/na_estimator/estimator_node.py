"""Estimator node: wires the follower's ArmState and JointCommand to EstimatorCore and publishes
force, contact, condition, torque surrogate, the combined estimate, an RViz arrow and diagnostics."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import Point, Vector3, WrenchStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker

from na_common import topics
from na_common.diagnostics import ESTIMATOR_STATUS, motor_part, status_name
from na_common.latency_stats import LatencyStats
from na_common.machine import cpu_info
from na_common.ros_node import (
    EXECUTOR_KINDS,
    ParameterError,
    declare_and_read,
    diagnostic_array,
    diagnostic_status,
    run_node,
    spin_node,
    usage,
)
from na_common.stamps import stamp_seconds
from na_description import SpecError, load_spec
from na_description.features import WINDOW_MAX_GAP_S
from na_description.model import Kinematics
from na_description.spec import DEFAULT_ROBOT
from na_estimator.condition_status import ConditionStatus
from na_estimator.estimator_core import ArmInput, Estimate, EstimatorCore
from na_estimator.model_loader import load_model
from na_estimator.onnx_model import DEFAULT_PROVIDERS, ModelLoadError, OnnxActuatorModel
from na_estimator.variant_choice import AUTO, VariantChoice
from na_estimator.wear_status import WearStatus
from na_msgs.msg import ActuatorEstimate, ArmState, Contact, JointCommand, MotorCondition

MARKER_SCALE_M_PER_N = 0.02   # arrow length per newton in RViz

DEFAULTS: dict[str, Any] = {
    "model_path": "",
    "robot": DEFAULT_ROBOT,
    "providers": list(DEFAULT_PROVIDERS),
    "intra_op_threads": 1,
    "inference_variant": AUTO,
    "arm_state_topic": topics.FOLLOWER_ARM_STATE,
    "command_topic": topics.FOLLOWER_COMMAND,
    "stale_timeout": 0.1,
    "future_tolerance": 0.02,
    "command_timeout": 0.5,
    "max_gap": WINDOW_MAX_GAP_S,
    "contact_threshold_on": 0.6,
    "contact_threshold_off": 0.4,
    "frame_id": "world",
    "publish_marker": True,
    "publish_split_topics": True,
    "diagnostics_period": 1.0,
    "executor": "events",
    "input_reliability": "reliable",
    "wear_reference": "",
}
DESCRIPTIONS = {
    "model_path": "ONNX model exported by `na-train export` (required)",
    "robot": "the arm: a shipped robot spec (open_manipulator_x or omx_x, so101) or a spec YAML path; "
             "a model trained for another robot is refused",
    "providers": "ONNX Runtime execution providers in order of preference; falls back to CPU",
    "intra_op_threads": "ONNX Runtime intra-op threads",
    "inference_variant": "which inference variant of the model package to run: auto (the fastest on this machine: "
                         "timed at start-up in about a second, or the choice cached for this CPU, model and ONNX "
                         "Runtime in $XDG_CACHE_HOME/neuralactuator) or a variant name (fp32, int8-dynamic, "
                         "int8-static, int8-mixed) to force it",
    "arm_state_topic": "follower ArmState input",
    "command_topic": "follower JointCommand input (goal features)",
    "stale_timeout": "s; an ArmState older than this on arrival is not estimated on",
    "future_tolerance": "s; an ArmState stamped further than this ahead of the node's clock is not estimated on",
    "command_timeout": "s; the latest JointCommand must be at most this old",
    "max_gap": "s; a gap between states longer than this restarts the history window",
    "contact_threshold_on": "contact probability above which contact starts",
    "contact_threshold_off": "contact probability below which contact ends",
    "frame_id": "robot base frame of the force outputs",
    "publish_marker": "publish the RViz force arrow",
    "publish_split_topics": "publish force/contact/condition/torque topics besides the combined estimate",
    "diagnostics_period": "s between /diagnostics messages",
    "executor": "events (rclpy's EventsExecutor, lower latency; falls back when rclpy lacks it) or single_threaded",
    "input_reliability": "QoS reliability of the ArmState and JointCommand subscriptions: reliable or best_effort",
    "wear_reference": "wear_reference.json of the healthy arm (written by `na-train monitor --reference NAD`): the "
                      "wear monitor runs on every motor and reports on /diagnostics; empty: off",
}
RELIABILITY = {"reliable": ReliabilityPolicy.RELIABLE, "best_effort": ReliabilityPolicy.BEST_EFFORT}


class EstimatorNode(Node):
    def __init__(self, **node_kwargs) -> None:
        super().__init__("estimator", **node_kwargs)
        p = declare_and_read(self, DEFAULTS, DESCRIPTIONS)
        self.model_path, self.providers, self.threads = p["model_path"], p["providers"], p["intra_op_threads"]
        self.variant_request = p["inference_variant"]
        self.frame_id, self.publish_marker = p["frame_id"], p["publish_marker"]
        self.publish_split = p["publish_split_topics"]
        if p["executor"] not in EXECUTOR_KINDS:
            raise ParameterError(f"executor must be one of {', '.join(EXECUTOR_KINDS)}, got {p['executor']!r}")
        if p["input_reliability"] not in RELIABILITY:
            raise ParameterError(f"input_reliability must be one of {', '.join(RELIABILITY)}, "
                                 f"got {p['input_reliability']!r}")
        if not p["future_tolerance"] >= 0.0:
            raise ParameterError(f"future_tolerance must be >= 0 s, got {p['future_tolerance']}")
        self.executor_kind = p["executor"]

        try:
            self.spec = load_spec(p["robot"] or None)
        except SpecError as exc:
            raise ParameterError(f"robot: {exc}") from None
        self._kinematics = Kinematics(self.spec)
        model, self.choice = self._load_model(self.model_path)
        self.core = EstimatorCore(model, self.spec, stale_timeout=p["stale_timeout"],
                                  future_tolerance=p["future_tolerance"],
                                  command_timeout=p["command_timeout"], max_gap=p["max_gap"],
                                  contact_on=p["contact_threshold_on"], contact_off=p["contact_threshold_off"])
        self.get_logger().info(f"loaded {self.model_path}: {self.choice.describe()}; {model.provider.describe()}; "
                               f"CPU {cpu_info().describe()}")
        # Of the estimated-on states: stamp -> callback (transport and executor), callback -> estimate published.
        self.arrival, self.handling = LatencyStats(), LatencyStats()
        self._estimate_msg = ActuatorEstimate(name=self.spec.joint_names)
        self.condition_status = ConditionStatus(self.spec.joint_names, self.spec.condition_joint)
        self.wear_status = self._wear_status(p["wear_reference"])
        self._diagnostics_period = p["diagnostics_period"]

        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.pub_estimate = self.create_publisher(ActuatorEstimate, topics.ESTIMATE, qos)
        self.pub_force = self.create_publisher(WrenchStamped, topics.ESTIMATED_FORCE, qos)
        self.pub_contact = self.create_publisher(Contact, topics.ESTIMATED_CONTACT, qos)
        self.pub_condition = self.create_publisher(MotorCondition, topics.ESTIMATED_CONDITION, qos)
        self.pub_torque = self.create_publisher(JointState, topics.ESTIMATED_TORQUE, qos)
        self.pub_marker = self.create_publisher(Marker, topics.ESTIMATE_MARKER, qos)
        self.pub_diagnostics = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        inputs = QoSProfile(depth=10, reliability=RELIABILITY[p["input_reliability"]])
        self.create_subscription(JointCommand, p["command_topic"], self._on_command, inputs)
        self.create_subscription(ArmState, p["arm_state_topic"], self._on_arm_state, inputs)
        self.create_service(Trigger, "~/reload", self._on_reload)
        self.create_timer(p["diagnostics_period"], self._publish_diagnostics)

    def _load_model(self, path: str) -> tuple[OnnxActuatorModel, VariantChoice]:
        if not path:
            raise ModelLoadError("parameter model_path is empty: give the ONNX model from `na-train export`")
        return load_model(path, self.spec, variant=self.variant_request, providers=list(self.providers),
                          intra_op_threads=self.threads, warn=self.get_logger().warning)

    def _wear_status(self, path: str):
        if not path:
            return None
        try:
            status = WearStatus(self.spec, path)
        except ValueError as exc:
            raise ParameterError(f"wear_reference: {exc}") from None
        self.get_logger().info(f"wear monitor on: reference {path}")
        return status

    def _on_command(self, msg: JointCommand) -> None:
        self.core.on_command(stamp_seconds(msg.header.stamp), np.asarray(msg.position), list(msg.name),
                             self.get_clock().now().nanoseconds * 1e-9)

    def _on_arm_state(self, msg: ArmState) -> None:
        with self._unless_shut_down():
            self._estimate(msg)

    def _estimate(self, msg: ArmState) -> None:
        entered = time.perf_counter()
        now = self.get_clock().now().nanoseconds * 1e-9
        stamp = stamp_seconds(msg.header.stamp)
        arm = ArmInput(
            stamp=stamp, names=msg.name, position=np.asarray(msg.position), gripper_slide=float(msg.gripper_slide),
            velocity=np.asarray(msg.velocity), effort=np.asarray(getattr(msg, self.spec.effort_signal)),
            input_voltage=np.asarray(msg.input_voltage), temperature=np.asarray(msg.temperature),
            stale=np.asarray(msg.stale, dtype=bool) if len(msg.stale) else None,
        )
        estimate = self.core.on_arm_state(arm, now)
        if estimate is not None:
            self._publish(msg, estimate, entered)
            self.arrival.add(now - stamp)

    def _publish(self, state: ArmState, est: Estimate, entered: float) -> None:
        header = state.header
        header.frame_id = self.frame_id
        names = self.spec.joint_names
        # One message object, refilled: constructing one runs rclpy's per-field checks (~4x the refill's cost).
        out = self._estimate_msg
        out.header = header
        out.torque_surrogate = est.torque_surrogate.tolist()
        out.force_raw.x, out.force_raw.y, out.force_raw.z = (float(v) for v in est.force_raw)
        out.force.x, out.force.y, out.force.z = (float(v) for v in est.force)
        out.contact_probability, out.in_contact = est.contact_probability, est.in_contact
        out.condition, out.inference_latency, out.window_fill = est.condition.tolist(), est.latency, est.window_fill
        self.pub_estimate.publish(out)
        self.handling.add(time.perf_counter() - entered)
        self.condition_status.add(est.condition, stamp_seconds(header.stamp), est.contact_probability)
        # The rest only for topics someone listens to: building and serialising four messages and the arrow's
        # forward kinematics cost more than the estimate itself (checking the subscriber count is ~0.5 us).
        if self.publish_split:
            if self.pub_force.get_subscription_count():
                wrench = WrenchStamped(header=header)
                wrench.wrench.force = out.force
                self.pub_force.publish(wrench)
            if self.pub_contact.get_subscription_count():
                self.pub_contact.publish(Contact(header=header, probability=est.contact_probability,
                                                 in_contact=est.in_contact))
            if self.pub_condition.get_subscription_count():
                self.pub_condition.publish(MotorCondition(header=header, name=names, score=out.condition))
            if self.pub_torque.get_subscription_count():
                self.pub_torque.publish(JointState(header=header, name=names, effort=out.torque_surrogate))
        if self.publish_marker and self.pub_marker.get_subscription_count():
            self.pub_marker.publish(self._arrow(state, est, header))
        if self.wear_status is not None:            # after publishing: ~50 us that no estimate waits for
            self.wear_status.add(stamp_seconds(header.stamp), state.name, state.position, state.velocity,
                                 getattr(state, self.spec.effort_signal), state.gripper_slide,
                                 est.contact_probability)

    def _arrow(self, state: ArmState, est: Estimate, header) -> Marker:
        position = self.spec.reorder(state.name, np.asarray(state.position), "position")   # checked by the core
        tip = self._kinematics.tool_position(position[: self.spec.n_arm])
        tail = tip - MARKER_SCALE_M_PER_N * est.force
        marker = Marker(header=header, ns="estimator", id=0, type=Marker.ARROW, action=Marker.ADD)
        marker.points = [Point(x=float(tail[0]), y=float(tail[1]), z=float(tail[2])),
                         Point(x=float(tip[0]), y=float(tip[1]), z=float(tip[2]))]
        marker.scale = Vector3(x=0.005, y=0.01, z=0.015)
        marker.color.r, marker.color.a = 1.0, float(max(0.2, est.contact_probability))
        return marker

    def _on_reload(self, _request, response):
        path = self.get_parameter("model_path").value
        self.variant_request = self.get_parameter("inference_variant").value
        try:
            model, choice = self._load_model(path)
        except ModelLoadError as exc:
            self.get_logger().error(str(exc))
            response.success, response.message = False, f"kept the previous model; could not load {path}: {exc}"
            return response
        self.core.set_model(model)
        self.condition_status.reset_monitor()
        self.model_path, self.choice = path, choice
        response.success, response.message = True, (f"loaded {path}: {choice.describe()}; {model.provider.describe()}"
                                                     "; condition monitor reset")
        self.get_logger().info(response.message)
        return response

    def _publish_diagnostics(self) -> None:
        with self._unless_shut_down():
            self._diagnostics()

    @contextlib.contextmanager
    def _unless_shut_down(self) -> Iterator[None]:
        """A callback interrupted by SIGINT, or running while SIGINT shuts the context down (the events executor may
        still dispatch a due timer or message), ends quietly and lets the spin loop end; other errors propagate."""
        try:
            yield
        except KeyboardInterrupt:
            self.context.try_shutdown()
        except Exception:
            if self.context.ok():
                raise

    def _motor_statuses(self) -> list:
        statuses = self.condition_status.statuses(self._diagnostics_period)
        return statuses if self.wear_status is None else self.wear_status.merge(statuses)

    def _diagnostics(self) -> None:
        core = self.core
        values = {"model": self.model_path, "dataset_id": core.model.contract.dataset_id,
                  "variant": core.model.variant, "variant_choice": self.choice.describe(),
                  "provider": core.model.provider.in_use,
                  "latency_p50_ms": core.latency.percentile(50) * 1e3,
                  "latency_p99_ms": core.latency.percentile(99) * 1e3,
                  "arrival_p50_ms": self.arrival.percentile(50) * 1e3,
                  "arrival_p99_ms": self.arrival.percentile(99) * 1e3,
                  "handling_p50_ms": self.handling.percentile(50) * 1e3,
                  "handling_p99_ms": self.handling.percentile(99) * 1e3,
                  **core.counters.as_dict(), "last_refusal": core.last_refusal}
        statuses = [diagnostic_status(ESTIMATOR_STATUS, "neuralactuator", *core.status(), values)]
        statuses += [diagnostic_status(status_name("estimator", motor_part(m.joint)), "neuralactuator", m.level,
                                       m.message, m.values)
                     for m in self._motor_statuses()]
        self.pub_diagnostics.publish(diagnostic_array(self, statuses))


HELP_SUMMARY = ("NeuralActuator estimator: from the follower's arm_state (na_msgs/ArmState) and command\n"
                "(na_msgs/JointCommand) to /estimator/estimate (na_msgs/ActuatorEstimate), force, contact,\n"
                "condition, torque, an RViz marker and /diagnostics; service ~/reload (Trigger). Parameter\n"
                "file: config/estimator.yaml.")


def spin_estimator(node: EstimatorNode) -> int:
    """Spin ``node`` on the executor its ``executor`` parameter names, until a signal or shutdown."""
    spin_node(node, executor_kind=node.executor_kind)
    return 0


def main(argv: list[str] | None = None) -> int:
    return run_node("estimator", lambda: usage("estimator", HELP_SUMMARY, DEFAULTS, DESCRIPTIONS), EstimatorNode,
                    spin=spin_estimator, startup_errors=(ModelLoadError,), argv=argv)


if __name__ == "__main__":
    sys.exit(main())
