"""F/T driver core: backends against the na_sim emulators, sequence checks, axis map, tare."""

from __future__ import annotations

import time

import numpy as np
import pytest
import yaml

from na_bringup.paths import config_file
from na_driver.ft_core import FtConfigError, FtProcessor, build_ft_config, make_source
from na_driver.ft_sources import FtSourceError, NetFtSource, RawReading, parse_line
from na_sim.faults import FtFaults
from na_sim.ft_emulator import FtErrorModel, NetFtEmulator, SerialFtEmulator

TRUE_WRENCH = np.array([1.5, -2.0, 3.25, 0.1, -0.05, 0.02])
NOISE = FtErrorModel(force_noise_n=0.01, torque_noise_nm=0.0005, initial_offset_force_n=0.8,
                     initial_offset_torque_nm=0.01, drift_force_n_per_sqrt_s=0.0, drift_torque_nm_per_sqrt_s=0.0,
                     seed=3)


def reading(sequence: int, wrench=TRUE_WRENCH, status: int = 0) -> RawReading:
    return RawReading(sequence, status, np.asarray(wrench, dtype=float), time.monotonic())


def collect(source, processor: FtProcessor, n: int, timeout: float = 5.0) -> list:
    out, deadline = [], time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        raw = source.read(0.05)
        if raw is not None and (sample := processor.process(raw)) is not None:
            out.append(sample)
    return out


def test_config_errors_name_the_parameter() -> None:
    with pytest.raises(FtConfigError, match="backend"):
        build_ft_config({"backend": "can"})
    with pytest.raises(FtConfigError, match="axis_permutation"):
        build_ft_config({"axis_permutation": [0, 1, 1, 3, 4, 5]})
    with pytest.raises(FtConfigError, match="axis_signs"):
        build_ft_config({"axis_signs": [1, 1, 2, 1, 1, 1]})
    with pytest.raises(FtConfigError, match="unknown"):
        build_ft_config({"adress": "10.0.0.1"})
    netft, serial = build_ft_config({}), build_ft_config({"backend": "serial"})
    assert (netft.counts_per_force, netft.counts_per_torque) == (1e6, 1e9)
    assert (serial.counts_per_force, serial.counts_per_torque) == (1000.0, 1000.0)


@pytest.mark.parametrize("name", ["ft_netft.yaml", "ft_serial.yaml"])
def test_shipped_parameter_files_are_valid(name: str) -> None:
    path = config_file(name)
    config = build_ft_config(yaml.safe_load(path.read_text())["/**"]["ros__parameters"])
    assert config.backend == ("netft" if "netft" in name else "serial") and config.frame_id == "ft_sensor"


def test_line_parser() -> None:
    assert parse_line(b"< 100 -200 3 0 -5 6 >\r\n") == (100, -200, 3, 0, -5, 6)
    for bad in (b"< 1 2 3 >", b"1 2 3 4 5 6", b"< 1 2 x 4 5 6 >", b"garbage"):
        with pytest.raises(ValueError):
            parse_line(bad)


def test_sequence_gaps_and_reordering_are_counted_and_never_published_out_of_order() -> None:
    processor = FtProcessor(build_ft_config({}))
    published = [s.sequence for q in (1, 2, 5, 4, 6, 6, 7) if (s := processor.process(reading(q)))]
    assert published == [1, 2, 5, 6, 7]
    assert processor.counters.lost == 1            # 3 never came; 4 came late
    assert processor.counters.reordered == 2       # the late 4 and the duplicate 6
    assert processor.process(reading(8, status=0x8000_0000)) is None
    assert processor.counters.error_status == 1
    assert processor.process(reading(9, wrench=[np.nan] * 6)) is None and processor.counters.invalid == 1


def test_sequence_wraps_around_32_bits() -> None:
    processor = FtProcessor(build_ft_config({}))
    assert processor.process(reading(2 ** 32 - 1)) is not None
    assert processor.process(reading(0)) is not None and processor.process(reading(1)) is not None
    assert processor.counters.lost == 0 and processor.counters.reordered == 0


def test_axis_map_and_rate_limit() -> None:
    config = build_ft_config({"axis_permutation": [1, 0, 2, 4, 3, 5], "axis_signs": [1, -1, 1, 1, 1, -1],
                              "publish_rate": 50.0})
    processor = FtProcessor(config)
    first = processor.process(reading(1))
    np.testing.assert_allclose(first.wrench, [-2.0, -1.5, 3.25, -0.05, 0.1, -0.02])
    assert processor.process(reading(2)) is None        # within 20 ms of the last publication


def test_netft_values_match_the_emulator_and_tare_removes_the_offset(wait_for) -> None:
    with NetFtEmulator(lambda: TRUE_WRENCH, rate_hz=500.0, error_model=NOISE) as emulator:
        config = build_ft_config({"address": "127.0.0.1", "port": emulator.port})
        source = make_source(config)
        processor = FtProcessor(config, source.sequence_bits)
        source.open()
        try:
            samples = collect(source, processor, 100)
            mean = np.mean([s.wrench for s in samples], axis=0)
            np.testing.assert_allclose(mean, TRUE_WRENCH + emulator.measured.offset, atol=0.01)
            # Tare while "unloaded": the known true wrench acts as the unloaded reading here.
            future = processor.request_tare(0.1)
            collect(source, processor, 200, timeout=0.5)
            assert future.done()
            after = np.mean([s.wrench for s in collect(source, processor, 100)], axis=0)
            np.testing.assert_allclose(after, np.zeros(6), atol=0.01)
        finally:
            source.close()
        assert wait_for(lambda: not emulator.streaming, 2.0)      # the driver stopped the stream on close


def test_netft_stream_starts_even_when_the_sensor_comes_up_after_the_driver() -> None:
    """The start command is repeated after a silence: a sensor (or simulated rig) that starts listening
    after the driver asked for the stream still streams to it."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:       # a port nobody listens on yet
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    source = NetFtSource("127.0.0.1", port)
    source.open()
    try:
        silent_until = time.monotonic() + 1.5
        while time.monotonic() < silent_until:
            assert source.read(0.05) is None
        with NetFtEmulator(lambda: TRUE_WRENCH, port=port, rate_hz=500.0, error_model=NOISE):
            deadline = time.monotonic() + 5.0
            reading = None
            while reading is None and time.monotonic() < deadline:
                reading = source.read(0.05)
            assert reading is not None, "no record after the sensor came up"
            assert source.restarts >= 1
    finally:
        source.close()


def test_netft_sensor_side_bias_command() -> None:
    with NetFtEmulator(lambda: TRUE_WRENCH, rate_hz=500.0, error_model=NOISE) as emulator:
        config = build_ft_config({"address": "127.0.0.1", "port": emulator.port})
        source = make_source(config)
        processor = FtProcessor(config, source.sequence_bits)
        source.open()
        try:
            collect(source, processor, 10)
            biased_at = time.monotonic()
            source.bias()
            samples = collect(source, processor, 150)
            # records already on their way when the bias was set are not biased yet; skip 20 ms of them
            after = np.mean([s.wrench for s in samples if s.stamp > biased_at + 0.02], axis=0)
            np.testing.assert_allclose(after, np.zeros(6), atol=0.03)
        finally:
            source.close()


def test_netft_lost_and_reordered_records_are_counted() -> None:
    faults = FtFaults(drop_rate=0.05, reorder_rate=0.05, error_status_rate=0.02, seed=11)
    with NetFtEmulator(lambda: TRUE_WRENCH, rate_hz=1000.0, error_model=FtErrorModel.ideal(), faults=faults) as emu:
        config = build_ft_config({"address": "127.0.0.1", "port": emu.port})
        source = make_source(config)
        processor = FtProcessor(config, source.sequence_bits)
        source.open()
        try:
            samples = collect(source, processor, 400)
        finally:
            source.close()
    sequences = [s.sequence for s in samples]
    assert sequences == sorted(sequences) and len(set(sequences)) == len(sequences)
    injected = emu.fault_counters
    c = processor.counters
    assert c.reordered > 0 and c.lost > 0 and c.error_status > 0
    assert c.error_status <= injected["error_status"]
    # A record the sensor dropped is lost; a held-back record arrives late: reordered, not lost.
    assert 0 < c.lost <= injected["dropped"]
    assert 0 < c.reordered <= injected["reordered"]
    assert all(np.allclose(s.wrench, TRUE_WRENCH, atol=1e-6) for s in samples)     # no bad value published


def test_serial_sensor_values_and_garbage_lines() -> None:
    faults = FtFaults(garbage_line_rate=0.05, seed=5)
    with SerialFtEmulator(lambda: TRUE_WRENCH, rate_hz=200.0, error_model=NOISE, faults=faults) as emulator:
        config = build_ft_config({"backend": "serial", "device": emulator.port_path})
        source = make_source(config)
        processor = FtProcessor(config, source.sequence_bits)
        source.open()
        try:
            samples = collect(source, processor, 150)
        finally:
            source.close()
        offset = emulator.measured.offset
    assert len(samples) == 150
    np.testing.assert_allclose(np.mean([s.wrench for s in samples], axis=0), TRUE_WRENCH + offset, atol=0.01)
    assert source.malformed > 0


def test_unreachable_sources_raise_clear_errors() -> None:
    with pytest.raises(FtSourceError, match="/dev/no-such-ft"):
        make_source(build_ft_config({"backend": "serial", "device": "/dev/no-such-ft"})).open()
    source = NetFtSource("127.0.0.1", 9)   # discard port: nobody streams
    source.open()
    try:
        assert source.read(0.05) is None
    finally:
        source.close()


def test_stale_data_is_detected() -> None:
    processor = FtProcessor(build_ft_config({"stale_timeout": 0.1}))
    assert processor.is_stale()                                  # nothing received yet
    raw = reading(1)
    processor.process(raw)
    assert not processor.is_stale(raw.received + 0.05)
    assert processor.is_stale(raw.received + 0.2)
    processor.process(reading(2, status=0x8000_0000))             # an error record does not refresh it
    assert processor.is_stale(raw.received + 0.2)
