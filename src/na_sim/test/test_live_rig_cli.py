"""The live rig as a process: what it leaves behind when it stops."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.system
def test_the_rig_removes_its_info_file_and_port_links_when_it_stops(tmp_path):
    info_path, links = tmp_path / "rig.json", tmp_path / "links"
    command = [sys.executable, "-m", "na_sim.live_rig", "--task", "sweep_joint1", "--status-every", "0",
               "--info-out", str(info_path), "--link-dir", str(links), "--duration", "3"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    ready = next(line for line in result.stdout.splitlines() if line.startswith("na-sim rig ready: "))
    assert json.loads(ready.split(": ", 1)[1])["servo_ids"]          # it did come up and print its ports
    assert not info_path.exists(), "rig.json still points at ports that no longer exist"
    assert not any(path.is_symlink() for path in links.iterdir())


@pytest.mark.unit
@pytest.mark.parametrize(("timestep_s", "period_s"), [(0.00425, 0.0085), (1 / 150, 1 / 150), (0.002, 0.008),
                                                      (0.02, 0.02)])
def test_the_live_physics_exchanges_registers_within_a_bus_read_period(timestep_s, period_s):
    """Whole MuJoCo steps between two register exchanges, at most 9 ms (the drivers read every 10 ms)."""
    from na_sim.live_rig import exchange_period

    assert exchange_period(timestep_s) == pytest.approx(period_s)
