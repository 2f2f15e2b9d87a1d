"""Validation of the installed XML launch files of na_bringup (read with na_bringup.launch_xml).

Static checks: na_bringup installs the repository's top-level launch/ and config/ file for file,
every argument documented, every <node> names an installed package and executable, every
parameter file exists and is a ROS 2 parameter file, the sim rig command uses only options its
CLI has. Graph checks (system): the teleop graph is started as the
launch file describes, against emulated servo buses; every parameter the YAML files set is
declared by its node (asked over the node's list_parameters service) and the topics line up
(publishers feed subscribers after namespaces and remaps; data actually flows).
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import yaml

from na_bringup.launch_run import start_processes, stop_processes
from na_bringup.launch_xml import LaunchError, load_launch
from na_bringup.paths import share_dir
from na_common.ament import package_prefix

ROOT = Path(__file__).resolve().parents[1]
LAUNCH_DIR = share_dir() / "launch"
EXPECTED_FILES = ("sim_rig.launch.xml", "teleop.launch.xml", "collect.launch.xml", "estimator.launch.xml",
                  "policy.launch.xml")
# Argument sets each launch file is checked with (conditions select different branches).
VARIANTS: dict[str, list[dict[str, str]]] = {
    "sim_rig.launch.xml": [{}],
    "teleop.launch.xml": [{}, {"sim": "true"}, {"sim": "true", "start_rig": "true"}],
    "collect.launch.xml": [{}, {"sim": "true", "start_rig": "true"}, {"record": "false"}],
    "estimator.launch.xml": [{"model": "/tmp/model.onnx"}],
    "policy.launch.xml": [{"policy": "/tmp/force.npz", "model": "/tmp/model.onnx"},
                          {"policy": "/tmp/force.npz", "start_estimator": "false", "sim": "true"}],
}
BUILTIN_TOPICS = {"/parameter_events", "/rosout"}


def variant_id(arguments: dict[str, str]) -> str:
    return ",".join(f"{k}:={v}" for k, v in arguments.items()) or "defaults"


def node_cases() -> list:
    """(file, arguments, node) for every <node> of every variant; a broken file becomes one failing case."""
    cases = []
    for name, variants in VARIANTS.items():
        for arguments in variants:
            try:
                processes = load_launch(LAUNCH_DIR / name, arguments).processes
            except LaunchError as exc:
                cases.append(pytest.param(name, arguments, None, str(exc), id=f"{name}[{variant_id(arguments)}]"))
                continue
            for process in processes:
                if process.is_node:
                    cases.append(pytest.param(name, arguments, process, None,
                                              id=f"{name}[{variant_id(arguments)}]{process.label}"))
    return cases


def test_the_launch_files_exist_and_every_one_is_checked() -> None:
    for name in EXPECTED_FILES:
        assert (LAUNCH_DIR / name).is_file(), f"launch/{name} is missing"
    installed = {path.name for path in LAUNCH_DIR.glob("*.launch.xml")}
    assert installed <= set(VARIANTS), f"launch files without test variants: {sorted(installed - set(VARIANTS))}"


@pytest.mark.parametrize(("folder", "pattern"), [("launch", "*.launch.xml"), ("config", "*.yaml")])
def test_na_bringup_installs_the_top_level_folder(folder: str, pattern: str) -> None:
    """launch/ and config/ at the repository's top level are what ``share/na_bringup`` holds, file for file."""
    source = {path.name: path.read_bytes() for path in (ROOT / folder).glob(pattern)}
    installed = {path.name: path.read_bytes() for path in (share_dir() / folder).glob(pattern)}
    assert source, f"no {folder}/{pattern} at the top level"
    assert installed == source, (f"share/na_bringup/{folder} differs from {folder}/ (run scripts/bootstrap.sh?): "
                                 f"installed {sorted(installed)}, top level {sorted(source)}")


@pytest.mark.parametrize("name", EXPECTED_FILES)
def test_every_argument_is_declared_with_a_description(name: str) -> None:
    root = ET.parse(LAUNCH_DIR / name).getroot()
    declared = [e for e in root.iter("arg") if e not in {a for inc in root.iter("include") for a in inc}]
    assert declared, f"{name} declares no arguments"
    for arg in declared:
        assert arg.get("description", "").strip(), f"{name}: <arg name='{arg.get('name')}'> has no description"
    description = load_launch(LAUNCH_DIR / name, VARIANTS[name][0])
    for arg in description.arguments.values():
        assert arg.description.strip(), f"{arg.source.name}: argument '{arg.name}' has no description"


@pytest.mark.parametrize(("name", "arguments", "process", "error"), node_cases())
def test_every_node_names_an_installed_package_and_executable(name, arguments, process, error) -> None:
    assert error is None, error
    assert package_prefix(process.package) is not None, \
        f"{name}: package '{process.package}' of {process.label} is not on the ament index"
    assert process.executable_path is not None, \
        f"{name}: {process.label}: no executable lib/{process.package}/{process.executable} (console script missing?)"
    assert process.command()[0] == str(process.executable_path)


@pytest.mark.parametrize(("name", "arguments", "process", "error"), node_cases())
def test_every_parameter_file_exists_and_is_a_ros2_parameter_file(name, arguments, process, error) -> None:
    assert error is None, error
    for path in process.params_files:
        assert path.is_file(), f"{name}: {process.label}: parameter file {path} does not exist"
        content = yaml.safe_load(path.read_text())
        assert isinstance(content, dict) and content, f"{path}: empty or not a mapping"
        matching = [key for key in content if node_pattern_matches(key, process.fully_qualified_name)]
        assert matching, f"{path}: no section applies to node {process.fully_qualified_name} (keys {list(content)})"
        for key in content:
            assert isinstance(content[key], dict) and isinstance(content[key].get("ros__parameters"), dict), \
                f"{path}: section '{key}' has no ros__parameters mapping"


@pytest.mark.parametrize("arguments", VARIANTS["teleop.launch.xml"], ids=variant_id)
def test_teleop_topics_resolve_to_the_driver_topics(arguments) -> None:
    """Static name resolution: teleop's relative names, after namespace and remaps, are the drivers' topics."""
    by_name = {p.fully_qualified_name: p for p in load_launch(LAUNCH_DIR / "teleop.launch.xml", arguments).processes
               if p.is_node}
    teleop, leader, follower = by_name["/teleop"], by_name["/leader/arm_driver"], by_name["/follower/arm_driver"]
    assert teleop.resolve_name("leader/arm_state") == leader.resolve_name("arm_state") == "/leader/arm_state"
    assert teleop.resolve_name("follower/arm_state") == follower.resolve_name("arm_state") == "/follower/arm_state"
    assert teleop.resolve_name("follower/command") == follower.resolve_name("command") == "/follower/command"


def test_sim_rig_command_uses_only_options_of_the_rig_cli() -> None:
    (rig,) = load_launch(LAUNCH_DIR / "sim_rig.launch.xml").processes
    command = rig.command()
    assert Path(command[0]).is_file(), f"sim_rig.launch.xml runs {command[0]}, which is not installed"
    result = subprocess.run([command[0], "rig", "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"`na-sim rig --help` failed: {result.stderr[-2000:]}"
    for option in (word for word in command[2:] if word.startswith("--")):
        assert re.search(rf"{re.escape(option)}\b", result.stdout), f"`na-sim rig` has no option {option}"


def test_sim_switches_the_default_ports_to_the_rig_links() -> None:
    hardware = {p.fully_qualified_name: p for p in load_launch(LAUNCH_DIR / "teleop.launch.xml").processes}
    sim = {p.fully_qualified_name: p
           for p in load_launch(LAUNCH_DIR / "teleop.launch.xml", {"sim": "true", "sim_dir": "/tmp/x"}).processes}
    assert hardware["/leader/arm_driver"].parameters["port"] == "/dev/ttyUSB0"
    assert sim["/leader/arm_driver"].parameters["port"] == "/tmp/x/leader_arm"
    assert sim["/follower/arm_driver"].parameters["port"] == "/tmp/x/follower_arm"
    explicit = load_launch(LAUNCH_DIR / "teleop.launch.xml", {"sim": "true", "leader_port": "/dev/pts/9"})
    assert explicit.processes[0].parameters["port"] == "/dev/pts/9"
    assert len(load_launch(LAUNCH_DIR / "teleop.launch.xml", {"sim": "true", "start_rig": "true"}).processes) == 4


# --------------------------------------------------------------------------- helpers
def node_pattern_matches(key: str, fqn: str) -> bool:
    """Does a parameter-file section key (``/**``, ``/ns/name``, ``name``, wildcards) apply to node ``fqn``?"""
    if not key.startswith("/"):
        key = "/" + key
    if key.startswith("/**"):
        return fnmatch.fnmatchcase(fqn, "*" + key[3:]) if key != "/**" else True
    return fnmatch.fnmatchcase(fqn, key)


def flatten(parameters: dict, prefix: str = "") -> list[str]:
    names = []
    for key, value in parameters.items():
        if isinstance(value, dict):
            names += flatten(value, f"{prefix}{key}.")
        else:
            names.append(f"{prefix}{key}")
    return names


def parameters_set_by_launch(process) -> set[str]:
    names = set(process.parameters)
    for path in process.params_files:
        for key, section in yaml.safe_load(path.read_text()).items():
            if node_pattern_matches(key, process.fully_qualified_name):
                names |= set(flatten(section["ros__parameters"]))
    return names


# --------------------------------------------------------------------------- graph
@pytest.fixture
def emulated_buses(make_servos):
    """Leader and follower buses of five emulated XM430s (IDs from the robot spec) on pseudo-terminals."""
    from na_sim.dxl_emulator import DxlBusEmulator

    buses = [DxlBusEmulator(make_servos()).start() for _ in ("leader", "follower")]
    yield buses
    for bus in buses:
        bus.stop()


# Topics a launched node may subscribe to that come from outside the launch file
# (the operator's grasp key, the simulated rig's ground truth; docs/INTERFACES.md).
EXTERNAL_TOPICS = {"/episode/grasp", "/sim/truth/wrench", "/sim/truth/contact"}
TELEOP_EDGES = [("/leader/arm_driver", "/leader/arm_state", "/teleop"),
                ("/follower/arm_driver", "/follower/arm_state", "/teleop"),
                ("/teleop", "/follower/command", "/follower/arm_driver")]


def check_graph(graph, launch_name: str, arguments: dict[str, str], expected_nodes: set[str],
                edges: list[tuple[str, str, str]], log_path: Path) -> None:
    """Start the launch file's processes; check declared parameters, topic wiring and data flow."""
    from rcl_interfaces.srv import ListParameters

    from na_msgs.msg import JointCommand

    description = load_launch(LAUNCH_DIR / launch_name, arguments)
    nodes = {p.fully_qualified_name: p for p in description.processes}
    assert set(nodes) == expected_nodes

    graph.spin_timeout = 0.05
    wait_for = graph.wait_for
    probe = graph.probe("launch_probe")
    commands: list[JointCommand] = []
    probe.create_subscription(JointCommand, "/follower/command", commands.append, 10)
    with log_path.open("w") as log:
        processes = start_processes(description.processes, stdout=log, stderr=subprocess.STDOUT)
    try:
        def all_up() -> bool:
            return set(nodes) <= {join(ns, n) for n, ns in probe.get_node_names_and_namespaces()}

        def any_exited() -> bool:
            return any(p.poll() is not None for p in processes)

        started = wait_for(lambda: all_up() or any_exited(), 60.0) and all_up()
        exits = {label: p.poll() for label, p in zip(nodes, processes, strict=True) if p.poll() is not None}
        assert started and not exits, f"nodes did not come up (exited: {exits}):\n{log_path.read_text()[-4000:]}"

        # 1. Every parameter set by the launch file is declared by its node.
        for fqn, process in nodes.items():
            client = probe.create_client(ListParameters, f"{fqn}/list_parameters")
            declared = set(graph.call(client, ListParameters.Request(), 20.0).result.names)
            undeclared = sorted(parameters_set_by_launch(process) - declared)
            assert not undeclared, f"{fqn} does not declare {undeclared} (set in {process.params_files})"

        # 2. Topics line up: every subscription of a launched node is fed by a launched publisher.
        def endpoints(fqn: str, subscribers: bool) -> dict[str, list[str]]:
            namespace, _, name = fqn.rpartition("/")
            query = probe.get_subscriber_names_and_types_by_node if subscribers else \
                probe.get_publisher_names_and_types_by_node
            return dict(query(name, namespace or "/"))

        def graph_complete() -> bool:
            published = {t for fqn in nodes for t in endpoints(fqn, False)}
            wanted = {t for fqn in nodes for t in endpoints(fqn, True)} - BUILTIN_TOPICS - EXTERNAL_TOPICS
            # The recorder subscribes to a topic only once it has seen its publisher: wait for the edges too.
            edges_up = all(topic in endpoints(source, False) and (sink is None or topic in endpoints(sink, True))
                           for source, topic, sink in edges)
            return bool(wanted) and wanted <= published and edges_up

        wait_for(graph_complete, 10.0)
        publishers = {fqn: endpoints(fqn, False) for fqn in nodes}
        subscribers = {fqn: endpoints(fqn, True) for fqn in nodes}
        for fqn, topics in subscribers.items():
            for topic, types in topics.items():
                if topic in BUILTIN_TOPICS | EXTERNAL_TOPICS:
                    continue
                sources = [p for p, pub in publishers.items() if topic in pub and pub[topic] == types]
                assert sources, f"{fqn} subscribes {topic} ({types}) but no node of the launch file publishes it"
        for source, topic, sink in edges:
            assert topic in publishers[source], f"{source} does not publish {topic}: {sorted(publishers[source])}"
            if sink is not None:
                assert topic in subscribers[sink], f"{sink} does not subscribe {topic}: {sorted(subscribers[sink])}"

        # 3. Data flows end to end: leader bus -> teleop -> follower command.
        assert wait_for(lambda: len(commands) > 0, 20.0), \
            f"no /follower/command arrived:\n{log_path.read_text()[-4000:]}"
        assert len(commands[-1].position) == 5
    finally:
        codes = stop_processes(processes)
    assert all(code is not None for code in codes)


@pytest.mark.system
def test_teleop_graph_parameters_and_topics(ros_graph, emulated_buses, tmp_path: Path) -> None:
    leader_bus, follower_bus = emulated_buses
    check_graph(ros_graph, "teleop.launch.xml",
                {"leader_port": leader_bus.port_path, "follower_port": follower_bus.port_path},
                {"/leader/arm_driver", "/follower/arm_driver", "/teleop"}, TELEOP_EDGES, tmp_path / "launch.log")


@pytest.mark.system
def test_collect_graph_parameters_and_topics(ros_graph, emulated_buses, tmp_path: Path) -> None:
    """The sim branch of collect: arms on emulated buses, F/T driver on the Net F/T emulator."""
    import numpy as np

    from na_sim.ft_emulator import NetFtEmulator

    leader_bus, follower_bus = emulated_buses
    recorder = load_launch(LAUNCH_DIR / "collect.launch.xml").processes[-1]
    record = recorder.executable_path is not None
    nodes = {"/leader/arm_driver", "/follower/arm_driver", "/teleop", "/ft/ft_driver"} | ({"/recorder"} if record
                                                                                          else set())
    edges = [*TELEOP_EDGES, ("/ft/ft_driver", "/ft/wrench", "/recorder" if record else None)]
    if record:
        edges += [("/follower/arm_driver", "/follower/arm_state", "/recorder"),
                  ("/teleop", "/follower/command", "/recorder")]
    with NetFtEmulator(lambda: np.zeros(6)) as sensor:
        check_graph(ros_graph, "collect.launch.xml",
                    {"sim": "true", "leader_port": leader_bus.port_path, "follower_port": follower_bus.port_path,
                     "ft_port": str(sensor.port), "record": str(record).lower(), "output_dir": str(tmp_path / "out")},
                    nodes, edges, tmp_path / "launch.log")


def join(namespace: str, name: str) -> str:
    return namespace.rstrip("/") + "/" + name
