"""The arm_driver node in-process (private rclpy context, real DDS) running an SO-101 (parameter robot_spec: so101)
against the STS3215 emulator."""

from __future__ import annotations

import numpy as np
import pytest
from diagnostic_msgs.msg import DiagnosticArray
from rclpy.parameter import Parameter

from na_description import load_spec
from na_driver.arm_driver_node import ArmDriverNode
from na_msgs.msg import ArmState, JointCommand

SPEC = load_spec("so101")
# STS3215 memory table (Feetech, docs/REFERENCES.md STS3215), written here: addresses and units.
PRESENT_POSITION, PRESENT_LOAD, GOAL_POSITION, TORQUE_ENABLE = 56, 60, 42, 40
STEPS_PER_REV, CENTER_STEP, LOAD_FULL_SCALE = 4096, 2048, 1000


def word(regs, address: int) -> int:
    return int.from_bytes(regs.read(address, 2), "little")


@pytest.mark.node
def test_arm_driver_publishes_so101_arm_state_and_follows_commands(ros_graph, emulated_so101) -> None:
    emulator, servos = emulated_so101()
    for k, regs in enumerate(servos):
        regs.store_block(PRESENT_POSITION, (1700 + 120 * k).to_bytes(2, "little"))
        load = 100 + 10 * k
        regs.store_block(PRESENT_LOAD, (load | (1 << 10) if k % 2 else load).to_bytes(2, "little"))   # sign bit 10
    follower = ros_graph.add(ArmDriverNode(context=ros_graph.context, namespace="follower", parameter_overrides=[
        Parameter("port", value=emulator.port_path), Parameter("role", value="follower"),
        Parameter("robot_spec", value="so101"), Parameter("reply_timeout", value=0.02)]))
    probe = ros_graph.probe()
    states: list[ArmState] = []
    diagnostics: list[DiagnosticArray] = []
    probe.create_subscription(ArmState, "/follower/arm_state", states.append, 100)
    probe.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 20)
    command = probe.create_publisher(JointCommand, "/follower/command", 10)

    assert ros_graph.wait_for(lambda: states and not any(states[-1].stale), 5.0)
    state = states[-1]
    assert list(state.name) == SPEC.joint_names and state.role == "follower"
    assert len(state.position) == len(state.load) == len(state.current) == 6
    expected = [(1700 + 120 * k - CENTER_STEP) * 2 * np.pi / STEPS_PER_REV for k in range(6)]
    np.testing.assert_allclose(state.position, expected, atol=1e-9)
    np.testing.assert_allclose(state.load, [(-1 if k % 2 else 1) * (100 + 10 * k) / LOAD_FULL_SCALE
                                            for k in range(6)], atol=1e-9)
    assert [word(regs, TORQUE_ENABLE) & 0xFF for regs in servos] == [1] * 6

    goal = [0.2, -0.3, 0.4, -0.5, 0.6, 0.3]
    command.publish(JointCommand(name=SPEC.joint_names, position=goal))
    steps = [CENTER_STEP + round(q * STEPS_PER_REV / (2 * np.pi)) for q in goal]
    assert ros_graph.wait_for(lambda: [word(regs, GOAL_POSITION) for regs in servos] == steps, 3.0)
    assert ros_graph.wait_for(lambda: np.allclose(states[-1].goal_position, goal, atol=2e-3), 2.0)

    assert ros_graph.wait_for(lambda: any("follower/arm_driver: bus" in s.name for d in diagnostics
                                          for s in d.status), 3.0)
    bus = next(s for d in reversed(diagnostics) for s in d.status if "follower/arm_driver: bus" in s.name)
    values = {v.key: v.value for v in bus.values}
    assert values["servo_model"] == "STS3215" and values["read"] == "state block, sync read"

    ros_graph.close(follower)
    assert [word(regs, TORQUE_ENABLE) & 0xFF for regs in servos] == [0] * 6      # torque off on stop
