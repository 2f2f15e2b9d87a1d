"""This suite's DDS transport: localhost over UDP, no Fast DDS shared-memory port (see na_common.dds_transport)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import xml.etree.ElementTree as ET

import pytest

from na_common.dds_transport import plain_localhost_environment, udp_transport_environment, use_udp_transport

RANGE = "ROS_AUTOMATIC_DISCOVERY_RANGE"
PROFILE = "FASTRTPS_DEFAULT_PROFILES_FILE"


def test_localhost_discovery_becomes_the_loopback_udp_profile() -> None:
    changes = udp_transport_environment({RANGE: "LOCALHOST"})
    assert changes[RANGE] == "SYSTEM_DEFAULT"
    assert os.path.isfile(changes[PROFILE])
    deprecated = udp_transport_environment({"ROS_LOCALHOST_ONLY": "1"})
    assert deprecated["ROS_LOCALHOST_ONLY"] == "0" and deprecated[RANGE] == "SYSTEM_DEFAULT" and PROFILE in deprecated


def test_a_range_reset_to_localhost_under_the_profile_is_set_back() -> None:
    # A child that sets LOCALHOST again over its parent's set-up (a test worker, a benchmark) would run with
    # rmw_fastrtps' shared memory on top of the profile.
    configured = udp_transport_environment({RANGE: "LOCALHOST"})
    assert udp_transport_environment({**configured, RANGE: "LOCALHOST"}) == {RANGE: "SYSTEM_DEFAULT"}
    assert udp_transport_environment(configured) == {}


def test_other_ranges_keep_their_discovery_and_drop_shared_memory() -> None:
    assert udp_transport_environment({}) == {"FASTDDS_BUILTIN_TRANSPORTS": "UDPv4"}
    assert udp_transport_environment({RANGE: "SUBNET"}) == {"FASTDDS_BUILTIN_TRANSPORTS": "UDPv4"}
    assert udp_transport_environment({RANGE: "OFF"}) == {}


@pytest.mark.parametrize("user_setting", [
    {"RMW_IMPLEMENTATION": "rmw_cyclonedds_cpp"},
    {"FASTRTPS_DEFAULT_PROFILES_FILE": "/etc/my_profile.xml"},
    {"FASTDDS_DEFAULT_PROFILES_FILE": "/etc/my_profile.xml"},
    {"FASTDDS_BUILTIN_TRANSPORTS": "SHM"},
])
def test_a_users_own_middleware_settings_are_left_alone(user_setting: dict[str, str]) -> None:
    environ = {RANGE: "LOCALHOST", **user_setting}
    before = dict(environ)
    assert use_udp_transport(environ) == ""
    assert environ == before


def test_applying_it_twice_changes_nothing_the_second_time() -> None:
    environ = {RANGE: "LOCALHOST"}
    assert use_udp_transport(environ)
    once = dict(environ)
    assert use_udp_transport(environ) == "" and environ == once


def test_the_profile_keeps_discovery_and_data_on_the_loopback_without_builtin_transports() -> None:
    root = ET.parse(udp_transport_environment({RANGE: "LOCALHOST"})[PROFILE]).getroot()
    ns = {"f": "http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles"}
    descriptors = root.findall(".//f:transport_descriptor", ns)
    assert [d.findtext("f:type", namespaces=ns) for d in descriptors] == ["UDPv4"]
    assert [a.text for a in descriptors[0].findall("f:interfaceWhiteList/f:address", ns)] == ["127.0.0.1"]
    participant = root.find(".//f:participant", ns)
    assert participant.get("is_default_profile") == "true"
    assert participant.findtext("f:rtps/f:useBuiltinTransports", namespaces=ns) == "false"
    peers = participant.findall("f:rtps/f:builtin/f:initialPeersList/f:locator/f:udpv4/f:address", ns)
    assert [p.text for p in peers] == ["127.0.0.1"]


_PROBE = textwrap.dedent("""
    import sys, time, rclpy
    from std_msgs.msg import String
    rclpy.init()
    node = rclpy.create_node(sys.argv[1])
    got = []
    if sys.argv[1] == "talker":
        pub = node.create_publisher(String, "/dds_transport_probe", 10)
    else:
        node.create_subscription(String, "/dds_transport_probe", lambda m: got.append(m.data), 10)
    end = time.monotonic() + float(sys.argv[2])
    while time.monotonic() < end:
        if sys.argv[1] == "talker":
            pub.publish(String(data="probe"))
        rclpy.spin_once(node, timeout_sec=0.05)
    ports = sorted({line.split()[-1] for line in open("/proc/self/maps") if "fastrtps_port" in line})
    print(f"received={len(got)} shm_ports={len(ports)}", flush=True)
""")


def _probe_env(localhost_udp: bool) -> dict[str, str]:
    environ = {**plain_localhost_environment(os.environ),
               "ROS_DOMAIN_ID": str(1 + (int(os.environ.get("ROS_DOMAIN_ID", "0")) + 50) % 101)}
    if localhost_udp:
        use_udp_transport(environ)
    return environ


def _run_pair(talker_udp: bool, listener_udp: bool) -> tuple[str, str]:
    talker = subprocess.Popen([sys.executable, "-c", _PROBE, "talker", "8"], env=_probe_env(talker_udp),
                              stdout=subprocess.PIPE, text=True)
    try:
        listener = subprocess.run([sys.executable, "-c", _PROBE, "listener", "6"], env=_probe_env(listener_udp),
                                  capture_output=True, text=True, timeout=60)
    finally:
        talker_out = talker.communicate(timeout=60)[0]
    assert listener.returncode == 0, listener.stderr[-2000:]
    return talker_out.strip(), listener.stdout.strip()


@pytest.mark.node
def test_a_process_on_the_udp_profile_maps_no_shared_memory_port_and_talks_to_a_localhost_one() -> None:
    talker, listener = _run_pair(talker_udp=True, listener_udp=False)
    assert talker.endswith("shm_ports=0"), talker             # the profile's process opened no SHM port
    assert not listener.endswith("shm_ports=0"), listener     # a plain LOCALHOST process does (the check can fail)
    received = int(listener.split()[0].split("=")[1])
    assert received > 10, listener                            # and the two still talk, over UDP
