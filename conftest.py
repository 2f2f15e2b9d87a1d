"""Workspace-wide pytest fixtures: an isolated DDS domain per test session, a private
rclpy context per test, and polling helpers (never sleep-and-hope)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator

import pytest

# Each test session gets its own DDS domain and localhost-only discovery, so parallel
# sessions (and other ROS processes on the machine) never see each other. Set before any
# test module imports rclpy.
if not os.environ.get("ROS_DOMAIN_ID"):
    os.environ["ROS_DOMAIN_ID"] = str(1 + os.getpid() % 100)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that is neither a node nor a system test as a unit test."""
    for item in items:
        if not any(item.get_closest_marker(m) for m in ("node", "system")):
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
