"""The system tests' re-run rule (conftest.LiveAttempts): a void live phase runs again only when the host stall
probe saw the machine itself stop meanwhile, and at most three attempts in all."""

from __future__ import annotations

import pytest


class ProbeWith:
    """A stand-in probe that saw one stop of ``stop_ms`` at Unix time ``at``."""

    def __init__(self, at: float, stop_ms: float) -> None:
        self.at, self.stop_ms = at, stop_ms

    def worst_between(self, start: float, end: float) -> float:
        return self.stop_ms if start <= self.at <= end else 0.0


def voiding_phase(live, calls: list[int], valid_from: int, start: float = 100.0, end: float = 110.0):
    def phase() -> str:
        calls.append(1)
        if len(calls) < valid_from:
            live.void("a driver tripped", start, end, episode=f"episode_{len(calls)}")
        return "scored"
    return phase


def test_a_void_without_a_host_stop_fails_at_once(live) -> None:
    live.probe = ProbeWith(at=105.0, stop_ms=40.0)              # throttling-sized: the graph's own fault
    calls: list[int] = []
    set_aside: list[str] = []
    with pytest.raises(AssertionError, match=r"a driver tripped.*attempt 1 .*40 ms"):
        live.run(voiding_phase(live, calls, valid_from=2), "the phase", lambda void: set_aside.append(void.episode))
    assert len(calls) == 1 and set_aside == ["episode_1"]


def test_a_void_while_the_host_stopped_runs_again(live) -> None:
    live.probe = ProbeWith(at=99.5, stop_ms=480.0)              # began just before the window: the trip's lead
    calls: list[int] = []
    assert live.run(voiding_phase(live, calls, valid_from=2), "the phase") == "scored"
    assert len(calls) == 2 and len(live.voided) == 1 and "480 ms" in live.voided[0]


def test_a_stop_longer_than_the_rigs_pace_margin_reported_late_runs_again(live) -> None:
    # a 58 ms stop 2.2 s before the window: the rig's pace ERROR, published once a second and held 1.5 s,
    # still stood when the episode began
    live.probe = ProbeWith(at=97.8, stop_ms=58.5)
    calls: list[int] = []
    assert live.run(voiding_phase(live, calls, valid_from=2), "the phase") == "scored"
    assert len(calls) == 2 and "58 ms" in live.voided[0]


def test_a_stop_no_longer_than_throttling_could_cause_does_not_excuse(live) -> None:
    live.probe = ProbeWith(at=105.0, stop_ms=50.0)
    with pytest.raises(AssertionError, match="attempt 1 of the phase"):
        live.run(voiding_phase(live, [], valid_from=2), "the phase")


def test_a_host_stop_outside_the_phase_does_not_excuse_it(live) -> None:
    live.probe = ProbeWith(at=50.0, stop_ms=900.0)
    with pytest.raises(AssertionError, match="a driver tripped"):
        live.run(voiding_phase(live, [], valid_from=2), "the phase")


def test_three_attempts_at_most(live) -> None:
    live.probe = ProbeWith(at=105.0, stop_ms=600.0)
    calls: list[int] = []
    with pytest.raises(AssertionError, match="attempt 3 of the phase"):
        live.run(voiding_phase(live, calls, valid_from=10), "the phase")
    assert len(calls) == 3 and len(live.voided) == 2
