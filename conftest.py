"""Workspace-wide pytest fixtures: an isolated DDS domain per test session, a private
rclpy context per test, one executor for a test's nodes, polling helpers (never sleep-and-hope)
and emulated servos built from the robot spec."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

# Each test session gets its own DDS domain and localhost-only discovery, so parallel
# sessions (and other ROS processes on the machine) never see each other. Set before any
# test module imports rclpy.
if not os.environ.get("ROS_DOMAIN_ID"):
    os.environ["ROS_DOMAIN_ID"] = str(1 + os.getpid() % 100)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that is neither a node, a system nor a slow test as a unit test: ``-m unit`` is the quick
    inner loop (about two minutes on 2 cores); ``./scripts/test.sh`` runs everything."""
    for item in items:
        if not any(item.get_closest_marker(m) for m in ("node", "system", "slow")):
            item.add_marker(pytest.mark.unit)


@pytest.fixture
def ros_context() -> Iterator[object]:
    """A private rclpy context, initialised for one test and shut down after it."""
    import rclpy
    from rclpy.context import Context

    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)


def poll_until(condition: Callable[[], bool], timeout: float, step: Callable[[], None] | None = None,
               interval: float = 0.005) -> bool:
    """Call ``step`` (e.g. one executor spin) until ``condition()`` holds or ``timeout`` s pass."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        if step is not None:
            step()
        else:
            time.sleep(interval)
    return condition()


@pytest.fixture
def wait_for() -> Callable[..., bool]:
    """The polling helper as a fixture: ``wait_for(cond, timeout, step=None)``."""
    return poll_until


class RosGraph:
    """A test's nodes, spun by one executor (the nodes' own kind, na_common.ros_node.make_executor) in the test's
    private context.

    ``add`` a node under test, ``probe`` a helper node, then ``spin``/``wait_for``/``call``; every node
    still held is closed (``close()`` where it has one, else ``destroy_node()``) when the test ends.
    """

    def __init__(self, context: Any, spin_timeout: float = 0.01) -> None:
        from na_common.ros_node import make_executor

        self.context = context
        self.spin_timeout = spin_timeout
        self.executor = make_executor(context)
        self._nodes: list[Any] = []

    def add(self, node: Any) -> Any:
        self.executor.add_node(node)
        self._nodes.append(node)
        return node

    def probe(self, name: str = "probe") -> Any:
        """A plain node for the test's publishers, subscriptions and clients."""
        from rclpy.node import Node

        return self.add(Node(name, context=self.context))

    def spin(self) -> None:
        self.executor.spin_once(timeout_sec=self.spin_timeout)

    def spin_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.spin()

    def wait_for(self, condition: Callable[[], bool], timeout: float, step: Callable[[], None] | None = None) -> bool:
        """:func:`poll_until`, spinning the executor between looks unless ``step`` is given."""
        return poll_until(condition, timeout, step or self.spin)

    def call(self, client: Any, request: Any, timeout: float = 10.0) -> Any:
        """Wait for the service, call it and spin until the answer; returns the response."""
        assert self.wait_for(client.service_is_ready, timeout), f"service {client.srv_name} is not available"
        future = client.call_async(request)
        assert self.wait_for(future.done, timeout), f"no answer from {client.srv_name}"
        return future.result()

    @contextmanager
    def spinning(self) -> Iterator[None]:
        """Spin on a background thread meanwhile (the test blocks, e.g. on a subprocess)."""
        stop = threading.Event()
        thread = threading.Thread(target=lambda: [self.spin() for _ in iter(stop.is_set, True)], daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def close(self, node: Any) -> None:
        """Take one node off the executor and close it now (e.g. to check what its shutdown does)."""
        self._nodes.remove(node)
        self.executor.remove_node(node)
        getattr(node, "close", node.destroy_node)()

    def shutdown(self) -> None:
        for node in reversed(list(self._nodes)):
            self.close(node)
        self.executor.shutdown()


@pytest.fixture
def ros_graph(ros_context) -> Iterator[RosGraph]:
    """A :class:`RosGraph` in the test's private context; its nodes are closed after the test."""
    graph = RosGraph(ros_context)
    try:
        yield graph
    finally:
        graph.shutdown()


def build_servos(ids: Sequence[int] | None = None, state_seed: int | None = None) -> list[Any]:
    """Emulated XM430 register tables with the robot spec's servo IDs (or ``ids``), Return Delay 0 (fast)
    and the spec's baud rate in the Baud Rate register. ``state_seed``: a plausible, distinct present state
    per servo (position near the middle, small velocity/current/PWM, 12 V, 30 degC and up); None keeps
    the factory state."""
    import numpy as np

    from na_description import load_spec, xm430
    from na_sim.servo_registers import ServoRegisters

    spec = load_spec()
    baud_code = {bps: code for code, bps in xm430.BAUD_RATES.items()}[spec.baud_rate]
    rng = np.random.default_rng(state_seed)
    servos = []
    for k, servo_id in enumerate(spec.servo_ids if ids is None else ids):
        regs = ServoRegisters(servo_id)
        regs.set("return_delay_time", 0)
        regs.set("baud_rate", baud_code)
        if state_seed is not None:
            position = int(2048 + rng.integers(-300, 300))
            for name in ("present_position", "goal_position", "position_trajectory"):
                regs.set(name, position)
            regs.set("present_velocity", int(rng.integers(-50, 50)))
            regs.set("present_current", int(rng.integers(-200, 200)))
            regs.set("present_pwm", int(rng.integers(-400, 400)))
            regs.set("present_input_voltage", 120 + k)
            regs.set("present_temperature", 30 + k)
        servos.append(regs)
    return servos


@pytest.fixture
def make_servos() -> Callable[..., list[Any]]:
    """The servo factory as a fixture: ``make_servos(ids=None, state_seed=None)`` (see :func:`build_servos`)."""
    return build_servos
