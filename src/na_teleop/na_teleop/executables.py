"""Console-script entry points of the teleop and recorder nodes: stdlib-light, so that SIGINT/SIGTERM while
rclpy and the node modules load still end the process quietly (:mod:`na_common.node_signals`)."""

from __future__ import annotations

from na_common.node_signals import run


def teleop() -> int:
    return run("na_teleop.teleop_node")


def recorder() -> int:
    return run("na_teleop.recorder_node")
