"""Teleop node: wires parameters, topics, a stale-check timer and the enable service to
:class:`na_teleop.teleop_core.TeleopCore`.

Topics: subscribes ``/leader/arm_state`` and ``/follower/arm_state`` (na_msgs/ArmState) and
``/diagnostics`` (the follower driver's ``<driver>: trip`` status) and ``/estimator/force``
(geometry_msgs/WrenchStamped, for the protective stop), publishes ``/follower/command`` (na_msgs/JointCommand)
from inside the leader callback and its own state on ``/diagnostics`` (``<node>`` and
``<node>: protective stop``). Services ``~/enable`` (std_srvs/SetBool) and ``~/release_protective_stop``
(std_srvs/Trigger).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import WrenchStamped
from rclpy.node import Node
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from std_srvs.srv import SetBool, Trigger

from na_common import topics
from na_common.diagnostics import PROTECTIVE_STOP_PART, TRIP_PART, TRIP_REASON_KEY, status_name
from na_common.protective_stop import ProtectiveStopConfigError
from na_common.ros_node import declare_and_read, diagnostic_array, diagnostic_status, run_node, status_reports, usage
from na_description import JointNameError, RobotSpec, SpecError, load_spec
from na_msgs.msg import ArmState, JointCommand
from na_teleop import protective_stop_params
from na_teleop.teleop_core import (
    DEFAULT_MAX_STEP_RAD,
    DEFAULT_OVERLOAD_CURRENT_A,
    DEFAULT_STALE_TIMEOUT_S,
    TeleopConfig,
    TeleopConfigError,
    TeleopCore,
)

LEADER_TOPIC = topics.LEADER_ARM_STATE
FOLLOWER_TOPIC = topics.FOLLOWER_ARM_STATE
COMMAND_TOPIC = topics.FOLLOWER_COMMAND

PARAMETER_DESCRIPTIONS = {
    "robot_spec": "Path of the robot spec YAML (joint names, limits, gripper map); empty: the OpenManipulator-X "
                  "spec shipped with na_description. ArmState messages are reordered by joint name.",
    "joint_sign": "Per joint: follower = sign * leader + offset. Revolute joints: 1 or -1; gripper: any non-zero "
                  "scale.",
    "joint_offset": "Per joint offset added after the sign, rad (gripper: servo angle, rad).",
    "max_step_per_cycle": "Per joint largest change of the command between two leader samples, rad > 0.",
    "soft_start_duration": "Seconds over which the follower is brought from its own pose to the leader's after "
                           "start-up, enable or a stale leader (0: no blend, only the step limit).",
    "stale_timeout": "Seconds without a leader sample after which the follower holds.",
    "stale_check_period": "Seconds between timer checks for a stale leader (> 0).",
    "overload_current": "Follower |current| limit in A (paper: 1200 mA safety limit).",
    "overload_window": "Seconds the follower current must stay above overload_current to stop following.",
    "stale_resume_jump": "rad: after a stale leader gap, a leader within this distance of the held goal (every "
                         "joint) is tracked again at once (step limit applies); farther: a soft start.",
    "start_enabled": "Follow the leader from start-up; false: wait for ~/enable true.",
    "warn_throttle_period": "Seconds between repeated warnings of the same kind (stale leader, ...).",
    "follower_driver": "Full name of the follower's arm driver node: its '<name>: trip' status on /diagnostics "
                       "stops the commands while it is tripped, and <name>/reboot is the service named to bring it "
                       "back.",
    **protective_stop_params.DESCRIPTIONS,
}
RELEASE_SERVICE = "~/release_protective_stop"


def default_parameters(spec: RobotSpec) -> dict[str, Any]:
    """Parameter defaults; the per-joint lists have one entry per joint of ``spec``."""
    n = spec.n_motors
    return {
        "robot_spec": "",
        "joint_sign": [1.0] * n,
        "joint_offset": [0.0] * n,
        "max_step_per_cycle": [DEFAULT_MAX_STEP_RAD] * n,
        "soft_start_duration": 3.0,
        "stale_timeout": DEFAULT_STALE_TIMEOUT_S,
        "stale_check_period": 0.02,
        "overload_current": DEFAULT_OVERLOAD_CURRENT_A,
        "overload_window": 0.2,
        "stale_resume_jump": 0.3,
        "start_enabled": True,
        "warn_throttle_period": 2.0,
        "follower_driver": topics.FOLLOWER_DRIVER,
        **protective_stop_params.DEFAULTS,
    }


class TeleopNode(Node):
    """Event-driven leader -> follower teleoperation."""

    def __init__(self, **node_kwargs) -> None:
        super().__init__("teleop", **node_kwargs)
        spec_path = declare_and_read(self, {"robot_spec": ""}, PARAMETER_DESCRIPTIONS)["robot_spec"]
        try:
            self._spec = load_spec(spec_path or None)
        except SpecError as error:
            raise TeleopConfigError(f"invalid teleop parameter robot_spec: {error}") from error
        try:
            protective_stop_params.declare(self)       # with their ranges, before declare_and_read reads them
        except ProtectiveStopConfigError as error:
            raise TeleopConfigError(f"invalid teleop parameter {error}") from error
        params = declare_and_read(self, default_parameters(self._spec), PARAMETER_DESCRIPTIONS)
        driver = params["follower_driver"]
        self._trip_status = status_name(driver, TRIP_PART)
        self.core = TeleopCore(self._config(params, f"{driver}/{topics.REBOOT_SERVICE}"),
                               enabled=params["start_enabled"])
        self._stop_status = status_name(self.get_fully_qualified_name(), PROTECTIVE_STOP_PART)
        self._throttle = params["warn_throttle_period"]
        self._last_log: dict[str, float] = {}
        self._names = list(self.core.config.joint_names)
        self._gripper_map = self._spec.gripper

        self.command_pub = self.create_publisher(JointCommand, COMMAND_TOPIC, QoSProfile(depth=10))
        # Best-effort subscriptions match both reliable and best-effort publishers.
        self.create_subscription(ArmState, LEADER_TOPIC, self._on_leader, qos_profile_sensor_data)
        self.create_subscription(ArmState, FOLLOWER_TOPIC, self._on_follower, qos_profile_sensor_data)
        self.create_subscription(DiagnosticArray, topics.DIAGNOSTICS, self._on_diagnostics, 50)
        self._diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
        self._published_state = self.core.state
        self.create_service(SetBool, "~/enable", self._on_enable)
        self.create_service(Trigger, RELEASE_SERVICE, self._on_release)
        if self.core.config.protective_stop.enabled:
            self.create_subscription(WrenchStamped, topics.ESTIMATED_FORCE, self._on_force, qos_profile_sensor_data)
        period = params["stale_check_period"]
        if not period > 0.0:
            raise TeleopConfigError(f"stale_check_period must be > 0 s, got {period}")
        self.create_timer(period, self._on_timer)
        self.create_timer(1.0, self._publish_diagnostics)
        self.get_logger().info(
            f"teleop ready ({self.core.state.value}): {LEADER_TOPIC} -> {COMMAND_TOPIC}, joints {self._names}")

    # ------------------------------------------------------------------ parameters
    def _config(self, params: dict[str, Any], follower_reboot: str) -> TeleopConfig:
        try:
            return TeleopConfig.from_spec(
                self._spec,
                sign=np.array(params["joint_sign"], dtype=float),
                offset=np.array(params["joint_offset"], dtype=float),
                max_step=np.array(params["max_step_per_cycle"], dtype=float),
                soft_start_duration=params["soft_start_duration"],
                stale_timeout=params["stale_timeout"],
                overload_current=params["overload_current"],
                overload_window=params["overload_window"],
                stale_resume_jump=params["stale_resume_jump"],
                follower_reboot=follower_reboot,
                protective_stop=protective_stop_params.config(params),
                release_service=f"{self.get_fully_qualified_name()}/release_protective_stop",
            )
        except (TeleopConfigError, ProtectiveStopConfigError) as error:
            raise TeleopConfigError(f"invalid teleop parameter {error}") from error

    # ------------------------------------------------------------------ callbacks
    def _in_spec_order(self, msg: ArmState, role: str, fields: tuple[str, ...]) -> list[np.ndarray | None] | None:
        """The named arrays of ``msg`` in spec order (None for an empty array); None, logged, when the
        names do not match the spec or an array's length differs from the names'."""
        try:
            return [self._spec.reorder(msg.name, np.asarray(getattr(msg, f), dtype=float), f)
                    if len(getattr(msg, f)) else None for f in fields]
        except JointNameError as error:
            self._log("error", f"names_{role}", f"{role} ArmState ignored: {error}")
            return None

    def _on_leader(self, msg: ArmState) -> None:
        now = time.monotonic()
        arrays = self._in_spec_order(msg, "leader", ("position", "stale"))
        if arrays is None or arrays[0] is None:
            return
        position, stale = arrays
        command = self.core.on_leader(position, now, None if stale is None else stale.astype(bool))
        if command is not None:
            self._publish_command(command, msg.header.frame_id)
        self._flush_events()

    def _publish_command(self, command, frame_id: str) -> None:
        out = JointCommand()
        out.header.stamp = self.get_clock().now().to_msg()
        out.header.frame_id = frame_id
        out.name = self._names
        out.position = command.tolist()
        gripper = self.core.config.gripper_index
        if gripper is not None:
            out.gripper_slide = float(self._gripper_map.angle_to_slide(command[gripper]))
        self.command_pub.publish(out)

    def _on_follower(self, msg: ArmState) -> None:
        arrays = self._in_spec_order(msg, "follower", ("position", "current"))
        if arrays is None:
            return
        self.core.on_follower(*arrays, time.monotonic())
        self._flush_events()
    def _on_force(self, msg: WrenchStamped) -> None:
        f = msg.wrench.force
        hold = self.core.on_force((f.x, f.y, f.z), time.monotonic())
        if hold is not None:
            self._publish_command(hold, msg.header.frame_id)
        self._flush_events()

    def _on_timer(self) -> None:
        self.core.check_stale(time.monotonic())
        self._flush_events()

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        for status in status_reports(msg):
            if status.name == self._trip_status:
                self.core.on_follower_trip(status.values.get(TRIP_REASON_KEY) or status.message
                                           if status.failed else None)
        self._flush_events()

    def _publish_diagnostics(self) -> None:
        """The teleop state on /diagnostics (every second and whenever it changes)."""
        self._published_state = self.core.state
        stop, now = self.core.protective_stop, time.monotonic()
        stop_values = stop.values()
        if stop.config.enabled:
            stop_values["estimate_stale"] = str(stop.check_age(now)).lower()
        statuses = [diagnostic_status(self.get_fully_qualified_name(), "teleop", *self.core.status(),
                                      {"state": self.core.state.value}),
                    diagnostic_status(self._stop_status, "teleop", *stop.status(now),
                                      {**stop_values, "release_service": self.core.config.release_service})]
        self._diag_pub.publish(diagnostic_array(self, statuses))

    def _on_enable(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        response.message = self.core.set_enabled(bool(request.data), time.monotonic())
        response.success = True
        self._flush_events()
        return response

    def _on_release(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        response.success, response.message = self.core.release_protective_stop(time.monotonic())
        self._flush_events()
        self._publish_diagnostics()
        return response

    # ------------------------------------------------------------------ logging
    def _flush_events(self) -> None:
        for event in self.core.drain_events():
            self._log(event.level, event.key, event.message)
        if self.core.state is not self._published_state:
            self._publish_diagnostics()

    def _log(self, level: str, key: str, message: str) -> None:
        """Info always; warnings and errors at most once per throttle period per key."""
        logger = self.get_logger()
        if level == "info":
            logger.info(message)
            return
        now = time.monotonic()
        if now - self._last_log.get(key, -float("inf")) < self._throttle:
            return
        self._last_log[key] = now
        # rclpy binds a severity to each call site, so each level needs its own call.
        if level == "error":
            logger.error(message)
        else:
            logger.warning(message)


HELP_SUMMARY = ("Teleoperation: follows the leader arm with the follower, one follower/command (na_msgs/JointCommand)\n"
                "per leader/arm_state (na_msgs/ArmState), with soft start, step limit, stale-leader hold,\n"
                "follower overload stop, a hold while the follower driver is tripped (its /diagnostics) and an\n"
                "optional protective stop on the estimated contact force (/estimator/force);\n"
                "services ~/enable (SetBool), ~/release_protective_stop (Trigger). Parameter file: config/teleop.yaml.")


def main(argv: list[str] | None = None) -> int:
    return run_node("teleop",
                    lambda: usage("teleop", HELP_SUMMARY, default_parameters(load_spec()), PARAMETER_DESCRIPTIONS),
                    TeleopNode, startup_errors=(TeleopConfigError,), argv=argv)


if __name__ == "__main__":
    sys.exit(main())
