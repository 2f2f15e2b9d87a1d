"""Arm driver nodes in-process (private rclpy context, real DDS) against emulated arms."""

from __future__ import annotations

import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from na_description import load_spec, xm430
from na_driver.arm_driver_node import ArmDriverNode
from na_msgs.msg import ArmState, JointCommand

SPEC = load_spec()
RATE_HZ = 100.0


def start_driver(context, namespace: str, port: str, role: str) -> ArmDriverNode:
    return ArmDriverNode(context=context, namespace=namespace, parameter_overrides=[
        Parameter("port", value=port), Parameter("role", value=role), Parameter("loop_rate", value=RATE_HZ),
        Parameter("reply_timeout", value=0.004)])


RATE_WINDOW_S = 4.0
RATE_SHARE = 0.9          # a lower bound with margin for a loaded 2-core CI machine; exact rates: bench_driver.py


@pytest.fixture
def emulator_processes():
    """Factory of emulated arms in their own processes (the rate test must not share the GIL with them)."""
    from na_sim.emulator_process import EmulatorProcess

    started: list = []

    def start(**kwargs):
        bus = EmulatorProcess(SPEC.servo_ids, wire_time=True, **kwargs)
        started.append(bus)
        return bus

    yield start
    for bus in started:
        bus.stop()
        bus.kill()


@pytest.mark.node
def test_both_arms_publish_at_the_configured_rate_and_the_follower_obeys(ros_context, emulator_processes,
                                                                         wait_for) -> None:
    leader_bus = emulator_processes(registers={"present_position": [2048, 1900, 2200, 2000, 2100]})
    follower_bus = emulator_processes(registers={"present_position": [2048, 1900, 2200, 2000, 2100]})

    def follower_registers(name: str) -> list[int]:
        return [follower_bus.get(sid, name) for sid in SPEC.servo_ids]

    leader = start_driver(ros_context, "leader", leader_bus.port_path, "leader")
    follower = start_driver(ros_context, "follower", follower_bus.port_path, "follower")
    probe = Node("probe", context=ros_context)
    received: dict[str, list] = {"leader": [], "follower": [], "joints": [], "diag": []}
    probe.create_subscription(ArmState, "/leader/arm_state", received["leader"].append, 200)
    probe.create_subscription(ArmState, "/follower/arm_state", received["follower"].append, 200)
    probe.create_subscription(DiagnosticArray, "/diagnostics", received["diag"].append, 20)
    command_pub = probe.create_publisher(JointCommand, "/follower/command", 10)
    torque = probe.create_client(SetBool, "/follower/arm_driver/torque")
    reboot = probe.create_client(Trigger, "/follower/arm_driver/reboot")
    executor = SingleThreadedExecutor(context=ros_context)
    for node in (leader, follower, probe):
        executor.add_node(node)
    spin = lambda: executor.spin_once(timeout_sec=0.01)  # noqa: E731
    try:
        assert wait_for(lambda: received["leader"] and received["follower"], 5.0, spin)
        # Rate: count the messages whose read-completion stamps fall in a fixed window.
        window_start = time.time() + 0.2
        window_end = window_start + RATE_WINDOW_S
        wait_for(lambda: time.time() > window_end + 0.3, 20.0, spin)      # a fixed measurement window
        for role in ("leader", "follower"):
            stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in received[role]])
            in_window = np.count_nonzero((stamps >= window_start) & (stamps < window_end))
            assert in_window >= RATE_SHARE * RATE_WINDOW_S * RATE_HZ, f"{role}: {in_window} messages in 4 s"
            assert np.all(np.diff(stamps) > 0)
        state = received["follower"][-1]
        assert state.role == "follower" and list(state.name) == SPEC.joint_names
        assert len(state.position) == 5 and len(state.stale) == 5
        # JointState for RViz (subscribed only now, to keep the rate measurement free of its load)
        probe.create_subscription(JointState, "/follower/joint_states", received["joints"].append, 200)
        assert wait_for(lambda: len(received["joints"]) > 0, 3.0, spin)
        joints = received["joints"][-1]
        assert joints.name == SPEC.joint_names and len(joints.position) == 5
        assert -0.011 - 1e-3 <= joints.position[4] <= 0.020 + 1e-3        # gripper as the finger slide (m)

        # Commands (joint side, names in any order) reach the Goal Position registers, clamped.
        goal = {"joint1": 0.3, "joint2": -0.2, "joint3": 0.4, "joint4": -0.5, "gripper": 0.1}
        msg = JointCommand(name=list(reversed(goal)), position=[goal[n] for n in reversed(goal)])
        command_pub.publish(msg)
        expected = xm430.rad_to_pulses(SPEC.joint_to_servo([goal[n] for n in SPEC.joint_names]))
        assert wait_for(lambda: follower_registers("goal_position") == expected.tolist(), 3.0, spin)
        assert wait_for(lambda: np.allclose(received["follower"][-1].goal_position,
                                            [goal[n] for n in SPEC.joint_names], atol=2e-3), 2.0, spin)

        # Services: torque off / on, reboot with nothing tripped.
        assert torque.wait_for_service(timeout_sec=2.0)
        future = torque.call_async(SetBool.Request(data=False))
        assert wait_for(future.done, 3.0, spin) and future.result().success
        assert follower_registers("torque_enable") == [0] * 5
        future = torque.call_async(SetBool.Request(data=True))
        assert wait_for(future.done, 3.0, spin) and future.result().success
        assert follower_registers("torque_enable") == [1] * 5
        assert follower_registers("goal_position") == follower_registers("present_position")       # no jump
        future = reboot.call_async(Trigger.Request())
        assert wait_for(future.done, 3.0, spin) and "nothing to reboot" in future.result().message

        assert wait_for(lambda: any("follower/arm_driver: bus" in s.name for d in received["diag"]
                                    for s in d.status), 3.0, spin)
        bus_status = next(s for d in reversed(received["diag"]) for s in d.status
                          if "follower/arm_driver: bus" in s.name)
        keys = {kv.key for kv in bus_status.values}
        assert {"loop_period_p50_ms", "loop_period_p99_ms", "dropped_cycles", "crc_errors", "timeouts",
                "late_replies", "run_period_error_p99_ms", "run_on_time_share", "watchdog_expiries"} <= keys
    finally:
        leader.close()
        follower.close()
        probe.destroy_node()
    assert follower_registers("torque_enable") == [0] * 5                # shutdown: follower torque off


TRACKING_TOLERANCE_RAD = 0.02     # after settling, gravity-loaded, P gain 800 (position error of the servo model)


@pytest.mark.node
def test_follower_tracks_commands_on_the_simulated_rig(ros_context, wait_for) -> None:
    from na_sim.dxl_emulator import DxlBusEmulator
    from na_sim.realtime_runner import RealtimeRunner
    from na_sim.rig import Rig

    rig = Rig(seed=0)
    for regs in rig.follower_registers:
        regs.set("return_delay_time", 0)
    emulator = DxlBusEmulator(rig.follower_registers).start()
    runner = RealtimeRunner(rig).start()
    follower = start_driver(ros_context, "follower", emulator.port_path, "follower")
    probe = Node("probe", context=ros_context)
    states: list[ArmState] = []
    probe.create_subscription(ArmState, "/follower/arm_state", states.append, 100)
    command_pub = probe.create_publisher(JointCommand, "/follower/command", 10)
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(follower)
    executor.add_node(probe)
    spin = lambda: executor.spin_once(timeout_sec=0.01)  # noqa: E731
    try:
        assert wait_for(lambda: states and not any(states[-1].stale), 5.0, spin)
        start = np.array(states[-1].position)
        goal = start + np.array([0.3, 0.2, -0.2, 0.3, 0.2])
        command_pub.publish(JointCommand(name=SPEC.joint_names, position=goal.tolist()))

        def settled() -> bool:
            latest = [m for m in states[-10:] if not any(m.stale)]
            return bool(latest) and all(np.max(np.abs(np.array(m.position) - goal)) < TRACKING_TOLERANCE_RAD
                                        for m in latest)

        assert wait_for(settled, 8.0, spin), f"position {states[-1].position} goal {goal}"
        np.testing.assert_allclose(rig.truth.joint_position, goal, atol=TRACKING_TOLERANCE_RAD)
        assert runner.error is None
    finally:
        follower.close()
        probe.destroy_node()
        runner.stop()
        emulator.stop()


@pytest.mark.node
def test_overload_trip_is_diagnosed_with_the_servo_id_and_the_reboot_service_recovers(ros_context, emulated_arm,
                                                                                      wait_for) -> None:
    from na_sim.faults import DxlFaultInjector, DxlFaults

    emulator, servos = emulated_arm()
    follower = start_driver(ros_context, "follower", emulator.port_path, "follower")
    emulator.injector = DxlFaultInjector(DxlFaults(trip_servo_id=13, trip_after_s=emulator.elapsed_s + 0.3))
    probe = Node("probe", context=ros_context)
    diagnostics: list[DiagnosticArray] = []
    states: list[ArmState] = []
    probe.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 20)
    probe.create_subscription(ArmState, "/follower/arm_state", states.append, 100)
    reboot = probe.create_client(Trigger, "/follower/arm_driver/reboot")
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(follower)
    executor.add_node(probe)
    spin = lambda: executor.spin_once(timeout_sec=0.01)  # noqa: E731

    def servo13_status():
        for array in reversed(diagnostics):
            for status in array.status:
                if "servo 13" in status.name:
                    return status
        return None

    try:
        assert wait_for(lambda: (s := servo13_status()) is not None and s.level == DiagnosticStatus.ERROR, 5.0, spin)
        assert "overload" in servo13_status().message
        values = {kv.key: kv.value for kv in servo13_status().values}
        assert values["hardware_error_status"] == f"0x{xm430.HW_ERROR_OVERLOAD:02X}"
        assert values["effort_signal"] == "current" and values["temperature_limit_c"] == "80"
        assert float(values["effort_margin"]) <= 1.0
        assert all(r.get("torque_enable") == 0 for r in servos)
        assert wait_for(lambda: states and states[-1].hardware_error[2] == xm430.HW_ERROR_OVERLOAD, 2.0, spin)
        future = reboot.call_async(Trigger.Request())
        assert wait_for(future.done, 5.0, spin) and future.result().success, future.result()
        assert "servo 13" in future.result().message
        assert all(r.get("torque_enable") == 1 for r in servos) and servos[2].get("hardware_error_status") == 0
        assert wait_for(lambda: servo13_status().level == DiagnosticStatus.OK, 3.0, spin)
    finally:
        follower.close()
        probe.destroy_node()


@pytest.mark.node
def test_a_context_shut_down_under_the_running_loop_stops_cleanly(emulated_arm, wait_for, capfd) -> None:
    """What SIGINT/SIGTERM do (rclpy's handler shuts the context down) while the bus loop keeps publishing:
    no FATAL, no traceback, the loop ends without an error and close() turns the follower's torque off."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context)
    emulator, servos = emulated_arm()
    follower = start_driver(context, "follower", emulator.port_path, "follower")
    try:
        assert wait_for(lambda: follower.published > 20, 5.0)
        rclpy.try_shutdown(context=context)
        published = follower.published
        assert wait_for(lambda: follower.core.bus.counters.transactions > 0 and follower._loop.cycles > 5 + published,
                        2.0) or not follower._loop.running      # the loop ran on into the dead context
    finally:
        follower.close()
        rclpy.try_shutdown(context=context)
    output = capfd.readouterr()
    assert "FATAL" not in output.err + output.out and "Traceback" not in output.err + output.out
    assert follower._loop.error is None and follower.failed.done() is False
    assert all(r.get("torque_enable") == 0 for r in servos)
