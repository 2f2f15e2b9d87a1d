"""Waiting for a device node to appear (ROS-free).

A launch file may start a driver before its serial device exists: a USB adapter still enumerating,
or the simulated rig still linking its pseudo-terminals. The drivers wait a bounded time for the
path, and only then report it missing.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable


def wait_for_device(path: str, timeout: float, on_wait: Callable[[str], None] | None = None,
                    poll: float = 0.05) -> bool:
    """True as soon as ``path`` exists; False after ``timeout`` s. ``on_wait`` is told once, if we wait."""
    if os.path.exists(path):
        return True
    if timeout <= 0:
        return False
    if on_wait is not None:
        on_wait(f"waiting up to {timeout:g} s for '{path}' to appear")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        time.sleep(poll)
        if os.path.exists(path):
            return True
    return False
