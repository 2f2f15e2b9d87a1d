"""The live SO-101 rig as a process: both arms served as STS3215 servos on Protocol 0 ptys, read
with the Feetech SDK (scservo_sdk) the way the SO-101 driver and LeRobot read them."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import numpy as np
import pytest
import scservo_sdk as scs

from na_description import load_spec, sts3215
from na_sim.rig_config import RigConfig


def _sync_read(port_path: str, ids: list[int]) -> dict[int, sts3215.StateBlock]:
    port = scs.PortHandler(port_path)
    assert port.openPort() and port.setBaudRate(1_000_000)
    try:
        handler = scs.PacketHandler(0)
        model, result, _ = handler.read2ByteTxRx(port, ids[0], sts3215.REGISTERS["model_number"].address)
        assert result == scs.COMM_SUCCESS and model == sts3215.MODEL_NUMBER
        group = scs.GroupSyncRead(port, handler, sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_LENGTH)
        for servo_id in ids:
            assert group.addParam(servo_id)
        assert group.txRxPacket() == scs.COMM_SUCCESS
        blocks = {}
        for servo_id in ids:
            raw = bytes(group.getData(servo_id, sts3215.STATE_BLOCK_START + k, 1)
                        for k in range(sts3215.STATE_BLOCK_LENGTH))
            blocks[servo_id] = sts3215.decode_state_block(raw)
        return blocks
    finally:
        port.closePort()


@pytest.mark.system
def test_so101_rig_serves_both_arms_on_protocol0(tmp_path):
    spec, config = load_spec("so101"), RigConfig.from_yaml("sim_rig_so101")
    info_path = tmp_path / "rig.json"
    command = [sys.executable, "-m", "na_sim.live_rig", "--robot", "so101", "--status-every", "0", "--no-netft",
               "--no-serial-ft", "--info-out", str(info_path), "--duration", "60"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60.0
        while not info_path.is_file():
            assert process.poll() is None, process.stdout.read()
            assert time.monotonic() < deadline, "the SO-101 rig did not come up"
            time.sleep(0.1)
        info = json.loads(info_path.read_text())
        assert info["robot"] == "so101" and info["servo_ids"] == spec.servo_ids
        for role in ("leader_port", "follower_port"):
            blocks = [_sync_read(info[role], spec.servo_ids)[servo_id] for servo_id in spec.servo_ids]
            pose = spec.servo_to_joint([block.position for block in blocks])
            lower, upper = spec.servo_angle_limits()
            assert np.all((pose > lower - 0.05) & (pose < upper + 0.05))
            if role == "leader_port":      # the operator holds the leader in the initial pose; the follower,
                assert np.max(np.abs(pose - np.array(config.initial_pose))) < 0.03   # torque off, may sag
            for block in blocks:
                assert block.load == 0.0                   # nobody enabled torque: no drive duty
                assert 11.0 < block.input_voltage < 12.5 and block.status == 0
    finally:
        process.terminate()
        process.wait(timeout=30)
    assert process.returncode == 0
