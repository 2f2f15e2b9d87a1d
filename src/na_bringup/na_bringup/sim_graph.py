"""Start the simulated rig and launch files as separate processes, the way a user would with
``ros2 launch``, and tear everything down again (used by the demo and the system tests)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path

from na_bringup.launch_run import start_processes, stop_processes
from na_bringup.launch_xml import load_launch
from na_bringup.paths import launch_file as installed_launch_file


class GraphError(RuntimeError):
    """A process of the graph did not come up or died; the message points at its log."""


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RunningGraph:
    def __init__(self, processes: list[subprocess.Popen], labels: list[str], logs: list[Path]) -> None:
        self.processes, self.labels, self.logs = processes, labels, logs

    def check_alive(self) -> None:
        for process, label, log in zip(self.processes, self.labels, self.logs, strict=True):
            if process.poll() is not None:
                tail = log.read_text(errors="replace").splitlines()[-15:] if log.is_file() else []
                raise GraphError(f"{label} exited with code {process.returncode} (log {log}):\n  " + "\n  ".join(tail))


@contextlib.contextmanager
def launched(launch_file: str, arguments: Mapping[str, str], log_dir: Path,
             env: Mapping[str, str] | None = None) -> Iterator[RunningGraph]:
    """Start every process of ``launch_file`` (installed by na_bringup) with its own log file; stop them on exit."""
    description = load_launch(installed_launch_file(launch_file), dict(arguments))
    log_dir.mkdir(parents=True, exist_ok=True)
    processes, labels, logs, handles = [], [], [], []
    try:
        for spec in description.processes:
            label = (spec.fully_qualified_name or spec.label).strip("/").replace("/", "_") or spec.label
            log = log_dir / f"{label}.log"
            handle = log.open("w")
            handles.append(handle)
            processes += start_processes([spec], env=env, stdout=handle, stderr=subprocess.STDOUT)
            labels.append(label)
            logs.append(log)
        yield RunningGraph(processes, labels, logs)
    finally:
        stop_processes(processes)
        for handle in handles:
            handle.close()


@contextlib.contextmanager
def sim_rig(sim_dir: Path, log_dir: Path, *, task: str, payload_grams: float = 0.0, seed: int = 0,
            timeout: float = 60.0, robot: str | None = None,
            options: str = "") -> Iterator[tuple[RunningGraph, dict, int]]:
    """The live rig (sim_rig.launch.xml) with a scripted task; yields (graph, rig info, Net F/T port).

    ``robot``: the launch file's robot argument (omx_x, so101); None keeps its default. ``options``: more
    ``na-sim rig`` options (e.g. ``--task-seed 3 --fixture-only``)."""
    sim_dir.mkdir(parents=True, exist_ok=True)
    info_path = sim_dir / "rig.json"
    with contextlib.suppress(FileNotFoundError):
        info_path.unlink()
    ft_port = free_udp_port()
    arguments = {"sim_dir": str(sim_dir), "task": task, "payload_grams": f"{payload_grams:g}", "seed": str(seed),
                 "ft_port": str(ft_port), "rig_options": options,
                 **({"robot": robot} if robot is not None else {})}
    with launched("sim_rig.launch.xml", arguments, log_dir) as graph:
        deadline = time.monotonic() + timeout
        while not info_path.is_file():
            graph.check_alive()
            if time.monotonic() > deadline:
                raise GraphError(f"the simulated rig did not write {info_path} within {timeout:.0f} s "
                                 f"(log {graph.logs[0]})")
            time.sleep(0.1)
        yield graph, json.loads(info_path.read_text()), ft_port


def ros_env() -> dict[str, str]:
    """The environment for child processes: this process's ROS domain and discovery range."""
    return {key: os.environ[key] for key in ("ROS_DOMAIN_ID", "ROS_AUTOMATIC_DISCOVERY_RANGE", "RMW_IMPLEMENTATION")
            if key in os.environ}
