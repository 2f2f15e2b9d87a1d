"""Policy node: wires the follower's state and the estimator's force/contact to :class:`PolicyCore` and
publishes ``/follower/command`` at the policy's rate (60 Hz), its status on ``/diagnostics`` and in the log. The
protective stop (off by default; parameters as teleop's) holds the arm on the estimator's force until
``~/release_protective_stop`` (std_srvs/Trigger); its status is ``policy: protective stop``."""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile, ReliabilityPolicy
from std_srvs.srv import SetBool, Trigger

from na_common import topics
from na_common.diagnostics import PROTECTIVE_STOP_PART, status_name
from na_common.latency_stats import LatencyStats
from na_common.protective_stop import ProtectiveStopConfigError
from na_common.ros_node import (
    declare_and_read,
    diagnostic_array,
    diagnostic_status,
    log_at,
    run_node,
    spin_node,
    usage,
)
from na_common.stamps import stamp_seconds
from na_description import load_spec
from na_description.features import WINDOW_MAX_GAP_S
from na_msgs.msg import ArmState, Contact, JointCommand
from na_policy.core import PolicyCore, SafetyConfig
from na_policy.policy_file import PolicyFileError, load_policy
from na_teleop import protective_stop_params

DEFAULTS: dict[str, Any] = {
    "policy_path": "",
    "robot_spec": "",
    "max_step": 0.03,
    "max_lead": 0.12,
    "state_timeout": 0.1,
    "estimator_timeout": 1.0,
    "start_duration": 2.0,
    "start_settle": 0.5,
    "estimator_warmup": 0.25,
    "estimator_gap": WINDOW_MAX_GAP_S,
    "watchdog_period": 0.05,
    "diagnostics_period": 1.0,
    "executor": "events",
    **protective_stop_params.DEFAULTS,
}
DESCRIPTIONS = {
    "policy_path": "policy file written by `na-policy train` (required)",
    "robot_spec": "robot spec YAML; \"\" = the OpenManipulator-X spec of na_description",
    "max_step": "rad, largest change of a joint's command between two commands",
    "max_lead": "rad, largest distance between a joint's command and its measured position",
    "state_timeout": "s, a follower state older than this on arrival is not acted on (hold)",
    "estimator_timeout": "s without /estimator/force or /estimator/contact after they were heard: stop and hold",
    "start_duration": "s, move from the first measured pose to the policy's start pose before acting",
    "start_settle": "s held at the start pose after the move (a force policy tares the estimator's force then)",
    "estimator_warmup": "s of the estimator's first output left out of the tare (its history window starts padded)",
    "estimator_gap": "s between estimates after which the estimator restarted its window (its max_gap): a force "
                     "policy then holds for estimator_warmup s",
    "watchdog_period": "s between checks for a silent follower",
    "diagnostics_period": "s between /diagnostics messages",
    **protective_stop_params.DESCRIPTIONS,
    "executor": "events (rclpy's EventsExecutor) or single_threaded",
}


class PolicyNode(Node):
    def __init__(self, **node_kwargs) -> None:
        super().__init__("policy", **node_kwargs)
        try:
            protective_stop_params.declare(self)       # with their ranges, before declare_and_read reads them
            p = declare_and_read(self, DEFAULTS, DESCRIPTIONS)
            stop = protective_stop_params.config(p)
        except ProtectiveStopConfigError as error:
            raise PolicyFileError(f"invalid parameter {error}") from error
        if not p["policy_path"]:
            raise PolicyFileError("parameter policy_path is empty: give the policy file from `na-policy train`")
        self.executor_kind = p["executor"]
        self.spec = load_spec(p["robot_spec"] or None)
        policy = load_policy(p["policy_path"])
        if policy.joint_names != list(self.spec.joint_names):
            raise PolicyFileError(f"policy {p['policy_path']} is for joints {policy.joint_names}, this arm has "
                                  f"{list(self.spec.joint_names)}")
        lower, upper = self.spec.servo_angle_limits()
        self.core = PolicyCore(policy, SafetyConfig(lower=np.asarray(lower), upper=np.asarray(upper),
                                                    max_step=p["max_step"], max_lead=p["max_lead"],
                                                    state_timeout=p["state_timeout"],
                                                    estimator_timeout=p["estimator_timeout"],
                                                    start_duration=p["start_duration"],
                                                    start_settle=p["start_settle"],
                                                    estimator_warmup=p["estimator_warmup"],
                                                    estimator_gap=p["estimator_gap"], protective_stop=stop,
                                                    gripper_index=self.spec.gripper_index))
        self.latency = LatencyStats()          # state callback entered -> command published
        self.inference = LatencyStats()
        self._command = JointCommand(name=list(self.spec.joint_names))
        self._reported = (None, "")
        self._started = time.monotonic()
        qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
        self.pub_command = self.create_publisher(JointCommand, topics.FOLLOWER_COMMAND, qos)
        self.pub_diagnostics = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        self.create_subscription(ArmState, topics.FOLLOWER_ARM_STATE, self._on_state, qos)
        if self.core.needs_estimator or stop.enabled:
            self.create_subscription(WrenchStamped, topics.ESTIMATED_FORCE, self._on_force, qos)
        if self.core.needs_estimator:
            self.create_subscription(Contact, topics.ESTIMATED_CONTACT, self._on_contact, qos)
        self.create_service(SetBool, "~/enable", self._on_enable)
        self.create_service(Trigger, "~/release_protective_stop", self._on_release)
        self.create_timer(p["watchdog_period"], self._watchdog)
        self.create_timer(p["diagnostics_period"], self._publish_diagnostics)
        self.get_logger().info(f"loaded {p['policy_path']}: variant '{policy.variant}', chunk {policy.chunk}, "
                               f"{policy.rate_hz:g} Hz")

    def _on_force(self, msg: WrenchStamped) -> None:
        f = msg.wrench.force
        self.core.on_force((f.x, f.y, f.z), stamp=stamp_seconds(msg.header.stamp))

    def _on_contact(self, msg: Contact) -> None:
        self.core.on_contact(msg.probability)

    def _on_state(self, msg: ArmState) -> None:
        entered = time.perf_counter()
        clock = self.get_clock().now().nanoseconds * 1e-9
        decision = self.core.on_state(stamp_seconds(msg.header.stamp), msg.name, msg.position, clock=clock)
        if decision is None:
            return
        out = self._command
        out.header.stamp = self.get_clock().now().to_msg()
        out.position = decision.command.tolist()
        out.gripper_slide = float(self.spec.gripper.angle_to_slide(decision.command[-1]))
        self.pub_command.publish(out)
        if decision.acted:
            self.latency.add(time.perf_counter() - entered)
            self.inference.add(decision.inference_s)
        self._report()

    def _on_enable(self, request, response):
        if request.data:
            self.core.reset()
            response.message = "policy re-enabled; it acts once its inputs are fresh"
        else:
            self.core.stopped_reason = "stopped by ~/enable false; holding the arm"
            response.message = self.core.stopped_reason
        response.success = True
        self._report()
        return response

    def _on_release(self, _request, response):
        response.success, response.message = self.core.release_protective_stop()
        self.get_logger().info(response.message)
        self._report()
        return response

    def _watchdog(self) -> None:
        self.core.check()
        self._report()

    def _report(self) -> None:
        """Log each change of status once (the why of a hold or a stop)."""
        level, message = self.core.level, self.core.message
        if (level, message.split(":")[0]) != self._reported:
            self._reported = (level, message.split(":")[0])
            log_at(self.get_logger(), level, message)

    def _publish_diagnostics(self) -> None:
        core = self.core
        values = {"variant": core.policy.variant, "commands": core.commands, "actions": core.actions,
                  "holds": core.holds, "clamped": core.clamps, "refused": core.refused,
                  "estimator_restarts": core.estimator_restarts,
                  "command_rate_hz": core.commands / max(time.monotonic() - self._started, 1e-9),
                  "latency_p50_ms": self.latency.percentile(50) * 1e3,
                  "latency_p99_ms": self.latency.percentile(99) * 1e3,
                  "inference_p50_ms": self.inference.percentile(50) * 1e3}
        stop = core.protective_stop
        statuses = [diagnostic_status("policy", "na_policy", core.level, core.message, values),
                    diagnostic_status(status_name("policy", PROTECTIVE_STOP_PART), "na_policy",
                                      *stop.status(time.monotonic()),
                                      stop.values())]
        self.pub_diagnostics.publish(diagnostic_array(self, statuses))


def spin_policy(node: PolicyNode) -> int:
    """Spin ``node`` on the executor its ``executor`` parameter names, until a signal or shutdown."""
    spin_node(node, executor_kind=node.executor_kind)
    return 0


HELP_SUMMARY = ("Behaviour-cloning policy: from the follower's arm_state (na_msgs/ArmState) and, for a force policy,\n"
                "/estimator/force and /estimator/contact to /follower/command (na_msgs/JointCommand) at the policy's\n"
                "rate (60 Hz), with command clamping, a stale-input hold and a stop on estimator loss; status on\n"
                "/diagnostics; service ~/enable (SetBool). Parameter file: config/policy.yaml.")


def main(argv: list[str] | None = None) -> int:
    return run_node("policy", lambda: usage("policy", HELP_SUMMARY, DEFAULTS, DESCRIPTIONS), PolicyNode,
                    spin=spin_policy, startup_errors=(PolicyFileError,), argv=argv)


if __name__ == "__main__":
    sys.exit(main())
