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


class IncreasingStamps:
    """The stamps of one stream, published from one thread: each at least 1 ns after the one before.

    Dating a monotonic instant on the node clock reads both clocks; a thread preempted between the two
    readings dates its sample a little early, and two samples taken close together (a burst of 500 Hz F/T
    readings after a delay) then came out in reverse order (by 70 us, seen on a busy host), which rosbag2
    readers and ``na-train convert`` refuse. Order is kept; a stamp moves by at most that error."""

    def __init__(self) -> None:
        self._last_ns: int | None = None

    def after_last(self, ns: int) -> int:
        """``ns``, or 1 ns after the previous stamp where ``ns`` is not later than it."""
        if self._last_ns is not None and ns <= self._last_ns:
            ns = self._last_ns + 1
        self._last_ns = ns
        return ns


def split_ns(ns: int) -> tuple[int, int]:
    """Nanoseconds -> (sec, nanosec) as a ``builtin_interfaces/Time`` holds them (nanosec in [0, 1e9))."""
    sec, nanosec = divmod(int(ns), NS_PER_S)
    return sec, nanosec


def stamp_seconds(stamp: Stamp) -> float:
    """A stamp in seconds."""
    return stamp.sec + stamp.nanosec * 1e-9
