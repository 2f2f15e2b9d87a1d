"""The kernel's real-time budget read from files shaped like /proc/sys/kernel/sched_rt_*_us, and a thread's
share of a CPU over a window, from readings whose on-CPU times the test sets."""

import math

import pytest

from na_sim.rt_budget import CpuShare, describe_cpu_share, read_rt_budget
from na_sim.thread_clock import ThreadTimes

pytestmark = pytest.mark.unit


def _budget_files(tmp_path, runtime: str, period: str):
    runtime_path, period_path = tmp_path / "sched_rt_runtime_us", tmp_path / "sched_rt_period_us"
    runtime_path.write_text(runtime)
    period_path.write_text(period)
    return runtime_path, period_path


def test_the_default_budget_is_950_of_every_1000_ms(tmp_path):
    budget = read_rt_budget(*_budget_files(tmp_path, "950000\n", "1000000\n"))
    assert budget.runtime_s == pytest.approx(0.95) and budget.period_s == pytest.approx(1.0)
    assert budget.share == pytest.approx(0.95)


def test_an_unlimited_or_unreadable_budget_is_none(tmp_path):
    assert read_rt_budget(*_budget_files(tmp_path, "-1\n", "1000000\n")) is None
    assert read_rt_budget(tmp_path / "missing", tmp_path / "missing_too") is None
    assert read_rt_budget(*_budget_files(tmp_path, "lots\n", "1000000\n")) is None


def test_the_share_covers_the_last_window_only():
    share = CpuShare(window_s=1.0, max_readings=100)
    assert math.isnan(share.share()[0])
    # 2 s at 30 % of a CPU, then 1 s at 90 %: readings every 0.1 s.
    cpu = 0.0
    for k in range(31):
        share.add(ThreadTimes(wall=k * 0.1, cpu=cpu, waited=0.0))
        cpu += 0.03 if k < 20 else 0.09
    fraction, span = share.share()
    assert span == pytest.approx(1.0)
    assert fraction == pytest.approx(0.9)


def test_a_short_history_gives_its_own_span():
    share = CpuShare(window_s=1.0, max_readings=100)
    share.add(ThreadTimes(wall=5.0, cpu=1.0, waited=0.0))
    share.add(ThreadTimes(wall=5.4, cpu=1.2, waited=0.0))
    assert share.share() == pytest.approx((0.5, 0.4))


def test_the_description_puts_the_share_beside_the_budget(tmp_path):
    budget = read_rt_budget(*_budget_files(tmp_path, "950000", "1000000"))
    text = describe_cpu_share(0.97, 1.0, budget)
    assert "97 %" in text and "1000 ms" in text and "950 ms of every 1000 ms" in text
    assert "sched_rt_runtime_us" not in describe_cpu_share(0.5, 1.0, None)
    assert "not known" in describe_cpu_share(float("nan"), 0.0, budget)
