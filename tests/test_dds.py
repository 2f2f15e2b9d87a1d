"""An ArmState crosses real DDS between two nodes in a private rclpy context."""

from __future__ import annotations

import pytest


@pytest.mark.node
def test_arm_state_round_trip_over_dds(ros_graph) -> None:
    from rclpy.qos import QoSProfile, ReliabilityPolicy

    from na_msgs.msg import ArmState

    qos = QoSProfile(depth=10, reliability=ReliabilityPolicy.RELIABLE)
    ros_graph.spin_timeout = 0.05
    pub_node = ros_graph.probe("dds_test_pub")
    sub_node = ros_graph.probe("dds_test_sub")
    received: list[ArmState] = []
    sub_node.create_subscription(ArmState, "/test/arm_state", received.append, qos)
    publisher = pub_node.create_publisher(ArmState, "/test/arm_state", qos)

    message = ArmState(role=ArmState.ROLE_FOLLOWER, name=["joint1", "joint2"], position=[0.25, -1.0],
                       current=[0.1, -0.2], hardware_error=[0, 32], stale=[False, True], crc_errors=3)
    assert ros_graph.wait_for(lambda: publisher.get_subscription_count() > 0, 10.0)

    def publish_and_spin() -> None:
        publisher.publish(message)
        ros_graph.spin()

    assert ros_graph.wait_for(lambda: len(received) > 0, 10.0, publish_and_spin)
    got = received[0]
    assert got.role == "follower"
    assert list(got.position) == [0.25, -1.0]
    assert list(got.hardware_error) == [0, 32]
    assert list(got.stale) == [False, True]
    assert got.crc_errors == 3
