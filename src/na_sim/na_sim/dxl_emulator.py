"""A DYNAMIXEL Protocol 2.0 bus of emulated XM430 servos on one pseudo-terminal (ROS-free).

A client (the real dynamixel-sdk, or anything that speaks Protocol 2.0) opens ``port_path``
like a U2D2 serial port. The bus thread (:class:`na_sim.pty_bus.PtyBus`) parses instruction
packets, lets every addressed ``ServoRegisters`` execute them and writes the status packets back,
honouring Status Return Level, Return Delay Time (real time) and, optionally, the wire time of
every byte at the baud rate. Behaviour follows the ROBOTIS e-manual, Protocol 2.0
(docs/REFERENCES.md, Protocol 2.0); choices where the manual is silent are listed in the package
README ("Servo bus emulator").

The emulator is also each servo's clock: Realtime Tick (address 120, ms, wraps at 32767) is set
from the emulator's monotonic clock, with a per-servo phase, whenever a servo serves a read. It
runs the Bus Watchdog of every servo (``ServoRegisters.check_watchdog``) between packets.
Fast Sync/Bulk Read are answered only by servos whose firmware has them (``firmware_version``).
``on_read(registers)`` runs under the servo's lock right before a read is served: tests use it
to make registers move on every read (``na_sim.moving_truth``).

The bus is half-duplex: a Sync/Bulk/Fast Read reply that would go out while the host has
already sent its next instruction packet collides with it and is lost (``stats["collisions"]``).
Real servos answer within microseconds, so this happens only when the host gives up too early or
when this emulator falls behind its input on a loaded machine; without it, a lagging emulator
would answer requests the host has abandoned, with values sampled after the host's newer request
was sent. (Single-servo replies are exempt: their host timeouts are long, and an emulator that
lags behind them on a loaded machine should still let a driver start.)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import ClassVar

from na_description import xm430
from na_sim import protocol2 as p2
from na_sim.faults import DxlFaultInjector, DxlFaults
from na_sim.pty_bus import PtyBus
from na_sim.servo_registers import (
    ACCESS_ERROR,
    CRC_ERROR,
    DATA_LENGTH_ERROR,
    DATA_RANGE_ERROR,
    INSTRUCTION_ERROR,
    RESET_ALL,
    RESULT_FAIL,
    ProtocolError,
    ServoRegisters,
)

LOG = logging.getLogger(__name__)

WriteHook = Callable[[ServoRegisters, int, bytes], None]
ServoHook = Callable[[ServoRegisters], None]

_WATCHDOG_LATE_S = 1e-4             # wake this long after a Bus Watchdog deadline, so that it has passed
TICK_WRAP = 32768                   # Realtime Tick counts 0 .. 32767 ms (e-manual)

# Status Return Level (address 68): which instructions get a status packet (e-manual).
_ANSWERED_AT_LEVEL_1 = {p2.READ, p2.SYNC_READ, p2.BULK_READ, p2.FAST_SYNC_READ, p2.FAST_BULK_READ}


class DxlBusEmulator(PtyBus[p2.Packet, ServoRegisters]):
    """Serves a list of ``ServoRegisters`` on one pty; ``start()``/``stop()`` run its thread.

    ``on_write(registers, address, data)`` is called after every successful write (Write,
    Action of a Reg Write, Sync/Bulk Write) so the physics can react, e.g. to Torque Enable;
    ``on_reboot`` and ``on_clear`` after a Reboot and a multi-turn Clear; ``on_read`` and
    ``after_packets`` as in :mod:`na_sim.pty_bus`.
    """

    RETURN_DELAY_UNIT_S = xm430.RETURN_DELAY_UNIT_S
    FRAMING_BYTES = p2.FRAMING_BYTES
    CHECK_BYTES = p2.CHECK_BYTES
    _status_checks = staticmethod(p2.status_checks)
    _check_holds = staticmethod(p2.check_holds)

    def __init__(self, servos: Sequence[ServoRegisters], *, baud_rate: int = 1_000_000, wire_time: bool = False,
                 faults: DxlFaults | DxlFaultInjector | None = None, on_write: WriteHook | None = None,
                 on_reboot: ServoHook | None = None, on_clear: ServoHook | None = None,
                 on_read: ServoHook | None = None, after_packets: Callable[[], None] | None = None,
                 answer_crc_errors: bool = True) -> None:
        super().__init__(p2.PacketParser(), servos, baud_rate=baud_rate, wire_time=wire_time, faults=faults,
                         on_read=on_read, on_write=on_write, after_packets=after_packets, name="dxl-bus")
        self.on_reboot = on_reboot
        self.on_clear = on_clear
        self.answer_crc_errors = answer_crc_errors
        self._registered: dict[int, tuple[int, bytes]] = {}   # id(servo) -> pending Reg Write
        # Each servo's own clock: a fixed phase so that two servos' ticks differ, as on a real bus.
        self._tick_phase_ms = {id(s): (s.servo_id * 7919) % TICK_WRAP for s in self.servos}

    # ---- dispatch ------------------------------------------------------------------------------
    def _handle(self, packet: p2.Packet) -> None:
        if packet.instruction == p2.STATUS:
            return                                # a status packet (ours, or another device's): not for us
        self.stats["packets"] += 1
        self._instruction_received(len(packet.raw))
        self._apply_forced_trips()
        if not packet.checksum_ok:
            self.stats["crc_errors"] += 1
            self._answer_crc_error(packet)
            return
        now = time.monotonic()
        for servo in self._targets(packet):
            servo.instruction_received(now)
        self.stats[p2.INSTRUCTION_NAMES.get(packet.instruction, "unknown")] += 1
        handler = self._HANDLERS.get(packet.instruction)
        if handler is None:
            for servo in self._addressed(packet):
                self._reply(servo, packet.instruction, INSTRUCTION_ERROR)
            return
        handler(self, packet)

    # ---- instructions --------------------------------------------------------------------------
    def _ping(self, packet: p2.Packet) -> None:
        servos = self._addressed(packet)
        if packet.is_broadcast:
            servos = sorted(servos, key=lambda s: s.servo_id)    # broadcast ping: answers in ID order
        for servo in servos:
            info = servo.read(0, 2) + servo.read(xm430.REGISTERS["firmware_version"].address, 1)
            self._reply(servo, p2.PING, 0, info)

    def _read(self, packet: p2.Packet) -> None:
        if packet.is_broadcast:
            return
        for servo in self._addressed(packet):
            if len(packet.params) != 4:
                self._reply(servo, p2.READ, DATA_LENGTH_ERROR)
                continue
            address, length = _word(packet.params, 0), _word(packet.params, 2)
            self._reply_read(servo, p2.READ, address, length)

    def _write(self, packet: p2.Packet) -> None:
        for servo in self._addressed(packet):
            if len(packet.params) < 3:
                self._reply(servo, p2.WRITE, DATA_LENGTH_ERROR, broadcast=packet.is_broadcast)
                continue
            error = self._apply_write(servo, _word(packet.params, 0), packet.params[2:])
            self._reply(servo, p2.WRITE, error, broadcast=packet.is_broadcast)

    def _reg_write(self, packet: p2.Packet) -> None:
        for servo in self._addressed(packet):
            error = DATA_LENGTH_ERROR if len(packet.params) < 3 else 0
            if not error:
                address, data = _word(packet.params, 0), bytes(packet.params[2:])
                try:
                    servo.check_write(address, data)
                    self._registered[id(servo)] = (address, data)
                    servo.set("registered_instruction", 1)
                except ProtocolError as exc:
                    error = exc.code
            self._reply(servo, p2.REG_WRITE, error, broadcast=packet.is_broadcast)

    def _action(self, packet: p2.Packet) -> None:
        for servo in self._addressed(packet):
            pending = self._registered.pop(id(servo), None)
            if pending is None:
                # e-manual: Action without a registered instruction is an Instruction Error.
                self._reply(servo, p2.ACTION, INSTRUCTION_ERROR, broadcast=packet.is_broadcast)
                continue
            servo.set("registered_instruction", 0)
            error = self._apply_write(servo, *pending)
            self._reply(servo, p2.ACTION, error, broadcast=packet.is_broadcast)

    def _factory_reset(self, packet: p2.Packet) -> None:
        mode = packet.params[0] if packet.params else RESET_ALL
        for servo in self._addressed(packet):
            if packet.is_broadcast and mode == RESET_ALL:
                continue        # e-manual: a broadcast Factory Reset 0xFF is not executed
            if servo.torque_enabled:
                self._reply(servo, p2.FACTORY_RESET, ACCESS_ERROR, broadcast=packet.is_broadcast)
                continue
            try:
                servo.factory_reset(mode)     # validate before answering; the answer carries the old ID
            except ProtocolError as exc:
                self._reply(servo, p2.FACTORY_RESET, exc.code, broadcast=packet.is_broadcast)
                continue
            self._registered.pop(id(servo), None)
            self._reply_as(packet, servo)

    def _reply_as(self, packet: p2.Packet, servo: ServoRegisters) -> None:
        """Answer from the ID the instruction addressed (the servo may have changed its own ID)."""
        if packet.is_broadcast or servo.get("status_return_level") < 2:
            return
        self._send(servo, p2.build_status(packet.servo_id, self._alert(servo)))

    def _reboot(self, packet: p2.Packet) -> None:
        for servo in self._addressed(packet):
            self._reply(servo, p2.REBOOT, 0, broadcast=packet.is_broadcast)   # answers, then reboots
            servo.reboot()
            self._registered.pop(id(servo), None)
            self._call_hook("on_reboot", self.on_reboot, servo)

    def _clear(self, packet: p2.Packet) -> None:
        for servo in self._addressed(packet):
            if bytes(packet.params) != p2.CLEAR_MULTI_TURN_PARAMS:
                self._reply(servo, p2.CLEAR, DATA_RANGE_ERROR, broadcast=packet.is_broadcast)
                continue
            if servo.get("moving"):
                # e-manual: Clear is executed only while the servo is stopped.
                self._reply(servo, p2.CLEAR, RESULT_FAIL, broadcast=packet.is_broadcast)
                continue
            with servo.lock:
                servo.set("present_position", servo.get("present_position") % xm430.PULSES_PER_REV)
            self._call_hook("on_clear", self.on_clear, servo)
            self._reply(servo, p2.CLEAR, 0, broadcast=packet.is_broadcast)

    def _sync_read(self, packet: p2.Packet) -> None:
        if len(packet.params) < 5:
            return
        address, length = _word(packet.params, 0), _word(packet.params, 2)
        self._read_all(p2.SYNC_READ, [(sid, address, length) for sid in packet.params[4:]])

    def _bulk_read(self, packet: p2.Packet) -> None:
        self._read_all(p2.BULK_READ, _bulk_read_entries(packet.params))

    def _read_all(self, instruction: int, requests: list[tuple[int, int, int]]) -> None:
        """Sync/Bulk Read: every addressed servo samples its registers when the instruction arrives (they all
        receive it at once), then the replies go out one after the other in the order of the IDs."""
        sampled = []
        for servo_id, address, length in requests:
            for servo in self._servos_with_id(servo_id):
                try:
                    sampled.append((servo, 0, self._read_registers(servo, address, length)))
                except ProtocolError as exc:
                    sampled.append((servo, exc.code, b""))
        for servo, error, data in sampled:
            if not self._silent(servo, instruction):
                self._send(servo, p2.build_status(servo.servo_id, self._alert(servo) | error, data), collide=True)

    def _fast_sync_read(self, packet: p2.Packet) -> None:
        if len(packet.params) < 5:
            return
        address, length = _word(packet.params, 0), _word(packet.params, 2)
        self._fast_read(packet.instruction, [(sid, address, length) for sid in packet.params[4:]])

    def _fast_bulk_read(self, packet: p2.Packet) -> None:
        self._fast_read(packet.instruction, _bulk_read_entries(packet.params))

    def _fast_read(self, instruction: int, requests: list[tuple[int, int, int]]) -> None:
        """One status packet for all servos (e-manual, Fast Sync/Bulk Read); a silent servo is left out."""
        entries, first = [], None
        for servo_id, address, length in requests:
            for servo in self._servos_with_id(servo_id):
                if self._silent(servo, instruction) or not servo.answers_fast_sync_read:
                    continue        # older firmware does not know the instruction (broadcast: no answer)
                try:
                    entries.append((self._alert(servo), servo_id, self._read_registers(servo, address, length)))
                except ProtocolError as exc:
                    entries.append((self._alert(servo) | exc.code, servo_id, bytes(length)))
                first = first or servo
        if first is not None:
            self._send(first, p2.build_fast_status(entries), collide=True,
                       checks=p2.fast_status_checks(len(data) for _, _, data in entries))

    def _sync_write(self, packet: p2.Packet) -> None:
        if len(packet.params) < 4:
            return
        address, length = _word(packet.params, 0), _word(packet.params, 2)
        body = packet.params[4:]
        if length == 0 or len(body) % (length + 1):
            self.stats["malformed"] += 1
            return
        for offset in range(0, len(body), length + 1):
            for servo in self._servos_with_id(body[offset]):
                self._apply_write(servo, address, bytes(body[offset + 1: offset + 1 + length]))

    def _bulk_write(self, packet: p2.Packet) -> None:
        params, offset = packet.params, 0
        while offset + 5 <= len(params):
            servo_id, address, length = params[offset], _word(params, offset + 1), _word(params, offset + 3)
            data = bytes(params[offset + 5: offset + 5 + length])
            offset += 5 + length
            if len(data) != length:
                self.stats["malformed"] += 1
                return
            for servo in self._servos_with_id(servo_id):
                self._apply_write(servo, address, data)

    _HANDLERS: ClassVar[dict[int, Callable[[DxlBusEmulator, p2.Packet], None]]] = {
        p2.PING: _ping, p2.READ: _read, p2.WRITE: _write, p2.REG_WRITE: _reg_write, p2.ACTION: _action,
        p2.FACTORY_RESET: _factory_reset, p2.REBOOT: _reboot, p2.CLEAR: _clear, p2.SYNC_READ: _sync_read,
        p2.SYNC_WRITE: _sync_write, p2.BULK_READ: _bulk_read, p2.BULK_WRITE: _bulk_write,
        p2.FAST_SYNC_READ: _fast_sync_read, p2.FAST_BULK_READ: _fast_bulk_read,
    }

    # ---- helpers -------------------------------------------------------------------------------
    def _servos_with_id(self, servo_id: int) -> list[ServoRegisters]:
        """Servos answering to ``servo_id``, stalled ones removed (a stalled servo neither acts nor answers)."""
        return [s for s in self.servos if s.servo_id == servo_id and not self._stalled(s)]

    def _targets(self, packet: p2.Packet) -> list[ServoRegisters]:
        """Live servos an instruction is for, Sync/Bulk lists included (what restarts their Bus Watchdog)."""
        if not packet.is_broadcast:
            return self._servos_with_id(packet.servo_id)
        params, ids = packet.params, None
        if packet.instruction in (p2.SYNC_READ, p2.FAST_SYNC_READ):
            ids = set(params[4:])
        elif packet.instruction == p2.SYNC_WRITE and len(params) >= 4 and _word(params, 2):
            ids = set(params[4::_word(params, 2) + 1])
        elif packet.instruction in (p2.BULK_READ, p2.FAST_BULK_READ):
            ids = {entry[0] for entry in _bulk_read_entries(params)}
        elif packet.instruction == p2.BULK_WRITE:
            ids, offset = set(), 0
            while offset + 5 <= len(params):
                ids.add(params[offset])
                offset += 5 + _word(params, offset + 3)
        live = self._addressed(packet)
        return live if ids is None else [s for s in live if s.servo_id in ids]

    def _poll_timeout(self, timeout: float) -> float:
        """A running Bus Watchdog must expire on time: the bus thread wakes when the first one is due (each
        instruction moves the deadlines, so the wait is worked out again after every packet)."""
        deadlines = [d for d in (s.watchdog_deadline() for s in self.servos) if d is not None]
        if not deadlines:
            return timeout
        return min(timeout, max(0.0, min(deadlines) - time.monotonic()) + _WATCHDOG_LATE_S)

    def _between_packets(self) -> bool:
        """Runs every servo's Bus Watchdog while the line is between packets; True when one expired."""
        now, expired = time.monotonic(), False
        for servo in self.servos:
            if servo.check_watchdog(now):
                self.stats["watchdog_expired"] += 1
                LOG.info("servo %d: Bus Watchdog expired, holding", servo.servo_id)
                expired = True
        return expired

    def _read_registers(self, servo: ServoRegisters, address: int, length: int) -> bytes:
        """The servo's clock into Realtime Tick first, then what every bus does for a read."""
        with servo.lock:
            elapsed_ms = (time.monotonic() - self._started_at) * 1000.0
            servo.set("realtime_tick", int(elapsed_ms + self._tick_phase_ms.get(id(servo), 0)) % TICK_WRAP)
            return super()._read_registers(servo, address, length)

    def _addressed(self, packet: p2.Packet) -> list[ServoRegisters]:
        """Servos an instruction is for (all live ones for the broadcast ID)."""
        if packet.is_broadcast:
            return [s for s in self.servos if not self._stalled(s)]
        return self._servos_with_id(packet.servo_id)

    def _stalled(self, servo: ServoRegisters) -> bool:
        return self.injector.is_stalled(servo.servo_id, self.elapsed_s)

    def _apply_forced_trips(self) -> None:
        for servo in self.servos:
            if self.injector.trip_due(servo.servo_id, self.elapsed_s):
                with servo.lock:
                    servo.set("hardware_error_status",
                              servo.get("hardware_error_status") | self.injector.faults.trip_error_bits)
                    servo.set("torque_enable", 0)

    def _apply_write(self, servo: ServoRegisters, address: int, data: bytes) -> int:
        """Write and run the hook; returns the Protocol 2.0 error number (0 = done)."""
        try:
            servo.write(address, data)
        except ProtocolError as exc:
            self.stats["write_errors"] += 1
            return exc.code
        self._call_hook("on_write", self.on_write, servo, address, data)
        return 0

    def _answer_crc_error(self, packet: p2.Packet) -> None:
        """A broken instruction is answered with ERR=3 only by a servo whose own ID it carries."""
        if not self.answer_crc_errors or packet.is_broadcast:
            return
        for servo in self._servos_with_id(packet.servo_id):
            if servo.get("status_return_level") > 0:
                self._send(servo, p2.build_status(servo.servo_id, self._alert(servo) | CRC_ERROR))

    @staticmethod
    def _alert(servo: ServoRegisters) -> int:
        return xm430.STATUS_ALERT if servo.alert else 0

    @staticmethod
    def _silent(servo: ServoRegisters, instruction: int) -> bool:
        level = servo.get("status_return_level")
        if instruction == p2.PING:
            return False
        return level == 0 or (level == 1 and instruction not in _ANSWERED_AT_LEVEL_1)

    def _reply_read(self, servo: ServoRegisters, instruction: int, address: int, length: int) -> None:
        try:
            data = self._read_registers(servo, address, length)
        except ProtocolError as exc:
            self._reply(servo, instruction, exc.code)
            return
        self._reply(servo, instruction, 0, data)

    def _reply(self, servo: ServoRegisters, instruction: int, error: int, params: bytes = b"",
               broadcast: bool = False) -> None:
        if broadcast or self._silent(servo, instruction):
            return
        self._send(servo, p2.build_status(servo.servo_id, self._alert(servo) | error, params))



def _word(params: bytes, offset: int) -> int:
    return int.from_bytes(params[offset: offset + 2], "little")


def _bulk_read_entries(params: bytes) -> list[tuple[int, int, int]]:
    """Bulk Read parameters: (ID, address L/H, length L/H) per servo."""
    return [(params[i], _word(params, i + 1), _word(params, i + 3)) for i in range(0, len(params) - 4, 5)]
