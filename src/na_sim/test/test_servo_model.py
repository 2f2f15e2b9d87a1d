"""XM430-W350 servo physics: datasheet figures, firmware scaling, gearbox, heat, bus, sensors and
protection, checked on the real ServoBank and real ServoRegisters (no ROS, no MuJoCo)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from na_description import xm430
from na_sim.rig_config import RigConfigError, find_config
from na_sim.servo_banks import no_load_speed, stall_torque
from na_sim.servo_model import ServoBank
from na_sim.servo_params import ServoParams, SupplyBus
from na_sim.servo_registers import ProtocolError, ServoRegisters
from na_sim.servo_table import CONTROL_TABLE_DTYPE, MODE_CURRENT, MODE_CURRENT_POSITION, MODE_EXTENDED, MODE_PWM

RPM = 2 * math.pi / 60


def nominal(n: int = 1) -> ServoParams:
    return ServoParams.from_yaml(n_servos=n, seed=None)


def bank_with_registers(n: int = 1, seed: int | None = None, voltage: float = 12.0):
    params = ServoParams.from_yaml(n_servos=n, seed=seed)
    bank = ServoBank(params, SupplyBus(voltage, source_resistance=0.0), np.random.default_rng(0))
    registers = [ServoRegisters(11 + k) for k in range(n)]
    return bank, registers


def run_blocked(bank: ServoBank, registers, seconds: float, dt: float = 0.005, theta=None) -> None:
    """Shaft held still at ``theta``; registers exchanged every step as the rig does."""
    theta = np.zeros(bank.n) if theta is None else np.asarray(theta, dtype=float)
    for _ in range(round(seconds / dt)):
        bank.load_registers(registers)
        bank.step(theta, np.zeros(bank.n), dt)
        bank.store_registers(registers)


def test_stall_torque_and_current_match_datasheet_at_12v_and_11v1():
    torque, current = stall_torque(nominal(), 12.0)
    print(f"stall at 12 V: {torque[0]:.3f} N·m, {current[0]:.3f} A (datasheet 4.1 N·m, 2.3 A)")
    assert torque[0] == pytest.approx(xm430.STALL_TORQUE_12V, rel=0.10)
    assert current[0] == pytest.approx(xm430.STALL_CURRENT_12V, rel=0.10)
    torque, current = stall_torque(nominal(), 11.1)
    print(f"stall at 11.1 V: {torque[0]:.3f} N·m, {current[0]:.3f} A (datasheet 3.8 N·m, 2.1 A)")
    assert torque[0] == pytest.approx(3.8, rel=0.10)
    assert current[0] == pytest.approx(2.1, rel=0.10)


def test_no_load_speed_matches_datasheet_and_scales_with_voltage():
    speed, current = no_load_speed(nominal(), 12.0)
    rpm = speed[0] / RPM
    print(f"no-load at 12 V: {rpm:.2f} rpm, {current[0]:.3f} A (datasheet 46 rpm)")
    assert rpm == pytest.approx(xm430.NO_LOAD_SPEED_12V_RPM, rel=0.10)
    assert 0.02 < current[0] < 0.5                # friction needs some current, far below stall
    slower, _ = no_load_speed(nominal(), 9.0)
    assert slower[0] < 0.8 * speed[0]


def test_spread_servos_stay_near_datasheet_and_differ_from_each_other():
    params = ServoParams.from_yaml(n_servos=5, seed=3)
    torque, _ = stall_torque(params)
    print("stall torque per servo (seed 3):", np.round(torque, 3))
    assert np.all(np.abs(torque / xm430.STALL_TORQUE_12V - 1) < 0.15)
    assert np.ptp(torque) > 0.01                   # no two servos alike
    same = ServoParams.from_yaml(n_servos=5, seed=3)
    np.testing.assert_array_equal(same.resistance_ohm, params.resistance_ohm)
    other = ServoParams.from_yaml(n_servos=5, seed=4)
    assert not np.array_equal(other.resistance_ohm, params.resistance_ohm)


def test_position_p_gain_scaling_and_pwm_limit_follow_the_e_manual():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.set("operating_mode", MODE_EXTENDED)
    regs.set("position_p_gain", 800)
    regs.set("goal_position", xm430.POSITION_CENTER + 100)
    regs.set("torque_enable", 1)
    run_blocked(bank, registers, 0.02)
    # KPP = P/128 = 6.25 PWM units per pulse of error -> 625 units for 100 pulses.
    print("present PWM for 100 pulses of error at P=800:", regs.get("present_pwm"))
    assert regs.get("present_pwm") == pytest.approx(625, abs=8)
    regs.set("torque_enable", 0)
    regs.set("pwm_limit", 300)
    regs.set("torque_enable", 1)
    run_blocked(bank, registers, 0.02)
    assert regs.get("present_pwm") == pytest.approx(300, abs=2)
    assert regs.get("present_current") > 0


def test_drive_mode_reverse_flips_the_direction_of_effort():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.set("operating_mode", MODE_PWM)
    regs.set("drive_mode", 1)
    regs.set("goal_pwm", 200)
    regs.set("torque_enable", 1)
    bank.load_registers(registers)
    for _ in range(5):                               # first the gear crosses its backlash
        torque = bank.step(np.zeros(1), np.zeros(1), 0.005)
    assert torque[0] < -0.3                          # positive PWM turns the shaft the other way
    bank.store_registers(registers)
    assert regs.get("present_pwm") == pytest.approx(200, abs=2)
    assert regs.get("present_current") > 0           # reported in the servo's own (reversed) frame


def test_current_based_position_mode_is_limited_by_goal_current():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.set("operating_mode", MODE_CURRENT_POSITION)
    regs.set("goal_current", 100)                   # 0.269 A
    regs.set("goal_position", xm430.POSITION_CENTER + 2000)
    regs.set("torque_enable", 1)
    run_blocked(bank, registers, 0.05)
    current = xm430.current_units_to_amp(regs.get("present_current"))
    print(f"current-based position, goal current 0.269 A: {current:.3f} A")
    assert current == pytest.approx(0.269, abs=0.02)


def test_gearbox_is_lossier_when_back_driven():
    """Same winding current, output moving with vs against the motor torque (current mode)."""
    params = nominal(2)
    bank = ServoBank(params, SupplyBus(12.0, 0.0), np.random.default_rng(0))
    table = np.zeros(2, dtype=CONTROL_TABLE_DTYPE)
    for register in xm430.CONTROL_TABLE:
        table[register.name] = register.default
    table["operating_mode"] = MODE_CURRENT
    table["goal_current"] = 186                      # 0.5 A
    table["torque_enable"] = 1
    bank.load_table(table)
    omega = np.array([0.5, -0.5])                    # driving the load / being back-driven
    for _ in range(20):
        torque = bank.step(np.zeros(2), omega, 0.005)
    friction = params.coulomb_nm + params.viscous_nm_s_rad * 0.5
    gear = torque + np.sign(omega) * friction        # remove the friction both see alike
    print(f"gear torque at 0.5 A: driving {gear[0]:.3f} N·m, back-driven {gear[1]:.3f} N·m")
    np.testing.assert_allclose(bank.current, 0.5, atol=0.01)
    assert gear[1] > 1.3 * gear[0]


def test_backlash_interrupts_torque_when_the_effort_reverses():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.set("operating_mode", MODE_PWM)
    regs.set("goal_pwm", 300)
    regs.set("torque_enable", 1)
    dt = 0.0002
    run_blocked(bank, registers, 0.01, dt=dt)
    assert bank.output_torque[0] > 0.5
    regs.set("goal_pwm", -300)
    bank.load_registers(registers)
    torques = [bank.step(np.zeros(1), np.zeros(1), dt)[0] for _ in range(200)]
    dead = sum(1 for t in torques if abs(t) < 0.2)
    print(f"backlash dead time after reversal: {dead * dt * 1e3:.1f} ms")
    assert dead >= 2                                 # the gear crosses 15 arcmin before it pushes back
    assert torques[-1] < -0.5


def test_winding_heats_under_load_and_resistance_drift_lowers_current():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.set("operating_mode", MODE_PWM)
    regs.set("goal_pwm", 250)
    regs.set("shutdown", 0)
    regs.set("torque_enable", 1)
    run_blocked(bank, registers, 0.05, dt=0.01)
    start_current, start_temperature = bank.current[0], regs.get("present_temperature")
    run_blocked(bank, registers, 60.0, dt=0.02)
    end_current, end_temperature = bank.current[0], regs.get("present_temperature")
    print(f"60 s at 28 % duty blocked: {start_temperature} -> {end_temperature} degC, "
          f"current {start_current:.3f} -> {end_current:.3f} A")
    assert end_temperature >= start_temperature + 3
    assert end_current < 0.98 * start_current


def test_shared_bus_sags_with_total_current():
    params = nominal(5)
    bus = SupplyBus(12.0, source_resistance=0.25, filter_time=0.01)
    bank = ServoBank(params, bus, np.random.default_rng(0))
    registers = [ServoRegisters(11 + k) for k in range(5)]
    run_blocked(bank, registers, 0.05)
    idle = [r.get("present_input_voltage") for r in registers]
    for regs in registers:
        regs.set("operating_mode", MODE_PWM)
        regs.set("goal_pwm", 885)
        regs.set("shutdown", 0)
        regs.set("torque_enable", 1)
    run_blocked(bank, registers, 0.1)
    loaded = [r.get("present_input_voltage") for r in registers]
    print(f"bus voltage idle {np.mean(idle) / 10:.2f} V, 5 servos stalled {np.mean(loaded) / 10:.2f} V")
    assert min(idle) >= 118
    assert max(loaded) <= np.mean(idle) - 15        # > 1.5 V sag at ~10 A through 0.25 Ohm
    assert np.ptp(loaded) <= 2                      # one bus: every servo sees the same voltage


def test_sensors_are_quantised_noisy_and_unbiased():
    bank, registers = bank_with_registers()
    theta = 0.3
    currents, positions = [], []
    for _ in range(400):
        bank.load_registers(registers)
        bank.step(np.array([theta]), np.zeros(1), 0.005)
        bank.store_registers(registers)
        currents.append(registers[0].get("present_current"))
        positions.append(registers[0].get("present_position"))
    expected = xm430.rad_to_pulses(theta)
    assert abs(np.mean(positions) - expected) < 0.5
    assert len(set(currents)) > 1                   # noise, in whole 2.69 mA units
    assert abs(np.mean(currents)) < 5               # torque off: current near zero
    assert registers[0].get("present_input_voltage") == pytest.approx(120, abs=1)


def test_overload_trip_clears_torque_enable_until_reboot():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.set("operating_mode", MODE_EXTENDED)
    regs.set("goal_position", xm430.POSITION_CENTER + 1500)   # far beyond: full PWM against the block
    regs.set("torque_enable", 1)
    run_blocked(bank, registers, 1.0)
    assert regs.get("hardware_error_status") == 0
    run_blocked(bank, registers, 1.0)
    status = regs.get("hardware_error_status")
    print("after 2 s stalled at full PWM:", xm430.decode_hardware_error(status))
    assert status & xm430.HW_ERROR_OVERLOAD
    assert regs.get("torque_enable") == 0
    assert regs.alert
    regs.write(xm430.REGISTERS["torque_enable"].address, b"\x01")   # the bus tries to re-enable
    run_blocked(bank, registers, 0.05)
    assert regs.get("torque_enable") == 0 and abs(bank.current[0]) < 1e-6
    regs.reboot()
    run_blocked(bank, registers, 0.05)
    assert regs.get("hardware_error_status") == 0
    regs.set("operating_mode", MODE_EXTENDED)
    regs.set("goal_position", xm430.POSITION_CENTER + 50)
    regs.set("torque_enable", 1)
    run_blocked(bank, registers, 0.05)
    assert regs.get("torque_enable") == 1 and bank.current[0] > 0.05


def test_overheating_trip_uses_the_temperature_limit_register():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.write(xm430.REGISTERS["temperature_limit"].address, bytes([20]))   # below ambient 25 degC
    regs.set("torque_enable", 1)
    run_blocked(bank, registers, 0.02)
    assert regs.get("hardware_error_status") & xm430.HW_ERROR_OVERHEATING
    assert regs.get("torque_enable") == 0


def test_input_voltage_error_is_reported_without_shutdown_by_default():
    bank, registers = bank_with_registers(voltage=9.0)    # below Min Voltage Limit 9.5 V
    regs = registers[0]
    regs.set("torque_enable", 1)
    run_blocked(bank, registers, 0.02)
    assert regs.get("hardware_error_status") & xm430.HW_ERROR_INPUT_VOLTAGE
    assert regs.get("torque_enable") == 1                 # bit 0 is not in the default Shutdown mask


def test_bad_servo_config_is_rejected_with_the_key_names(tmp_path):
    text = find_config("servo_xm430.yaml").read_text().replace("resistance_ohm: 5.2", "resistnce_ohm: 5.2")
    bad = tmp_path / "servo.yaml"
    bad.write_text(text)
    with pytest.raises(RigConfigError, match="resistance_ohm"):
        ServoParams.from_yaml(bad)
    with pytest.raises(RigConfigError, match="not found"):
        ServoParams.from_yaml(tmp_path / "missing.yaml")


def test_protocol_writes_still_obey_the_control_table_rules():
    """The physics' internal writes do not loosen the bus rules (EEPROM locked under torque)."""
    bank, registers = bank_with_registers()
    registers[0].set("torque_enable", 1)
    run_blocked(bank, registers, 0.01)
    with pytest.raises(ProtocolError):
        registers[0].write(xm430.REGISTERS["operating_mode"].address, bytes([MODE_EXTENDED]))


def free_shaft(bank: ServoBank, registers, seconds: float, inertia: float = 0.1, dt: float = 0.002) -> np.ndarray:
    """Integrate an output shaft with inertia under the servo's torque; returns the samples of Present Position."""
    theta, omega = np.zeros(bank.n), np.zeros(bank.n)
    positions = []
    for _ in range(round(seconds / dt)):
        bank.load_registers(registers)
        torque = bank.step(theta, omega, dt)
        omega = omega + dt * torque / inertia
        theta = theta + dt * omega
        bank.store_registers(registers)
        positions.append(registers[0].get("present_position"))
    return np.array(positions)


def test_profile_velocity_limits_the_trajectory_toward_the_goal():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.set("operating_mode", MODE_EXTENDED)
    regs.set("profile_velocity", 20)                  # 20 * 0.229 rpm = 0.48 rad/s
    regs.set("goal_position", xm430.POSITION_CENTER + 1024)   # a quarter turn away
    regs.set("torque_enable", 1)
    positions = free_shaft(bank, registers, 1.0)
    trajectory = regs.get("position_trajectory") - xm430.POSITION_CENTER
    speed = xm430.velocity_units_to_rad_s(regs.get("velocity_trajectory"))
    print(f"after 1 s: trajectory {trajectory} pulses, {speed:.3f} rad/s, position {positions[-1] - 2048}")
    assert trajectory == pytest.approx(0.48 * 4096 / (2 * math.pi), rel=0.05)
    assert speed == pytest.approx(0.48, abs=0.01)
    assert abs(positions[-1] - regs.get("position_trajectory")) < 60      # the shaft follows the profile


def test_velocity_mode_tracks_goal_velocity():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.set("operating_mode", 1)
    regs.set("goal_velocity", 100)                    # 22.9 rpm
    regs.set("torque_enable", 1)
    free_shaft(bank, registers, 1.5)
    measured = regs.get("present_velocity")
    print(f"velocity mode: goal 100 units, present {measured} units")
    assert measured == pytest.approx(100, abs=6)


def test_homing_offset_shifts_present_and_goal_position_frames():
    bank, registers = bank_with_registers()
    regs = registers[0]
    regs.set("homing_offset", 300)
    regs.set("operating_mode", MODE_EXTENDED)
    regs.set("goal_position", xm430.POSITION_CENTER + 300)     # = the shaft's zero in the shifted frame
    regs.set("torque_enable", 1)
    run_blocked(bank, registers, 0.05)
    assert regs.get("present_position") == pytest.approx(xm430.POSITION_CENTER + 300, abs=1)
    assert abs(regs.get("present_pwm")) <= 8                   # no error -> (almost) no effort
