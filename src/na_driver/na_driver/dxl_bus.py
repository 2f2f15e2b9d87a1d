"""DYNAMIXEL Protocol 2.0 bus access through dynamixel-sdk, with fault accounting.

ROS-free. One :class:`DxlBus` owns one serial port (a USB adapter such as U2D2, or the
emulator's pseudo-terminal). Every transaction is bounded in time and retried a bounded number
of times; a reply that is missing, corrupt (bad CRC, broken framing, wrong length) or carries a
status error never yields a value. Counters record what went wrong so that the driver can
report it.

The SDK's own receive timeout for a Sync Read is (11 + length) x n_servos milliseconds
(170 ms for five servos), far above a 10 ms control period, so this module sets its own
timeout after each request and dispatches the replies by servo ID itself (the SDK's
``GroupSyncRead`` stops at the first missing reply and would lose the later ones).

Late replies. Protocol 2.0 status packets carry no sequence number: a reply that missed its
transaction's timeout (a slow USB adapter, a delayed servo) arrives during a later transaction
and looks exactly like an answer to it. The SDK empties the input buffer before every request,
which removes late replies that arrive *between* transactions; for those that arrive after the
next request, every Sync Read is tagged and checked:

* transaction tag: consecutive Sync Reads ask for ``length + pad`` bytes starting ``pad`` bytes
  early, ``pad`` cycling through 0 .. TAGS-1, so a reply to one of the previous TAGS-1 Sync Reads
  has the wrong length (counted in ``late_replies``, never used);
* the caller's ``check(servo_id, data, sent_at, received_at)`` sees every intact reply of the
  right length before it is accepted; the arm driver uses it to compare the servo's Realtime
  Tick with the time the request was sent (``na_driver.reply_clock``), which catches late
  replies of any age. A rejected reply does not end the wait for the servo's real answer;
* a servo answers its requests in order, so an answer to an earlier request (wrong length) that
  arrives after the reply accepted for that servo shows the accepted one was older still: it is
  dropped again (a servo, or an emulator on a loaded machine, working through a backlog).

Fast Sync Read (instruction 0x8A, XM430 firmware 45+) answers all servos in one status packet
(ID 0xFE; per servo ERR, ID, data and a CRC over the packet so far). Segments are taken up to the
first one whose CRC fails, so one corrupted byte does not cost the servos before it.
"""

from __future__ import annotations

import time

import dynamixel_sdk as sdk

from na_description.crc16 import crc16
from na_driver.serial_bus import (  # noqa: F401  (BusError .. SyncReadResult: this module's API too)
    TAGS,
    BusCounters,
    BusError,
    PortLostError,
    PortOpenError,
    ReplyCheck,
    SerialBus,
    ServoReply,
    SyncReadResult,
    default_reply_timeout,
)

# Status packet layout (Protocol 2.0): FF FF FD 00 ID LEN_L LEN_H 0x55 ERR params... CRC_L CRC_H
_STATUS_ID_INDEX = 4
_STATUS_ERR_INDEX = 8
_STATUS_PARAM_INDEX = 9
_STATUS_OVERHEAD = 11          # bytes of a status packet without parameters
_INSTRUCTION_OVERHEAD = 10     # bytes of an instruction packet without parameters
STATUS_ERROR_MASK = 0x7F       # low 7 bits of ERR: the instruction's error number (bit 7 = Alert)
ALERT_BIT = 0x80
_BROADCAST_ID = 0xFE
_FAST_SEGMENT_OVERHEAD = 4     # ERR, ID and CRC of one servo's part of a Fast Sync Read reply
_FAST_PARAM_INDEX = 8          # first byte after FF FF FD 00 FE LEN_L LEN_H 0x55

class DxlBus(SerialBus):
    """dynamixel-sdk port + Protocol 2.0 packet handler with bounded, counted transactions."""

    port_factory = sdk.PortHandler

    def __init__(self, port: str, baud_rate: int, reply_timeout: float | None = None, retries: int = 1,
                 setup_retries: int = 5) -> None:
        super().__init__(port, baud_rate, reply_timeout, retries, setup_retries)
        self._packet = sdk.PacketHandler(2.0)

    # ---- receive -------------------------------------------------------------------------
    def _receive(self, port: sdk.PortHandler, expected: dict[int, int], timeout: float, pad: int = 0,
                 sent_at: float = 0.0, check: ReplyCheck | None = None) -> dict[int, ServoReply]:
        """Collect status packets from the servos in ``expected`` (ID -> parameter bytes, ``pad`` included).

        Dispatches by ID, so one lost reply does not cost the others; takes the parts of a Fast Sync
        Read reply too. Counts corrupt packets, status errors and late replies. Stops when all
        replies are in or the timeout has passed. Returned data has the ``pad`` bytes removed.
        """
        port.setPacketTimeoutMillis(timeout * 1000.0)
        deadline = time.monotonic() + timeout
        replies: dict[int, ServoReply] = {}
        while len(replies) < len(expected):
            packet, result = self._os_call(self._packet.rxPacket, port, True)
            received_at = time.monotonic()
            if result == sdk.COMM_RX_TIMEOUT:
                break
            fast = len(packet) > _STATUS_ID_INDEX and packet[_STATUS_ID_INDEX] == _BROADCAST_ID
            if result != sdk.COMM_SUCCESS:
                # COMM_RX_CORRUPT: bad CRC, or a packet cut short by the timeout.
                self.counters.crc_errors += 1
                parts = self._fast_parts(packet, expected, partial=True) if fast else []
            elif fast:
                parts = self._fast_parts(packet, expected, partial=False)
            else:
                packet = self._packet.removeStuffing(packet)
                # LEN counts INST, ERR, parameters and CRC.
                n_params = (packet[5] | (packet[6] << 8)) - 4
                parts = [(packet[_STATUS_ID_INDEX], packet[_STATUS_ERR_INDEX],
                          bytes(packet[_STATUS_PARAM_INDEX:_STATUS_PARAM_INDEX + n_params]))]
            for servo_id, error, params in parts:
                self._take(replies, expected, servo_id, error, params, pad, sent_at, received_at, check)
            if result != sdk.COMM_SUCCESS and time.monotonic() >= deadline:
                break
        if len(replies) < len(expected):
            self.counters.timeouts += 1
        return replies

    def _fast_parts(self, packet: list[int], expected: dict[int, int], partial: bool) -> list[tuple[int, int, bytes]]:
        """(ID, ERR, data) of each servo in a Fast Sync Read reply whose own CRC holds.

        All servos of one transaction ask for the same length; a packet whose size does not fit that
        length answers another transaction (late). With ``partial`` (the packet CRC failed or the
        packet was cut short) the segments before the first broken one are still good.
        """
        length = next(iter(expected.values()))
        segment = length + _FAST_SEGMENT_OVERHEAD
        declared = (packet[5] | (packet[6] << 8)) - 1 if len(packet) > 6 else 0
        if not partial and (declared <= 0 or declared % segment):
            self.counters.late_replies += 1
            return []
        parts, crc, start = [], crc16(packet[:_FAST_PARAM_INDEX]), _FAST_PARAM_INDEX
        while start + segment <= len(packet):
            body_end = start + segment - 2
            crc = crc16(packet[start:body_end], crc)
            if crc != (packet[body_end] | (packet[body_end + 1] << 8)):
                break
            parts.append((packet[start + 1], packet[start], bytes(packet[start + 2:body_end])))
            crc = crc16(packet[body_end:body_end + 2], crc)
            start += segment
        return parts

    # ---- transactions --------------------------------------------------------------------
    def _reply_bytes(self, n_servos: int, read_length: int, fast: bool) -> int:
        if fast:
            return _FAST_PARAM_INDEX + n_servos * (read_length + _FAST_SEGMENT_OVERHEAD)
        return n_servos * (_STATUS_OVERHEAD + read_length)

    def _send_sync_read(self, port: sdk.PortHandler, address: int, length: int, ids: list[int], fast: bool) -> bool:
        tx = self._os_call(self._packet.syncReadTx, port, address, length, list(ids), len(ids), fast)
        return tx == sdk.COMM_SUCCESS

    def _refuses(self, error: int) -> bool:
        return bool(error & STATUS_ERROR_MASK)

    def sync_write(self, address: int, length: int, values: dict[int, bytes]) -> None:
        """One Sync Write (no replies): ``values`` maps servo ID to ``length`` bytes."""
        port = self._require_port()
        params = self._sync_write_params(length, values)
        self.counters.transactions += 1
        self.last_tx_at = time.monotonic()
        tx = self._os_call(self._packet.syncWriteTxOnly, port, address, length, params, len(params))
        port.is_using = False
        if tx != sdk.COMM_SUCCESS:
            raise BusError(f"sync write to address {address} failed: {self._packet.getTxRxResult(tx)}")

    def read(self, servo_id: int, address: int, length: int, retries: int | None = None,
             timeout: float | None = None) -> ServoReply:
        """Read ``length`` bytes of one servo; raises :class:`BusError` after the retries.

        Defaults are the generous start-up ones; the loop passes its own small ``retries``/``timeout``.
        """
        port = self._require_port()
        retries = self.setup_retries if retries is None else retries
        for attempt in range(retries + 1):
            if attempt:
                self.counters.retries += 1
            self.counters.transactions += 1
            self.last_tx_at = time.monotonic()
            tx = self._os_call(self._packet.readTx, port, servo_id, address, length)
            if tx != sdk.COMM_SUCCESS:
                port.is_using = False
                continue
            wait = self.setup_timeout(_STATUS_OVERHEAD + length, attempt) if timeout is None else timeout
            got = self._receive(port, {servo_id: length}, wait)
            if servo_id in got:
                return got[servo_id]
        raise BusError(f"servo {servo_id}: no valid reply to a read of {length} bytes at address {address} "
                       f"after {retries + 1} attempts")

    def write(self, servo_id: int, address: int, data: bytes, retries: int | None = None) -> int:
        """Write bytes to one servo and wait for its status; returns the ERR byte.

        Raises :class:`BusError` when the servo reports an instruction error (e.g. access error
        for an EEPROM write with torque on) or never answers (after ``retries``, default the setup ones).
        """
        port = self._require_port()
        last_error = "no reply"
        retries = self.setup_retries if retries is None else retries
        for attempt in range(retries + 1):
            if attempt:
                self.counters.retries += 1
            self.counters.transactions += 1
            self.last_tx_at = time.monotonic()
            tx = self._os_call(self._packet.writeTxOnly, port, servo_id, address, len(data), list(data))
            port.is_using = False
            if tx != sdk.COMM_SUCCESS:
                last_error = self._packet.getTxRxResult(tx)
                continue
            status = self._receive_status(port, servo_id, attempt)
            if status is None:
                continue
            if status & STATUS_ERROR_MASK:
                raise BusError(f"servo {servo_id}: write of {len(data)} bytes at address {address} refused: "
                               f"{self._packet.getRxPacketError(status)}")
            return status
        raise BusError(f"servo {servo_id}: write at address {address} failed after {retries + 1} attempts "
                       f"({last_error})")

    def _receive_status(self, port: sdk.PortHandler, servo_id: int, attempt: int = 0) -> int | None:
        """Wait for the parameter-less status of ``servo_id``; its ERR byte, or None if none came."""
        port.setPacketTimeoutMillis(self.setup_timeout(_STATUS_OVERHEAD, attempt) * 1000.0)
        while True:
            packet, result = self._os_call(self._packet.rxPacket, port, False)
            if result == sdk.COMM_RX_TIMEOUT:
                self.counters.timeouts += 1
                return None
            if result != sdk.COMM_SUCCESS:
                self.counters.crc_errors += 1
                if port.isPacketTimeout():
                    return None
                continue
            if packet[_STATUS_ID_INDEX] == servo_id:
                if packet[_STATUS_ERR_INDEX] & STATUS_ERROR_MASK:
                    self.counters.status_errors += 1
                return packet[_STATUS_ERR_INDEX]

    def ping(self, servo_id: int) -> int | None:
        """Model number of ``servo_id``, or None when it does not answer (after the retries)."""
        try:
            reply = self._ping_once(servo_id)
        except BusError:
            return None
        return reply

    def _ping_once(self, servo_id: int) -> int:
        port = self._require_port()
        for attempt in range(self.setup_retries + 1):
            if attempt:
                self.counters.retries += 1
            tx = self._send_without_parameters(port, servo_id, sdk.INST_PING)
            if tx != sdk.COMM_SUCCESS:
                port.is_using = False
                continue
            got = self._receive(port, {servo_id: 3}, self.setup_timeout(_STATUS_OVERHEAD + 3, attempt))
            if servo_id in got:
                data = got[servo_id].data
                return data[0] | (data[1] << 8)
        raise BusError(f"servo {servo_id} does not answer a ping")

    def _send_without_parameters(self, port, servo_id: int, instruction: int) -> int:
        """Send an instruction packet without parameters (Ping, Reboot: LEN = 3); the SDK's result code."""
        self.counters.transactions += 1
        self.last_tx_at = time.monotonic()
        txpacket = [0] * _INSTRUCTION_OVERHEAD
        txpacket[_STATUS_ID_INDEX] = servo_id
        txpacket[5], txpacket[6], txpacket[7] = 3, 0, instruction
        return self._os_call(self._packet.txPacket, port, txpacket)

    def reboot(self, servo_id: int) -> None:
        """Reboot one servo (clears a hardware-error trip); raises :class:`BusError` on failure."""
        port = self._require_port()
        for attempt in range(self.setup_retries + 1):
            if attempt:
                self.counters.retries += 1
            tx = self._send_without_parameters(port, servo_id, sdk.INST_REBOOT)
            port.is_using = False
            if tx != sdk.COMM_SUCCESS:
                continue
            status = self._receive_status(port, servo_id)
            if status is not None and not status & STATUS_ERROR_MASK:
                return
        raise BusError(f"servo {servo_id}: reboot was not acknowledged after {self.setup_retries + 1} attempts")
