"""Keep this suite's processes off Fast DDS's shared-memory transport (ROS-free).

Why: when a participant opens a peer's shared-memory port, Fast DDS first checks that the port's listeners are
alive. If the port's watchdog has just verified them and they have not checked in since, the check sleeps one
port-wait period (a third of its 1 s timeout, 333 ms) before it looks again, and it does so while holding locks
that a publish and the creation of a publisher need. rclpy holds Python's GIL while it publishes, so a publish that
waits on such a lock stops every Python thread of its process: a driver's bus loop sends nothing for a third of a
second and the servos' Bus Watchdog (100 ms) stops them. Opening happens when participants discover each other,
which on a busy host can come a second or more after a process started: the start-up stalls of the live graph.
UDP over the loopback opens no such port.

Under ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` rmw_fastrtps adds the shared-memory transport itself, so it
cannot be switched off there; :func:`udp_transport_environment` replaces that range (or the deprecated
``ROS_LOCALHOST_ONLY=1``) with ``SYSTEM_DEFAULT`` and a Fast DDS profile that keeps discovery and data on the
loopback over UDP. Under any other range Fast DDS's own builtin transports are used, and
``FASTDDS_BUILTIN_TRANSPORTS=UDPv4`` drops shared memory from them. A Fast DDS
profile of the user's own, an explicit ``FASTDDS_BUILTIN_TRANSPORTS`` or another RMW is left as it is.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from pathlib import Path

PROFILE_PATH = Path(__file__).with_name("fastdds_udp_localhost.xml")
FAST_DDS_RMW = "rmw_fastrtps_cpp"
RANGE_VARIABLE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
LOCALHOST_ONLY_VARIABLE = "ROS_LOCALHOST_ONLY"
PROFILE_VARIABLES = ("FASTRTPS_DEFAULT_PROFILES_FILE", "FASTDDS_DEFAULT_PROFILES_FILE")
BUILTIN_TRANSPORTS_VARIABLE = "FASTDDS_BUILTIN_TRANSPORTS"


def udp_transport_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables to set so that a process started with ``environ`` uses no shared-memory transport
    (empty when there is nothing to change or the user configured the middleware)."""
    if environ.get("RMW_IMPLEMENTATION", FAST_DDS_RMW) != FAST_DDS_RMW:
        return {}
    own_profile = environ.get(PROFILE_VARIABLES[0]) == str(PROFILE_PATH)
    user_profile = any(environ.get(name) for name in PROFILE_VARIABLES) and not own_profile
    if user_profile or environ.get(BUILTIN_TRANSPORTS_VARIABLE):
        return {}
    localhost = {RANGE_VARIABLE: "SYSTEM_DEFAULT", PROFILE_VARIABLES[0]: str(PROFILE_PATH)}
    if environ.get(LOCALHOST_ONLY_VARIABLE) == "1":   # deprecated, and it overrides the range in rcl
        wanted = {LOCALHOST_ONLY_VARIABLE: "0", **localhost}
    elif environ.get(RANGE_VARIABLE) == "LOCALHOST" or own_profile:   # own profile: a parent set it up
        wanted = localhost
    elif environ.get(RANGE_VARIABLE) == "OFF":
        wanted = {}
    else:
        wanted = {BUILTIN_TRANSPORTS_VARIABLE: "UDPv4"}
    return {name: value for name, value in wanted.items() if environ.get(name) != value}


def plain_localhost_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """``environ`` as a user's shell with ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` and no DDS transport setting
    (what rmw_fastrtps turns into shared memory plus UDP); for benchmarks and tests that start from there."""
    plain = {name: value for name, value in environ.items()
             if name not in (*PROFILE_VARIABLES, BUILTIN_TRANSPORTS_VARIABLE, LOCALHOST_ONLY_VARIABLE)}
    plain.update({RANGE_VARIABLE: "LOCALHOST", "RMW_IMPLEMENTATION": FAST_DDS_RMW})
    return plain


def use_udp_transport(environ: MutableMapping[str, str] | None = None) -> str:
    """Apply :func:`udp_transport_environment` to ``environ`` (this process's environment by default; call it
    before the first ``rclpy.init``). Returns a line for the log, empty when nothing changed."""
    environ = os.environ if environ is None else environ
    changes = udp_transport_environment(environ)
    environ.update(changes)
    if not changes:
        return ""
    if PROFILE_VARIABLES[0] in changes:
        return f"DDS: Fast DDS over UDP on the loopback only (profile {PROFILE_PATH.name}), no shared memory"
    return "DDS: Fast DDS builtin transports without shared memory (FASTDDS_BUILTIN_TRANSPORTS=UDPv4)"
