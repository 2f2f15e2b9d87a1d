"""Declaring a dict of defaults as ROS parameters and reading them back (thin rclpy helper)."""

from __future__ import annotations

from typing import Any

from rcl_interfaces.msg import ParameterDescriptor
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
