"""The estimator on the Franka Emika Panda: a Panda model is refused on the other arms (and theirs on the
Panda), and a Panda estimator runs over DDS on the follower states and commands of a generated Panda episode
(the simulated robot's own controller; no bus driver)."""

from __future__ import annotations

import numpy as np
import pytest

from na_common import episode_bag as eb
from na_description import load_spec
from na_estimator.onnx_model import ModelLoadError, OnnxActuatorModel
from na_sim import generate as gen

PANDA = load_spec("panda")


def test_a_panda_model_is_refused_on_the_other_arms_and_theirs_on_the_panda(model_builder) -> None:
    panda_model = model_builder("panda.onnx", robot="panda")
    for other in ("open_manipulator_x", "so101"):
        with pytest.raises(ModelLoadError, match=f"trained for robot 'panda', this arm is '{other}'"):
            OnnxActuatorModel(panda_model, load_spec(other))
    with pytest.raises(ModelLoadError, match="trained for robot 'so101', this arm is 'panda'"):
        OnnxActuatorModel(model_builder("so101.onnx", robot="so101"), PANDA)
    OnnxActuatorModel(panda_model, PANDA)                 # and taken on its own arm


@pytest.fixture(scope="module")
def panda_episode(tmp_path_factory):
    """(ArmState, JointCommand) pairs of one generated go-up-and-stay episode with 400 g, in bag order."""
    out = tmp_path_factory.mktemp("panda_bag")
    options = gen.GenerateOptions(tasks=["go_up_stay"], episodes=1, seed=21, out=out, quick=True, payloads=[400],
                                  robot="panda", max_seconds=4.0)
    path = gen.generate(options, progress=False, log=lambda _: None).episodes[0].path
    with eb.EpisodeReader(path) as reader:
        states = [msg for _, _, msg in reader.messages("/follower/arm_state")]
        commands = [msg for _, _, msg in reader.messages("/follower/command")]
    assert len(states) == len(commands) > 100
    return list(zip(states, commands, strict=True))


@pytest.mark.node
def test_a_panda_estimator_runs_on_generated_panda_states_over_dds(ros_graph, model_builder, panda_episode) -> None:
    from rclpy.parameter import Parameter

    from na_estimator.estimator_node import EstimatorNode
    from na_msgs.msg import ActuatorEstimate, ArmState, JointCommand

    ros_graph.spin_timeout = 0.02
    model = model_builder("panda.onnx", robot="panda")
    overrides = [Parameter("model_path", value=str(model)), Parameter("robot", value="panda")]
    estimator = ros_graph.add(EstimatorNode(context=ros_graph.context, parameter_overrides=overrides))
    io = ros_graph.probe("panda_io")
    estimates: list[ActuatorEstimate] = []
    io.create_subscription(ActuatorEstimate, "/estimator/estimate", estimates.append, 10)
    state_pub = io.create_publisher(ArmState, "/follower/arm_state", 10)
    command_pub = io.create_publisher(JointCommand, "/follower/command", 10)
    assert ros_graph.wait_for(lambda: state_pub.get_subscription_count() > 0
                              and command_pub.get_subscription_count() > 0, 10.0)
    clock = estimator.get_clock()
    replay = iter(panda_episode)
    sent = 0

    def publish_next() -> None:
        nonlocal sent
        state, command = next(replay)
        # The bag's messages as the robot's interface would publish them now (the estimator refuses old stamps).
        msg = ArmState(role="follower", name=list(state.name), position=state.position.tolist(),
                       gripper_slide=float(state.gripper_slide), goal_gripper_slide=float(state.goal_gripper_slide),
                       velocity=state.velocity.tolist(), goal_position=state.goal_position.tolist(),
                       current=state.current.tolist(), pwm=state.pwm.tolist(), load=state.load.tolist(),
                       input_voltage=state.input_voltage.tolist(), temperature=state.temperature.tolist(),
                       stale=[False] * PANDA.n_motors)
        goal = JointCommand(name=list(command.name), position=command.position.tolist(),
                            gripper_slide=float(command.gripper_slide))
        msg.header.stamp = goal.header.stamp = clock.now().to_msg()
        command_pub.publish(goal)
        state_pub.publish(msg)
        sent += 1
        ros_graph.spin()

    assert ros_graph.wait_for(lambda: len(estimates) >= 30, 20.0, publish_next), estimator.core.last_refusal
    estimate = estimates[-1]
    assert list(estimate.name) == PANDA.joint_names and len(estimate.torque_surrogate) == 8
    assert np.isfinite([estimate.force.x, estimate.force.y, estimate.force.z]).all()
    # The Panda's readings are all plausible to the estimator (its 48 V supply, its torque as load): none refused
    # as invalid or misnamed; at most the first state, which may arrive before the first command, has no command.
    counters = estimator.core.counters
    assert counters.invalid_input == counters.bad_names == counters.stale_servo == 0 and counters.no_command <= 1
    assert counters.estimates >= 30
