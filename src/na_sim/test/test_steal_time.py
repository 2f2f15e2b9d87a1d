"""Steal time read from a /proc/stat-shaped file, and the worst CPU's steal over an interval."""

import os

import pytest

from na_sim.steal_time import StealHistory, describe_steal, read_steal

pytestmark = pytest.mark.unit

TICK = os.sysconf("SC_CLK_TCK")


def _stat(steal0: int, steal1: int) -> str:
    return (f"cpu  10 0 5 100 0 0 0 {steal0 + steal1} 0 0\n"
            f"cpu0 5 0 2 50 0 0 0 {steal0} 0 0\n"
            f"cpu1 5 0 3 50 0 0 0 {steal1} 0 0\n"
            "intr 1 2 3\n")


def test_read_steal_gives_each_cpu_in_seconds(tmp_path):
    path = tmp_path / "stat"
    path.write_text(_stat(3, 40))
    assert read_steal(path) == pytest.approx((3 / TICK, 40 / TICK))


def test_read_steal_without_the_file_is_none(tmp_path):
    assert read_steal(tmp_path / "missing") is None


def test_worst_cpu_steal_uses_samples_around_the_interval():
    readings = iter([(0.0, 1.0), (0.0, 1.0), (0.25, 1.05), (0.3, 1.1)])
    history = StealHistory(read=lambda: next(readings))
    for t in (10.0, 10.1, 10.2, 10.3):
        history.sample(now=t)
    # interval 10.15..10.25: samples at 10.1 and 10.3 bracket it; CPU 0 had 0.3 s, CPU 1 had 0.1 s
    assert history.worst_cpu_steal(10.15, 10.25) == pytest.approx(0.3)
    assert history.worst_cpu_steal(9.0, 10.25) is None          # nothing sampled before the start
    assert history.worst_cpu_steal(10.15, 11.0) is None         # nor after the end


def test_describe_steal_names_milliseconds_or_unknown():
    assert "250 ms" in describe_steal(0.25)
    assert "unknown" in describe_steal(None)
