"""The shared node shell: help text, parameter declaration with types, stamps and diagnostics."""

from __future__ import annotations

import time

import pytest

from na_common.diagnostics import ERROR, WARN


def test_help_is_asked_before_the_ros_arguments_only() -> None:
    from na_common.ros_node import wants_help

    assert wants_help(["node", "--help"]) and wants_help(["node", "-h", "--ros-args", "-p", "a:=1"])
    assert not wants_help(["node", "--ros-args", "-p", "x:=--help"])


def test_usage_lists_every_parameter_with_its_default_and_description() -> None:
    from na_common.ros_node import usage

    text = usage("thing", "Does a thing.", {"rate": 100.0, "port": ""}, {"rate": "Hz", "port": "device"})
    assert "usage: thing --ros-args" in text and "Does a thing." in text
    assert "rate  Hz (100.0)" in text and "port  device ('')" in text


@pytest.mark.node
def test_parameters_take_the_type_of_their_default(ros_context) -> None:
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from na_common.ros_node import ParameterError, declare_and_read

    defaults = {"rate": 100.0, "count": 3, "gains": [1.0, 2.0], "name": "a", "on": True}
    descriptions = {key: key for key in defaults}
    node = Node("typed", context=ros_context, parameter_overrides=[
        Parameter("rate", value=50), Parameter("count", value=4.0), Parameter("gains", value=[3, 4])])
    try:
        values = declare_and_read(node, defaults, descriptions)
        assert values == {"rate": 50.0, "count": 4, "gains": [3.0, 4.0], "name": "a", "on": True}
        assert isinstance(values["rate"], float) and isinstance(values["count"], int)
        assert node.describe_parameter("rate").description == "rate"
    finally:
        node.destroy_node()
    node = Node("wrong", context=ros_context, parameter_overrides=[Parameter("rate", value="fast")])
    try:
        with pytest.raises(ParameterError, match="parameter 'rate' must be float, got 'fast'"):
            declare_and_read(node, defaults, descriptions)
    finally:
        node.destroy_node()


@pytest.mark.node
def test_a_parameter_without_a_description_and_undeclared_overrides_are_named(ros_context) -> None:
    from rclpy.node import Node
    from rclpy.parameter import Parameter

    from na_common.ros_node import declare_and_read, undeclared_overrides

    node = Node("given", context=ros_context, parameter_overrides=[Parameter("servo_ids", value=[1, 2])])
    try:
        with pytest.raises(ValueError, match="without a description: rate"):
            declare_and_read(node, {"rate": 1.0}, {})
        declare_and_read(node, {"port": ""}, {"port": "device"})
        assert undeclared_overrides(node) == ["servo_ids"]
    finally:
        node.destroy_node()


@pytest.mark.node
def test_a_monotonic_stamp_is_published_on_the_node_clock(ros_context) -> None:
    from rclpy.node import Node

    from na_common.ros_node import stamp_at

    node = Node("clock", context=ros_context)
    try:
        before = node.get_clock().now().nanoseconds
        stamp = stamp_at(node, time.monotonic() - 0.5)
        after = node.get_clock().now().nanoseconds
    finally:
        node.destroy_node()
    ns = stamp.sec * 1_000_000_000 + stamp.nanosec
    assert before - 500_000_000 - 5_000_000 <= ns <= after - 500_000_000 + 5_000_000


def test_a_thread_held_up_while_stamping_never_dates_a_sample_in_the_future() -> None:
    """A driver thread held up for 50 ms around its clock reading (preempted) must still stamp a sample at or
    before the real time it was taken."""
    from na_common.ros_node import stamp_at

    class SlowClock:
        def now(self):
            time.sleep(0.05)                                 # preempted just before the clock is read
            reading = time.time_ns()

            class Reading:
                nanoseconds = reading
            return Reading()

    class FakeNode:
        def get_clock(self):
            return SlowClock()

    taken_mono, taken_wall = time.monotonic(), time.time_ns()
    stamp = stamp_at(FakeNode(), taken_mono)
    ns = stamp.sec * 1_000_000_000 + stamp.nanosec
    assert ns <= taken_wall + 2_000_000, f"stamped {(ns - taken_wall) / 1e6:.1f} ms after the sample was taken"


def test_diagnostic_status_carries_the_level_byte_and_formats_values() -> None:
    from diagnostic_msgs.msg import DiagnosticStatus

    from na_common.ros_node import diagnostic_status

    status = diagnostic_status("arm: bus", "/dev/ttyUSB0", WARN, "slow", {"p50_ms": 1.23456, "cycles": 7, "on": True})
    assert status.level == DiagnosticStatus.WARN and status.message == "slow" and status.hardware_id == "/dev/ttyUSB0"
    assert {kv.key: kv.value for kv in status.values} == {"p50_ms": "1.235", "cycles": "7", "on": "True"}
    assert diagnostic_status("x", "y", ERROR, "down").level == DiagnosticStatus.ERROR
