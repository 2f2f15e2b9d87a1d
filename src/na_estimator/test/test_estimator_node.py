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
        # One condition status per motor, named "estimator: motor <joint>", with its scores of the period.
        motors = {}

        def motor_statuses() -> bool:
            motors.update({s.name: s for d in diagnostics for s in d.status
                           if s.name.startswith("estimator: motor ") and "unknown" not in s.message})
            return len(motors) == len(NAMES)

        assert ros_graph.wait_for(motor_statuses, 15.0, publish)
        assert set(motors) == {f"estimator: motor {n}" for n in NAMES}
        joint3 = {kv.key: kv.value for kv in motors["estimator: motor joint3"].values}
        assert joint3["supervised"] == "true" and 0.0 <= float(joint3["condition_mean"]) <= 1.0 + 1e-6
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



@pytest.mark.node
def test_every_refusal_branch_over_dds_is_counted_and_never_estimated_on(ros_graph, contract_model) -> None:
    """Probes through DDS for each refusal branch: stale by age, from the future (an hour, 0.3 s), out of order,
    NaN and inf in every field (the gripper too) and in the command, arrays of another length, plus names in
    another order (estimated on). Each probe must arrive (its counter rises by exactly one), give no estimate,
    and the next good state must still be estimated on (nothing poisons the history)."""
    from na_msgs.msg import ArmState, JointCommand

    peer = Peer(ros_graph, contract_model, diagnostics_period=0.2)
    estimator, estimates = peer.estimator, peer.estimates
    counters = estimator.core.counters
    rng = np.random.default_rng(3)

    def now_ns() -> int:
        return estimator.get_clock().now().nanoseconds

    def state(offset_ns: int = 0, **fields) -> ArmState:
        msg = ArmState(role="follower", name=NAMES, position=rng.uniform(-0.3, 0.3, 5).tolist(), gripper_slide=0.005,
                       velocity=[0.1] * 5, current=rng.uniform(-0.3, 0.3, 5).tolist(), input_voltage=[12.0] * 5,
                       temperature=[35.0] * 5, stale=[False] * 5)
        for key, value in fields.items():
            setattr(msg, key, value)
        msg.header.stamp.sec, msg.header.stamp.nanosec = divmod(now_ns() + offset_ns, 1_000_000_000)
        return msg

    def command(position=(0.1, 0.2, -0.1, 0.0, 0.3)) -> JointCommand:
        msg = JointCommand(name=NAMES, position=list(position))
        msg.header.stamp = estimator.get_clock().now().to_msg()
        return msg

    def good_estimate() -> None:
        """One good command + state; waits for its estimate."""
        before = len(estimates)
        peer.command_pub.publish(command())
        ros_graph.spin()
        peer.state_pub.publish(state())
        assert ros_graph.wait_for(lambda: len(estimates) > before, 5.0), f"no estimate; counters {counters}"

    def refused(counter: str, probe, publisher=None) -> None:
        before, n_estimates = getattr(counters, counter), counters.estimates
        (publisher or peer.state_pub).publish(probe)
        assert ros_graph.wait_for(lambda: getattr(counters, counter) > before, 5.0), f"{counter} probe never arrived"
        assert getattr(counters, counter) == before + 1 and counters.estimates == n_estimates, counter
        good_estimate()

    for _ in range(3):
        good_estimate()
    stamps_of_probes: list[tuple[int, int]] = []

    def probe(counter: str, msg, publisher=None) -> None:
        if hasattr(msg, "role") and counter != "out_of_order":    # (the duplicate shares an estimate's stamp)
            stamps_of_probes.append((msg.header.stamp.sec, msg.header.stamp.nanosec))
        refused(counter, msg, publisher)

    probe("stale_input", state(-500_000_000))                          # half a second old on arrival
    probe("future_stamp", state(3_600_000_000_000))                    # an hour ahead
    probe("future_stamp", state(300_000_000))                          # 0.3 s ahead
    ahead = command()
    ahead.header.stamp.sec += 3600
    probe("future_stamp", ahead, peer.command_pub)                     # a command an hour ahead
    last = estimates[-1].header.stamp                                  # a duplicate of the last estimated-on state
    duplicate = state()
    duplicate.header.stamp = last
    probe("out_of_order", duplicate)
    for field in ("position", "velocity", "current", "input_voltage", "temperature"):
        for joint in (0, 4):                                            # an arm joint and the gripper
            for bad in (float("nan"), float("inf"), float("-inf")):
                values = [0.1] * 5 if field != "input_voltage" else [12.0] * 5
                values[joint] = bad
                probe("invalid_input", state(**{field: values}))
        probe("bad_names", state(**{field: [0.1] * 4}))                 # 4 values for 5 names
    probe("stale_servo", state(stale=[False, False, False, False, True]))   # the driver had no fresh gripper reading
    for bad in (float("nan"), float("inf"), float("-inf")):
        probe("invalid_input", state(gripper_slide=bad))
        probe("invalid_input", command((0.1, 0.2, bad, 0.0, 0.3)), peer.command_pub)
        probe("invalid_input", command((0.1, 0.2, 0.0, 0.0, bad)), peer.command_pub)
    assert counters.as_dict() == {"estimates": counters.estimates, "bad_names": 5, "invalid_input": 3 * 10 + 9,
                                  "stale_input": 1, "future_stamp": 3, "out_of_order": 1, "no_command": 0,
                                  "stale_servo": 1,
                                  "window_resets": counters.window_resets, "invalid_output": 0,
                                  "missed_inputs": counters.missed_inputs}
    assert not set(stamps_of_probes) & {(e.header.stamp.sec, e.header.stamp.nanosec) for e in estimates}

    # Names in another order are estimated on (reordered by name), not refused.
    before = len(estimates)
    reordered = state()
    order = [4, 2, 0, 3, 1]
    reordered.name = [NAMES[k] for k in order]
    for key in ("position", "velocity", "current", "input_voltage", "temperature", "stale"):
        setattr(reordered, key, [getattr(reordered, key)[k] for k in order])
    peer.state_pub.publish(reordered)
    assert ros_graph.wait_for(lambda: len(estimates) > before, 5.0) and counters.bad_names == 5


@pytest.mark.system
@pytest.mark.parametrize("executor", ["events", "single_threaded"])
def test_the_executable_serves_on_each_executor_and_stops_cleanly(ros_graph, contract_model, executor) -> None:
    """The installed estimator with each executor: estimates, answers ~/reload, publishes /diagnostics, and ends
    with exit code 0 and no traceback on SIGINT (rclpy 7.1's EventsExecutor.spin() serves nothing; the node
    spins it with spin_once)."""
    import signal
    import subprocess

    from diagnostic_msgs.msg import DiagnosticArray
    from std_srvs.srv import Trigger

    from na_common.ament import find_executable
    from na_msgs.msg import ActuatorEstimate, ArmState, JointCommand

    command = [str(find_executable("na_estimator", "estimator")), "--ros-args", "-p", f"model_path:={contract_model}",
               "-p", f"executor:={executor}", "-p", "diagnostics_period:=0.2"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        io = ros_graph.probe("executable_io")
        estimates, diagnostics = [], []
        io.create_subscription(ActuatorEstimate, "/estimator/estimate", estimates.append, 10)
        io.create_subscription(DiagnosticArray, "/diagnostics", diagnostics.append, 10)
        state_pub = io.create_publisher(ArmState, "/follower/arm_state", 10)
        command_pub = io.create_publisher(JointCommand, "/follower/command", 10)
        assert ros_graph.wait_for(lambda: state_pub.get_subscription_count() > 0, 30.0), "the estimator never came up"

        def publish() -> None:
            now = io.get_clock().now().to_msg()
            command_pub.publish(JointCommand(header=Header(stamp=now), name=NAMES, position=[0.1] * 5))
            state_pub.publish(ArmState(header=Header(stamp=now), role="follower", name=NAMES, position=[0.1] * 5,
                                       gripper_slide=0.005, velocity=[0.0] * 5, current=[0.1] * 5,
                                       input_voltage=[12.0] * 5, temperature=[35.0] * 5))
            ros_graph.spin_for(0.02)

        assert ros_graph.wait_for(lambda: len(estimates) >= 3, 20.0, publish)
        response = ros_graph.call(io.create_client(Trigger, "/estimator/reload"), Trigger.Request())
        assert response.success, response.message
        assert ros_graph.wait_for(lambda: any(s.name == "estimator" for d in diagnostics for s in d.status), 10.0)
        process.send_signal(signal.SIGINT)
        output, _ = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, output
    assert "Traceback" not in output and "FATAL" not in output, output


@pytest.mark.node
@pytest.mark.parametrize(("parameter", "value"), [("executor", "fast"), ("input_reliability", "sometimes"),
                                                  ("future_tolerance", "-1.0"), ("inference_variant", "int8-mixed")])
def test_a_bad_choice_exits_2_naming_it(contract_model, parameter, value) -> None:
    import subprocess

    from na_common.ament import find_executable

    result = subprocess.run([str(find_executable("na_estimator", "estimator")), "--ros-args", "-p",
                             f"model_path:={contract_model}", "-p", f"{parameter}:={value}"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    fatal = [line for line in result.stderr.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and parameter in fatal[0], result.stderr


@pytest.mark.node
def test_an_so101_estimator_reads_present_load_over_dds(ros_graph, model_builder) -> None:
    from na_msgs.msg import ArmState, JointCommand

    so101 = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
    ros_graph.spin_timeout = 0.02
    peer = Peer(ros_graph, model_builder("so101.onnx", robot="so101"), robot="so101")
    clock = peer.estimator.get_clock()
    rng = np.random.default_rng(5)
    command = JointCommand(name=so101, position=[0.1] * 6)

    def publish_fresh() -> None:
        msg = ArmState(role="follower", name=so101, position=rng.uniform(-0.3, 0.3, 6).tolist(), gripper_slide=0.3,
                       velocity=[0.0] * 6, current=[0.0] * 6, load=rng.uniform(-0.4, 0.4, 6).tolist(),
                       input_voltage=[12.0] * 6, temperature=[35.0] * 6, stale=[False] * 6)
        msg.header.stamp = command.header.stamp = clock.now().to_msg()
        peer.command_pub.publish(command)
        peer.state_pub.publish(msg)
        ros_graph.spin()

    assert ros_graph.wait_for(lambda: len(peer.estimates) >= 5, 10.0, publish_fresh), \
        peer.estimator.core.last_refusal
    assert list(peer.estimates[-1].name) == so101 and len(peer.estimates[-1].torque_surrogate) == 6


@pytest.mark.node
def test_a_model_of_another_robot_stops_the_executable_naming_both(model_builder) -> None:
    import subprocess

    from na_common.ament import find_executable

    omx_model = model_builder("omx.onnx")
    result = subprocess.run([str(find_executable("na_estimator", "estimator")), "--ros-args", "-p",
                             f"model_path:={omx_model}", "-p", "robot:=so101"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    fatal = [line for line in result.stderr.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and "trained for robot 'open_manipulator_x', this arm is 'so101'" in fatal[0], \
        result.stderr


@pytest.mark.node
@pytest.mark.parametrize("requested", ["auto", "int8-static"])
def test_the_estimator_runs_the_variant_chosen_here_and_names_it_on_diagnostics(ros_graph, model_package,
                                                                                requested) -> None:
    """A model package: ``auto`` (the default) times the variants at start-up, a name forces one; /diagnostics
    names the variant in use and why."""
    params = {"diagnostics_period": 0.2} if requested == "auto" else {"diagnostics_period": 0.2,
                                                                      "inference_variant": requested}
    peer = Peer(ros_graph, model_package, **params)
    choice = peer.estimator.choice
    assert choice.how == ("timed" if requested == "auto" else "forced")
    assert peer.estimator.core.model.variant == choice.variant
    if requested != "auto":
        assert choice.variant == requested

    def values() -> dict[str, str]:
        statuses = [s for d in peer.diagnostics for s in d.status if s.name == "estimator"]
        return {v.key: v.value for v in statuses[-1].values} if statuses else {}

    assert ros_graph.wait_for(lambda: "variant" in values(), 10.0, ros_graph.spin)
    assert values()["variant"] == choice.variant and values()["variant_choice"] == choice.describe()
