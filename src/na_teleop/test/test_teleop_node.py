"""Teleop node in-process over real DDS: ArmState in, JointCommand out, stale hold, enable service."""

from __future__ import annotations

import numpy as np
import pytest

from na_description import load_spec

pytestmark = pytest.mark.node

SPEC = load_spec()
N = SPEC.n_motors


class Harness:
    """The teleop node plus a peer node that plays both arm drivers and listens to the commands."""

    def __init__(self, graph, **params) -> None:
        from rclpy.parameter import Parameter
        from std_srvs.srv import SetBool

        from na_msgs.msg import ArmState, JointCommand
        from na_teleop.teleop_node import TeleopNode

        # No soft start and no step limit unless a test asks: the first command equals the leader.
        settings = {"soft_start_duration": 0.0, "stale_timeout": 0.1, "max_step_per_cycle": [10.0] * N, **params}
        overrides = [Parameter(k, value=v) for k, v in settings.items()]
        graph.spin_timeout = 0.005
        self.graph = graph
        self.teleop = graph.add(TeleopNode(context=graph.context, parameter_overrides=overrides))
        self.peer = graph.probe("fake_arms")
        self.leader_pub = self.peer.create_publisher(ArmState, "/leader/arm_state", 10)
        self.follower_pub = self.peer.create_publisher(ArmState, "/follower/arm_state", 10)
        self.commands: list[JointCommand] = []
        self.peer.create_subscription(JointCommand, "/follower/command", self.commands.append, 10)
        self.enable_client = self.peer.create_client(SetBool, "/teleop/enable")
        self.ArmState, self.SetBool = ArmState, SetBool
        self.spin, self.spin_for = graph.spin, graph.spin_for

    def state(self, role: str, position, current=None):
        msg = self.ArmState(role=role, name=SPEC.joint_names, position=[float(x) for x in position])
        msg.current = [float(x) for x in (np.zeros(N) if current is None else current)]
        msg.header.stamp = self.teleop.get_clock().now().to_msg()
        return msg

    def connected(self) -> bool:
        return (self.leader_pub.get_subscription_count() > 0 and self.follower_pub.get_subscription_count() > 0
                and self.teleop.command_pub.get_subscription_count() > 0)


@pytest.fixture
def harness(ros_graph):
    def make(**params) -> Harness:
        h = Harness(ros_graph, **params)
        assert ros_graph.wait_for(h.connected, 10.0), "teleop and test peer did not discover each other"
        return h

    return make


def feed_until_command(h: Harness, wait_for, leader, follower=None, timeout: float = 5.0) -> bool:
    """Publish follower + leader samples every spin until a command arrives."""
    start = len(h.commands)

    def step() -> None:
        h.follower_pub.publish(h.state("follower", np.zeros(N) if follower is None else follower))
        h.leader_pub.publish(h.state("leader", leader))
        h.spin_for(0.01)

    return wait_for(lambda: len(h.commands) > start, timeout, step)


def test_leader_state_becomes_follower_command(harness, wait_for) -> None:
    h = harness()
    leader = np.array([0.2, -0.3, 0.4, 0.1, -0.5])
    assert feed_until_command(h, wait_for, leader)
    command = h.commands[-1]
    assert list(command.name) == SPEC.joint_names
    np.testing.assert_allclose(command.position, leader)
    assert command.gripper_slide == pytest.approx(float(SPEC.gripper.angle_to_slide(leader[4])))
    assert command.header.stamp.sec > 0


def test_leader_messages_are_reordered_by_joint_name(harness, wait_for) -> None:
    h = harness()
    h.follower_pub.publish(h.state("follower", np.zeros(N)))
    leader = np.array([0.2, -0.3, 0.4, 0.1, -0.5])

    def step() -> None:
        msg = h.state("leader", leader[::-1])
        msg.name = SPEC.joint_names[::-1]
        h.follower_pub.publish(h.state("follower", np.zeros(N)))
        h.leader_pub.publish(msg)
        h.spin_for(0.01)

    assert wait_for(lambda: len(h.commands) > 0, 5.0, step)
    np.testing.assert_allclose(h.commands[-1].position, leader)


@pytest.mark.parametrize(("names", "position", "reason"), [
    (["joint1", "joint2", "joint3", "joint4", "wrist"], np.zeros(N), "unknown ['wrist']"),
    (["joint1", "joint2", "joint3", "joint4"], np.zeros(4), "missing ['gripper']"),
    (["joint1", "joint1", "joint3", "joint4", "gripper"], np.zeros(N), "duplicated ['joint1']"),
    (["joint1", "joint2", "joint3", "joint4"], np.zeros(N), "position has 5 values for 4 joint names"),
])
def test_leader_messages_whose_names_do_not_match_are_refused(harness, wait_for, names, position, reason) -> None:
    from rcl_interfaces.msg import Log

    h = harness(warn_throttle_period=0.0)                           # log every refusal
    refused: list[str] = []
    h.peer.create_subscription(Log, "/rosout", lambda log: refused.append(log.msg) if log.name == "teleop"
                               and log.level == Log.ERROR else None, 100)

    def step() -> None:
        msg = h.state("leader", position)
        msg.name = names
        h.follower_pub.publish(h.state("follower", np.zeros(N)))
        h.leader_pub.publish(msg)
        h.spin_for(0.01)

    assert wait_for(lambda: len(refused) >= 3, 5.0, step)           # several arrived, each was refused
    assert all(reason in m and m.startswith("leader ArmState ignored") for m in refused)
    assert h.commands == []


def test_stale_leader_stops_new_commands(harness, wait_for) -> None:
    from na_teleop.teleop_core import TeleopState

    h = harness()
    assert feed_until_command(h, wait_for, np.full(N, 0.1))
    # Only the follower keeps talking now; the timer must notice the silent leader.
    assert wait_for(lambda: h.teleop.core.state is TeleopState.STALE, 2.0,
                    lambda: (h.follower_pub.publish(h.state("follower", np.zeros(N))), h.spin_for(0.01)))
    h.spin_for(0.05)          # let in-flight commands arrive
    count = len(h.commands)
    h.spin_for(0.3)
    assert len(h.commands) == count


def test_enable_service_disables_and_reenables(harness, wait_for) -> None:
    h = harness()
    assert feed_until_command(h, wait_for, np.full(N, 0.1))
    assert wait_for(h.enable_client.service_is_ready, 5.0, h.spin)

    def call(enabled: bool):
        future = h.enable_client.call_async(h.SetBool.Request(data=enabled))
        assert wait_for(future.done, 5.0, h.spin)
        return future.result()

    response = call(False)
    assert response.success and "disabled" in response.message
    h.spin_for(0.05)
    count = len(h.commands)
    for _ in range(20):
        h.leader_pub.publish(h.state("leader", np.full(N, 0.2)))
        h.spin_for(0.01)
    assert len(h.commands) == count
    assert call(True).success
    assert feed_until_command(h, wait_for, np.full(N, 0.2))


def test_overload_on_the_follower_holds(harness, wait_for) -> None:
    from na_teleop.teleop_core import TeleopState

    h = harness(overload_window=0.05)
    assert feed_until_command(h, wait_for, np.zeros(N))
    high = np.array([0.0, 2.0, 0.0, 0.0, 0.0])

    def step() -> None:
        h.follower_pub.publish(h.state("follower", np.zeros(N), high))
        h.leader_pub.publish(h.state("leader", np.zeros(N)))
        h.spin_for(0.01)

    assert wait_for(lambda: h.teleop.core.state is TeleopState.OVERLOAD, 3.0, step)
    assert h.teleop.core.overload_joint == "joint2"


def test_invalid_parameter_is_a_clear_error(ros_context) -> None:
    """A bad parameter names itself (the node process turns it into exit code 2 and one fatal line)."""
    from rclpy.parameter import Parameter

    from na_teleop.teleop_core import TeleopConfigError
    from na_teleop.teleop_node import TeleopNode

    with pytest.raises(TeleopConfigError, match="joint_sign"):
        TeleopNode(context=ros_context, parameter_overrides=[Parameter("joint_sign", value=[1.0, 1.0])])


def test_a_tripped_follower_stops_the_commands_until_it_is_back_then_soft_starts(harness, wait_for) -> None:
    """The follower driver's trip status (/diagnostics, as arm_driver publishes it) holds teleop; it says so once,
    in its log and its own status; the status OK again restarts from the follower's present pose."""
    from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
    from rcl_interfaces.msg import Log

    h = harness(soft_start_duration=2.0)
    diagnostics_pub = h.peer.create_publisher(DiagnosticArray, "/diagnostics", 10)
    logged: list[str] = []
    teleop_status: list[DiagnosticStatus] = []
    h.peer.create_subscription(Log, "/rosout", lambda log: logged.append(log.msg) if log.name == "teleop" else None,
                               100)
    h.peer.create_subscription(DiagnosticArray, "/diagnostics", lambda a: teleop_status.extend(
        s for s in a.status if s.name == "/teleop"), 50)
    reason = "servo 13 (joint3): no valid reply for 0.52 s (error timeout 0.50 s)"

    def trip(level: bytes, message: str, why: str) -> None:
        status = DiagnosticStatus(level=level, name="/follower/arm_driver: trip", message=message,
                                  hardware_id="/dev/ttyUSB1", values=[KeyValue(key="reason", value=why)])
        diagnostics_pub.publish(DiagnosticArray(status=[status]))

    assert feed_until_command(h, wait_for, np.full(N, 0.1))
    held = f"follower tripped: {reason}; not commanding; call /follower/arm_driver/reboot"

    def tripped_step() -> None:
        trip(DiagnosticStatus.ERROR, f"follower tripped, torque off and holding: {reason}; call "
                                     "/follower/arm_driver/reboot", reason)
        h.follower_pub.publish(h.state("follower", np.full(N, 0.1)))
        h.leader_pub.publish(h.state("leader", np.full(N, 0.3)))
        h.spin_for(0.01)

    assert wait_for(lambda: h.teleop.core.state.value == "tripped", 5.0, tripped_step)
    h.spin_for(0.05)                                              # commands already in flight arrive
    count = len(h.commands)
    assert wait_for(lambda: any(s.level == DiagnosticStatus.WARN and s.message == held for s in teleop_status)
                    and held in logged, 5.0, tripped_step)
    for _ in range(30):
        tripped_step()
    assert len(h.commands) == count                               # nothing commanded while tripped
    assert logged.count(held) == 1                                # said once, though the status came many times
    # Rebooted: the driver says OK, the follower is at a new present pose; the first command starts from it.
    present = np.array([0.05, -0.1, 0.2, 0.0, 0.1])

    def back_step() -> None:
        trip(DiagnosticStatus.OK, "not tripped", "")
        h.follower_pub.publish(h.state("follower", present))
        h.leader_pub.publish(h.state("leader", np.full(N, 0.3)))
        h.spin_for(0.01)

    assert wait_for(lambda: len(h.commands) > count, 5.0, back_step)
    np.testing.assert_allclose(h.commands[count].position, present, atol=0.01)   # the blend's first 10 ms of 2 s
    assert h.teleop.core.state.value == "soft_start"


def test_protective_stop_holds_on_the_estimated_force_says_why_and_releases_on_the_service(harness, wait_for) -> None:
    """/estimator/force above the threshold: commands stop, '<node>: protective stop' is ERROR with the reason;
    ~/release_protective_stop brings the commands back."""
    from diagnostic_msgs.msg import DiagnosticArray
    from geometry_msgs.msg import WrenchStamped
    from std_srvs.srv import Trigger

    from na_teleop.teleop_core import TeleopState

    h = harness(protective_stop_enabled=True, protective_stop_threshold=10.0, protective_stop_min_duration=0.02)
    force_pub = h.peer.create_publisher(WrenchStamped, "/estimator/force", 10)
    statuses: dict[str, tuple[int, str]] = {}
    h.peer.create_subscription(DiagnosticArray, "/diagnostics", lambda a: statuses.update(
        {s.name: (s.level[0] if isinstance(s.level, bytes) else s.level, s.message) for s in a.status}), 50)
    release = h.peer.create_client(Trigger, "/teleop/release_protective_stop")
    assert feed_until_command(h, wait_for, np.zeros(N))
    assert wait_for(lambda: force_pub.get_subscription_count() > 0, 5.0, h.spin)
    blocked = np.array([0.1, -0.1, 0.2, 0.05, 0.3])     # where the follower is held up (its goal: zeros)
    h.follower_pub.publish(h.state("follower", blocked))
    assert wait_for(lambda: h.teleop.core._follower_position is not None
                    and np.allclose(h.teleop.core._follower_position, blocked), 5.0, h.spin)

    def push() -> None:
        wrench = WrenchStamped()
        wrench.wrench.force.z = 25.0
        force_pub.publish(wrench)
        h.leader_pub.publish(h.state("leader", np.zeros(N)))
        h.spin_for(0.01)

    assert wait_for(lambda: h.teleop.core.state is TeleopState.PROTECTIVE_STOP, 5.0, push)
    assert wait_for(lambda: statuses.get("/teleop: protective stop", (0, ""))[0] == 2, 5.0, h.spin)
    assert "25.0 N" in statuses["/teleop: protective stop"][1]
    h.spin_for(0.05)
    # the stop's one command holds the arm where it is, the gripper at its last goal
    np.testing.assert_allclose(h.commands[-1].position, [0.1, -0.1, 0.2, 0.05, 0.0], atol=1e-9)
    count = len(h.commands)
    for _ in range(10):
        push()
    assert len(h.commands) == count
    assert wait_for(release.service_is_ready, 5.0, h.spin)
    future = release.call_async(Trigger.Request())
    assert wait_for(future.done, 5.0, h.spin)
    assert future.result().success and "released" in future.result().message
    assert feed_until_command(h, wait_for, np.zeros(N))


def test_protective_stop_parameter_outside_its_range_is_refused(ros_context) -> None:
    from rclpy.parameter import Parameter

    from na_teleop.teleop_core import TeleopConfigError
    from na_teleop.teleop_node import TeleopNode

    with pytest.raises(TeleopConfigError, match="protective_stop_threshold"):
        TeleopNode(context=ros_context, parameter_overrides=[Parameter("protective_stop_threshold", value=500.0)])
