"""Arm driver nodes in-process (private rclpy context, real DDS) against emulated arms."""

from __future__ import annotations

import time

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus
from rclpy.parameter import Parameter
from sensor_msgs.msg import JointState
from std_srvs.srv import SetBool, Trigger

from na_description import load_spec, xm430
from na_driver.arm_driver_node import ArmDriverNode
from na_msgs.msg import ArmState, JointCommand

SPEC = load_spec()
RATE_HZ = 100.0


def start_driver(graph, namespace: str, port: str, role: str) -> ArmDriverNode:
    return graph.add(ArmDriverNode(context=graph.context, namespace=namespace, parameter_overrides=[
        Parameter("port", value=port), Parameter("role", value=role), Parameter("loop_rate", value=RATE_HZ),
        Parameter("reply_timeout", value=0.004)]))


@pytest.mark.node
def test_both_arms_publish_at_the_configured_rate_and_the_follower_obeys(emulated_arm, ros_graph) -> None:
    # emulated_arm first: its buses outlive the nodes, whose shutdown still talks to them
    leader_bus, _ = emulated_arm()
    follower_bus, follower_servos = emulated_arm()
    start_driver(ros_graph, "leader", leader_bus.port_path, "leader")
    follower = start_driver(ros_graph, "follower", follower_bus.port_path, "follower")
    probe = ros_graph.probe()
    wait_for = ros_graph.wait_for
    received: dict[str, list] = {"leader": [], "follower": [], "joints": [], "diag": []}
    probe.create_subscription(ArmState, "/leader/arm_state", received["leader"].append, 200)
    probe.create_subscription(ArmState, "/follower/arm_state", received["follower"].append, 200)
    probe.create_subscription(DiagnosticArray, "/diagnostics", received["diag"].append, 20)
    command_pub = probe.create_publisher(JointCommand, "/follower/command", 10)
    torque = probe.create_client(SetBool, "/follower/arm_driver/torque")
    reboot = probe.create_client(Trigger, "/follower/arm_driver/reboot")
    assert wait_for(lambda: received["leader"] and received["follower"], 5.0)
    # Rate: count the messages whose read-completion stamps fall in a 3 s window.
    window_start = time.time() + 0.2
    window_end = window_start + 3.0
    wait_for(lambda: time.time() > window_end + 0.3, 10.0)      # a fixed measurement window
    for role in ("leader", "follower"):
        stamps = np.array([m.header.stamp.sec + m.header.stamp.nanosec * 1e-9 for m in received[role]])
        in_window = np.count_nonzero((stamps >= window_start) & (stamps < window_end))
        assert in_window >= 0.98 * 3.0 * RATE_HZ, f"{role}: {in_window} messages in 3 s"
        assert np.all(np.diff(stamps) > 0)
    state = received["follower"][-1]
    assert state.role == "follower" and list(state.name) == SPEC.joint_names
    assert len(state.position) == 5 and len(state.stale) == 5
    # JointState for RViz (subscribed only now, to keep the rate measurement free of its load)
    probe.create_subscription(JointState, "/follower/joint_states", received["joints"].append, 200)
    assert wait_for(lambda: len(received["joints"]) > 0, 3.0)
    joints = received["joints"][-1]
    assert joints.name == SPEC.joint_names and len(joints.position) == 5
    assert -0.011 - 1e-3 <= joints.position[4] <= 0.020 + 1e-3        # gripper as the finger slide (m)

    # Commands (joint side, names in any order) reach the Goal Position registers, clamped.
    goal = {"joint1": 0.3, "joint2": -0.2, "joint3": 0.4, "joint4": -0.5, "gripper": 0.1}
    msg = JointCommand(name=list(reversed(goal)), position=[goal[n] for n in reversed(goal)])
    command_pub.publish(msg)
    expected = xm430.rad_to_pulses(SPEC.joint_to_servo([goal[n] for n in SPEC.joint_names]))
    assert wait_for(lambda: [r.get("goal_position") for r in follower_servos] == expected.tolist(), 3.0)
    assert wait_for(lambda: np.allclose(received["follower"][-1].goal_position,
                                        [goal[n] for n in SPEC.joint_names], atol=2e-3), 2.0)

    # Services: torque off / on, reboot with nothing tripped.
    assert ros_graph.call(torque, SetBool.Request(data=False), 3.0).success
    assert all(r.get("torque_enable") == 0 for r in follower_servos)
    assert ros_graph.call(torque, SetBool.Request(data=True), 3.0).success
    assert all(r.get("torque_enable") == 1 for r in follower_servos)
    assert all(r.get("goal_position") == r.get("present_position") for r in follower_servos)   # no jump
    assert "nothing to reboot" in ros_graph.call(reboot, Trigger.Request(), 3.0).message

    assert wait_for(lambda: any("follower/arm_driver: bus" in s.name for d in received["diag"]
                                for s in d.status), 3.0)
    bus_status = next(s for d in reversed(received["diag"]) for s in d.status
                      if "follower/arm_driver: bus" in s.name)
    assert bus_status.level == DiagnosticStatus.OK and bus_status.message == "running"
    keys = {kv.key for kv in bus_status.values}
    assert {"loop_period_p50_ms", "loop_period_p99_ms", "dropped_cycles", "crc_errors", "timeouts"} <= keys
    ros_graph.close(follower)
    assert all(r.get("torque_enable") == 0 for r in follower_servos)      # shutdown: follower torque off


TRACKING_TOLERANCE_RAD = 0.02     # after settling, gravity-loaded, P gain 800 (position error of the servo model)


@pytest.mark.node
def test_follower_tracks_commands_on_the_simulated_rig(ros_graph) -> None:
    from na_sim.dxl_emulator import DxlBusEmulator
    from na_sim.rig import RealtimeRunner, Rig

    rig = Rig(seed=0)
    for regs in rig.follower_registers:
        regs.set("return_delay_time", 0)
    emulator = DxlBusEmulator(rig.follower_registers).start()
    runner = RealtimeRunner(rig).start()
    follower = None
    try:
        follower = start_driver(ros_graph, "follower", emulator.port_path, "follower")
        probe = ros_graph.probe()
        states: list[ArmState] = []
        probe.create_subscription(ArmState, "/follower/arm_state", states.append, 100)
        command_pub = probe.create_publisher(JointCommand, "/follower/command", 10)
        assert ros_graph.wait_for(lambda: states and not any(states[-1].stale), 5.0)
        start = np.array(states[-1].position)
        goal = start + np.array([0.3, 0.2, -0.2, 0.3, 0.2])
        command_pub.publish(JointCommand(name=SPEC.joint_names, position=goal.tolist()))

        def settled() -> bool:
            latest = [m for m in states[-10:] if not any(m.stale)]
            return bool(latest) and all(np.max(np.abs(np.array(m.position) - goal)) < TRACKING_TOLERANCE_RAD
                                        for m in latest)

        assert ros_graph.wait_for(settled, 8.0), f"position {states[-1].position} goal {goal}"
        np.testing.assert_allclose(rig.truth.joint_position, goal, atol=TRACKING_TOLERANCE_RAD)
        assert runner.error is None
    finally:
        if follower is not None:
            ros_graph.close(follower)
        runner.stop()
        emulator.stop()


@pytest.mark.node
def test_overload_trip_is_diagnosed_with_the_servo_id_and_the_reboot_service_recovers(emulated_arm,
                                                                                      ros_graph) -> None:
    from na_sim.faults import DxlFaults

    emulator, servos = emulated_arm(faults=DxlFaults(trip_servo_id=13, trip_after_s=0.5))
    start_driver(ros_graph, "follower", emulator.port_path, "follower")
    probe = ros_graph.probe()
    diagnostics: list[DiagnosticArray] = []
    states: list[ArmState] = []
    probe.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 20)
    probe.create_subscription(ArmState, "/follower/arm_state", states.append, 100)
    reboot = probe.create_client(Trigger, "/follower/arm_driver/reboot")
    wait_for = ros_graph.wait_for

    def servo13_status():
        for array in reversed(diagnostics):
            for status in array.status:
                if "servo 13" in status.name:
                    return status
        return None

    assert wait_for(lambda: (s := servo13_status()) is not None and s.level == DiagnosticStatus.ERROR, 5.0)
    assert "overload" in servo13_status().message
    assert all(r.get("torque_enable") == 0 for r in servos)
    assert wait_for(lambda: states and states[-1].hardware_error[2] == xm430.HW_ERROR_OVERLOAD, 2.0)
    response = ros_graph.call(reboot, Trigger.Request(), 5.0)
    assert response.success and "servo 13" in response.message, response
    assert all(r.get("torque_enable") == 1 for r in servos) and servos[2].get("hardware_error_status") == 0
    assert wait_for(lambda: servo13_status().level == DiagnosticStatus.OK, 3.0)
