"""Diagnostic levels of every core and node (ROS-free).

The numbers are those of ``diagnostic_msgs/DiagnosticStatus`` (OK 0, WARN 1, ERROR 2, STALE 3), so a
core decides a level without importing ROS and a node turns it into the message's byte with
:func:`na_common.ros_node.diagnostic_status`.
"""

from __future__ import annotations

from enum import IntEnum


class Level(IntEnum):
    OK = 0
    WARN = 1
    ERROR = 2
    STALE = 3


OK, WARN, ERROR, STALE = Level.OK, Level.WARN, Level.ERROR, Level.STALE
