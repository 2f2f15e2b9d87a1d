"""Workspace-wide pytest fixtures: an isolated DDS domain per test session, a private
rclpy context per test, one executor for a test's nodes, polling helpers (never sleep-and-hope)
and emulated servos built from the robot spec."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.expression import Expression  # pytest's own -m parser: the same reading as -m

from na_common.dds_transport import use_udp_transport

# Each test session gets its own DDS domain and localhost-only discovery, so parallel
# sessions (and other ROS processes on the machine) never see each other. Set before any
# test module imports rclpy. Workers of one ``pytest -n N`` run (pytest-xdist) share the
# environment, so each moves to its own domain above the session's.
if not os.environ.get("ROS_DOMAIN_ID"):
    os.environ["ROS_DOMAIN_ID"] = str(1 + os.getpid() % 100)
_WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")
if _WORKER.startswith("gw"):
    os.environ["ROS_DOMAIN_ID"] = str(1 + (int(os.environ["ROS_DOMAIN_ID"]) + 1 + int(_WORKER[2:])) % 101)
os.environ["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
os.environ.setdefault("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp")
# Localhost over UDP, no shared memory: see na_common.dds_transport (its port check can stall a publish).
use_udp_transport()


def _selects_live_tests(marker_expression: str) -> bool:
    """Whether ``-m marker_expression`` can select a system test (one marked system, perhaps slow too)."""
    expression = Expression.compile(marker_expression)
    return any(expression.evaluate(lambda name, /, markers=markers, **_: name in markers)
               for markers in ({"system"}, {"system", "slow"}))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto`` (pytest.ini): two workers when the ``-m`` selection has no system test, none otherwise.

    The system tests run the whole graph on the simulated rig in real time and are written for a machine that runs
    nothing else of the suite beside them, so a run that may select one (no ``-m``, or ``-m system``) runs in one
    process; ``./scripts/test.sh`` runs everything else first on two workers, then the system tests alone."""
    expression = config.option.markexpr
    if not expression or _selects_live_tests(expression):
        return 0
    return min(2, os.cpu_count() or 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that is neither a node, a system nor a slow test as a unit test: ``-m unit`` is the quick
    inner loop (about two minutes on 2 cores); ``./scripts/test.sh`` runs everything."""
    for item in items:
        if not any(item.get_closest_marker(m) for m in ("node", "system", "slow")):
            item.add_marker(pytest.mark.unit)


_HOST_PROBE = Path(__file__).resolve().parent / "tests" / "host_stall_probe.py"


def _stolen_cpu_seconds() -> float:
    """CPU time the hypervisor took from this machine since boot, all CPUs (/proc/stat's 'steal')."""
    try:
        return int(Path("/proc/stat").read_text().split("\n", 1)[0].split()[8]) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return 0.0


class HostProbe:
    """tests/host_stall_probe.py beside a system test: late wake-ups of a SCHED_FIFO 99 thread, read while the
    test runs (``worst_between``) and summarised in the report of a test that fails (``summary``)."""

    def __init__(self, folder: Path) -> None:
        self.log = folder / "host_stalls.txt"
        self.steal_at_start, self.started = _stolen_cpu_seconds(), time.time()
        self.process = subprocess.Popen([sys.executable, str(_HOST_PROBE), "--log", str(self.log)])

    def _lines(self) -> list[list[str]]:
        return [line.split() for line in self.log.read_text().splitlines()] if self.log.is_file() else []

    def late_wakeups(self) -> list[tuple[float, float]]:
        """(Unix time the sleep began, ms late) of every wake-up over 20 ms late so far."""
        return [(float(at), float(ms)) for at, ms in (line for line in self._lines() if line[0] != "realtime")]

    def worst_between(self, start: float, end: float) -> float:
        """The latest wake-up (ms) whose sleep began between the Unix times ``start`` and ``end``; 0 when none."""
        return max((ms for at, ms in self.late_wakeups() if start <= at <= end), default=0.0)

    def summary(self) -> str:
        realtime = any(line == ["realtime", "1"] for line in self._lines())
        worst = sorted(self.late_wakeups(), key=lambda item: -item[1])[:8]
        return (f"host stall probe ({'SCHED_FIFO 99' if realtime else 'normal scheduling: refused SCHED_FIFO'}, "
                f"2 ms sleeps) over {time.time() - self.started:.0f} s: {len(self.late_wakeups())} wake-up(s) over "
                f"20 ms late; worst (unix time, ms): {[(round(at, 2), ms) for at, ms in worst]}; CPU time stolen "
                f"by the hypervisor {_stolen_cpu_seconds() - self.steal_at_start:.2f} s")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()


@pytest.fixture(autouse=True)
def host_probe(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProbe | None]:
    """The host stall probe beside each system test (None for other tests)."""
    if request.node.get_closest_marker("system") is None:
        yield None
        return
    probe = HostProbe(tmp_path_factory.mktemp("host"))
    try:
        yield probe
    finally:
        probe.stop()


# A wake-up of the SCHED_FIFO 99 probe later than this means no process of the graph could run for that long:
# none of the graph's real-time threads outranks the probe, and the kernel's real-time throttling (it holds
# real-time threads back for the rest of a second once they used 950 ms of it, sched_rt_runtime_us 950000) would
# need the graph's real-time threads to busy a CPU for 0.95 s, which they never come near. 50 ms is also the
# simulated rig's own pace margin: a stop that long puts its physics behind wall time by itself.
HOST_STOP_MS = 50.0
LIVE_ATTEMPTS = 3
# How long after the machine stopped a fault can be stamped: a driver reports a silent bus up to its error timeout
# (0.5 s) after the silence began; the rig's pace ERROR reaches /diagnostics up to its 1 s period after the stall
# and is held there for 1.5 s, so a stop up to 2.5 s before the window can void it.
FAULT_LEAD_S = 3.0


class VoidLivePhaseError(AssertionError):
    """A live phase that ran on an unsound rig (a driver tripped, a bus was silent, the rig fell behind)."""

    def __init__(self, message: str, start: float, end: float, episode: str | None = None) -> None:
        super().__init__(message)
        self.start, self.end, self.episode = start, end, episode


class LiveAttempts:
    """Runs a live phase of a system test again when it was void while the machine itself stopped.

    A void with no such stop fails the test at once: that fault is the graph's own. Voids re-run are printed and
    kept in ``voided``; at most LIVE_ATTEMPTS attempts in all."""

    def __init__(self, probe: HostProbe | None) -> None:
        self.probe = probe
        self.voided: list[str] = []

    @staticmethod
    def void(message: str, start: float, end: float, episode: str | None = None) -> None:
        """Raise the void of the phase that ran from ``start`` to ``end`` (Unix times)."""
        raise VoidLivePhaseError(message, start, end, episode)

    def run(self, phase: Callable[[], Any], what: str,
            on_void: Callable[[VoidLivePhaseError], None] | None = None) -> Any:
        for attempt in range(1, LIVE_ATTEMPTS + 1):
            try:
                return phase()
            except VoidLivePhaseError as void:
                if on_void is not None:
                    on_void(void)
                stop_ms = self.probe.worst_between(void.start - FAULT_LEAD_S, void.end) if self.probe else 0.0
                if stop_ms <= HOST_STOP_MS or attempt == LIVE_ATTEMPTS:
                    raise VoidLivePhaseError(f"{void} [attempt {attempt} of {what}; the host's longest stop meanwhile "
                                   f"{stop_ms:.0f} ms]", void.start, void.end, void.episode) from None
                self.voided.append(f"{what}, attempt {attempt}: the host stopped for {stop_ms:.0f} ms: {void}")
                print(f"\n{self.voided[-1]}; running it again", flush=True)
        raise AssertionError("unreachable")


@pytest.fixture
def live(host_probe: HostProbe | None) -> LiveAttempts:
    """:class:`LiveAttempts` with this test's host stall probe."""
    return LiveAttempts(host_probe)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failed system test's report says what the host did meanwhile and what still runs after it."""
    outcome = yield
    report = outcome.get_result()
    probe = getattr(item, "funcargs", {}).get("host_probe")
    if report.when == "call" and report.failed and probe is not None:
        processes = subprocess.run(["ps", "-eo", "pid,pgid,cls,rtprio,ni,pcpu,etimes,args", "--sort=-pcpu"],
                                   capture_output=True, text=True).stdout.splitlines()[:12]
        rt_runtime = Path("/proc/sys/kernel/sched_rt_runtime_us")
        report.sections.append(("host during the test", "\n".join([
            probe.summary(),
            f"{os.cpu_count()} CPUs, load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}, "
            f"sched_rt_runtime_us {rt_runtime.read_text().strip() if rt_runtime.is_file() else '?'}",
            "processes after the test, most CPU first:", *(line[:160] for line in processes)])))


@pytest.fixture
def ros_context() -> Iterator[object]:
    """A private rclpy context, initialised for one test and shut down after it.

    The objects the test session holds so far are frozen out of the garbage collector meanwhile, as every node
    process freezes its start-up objects (na_common.ros_node): a full collection walks every tracked object with
    the GIL held, and in a session that has run hundreds of tests it took 100-160 ms here, long enough to stall
    an in-process driver's bus loop past its servos' Bus Watchdog on a slower machine."""
    import rclpy
    from rclpy.context import Context

    gc.freeze()
    context = Context()
    rclpy.init(context=context)
    try:
        yield context
    finally:
        rclpy.shutdown(context=context)
        gc.unfreeze()


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
