"""Wear on /diagnostics: a hand-written healthy-arm reference, arm states whose current works against the motion
far more than the reference's did, and the motor's status turning WARN with the wear values, in-process over DDS;
a reference that is not one is refused with its reason."""

from __future__ import annotations

import json

import numpy as np
import pytest
from std_msgs.msg import Header

from na_estimator.estimator_node import EstimatorNode

NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]


def _reference(path, *, monitored=(True, True, True, True)) -> str:
    """A reference whose actuator torque is the current itself (1 N·m/A, no friction), residual mean 0 and spread
    0.1 N·m, degraded after 0.5 s of spreads, every frame counted whatever the contact probability."""
    zeros, n = [0.0] * 4, 4
    data = {"kind": "na-wear-reference", "version": 1, "robot": "open_manipulator_x",
            "joint_names": NAMES[:4],
            "friction": {"slope": [1.0] * n, "offset": zeros, "coulomb": zeros, "stribeck": zeros,
                         "viscous": zeros, "stribeck_velocity": [0.1] * n, "backlash": zeros,
                         "backlash_velocity": 0.05},
            "mean": zeros, "spread": [0.1] * n, "degraded": [0.5] * n,
            "settings": {"min_speed": 0.1, "contact_limit": 1.0, "drift": 0.5, "margin": 1.5,
                         "min_degraded_s": 0.5, "max_frame_s": 0.1},
            "episodes": 1, "monitored": list(monitored)}
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.node
def test_a_worn_motor_turns_its_status_warn_with_the_wear_values(ros_graph, contract_model, tmp_path) -> None:
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus

    from na_msgs.msg import ArmState, JointCommand

    reference = _reference(tmp_path / "wear_reference.json", monitored=(True, True, True, False))
    node = ros_graph.add(EstimatorNode(context=ros_graph.context, parameter_overrides=_parameters(
        model_path=str(contract_model), wear_reference=reference, diagnostics_period=0.2)))
    io = ros_graph.probe("wear_io")
    diagnostics: list[DiagnosticArray] = []
    io.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
    state_pub = io.create_publisher(ArmState, "/follower/arm_state", 10)
    command_pub = io.create_publisher(JointCommand, "/follower/command", 10)
    assert ros_graph.wait_for(lambda: state_pub.get_subscription_count() > 0, 10.0)
    position = np.array([0.0, -0.5, 0.3, 0.2, 0.0])

    def publish() -> None:
        # joint1 (the vertical axis) reports 0.5 rad/s and draws 3 A more than its motion needs: with the
        # reference's 0.1 N·m spread that is 30 spreads against the motion in every frame
        now = node.get_clock().now()
        peer_header = Header(stamp=now.to_msg())
        command_pub.publish(JointCommand(header=peer_header, name=NAMES, position=position.tolist()))
        state_pub.publish(ArmState(header=peer_header, role="follower", name=NAMES, position=position.tolist(),
                                   gripper_slide=0.005, velocity=[0.5, 0.0, 0.0, 0.0, 0.0],
                                   current=[3.0, 0.0, 0.0, 0.0, 0.0], input_voltage=[12.0] * 5,
                                   temperature=[35.0] * 5))
        ros_graph.spin()

    def status(joint: str):
        found = [s for d in diagnostics for s in d.status if s.name == f"estimator: motor {joint}"]
        return found[-1] if found else None

    def joint1_worn() -> bool:
        latest = status("joint1")
        return latest is not None and {kv.key: kv.value for kv in latest.values}.get("wear_state") == "degraded"

    assert ros_graph.wait_for(joint1_worn, 20.0, publish)
    joint1 = status("joint1")
    values = {kv.key: kv.value for kv in joint1.values}
    assert joint1.level == DiagnosticStatus.WARN and "worn" in joint1.message
    assert float(values["wear_evidence"]) >= 0.5 and float(values["wear_degraded_at_s"]) >= 0.0
    joint2 = {kv.key: kv.value for kv in status("joint2").values}      # not moving: no evidence at all
    assert joint2["wear_state"] == "nominal" and float(joint2["wear_evidence"]) == 0.0
    assert {kv.key: kv.value for kv in status("joint4").values}["wear_state"] == "not monitored"
    assert "wear_state" not in {kv.key: kv.value for kv in status("gripper").values}


def _parameters(**values):
    from rclpy.parameter import Parameter

    return [Parameter(k, value=v) for k, v in values.items()]


@pytest.mark.node
def test_a_file_that_is_not_a_wear_reference_is_refused_naming_it(ros_graph, contract_model, tmp_path) -> None:
    from na_common.ros_node import ParameterError

    (tmp_path / "other.json").write_text('{"kind": "something-else"}')
    with pytest.raises(ParameterError, match=r"wear_reference: .*not a wear reference"):
        EstimatorNode(context=ros_graph.context, parameter_overrides=_parameters(
            model_path=str(contract_model), wear_reference=str(tmp_path / "other.json")))
    _reference(tmp_path / "so101.json")
    reference = json.loads((tmp_path / "so101.json").read_text())
    reference["robot"] = "so101"
    (tmp_path / "so101.json").write_text(json.dumps(reference))
    with pytest.raises(ParameterError, match="so101"):
        EstimatorNode(context=ros_graph.context, parameter_overrides=_parameters(
            model_path=str(contract_model), wear_reference=str(tmp_path / "so101.json")))
