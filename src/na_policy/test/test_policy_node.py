"""Policy node in-process over real DDS: follower states and estimator outputs in, 60 Hz commands out; the
estimator's loss stops it with the reason on /diagnostics; ~/enable resumes; bad start-up is one line."""

from __future__ import annotations

import time

import numpy as np
import pytest

from na_description import load_spec

pytestmark = pytest.mark.node

SPEC = load_spec()
POSE = np.array([0.0, 0.15, -0.46, 1.66, -0.26])
DELTA = 0.01


class Harness:
    def __init__(self, graph, policy_path, **params) -> None:
        from diagnostic_msgs.msg import DiagnosticArray
        from geometry_msgs.msg import WrenchStamped
        from rclpy.parameter import Parameter
        from std_srvs.srv import SetBool

        from na_msgs.msg import ArmState, Contact, JointCommand
        from na_policy.policy_node import PolicyNode

        settings = {"policy_path": str(policy_path), "start_duration": 0.0, "start_settle": 0.0,
                    "estimator_timeout": 0.2, **params}
        graph.spin_timeout = 0.002
        self.graph = graph
        self.node = graph.add(PolicyNode(context=graph.context,
                                         parameter_overrides=[Parameter(k, value=v) for k, v in settings.items()]))
        self.peer = graph.probe("fake_driver_and_estimator")
        self.state_pub = self.peer.create_publisher(ArmState, "/follower/arm_state", 10)
        self.force_pub = self.peer.create_publisher(WrenchStamped, "/estimator/force", 10)
        self.contact_pub = self.peer.create_publisher(Contact, "/estimator/contact", 10)
        self.commands: list[tuple[float, list[float]]] = []
        self.peer.create_subscription(JointCommand, "/follower/command",
                                      lambda m: self.commands.append((time.monotonic(), list(m.position))), 100)
        self.statuses: list[tuple[int, str]] = []
        self.peer.create_subscription(DiagnosticArray, "/diagnostics", self._on_diagnostics, 10)
        self.enable = self.peer.create_client(SetBool, "/policy/enable")
        self.ArmState, self.WrenchStamped, self.Contact, self.SetBool = ArmState, WrenchStamped, Contact, SetBool
        self.states_sent = 0

    def _on_diagnostics(self, msg) -> None:
        for status in msg.status:
            if status.name == "policy":
                self.statuses.append((status.level[0] if isinstance(status.level, bytes) else status.level,
                                      status.message))

    def connected(self) -> bool:
        return self.state_pub.get_subscription_count() > 0 and self.force_pub.get_subscription_count() > 0 \
            and self.node.pub_command.get_subscription_count() > 0

    def feed(self, seconds: float, estimator: bool = True, rate: float = 100.0) -> None:
        """States at ``rate`` Hz (and estimator outputs with each, if ``estimator``) for ``seconds``."""
        from builtin_interfaces.msg import Time

        end = time.monotonic() + seconds
        next_at = time.monotonic()
        first = self.node.get_clock().now().nanoseconds
        k = 0
        while time.monotonic() < end:
            if time.monotonic() >= next_at:
                next_at += 1.0 / rate
                # Stamped on the driver's schedule (exactly 1/rate apart), whenever this loop gets to send.
                ns = first + round(k * 1e9 / rate)
                k += 1
                stamp = Time(sec=ns // 1_000_000_000, nanosec=ns % 1_000_000_000)
                state = self.ArmState(role="follower", name=SPEC.joint_names, position=POSE.tolist())
                state.header.stamp = stamp
                self.state_pub.publish(state)
                self.states_sent += 1
                if estimator:
                    force = self.WrenchStamped()
                    force.header.stamp, force.wrench.force.z = stamp, 3.0
                    self.force_pub.publish(force)
                    self.contact_pub.publish(self.Contact(header=force.header, probability=0.9, in_contact=True))
            self.graph.spin()


@pytest.fixture
def harness(ros_graph, tmp_path, make_policy):
    def make(variant: str = "force", **params) -> Harness:
        path = make_policy(variant=variant, delta=DELTA).save(tmp_path / f"{variant}.npz")
        h = Harness(ros_graph, path, **params)
        assert ros_graph.wait_for(h.connected, 10.0), "policy node and test peer did not discover each other"
        return h

    return make


def test_commands_at_the_policy_rate(harness, wait_for) -> None:
    h = harness(state_timeout=1.0)                  # a loaded test host delays states; the guard has unit tests
    h.feed(0.5)
    assert h.commands and np.allclose(h.commands[-1][1], POSE + DELTA, atol=1e-6)
    h.commands.clear()
    h.states_sent = 0
    h.feed(2.0)
    sent = h.states_sent
    h.graph.spin_for(0.3)
    # States stamped 10 ms apart are answered at 60 Hz: 6 commands for every 10 states (decimated by stamp).
    assert sent >= 100
    assert 0.5 * sent <= len(h.commands) <= 0.7 * sent, (len(h.commands), sent)


def test_estimator_loss_holds_and_says_why_then_enable_resumes(harness) -> None:
    h = harness()
    h.feed(0.6)
    assert h.commands and np.allclose(h.commands[-1][1], POSE + DELTA, atol=1e-6)
    stopped = time.monotonic()
    h.feed(2.0, estimator=False)
    late = [c for t, c in h.commands if t > stopped + 0.4]
    assert len(late) > 30                                           # it keeps holding on the same clock
    assert all(np.allclose(c, late[0]) for c in late)
    assert any(level == 2 and "estimator lost" in message for level, message in h.statuses)
    response = h.graph.call(h.enable, h.SetBool.Request(data=True))
    assert response.success
    h.commands.clear()
    h.feed(0.5)
    assert h.commands and np.allclose(h.commands[-1][1], POSE + DELTA, atol=1e-6)


def test_force_policy_waits_for_the_estimator(harness) -> None:
    h = harness()
    h.feed(0.6, estimator=False)
    assert h.commands and all(np.allclose(c, POSE) for _, c in h.commands)    # holds where the arm is
    assert any("waiting for the estimator" in message for _, message in h.statuses) or \
        "waiting for the estimator" in h.node.core.message


def test_bad_policy_path_is_one_line(ros_context, tmp_path) -> None:
    from rclpy.parameter import Parameter

    from na_policy.policy_file import PolicyFileError
    from na_policy.policy_node import PolicyNode

    with pytest.raises(PolicyFileError, match="policy file not found"):
        PolicyNode(context=ros_context, parameter_overrides=[Parameter("policy_path", value=str(tmp_path / "no.npz"))])


def test_help_lists_the_parameters(capsys) -> None:
    from na_policy.policy_node import main

    assert main(["policy", "--help"]) == 0
    text = capsys.readouterr().out
    assert "estimator_timeout" in text and "max_lead" in text


def test_protective_stop_holds_says_why_and_releases_on_the_service(harness) -> None:
    from std_srvs.srv import Trigger

    # The peer's estimator says 3 N: above a 2.5 N threshold, so the stop latches 50 ms into the feed.
    h = harness(protective_stop_enabled=True, protective_stop_threshold=2.5, protective_stop_hysteresis=1.0,
                protective_stop_min_duration=0.05, diagnostics_period=0.2)
    h.feed(0.6)
    assert h.node.core.protective_stop.stopped
    assert any(level == 2 and "protective stop" in message and "2.5 N" in message for level, message in h.statuses)
    held = [c for _, c in h.commands[-10:]]
    assert all(np.allclose(c, held[0]) for c in held)
    release = h.peer.create_client(Trigger, "/policy/release_protective_stop")
    response = h.graph.call(release, Trigger.Request())
    assert response.success and "released" in response.message
    h.commands.clear()
    h.feed(0.3)
    assert not h.node.core.protective_stop.stopped                  # 3 N is still above: not re-armed, no new stop
    assert h.commands and np.allclose(h.commands[-1][1], POSE + DELTA, atol=1e-6)
