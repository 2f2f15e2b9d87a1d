"""Force/torque sensor emulators (ROS-free): ATI Net F/T RDT over UDP and an ASCII serial sensor on a pty.

Both read the true wrench from ``wrench_source() -> array(6)`` (sensor frame; Fx Fy Fz in N,
Tx Ty Tz in N·m), add white noise and a slowly drifting offset (a random walk from a random
start, so a tare matters) and apply the F/T faults of ``na_sim.faults``.

* Net F/T RDT (docs/REFERENCES.md, Net F/T): requests are 8 bytes big-endian ``uint16 0x1234, uint16 command,
  uint32 count``; 0x0002 starts streaming ``count`` records (0 = until stopped) to the sender,
  0x0000 stops, 0x0042 sets the software bias (subtracts the current reading from later ones).
  Records are 36 bytes big-endian ``uint32 rdt_sequence, uint32 ft_sequence, uint32 status,
  int32 Fx Fy Fz Tx Ty Tz`` in counts (default 1e6 counts/N and 1e9 counts/N·m as hard-coded by
  ros-drivers/ati_netft_ros_driver; note int32 then saturates at ±2.147 N·m).
* Serial sensor (the authors' sensor; docs/REFERENCES.md, Serial F/T sensor): ASCII lines
  ``< fx fy fz mx my mz >\\r\\n`` of signed integers, forces in mN and moments in mN·m, ≈200 Hz, 115200 8N1 nominal.
"""

from __future__ import annotations

import fcntl
import logging
import os
import select
import socket
import struct
import termios
import threading
import time
import tty
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from na_common.netft import (
    DEFAULT_COUNTS_PER_FORCE,
    DEFAULT_COUNTS_PER_TORQUE,
    INT32_LIMITS,
    RDT_CMD_SET_SOFTWARE_BIAS,
    RDT_CMD_START_HIGH_SPEED,
    RDT_CMD_STOP,
    RDT_HEADER,
    RDT_RECORD,
    RDT_REQUEST,
    RDT_STATUS_ERROR,
    RDT_STATUS_OK,
)
from na_sim.faults import FtFaultInjector, FtFaults

LOG = logging.getLogger(__name__)

WrenchSource = Callable[[], np.ndarray]

NETFT_INTERNAL_RATE_HZ = 7000            # ATI Net F/T manual: internal sample rate of ft_sequence
INT32_MIN, INT32_MAX = INT32_LIMITS
_INACTIVE_POLL_S = 0.05                 # wait while idle; a request ends the wait at once
MAX_CATCH_UP_S = 0.25                   # a stream this late sends what it owes back to back (a busy host held the
# emulator, as a busy network would hold a real sensor's packets); later than that it skips ahead (a suspended
# process). It used to skip after 10 periods (20 ms at 500 Hz): on a 2-core machine running the whole simulated
# graph that lost a quarter of the Net F/T records (350-390 Hz of 500 reached the bag).
SERIAL_BUFFER_CAP_BYTES = 1024           # unread serial data beyond this is flushed (no stale backlog)


@dataclass(frozen=True)
class FtErrorModel:
    """Measurement error of an F/T sensor: white noise plus a drifting offset (per axis)."""

    force_noise_n: float = 0.05              # std of white noise per sample
    torque_noise_nm: float = 0.002
    initial_offset_force_n: float = 1.0      # std of the offset at power-up
    initial_offset_torque_nm: float = 0.02
    drift_force_n_per_sqrt_s: float = 0.01   # random-walk step std over one second
    drift_torque_nm_per_sqrt_s: float = 2e-4
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.force_noise_n, self.torque_noise_nm, self.initial_offset_force_n, self.initial_offset_torque_nm,
               self.drift_force_n_per_sqrt_s, self.drift_torque_nm_per_sqrt_s) < 0:
            raise ValueError("F/T error model standard deviations must be >= 0")

    @classmethod
    def ideal(cls) -> FtErrorModel:
        """No noise, no offset, no drift."""
        return cls(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


class MeasuredWrench:
    """True wrench + drifting offset + noise; one instance per sensor, called from its thread."""

    def __init__(self, source: WrenchSource, model: FtErrorModel | None = None) -> None:
        self.source = source
        self.model = model or FtErrorModel()
        m = self.model
        self._rng = np.random.default_rng(m.seed)
        self._noise = np.array([m.force_noise_n] * 3 + [m.torque_noise_nm] * 3)
        self._drift = np.array([m.drift_force_n_per_sqrt_s] * 3 + [m.drift_torque_nm_per_sqrt_s] * 3)
        start = np.array([m.initial_offset_force_n] * 3 + [m.initial_offset_torque_nm] * 3)
        self._offset = self._rng.normal(0.0, 1.0, 6) * start
        self._last_t: float | None = None
        self._lock = threading.Lock()

    @property
    def offset(self) -> np.ndarray:
        with self._lock:
            return self._offset.copy()

    def sample(self, now: float | None = None) -> np.ndarray:
        """One reading (N, N·m) at monotonic time ``now``."""
        now = time.monotonic() if now is None else now
        truth = np.asarray(self.source(), dtype=float).reshape(-1)
        if truth.shape != (6,) or not np.all(np.isfinite(truth)):
            raise ValueError(f"wrench source must return 6 finite values, got {truth!r}")
        with self._lock:
            if self._last_t is not None and now > self._last_t:
                self._offset += self._rng.normal(0.0, 1.0, 6) * self._drift * np.sqrt(now - self._last_t)
            self._last_t = now
            return truth + self._offset + self._rng.normal(0.0, 1.0, 6) * self._noise


class _PeriodicThread:
    """A thread that calls ``tick()`` at a fixed rate without accumulating lag."""

    def __init__(self, name: str, rate_hz: float) -> None:
        if rate_hz <= 0:
            raise ValueError(f"rate must be positive, got {rate_hz}")
        self.rate_hz = float(rate_hz)
        self._name = name
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.stats: Counter = Counter()

    def _start_thread(self) -> None:
        if self._thread is not None:
            raise RuntimeError(f"{self._name} already started")
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
        self._thread.start()

    def _join_thread(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def _loop(self) -> None:
        period = 1.0 / self.rate_hz
        next_t = time.monotonic()
        while not self._stop.is_set():
            if not self._active():
                self._idle(_INACTIVE_POLL_S)        # nothing to send: no 500 Hz wake-ups
                next_t = time.monotonic()
                continue
            self._idle(max(0.0, next_t - time.monotonic()))
            now = time.monotonic()
            if now < next_t:
                continue
            try:
                self.tick(now)
            except Exception:
                self.stats["tick_errors"] += 1
                if self.stats["tick_errors"] in (1, 10, 100) or self.stats["tick_errors"] % 1000 == 0:
                    LOG.exception("%s tick failed (%d so far)", self._name, self.stats["tick_errors"])
            next_t += period
            if now - next_t > MAX_CATCH_UP_S:      # far behind (e.g. suspended): do not burst
                self.stats["overruns"] += 1
                next_t = now + period

    def _idle(self, seconds: float) -> None:
        self._stop.wait(seconds)

    def _active(self) -> bool:
        """False while there is nothing to send (the loop then only waits)."""
        return True

    def tick(self, now: float) -> None:
        raise NotImplementedError


class NetFtEmulator(_PeriodicThread):
    """ATI Net F/T Raw Data Transfer server on UDP (127.0.0.1 by default; port 0 = ephemeral)."""

    def __init__(self, wrench_source: WrenchSource, *, host: str = "127.0.0.1", port: int = 0,
                 rate_hz: float = 500.0, counts_per_force: float = DEFAULT_COUNTS_PER_FORCE,
                 counts_per_torque: float = DEFAULT_COUNTS_PER_TORQUE,
                 error_model: FtErrorModel | None = None, faults: FtFaults | FtFaultInjector | None = None) -> None:
        super().__init__("netft-emulator", rate_hz)
        if counts_per_force <= 0 or counts_per_torque <= 0:
            raise ValueError("counts per unit must be positive")
        self.measured = MeasuredWrench(wrench_source, error_model)
        self.injector = faults if isinstance(faults, FtFaultInjector) else FtFaultInjector(faults)
        self._scale = np.array([counts_per_force] * 3 + [counts_per_torque] * 3)
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._socket.bind((host, port))
        self._socket.setblocking(False)
        self._bias = np.zeros(6)
        self._client: tuple[str, int] | None = None
        self._remaining = 0                  # records left in the current stream (-1 = forever)
        self._rdt_sequence = 0
        self._held: bytes | None = None      # a record held back to be sent out of order
        self._started_at = time.monotonic()
        self._state_lock = threading.Lock()

    @property
    def address(self) -> tuple[str, int]:
        return self._socket.getsockname()

    @property
    def port(self) -> int:
        return self.address[1]

    @property
    def streaming(self) -> bool:
        with self._state_lock:
            return self._client is not None and self._remaining != 0

    @property
    def fault_counters(self) -> dict[str, int]:
        return self.injector.snapshot()

    def start(self) -> NetFtEmulator:
        self._started_at = time.monotonic()
        self._start_thread()
        return self

    def stop(self) -> None:
        self._join_thread()
        self._socket.close()

    def __enter__(self) -> NetFtEmulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _active(self) -> bool:
        return self.streaming

    def _idle(self, seconds: float) -> None:
        """Wait for the next record time while answering requests; a start request ends an idle wait."""
        was_streaming = self.streaming
        deadline = time.monotonic() + seconds
        while not self._stop.is_set():
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self._socket], [], [], max(0.0, min(remaining, 0.05)))
            if ready:
                self._receive_requests()
                if self.streaming and not was_streaming:
                    return
            if remaining <= 0:
                return

    def _receive_requests(self) -> None:
        while True:
            try:
                data, sender = self._socket.recvfrom(64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            self._handle_request(data, sender)

    def _handle_request(self, data: bytes, sender: tuple[str, int]) -> None:
        if len(data) != RDT_REQUEST.size:
            self.stats["bad_requests"] += 1
            return
        header, command, count = RDT_REQUEST.unpack(data)
        if header != RDT_HEADER:
            self.stats["bad_requests"] += 1
            return
        with self._state_lock:
            if command == RDT_CMD_START_HIGH_SPEED:
                self._client, self._remaining = sender, (count if count else -1)
                self.stats["start"] += 1
            elif command == RDT_CMD_STOP:
                self._remaining = 0
                self._held = None
                self.stats["stop"] += 1
            elif command == RDT_CMD_SET_SOFTWARE_BIAS:
                self._bias = self.measured.sample()
                self.stats["bias"] += 1
            else:
                self.stats["unknown_commands"] += 1

    def tick(self, now: float) -> None:
        with self._state_lock:
            if self._client is None or self._remaining == 0:
                return
            client = self._client
            if self._remaining > 0:
                self._remaining -= 1
            last_of_stream = self._remaining == 0
            self._rdt_sequence = (self._rdt_sequence + 1) & 0xFFFF_FFFF
            bias = self._bias.copy()
            rdt_sequence = self._rdt_sequence
        counts = np.rint((self.measured.sample(now) - bias) * self._scale)
        if np.any(counts > INT32_MAX) or np.any(counts < INT32_MIN):
            self.stats["saturated"] += 1
        counts = np.clip(counts, INT32_MIN, INT32_MAX).astype(np.int64)
        status = RDT_STATUS_ERROR if self.injector.error_status() else RDT_STATUS_OK
        ft_sequence = int((now - self._started_at) * NETFT_INTERNAL_RATE_HZ) & 0xFFFF_FFFF
        record = RDT_RECORD.pack(rdt_sequence, ft_sequence, status, *(int(c) for c in counts))
        if self.injector.drop():
            if last_of_stream:
                self._flush_held(client)
            return
        if self._held is None and not last_of_stream and self.injector.reorder():
            self._held = record                          # goes out after the next record
            return
        self._send(record, client)
        self._flush_held(client)

    def _flush_held(self, client: tuple[str, int]) -> None:
        if self._held is not None:
            self._send(self._held, client)
            self._held = None

    def _send(self, record: bytes, client: tuple[str, int]) -> None:
        try:
            self._socket.sendto(record, client)
            self.stats["records"] += 1
        except OSError:
            self.stats["send_errors"] += 1


def format_serial_line(wrench: np.ndarray) -> bytes:
    """``< fx fy fz mx my mz >\\r\\n`` with forces in mN and moments in mN·m, rounded to integers."""
    milli = np.rint(np.asarray(wrench, dtype=float) * 1000.0).astype(np.int64)
    return ("< " + " ".join(str(int(v)) for v in milli) + " >\r\n").encode("ascii")


def parse_serial_line(line: bytes | str) -> np.ndarray:
    """Inverse of :func:`format_serial_line`: one line -> wrench in N and N·m; ValueError if malformed."""
    text = line.decode("ascii") if isinstance(line, bytes) else line
    fields = text.strip().split()
    if len(fields) != 8 or fields[0] != "<" or fields[-1] != ">":
        raise ValueError(f"not an F/T line: {text!r}")
    return np.array([int(v) for v in fields[1:-1]], dtype=float) / 1000.0


class SerialFtEmulator(_PeriodicThread):
    """ASCII line F/T sensor on a pty (``port_path``), lines at ``rate_hz`` (default 200 Hz)."""

    def __init__(self, wrench_source: WrenchSource, *, rate_hz: float = 200.0, error_model: FtErrorModel | None = None,
                 faults: FtFaults | FtFaultInjector | None = None) -> None:
        super().__init__("serial-ft-emulator", rate_hz)
        self.measured = MeasuredWrench(wrench_source, error_model)
        self.injector = faults if isinstance(faults, FtFaultInjector) else FtFaultInjector(faults)
        self._master_fd = self._slave_fd = -1
        self.port_path = ""
        self.lines_sent = 0

    @property
    def fault_counters(self) -> dict[str, int]:
        return self.injector.snapshot()

    def start(self) -> SerialFtEmulator:
        self._master_fd, self._slave_fd = os.openpty()
        tty.setraw(self._slave_fd)
        os.set_blocking(self._master_fd, False)
        self.port_path = os.ttyname(self._slave_fd)
        self._start_thread()
        return self

    def stop(self) -> None:
        self._join_thread()
        for fd in (self._master_fd, self._slave_fd):
            if fd >= 0:
                os.close(fd)
        self._master_fd = self._slave_fd = -1

    def __enter__(self) -> SerialFtEmulator:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def tick(self, now: float) -> None:
        line = self.injector.garbage_line()
        if line is None:
            reading = self.measured.sample(now)
            if self.injector.drop():
                return
            line = format_serial_line(reading)
        self._discard_stale_backlog()
        try:
            os.write(self._master_fd, line)
            self.lines_sent += 1
        except BlockingIOError:
            self.stats["overflow"] += 1

    def _discard_stale_backlog(self) -> None:
        """Nobody reads: drop the unread backlog, as a real port loses bytes nobody has open."""
        unread = struct.unpack("i", fcntl.ioctl(self._slave_fd, termios.FIONREAD, b"\0\0\0\0"))[0]
        if unread > SERIAL_BUFFER_CAP_BYTES:
            termios.tcflush(self._slave_fd, termios.TCIFLUSH)
            self.stats["backlog_flushes"] += 1
