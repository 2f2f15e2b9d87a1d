"""Shared fixtures of the na_driver tests: emulated arms (na_sim) on pseudo-terminals."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest

from na_description import load_spec, xm430
from na_sim.dxl_emulator import DxlBusEmulator
from na_sim.faults import DxlFaults
from na_sim.servo_registers import ServoRegisters


def make_servos(present_pulses: list[int] | None = None, seed: int = 0) -> list[ServoRegisters]:
    """Five XM430 register tables with the spec's IDs and a plausible, distinct state."""
    spec = load_spec()
    rng = np.random.default_rng(seed)
    servos = []
    for k, sid in enumerate(spec.servo_ids):
        regs = ServoRegisters(sid)
        regs.set("return_delay_time", 0)
        position = present_pulses[k] if present_pulses else int(2048 + rng.integers(-300, 300))
        regs.set("present_position", position)
        regs.set("goal_position", position)
        regs.set("position_trajectory", position)
        regs.set("present_velocity", int(rng.integers(-50, 50)))
        regs.set("present_current", int(rng.integers(-200, 200)))
        regs.set("present_pwm", int(rng.integers(-400, 400)))
        regs.set("present_input_voltage", 120 + k)
        regs.set("present_temperature", 30 + k)
        servos.append(regs)
    return servos


@pytest.fixture
def emulated_arm() -> Iterator[Callable[..., tuple[DxlBusEmulator, list[ServoRegisters]]]]:
    """Factory: ``emulated_arm(faults=None, servos=None)`` starts a bus emulator; all are stopped after the test."""
    started: list[DxlBusEmulator] = []

    def factory(faults: DxlFaults | None = None, servos: list[ServoRegisters] | None = None, **kwargs):
        servos = servos if servos is not None else make_servos()
        emulator = DxlBusEmulator(servos, faults=faults, **kwargs).start()
        started.append(emulator)
        return emulator, servos

    yield factory
    for emulator in started:
        emulator.stop()


@pytest.fixture
def register_present_block() -> Callable[[ServoRegisters], bytes]:
    return lambda regs: regs.read(xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)
