"""Shared fixtures of the na_driver tests, for both servo families (DYNAMIXEL XM430 of the OpenManipulator-X,
Feetech STS3215 of the SO-101): emulated arms (na_sim) on pseudo-terminals, arm driver cores on them, and
buses against scripted bytes."""

from __future__ import annotations

import os
import threading
import time
import tty
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from na_driver.arm_config import build_config
from na_driver.arm_core import ArmDriverCore, ArmSample
from na_driver.serial_bus import SerialBus
from na_sim.dxl_emulator import DxlBusEmulator
from na_sim.faults import DxlFaults
from na_sim.pty_bus import Packet, PacketStream
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


# ---- arm driver cores ----------------------------------------------------------------------------------------------
class LogRecorder:
    """A core's ``log``: keeps every (level, message)."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str]] = []

    def __call__(self, level: int, message: str) -> None:
        self.lines.append((level, message))

    def text(self, min_level: int = 0) -> str:
        return "\n".join(m for lvl, m in self.lines if lvl >= min_level)


@pytest.fixture
def make_core() -> Callable[..., tuple[ArmDriverCore, LogRecorder]]:
    """Factory: ``make_core(port, role="follower", read_mode="auto", layout="auto", **params)`` -> (core, its log),
    for the robot spec of ``params`` (``robot_spec``; default the OpenManipulator-X). Tests whose point is not bus
    timing wait 20 ms for replies (the 2 test CPUs are shared, so the emulator thread can be late) unless they pass
    their own ``reply_timeout``."""
    def make(port: str, role: str = "follower", read_mode: str = "auto", layout: str = "auto",
             **params: Any) -> tuple[ArmDriverCore, LogRecorder]:
        log = LogRecorder()
        params.setdefault("reply_timeout", 0.02)
        config = build_config({"port": port, "role": role, **params})
        return ArmDriverCore(config, log=log, read_mode=read_mode, layout=layout), log

    return make


def cycle_until_fresh(core: ArmDriverCore, timeout: float = 2.0) -> ArmSample:
    """Cycle until every servo answered in the same cycle (or ``timeout`` s passed); the last sample."""
    deadline = time.monotonic() + timeout
    while True:
        sample = core.cycle()
        if not any(sample.stale) or time.monotonic() > deadline:
            return sample


@pytest.fixture
def fresh_cycle() -> Callable[..., ArmSample]:
    """:func:`cycle_until_fresh` as a fixture: ``fresh_cycle(core, timeout=2.0)``."""
    return cycle_until_fresh


# ---- buses against scripted bytes ------------------------------------------------------------------------------------
class ScriptedBus:
    """A pty whose far end answers each instruction packet with ``answer(packet) -> bytes`` (written at once);
    ``parser``: the protocol's packet parser (``na_sim.protocol2.PacketParser()`` or ``protocol0``'s)."""

    def __init__(self, answer: Callable[[Packet], bytes], parser: PacketStream[Packet]) -> None:
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)
        self.port_path = os.ttyname(self._slave)
        self.answer = answer
        self.parser = parser
        self.requests: list[Packet] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data = os.read(self._master, 4096)
            except OSError:
                return
            for packet in self.parser.feed(data):
                self.requests.append(packet)
                if reply := self.answer(packet):
                    os.write(self._master, reply)

    def send(self, data: bytes) -> None:
        """Bytes from the far end that answer no request (e.g. a late reply arriving between transactions)."""
        os.write(self._master, data)

    def close(self) -> None:
        self._stop.set()
        os.close(self._slave)
        os.close(self._master)


@pytest.fixture
def scripted_bus() -> Iterator[Callable[..., tuple[ScriptedBus, SerialBus]]]:
    """Factory: ``scripted_bus(bus_class, parser, answer, retries=0)`` opens a ``bus_class`` (DxlBus or StsBus) at
    1 Mbps with a 50 ms reply timeout on a :class:`ScriptedBus`; both are closed after the test."""
    opened: list[tuple[ScriptedBus, SerialBus]] = []

    def start(bus_class: type[SerialBus], parser: PacketStream[Packet], answer: Callable[[Packet], bytes],
              retries: int = 0) -> tuple[ScriptedBus, SerialBus]:
        fake = ScriptedBus(answer, parser)
        bus = bus_class(fake.port_path, 1_000_000, reply_timeout=0.05, retries=retries)
        bus.open()
        opened.append((fake, bus))
        return fake, bus

    yield start
    for fake, bus in opened:
        bus.close()
        fake.close()
