"""A part of the live rig in a process of its own, driven over a pipe (ROS-free).

The live rig runs its physics in one process and everything that talks to the outside (each servo
bus, the F/T sensors, the ROS truth publisher) in processes of their own, so that none of them waits
for another's interpreter lock. A child is ``target(control, setup)``: it builds its part, sends
one ``dict`` of facts (ports, whether real-time priority took, its pid), answers each request that is
not ``"stop"`` with ``handle(request)`` and, on ``"stop"`` or when the parent goes away (the pipe
closes), stops and sends a last ``dict`` of counters.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
from collections.abc import Callable
from typing import Any

START_TIMEOUT_S = 60.0          # spawning a Python process on a loaded 2-core machine can take seconds
STOP_TIMEOUT_S = 5.0


def take_realtime(priority: int, nice: int = 0) -> bool:
    """SCHED_FIFO at ``priority`` for the calling thread (and the threads it starts); for 0, normal scheduling
    at ``nice`` (negative: a larger share of the CPU than other normal processes, where the OS allows it).
    True when the real-time policy took (it needs CAP_SYS_NICE or an RLIMIT_RTPRIO that allows it)."""
    try:
        if priority <= 0:
            os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
            with contextlib.suppress(OSError):
                os.setpriority(os.PRIO_PROCESS, 0, nice)      # Linux: this thread only, inherited by new ones
            return False
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
        return True
    except (AttributeError, OSError):
        return False


def serve(control, facts: dict[str, Any], handle: Callable[[Any], Any]) -> None:
    """The child's side of the protocol, once its part runs: facts out, requests in until "stop" or EOF."""
    control.send({**facts, "pid": os.getpid()})
    try:
        while (request := control.recv()) != "stop":
            control.send(handle(request))
    except (EOFError, OSError):          # the parent went away
        pass


def say_goodbye(control, counters: dict) -> None:
    """The child's last word after its part stopped (the parent may be gone already)."""
    with contextlib.suppress(BrokenPipeError, OSError):
        control.send(counters)


def _child_main(target: Callable[..., None], control, setup: Any) -> None:
    """The child ignores SIGINT and SIGTERM: a Ctrl-C or a launch's SIGTERM reaches the whole process group,
    and the parent (which takes them) stops its children in order; a parent that dies closes the pipe."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    target(control, setup)


class ChildProcess:
    """Starts ``target(control, setup)`` in a spawned process; ``facts`` waits for what it reported (several
    children start side by side when their facts are asked for only after all were started)."""

    def __init__(self, target: Callable[..., None], setup: Any, name: str) -> None:
        context = multiprocessing.get_context("spawn")
        self._control, child_control = context.Pipe()
        self._process = context.Process(target=_child_main, args=(target, child_control, setup), daemon=True,
                                        name=name)
        self._process.start()
        child_control.close()
        self.name = name
        self._final: dict[str, Any] | None = None
        self._facts: dict[str, Any] | None = None

    @property
    def facts(self) -> dict[str, Any]:
        """What the child reported once its part ran (ports, real-time priority, pid)."""
        if self._facts is None:
            if not self._control.poll(START_TIMEOUT_S):
                self.kill()
                raise RuntimeError(f"the rig's {self.name} process did not start within {START_TIMEOUT_S:.0f} s")
            try:
                self._facts = self._control.recv()
            except EOFError:
                self.kill()
                raise RuntimeError(f"the rig's {self.name} process failed at start-up (its error is above)") \
                    from None
        return self._facts

    @property
    def alive(self) -> bool:
        return self._process.is_alive()

    def request(self, request: Any) -> Any:
        """Send one request, return the child's answer."""
        if self._final is not None:
            raise RuntimeError(f"the rig's {self.name} process has stopped")
        self.facts                                   # noqa: B018  (the handshake comes first)
        self._control.send(request)
        return self._control.recv()

    def stop(self) -> dict[str, Any]:
        """Stop the child (idempotent); its final counters."""
        if self._final is None:
            self._final = {}
            try:
                if self._facts is None and self._control.poll(0):
                    self._facts = self._control.recv()
                self._control.send("stop")
                if self._control.poll(STOP_TIMEOUT_S):
                    self._final = self._control.recv()
            except (BrokenPipeError, EOFError, OSError):
                pass
            self._process.join(STOP_TIMEOUT_S)
            self.kill()
        return self._final

    def kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join(STOP_TIMEOUT_S)
