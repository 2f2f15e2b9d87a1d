"""The protocol-independent half of a servo bus client: port open/close/loss, counters, timeouts, results.

ROS-free. :class:`na_driver.dxl_bus.DxlBus` (DYNAMIXEL Protocol 2.0, dynamixel-sdk) and
:class:`na_driver.sts_bus.StsBus` (Feetech Protocol 0, scservo_sdk) build on :class:`SerialBus`:
both vendor SDKs have the same ``PortHandler`` shape (``baudrate``, ``openPort``, ``ser``,
``closePort``, ``is_using``, ``setPacketTimeoutMillis``), so opening the port, turning an OS
failure into :class:`PortLostError` and the fault counters are written once, here.
"""

from __future__ import annotations

import contextlib
import os
import termios
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import serial

READ_POLL_S = 0.0005           # longest a single port read blocks waiting for bytes
SETUP_TIMEOUT_S = 0.025        # like the SDKs' own default (2 x 16 ms latency timer + 2 ms) rounded down
SETUP_TIMEOUT_MAX_S = 0.4      # a start-up transaction's longest wait, after doublings (5 retries: 1.2 s in all)
TAGS = 3                       # distinct reply lengths of consecutive Sync Reads (transaction tags)

ReplyCheck = Callable[[int, bytes, float, float], "str | None"]
"""(servo ID, data, request sent at, reply received at; time.monotonic()) -> None to accept, else the reason:
"late" (an answer to an earlier request) or "implausible"."""


class BusError(RuntimeError):
    """A bus transaction failed after its retries; the message names the servo and the cause."""


class PortOpenError(BusError):
    """The serial port could not be opened or configured."""


class PortLostError(BusError):
    """The serial port vanished or failed while in use (unplugged adapter, closed pty)."""


@dataclass
class BusCounters:
    """Cumulative fault counters of one bus (never reset while the driver runs)."""

    transactions: int = 0      # request/reply exchanges started
    timeouts: int = 0          # transactions that ended by timeout with replies still missing
    crc_errors: int = 0        # replies with a bad CRC/checksum or corrupt framing
    partial_replies: int = 0   # sync reads where some, but not all, servos answered
    status_errors: int = 0     # replies whose ERR byte reported an instruction error
    retries: int = 0           # transactions repeated after a failure
    port_errors: int = 0       # OS-level read/write failures of the port
    late_replies: int = 0      # intact replies rejected as answers to an earlier request (never used)
    implausible_replies: int = 0   # intact replies rejected by the caller's check for another reason
    fast_reads: int = 0        # Sync Reads sent as Fast Sync Read (DYNAMIXEL only)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class ServoReply:
    """The parameters of one good status packet and its ERR byte (its meaning is the servo family's)."""

    data: bytes
    error: int


@dataclass
class SyncReadResult:
    replies: dict[int, ServoReply] = field(default_factory=dict)
    missing: list[int] = field(default_factory=list)
    duration: float = 0.0          # s, bus time of all attempts
    completed: float = 0.0         # time.monotonic() when the last attempt ended
    attempts: int = 0
    fast_replies: int = 0          # replies that came in the Fast Sync Read of the first attempt


def default_reply_timeout(baud_rate: int, reply_bytes: int, usb_latency_s: float = 0.001) -> float:
    """Receive timeout (s) for ``reply_bytes`` of status packets at ``baud_rate``.

    Wire time is 10 bits per byte (8N1). The margin covers the USB adapter's latency timer
    (docs/REFERENCES.md, Protocol 2.0: set it to 1 ms; the FTDI default of 16 ms needs a larger timeout) and scheduling
    jitter of a non-real-time host.
    """
    return reply_bytes * 10.0 / baud_rate + usb_latency_s + 0.0015


class SerialBus:
    """Port handling shared by the vendor-SDK buses; a subclass sets :attr:`port_factory` (the SDK's PortHandler)."""

    port_factory: Callable[[str], Any]

    def __init__(self, port: str, baud_rate: int, reply_timeout: float | None = None, retries: int = 1,
                 setup_retries: int = 5) -> None:
        self.port_name = port
        self.baud_rate = int(baud_rate)
        self.retries = int(retries)               # per-cycle Sync Read
        self.setup_retries = int(setup_retries)   # single-servo reads, writes, pings (not time-critical)
        self._reply_timeout = reply_timeout
        self.counters = BusCounters()
        self._port: Any = None
        self._tag = 0                       # pad of the last Sync Read sent (transaction tag)
        self.last_tx_at = -float("inf")     # time.monotonic() when the last instruction packet was sent

    @property
    def is_open(self) -> bool:
        return self._port is not None and self._port.is_open

    def open(self) -> None:
        """Open and configure the port; raises :class:`PortOpenError` naming the port."""
        if not os.path.exists(self.port_name):
            raise PortOpenError(f"serial port '{self.port_name}' does not exist (is the adapter plugged in?)")
        port = self.port_factory(self.port_name)
        try:
            port.baudrate = self.baud_rate
            if not port.openPort():
                raise PortOpenError(f"serial port '{self.port_name}': baud rate {self.baud_rate} is not supported")
            # The SDKs open the port non-blocking and their receive loops poll it: a spinning thread that
            # starves other Python threads (GIL) and a CPU core. A short blocking read waits in select().
            port.ser.timeout = READ_POLL_S
        except (serial.SerialException, OSError) as exc:
            raise PortOpenError(f"cannot open serial port '{self.port_name}': {exc}") from exc
        self._port = port

    def close(self) -> None:
        if self._port is not None and self._port.is_open:
            with contextlib.suppress(serial.SerialException, OSError):
                self._port.closePort()
        self._port = None

    def reply_timeout(self, reply_bytes: int) -> float:
        """Timeout of the per-cycle transactions."""
        if self._reply_timeout is not None:
            return self._reply_timeout
        return default_reply_timeout(self.baud_rate, reply_bytes)

    def setup_timeout(self, reply_bytes: int, attempt: int = 0) -> float:
        """Timeout of single-servo transactions outside the cycle (start-up, services): generous, they are rare,
        and doubled on each further attempt (up to SETUP_TIMEOUT_MAX_S) so that a host busy with other work does
        not turn a servo that answers late into a failed start-up."""
        return min(max(self.reply_timeout(reply_bytes), SETUP_TIMEOUT_S) * 2 ** attempt,
                   max(SETUP_TIMEOUT_MAX_S, self.reply_timeout(reply_bytes)))

    @staticmethod
    def _sync_write_params(length: int, values: dict[int, bytes]) -> list[int]:
        """Sync Write parameters of both protocols: per servo its ID, then its ``length`` data bytes."""
        params: list[int] = []
        for servo_id, data in values.items():
            if len(data) != length:
                raise ValueError(f"servo {servo_id}: sync write needs {length} bytes, got {len(data)}")
            params.append(servo_id)
            params.extend(data)
        return params

    def _require_port(self) -> Any:
        if self._port is None or not self._port.is_open:
            raise PortLostError(f"serial port '{self.port_name}' is not open")
        return self._port

    def _os_call(self, func, *args):
        """Run an SDK call; an OS-level failure of the port becomes :class:`PortLostError`."""
        try:
            return func(*args)
        except (serial.SerialException, OSError, termios.error, TypeError, AttributeError) as exc:
            # pyserial raises SerialException, OSError or termios.error; TypeError/AttributeError once closed
            self.counters.port_errors += 1
            port = self._port
            self._port = None
            if port is not None:
                port.is_using = False
                with contextlib.suppress(Exception):
                    port.closePort()
            raise PortLostError(f"serial port '{self.port_name}' failed: {exc}") from exc

    # ---- Sync Read: retries, deadline and transaction tags (the packets are the subclass's) ----------------
    def _reply_bytes(self, n_servos: int, read_length: int, fast: bool) -> int:
        """Bytes of the status packets that answer one Sync Read."""
        raise NotImplementedError

    def _send_sync_read(self, port: Any, address: int, length: int, ids: list[int], fast: bool) -> bool:
        """Send one Sync Read instruction; False when the SDK could not send it."""
        raise NotImplementedError

    def _receive(self, port: Any, expected: dict[int, int], timeout: float, pad: int = 0, sent_at: float = 0.0,
                 check: ReplyCheck | None = None) -> dict[int, ServoReply]:
        """Collect the status packets of the servos in ``expected`` (ID -> parameter bytes), via :meth:`_take`."""
        raise NotImplementedError

    def _refuses(self, error: int) -> bool:
        """True when a status packet's ERR byte says the instruction was not carried out (its data is void)."""
        raise NotImplementedError

    def sync_read(self, ids: list[int], address: int, length: int, deadline: float | None = None, *,
                  fast: bool = False, check: ReplyCheck | None = None, retries: int | None = None) -> SyncReadResult:
        """One Sync Read of ``length`` bytes from ``address`` of every servo in ``ids``.

        Missing servos are asked again (bounded by ``retries``, default the bus's, and by ``deadline``, a
        ``time.monotonic()`` value; no retry starts that could still be waiting at the deadline). With
        ``fast`` the first attempt is a Fast Sync Read, retries are plain Sync Reads (one packet per
        servo survives a corrupted byte better; DYNAMIXEL only). The TAGS-1 bytes before ``address`` must be readable.
        """
        port = self._require_port()
        result = SyncReadResult()
        start = time.monotonic()
        pending = list(ids)
        retries = self.retries if retries is None else retries
        for attempt in range(retries + 1):
            use_fast = fast and attempt == 0
            pad = (self._tag + 1) % TAGS       # the tag advances only with a request that is sent
            read_length = length + pad
            timeout = self.reply_timeout(self._reply_bytes(len(pending), read_length, use_fast))
            if attempt > 0:
                if deadline is not None and time.monotonic() + timeout > deadline:
                    break    # a retry that could end after the deadline would cost the loop its rate
                self.counters.retries += 1
            self.counters.transactions += 1
            self.counters.fast_reads += use_fast
            result.attempts += 1
            self._tag = pad
            sent_at = self.last_tx_at = time.monotonic()
            if not self._send_sync_read(port, address - pad, read_length, pending, use_fast):
                port.is_using = False
                continue
            got = self._receive(port, {sid: read_length for sid in pending}, timeout, pad, sent_at, check)
            if use_fast:
                result.fast_replies = len(got)
            if got and len(got) < len(pending):
                self.counters.partial_replies += 1
            result.replies.update(got)
            pending = [sid for sid in pending if sid not in got]
            if not pending:
                break
        result.missing = pending
        result.completed = time.monotonic()
        result.duration = result.completed - start
        return result

    def _take(self, replies: dict[int, ServoReply], expected: dict[int, int], servo_id: int, error: int,
              params: bytes, pad: int, sent_at: float, received_at: float, check: ReplyCheck | None) -> None:
        """Accept one servo's reply into ``replies`` unless it is foreign, erroneous, late or implausible."""
        if servo_id not in expected:
            return                      # another device, or a servo this transaction did not ask
        if self._refuses(error):
            self.counters.status_errors += 1
            return
        if len(params) != expected[servo_id] or servo_id in replies:
            verdict = "late"            # another transaction's length, or a second answer
        else:
            data = params[pad:]
            verdict = check(servo_id, data, sent_at, received_at) if check is not None else None
        if verdict is None:
            replies[servo_id] = ServoReply(data, error)
        elif verdict == "late":
            self.counters.late_replies += 1
            if replies.pop(servo_id, None) is not None:
                # A servo answers its requests in order: an answer to an earlier request that arrives after the
                # one accepted here shows that one was earlier still (a servo working through a backlog).
                self.counters.late_replies += 1
        else:
            self.counters.implausible_replies += 1

