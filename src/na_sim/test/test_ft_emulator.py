"""F/T emulators: Net F/T RDT over UDP with a raw socket client, ASCII lines over a pty with pyserial."""

from __future__ import annotations

import itertools
import socket
import struct
import time

import numpy as np
import pytest
import serial

from na_sim.faults import FtFaults
from na_sim.ft_emulator import (
    FtErrorModel,
    MeasuredWrench,
    NetFtEmulator,
    SerialFtEmulator,
    format_serial_line,
    parse_serial_line,
)

# The Net F/T RDT wire format written out here from the protocol description (not imported from the
# emulator or na_common), so the test checks the emulator against the protocol, not against itself.
RDT_HEADER = 0x1234
CMD_STOP, CMD_START_STREAMING, CMD_SET_SOFTWARE_BIAS = 0x0000, 0x0002, 0x0042
RDT_REQUEST = struct.Struct(">HHI")
RDT_RECORD = struct.Struct(">III6i")
RDT_STATUS_ERROR = 1 << 31

WRENCH = np.array([1.5, -2.25, 9.81, 0.125, -0.0625, 0.01])


@pytest.fixture
def udp_client():
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.settimeout(1.0)
    yield sock
    sock.close()


def _request(sock, emulator, command: int, count: int = 0) -> None:
    sock.sendto(RDT_REQUEST.pack(RDT_HEADER, command, count), emulator.address)


def _records(sock, count: int) -> list[tuple[int, ...]]:
    return [RDT_RECORD.unpack(sock.recv(64)) for _ in range(count)]


def _discard_buffered(sock) -> None:
    """Throw away every record already waiting in the socket buffer."""
    sock.setblocking(False)
    try:
        while True:
            sock.recv(64)
    except BlockingIOError:
        pass
    finally:
        sock.settimeout(1.0)


def _drain(sock, quiet_s: float = 0.1) -> int:
    """Receive until nothing arrives for ``quiet_s``; returns how many records came."""
    sock.settimeout(quiet_s)
    received = 0
    try:
        while True:
            sock.recv(64)
            received += 1
    except TimeoutError:
        return received
    finally:
        sock.settimeout(1.0)


def test_counted_stream_has_increasing_sequence_and_exact_scale(udp_client):
    with NetFtEmulator(lambda: WRENCH, error_model=FtErrorModel.ideal()) as ft:
        _request(udp_client, ft, CMD_START_STREAMING, 40)
        records = _records(udp_client, 40)
        assert _drain(udp_client) == 0                              # exactly ``count`` records
    sequences = [r[0] for r in records]
    assert sequences == list(range(sequences[0], sequences[0] + 40))
    assert all(b[1] >= a[1] for a, b in itertools.pairwise(records))   # ft_sequence
    assert {r[2] for r in records} == {0}
    expected = np.rint(WRENCH * np.array([1e6] * 3 + [1e9] * 3))
    np.testing.assert_array_equal(np.array(records[-1][3:]), expected)


def test_counts_per_unit_are_configurable(udp_client):
    with NetFtEmulator(lambda: WRENCH, counts_per_force=1000, counts_per_torque=2000,
                       error_model=FtErrorModel.ideal()) as ft:
        _request(udp_client, ft, CMD_START_STREAMING, 1)
        record = _records(udp_client, 1)[0]
    np.testing.assert_array_equal(record[3:], np.rint(WRENCH * np.array([1000] * 3 + [2000] * 3)))


def test_stream_rate_start_stop_and_bias(udp_client, wait_for):
    with NetFtEmulator(lambda: WRENCH, rate_hz=500, error_model=FtErrorModel(seed=1)) as ft:
        _request(udp_client, ft, CMD_START_STREAMING, 0)
        start = time.monotonic()
        records = _records(udp_client, 100)
        rate = 99 / (time.monotonic() - start)
        assert 350 < rate < 650
        raw = np.array([r[3:] for r in records], dtype=float) / np.array([1e6] * 3 + [1e9] * 3)
        assert np.abs(raw.mean(axis=0)[:3] - WRENCH[:3]).max() > 1e-3      # offset: tare matters
        assert raw.std(axis=0)[:3].min() > 0.01                             # noise
        _request(udp_client, ft, CMD_SET_SOFTWARE_BIAS)
        assert wait_for(lambda: ft.stats["bias"] == 1, 2.0)
        _discard_buffered(udp_client)
        biased = np.array([r[3:6] for r in _records(udp_client, 50)], dtype=float) / 1e6
        assert np.abs(biased.mean(axis=0)).max() < 0.1                      # near zero after bias
        _request(udp_client, ft, CMD_STOP)
        assert wait_for(lambda: not ft.streaming, 2.0)
        _discard_buffered(udp_client)
        assert _drain(udp_client, 0.1) == 0                                 # nothing after stop
        _request(udp_client, ft, CMD_START_STREAMING, 0)
        assert len(_records(udp_client, 5)) == 5                            # restarts
        assert ft.stats["start"] == 2 and ft.stats["bias"] == 1


def test_malformed_requests_are_ignored(udp_client):
    with NetFtEmulator(lambda: WRENCH) as ft:
        udp_client.sendto(b"\x12\x34\x00\x02", ft.address)                   # too short
        udp_client.sendto(RDT_REQUEST.pack(0xBEEF, CMD_START_STREAMING, 0), ft.address)
        _request(udp_client, ft, CMD_START_STREAMING, 3)
        assert len(_records(udp_client, 3)) == 3
        assert ft.stats["bad_requests"] == 2


def test_udp_faults_match_counters(udp_client):
    faults = FtFaults(drop_rate=0.1, reorder_rate=0.1, error_status_rate=0.1, seed=5)
    total = 300
    with NetFtEmulator(lambda: WRENCH, rate_hz=2000, faults=faults) as ft:
        _request(udp_client, ft, CMD_START_STREAMING, total)
        received = []
        udp_client.settimeout(0.5)
        try:
            while True:
                received.append(RDT_RECORD.unpack(udp_client.recv(64)))
        except TimeoutError:
            pass
        counters = ft.fault_counters
    sequences = [r[0] for r in received]
    out_of_order = sum(b < a for a, b in itertools.pairwise(sequences))
    assert sorted(sequences) == sorted(set(sequences))                     # no duplicates
    assert total - len(sequences) == counters.get("dropped", 0)            # every gap is an injected drop
    assert out_of_order == counters.get("reordered", 0)
    flagged = counters.get("error_status", 0)
    assert flagged - counters.get("dropped", 0) <= sum(r[2] == RDT_STATUS_ERROR for r in received) <= flagged
    assert 10 < counters.get("dropped", 0) < 60


def test_serial_lines_parse_at_about_200_hz_with_noise_and_offset():
    with SerialFtEmulator(lambda: WRENCH, error_model=FtErrorModel(seed=2)) as sensor, \
            serial.Serial(sensor.port_path, 115200, timeout=1.0) as port:
        port.reset_input_buffer()
        port.readline()                                                     # maybe partial
        start = time.monotonic()
        lines = [port.readline() for _ in range(60)]
        rate = 59 / (time.monotonic() - start)
        offset = sensor.measured.offset
    assert all(line.startswith(b"< ") and line.endswith(b" >\r\n") for line in lines)
    readings = np.array([parse_serial_line(line) for line in lines])
    assert 140 < rate < 260
    assert readings.std(axis=0)[:3].min() > 0.01                            # noise
    np.testing.assert_allclose(readings.mean(axis=0)[:3], WRENCH[:3] + offset[:3], atol=0.05)
    assert np.abs(offset[:3]).max() > 0.05                                  # offset large enough to need a tare


def test_serial_garbage_lines_are_counted():
    with SerialFtEmulator(lambda: WRENCH, rate_hz=400, faults=FtFaults(garbage_line_rate=0.3, seed=4)) as sensor, \
            serial.Serial(sensor.port_path, 115200, timeout=1.0) as port:
        port.reset_input_buffer()
        port.readline()
        before = sensor.fault_counters.get("garbage_lines", 0)
        lines = [port.readline() for _ in range(80)]
        after = sensor.fault_counters.get("garbage_lines", 0)
    bad = 0
    for line in lines:
        try:
            parse_serial_line(line)
        except ValueError:
            bad += 1
    # Garbage lines are the only unparsable ones; the count may include one sent before/after the window.
    assert after - before - 1 <= bad <= after - before + 1
    assert 8 < bad < 45


def test_line_format_and_parser_round_trip():
    line = format_serial_line(np.array([1.0, -0.0025, 12.3456, 0.5, -0.001, 0.0]))
    assert line == b"< 1000 -2 12346 500 -1 0 >\r\n"
    np.testing.assert_allclose(parse_serial_line(line), [1.0, -0.002, 12.346, 0.5, -0.001, 0.0])
    with pytest.raises(ValueError):
        parse_serial_line(b"< 1 2 3 >\r\n")


def test_offset_drifts_over_time_and_bad_sources_are_refused():
    measured = MeasuredWrench(lambda: np.zeros(6), FtErrorModel(force_noise_n=0.0, torque_noise_nm=0.0, seed=9))
    first = measured.sample(now=0.0)
    later = measured.sample(now=100.0)
    assert np.abs(later - first)[:3].max() > 0.01
    broken = MeasuredWrench(lambda: np.zeros(3))
    with pytest.raises(ValueError):
        broken.sample()


def test_a_failing_wrench_source_is_counted_and_streaming_recovers(udp_client, wait_for):
    broken = {"now": True}

    def source() -> np.ndarray:
        if broken["now"]:
            raise RuntimeError("physics not ready")
        return WRENCH

    with NetFtEmulator(source, error_model=FtErrorModel.ideal()) as ft:
        _request(udp_client, ft, CMD_START_STREAMING, 0)
        assert wait_for(lambda: ft.stats["tick_errors"] >= 3, 2.0)
        broken["now"] = False
        record = _records(udp_client, 1)[0]
    assert record[5] == round(WRENCH[2] * 1e6)


def test_unread_serial_backlog_is_flushed(wait_for):
    with SerialFtEmulator(lambda: WRENCH, rate_hz=1000) as sensor:
        assert wait_for(lambda: sensor.stats["backlog_flushes"] >= 1, 3.0)     # nobody has the port open
        with serial.Serial(sensor.port_path, 115200, timeout=1.0) as port:
            assert port.in_waiting <= 2048
            port.readline()
            assert port.readline().endswith(b" >\r\n")
