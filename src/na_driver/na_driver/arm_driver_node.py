"""ROS 2 node of one arm (leader or follower; DYNAMIXEL XM430 or Feetech STS3215 servos, as the robot spec
says): wires parameters, topics and services to the core.

The bus loop runs on its own thread (:class:`na_driver.loop_timing.DeadlineLoop`) and publishes
each cycle's sample; the executor only serves commands, services and the diagnostics timer.
"""

from __future__ import annotations

import contextlib
import os
import sys
from typing import Any

import numpy as np
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.node import Node
from rclpy.task import Future
from sensor_msgs.msg import JointState
from std_msgs.msg import Header
from std_srvs.srv import SetBool, Trigger

from na_common import topics
from na_common.diagnostics import BUS_PART, ERROR, OK, TRIP_PART, TRIP_REASON_KEY, status_name
from na_common.ros_node import (
    declare_and_read,
    diagnostic_array,
    diagnostic_status,
    log_at,
    run_node,
    spin_node,
    stamp_at,
    undeclared_overrides,
    usage,
)
from na_common.stamps import IncreasingStamps
from na_description.arm_state import joint_state_fields
from na_description.datasheet_margins import datasheet_reference
from na_driver.arm_config import (
    ArmConfig,
    ConfigError,
    build_config,
    default_parameters,
    load_robot_spec,
    reject_robot_facts,
)
from na_driver.arm_core import ArmDriverCore, ArmSample, StartupError
from na_driver.loop_timing import DeadlineLoop
from na_driver.serial_bus import BusError
from na_msgs.msg import ArmState, JointCommand

PARAMETER_DESCRIPTIONS = {
    "port": "serial device of the bus (e.g. /dev/ttyUSB0) or the emulator's pty path",
    "role": "leader (torque off, moved by hand) or follower (tracks ~command)",
    "robot_spec": "robot spec YAML or a shipped robot's name (so101): servo model, IDs, joint names, homing, "
                  "directions, gripper map, limits; empty: the OpenManipulator-X spec of na_description",
    "baud_rate": "bus baud rate in bit/s (must match the servos' Baud Rate register)",
    "operating_mode": "XM430: position, extended_position, ... (xm430.OPERATING_MODES); STS3215: position, "
                      "velocity, pwm, step (sts3215.OPERATING_MODES)",
    "loop_rate": "bus loop rate in Hz (one Sync Read per cycle)",
    "position_p_gain": "Position P Gain per servo (register units; STS3215: P Coefficient, EEPROM)",
    "position_i_gain": "Position I Gain per servo (register units; STS3215: I Coefficient, EEPROM)",
    "position_d_gain": "Position D Gain per servo (register units; STS3215: D Coefficient, EEPROM)",
    "current_limit": "Current Limit per servo in A (EEPROM; STS3215: Protection Current)",
    "return_delay_us": "Return Delay Time in microseconds (EEPROM, even, 0 recommended)",
    "temperature_warning": "degC: warn above this",
    "temperature_trip": "degC: a follower turns torque off at this temperature",
    "error_timeout": "s without a valid reply before a servo is reported as failed (a follower trips: torque off)",
    "bus_retries": "Sync Read retries per cycle for servos whose reply was missing or corrupt",
    "reply_timeout": "s to wait for replies per transaction; 0 derives it from the baud rate",
    "reopen_interval": "s between attempts to reopen a lost port",
    "port_wait": "s to wait at start-up for the serial port to appear (0 = fail at once)",
    "bus_watchdog_ms": "XM430 follower: servos stop and hold on their own this long after the last packet "
                       "(0 = off; STS3215 has none: 0)",
    "thread_priority": "SCHED_FIFO priority of the bus loop thread (0 = normal scheduling; needs CAP_SYS_NICE)",
    "frame_id": "header frame_id of arm_state / joint_states",
}


class ArmDriverNode(Node):
    def __init__(self, **node_kwargs) -> None:
        super().__init__(topics.ARM_DRIVER_NODE, **node_kwargs)
        self.config: ArmConfig = build_config(self._read_parameters())
        self.failed: Future = Future()
        self.core = ArmDriverCore(self.config, log=self._log)
        self.core.health.reference = datasheet_reference(self.core.spec)     # margins on /diagnostics
        self._loop: DeadlineLoop | None = None
        self._stamp_order = IncreasingStamps()          # the bus loop's stamps
        self._alarm = (False, False)          # (a servo tripped, port lost) as last published on /diagnostics
        try:
            self.core.start()
            self._state_pub = self.create_publisher(ArmState, topics.ARM_STATE, 10)
            self._joint_pub = self.create_publisher(JointState, topics.JOINT_STATES, 10)
            self._diag_pub = self.create_publisher(DiagnosticArray, topics.DIAGNOSTICS, 10)
            if self.config.is_follower:
                self.create_subscription(JointCommand, topics.COMMAND, self._on_command, 10)
            self.create_service(Trigger, f"~/{topics.REBOOT_SERVICE}", self._on_reboot)
            self.create_service(SetBool, f"~/{topics.TORQUE_SERVICE}", self._on_torque)
            self.create_timer(1.0, self._publish_diagnostics)
            self.published = 0
            self._loop = DeadlineLoop(self.config.period, self._step, name=f"arm-bus {self.config.role}",
                                      on_error=self._on_loop_error, priority=self.config.thread_priority,
                                      on_warning=self.get_logger().warning)
            self._loop.start()
        except BaseException:
            # e.g. SIGTERM while starting: the bus loop stops and the follower must not stay torqued
            if self._loop is not None:
                self._loop.stop()
            self.core.shutdown()
            raise

    def _read_parameters(self) -> dict:
        """``robot_spec`` first: the other defaults (joint count, baud rate, gains, frame) come from that spec."""
        spec_path = declare_and_read(self, {"robot_spec": ""}, PARAMETER_DESCRIPTIONS, typed=False)["robot_spec"]
        params = declare_and_read(self, default_parameters(load_robot_spec(spec_path)), PARAMETER_DESCRIPTIONS,
                                  typed=False)
        reject_robot_facts(undeclared_overrides(self))
        return params

    # ---- loop thread ----------------------------------------------------------------------
    def _step(self) -> None:
        sample = self.core.cycle()
        self.core.dropped_cycles = self._loop.dropped_cycles
        if not self.context.ok():
            return          # the context is shut down: nothing to publish to (close() stops this loop)
        stamp = stamp_at(self, sample.stamp, self._stamp_order)
        self.core.health.update_effort(sample.load if self.core.health.reference.effort_signal == "load"
                                       else sample.current)
        self._state_pub.publish(self._arm_state(sample, stamp))
        self._joint_pub.publish(self._joint_state(sample, stamp))
        self.published += 1
        alarm = (bool(self.core.health.tripped), self.core.port_lost)
        if alarm != self._alarm:
            self._publish_diagnostics()      # a trip, a reboot or a lost port is published at once, not within 1 s

    def _on_loop_error(self, exc: BaseException) -> None:
        if not self.context.ok():
            return          # a publish raced the shutdown of the context: not a failure, close() follows
        self.get_logger().fatal(f"bus loop failed: {exc!r}; shutting the arm down")
        self.core.shutdown()
        if not self.failed.done():
            self.failed.set_result(exc)

    def _arm_state(self, s: ArmSample, stamp: Time) -> ArmState:
        """The sample's ArmState fields (built as the offline generator builds them) under this node's header."""
        return ArmState(header=self._header(stamp), **_as_lists(s.message_fields()))

    def _joint_state(self, s: ArmSample, stamp: Time) -> JointState:
        """sensor_msgs/JointState for RViz: the gripper as its finger slide (m, m/s)."""
        return JointState(header=self._header(stamp), **_as_lists(joint_state_fields(self.core.spec, s)))

    def _header(self, stamp: Time) -> Header:
        return Header(stamp=stamp, frame_id=self.config.frame_id)

    # ---- executor callbacks ------------------------------------------------------------------
    def _on_command(self, msg: JointCommand) -> None:
        try:
            self.core.set_command(list(msg.position), list(msg.name))
        except ValueError as exc:
            self.get_logger().warning(f"ignored command: {exc}", throttle_duration_sec=1.0)

    def _on_reboot(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        try:
            response.message = str(self.core.run_on_bus(self.core.reboot_tripped))
            response.success = True
        except (BusError, TimeoutError) as exc:
            response.success, response.message = False, f"reboot failed: {exc}"
        self._log(OK if response.success else ERROR, response.message)
        return response

    def _on_torque(self, request: SetBool.Request, response: SetBool.Response) -> SetBool.Response:
        try:
            response.message = str(self.core.run_on_bus(lambda: self.core.set_torque(bool(request.data))))
            response.success = True
        except (BusError, TimeoutError) as exc:
            response.success, response.message = False, f"torque request refused: {exc}"
        self._log(OK if response.success else ERROR, response.message)
        return response

    def _publish_diagnostics(self) -> None:
        """Statuses ``<node>: bus``, ``<node>: trip`` (ERROR while a servo is tripped, with the reboot service to
        call) and ``<node>: servo <id> (<joint>)``. Runs on the timer and, when a trip starts or ends or the port is
        lost or back, on the bus loop thread."""
        loop, core, counters = self._loop, self.core, self.core.bus.counters
        self._alarm = (bool(core.health.tripped), core.port_lost)
        name = self.get_fully_qualified_name()
        values = {
            "loop_rate_hz": self.config.loop_rate,
            "loop_period_p50_ms": loop.periods.percentile(50) * 1e3,
            "loop_period_p99_ms": loop.periods.percentile(99) * 1e3,
            "bus_time_p50_ms": loop.step_times.percentile(50) * 1e3,
            "bus_time_p99_ms": loop.step_times.percentile(99) * 1e3,
            "cycles": loop.cycles,
            "dropped_cycles": loop.dropped_cycles,
            "torque_enabled": core.torque_enabled,
            "clamped_commands": core.clamped_commands,
            "reopen_attempts": core.reopen_attempts,
            "realtime_priority": loop.priority if loop.realtime else 0,
            "servo_model": core.spec.servo_model,
            **core.backend.diagnostic_values(),
            **{f"run_{k}": v for k, v in loop.run.summary().items()},     # whole run, not the last 1000 cycles
            **counters.as_dict(),
        }
        reboot = f"{name}/{topics.REBOOT_SERVICE}"
        trip_level, trip_message = core.trip_status()
        statuses = [
            diagnostic_status(status_name(name, BUS_PART), self.config.port, *core.bus_status(loop.running), values),
            diagnostic_status(status_name(name, TRIP_PART), self.config.port, trip_level,
                              trip_message + (f"; call {reboot}" if trip_level == ERROR else ""),
                              {TRIP_REASON_KEY: core.health.trip_reasons(), "reboot_service": reboot,
                               "torque_enabled": core.torque_enabled}),
        ]
        for k, (sid, joint, level, message) in enumerate(core.servo_status()):
            statuses.append(diagnostic_status(
                status_name(name, f"servo {sid} ({joint})"), f"{self.config.port}#{sid}", level, message,
                core.health.values(k)))
        self._diag_pub.publish(diagnostic_array(self, statuses))

    def _log(self, level: int, message: str) -> None:
        log_at(self.get_logger(), level, message)

    # ---- shutdown ------------------------------------------------------------------------------
    def close(self) -> None:
        """Stop the loop, torque off (follower, with retries), close the port, destroy the node."""
        if self._loop is not None:
            self._loop.stop()
        self.core.shutdown()
        self.destroy_node()


def _as_lists(fields: dict[str, Any]) -> dict[str, Any]:
    """Message fields with numpy arrays as lists: rclpy's sequence fields take lists (rosbags takes the arrays)."""
    return {name: value.tolist() if isinstance(value, np.ndarray) else value for name, value in fields.items()}


HELP_SUMMARY = ("Arm driver (leader or follower; DYNAMIXEL XM430 or Feetech STS3215 servos, from the robot spec\n"
                "named by robot_spec): publishes arm_state (na_msgs/ArmState) and\n"
                "joint_states, follows command (na_msgs/JointCommand; follower), services ~/torque (SetBool)\n"
                "and ~/reboot (Trigger), /diagnostics. Parameter files: config/leader_arm.yaml,\n"
                "config/follower_arm.yaml.")


def _spin_until_failed(node: ArmDriverNode) -> int:
    loop = node._loop
    if loop is not None and loop.priority > 1:
        # The bus loop needs the GIL this thread holds while it runs callbacks: at normal priority, a holder that
        # a busy host left waiting for a CPU can stall the real-time loop behind it (the likely cause of a 674 ms
        # silence seen with a CPU-bound process beside the simulated rig). Just below the loop, the holder
        # gets a CPU as soon as the loop waits for it.
        # Where the OS refuses real-time priority (the loop then says so), this thread stays as it is.
        with contextlib.suppress(AttributeError, OSError):
            os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(loop.priority - 1))      # this thread only
    spin_node(node, until=node.failed.done)
    return 1 if node.failed.done() else 0


def main(argv: list[str] | None = None) -> int:
    return run_node("arm_driver",
                    lambda: usage("arm_driver", HELP_SUMMARY, default_parameters(), PARAMETER_DESCRIPTIONS),
                    ArmDriverNode, _spin_until_failed, (ConfigError, StartupError), argv)


if __name__ == "__main__":
    sys.exit(main())
