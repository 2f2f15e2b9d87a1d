"""Estimator node in-process over real DDS: estimates from valid input, none from stale input,
model reload that keeps the old model on failure."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.parameter import Parameter

NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]


@pytest.mark.node
def test_estimator_node_publishes_and_guards(ros_context, wait_for, contract_model, model_builder) -> None:
    import rclpy
    from rclpy.executors import SingleThreadedExecutor
    from std_srvs.srv import Trigger

    from na_msgs.msg import ActuatorEstimate, ArmState, Contact, JointCommand

    estimator = _make_node(ros_context, str(contract_model))
    io = rclpy.create_node("estimator_io", context=ros_context)
    estimates: list[ActuatorEstimate] = []
    contacts: list[Contact] = []
    io.create_subscription(ActuatorEstimate, "/estimator/estimate", estimates.append, 10)
    io.create_subscription(Contact, "/estimator/contact", contacts.append, 10)
    state_pub = io.create_publisher(ArmState, "/follower/arm_state", 10)
    command_pub = io.create_publisher(JointCommand, "/follower/command", 10)
    reload_client = io.create_client(Trigger, "/estimator/reload")
    executor = SingleThreadedExecutor(context=ros_context)
    executor.add_node(estimator)
    executor.add_node(io)
    spin = lambda: executor.spin_once(timeout_sec=0.02)  # noqa: E731
    assert wait_for(lambda: state_pub.get_subscription_count() > 0 and command_pub.get_subscription_count() > 0,
                    10.0, spin)

    rng = np.random.default_rng(0)

    def state(stamp_ns: int) -> ArmState:
        msg = ArmState(role="follower", name=NAMES, position=rng.uniform(-0.3, 0.3, 5).tolist(),
                       gripper_slide=0.005, velocity=[0.0] * 5, current=rng.uniform(-0.3, 0.3, 5).tolist(),
                       input_voltage=[12.0] * 5, temperature=[35.0] * 5, stale=[False] * 5)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(stamp_ns, 1_000_000_000)
        return msg

    def now_ns() -> int:
        return estimator.get_clock().now().nanoseconds

    command = JointCommand(name=NAMES, position=[0.1, 0.2, -0.1, 0.0, 0.3])
    sent = 0

    def publish_fresh() -> None:
        nonlocal sent
        command.header.stamp = estimator.get_clock().now().to_msg()
        command_pub.publish(command)
        state_pub.publish(state(now_ns()))
        sent += 1
        spin()

    assert wait_for(lambda: len(estimates) >= 5, 10.0, publish_fresh)
    est = estimates[-1]
    assert list(est.name) == NAMES and len(est.torque_surrogate) == 5
    assert np.all(np.abs(est.torque_surrogate) <= [5, 5, 5, 5, 1.5])
    assert est.inference_latency > 0
    assert np.isclose(est.force.z, est.contact_probability * est.force_raw.z, atol=1e-5)
    assert wait_for(lambda: len(contacts) >= 1, 5.0, spin)

    # Stale input: stamped after the last state but 200 ms old on arrival (stale timeout 100 ms).
    last_sent = now_ns()
    assert wait_for(lambda: now_ns() - last_sent > 300_000_000, 5.0, spin)
    before = len(estimates)
    for k in range(5):
        state_pub.publish(state(now_ns() - 200_000_000 + k))
    assert wait_for(lambda: estimator.core.counters.stale_input >= 5, 5.0, spin)
    assert len(estimates) == before

    # Reload: a model for other joints is refused and the old one kept; a good one is taken.
    bad = model_builder("other_arm.onnx", metadata_overrides={"joint_names": '["a","b","c","d","e"]'})
    estimator.set_parameters([Parameter("model_path", value=str(bad))])
    assert wait_for(lambda: reload_client.service_is_ready(), 5.0, spin)
    future = reload_client.call_async(Trigger.Request())
    assert wait_for(future.done, 10.0, spin)
    assert not future.result().success and "kept the previous model" in future.result().message
    good = model_builder("new.onnx", seed=7)
    estimator.set_parameters([Parameter("model_path", value=str(good))])
    future = reload_client.call_async(Trigger.Request())
    assert wait_for(future.done, 10.0, spin)
    assert future.result().success
    assert estimator.core.model.path == good
    executor.shutdown()
    estimator.destroy_node()
    io.destroy_node()


def _make_node(context, model_path: str):
    from na_estimator.estimator_node import EstimatorNode

    return EstimatorNode(context=context, parameter_overrides=[Parameter("model_path", value=model_path)])
