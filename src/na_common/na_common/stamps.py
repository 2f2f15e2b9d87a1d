"""Time stamps (ROS-free): a ``time.monotonic()`` instant on a node's clock, and stamp <-> seconds.

Drivers take their sample times from ``time.monotonic()`` (immune to clock steps) and publish them on
the node's clock: the clock reading now, less the sample's age on the monotonic clock.
"""

from __future__ import annotations

from typing import Protocol

NS_PER_S = 1_000_000_000


class Stamp(Protocol):
    """A ``builtin_interfaces/Time`` (or anything with its two fields)."""

    sec: int
    nanosec: int


def clock_ns_at(monotonic_stamp: float, monotonic_now: float, clock_now_ns: int) -> int:
    """The clock reading (ns) at the instant ``monotonic_stamp``, given both clocks read at one instant now."""
    return clock_now_ns - int((monotonic_now - monotonic_stamp) * 1e9)


def split_ns(ns: int) -> tuple[int, int]:
    """Nanoseconds -> (sec, nanosec) as a ``builtin_interfaces/Time`` holds them (nanosec in [0, 1e9))."""
    sec, nanosec = divmod(int(ns), NS_PER_S)
    return sec, nanosec


def stamp_seconds(stamp: Stamp) -> float:
    """A stamp in seconds."""
    return stamp.sec + stamp.nanosec * 1e-9
