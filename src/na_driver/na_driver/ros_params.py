"""Declaring a dict of defaults as ROS parameters and reading them back (thin rclpy helper)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node


def wants_help(argv: list[str]) -> bool:
    """``-h``/``--help`` before any ``--ros-args``."""
    user_args = argv[1: argv.index("--ros-args")] if "--ros-args" in argv else argv[1:]
    return "-h" in user_args or "--help" in user_args


def usage(executable: str, summary: str, defaults: dict[str, Any], descriptions: dict[str, str]) -> str:
    """Help text of a node: what it does and every parameter with its default."""
    lines = [f"usage: {executable} --ros-args [--params-file FILE] [-p NAME:=VALUE ...] [-r __ns:=/NAMESPACE]",
             "", summary, "", "parameters (default):"]
    width = max(map(len, defaults))
    for name, default in defaults.items():
        lines.append(f"  {name:<{width}}  {descriptions.get(name, '')} ({default!r})")
    return "\n".join(lines)


def declare_and_read(node: Node, defaults: dict[str, Any], descriptions: dict[str, str]) -> dict[str, Any]:
    """Declare every key of ``defaults`` (dynamic typing: YAML ``100`` and ``100.0`` both work) and read them."""
    values = {}
    for name, default in defaults.items():
        descriptor = ParameterDescriptor(description=descriptions.get(name, ""), dynamic_typing=True)
        node.declare_parameter(name, default, descriptor)
        value = node.get_parameter(name).value
        values[name] = list(value) if isinstance(value, (list, tuple)) or hasattr(value, "tolist") else value
    return values


def run_node(executable: str, help_text: Callable[[], str], make_node: Callable[[], Any],
             spin: Callable[[Any], int], startup_errors: tuple[type[BaseException], ...],
             argv: list[str] | None = None) -> int:
    """The ``main`` of a driver executable: ``--help``, init, spin, and always ``node.close()`` and shutdown.

    Exit codes: what ``spin`` returns; 2 for a start-up error (logged as fatal); 0 on SIGINT/SIGTERM;
    1 for any other failure (logged)."""
    argv = list(argv if argv is not None else sys.argv)
    if wants_help(argv):
        print(help_text())
        return 0
    rclpy.init(args=argv)
    logger = rclpy.logging.get_logger(executable)
    node = None
    try:
        node = make_node()
        return spin(node)
    except startup_errors as exc:
        logger.fatal(str(exc) or f"{type(exc).__name__} during start-up")
        return 2
    except (KeyboardInterrupt, ExternalShutdownException):
        return 0
    except Exception as exc:
        if not rclpy.ok():
            return 0              # a signal shut the context down while the node was starting
        logger.fatal(f"{executable} failed: {exc!r}")
        return 1
    finally:
        if node is not None:
            node.close()
        rclpy.try_shutdown()
