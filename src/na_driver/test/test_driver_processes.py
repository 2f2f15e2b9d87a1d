"""The driver executables as processes: start-up errors, SIGTERM shutdown of a follower (``--help`` of every
node executable: tests/test_node_executables.py)."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest


def run_module(module: str, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.node
def test_wrong_port_exits_with_an_error_naming_it() -> None:
    result = run_module("na_driver.arm_driver_node", "--ros-args", "-p", "port:=/dev/na-no-such-port",
                        "-p", "role:=follower")
    assert result.returncode == 2
    assert "/dev/na-no-such-port" in result.stderr


@pytest.mark.system
def test_follower_turns_torque_off_on_sigterm(emulated_arm, wait_for) -> None:
    emulator, servos = emulated_arm()
    process = subprocess.Popen([sys.executable, "-m", "na_driver.arm_driver_node", "--ros-args",
                                "-p", f"port:={emulator.port_path}", "-p", "role:=follower"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert wait_for(lambda: all(r.get("torque_enable") == 1 for r in servos) or process.poll() is not None, 30.0)
        assert process.poll() is None, process.stdout.read()
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=10.0) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert all(r.get("torque_enable") == 0 for r in servos)
