"""Estimator node in-process over real DDS: estimates from valid input, none from stale input,
model reload that keeps the old model on failure."""

from __future__ import annotations

import numpy as np
import pytest
from rclpy.parameter import Parameter
from std_msgs.msg import Header

from na_estimator.estimator_node import EstimatorNode

NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]


class Peer:
    """The estimator node under test and a node that plays the follower and listens to the outputs."""

    def __init__(self, graph, model_path, **params) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from std_srvs.srv import Trigger

        from na_msgs.msg import ActuatorEstimate, ArmState, Contact, JointCommand

        overrides = [Parameter(k, value=v) for k, v in {"model_path": str(model_path), **params}.items()]
        self.estimator = graph.add(EstimatorNode(context=graph.context, parameter_overrides=overrides))
        io = graph.probe("estimator_io")
        self.estimates: list[ActuatorEstimate] = []
        self.contacts: list[Contact] = []
        self.diagnostics: list[DiagnosticArray] = []
        io.create_subscription(ActuatorEstimate, "/estimator/estimate", self.estimates.append, 10)
        io.create_subscription(Contact, "/estimator/contact", self.contacts.append, 10)
        io.create_subscription(DiagnosticArray, "/diagnostics", self.diagnostics.append, 10)
        self.state_pub = io.create_publisher(ArmState, "/follower/arm_state", 10)
        self.command_pub = io.create_publisher(JointCommand, "/follower/command", 10)
        self.reload = io.create_client(Trigger, "/estimator/reload")
        assert graph.wait_for(lambda: self.state_pub.get_subscription_count() > 0
                              and self.command_pub.get_subscription_count() > 0, 10.0)


@pytest.mark.node
def test_estimator_node_publishes_and_guards(ros_graph, contract_model, model_builder) -> None:
    from std_srvs.srv import Trigger

    from na_msgs.msg import ArmState, JointCommand

    ros_graph.spin_timeout = 0.02
    wait_for, spin = ros_graph.wait_for, ros_graph.spin
    peer = Peer(ros_graph, contract_model)
    estimator, estimates, contacts = peer.estimator, peer.estimates, peer.contacts
    state_pub, command_pub, reload_client = peer.state_pub, peer.command_pub, peer.reload

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
    response = ros_graph.call(reload_client, Trigger.Request())
    assert not response.success and "kept the previous model" in response.message
    good = model_builder("new.onnx", seed=7)
    estimator.set_parameters([Parameter("model_path", value=str(good))])
    assert ros_graph.call(reload_client, Trigger.Request()).success
    assert estimator.core.model.path == good


@pytest.mark.node
@pytest.mark.parametrize(("names", "n_values", "reason"), [
    (NAMES[::-1], 5, None),                                                      # another order: estimated on
    (["joint1", "joint2", "joint3", "joint4", "wrist"], 5, "unknown ['wrist']"),
    (["joint1", "joint2", "joint3", "joint4"], 4, "missing ['gripper']"),
    (["joint1", "joint2", "joint2", "joint4", "gripper"], 5, "duplicated ['joint2']"),
    (["joint1", "joint2", "joint3", "joint4"], 5, "position has 5 values for 4 joint names"),
])
def test_arm_states_are_reordered_by_name_or_refused_with_the_reason(ros_graph, contract_model, names, n_values,
                                                                       reason) -> None:
    from diagnostic_msgs.msg import DiagnosticStatus

    from na_msgs.msg import ArmState, JointCommand

    peer = Peer(ros_graph, contract_model, diagnostics_period=0.2)
    estimator, estimates, diagnostics = peer.estimator, peer.estimates, peer.diagnostics
    value = dict(zip(NAMES, [0.1, -0.2, 0.3, 0.0, 0.2], strict=True))

    def publish() -> None:
        now = estimator.get_clock().now().to_msg()
        peer.command_pub.publish(JointCommand(header=Header(stamp=now), name=NAMES, position=list(value.values())))
        positions = [value.get(n, 0.0) for n in names] + [0.0] * (n_values - len(names))
        peer.state_pub.publish(ArmState(header=Header(stamp=now), role="follower", name=names, position=positions,
                                   gripper_slide=0.005, velocity=[0.0] * n_values, current=[0.1] * n_values,
                                   input_voltage=[12.0] * n_values, temperature=[35.0] * n_values))
        ros_graph.spin()

    counters = estimator.core.counters
    if reason is None:
        assert ros_graph.wait_for(lambda: len(estimates) >= 3, 10.0, publish)
        assert counters.bad_names == 0
        return
    assert ros_graph.wait_for(lambda: counters.bad_names >= 5, 10.0, publish)         # the probes arrived ...
    assert counters.estimates == 0 and estimates == []                                # ... and none was estimated on

    def refusal_reported() -> bool:
        return any(s.name == "estimator" and reason in s.message for d in diagnostics for s in d.status)

    assert ros_graph.wait_for(refusal_reported, 5.0)
    status = next(s for d in reversed(diagnostics) for s in d.status if s.name == "estimator")
    assert status.level == DiagnosticStatus.WARN
    values = {kv.key: kv.value for kv in status.values}
    assert int(values["bad_names"]) >= 5 and reason in values["last_refusal"]

