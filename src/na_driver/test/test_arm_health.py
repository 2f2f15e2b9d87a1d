"""HealthMonitor: datasheet margins, key/values and the near-stall WARN (oracles: datasheet figures by hand); the
silence that trips a servo (oracle: the read times written here)."""

from __future__ import annotations

from na_common.diagnostics import ERROR, OK, WARN
from na_description import load_spec, sts3215
from na_description.datasheet_margins import datasheet_reference
from na_driver.arm_health import HealthMonitor


def monitor(spec_name: str | None = None, **kwargs) -> HealthMonitor:
    spec = load_spec(spec_name)
    health = HealthMonitor(tuple(spec.servo_ids), tuple(spec.joint_names), 55.0, 60.0, 0.5, **kwargs)
    health.reference = datasheet_reference(spec)
    return health


def test_xm430_current_margin_and_temperature_margin_on_the_status() -> None:
    health = monitor()
    health.update_reply(1, 41.0, 0)
    health.update_effort([0.0, -1.15, 0.0, 0.0, 0.0])      # half the XM430-W350's 2.3 A stall current
    values = health.values(1)
    assert values["effort_signal"] == "current" and values["effort_margin"] == "0.50"
    assert values["temperature_limit_c"] == "80" and values["temperature_margin_c"] == "39"
    assert "2.3 A" in values["effort_datasheet"]
    assert health.status(1) == (OK, "ok")


def test_effort_near_stall_is_a_warning() -> None:
    health = monitor()
    health.update_reply(2, 40.0, 0)
    health.update_effort([0.0, 0.0, 2.07, 0.0, 0.0])       # 90 % of 2.3 A
    level, message = health.status(2)
    assert level == WARN and "90 %" in message


def test_sts3215_load_margin_and_error_bits() -> None:
    health = monitor("so101", describe_error=sts3215.decode_status)
    health.update_reply(0, 35.0, 0)
    health.update_effort([0.3, 0.0, 0.0, 0.0, 0.0, 0.0])
    values = health.values(0)
    assert values["effort_signal"] == "load" and values["effort_margin"] == "0.70"
    assert values["temperature_limit_c"] == "70" and values["hardware_error_status"] == "0x00"


def test_without_a_reference_no_margins_are_reported() -> None:
    spec = load_spec()
    health = HealthMonitor(tuple(spec.servo_ids), tuple(spec.joint_names), 55.0, 60.0, 0.5)
    health.update_effort([5.0] * spec.n_motors)
    assert "effort_margin" not in health.values(0) and health.status(0) == (OK, "ok")


def test_silence_counts_from_the_first_unanswered_read_not_the_last_reply() -> None:
    health = monitor()                                      # error timeout 0.5 s
    health.update_reply(2, 40.0, 0)                         # a reply, then nothing asked for a long while
    health.missed(2, asked_at=3.0)                          # then one read missed
    assert health.check_timeouts(3.01) == [] and health.status(2) == (OK, "ok")
    health.missed(2, asked_at=3.2)
    assert health.check_timeouts(3.45) == []                # 0.45 s of unanswered reads
    health.missed(2, asked_at=3.45)
    events = health.check_timeouts(3.56)
    assert [(e.level, e.servo_id, e.trip) for e in events] == [(ERROR, 13, True)]
    assert "no valid reply for 0.56 s to 3 read(s)" in events[0].message
    assert health.tripped and health.status(2)[0] == ERROR


def test_a_reply_forgets_the_unanswered_reads() -> None:
    health = monitor()
    health.missed(0, asked_at=1.0)
    health.update_reply(0, 40.0, 0)
    health.missed(0, asked_at=1.7)
    assert health.check_timeouts(2.1) == []                 # 0.4 s since the first read missed after the reply
    assert "to 1 read(s)" in health.check_timeouts(2.3)[0].message
