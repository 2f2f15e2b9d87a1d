"""Shared fixtures of the na_sim tests: emulated servos and a dynamixel-sdk client on the emulator's pty."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import dynamixel_sdk.port_handler
import pytest
from dynamixel_sdk import PacketHandler, PortHandler

from na_description import load_spec
from na_sim.dxl_emulator import DxlBusEmulator
from na_sim.servo_registers import ServoRegisters

BUS_BAUD = load_spec().baud_rate


@dataclass
class SdkBus:
    """An emulated bus plus a real dynamixel-sdk client connected to it."""

    emulator: DxlBusEmulator
    servos: list[ServoRegisters]
    port: PortHandler
    packet_handler: PacketHandler

    def servo(self, servo_id: int) -> ServoRegisters:
        return next(s for s in self.servos if s.servo_id == servo_id)


@pytest.fixture
def sdk_bus(monkeypatch: pytest.MonkeyPatch, make_servos) -> Iterator[Callable[..., SdkBus]]:
    """Factory: ``sdk_bus(ids=None, servos=None, **emulator_kwargs)`` starts an emulator (default: the robot spec's
    servos, factory state) and opens the SDK port on it.

    The SDK client polls the port in a busy loop in this same process; a short GIL switch interval
    keeps the emulator thread from waiting 5 ms (Python's default) for its turn. The SDK's reply
    timeout allows 2 x LATENCY_TIMER for the USB adapter (16 ms by default); it is raised to 50 ms
    so that on a loaded 2-core machine an honest reply is never counted as lost and injected
    faults can be compared exactly. Latency itself is measured in benchmarks/bench_dxl_emulator.py.
    """
    monkeypatch.setattr(dynamixel_sdk.port_handler, "LATENCY_TIMER", 50)
    opened: list[SdkBus] = []
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(2e-4)

    def start(ids: tuple[int, ...] | None = None, servos: list[ServoRegisters] | None = None, **kwargs) -> SdkBus:
        servos = servos if servos is not None else make_servos(ids)
        emulator = DxlBusEmulator(servos, **{"baud_rate": BUS_BAUD, **kwargs}).start()
        port = PortHandler(emulator.port_path)
        bus = SdkBus(emulator, servos, port, PacketHandler(2.0))
        opened.append(bus)
        assert port.openPort(), f"cannot open {emulator.port_path}"
        assert port.setBaudRate(BUS_BAUD)
        return bus

    try:
        yield start
    finally:
        for bus in opened:
            if bus.port.is_open:
                bus.port.closePort()
            bus.emulator.stop()
        sys.setswitchinterval(switch_interval)
