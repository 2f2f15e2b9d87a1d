"""F/T sensor backends (ROS-free): ATI Net F/T Raw Data Transfer over UDP and the serial line sensor.

Each backend returns :class:`RawReading` objects with the wrench already in N and N·m (scale
applied, sensor axes) and a sequence number; checking, axis mapping and tare happen in
:mod:`na_driver.ft_core`.
"""

from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass

import numpy as np
import serial

from na_common.netft import (
    DEFAULT_COUNTS_PER_FORCE,
    DEFAULT_COUNTS_PER_TORQUE,
    INT32_LIMITS,
    RDT_CMD_SET_SOFTWARE_BIAS,
    RDT_CMD_START_HIGH_SPEED,
    RDT_CMD_STOP,
    RDT_HEADER,
    RDT_PORT,
    RDT_RECORD,
    RDT_REQUEST,
)


class FtSourceError(RuntimeError):
    """The sensor could not be reached or configured; the message names the address or device."""


@dataclass(frozen=True)
class RawReading:
    sequence: int              # rdt_sequence (Net F/T) or a local line counter (serial)
    status: int                # 0 = healthy; Net F/T bit 31 = error summary
    wrench: np.ndarray         # (6,) N and N·m in sensor axes, before tare
    received: float            # time.monotonic() at reception
    saturated: bool = False


class NetFtSource:
    """UDP client of an ATI Net F/T box streaming RDT records.

    When no record has arrived for ``restart_after`` s the start command is sent again: the box may
    not have been listening when the stream was requested (it was booting, or a simulated sensor was
    still starting), or it rebooted; a start while streaming only restarts the stream.
    """

    sequence_bits = 32
    restart_after = 1.0        # s without a record before the start command is repeated

    def __init__(self, address: str, port: int = RDT_PORT, counts_per_force: float = DEFAULT_COUNTS_PER_FORCE,
                 counts_per_torque: float = DEFAULT_COUNTS_PER_TORQUE) -> None:
        self.address, self.port = address, int(port)
        self._scale = np.array([counts_per_force] * 3 + [counts_per_torque] * 3, dtype=float)
        self._socket: socket.socket | None = None
        self.malformed = 0
        self.restarts = 0                          # start commands repeated after a silence
        self._last_heard = -float("inf")          # monotonic time of the last record or start command

    @property
    def name(self) -> str:
        return f"Net F/T {self.address}:{self.port}"

    def open(self) -> None:
        try:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.connect((self.address, self.port))
        except OSError as exc:
            raise FtSourceError(f"cannot reach {self.name}: {exc}") from exc
        self._socket = sock
        self._start()

    def _start(self) -> None:
        self._command(RDT_CMD_START_HIGH_SPEED)
        self._last_heard = time.monotonic()

    def _command(self, command: int, count: int = 0) -> None:
        if self._socket is None:
            raise FtSourceError(f"{self.name} is not open")
        try:
            self._socket.send(RDT_REQUEST.pack(RDT_HEADER, command, count))
        except OSError as exc:
            raise FtSourceError(f"{self.name}: sending command 0x{command:04X} failed: {exc}") from exc

    def bias(self) -> None:
        """Sensor-side software bias (RDT command 0x0042): later readings are relative to now."""
        self._command(RDT_CMD_SET_SOFTWARE_BIAS)

    def read(self, timeout: float) -> RawReading | None:
        """The next record, or None when none arrived within ``timeout`` s."""
        if self._socket is None:
            raise FtSourceError(f"{self.name} is not open")
        self._socket.settimeout(timeout)
        try:
            data = self._socket.recv(256)
        except (TimeoutError, ConnectionRefusedError):   # refused: ICMP port unreachable, not (yet) listening
            if time.monotonic() - self._last_heard > self.restart_after:
                self.restarts += 1
                self._start()
            return None
        except OSError as exc:
            raise FtSourceError(f"{self.name}: receive failed: {exc}") from exc
        self._last_heard = time.monotonic()
        return self.decode(data, self._last_heard)

    def decode(self, data: bytes, received: float) -> RawReading | None:
        if len(data) != RDT_RECORD.size:
            self.malformed += 1
            return None
        rdt_sequence, _ft_sequence, status, *counts = RDT_RECORD.unpack(data)
        saturated = any(c in INT32_LIMITS for c in counts)
        return RawReading(rdt_sequence, status, np.array(counts, dtype=float) / self._scale, received, saturated)

    def close(self) -> None:
        if self._socket is None:
            return
        with contextlib.suppress(FtSourceError):
            self._command(RDT_CMD_STOP)
        self._socket.close()
        self._socket = None


def parse_line(line: bytes | str) -> tuple[int, int, int, int, int, int]:
    """``< fx fy fz mx my mz >`` (signed integers) -> the six integers; ValueError if malformed."""
    text = line.decode("ascii", errors="replace") if isinstance(line, bytes) else line
    fields = text.split()
    if len(fields) != 8 or fields[0] != "<" or fields[-1] != ">":
        raise ValueError(f"not an F/T line: {text.strip()!r}")
    try:
        values = tuple(int(v) for v in fields[1:-1])
    except ValueError as exc:
        raise ValueError(f"non-integer field in F/T line {text.strip()!r}") from exc
    return values  # type: ignore[return-value]


class SerialLineSource:
    """Serial sensor sending ASCII lines ``< fx fy fz mx my mz >`` in mN and mN·m (≈200 Hz;
    docs/REFERENCES.md, Serial F/T sensor)."""

    sequence_bits = 64

    def __init__(self, device: str, baud_rate: int = 115200, units_per_force: float = 1000.0,
                 units_per_torque: float = 1000.0) -> None:
        self.device, self.baud_rate = device, int(baud_rate)
        self._scale = np.array([units_per_force] * 3 + [units_per_torque] * 3, dtype=float)
        self._serial: serial.Serial | None = None
        self._sequence = 0
        self._buffer = b""
        self.malformed = 0

    @property
    def name(self) -> str:
        return f"serial F/T {self.device}"

    def open(self) -> None:
        try:
            self._serial = serial.Serial(self.device, self.baud_rate, bytesize=8, parity="N", stopbits=1, timeout=0)
        except (serial.SerialException, OSError, ValueError) as exc:
            raise FtSourceError(f"cannot open serial F/T device '{self.device}': {exc}") from exc
        self._serial.reset_input_buffer()
        self._buffer = b""

    def bias(self) -> None:
        """The serial sensor has no bias command; tare is done in software only."""

    def read(self, timeout: float) -> RawReading | None:
        """The next complete line as a reading, or None after ``timeout`` s. Garbage lines are counted and skipped."""
        if self._serial is None:
            raise FtSourceError(f"{self.name} is not open")
        deadline = time.monotonic() + timeout
        while True:
            newline = self._buffer.find(b"\n")
            if newline >= 0:
                line, self._buffer = self._buffer[:newline], self._buffer[newline + 1:]
                received = time.monotonic()
                try:
                    values = parse_line(line)
                except ValueError:
                    self.malformed += 1
                    continue
                self._sequence += 1
                return RawReading(self._sequence, 0, np.array(values, dtype=float) / self._scale, received)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            try:
                self._serial.timeout = min(remaining, 0.05)
                chunk = self._serial.read(max(1, self._serial.in_waiting))
            except (serial.SerialException, OSError) as exc:
                raise FtSourceError(f"{self.name}: read failed: {exc}") from exc
            self._buffer += chunk
            if len(self._buffer) > 4096:      # no newline for this long: line noise, resynchronise
                self.malformed += 1
                self._buffer = b""

    def close(self) -> None:
        if self._serial is not None:
            self._serial.close()
            self._serial = None
