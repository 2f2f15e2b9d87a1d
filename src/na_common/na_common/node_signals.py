"""How a node process stops on SIGINT and SIGTERM, from its first line to its last (stdlib only).

A node takes the signals itself: rclpy's handlers shut the context down from a thread of their own while
the main thread may be inside a callback or the node's own shutdown, and a publish or a log then fails
half-way ("teleop failed: RuntimeError('Unable to convert call argument ...')", "rcl_shutdown already
called"). :data:`STOP` notes the first signal in :attr:`StopSignals.requested` and, unless told to be
quiet, raises ``KeyboardInterrupt`` to abort what runs (imports, building the node). A
``KeyboardInterrupt`` raised where Python ignores exceptions (a weakref callback) is lost, the note is
not: :func:`na_common.ros_node.run_node` looks at it before and after each phase. While a node spins with
:func:`na_common.ros_node.spin_node` or closes, the handler is quiet: the spin loop ends after the callback
that runs, the closing completes. A spin loop of a node's own that runs until its context is shut down
gets :attr:`StopSignals.on_stop` instead (run_node shuts the context down from a thread, as rclpy would).

Importing rclpy and a node's modules takes a second or more on a busy machine. A console script that
points at :func:`run` through a module of its own with stdlib imports only (``na_teleop.executables``)
has the handlers in place before those imports.
"""

from __future__ import annotations

import importlib
import signal
import threading
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class StopSignals:
    """The SIGINT/SIGTERM handler of a node process (one instance, :data:`STOP`)."""

    def __init__(self) -> None:
        self.requested: int | None = None       # the first signal received
        self.quiet = False                       # note only, never raise (spinning, closing)
        self.protected: set[CodeType] = set()    # code in which a signal is noted only (it must run to its end)
        self.on_stop: Callable[[], None] | None = None   # called once on the first signal instead of raising
        self._previous: dict[int, Any] = {}

    @property
    def stop_requested(self) -> bool:
        return self.requested is not None

    def install(self) -> None:
        """Take SIGINT and SIGTERM (the main thread only may); what was received before stays noted."""
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNALS:
            previous = signal.signal(signum, self._on_signal)
            self._previous.setdefault(signum, previous)

    def restore(self) -> None:
        """Give the signals back to the handlers before :meth:`install`, forget what was received."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}
        self.requested, self.quiet, self.on_stop = None, False, None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        first = self.requested is None
        self.requested = self.requested or signum
        if self.quiet or (frame is not None and frame.f_code in self.protected):
            return
        if self.on_stop is not None:
            if first:
                self.on_stop()
            return
        raise KeyboardInterrupt(signal.Signals(signum).name)


STOP = StopSignals()


def run(module: str, argv: list[str] | None = None) -> int:
    """Entry point body: import ``module`` and return its ``main(argv)``. A signal while it imports, or after its
    ``main`` returned (the node is closed, the process only exits), ends with 0."""
    STOP.install()
    try:
        try:
            main = importlib.import_module(module).main
        except Exception:
            # The KeyboardInterrupt raised inside an import can come out as another error: CPython turns one that
            # lands while it builds an ImportError (a module probing for an optional part) into "TypeError:
            # expected a message argument". With a signal noted, the import broke because of it.
            if STOP.stop_requested:
                return 0
            raise
        return 0 if STOP.stop_requested else int(main(argv) or 0)
    except KeyboardInterrupt:
        return 0
    finally:
        for signum in SIGNALS:
            signal.signal(signum, signal.SIG_IGN)
