"""Register tables shared between the rig's physics and its bus processes: ownership, events, reboots."""

from __future__ import annotations

import multiprocessing

import numpy as np
import pytest

from na_description import xm430
from na_sim.rig import Rig
from na_sim.shared_tables import ArmChannels, BusSide, PhysicsSide, SnapshotChannel


def _writer(path: str, size: int, rounds: int) -> None:
    channel = SnapshotChannel(size, path)
    for k in range(rounds):
        channel.publish(bytes([k % 251]) * size)
    channel.close()


def test_a_reader_never_sees_a_half_written_record_from_another_process():
    size, rounds = 1 << 16, 3000
    channel = SnapshotChannel(size)
    try:
        process = multiprocessing.get_context("spawn").Process(target=_writer, args=(channel.path, size, rounds))
        process.start()
        seen = set()
        while process.is_alive() or not seen:
            record = channel.read()
            values = np.frombuffer(record, dtype=np.uint8)
            assert (values == values[0]).all(), "a record mixed two publications"
            seen.add(int(values[0]))
        process.join(30)
        assert process.exitcode == 0
        assert channel.sequence == rounds
        assert len(seen) > 1, "the reader saw only one record: the test proved nothing"
    finally:
        channel.close()


class LinkedArm:
    """The follower of a rig with its physics side and a bus side in one process (no pty, no child)."""

    def __init__(self) -> None:
        self.rig = Rig(seed=3)
        family = self.rig.family
        self.physics = PhysicsSide(self.rig.follower_registers, family.physics_bytes, family.error_bytes,
                                   family.clock_bytes)
        self.bus_registers = []
        for servo_id, registers in zip(self.rig.spec.servo_ids, self.rig.follower_registers, strict=True):
            copy = family.make_registers(servo_id)
            copy.store_block(0, registers.snapshot())
            self.bus_registers.append(copy)
        channels: ArmChannels = self.physics.channels
        self.bus = BusSide(channels, self.bus_registers, stats={"packets": 7})

    def step(self, seconds: float = 0.05) -> None:
        steps = max(1, round(seconds / self.rig.config.timestep_s))
        for _ in range(steps):
            self.physics.pull()
            self.rig.step()
            self.physics.push(self.rig.time, 0)

    def host_write(self, index: int, name: str, value: int) -> None:
        """As the bus emulator applies a Write from the host, then publishes."""
        register = xm430.REGISTERS[name]
        self.bus_registers[index].write(register.address, xm430.encode_value(register, value))
        self.bus.after_packets()

    def host_read(self, index: int, name: str) -> int:
        servo = self.bus_registers[index]
        self.bus.on_read(servo)
        return servo.get(name)

    def close(self) -> None:
        self.bus.close()
        self.physics.close()


@pytest.fixture
def arm():
    linked = LinkedArm()
    yield linked
    linked.close()


def test_goals_written_on_the_bus_move_the_physics_and_reads_see_fresh_present_values(arm):
    arm.host_write(0, "torque_enable", 1)
    start = arm.host_read(0, "present_position")
    arm.step()
    assert arm.rig.follower_registers[0].get("torque_enable") == 1
    arm.host_write(0, "goal_position", start + 300)
    assert arm.host_read(0, "present_position") == start      # physics has not stepped since
    arm.step(0.6)
    moved = arm.host_read(0, "present_position")
    assert abs(moved - (start + 300)) < 40, (start, moved)
    assert arm.bus.stats["packets"] == 7
    assert arm.physics.counters["packets"] == 7                # the bus's counters reach the physics side


def test_a_physics_trip_turns_torque_off_on_the_bus_and_stays_off_until_the_host_acts(arm):
    for k in range(len(arm.bus_registers)):
        arm.host_write(k, "torque_enable", 1)
    arm.step()
    physics_table = arm.rig.follower_registers[1]
    with physics_table.lock:                                     # as the servo model does on a Shutdown error
        physics_table.set("hardware_error_status", xm430.HW_ERROR_OVERLOAD)
        physics_table.set("torque_enable", 0)
    arm.physics.push(arm.rig.time, 0)
    arm.physics.pull()                                           # the bus has not applied the event yet
    assert physics_table.get("torque_enable") == 0, "the bus's stale torque-on undid the trip"
    assert arm.host_read(1, "torque_enable") == 0
    assert arm.host_read(1, "hardware_error_status") == xm430.HW_ERROR_OVERLOAD
    assert arm.host_read(0, "torque_enable") == 1
    arm.bus.after_packets()
    arm.physics.pull()
    assert physics_table.get("torque_enable") == 0


def test_a_reboot_on_the_bus_clears_the_error_the_physics_latched(arm):
    physics_table = arm.rig.follower_registers[2]
    physics_table.set("hardware_error_status", xm430.HW_ERROR_OVERLOAD)
    arm.physics.push(arm.rig.time, 0)
    assert arm.host_read(2, "hardware_error_status") == xm430.HW_ERROR_OVERLOAD
    servo = arm.bus_registers[2]
    servo.reboot()
    arm.bus.on_reboot(servo)
    arm.bus.after_packets()
    assert arm.host_read(2, "hardware_error_status") == 0, "the physics' old error came back after the reboot"
    arm.physics.pull()
    assert physics_table.get("hardware_error_status") == 0
    arm.step()
    assert arm.host_read(2, "hardware_error_status") == 0
    assert arm.host_read(2, "present_position") == arm.rig.follower_registers[2].get("present_position")


def test_the_physics_never_waits_for_a_bus_that_does_not_read_and_its_clock_does_not_travel(arm):
    arm.step(0.5)                                  # the physics rewrites Realtime Tick every step
    assert arm.physics.pending_events == 0, "the physics' clock bytes were sent to the bus as writes"
    for k in range(len(arm.rig.follower_registers)):
        arm.rig.follower_registers[k].set("profile_velocity", 100 + k)     # writes to bus-owned bytes ...
    arm.step(0.5)                                  # ... while the bus process reads nothing
    assert arm.physics.pending_events == len(arm.rig.follower_registers)
    assert arm.rig.follower_registers[3].get("profile_velocity") == 103, "kept on the physics side until applied"
    assert arm.host_read(3, "profile_velocity") == 103
    arm.bus.after_packets()
    arm.physics.pull()
    assert arm.physics.pending_events == 0
