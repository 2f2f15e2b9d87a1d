"""The servo bank of a family, and the datasheet bench tests (stall torque, no-load speed) run on it."""

from __future__ import annotations

import numpy as np

from na_sim.servo_model import ServoBank
from na_sim.servo_params import ServoParams, SupplyBus
from na_sim.sts_servo_model import StsServoBank


def make_servo_bank(params: ServoParams, bus: SupplyBus, rng: np.random.Generator,
                    ambient_temperature: float = 25.0) -> ServoBank:
    """The bank of ``params.family``: :class:`ServoBank` (XM430) or the STS3215's firmware and table."""
    if params.family == "sts3215":
        return StsServoBank(params, bus, rng, ambient_temperature)
    return ServoBank(params, bus, rng, ambient_temperature)


# ---- bench characterisation (datasheet checks) ------------------------------------------------
def _bench_bank(params: ServoParams, voltage: float, rng_seed: int = 0) -> ServoBank:
    bank = make_servo_bank(params, SupplyBus(voltage, source_resistance=0.0), np.random.default_rng(rng_seed))
    bank.bench_full_duty()
    return bank


def stall_torque(params: ServoParams, voltage: float = 12.0, seconds: float = 0.05,
                 dt: float = 0.00025) -> tuple[np.ndarray, np.ndarray]:
    """Output torque (N·m) and current (A) with the shaft blocked at full PWM (datasheet stall test)."""
    bank = _bench_bank(params, voltage)
    zero = np.zeros(params.n)
    torque = zero
    for _ in range(int(seconds / dt)):
        torque = bank.step(zero, zero, dt).copy()
    return torque, bank.current.copy()


def no_load_speed(params: ServoParams, voltage: float = 12.0, inertia: float = 0.01, seconds: float = 3.0,
                  dt: float = 0.001) -> tuple[np.ndarray, np.ndarray]:
    """Steady output speed (rad/s) and current (A) of a free shaft at full PWM (datasheet no-load test)."""
    bank = _bench_bank(params, voltage)
    theta, omega = np.zeros(params.n), np.zeros(params.n)
    for _ in range(int(seconds / dt)):
        torque = bank.step(theta, omega, dt)
        omega = omega + dt * torque / inertia
        theta = theta + dt * omega
    return omega, bank.current.copy()
