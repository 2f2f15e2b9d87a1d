"""Servo state blocks -> ServoStates (both families) and ServoStates -> the ArmState / JointState fields, the one
path the arm driver and the offline generator share."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from na_description import load_spec, sts3215, xm430
from na_description.arm_state import arm_state_fields, joint_state_fields
from na_description.servo_state import ServoStates

XM_VALUES = [{"present_pwm": -885, "present_current": 100, "present_velocity": -10, "present_position": 3072,
              "present_input_voltage": 121, "present_temperature": 41},
             {"present_pwm": 300, "present_current": -50, "present_velocity": 7, "present_position": 1024,
              "present_input_voltage": 118, "present_temperature": 35}]


def xm_block(values: dict[str, int], offsets: dict[str, int], length: int) -> bytes:
    raw = bytearray(length)
    for name, value in values.items():
        reg = xm430.REGISTERS[name]
        raw[offsets[name]: offsets[name] + reg.size] = xm430.encode_value(reg, value)
    return bytes(raw)


def test_xm430_states_do_not_depend_on_where_the_registers_sit() -> None:
    shuffled, cursor = {}, 3                  # another layout, as a driver's indirect block is
    for name in reversed(XM_VALUES[0]):
        shuffled[name] = cursor
        cursor += xm430.REGISTERS[name].size
    in_block = xm430.decode_states([xm_block(v, xm430.STATE_OFFSETS, xm430.STATE_BLOCK_LENGTH) for v in XM_VALUES],
                                   errors=[0, xm430.HW_ERROR_OVERLOAD])
    elsewhere = xm430.decode_states([xm_block(v, shuffled, cursor) for v in XM_VALUES], shuffled,
                                    errors=[0, xm430.HW_ERROR_OVERLOAD])
    for name in ("position", "velocity", "current", "pwm", "input_voltage", "temperature", "error"):
        np.testing.assert_array_equal(getattr(in_block, name), getattr(elsewhere, name))
    np.testing.assert_allclose(in_block.position, [np.pi / 2, -np.pi / 2])
    np.testing.assert_allclose(in_block.pwm, [-1.0, 300 / 885])
    np.testing.assert_allclose(in_block.current, [0.269, -50 * 2.69e-3])
    np.testing.assert_allclose(in_block.input_voltage, [12.1, 11.8])
    assert in_block.temperature.tolist() == [41.0, 35.0] and in_block.error.tolist() == [0, xm430.HW_ERROR_OVERLOAD]
    assert np.all(np.isnan(in_block.load))                      # no load register
    assert xm430.decode_states([]).position.shape == (0,)      # nobody answered


def test_sts3215_states_carry_load_as_pwm_and_the_masked_status() -> None:
    raw = bytearray(sts3215.STATE_BLOCK_LENGTH)
    raw[0:2] = (3072).to_bytes(2, "little")                     # present position
    raw[4:6] = (0x0400 | 300).to_bytes(2, "little")             # present load -30 %
    raw[9] = sts3215.STATUS_OVERLOAD | 0x40                     # a bit outside STATUS_MASK
    states = sts3215.decode_states([bytes(raw), bytes(sts3215.STATE_BLOCK_LENGTH)])
    assert states.load.tolist() == states.pwm.tolist() == [-0.3, 0.0]
    assert states.error.tolist() == [sts3215.STATUS_OVERLOAD, 0]
    assert states.position[0] == pytest.approx(np.pi / 2)


def servo_states(n: int, **overrides: list[float]) -> ServoStates:
    values = {name: np.linspace(0.1, 0.5, n) for name in ("position", "velocity", "current", "pwm", "load",
                                                           "input_voltage", "temperature")}
    values.update({name: np.asarray(v, dtype=float) for name, v in overrides.items()})
    return ServoStates(**values, error=np.zeros(n, dtype=np.int64))


def test_arm_state_fields_are_joint_side_and_spec_ordered() -> None:
    spec = load_spec()
    servos = replace(servo_states(spec.n_motors), error=np.array([0, 0x120, 0, 5, 0]))    # bits above a byte: dropped
    goal = np.array([0.1, 0.2, 0.3, 0.4, 0.5])
    stale = [False, True, False, False, False]
    fields = arm_state_fields(spec, "follower", servos, goal, reports_load=False, stale=stale,
                              bus_cycle_duration=0.002, crc_errors=3)
    direction = np.array([j.drive_direction for j in spec.joints])
    homing = np.array([j.homing_offset for j in spec.joints])
    np.testing.assert_allclose(fields.position, direction * servos.position + homing)
    np.testing.assert_allclose(fields.velocity, direction * servos.velocity)
    np.testing.assert_allclose(fields.current, direction * servos.current)
    np.testing.assert_allclose(fields.pwm, direction * servos.pwm)
    assert fields.load.size == 0                                # the family reports no load
    assert fields.gripper_slide == pytest.approx(float(spec.gripper.angle_to_slide(fields.position[4])))
    assert fields.goal_gripper_slide == pytest.approx(float(spec.gripper.angle_to_slide(0.5)))
    assert fields.hardware_error.dtype == np.uint8 and fields.hardware_error.tolist() == [0, 0x20, 0, 5, 0]
    assert fields.stale.tolist() == stale and fields.crc_errors == 3
    assert fields.name == spec.joint_names and fields.role == "follower"
    goal[0] = 9.0
    servos.temperature[0] = 99.0
    assert fields.goal_position[0] == 0.1 and fields.temperature[0] != 99.0     # the fields own their arrays


def test_load_follows_the_direction_and_joint_states_show_the_gripper_slide() -> None:
    spec = load_spec("so101")
    servos = servo_states(spec.n_motors)
    fields = arm_state_fields(spec, "leader", servos, np.zeros(spec.n_motors), reports_load=True,
                              stale=[False] * spec.n_motors, bus_cycle_duration=0.0)
    direction = np.array([j.drive_direction for j in spec.joints])
    np.testing.assert_allclose(fields.load, direction * servos.load)
    joints = joint_state_fields(spec, fields)
    g = spec.joint_names.index(next(j.name for j in spec.joints if j.type == "gripper"))
    assert joints["position"][g] == fields.gripper_slide
    assert joints["velocity"][g] == pytest.approx(fields.velocity[g] * spec.gripper.slope)
    assert joints["name"] == spec.joint_names and joints["effort"].size == 0
    np.testing.assert_array_equal(np.delete(joints["position"], g), np.delete(fields.position, g))


def test_an_arm_without_a_gripper_has_no_slide() -> None:
    spec = load_spec()
    plain = replace(spec, joints=tuple(replace(j, type="revolute") for j in spec.joints))
    fields = arm_state_fields(plain, "leader", servo_states(plain.n_motors), np.zeros(plain.n_motors),
                              reports_load=False, stale=[False] * plain.n_motors, bus_cycle_duration=0.0)
    assert math.isnan(fields.gripper_slide) and math.isnan(fields.goal_gripper_slide)
    np.testing.assert_array_equal(joint_state_fields(plain, fields)["position"], fields.position)
