"""Shared fixtures of the na_driver tests: emulated arms (na_sim) on pseudo-terminals: OpenManipulator-X
(DYNAMIXEL XM430) and SO-101 (Feetech STS3215)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from na_description import xm430
from na_sim.dxl_emulator import DxlBusEmulator
from na_sim.faults import DxlFaults
from na_sim.servo_registers import ServoRegisters
from na_sim.sts_emulator import StsBusEmulator
from na_sim.sts_registers import StsServoRegisters


@pytest.fixture
def emulated_arm(make_servos) -> Iterator[Callable[..., tuple[DxlBusEmulator, list[ServoRegisters]]]]:
    """Factory: ``emulated_arm(faults=None, servos=None)`` starts a bus emulator of the spec's servos (a plausible
    state each); all are stopped after the test."""
    started: list[DxlBusEmulator] = []

    def factory(faults: DxlFaults | None = None, servos: list[ServoRegisters] | None = None, **kwargs):
        servos = servos if servos is not None else make_servos(state_seed=0)
        emulator = DxlBusEmulator(servos, faults=faults, **kwargs).start()
        started.append(emulator)
        return emulator, servos

    yield factory
    for emulator in started:
        emulator.stop()


@pytest.fixture
def register_present_block() -> Callable[[ServoRegisters], bytes]:
    return lambda regs: regs.read(xm430.STATE_BLOCK_START, xm430.STATE_BLOCK_LENGTH)


@pytest.fixture
def emulated_so101() -> Iterator[Callable[..., tuple[StsBusEmulator, list[StsServoRegisters]]]]:
    """Factory: ``emulated_so101(faults=None, servos=None, **emulator_kwargs)`` starts an STS3215 bus emulator with
    the SO-101 spec's servo IDs (factory register state unless ``servos``); all are stopped after the test."""
    from na_description import load_spec

    started: list[StsBusEmulator] = []

    def factory(faults: DxlFaults | None = None, servos: list[StsServoRegisters] | None = None, **kwargs):
        servos = servos if servos is not None else [StsServoRegisters(sid) for sid in load_spec("so101").servo_ids]
        emulator = StsBusEmulator(servos, faults=faults, **kwargs).start()
        started.append(emulator)
        return emulator, servos

    yield factory
    for emulator in started:
        emulator.stop()
