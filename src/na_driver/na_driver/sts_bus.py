"""Feetech STS/SMS bus access ("Protocol 0") through the vendor SDK ``scservo_sdk``, with fault accounting.

ROS-free. One :class:`StsBus` owns one serial port (the SO-101's USB bus adapter, or the
emulator's pseudo-terminal). Packets are built, sent and checked (0xFF 0xFF header, one-byte
checksum) by the SDK (PyPI feetech-servo-sdk 1.0.0, the SDK LeRobot drives the SO-101 with;
docs/REFERENCES.md, STS3215); this module bounds every transaction in time, retries it a bounded
number of times and counts what went wrong, like :class:`na_driver.dxl_bus.DxlBus` (the shared
half is :class:`na_driver.serial_bus.SerialBus`).

Differences from the DYNAMIXEL bus, and why:

* the SDK's ``GroupSyncRead`` waits for all replies as one byte count and gives up on all of
  them when one servo is silent; here the status packets are taken one by one and dispatched
  by servo ID, so one silent servo costs only its own values;
* the SDK's ``clearPort`` only flushes output; the input buffer is emptied before every request
  here, so a late reply that arrived between transactions is never read as an answer;
* the ERR byte of an STS status packet carries the servo's Status bits (``sts3215.STATUS_*``:
  voltage, angle sensor, overheat, over-current, overload), not an instruction error: the data
  of such a reply is valid and is kept, the bits go to the caller (the arm's health);
* the STS3215 has no Realtime Tick, so a late reply that arrives *during* a later transaction is
  caught by the transaction tags alone: consecutive Sync Reads start ``pad`` bytes early
  (``pad`` = 0 .. TAGS-1), so an answer to one of the previous TAGS-1 Sync Reads has the wrong
  length and is counted in ``late_replies``, never used;
* there is no reboot instruction in Protocol 0.
"""

from __future__ import annotations

import time

import scservo_sdk as scs

from na_driver.serial_bus import BusError, ReplyCheck, SerialBus, ServoReply

# Status packet layout: FF FF ID LEN ERR params... CHK, LEN = number of params + 2.
_ID_INDEX = 2
_LENGTH_INDEX = 3
_ERR_INDEX = 4
_PARAM_INDEX = 5
STATUS_OVERHEAD = 6            # bytes of a status packet without parameters
MODEL_NUMBER_ADDRESS = 3       # two bytes (the SDK's ping reads it after the PING)


class StsBus(SerialBus):
    """scservo_sdk port + Protocol 0 packet handler with bounded, counted transactions."""

    port_factory = scs.PortHandler

    def __init__(self, port: str, baud_rate: int, reply_timeout: float | None = None, retries: int = 1,
                 setup_retries: int = 5) -> None:
        super().__init__(port, baud_rate, reply_timeout, retries, setup_retries)
        self._packet = scs.PacketHandler(0)       # 0: STS/SMS byte order (little-endian words)

    # ---- hooks of the shared Sync Read --------------------------------------------------------
    def _reply_bytes(self, n_servos: int, read_length: int, fast: bool) -> int:
        return n_servos * (STATUS_OVERHEAD + read_length)

    def _send_sync_read(self, port: scs.PortHandler, address: int, length: int, ids: list[int], fast: bool) -> bool:
        if fast:
            raise ValueError("Feetech servos have no Fast Sync Read")
        return self._send(port, self._packet.syncReadTx, address, length, list(ids), len(ids))

    def _refuses(self, error: int) -> bool:
        return False          # ERR holds Status bits; the instruction was carried out

    def _send(self, port: scs.PortHandler, func, *args) -> bool:
        """Empty the input, then send one instruction with the SDK; False when it could not be sent."""
        self._os_call(port.ser.reset_input_buffer)
        self.last_tx_at = time.monotonic()
        tx = self._os_call(func, port, *args)
        if tx != scs.COMM_SUCCESS:
            port.is_using = False
        return tx == scs.COMM_SUCCESS

    # ---- receive -------------------------------------------------------------------------------
    def _receive(self, port: scs.PortHandler, expected: dict[int, int], timeout: float, pad: int = 0,
                 sent_at: float = 0.0, check: ReplyCheck | None = None) -> dict[int, ServoReply]:
        """Collect status packets of the servos in ``expected`` (ID -> parameter bytes, ``pad`` included).

        One packet at a time, dispatched by ID; a packet with a bad checksum (or cut short by the
        timeout) is counted in ``crc_errors`` and the wait goes on for the others.
        """
        port.setPacketTimeoutMillis(timeout * 1000.0)
        replies: dict[int, ServoReply] = {}
        while len(replies) < len(expected):
            packet, result = self._os_call(self._packet.rxPacket, port)
            received_at = time.monotonic()
            if result == scs.COMM_RX_TIMEOUT:
                break
            if result != scs.COMM_SUCCESS:
                self.counters.crc_errors += 1
                if port.isPacketTimeout():
                    break
                continue
            n_params = packet[_LENGTH_INDEX] - 2
            self._take(replies, expected, packet[_ID_INDEX], packet[_ERR_INDEX],
                       bytes(packet[_PARAM_INDEX:_PARAM_INDEX + n_params]), pad, sent_at, received_at, check)
        port.is_using = False
        if len(replies) < len(expected):
            self.counters.timeouts += 1
        return replies

    # ---- transactions --------------------------------------------------------------------------
    def sync_write(self, address: int, length: int, values: dict[int, bytes]) -> None:
        """One Sync Write (no replies): ``values`` maps servo ID to ``length`` bytes."""
        port = self._require_port()
        params = self._sync_write_params(length, values)
        self.counters.transactions += 1
        if not self._send(port, self._packet.syncWriteTxOnly, address, length, params, len(params)):
            raise BusError(f"sync write to address {address} failed")
        port.is_using = False

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
            if not self._send(port, self._packet.readTx, servo_id, address, length):
                continue
            wait = self.setup_timeout(STATUS_OVERHEAD + length, attempt) if timeout is None else timeout
            got = self._receive(port, {servo_id: length}, wait)
            if servo_id in got:
                return got[servo_id]
        raise BusError(f"servo {servo_id}: no valid reply to a read of {length} bytes at address {address} "
                       f"after {retries + 1} attempts")

    def write(self, servo_id: int, address: int, data: bytes, retries: int | None = None) -> int:
        """Write bytes to one servo and wait for its status packet; returns its ERR byte (Status bits).

        Raises :class:`BusError` when the servo never answers (after ``retries``, default the setup
        ones). An STS servo answers a write only at Response Status Level 1 (its default).
        """
        port = self._require_port()
        retries = self.setup_retries if retries is None else retries
        for attempt in range(retries + 1):
            if attempt:
                self.counters.retries += 1
            self.counters.transactions += 1
            if not self._send(port, self._packet.writeTxOnly, servo_id, address, len(data), list(data)):
                continue
            got = self._receive(port, {servo_id: 0}, self.setup_timeout(STATUS_OVERHEAD, attempt))
            if servo_id in got:
                return got[servo_id].error
        raise BusError(f"servo {servo_id}: write at address {address} was not acknowledged after {retries + 1} "
                       f"attempts")

    def ping(self, servo_id: int) -> int | None:
        """Model number of ``servo_id`` (a read of address 3, as the SDK's ping does), or None when it is silent."""
        try:
            data = self.read(servo_id, MODEL_NUMBER_ADDRESS, 2).data
        except BusError:
            return None
        return data[0] | (data[1] << 8)
