"""The node shell shared by every NeuralActuator executable: parameters, ``main``, stamps, diagnostics.

The only module of na_common that imports rclpy. Nodes declare their parameters from a dict of
defaults and a dict of descriptions (:func:`declare_and_read`), print them with ``--help``
(:func:`usage`) and run through :func:`run_node` (init, spin, an orderly stop on SIGINT/SIGTERM in every
phase, exit codes).
"""

from __future__ import annotations

import contextlib
import gc
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import rclpy
from builtin_interfaces.msg import Time
from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from na_common.dds_transport import use_udp_transport
from na_common.diagnostics import Level, StatusReport
from na_common.node_signals import STOP
from na_common.stamps import IncreasingStamps, clock_ns_at, split_ns

# Parameters every rclpy node declares itself (never reported as undeclared).
_BUILTIN_PARAMETERS = frozenset({"use_sim_time", "start_type_description_service"})


class ParameterError(ValueError):
    """A parameter has the wrong type; the message names it."""


# ---- parameters ------------------------------------------------------------------------------------
def wants_help(argv: list[str]) -> bool:
    """``-h``/``--help`` before any ``--ros-args``."""
    user_args = argv[1: argv.index("--ros-args")] if "--ros-args" in argv else argv[1:]
    return "-h" in user_args or "--help" in user_args


def usage(executable: str, summary: str, defaults: Mapping[str, Any], descriptions: Mapping[str, str]) -> str:
    """Help text of a node: what it does and every parameter with its default."""
    lines = [f"usage: {executable} --ros-args [--params-file FILE] [-p NAME:=VALUE ...] [-r __ns:=/NAMESPACE]",
             "", summary, "", "parameters (default):"]
    width = max(map(len, defaults))
    for name, default in defaults.items():
        lines.append(f"  {name:<{width}}  {descriptions.get(name, '')} ({default!r})")
    return "\n".join(lines)


def declare_and_read(node: Node, defaults: Mapping[str, Any], descriptions: Mapping[str, str], *,
                     typed: bool = True) -> dict[str, Any]:
    """Declare every key of ``defaults`` with its description and read the values back.

    A key declared before is only read (a node reads e.g. ``robot_spec`` first when the other defaults
    depend on it). Parameters are declared with dynamic typing, so YAML ``100`` and ``100.0`` both work. ``typed``:
    each value is then converted to its default's type (int -> float, whole float -> int, element-wise
    in lists) and a value of another kind raises :class:`ParameterError` naming the parameter; without
    it values come back as given, for a node whose config builder checks them itself.
    """
    undescribed = sorted(set(defaults) - set(descriptions))
    if undescribed:
        raise ValueError(f"parameters without a description: {', '.join(undescribed)}")
    values = {}
    for name, default in defaults.items():
        if not node.has_parameter(name):
            descriptor = ParameterDescriptor(description=descriptions[name], dynamic_typing=True)
            node.declare_parameter(name, default, descriptor)
        value = node.get_parameter(name).value
        value = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else value
        values[name] = _as_type_of(name, value, default) if typed else value
    return values


def _as_type_of(name: str, value: Any, default: Any) -> Any:
    if isinstance(default, list):
        if not isinstance(value, list):
            raise ParameterError(f"parameter '{name}' must be a list like {default!r}, got {value!r}")
        if not default:
            return value
        return [_as_type_of(f"{name}[{k}]", v, default[0]) for k, v in enumerate(value)]
    kind = type(default)
    if isinstance(value, kind) and (kind is not int or not isinstance(value, bool)):
        return value
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if kind is int and isinstance(value, float) and value.is_integer():
        return int(value)
    raise ParameterError(f"parameter '{name}' must be {kind.__name__}, got {value!r}")


def undeclared_overrides(node: Node) -> list[str]:
    """Names given to the node (parameter file, ``-p``, overrides) that it never declared: ROS ignores
    them silently, so the node can say so."""
    given = getattr(node, "_parameter_overrides", {})      # rclpy keeps the overrides there (no public accessor)
    return sorted(n for n in given if n not in _BUILTIN_PARAMETERS and not node.has_parameter(n))


# ---- executors -------------------------------------------------------------------------------------
EXECUTOR_KINDS = ("events", "single_threaded")


def make_executor(context: Any, kind: str = "events") -> Any:
    """The executor every NeuralActuator process spins with: rclpy's EventsExecutor (``events``; Jazzy has it
    as rclpy.experimental) where this rclpy has it, else the SingleThreadedExecutor (``single_threaded``).

    The events executor hands a message to its callback without rebuilding a wait set in Python each time:
    on the simulated collect graph (2 cores) it cut the recorder from 24 % to 12 % of a core and the teleop
    from 19 % to 12 %, which is what lets the graph keep its rates beside other work. Spin it with
    ``spin_once`` in a loop: rclpy 7.1's ``EventsExecutor.spin()`` runs no timer and ignores SIGINT."""
    if kind not in EXECUTOR_KINDS:
        raise ValueError(f"executor must be one of {', '.join(EXECUTOR_KINDS)}, got {kind!r}")
    if kind == "events":
        try:
            from rclpy.experimental import EventsExecutor
        except ImportError:
            pass
        else:
            # It enables faulthandler on sys.stderr, which must then be a real file (not a test's capture).
            if sys.__stderr__ is not None:
                with contextlib.redirect_stderr(sys.__stderr__):
                    return EventsExecutor(context=context)
    from rclpy.executors import SingleThreadedExecutor

    return SingleThreadedExecutor(context=context)


# ---- main ------------------------------------------------------------------------------------------
def stop_requested() -> bool:
    """True once SIGINT or SIGTERM asked this node process to stop (a node's own spin loop may look)."""
    return STOP.stop_requested


def spin_node(node: Node, until: Callable[[], bool] | None = None, period: float = 0.1,
              executor_kind: str = "events") -> None:
    """Spin ``node`` on :func:`make_executor`'s executor until a signal asks the process to stop, ``until()`` holds
    or the context is shut down. A signal never interrupts a callback: the loop looks every ``period`` s at most."""
    executor = make_executor(node.context, executor_kind)
    executor.add_node(node)
    STOP.quiet = True
    try:
        while not stop_requested() and not (until is not None and until()) and node.context.ok():
            executor.spin_once(timeout_sec=period)
    finally:
        executor.shutdown()
        STOP.quiet = False


def spin_until_shutdown(node: Node) -> int:
    """The default spin of :func:`run_node`: until a signal or shutdown; exit code 0."""
    spin_node(node)
    return 0


def run_node(executable: str, help_text: Callable[[], str], make_node: Callable[[], Any],
             spin: Callable[[Any], int] = spin_until_shutdown, startup_errors: tuple[type[BaseException], ...] = (),
             argv: list[str] | None = None) -> int:
    """The ``main`` of a node executable: ``--help``, init, spin, and always close the node and shut down.

    rclpy's own signal handlers are not installed (:mod:`na_common.node_signals`). Order on the way out: the
    spin loop ends (its executor is shut down), ``node.close()`` where the node has one (it stops its own
    threads and timers) else ``destroy_node()``, then the context is shut down. Exit codes: what ``spin``
    returns; 2 for a start-up error (``startup_errors`` or a bad parameter, logged as fatal); 0 on
    SIGINT/SIGTERM in any phase, an rclpy error after one included; 1 for any other failure (logged).
    """
    argv = list(argv if argv is not None else sys.argv)
    if wants_help(argv):
        print(help_text())
        return 0
    # Signals (na_common.node_signals): rclpy installs none; one during the start-up aborts it, one in this
    # function's own lines is only noted (the node it just made is always closed), spin_node and the closing
    # are never interrupted.
    STOP.install()
    STOP.protected.add(run_node.__code__)
    logger = rclpy.logging.get_logger(executable)
    node = None
    code = 0
    stopper: list[threading.Thread] = []     # the thread that shuts the context down for a spin of a node's own
    try:
        if not stop_requested():
            transport_note = use_udp_transport()
            rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
            if transport_note:
                logger.info(transport_note)
            node = make_node()
        if node is not None:
            ignored = undeclared_overrides(node)
            if ignored:
                logger.warning(f"ignoring parameter(s) {executable} does not have: {', '.join(ignored)}")
            # Start-up made most of the objects this process will ever hold; frozen, they are no longer walked by
            # each full collection, so a collection in the spin (which holds the GIL) takes milliseconds, not the
            # hundreds that stalled a driver's real-time bus loop behind it on a busy host.
            gc.freeze()
            code = 0 if stop_requested() else _spin(spin, node, stopper)
    except (KeyboardInterrupt, ExternalShutdownException):
        code = 0
    except (*startup_errors, ParameterError, ParameterException) as exc:
        if stop_requested():
            code = 0                  # the start-up failed because a signal ended it half-way
        else:
            logger.fatal(str(exc) or f"{type(exc).__name__} during start-up")
            code = 2
    except Exception as exc:
        if stop_requested() or not rclpy.ok():
            code = 0                  # an rclpy call failed because the process is stopping
        else:
            logger.fatal(f"{executable} failed: {exc!r}")
            code = 1
    finally:
        STOP.quiet = True
        for thread in stopper:
            thread.join()
        _close(node, logger, executable)
        STOP.protected.discard(run_node.__code__)
        STOP.restore()
    return code


def _spin(spin: Callable[[Any], int], node: Node, stopper: list[threading.Thread]) -> int:
    """``spin(node)``. A signal meanwhile shuts the context down from a thread (kept in ``stopper``), as rclpy's
    handler would, which ends a spin of a node's own that runs until then (spin_node is not interrupted: it ends
    on the signal itself)."""

    def shut_down() -> None:
        with contextlib.suppress(Exception):          # shut down meanwhile: nothing left to do
            node.context.try_shutdown()

    def shut_down_soon() -> None:
        stopper.append(threading.Thread(target=shut_down, name="stop-on-signal"))
        stopper[-1].start()

    STOP.on_stop = shut_down_soon
    try:
        return spin(node)
    finally:
        STOP.on_stop = None


def _close(node: Any, logger: Any, executable: str) -> None:
    """Close the node, then shut the context down; an error on the way is one warning line, never a traceback."""
    try:
        if node is not None:
            getattr(node, "close", node.destroy_node)()
    except Exception as exc:
        logger.warning(f"{executable}: closing the node: {exc!r}")
    try:
        rclpy.try_shutdown()
    except Exception as exc:
        logger.warning(f"{executable}: shutting rclpy down: {exc!r}")


# ---- stamps, logs, diagnostics -------------------------------------------------------------------------
def stamp_at(node: Node, monotonic_stamp: float, order: IncreasingStamps | None = None) -> Time:
    """The node-clock stamp of an instant taken with ``time.monotonic()`` (e.g. a bus read's completion).

    The node clock is read first: a thread preempted between the two readings then dates the sample too
    early, never in the future (a future stamp is refused downstream as a hostile message). ``order``: the
    stream's :class:`~na_common.stamps.IncreasingStamps`, which keeps its stamps in order despite that."""
    clock_now_ns = node.get_clock().now().nanoseconds
    monotonic_now = time.monotonic()
    ns = clock_ns_at(monotonic_stamp, monotonic_now, clock_now_ns)
    sec, nanosec = split_ns(ns if order is None else order.after_last(ns))
    return Time(sec=sec, nanosec=nanosec)


def log_at(logger: Any, level: int, message: str) -> None:
    """Log at the severity of a diagnostic level: OK as info, WARN as warning, ERROR and STALE as error."""
    # rclpy binds a severity to each call site, hence one call per severity
    if level == Level.OK:
        logger.info(message)
    elif level == Level.WARN:
        logger.warning(message)
    else:
        logger.error(message)


def diagnostic_status(name: str, hardware_id: str, level: int, message: str,
                      values: Mapping[str, Any] | None = None) -> DiagnosticStatus:
    """A ``DiagnosticStatus``; floats among ``values`` are written with three decimals, the rest with ``str``."""
    pairs = [KeyValue(key=k, value=f"{v:.3f}" if isinstance(v, float) else str(v)) for k, v in (values or {}).items()]
    return DiagnosticStatus(level=bytes([Level(level)]), name=name, message=message, hardware_id=hardware_id,
                            values=pairs)


def diagnostic_array(node: Node, statuses: list[DiagnosticStatus]) -> DiagnosticArray:
    """Statuses stamped with the node's clock, ready for ``/diagnostics``."""
    array = DiagnosticArray(status=statuses)
    array.header.stamp = node.get_clock().now().to_msg()
    return array


def status_reports(array: DiagnosticArray) -> list[StatusReport]:
    """The statuses of a received ``DiagnosticArray`` as ROS-free :class:`StatusReport` (for a core)."""
    reports = []
    for status in array.status:
        level = status.level[0] if isinstance(status.level, (bytes, bytearray)) else int(status.level)
        reports.append(StatusReport(name=status.name, level=Level(min(level, Level.STALE)), message=status.message,
                                    hardware_id=status.hardware_id,
                                    values={kv.key: kv.value for kv in status.values}))
    return reports
