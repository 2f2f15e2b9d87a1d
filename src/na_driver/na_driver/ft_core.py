"""F/T driver core (ROS-free): parameters, sequence checks, axis map, tare, rate limiting.

A reading is published only when it is newer than everything published before (Net F/T
``rdt_sequence``; 32-bit wrap-around handled), its status is healthy, no count is saturated and
all values are finite. Gaps in the sequence are counted as lost records, older sequence
numbers as reordered records (dropped: never published out of order).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from na_common.netft import DEFAULT_COUNTS_PER_FORCE, DEFAULT_COUNTS_PER_TORQUE, RDT_PORT
from na_driver.ft_sources import NetFtSource, RawReading, SerialLineSource

BACKENDS = ("netft", "serial")
_MAX_TRACKED_GAP = 1000      # skipped sequence numbers remembered to recognise late (reordered) records


class FtConfigError(ValueError):
    """A parameter of the F/T driver is wrong; the message names it."""


@dataclass(frozen=True)
class FtConfig:
    backend: str
    address: str
    port: int
    device: str
    baud_rate: int
    counts_per_force: float        # counts (Net F/T) or line units (serial, mN) per N
    counts_per_torque: float       # per N·m
    publish_rate: float            # Hz; 0 = every reading
    frame_id: str
    axis_permutation: tuple[int, ...]
    axis_signs: tuple[float, ...]
    tare_duration: float           # s
    tare_on_start: bool
    stale_timeout: float           # s without a good reading before the data is reported stale
    port_wait: float = 15.0        # s to wait at start-up for the serial device to appear


def default_ft_parameters() -> dict[str, Any]:
    return {
        "backend": "netft",
        "address": "192.168.1.1",            # the Net F/T factory default IP address
        "port": RDT_PORT,                    # docs/REFERENCES.md, Net F/T
        "device": "/dev/ttyUSB0",
        "baud_rate": 115200,                 # 8N1 (docs/REFERENCES.md, Serial F/T sensor)
        "counts_per_force": 0.0,  # 0 = backend default: 1e6 (docs/REFERENCES.md, Net F/T) or 1000 (serial, mN)
        "counts_per_torque": 0.0,  # 0 = backend default: 1e9 (docs/REFERENCES.md, Net F/T) or 1000 (serial, mN·m)
        "publish_rate": 0.0,
        "frame_id": "ft_sensor",
        "axis_permutation": [0, 1, 2, 3, 4, 5],
        "axis_signs": [1.0] * 6,
        "tare_duration": 5.0,                # s, the authors' unloaded average (docs/REFERENCES.md, Authors' setup)
        "tare_on_start": False,
        "stale_timeout": 0.1,
        "port_wait": 15.0,                   # s; a launch may start the driver before its serial device exists
    }


def build_ft_config(params: Mapping[str, Any]) -> FtConfig:
    defaults = default_ft_parameters()
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise FtConfigError(f"unknown parameter(s): {', '.join(unknown)}")
    p = {**defaults, **params}
    backend = str(p["backend"])
    if backend not in BACKENDS:
        raise FtConfigError(f"parameter 'backend' must be one of {BACKENDS}, got {backend!r}")
    port = int(p["port"])
    if not 0 < port < 65536:
        raise FtConfigError(f"parameter 'port' must be a UDP port 1..65535, got {port}")
    netft_scale, serial_scale = (DEFAULT_COUNTS_PER_FORCE, DEFAULT_COUNTS_PER_TORQUE), (1000.0, 1000.0)  # serial: mN
    force_default, torque_default = netft_scale if backend == "netft" else serial_scale
    cpf = float(p["counts_per_force"]) or force_default
    cpt = float(p["counts_per_torque"]) or torque_default
    if cpf <= 0 or cpt <= 0:
        raise FtConfigError(f"counts_per_force/counts_per_torque must be positive, got {cpf}, {cpt}")
    perm = [int(v) for v in p["axis_permutation"]]
    if sorted(perm) != list(range(6)):
        raise FtConfigError(f"parameter 'axis_permutation' must be a permutation of 0..5, got {perm}")
    signs = [float(v) for v in p["axis_signs"]]
    if len(signs) != 6 or any(s not in (1.0, -1.0) for s in signs):
        raise FtConfigError(f"parameter 'axis_signs' must be six values of 1 or -1, got {signs}")
    if sorted(perm[:3]) != [0, 1, 2]:
        raise FtConfigError("parameter 'axis_permutation' must map forces to forces (first three from 0..2)")
    rate = float(p["publish_rate"])
    tare = float(p["tare_duration"])
    stale = float(p["stale_timeout"])
    if rate < 0 or tare <= 0 or stale <= 0:
        raise FtConfigError(f"need publish_rate >= 0, tare_duration > 0 and stale_timeout > 0, "
                            f"got {rate}, {tare}, {stale}")
    baud = int(p["baud_rate"])
    if baud <= 0:
        raise FtConfigError(f"parameter 'baud_rate' must be positive, got {baud}")
    port_wait = float(p["port_wait"])
    if not port_wait >= 0:
        raise FtConfigError(f"parameter 'port_wait' must be >= 0 s, got {port_wait}")
    return FtConfig(backend=backend, address=str(p["address"]), port=port, device=str(p["device"]),
                    baud_rate=baud, counts_per_force=cpf, counts_per_torque=cpt, publish_rate=rate,
                    frame_id=str(p["frame_id"]), axis_permutation=tuple(perm), axis_signs=tuple(signs),
                    tare_duration=tare, tare_on_start=bool(p["tare_on_start"]), stale_timeout=stale,
                    port_wait=port_wait)


def make_source(config: FtConfig) -> NetFtSource | SerialLineSource:
    if config.backend == "netft":
        return NetFtSource(config.address, config.port, config.counts_per_force, config.counts_per_torque)
    return SerialLineSource(config.device, config.baud_rate, config.counts_per_force, config.counts_per_torque)


@dataclass
class FtCounters:
    received: int = 0
    published: int = 0
    lost: int = 0              # sequence numbers skipped and not seen later (records that never arrived)
    reordered: int = 0         # records older than one already accepted, and duplicates (dropped)
    error_status: int = 0      # records with a nonzero status (dropped)
    saturated: int = 0         # records with a count at the int32 limit (dropped)
    invalid: int = 0           # non-finite values (dropped)

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass(frozen=True)
class WrenchSample:
    stamp: float               # time.monotonic() of reception of the newest reading in it
    wrench: np.ndarray         # (6,) N, N·m, mapped axes, tared
    sequence: int
    count: int                 # readings averaged into it


class _TareJob:
    def __init__(self, duration: float, not_before: float) -> None:
        self.duration = duration
        self.not_before = not_before
        self.started: float | None = None
        self.readings: list[np.ndarray] = []
        self.future: Future = Future()


class FtProcessor:
    """Turns raw readings into publishable, tared wrenches; thread-safe tare requests."""

    def __init__(self, config: FtConfig, sequence_bits: int = 32) -> None:
        self.config = config
        self.counters = FtCounters()
        self.offset = np.zeros(6)
        self._perm = np.array(config.axis_permutation)
        self._signs = np.array(config.axis_signs)
        self._modulus = 1 << sequence_bits
        self._last_sequence: int | None = None
        self._missing: set[int] = set()             # recent skipped sequence numbers (a late one is not lost)
        self._last_good: float = -math.inf
        self._last_publish: float = -math.inf
        self._pending: list[np.ndarray] = []
        self._pending_sequence = 0
        self._pending_stamp = 0.0
        self._tare: _TareJob | None = None
        self._lock = threading.Lock()
        self.last_error_status = 0

    def map_axes(self, wrench: np.ndarray) -> np.ndarray:
        return self._signs * np.asarray(wrench, dtype=float)[self._perm]

    def _is_newer(self, sequence: int) -> bool:
        """Counts gaps and reordering; True when ``sequence`` follows everything seen so far."""
        if self._last_sequence is None:
            self._last_sequence = sequence
            return True
        step = (sequence - self._last_sequence) % self._modulus
        if step == 0 or step >= self._modulus // 2:
            self.counters.reordered += 1
            if sequence in self._missing:        # it was counted as lost when the gap appeared: it was only late
                self._missing.discard(sequence)
                self.counters.lost -= 1
            return False
        if step > 1:
            self.counters.lost += step - 1
            if step - 1 <= _MAX_TRACKED_GAP:
                self._missing.update((self._last_sequence + k) % self._modulus for k in range(1, step))
            if len(self._missing) > _MAX_TRACKED_GAP:
                self._missing.clear()               # bounded memory; very old gaps stay counted as lost
        self._last_sequence = sequence
        return True

    def process(self, reading: RawReading) -> WrenchSample | None:
        """Check one reading; returns a sample to publish when one is due (rate limit), else None."""
        self.counters.received += 1
        if not self._is_newer(reading.sequence):
            return None
        if reading.status:
            self.counters.error_status += 1
            self.last_error_status = reading.status
            return None
        if reading.saturated:
            self.counters.saturated += 1
            return None
        mapped = self.map_axes(reading.wrench)
        if not np.all(np.isfinite(mapped)):
            self.counters.invalid += 1
            return None
        self._last_good = reading.received
        if self._feed_tare(mapped, reading.received):
            return None        # no output while a tare is in progress: the offset is being replaced
        self._pending.append(mapped)
        self._pending_sequence, self._pending_stamp = reading.sequence, reading.received
        rate = self.config.publish_rate
        if rate > 0 and reading.received - self._last_publish < 1.0 / rate:
            return None
        self._last_publish = reading.received
        mean = np.mean(self._pending, axis=0)
        count = len(self._pending)
        self._pending = []
        self.counters.published += 1
        with self._lock:
            offset = self.offset.copy()
        return WrenchSample(self._pending_stamp, mean - offset, self._pending_sequence, count)

    def is_stale(self, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        return now - self._last_good > self.config.stale_timeout

    @property
    def last_good(self) -> float:
        return self._last_good

    # ---- tare ----------------------------------------------------------------------------------
    def request_tare(self, duration: float | None = None, not_before: float = -math.inf) -> Future:
        """Average ``duration`` s of good readings received after ``not_before`` (monotonic) and subtract
        the mean from then on (``not_before`` skips readings still in flight when a sensor-side bias was sent).
        Nothing is published until the tare is complete.

        The future resolves to the new offset (6,) once the window is complete.
        """
        job = _TareJob(self.config.tare_duration if duration is None else float(duration), not_before)
        with self._lock:
            if self._tare is not None:
                self._tare.future.cancel()
            self._tare = job
        return job.future

    def clear_offset(self) -> None:
        """Forget the software offset (after a sensor-side bias the sensor removes it itself)."""
        with self._lock:
            self.offset = np.zeros(6)

    def _feed_tare(self, mapped: np.ndarray, received: float) -> bool:
        """Add a reading to a running tare; True while the tare is still in progress."""
        with self._lock:
            job = self._tare
            if job is None:
                return False
            if received < job.not_before:
                return True
            if job.started is None:
                job.started = received
            job.readings.append(mapped)
            if received - job.started < job.duration:
                return True
            self.offset = np.mean(job.readings, axis=0)
            self._tare = None
            self._pending = []          # readings from before the tare must not be averaged into the next output
        job.future.set_result(self.offset.copy())
        return True
