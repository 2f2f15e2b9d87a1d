"""The five node executables share one shell (na_common.ros_node): ``--help`` lists every parameter the
shipped parameter files set, with its default; a bad parameter ends the process with exit code 2 and a
line naming it; SIGINT or SIGTERM while a node starts or runs ends it with exit code 0, no FATAL line and
no traceback."""

from __future__ import annotations

import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from na_common.ament import find_executable

CONFIG_DIR = Path(__file__).resolve().parents[1] / "config"
# executable -> the parameter files written for it
NODES = {
    ("na_driver", "arm_driver"): ["leader_arm.yaml", "follower_arm.yaml", "so101_leader_arm.yaml",
                                  "so101_follower_arm.yaml"],
    ("na_driver", "ft_driver"): ["ft_netft.yaml", "ft_serial.yaml"],
    ("na_estimator", "estimator"): ["estimator.yaml"],
    ("na_teleop", "recorder"): ["recorder.yaml"],
    ("na_teleop", "teleop"): ["teleop.yaml", "so101_teleop.yaml"],
}


def run(package: str, executable: str, *args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    path = find_executable(package, executable)
    assert path is not None, f"{package}/{executable} is not installed"
    return subprocess.run([str(path), *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize(("package", "executable"), list(NODES), ids=[e for _, e in NODES])
def test_help_lists_every_parameter_of_its_parameter_files(package: str, executable: str) -> None:
    result = run(package, executable, "--help")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"usage: {executable} --ros-args")
    listed = {line.split()[0] for line in result.stdout.split("parameters (default):")[1].splitlines() if line.strip()}
    for name in NODES[package, executable]:
        parameters = yaml.safe_load((CONFIG_DIR / name).read_text())["/**"]["ros__parameters"]
        assert set(parameters) <= listed, f"{executable} --help lacks {sorted(set(parameters) - listed)} of {name}"
    assert all(line.rstrip().endswith(")") for line in result.stdout.splitlines() if line.startswith("  "))


@pytest.mark.node
@pytest.mark.parametrize(("package", "executable", "arguments", "named"), [
    ("na_estimator", "estimator", [], "model_path"),
    ("na_estimator", "estimator", ["-p", "model_path:=/x.onnx", "-p", "stale_timeout:=soon"], "stale_timeout"),
    ("na_teleop", "teleop", ["-p", "joint_sign:=[1.0, 1.0]"], "joint_sign"),
    ("na_teleop", "recorder", ["-p", "storage:=sqlite3"], "storage"),
    ("na_driver", "arm_driver", ["-p", "port:=/dev/null", "-p", "role:=leader", "-p", "servo_ids:=[1, 2, 3, 4, 5]"],
     "servo_ids"),
], ids=["estimator-no-model", "estimator-type", "teleop", "recorder", "arm_driver-robot-fact"])
def test_a_bad_parameter_exits_2_naming_it(package: str, executable: str, arguments: list[str], named: str) -> None:
    result = run(package, executable, "--ros-args", *arguments)
    assert result.returncode == 2, result.stderr
    fatal = [line for line in result.stderr.splitlines() if "FATAL" in line]
    assert len(fatal) == 1 and named in fatal[0], result.stderr


# ---- stopping on SIGINT / SIGTERM ------------------------------------------------------------------------
STOPS = [signal.SIGINT, signal.SIGTERM]


class NodeProcess:
    """A node executable as a process; its console output is collected line by line as it comes."""

    def __init__(self, package: str, executable: str, *args: str) -> None:
        path = find_executable(package, executable)
        assert path is not None, f"{package}/{executable} is not installed"
        self.process = subprocess.Popen([str(path), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                        text=True)
        self.lines: list[str] = []
        self._reader = threading.Thread(target=lambda: self.lines.extend(self.process.stdout), daemon=True)
        self._reader.start()

    def handles(self, signum: int) -> bool:
        """The process has a handler of its own for ``signum`` (SigCgt of /proc/PID/status): the suite's code
        runs (the interpreter starts with the default SIGTERM action)."""
        try:
            status = Path(f"/proc/{self.process.pid}/status").read_text()
        except FileNotFoundError:
            return False
        caught = int(next(line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), 16)
        return bool(caught >> (signum - 1) & 1)

    def stop(self, signum: int, timeout: float = 30.0) -> tuple[int, str]:
        """Send ``signum``; the exit code and the whole console output."""
        self.process.send_signal(signum)
        try:
            code = self.process.wait(timeout=timeout)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
        self._reader.join(timeout=5.0)
        return code, "".join(self.lines)


def assert_clean_stop(code: int, output: str) -> None:
    assert code == 0, output
    assert "FATAL" not in output and "Traceback" not in output, output


def node_args(executable: str, tmp_path: Path) -> list[str]:
    return ["--ros-args", "-p", f"output_dir:={tmp_path / 'episodes'}"] if executable == "recorder" else []


@pytest.mark.node
@pytest.mark.parametrize("stop", STOPS, ids=lambda s: s.name)
@pytest.mark.parametrize("executable", ["teleop", "recorder"])
def test_a_signal_while_the_node_starts_stops_it_cleanly(executable: str, stop: signal.Signals, tmp_path: Path,
                                                         wait_for: Callable[..., bool]) -> None:
    """The signal lands as soon as the process handles signals itself, while it still imports rclpy and builds
    the node (about a second on this machine; on a faster one, a little later in the start-up)."""
    node = NodeProcess("na_teleop", executable, *node_args(executable, tmp_path))
    assert wait_for(lambda: node.handles(signal.SIGTERM) or node.process.poll() is not None, 30.0, None)
    assert_clean_stop(*node.stop(stop))


@pytest.mark.node
@pytest.mark.parametrize("stop", STOPS, ids=lambda s: s.name)
def test_a_signal_while_teleop_commands_the_follower_stops_it_cleanly(stop: signal.Signals, ros_graph,
                                                                      wait_for: Callable[..., bool]) -> None:
    """Leader and follower states stream in at 100 Hz, commands stream out, when the signal arrives."""
    from na_description import load_spec
    from na_msgs.msg import ArmState, JointCommand

    spec = load_spec()
    peer = ros_graph.probe("arms")
    publishers = [peer.create_publisher(ArmState, topic, 10) for topic in ("/leader/arm_state", "/follower/arm_state")]
    commands: list = []
    peer.create_subscription(JointCommand, "/follower/command", commands.append, 10)
    node = NodeProcess("na_teleop", "teleop", "--ros-args", "-p", "soft_start_duration:=0.0")
    streaming = threading.Event()

    def stream() -> None:
        while not streaming.is_set():
            for publisher in publishers:
                publisher.publish(ArmState(name=spec.joint_names, position=[0.1] * spec.n_motors,
                                           current=[0.0] * spec.n_motors))
            time.sleep(0.01)                     # the drivers' 100 Hz

    feeder = threading.Thread(target=stream, daemon=True)
    try:
        with ros_graph.spinning():
            feeder.start()
            assert wait_for(lambda: len(commands) > 50 or node.process.poll() is not None, 60.0, None), node.lines
            assert node.process.poll() is None, node.lines
            code, output = node.stop(stop)
    finally:
        streaming.set()
        feeder.join()
    assert_clean_stop(code, output)


@pytest.mark.node
@pytest.mark.parametrize("stop", STOPS, ids=lambda s: s.name)
def test_a_signal_while_the_recorder_records_stops_it_cleanly(stop: signal.Signals, ros_graph, tmp_path: Path,
                                                              wait_for: Callable[..., bool]) -> None:
    """The recorder writes an episode of a 100 Hz topic when the signal arrives; it finishes the episode (marked
    incomplete) on the way out."""
    import json

    from std_msgs.msg import Bool, String

    from na_common.episode_bag import EpisodeReader
    from na_msgs.srv import StartEpisode

    peer = ros_graph.probe("operator")
    grasp = peer.create_publisher(Bool, "/episode/grasp", 10)
    start = peer.create_client(StartEpisode, "/recorder/start")
    status: list[dict] = []
    peer.create_subscription(String, "/recorder/status", lambda msg: status.append(json.loads(msg.data)), 10)
    out = tmp_path / "episodes"
    node = NodeProcess("na_teleop", "recorder", "--ros-args", "-p", f"output_dir:={out}", "-p",
                       "discovery_period:=0.1")
    streaming = threading.Event()

    def stream() -> None:
        while not streaming.is_set():
            grasp.publish(Bool(data=True))
            time.sleep(0.01)

    feeder = threading.Thread(target=stream, daemon=True)
    try:
        with ros_graph.spinning():
            feeder.start()
            assert wait_for(lambda: start.service_is_ready() or node.process.poll() is not None, 60.0, None)
            assert wait_for(lambda: any("recording /episode/grasp" in line for line in node.lines), 30.0, None)
            request = StartEpisode.Request()
            request.info.task = "signal_test"
            future = start.call_async(request)
            assert wait_for(future.done, 30.0, None) and future.result().success, node.lines
            episode = Path(future.result().path)
            assert wait_for(lambda: status and status[-1].get("topics", {}).get("/episode/grasp", {}).get(
                "count", 0) > 20, 30.0, None), node.lines
            code, output = node.stop(stop)
    finally:
        streaming.set()
        feeder.join()
    assert_clean_stop(code, output)
    with EpisodeReader(episode) as reader:
        assert reader.metadata["complete"] is False and reader.topics["/episode/grasp"].count > 0

