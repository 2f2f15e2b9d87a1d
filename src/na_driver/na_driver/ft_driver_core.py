"""F/T driver core (ROS-free): one sensor source and its processor, the tare sequence and the health status.

The node runs :meth:`FtDriverCore.poll` on its reader thread, calls :meth:`FtDriverCore.tare` from
the ``~/tare`` service and publishes :meth:`FtDriverCore.status` on ``/diagnostics``.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

import numpy as np

from na_common.diagnostics import ERROR, OK, STALE, WARN, Level
from na_driver.devices import wait_for_device
from na_driver.ft_core import FtConfig, FtProcessor, WrenchSample, make_source
from na_driver.ft_sources import FtSourceError, NetFtSource, SerialLineSource

BIAS_IN_FLIGHT_S = 0.02     # after a sensor-side bias, records received this soon were sent before it
TARE_MARGIN_S = 2.0         # a tare gives up this long after its window should have been complete


class FtDriverCore:
    """The sensor as the node sees it: read and check readings, tare, report health."""

    def __init__(self, config: FtConfig, source: NetFtSource | SerialLineSource | None = None) -> None:
        self.config = config
        self.source = source if source is not None else make_source(config)
        self.processor = FtProcessor(config, self.source.sequence_bits)
        self.read_error: str | None = None      # the last read failure, until a read succeeds
        self.tare_margin_s = TARE_MARGIN_S

    def open(self, on_wait: Callable[[str], None] | None = None) -> None:
        """Open the source; a serial device that does not exist yet is waited for up to ``port_wait`` s."""
        if self.config.backend == "serial":
            wait_for_device(self.config.device, self.config.port_wait, on_wait)
        self.source.open()

    def close(self) -> None:
        self.source.close()

    def poll(self, timeout: float) -> WrenchSample | None:
        """Read and check one reading; a sample when one is due for publication.

        A read failure raises :class:`FtSourceError` and is kept in :attr:`read_error` until a read succeeds.
        """
        try:
            reading = self.source.read(timeout)
        except FtSourceError as exc:
            self.read_error = str(exc)
            raise
        self.read_error = None
        return None if reading is None else self.processor.process(reading)

    def tare(self) -> np.ndarray:
        """Tare now; blocks until the window is averaged (another thread must keep polling) and returns the offset.

        Net F/T: the sensor-side bias first (forget the software offset, skip records still in flight),
        then, for both backends, the mean of ``tare_duration`` s of good readings is subtracted from then on.
        Raises :class:`FtSourceError`, or :class:`TimeoutError` when the window got no good readings.
        """
        not_before = -math.inf
        if self.config.backend == "netft":
            self.source.bias()
            self.processor.clear_offset()
            not_before = time.monotonic() + BIAS_IN_FLIGHT_S
        future = self.processor.request_tare(self.config.tare_duration, not_before)
        return future.result(timeout=self.config.tare_duration + self.tare_margin_s)

    def status(self, now: float | None = None) -> tuple[Level, str]:
        """Diagnostic level and message: read failure, stale data, faulty records seen, or streaming."""
        counters = self.processor.counters
        if self.read_error:
            return ERROR, self.read_error
        if self.processor.is_stale(now):
            return STALE, "no good reading within the stale timeout"
        if counters.error_status or counters.lost or counters.reordered:
            return WARN, "lost, reordered or error-status records seen"
        return OK, "streaming"

    def diagnostic_values(self, now: float | None = None) -> dict[str, int | str]:
        """Counters and the last error status / age of the last good reading, for ``/diagnostics``."""
        now = time.monotonic() if now is None else now
        p = self.processor
        return {**p.counters.as_dict(), "malformed": self.source.malformed,
                "stream_restarts": getattr(self.source, "restarts", 0),
                "last_error_status": f"0x{p.last_error_status:08X}",
                "age_of_last_good_s": f"{now - p.last_good:.3f}"}
