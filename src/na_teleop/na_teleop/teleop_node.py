"""Teleop node: wires parameters, topics, a stale-check timer and the enable service to
:class:`na_teleop.teleop_core.TeleopCore`.

Topics (relative, so a namespace moves them all): subscribes ``leader/arm_state`` and
``follower/arm_state`` (na_msgs/ArmState), publishes ``follower/command`` (na_msgs/JointCommand)
from inside the leader callback. Service ``~/enable`` (std_srvs/SetBool).
"""

from __future__ import annotations

import sys
import time

import numpy as np
import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from std_srvs.srv import SetBool

from na_common import topics
from na_description import load_spec
from na_msgs.msg import ArmState, JointCommand
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

# (name, default, description); a callable default is computed from the robot spec.
PARAMETERS: tuple[tuple[str, object, str], ...] = (
    ("joint_names", lambda spec: list(spec.joint_names),
     "Joint names in servo order; must equal the robot spec's (ArmState messages are reordered by name)."),
    ("joint_sign", lambda spec: [1.0] * spec.n_motors,
     "Per joint: follower = sign * leader + offset. Revolute joints: 1 or -1; gripper: any non-zero scale."),
    ("joint_offset", lambda spec: [0.0] * spec.n_motors,
     "Per joint offset added after the sign, rad (gripper: servo angle, rad)."),
    ("max_step_per_cycle", lambda spec: [DEFAULT_MAX_STEP_RAD] * spec.n_motors,
     "Per joint largest change of the command between two leader samples, rad > 0."),
    ("soft_start_duration", 3.0, "Seconds over which the follower is brought from its own pose to the leader's "
                                 "after start-up, enable or a stale leader (0: no blend, only the step limit)."),
    ("stale_timeout", DEFAULT_STALE_TIMEOUT_S, "Seconds without a leader sample after which the follower holds."),
    ("stale_check_period", 0.02, "Seconds between timer checks for a stale leader (> 0)."),
    ("overload_current", DEFAULT_OVERLOAD_CURRENT_A, "Follower |current| limit in A (paper: 1200 mA safety limit)."),
    ("overload_window", 0.2, "Seconds the follower current must stay above overload_current to stop following."),
    ("start_enabled", True, "Follow the leader from start-up; false: wait for ~/enable true."),
    ("warn_throttle_period", 2.0, "Seconds between repeated warnings of the same kind (stale leader, ...)."),
)


class TeleopNode(Node):
    """Event-driven leader -> follower teleoperation."""

    def __init__(self, **node_kwargs) -> None:
        super().__init__("teleop", **node_kwargs)
        self.declare_parameter("robot_spec", "", ParameterDescriptor(
            description="Path of the robot spec YAML; empty: the OpenManipulator-X spec shipped with na_description."))
        self._spec = load_spec(str(self._param("robot_spec")) or None)
        for name, default, description in PARAMETERS:
            value = default(self._spec) if callable(default) else default
            self.declare_parameter(name, value, ParameterDescriptor(description=description))
        self.core = TeleopCore(self._config(), enabled=self._param("start_enabled"))
        self._throttle = float(self._param("warn_throttle_period"))
        self._last_log: dict[str, float] = {}
        self._names = list(self.core.config.joint_names)
        self._gripper_map = self._spec.gripper
        self._leader_order: tuple[tuple[str, ...], np.ndarray] | None = None
        self._follower_order: tuple[tuple[str, ...], np.ndarray] | None = None

        self.command_pub = self.create_publisher(JointCommand, COMMAND_TOPIC, QoSProfile(depth=10))
        # Best-effort subscriptions match both reliable and best-effort publishers.
        self.create_subscription(ArmState, LEADER_TOPIC, self._on_leader, qos_profile_sensor_data)
        self.create_subscription(ArmState, FOLLOWER_TOPIC, self._on_follower, qos_profile_sensor_data)
        self.create_service(SetBool, "~/enable", self._on_enable)
        period = float(self._param("stale_check_period"))
        if not period > 0.0:
            raise TeleopConfigError(f"stale_check_period must be > 0 s, got {period}")
        self.create_timer(period, self._on_timer)
        self.get_logger().info(
            f"teleop ready ({self.core.state.value}): {LEADER_TOPIC} -> {COMMAND_TOPIC}, joints {self._names}")

    # ------------------------------------------------------------------ parameters
    def _param(self, name: str):
        return self.get_parameter(name).value

    def _config(self) -> TeleopConfig:
        base = TeleopConfig.from_spec(self._spec)
        names = tuple(self._param("joint_names"))
        if names != base.joint_names:
            raise TeleopConfigError(
                f"invalid teleop parameter joint_names: {list(names)} differ from the robot spec's"
                f" {list(base.joint_names)}")
        try:
            return TeleopConfig(
                joint_names=names,
                gripper_index=base.gripper_index,
                sign=np.array(self._param("joint_sign"), dtype=float),
                offset=np.array(self._param("joint_offset"), dtype=float),
                lower=base.lower,
                upper=base.upper,
                max_step=np.array(self._param("max_step_per_cycle"), dtype=float),
                soft_start_duration=float(self._param("soft_start_duration")),
                stale_timeout=float(self._param("stale_timeout")),
                overload_current=float(self._param("overload_current")),
                overload_window=float(self._param("overload_window")),
            )
        except TeleopConfigError as error:
            raise TeleopConfigError(f"invalid teleop parameter {error}") from error

    # ------------------------------------------------------------------ callbacks
    def _reorder(self, msg: ArmState, cache_attr: str) -> np.ndarray | None:
        """Index array taking message order to the configured joint order (cached per name list)."""
        names = tuple(msg.name)
        cached = getattr(self, cache_attr)
        if cached is not None and cached[0] == names:
            return cached[1]
        if not names and len(msg.position) == len(self._names):
            index = np.arange(len(self._names))
        elif set(self._names) <= set(names):
            index = np.array([names.index(n) for n in self._names])
        else:
            self._log("error", f"names_{cache_attr}", f"ArmState joint names {list(names)} lack some of {self._names}")
            return None
        setattr(self, cache_attr, (names, index))
        return index

    def _on_leader(self, msg: ArmState) -> None:
        now = time.monotonic()
        index = self._reorder(msg, "_leader_order")
        if index is None or len(msg.position) <= int(index.max()):
            return
        position = np.asarray(msg.position, dtype=float)[index]
        stale = np.asarray(msg.stale, dtype=bool)[index] if len(msg.stale) > int(index.max()) else None
        command = self.core.on_leader(position, now, stale)
        if command is not None:
            out = JointCommand()
            out.header.stamp = self.get_clock().now().to_msg()
            out.header.frame_id = msg.header.frame_id
            out.name = self._names
            out.position = command.tolist()
            gripper = self.core.config.gripper_index
            if gripper is not None:
                out.gripper_slide = float(self._gripper_map.angle_to_slide(command[gripper]))
            self.command_pub.publish(out)
        self._flush_events()

    def _on_follower(self, msg: ArmState) -> None:
        index = self._reorder(msg, "_follower_order")
        if index is None:
            return
        n = int(index.max()) + 1
        position = np.asarray(msg.position, dtype=float)[index] if len(msg.position) >= n else None
        current = np.asarray(msg.current, dtype=float)[index] if len(msg.current) >= n else None
        self.core.on_follower(position, current, time.monotonic())
        self._flush_events()

    def _on_timer(self) -> None:
        self.core.check_stale(time.monotonic())
        self._flush_events()

    def _on_enable(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        response.message = self.core.set_enabled(bool(request.data), time.monotonic())
        response.success = True
        self._flush_events()
        return response

    # ------------------------------------------------------------------ logging
    def _flush_events(self) -> None:
        for event in self.core.drain_events():
            self._log(event.level, event.key, event.message)

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


def main(args: list[str] | None = None) -> int:
    rclpy.init(args=args)
    node = None
    try:
        node = TeleopNode()
        rclpy.spin(node)
    except TeleopConfigError as error:
        print(f"teleop: {error}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
