"""F/T driver core: the tare sequence (bias, clear offset, skip records in flight, software tare) and the
diagnostic level decided from the read state and the counters."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from na_common.diagnostics import ERROR, OK, STALE, WARN
from na_driver.ft_core import build_ft_config
from na_driver.ft_driver_core import FtDriverCore
from na_driver.ft_sources import FtSourceError, RawReading

UNBIASED = np.array([5.0, 5.0, 5.0, 0.5, 0.5, 0.5])     # what the sensor sends before its bias takes effect
BIASED = np.array([0.2, -0.1, 0.3, 0.01, 0.0, -0.02])    # residual after the sensor-side bias
IN_FLIGHT_S = 0.01                                       # records this soon after the bias are still unbiased


class FakeSource:
    """Readings every millisecond; after ``bias()`` (and a short in-flight delay) they carry BIASED."""

    sequence_bits = 32
    name = "fake sensor"

    def __init__(self) -> None:
        self.malformed = 0
        self.biased_at: float | None = None
        self.calls: list[str] = []
        self.sequence = 0
        self.fail: str | None = None

    def bias(self) -> None:
        self.calls.append("bias")
        self.biased_at = time.monotonic()

    def read(self, timeout: float) -> RawReading | None:
        if self.fail:
            raise FtSourceError(self.fail)
        time.sleep(0.001)
        now = time.monotonic()
        biased = self.biased_at is not None and now >= self.biased_at + IN_FLIGHT_S
        self.sequence += 1
        return RawReading(self.sequence, 0, (BIASED if biased else UNBIASED).copy(), now)


def tare_while_polling(core: FtDriverCore) -> np.ndarray:
    result: dict[str, np.ndarray] = {}
    thread = threading.Thread(target=lambda: result.setdefault("offset", core.tare()))
    thread.start()
    while thread.is_alive():
        core.poll(0.01)
    thread.join()
    return result["offset"]


def test_netft_tare_biases_the_sensor_then_averages_only_biased_records() -> None:
    source = FakeSource()
    core = FtDriverCore(build_ft_config({"backend": "netft", "tare_duration": 0.1}), source)
    core.processor.offset = np.full(6, 9.0)                      # an earlier software tare
    for _ in range(20):
        core.poll(0.01)
    offset = tare_while_polling(core)
    assert source.calls == ["bias"]
    np.testing.assert_allclose(offset, BIASED)                   # no unbiased record in flight got averaged in
    samples = [s for _ in range(50) if (s := core.poll(0.01)) is not None]
    np.testing.assert_allclose(samples[-1].wrench, np.zeros(6), atol=1e-12)


def test_serial_tare_is_software_only() -> None:
    source = FakeSource()
    core = FtDriverCore(build_ft_config({"backend": "serial", "tare_duration": 0.05}), source)
    offset = tare_while_polling(core)
    assert source.calls == []
    np.testing.assert_allclose(offset, UNBIASED)


def test_a_tare_without_good_readings_times_out() -> None:
    core = FtDriverCore(build_ft_config({"backend": "serial", "tare_duration": 0.01}), FakeSource())
    core.tare_margin_s = 0.0
    with pytest.raises(TimeoutError):
        core.tare()                                              # nobody polls: no reading arrives


def test_status_from_read_errors_staleness_and_counters() -> None:
    source = FakeSource()
    core = FtDriverCore(build_ft_config({"backend": "serial", "stale_timeout": 0.1}), source)
    assert core.status()[0] == STALE                             # nothing read yet
    core.poll(0.01)
    assert core.status() == (OK, "streaming")
    assert core.status(now=time.monotonic() + 1.0)[0] == STALE
    core.processor.process(RawReading(source.sequence + 5, 0, BIASED, time.monotonic()))
    level, message = core.status()
    assert level == WARN and "lost" in message
    values = core.diagnostic_values()
    assert values["lost"] == 4 and values["malformed"] == 0 and values["last_error_status"] == "0x00000000"
    source.fail = "device unplugged"
    with pytest.raises(FtSourceError):
        core.poll(0.01)
    assert core.status() == (ERROR, "device unplugged")
    source.fail = None
    core.poll(0.01)
    assert core.read_error is None and core.status()[0] == WARN
