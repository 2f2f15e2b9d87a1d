"""A Feetech STS bus of emulated STS3215 servos on one pseudo-terminal (ROS-free).

A client (the Feetech SDK ``scservo_sdk`` as LeRobot drives an SO-101, or anything that speaks
the STS protocol, :mod:`na_sim.protocol0`) opens ``port_path`` like the arm's USB bus adapter.
The bus thread (:class:`na_sim.pty_bus.PtyBus`) parses instruction packets, lets every addressed
:class:`~na_sim.sts_registers.StsServoRegisters` execute them and writes the status packets
back. What the firmware does, and our choices where the public sources (docs/REFERENCES.md,
STS3215) are silent:

* a packet with a bad checksum is ignored, no reply (as real servos do);
* PING is answered with an empty status packet (the SDK's ``ping`` then reads the model number
  at address 3). A broadcast PING is answered by the one servo on the bus, from its own ID; with
  several servos on the bus their replies would collide on the wire, so the emulator sends none;
* READ, SYNC_READ and PING are always answered; WRITE, REG_WRITE and ACTION only at Response
  Status Level 1 (the level after the instruction ran) and never for the broadcast ID; SYNC_WRITE
  never;
* SYNC_READ (0x82): one normal status packet per servo, in the order of the instruction's ID
  list, each after the previous one has left the wire plus the servo's Return Delay; an ID
  nobody has is skipped (the client times out on it);
* REG_WRITE stores the write and sets Async Write Flag (64); ACTION applies it and clears the
  flag; an ACTION with nothing registered does nothing;
* the ERR byte of every status packet is the servo's Status (65) bits (0x00 when healthy);
* a status packet carries the ID the instruction addressed (a write that changes the ID is
  answered from the old ID);
* malformed and unknown instructions are ignored (counted in ``stats``);
* timing: Return Delay Time (2 µs per unit) in real time and, with ``wire_time``, 10 bit times
  per byte at ``baud_rate`` (1 Mbps, the STS default). The Baud Rate register is stored, not
  enforced.

Faults (dropped, late or corrupted status packets, a stalled servo, a forced error trip) come
from the same :class:`~na_sim.faults.DxlFaultInjector` as the DYNAMIXEL bus; a trip sets the
injector's ``trip_error_bits`` as Status bits (use ``sts3215.STATUS_*``) and switches torque off.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import ClassVar

from na_description import sts3215
from na_sim import protocol0 as p0
from na_sim.faults import DxlFaultInjector, DxlFaults
from na_sim.pty_bus import PtyBus
from na_sim.sts_registers import StsServoRegisters

WriteHook = Callable[[StsServoRegisters, int, bytes], None]
ServoHook = Callable[[StsServoRegisters], None]

_ALWAYS_ANSWERED = {p0.PING, p0.READ, p0.SYNC_READ}


class StsBusEmulator(PtyBus[p0.Packet, StsServoRegisters]):
    """Serves a list of :class:`StsServoRegisters` on one pty; ``start()``/``stop()`` run its thread.

    ``on_write(registers, address, data)`` is called after every write a servo executed (Write,
    Action of a Reg Write, Sync Write) so the physics can react, e.g. to Torque Enable;
    ``on_read(registers)`` before every Read and each servo's part of a Sync Read, and
    ``after_packets`` as in :mod:`na_sim.pty_bus`.
    """

    RETURN_DELAY_UNIT_S = sts3215.RETURN_DELAY_UNIT_S
    HOLDS_LATE_REPLIES = False      # a late reply goes out after its delay, the bus thread waiting for it
    FRAMING_BYTES = p0.FRAMING_BYTES
    CHECK_BYTES = p0.CHECK_BYTES
    _status_checks = staticmethod(p0.status_checks)
    _check_holds = staticmethod(p0.check_holds)

    def __init__(self, servos: Sequence[StsServoRegisters], *, baud_rate: int = 1_000_000, wire_time: bool = False,
                 faults: DxlFaults | DxlFaultInjector | None = None, on_write: WriteHook | None = None,
                 on_read: ServoHook | None = None, after_packets: Callable[[], None] | None = None) -> None:
        super().__init__(p0.PacketParser(), servos, baud_rate=baud_rate, wire_time=wire_time, faults=faults,
                         on_read=on_read, on_write=on_write, after_packets=after_packets, name="sts-bus")
        self._registered: dict[int, tuple[int, bytes]] = {}   # id(servo) -> pending Reg Write

    # ---- dispatch ------------------------------------------------------------------------------
    def _handle(self, packet: p0.Packet) -> None:
        self.stats["packets"] += 1
        self._instruction_received(len(packet.raw))
        self._apply_forced_trips()
        if not packet.checksum_ok:
            self.stats["checksum_errors"] += 1         # real servos ignore a broken packet
            return
        handler = self._HANDLERS.get(packet.instruction)
        if handler is None:
            self.stats["unknown_instructions"] += 1
            return
        self.stats[p0.INSTRUCTION_NAMES[packet.instruction]] += 1
        handler(self, packet)

    # ---- instructions --------------------------------------------------------------------------
    def _ping(self, packet: p0.Packet) -> None:
        if packet.is_broadcast:
            servos = self._live()
            if len(servos) != 1:
                self.stats["broadcast_ping_collisions"] += len(servos) > 1
                return
            self._reply(servos[0], servos[0].servo_id, p0.PING)
            return
        for servo in self._servos_with_id(packet.servo_id):
            self._reply(servo, packet.servo_id, p0.PING)

    def _read(self, packet: p0.Packet) -> None:
        if packet.is_broadcast or len(packet.params) != 2:
            self.stats["malformed"] += not packet.is_broadcast
            return
        address, length = packet.params
        for servo in self._servos_with_id(packet.servo_id):
            self._reply(servo, packet.servo_id, p0.READ, self._read_registers(servo, address, length))

    def _write(self, packet: p0.Packet) -> None:
        if len(packet.params) < 2:
            self.stats["malformed"] += 1
            return
        for servo in self._addressed(packet):
            self._apply_write(servo, packet.params[0], bytes(packet.params[1:]))
            self._reply(servo, packet.servo_id, p0.WRITE, broadcast=packet.is_broadcast)

    def _reg_write(self, packet: p0.Packet) -> None:
        if len(packet.params) < 2:
            self.stats["malformed"] += 1
            return
        for servo in self._addressed(packet):
            self._registered[id(servo)] = (packet.params[0], bytes(packet.params[1:]))
            servo.set("async_write_flag", 1)
            self._reply(servo, packet.servo_id, p0.REG_WRITE, broadcast=packet.is_broadcast)

    def _action(self, packet: p0.Packet) -> None:
        for servo in self._addressed(packet):
            pending = self._registered.pop(id(servo), None)
            if pending is not None:
                servo.set("async_write_flag", 0)
                self._apply_write(servo, *pending)
            self._reply(servo, packet.servo_id, p0.ACTION, broadcast=packet.is_broadcast)

    def _sync_read(self, packet: p0.Packet) -> None:
        if len(packet.params) < 3:
            self.stats["malformed"] += 1
            return
        address, length = packet.params[0], packet.params[1]
        for servo_id in packet.params[2:]:
            for servo in self._servos_with_id(servo_id):
                self._reply(servo, servo_id, p0.SYNC_READ, self._read_registers(servo, address, length))

    def _sync_write(self, packet: p0.Packet) -> None:
        if len(packet.params) < 2:
            self.stats["malformed"] += 1
            return
        address, length = packet.params[0], packet.params[1]
        body = packet.params[2:]
        if length == 0 or not body or len(body) % (length + 1):
            self.stats["malformed"] += 1
            return
        for offset in range(0, len(body), length + 1):
            for servo in self._servos_with_id(body[offset]):
                self._apply_write(servo, address, bytes(body[offset + 1: offset + 1 + length]))

    _HANDLERS: ClassVar[dict[int, Callable[[StsBusEmulator, p0.Packet], None]]] = {
        p0.PING: _ping, p0.READ: _read, p0.WRITE: _write, p0.REG_WRITE: _reg_write, p0.ACTION: _action,
        p0.SYNC_READ: _sync_read, p0.SYNC_WRITE: _sync_write,
    }

    # ---- helpers -------------------------------------------------------------------------------
    def _live(self) -> list[StsServoRegisters]:
        """Servos that are not stalled by an injected fault (a stalled servo neither acts nor answers)."""
        return [s for s in self.servos if not self.injector.is_stalled(s.servo_id, self.elapsed_s)]

    def _servos_with_id(self, servo_id: int) -> list[StsServoRegisters]:
        return [s for s in self._live() if s.servo_id == servo_id]

    def _addressed(self, packet: p0.Packet) -> list[StsServoRegisters]:
        return self._live() if packet.is_broadcast else self._servos_with_id(packet.servo_id)

    def _apply_forced_trips(self) -> None:
        for servo in self.servos:
            if self.injector.trip_due(servo.servo_id, self.elapsed_s):
                with servo.lock:
                    servo.set("status", servo.get("status") | self.injector.faults.trip_error_bits)
                    servo.set("torque_enable", sts3215.TORQUE_OFF)

    def _apply_write(self, servo: StsServoRegisters, address: int, data: bytes) -> None:
        servo.write(address, data)
        self._call_hook("on_write", self.on_write, servo, address, data)

    def _reply(self, servo: StsServoRegisters, reply_id: int, instruction: int, params: bytes = b"",
               broadcast: bool = False) -> None:
        if broadcast:
            return
        if instruction not in _ALWAYS_ANSWERED and servo.get("response_status_level") == 0:
            return
        self._send(servo, p0.build_status(reply_id, servo.error_bits, params))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m na_sim.sts_emulator --ids 1 2 3 4 5 6``: serve servos at rest on a pty until stdin
    closes or SIGTERM/SIGINT; prints the port path on the first line (for Feetech tools and tests)."""
    parser = argparse.ArgumentParser(prog="python -m na_sim.sts_emulator", description=main.__doc__)
    parser.add_argument("--ids", type=int, nargs="+", default=[1, 2, 3, 4, 5, 6], help="servo IDs (0..253)")
    parser.add_argument("--wire-time", action="store_true", help="add 10 bit times per byte at 1 Mbps")
    args = parser.parse_args(argv)
    try:
        servos = [StsServoRegisters(servo_id) for servo_id in args.ids]
    except ValueError as exc:
        parser.error(str(exc))
    done = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: done.set())
    threading.Thread(target=lambda: (sys.stdin.read(), done.set()), daemon=True).start()
    with StsBusEmulator(servos, wire_time=args.wire_time) as bus:
        print(bus.port_path, flush=True)
        done.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
