"""STS3215 servo physics: datasheet figures (12 V), the Present Load register model, firmware scaling,
protection and homing, on the real StsServoBank and StsServoRegisters (no ROS, no MuJoCo), and the
registers read back through the Feetech SDK.

Present Load model under test (na_sim.sts_servo_model): the duty the firmware applies, 0.1 % units,
sign bit 10 set when it drives toward decreasing position; at a blocked shaft that duty drives
V/R amps, on a free shaft it mostly balances back-EMF.
"""

from __future__ import annotations

import importlib
import math
import sys

import numpy as np
import pytest
import scservo_sdk as scs

from na_description import sts3215
from na_sim.rig_config import RigConfigError, find_config
from na_sim.servo_banks import make_servo_bank, no_load_speed, stall_torque
from na_sim.servo_model import ServoBank
from na_sim.servo_params import ServoParams, SupplyBus
from na_sim.sts_emulator import StsBusEmulator
from na_sim.sts_registers import StsServoRegisters
from na_sim.sts_servo_model import KP_PER_COEFFICIENT, StsServoBank

RPM = 2 * math.pi / 60
REG = sts3215.REGISTERS


def sts_params(n: int = 1, seed: int | None = None) -> ServoParams:
    return ServoParams.from_yaml(find_config("servo_sts3215.yaml"), n_servos=n, seed=seed)


def bank_with_registers(n: int = 1, voltage: float = 12.0):
    bank = make_servo_bank(sts_params(n), SupplyBus(voltage, source_resistance=0.0), np.random.default_rng(0))
    return bank, [StsServoRegisters(1 + k) for k in range(n)]


def write(regs: StsServoRegisters, name: str, value: int) -> None:
    """A client's Write instruction (the servo's own rules apply)."""
    assert regs.write(REG[name].address, sts3215.encode_value(REG[name], value)) == [name]


def run(bank, registers, seconds: float, dt: float = 0.001, theta=None, omega=None, torque_ext=None,
        inertia: float | None = None):
    """Step the bank with registers exchanged every 5 ms. With ``inertia`` the shaft moves (1-DoF),
    otherwise it is held at ``theta`` turning at ``omega``."""
    n = bank.n
    theta = np.zeros(n) if theta is None else np.array(theta, dtype=float)
    omega = np.zeros(n) if omega is None else np.array(omega, dtype=float)
    external = np.zeros(n) if torque_ext is None else np.asarray(torque_ext, dtype=float)
    for k in range(round(seconds / dt)):
        bank.load_registers(registers)
        torque = bank.step(theta, omega, dt)
        if inertia is not None:
            omega = omega + dt * (torque + external) / inertia
            theta = theta + dt * omega
        if k % 5 == 4:
            bank.store_registers(registers)
    return theta, omega


# ---- datasheet figures ---------------------------------------------------------------------------
def test_stall_torque_and_current_match_the_12v_datasheet():
    torque, current = stall_torque(sts_params(), 12.0)
    print(f"stall at 12 V: {torque[0]:.3f} N·m, {current[0]:.3f} A (datasheet 2.94 N·m, 2.7 A)")
    assert torque[0] == pytest.approx(sts3215.STALL_TORQUE_12V, rel=0.10)
    assert current[0] == pytest.approx(sts3215.STALL_CURRENT_12V, rel=0.10)


def test_no_load_speed_and_current_match_the_12v_datasheet():
    speed, current = no_load_speed(sts_params(), 12.0)
    print(f"no-load at 12 V: {speed[0] / RPM:.2f} rpm, {current[0]:.3f} A (datasheet 45 rpm, 0.18 A)")
    assert speed[0] / RPM == pytest.approx(sts3215.NO_LOAD_SPEED_12V_RPM, rel=0.10)
    assert current[0] == pytest.approx(sts3215.NO_LOAD_CURRENT_12V, rel=0.25)
    slower, _ = no_load_speed(sts_params(), 7.4)
    assert slower[0] < 0.7 * speed[0]


def test_servo_family_picks_the_firmware_and_gear_ratio():
    sts = make_servo_bank(sts_params(), SupplyBus(), np.random.default_rng(0))
    xm = make_servo_bank(ServoParams.from_yaml(n_servos=1, seed=None), SupplyBus(), np.random.default_rng(0))
    assert type(sts) is StsServoBank and sts.gear_ratio == 345.0
    assert type(xm) is ServoBank and xm.gear_ratio == 353.5
    spread = sts_params(5, seed=3)
    torque, _ = stall_torque(spread)
    assert np.all(np.abs(torque / sts3215.STALL_TORQUE_12V - 1) < 0.15) and np.ptp(torque) > 0.01


def test_unknown_servo_family_is_a_one_line_error(tmp_path):
    config = tmp_path / "servo.yaml"
    config.write_text(find_config("servo_sts3215.yaml").read_text().replace("family: sts3215", "family: sts9999"))
    with pytest.raises(RigConfigError, match="unknown servo family 'sts9999'") as error:
        ServoParams.from_yaml(config)
    assert "\n" not in str(error.value)


# ---- Present Load --------------------------------------------------------------------------------
@pytest.mark.parametrize("p_coefficient", [32, 16])
def test_present_load_is_the_applied_duty_at_a_blocked_shaft(p_coefficient):
    bank, registers = bank_with_registers()
    regs = registers[0]
    write(regs, "p_coefficient", p_coefficient)
    write(regs, "d_coefficient", 0)
    write(regs, "goal_position", 2048 + 20)                  # 20 steps ahead of the blocked shaft
    write(regs, "torque_enable", 1)
    run(bank, registers, 0.2)
    expected = KP_PER_COEFFICIENT * p_coefficient * 20      # duty units of 0.1 %
    assert regs.get("present_load") == pytest.approx(expected, abs=2)
    assert regs.get("present_current") * sts3215.CURRENT_UNIT_A == pytest.approx(
        expected / 1000 * 12.0 / 4.44, rel=0.05)            # stalled: the duty drives V/R
    write(regs, "goal_position", 2048 - 20)                 # the other way: sign bit 10
    run(bank, registers, 0.2)
    assert regs.get("present_load") == pytest.approx(-expected, abs=2)
    raw = regs.read(REG["present_load"].address, 2)
    assert int.from_bytes(raw, "little") & (1 << 10)


def test_present_load_on_a_free_shaft_is_mostly_back_emf_not_torque():
    bank, registers = bank_with_registers()
    regs = registers[0]
    write(regs, "operating_mode", 2)                        # PWM mode, Goal Time is the duty
    write(regs, "goal_time", -500)
    write(regs, "torque_enable", 1)
    _, omega = run(bank, registers, 2.0, inertia=0.02)
    assert regs.get("present_load") == -500                 # the firmware reports its output ...
    assert abs(regs.get("present_current") * sts3215.CURRENT_UNIT_A) < 0.3    # ... far from the torque
    assert omega[0] == pytest.approx(-0.5 * sts3215.NO_LOAD_SPEED_12V_RPM * RPM, rel=0.15)
    assert regs.get("present_velocity") < 0 and regs.get("moving") == 1


def test_holding_a_load_reads_a_signed_load_and_torque_off_reads_zero():
    bank, registers = bank_with_registers()
    regs = registers[0]
    write(regs, "goal_position", 2048)
    write(regs, "torque_enable", 1)
    run(bank, registers, 2.0, torque_ext=[-1.0], inertia=0.02)      # gravity pulls toward lower positions
    held_load, held_position = regs.get("present_load"), regs.get("present_position")
    assert 100 < held_load < 500                            # pushes up: positive, a fraction of full duty
    assert -40 < held_position - 2048 < 0                   # a few steps of sag (P = 32)
    write(regs, "torque_enable", 0)
    run(bank, registers, 0.1, torque_ext=[-1.0], inertia=0.02)
    assert regs.get("present_load") == 0
    assert abs(regs.get("present_current")) <= 3


# ---- protection ----------------------------------------------------------------------------------
def test_overload_holds_output_at_protective_torque_and_clears():
    bank, registers = bank_with_registers()
    regs = registers[0]
    write(regs, "goal_position", 2048 + 1500)              # far away, shaft blocked: full duty
    write(regs, "torque_enable", 1)
    run(bank, registers, 1.5)
    assert regs.get("present_load") == 1000 and regs.get("status") == 0
    run(bank, registers, 0.7)                               # Protection Time 2 s at >= 80 %
    assert regs.get("status") == sts3215.STATUS_OVERLOAD
    assert regs.get("present_load") == 200                  # Protective Torque 20 %
    assert regs.get("torque_enable") == 1                   # overload does not unload
    write(regs, "goal_position", 2048)                      # demand falls below 20 %: cleared
    run(bank, registers, 0.1)
    assert regs.get("status") == 0


def test_overheat_unloads_and_a_power_cycle_clears_injected_bits():
    bank, registers = bank_with_registers()
    regs = registers[0]
    write(regs, "max_temperature_limit", 24)               # below ambient: trips at once
    write(regs, "torque_enable", 1)
    run(bank, registers, 0.05)
    assert regs.get("status") & sts3215.STATUS_OVERHEAT
    assert regs.get("torque_enable") == 0                  # Unloading Condition has the overheat bit
    regs.set("status", regs.get("status") | sts3215.STATUS_ANGLE_SENSOR)     # injected from outside
    run(bank, registers, 0.05)
    assert regs.get("status") & sts3215.STATUS_ANGLE_SENSOR                  # kept by the physics
    regs.power_cycle()
    run(bank, registers, 0.05)
    assert regs.get("status") == 0                          # default limit 70 degC, bits cleared


def test_over_current_unloads_and_a_high_supply_only_reports():
    bank, registers = bank_with_registers()
    regs = registers[0]
    write(regs, "protection_current", 100)                  # 0.65 A
    write(regs, "over_current_protection_time", 10)         # 0.1 s
    write(regs, "goal_position", 2048 + 200)                # blocked shaft, full duty: 2.7 A
    write(regs, "torque_enable", 1)
    run(bank, registers, 0.05)
    assert regs.get("status") == 0 and regs.get("torque_enable") == 1
    run(bank, registers, 0.1)
    assert regs.get("status") == sts3215.STATUS_OVERCURRENT  # kept while unloaded
    assert regs.get("torque_enable") == 0                   # Unloading Condition has the over-current bit
    write(regs, "goal_position", 2048)
    write(regs, "torque_enable", 1)                         # switched on again: cleared
    run(bank, registers, 0.05)
    assert regs.get("status") == 0 and regs.get("torque_enable") == 1
    high, high_regs = bank_with_registers(voltage=15.0)     # above Max Voltage 14.0 V
    write(high_regs[0], "torque_enable", 1)
    run(high, high_regs, 0.05)
    assert high_regs[0].get("status") == sts3215.STATUS_VOLTAGE
    assert high_regs[0].get("torque_enable") == 1           # not in the default Unloading Condition
    assert high_regs[0].get("present_voltage") == pytest.approx(150, abs=1)


def test_homing_offset_and_single_turn_wrap():
    bank, registers = bank_with_registers()
    regs = registers[0]
    write(regs, "homing_offset", 1000)
    run(bank, registers, 0.02, theta=[0.0])
    assert regs.get("present_position") == pytest.approx(1048, abs=1)         # actual 2048 - 1000
    write(regs, "homing_offset", -2047)
    run(bank, registers, 0.02, theta=[0.0])
    assert regs.get("present_position") == pytest.approx((2048 + 2047) % 4096, abs=1)
    run(bank, registers, 0.02, theta=[np.pi / 2])                             # actual 3072 + 2047 wraps
    assert regs.get("present_position") == pytest.approx((3072 + 2047) % 4096, abs=1)


def test_acceleration_and_speed_shape_the_move():
    bank, registers = bank_with_registers()
    regs = registers[0]
    write(regs, "acceleration", 20)                         # 2000 steps/s^2
    write(regs, "goal_velocity", 1000)                      # steps/s
    write(regs, "goal_position", 2048 + 800)
    write(regs, "torque_enable", 1)
    theta, _ = run(bank, registers, 0.5, inertia=0.02)
    # trapezoid: 0.5 s to 1000 steps/s (250 steps), then 1000 steps/s; at 0.5 s the profile is at 250 steps
    assert sts3215.rad_to_steps(theta[0]) - 2048 == pytest.approx(250, abs=40)
    theta, _ = run(bank, registers, 1.0, theta=theta, inertia=0.02)
    assert regs.get("present_position") == pytest.approx(2048 + 800, abs=3)
    assert regs.get("moving") == 0


# ---- through the bus -----------------------------------------------------------------------------
def test_physics_values_read_back_through_the_feetech_sdk(monkeypatch):
    monkeypatch.setattr(importlib.import_module("scservo_sdk.port_handler"), "LATENCY_TIMER", 250)   # loaded CI
    interval = sys.getswitchinterval()
    sys.setswitchinterval(2e-4)
    bank, registers = bank_with_registers(2)
    try:
        with StsBusEmulator(registers) as bus:
            port, ph = scs.PortHandler(bus.port_path), scs.PacketHandler(0)
            assert port.openPort() and port.setBaudRate(1_000_000)
            for servo_id, goal in ((1, 2048 + 30), (2, 2048 - 30)):
                assert ph.write2ByteTxRx(port, servo_id, REG["goal_position"].address, goal) == (scs.COMM_SUCCESS, 0)
                assert ph.write1ByteTxRx(port, servo_id, REG["torque_enable"].address, 1) == (scs.COMM_SUCCESS, 0)
            run(bank, registers, 0.2)                                # shafts blocked at 2048
            group = scs.GroupSyncRead(port, ph, sts3215.STATE_BLOCK_START, sts3215.STATE_BLOCK_LENGTH)
            for servo_id in (1, 2):
                group.addParam(servo_id)
            assert group.txRxPacket() == scs.COMM_SUCCESS
            loads = [scs.SCS_TOHOST(group.getData(i, REG["present_load"].address, 2), 10) for i in (1, 2)]
            assert loads[0] == pytest.approx(16 * 30, abs=3) and loads[1] == pytest.approx(-16 * 30, abs=3)
            state = sts3215.decode_state_block(bytes(group.data_dict[2]))
            assert state.load == pytest.approx(-0.48, abs=0.005)
            assert state.position == pytest.approx(0.0, abs=2e-3)
            assert state.input_voltage == pytest.approx(12.0, abs=0.15)
            assert state.current == pytest.approx(-0.48 * 12.0 / 4.44, rel=0.05)
            port.closePort()
    finally:
        sys.setswitchinterval(interval)
