"""The condition monitor: evidence as a one-sided cumulative sum of excess restricted score, states, latching."""

import numpy as np
import pytest

from na_common.condition_monitor import ConditionMonitor, MonitorSettings, run_monitor

pytestmark = pytest.mark.unit

NOMINAL, SUSPECT, DEGRADED = 0, 1, 2      # written out: the test does not take them from the module
SETTINGS = MonitorSettings(drift=0.5, suspect_s=0.5, degraded_s=2.0, max_frame_s=0.1)


def test_a_nominal_motor_gathers_no_evidence():
    t = np.arange(2000) * 0.01
    evidence, state, decided = run_monitor(t, np.column_stack([np.full(2000, 0.9), np.full(2000, 0.6)]), SETTINGS)
    assert np.all(evidence == 0.0) and np.all(state == NOMINAL) and np.all(np.isnan(decided))


def test_a_restricted_motor_is_decided_when_its_evidence_reaches_the_threshold():
    # score 0 on motor 1: each 10 ms frame adds (1 - 0) - 0.5 = 0.5 per s, i.e. 5 ms; 2 s of evidence after 400 frames
    n = 600
    t = 3.0 + np.arange(n) * 0.01
    scores = np.column_stack([np.ones(n), np.zeros(n)])
    evidence, state, decided = run_monitor(t, scores, SETTINGS)
    assert evidence[100, 1] == pytest.approx(0.5)
    assert state[99, 1] == NOMINAL and state[100, 1] == SUSPECT
    assert state[399, 1] == SUSPECT and state[400, 1] == DEGRADED
    assert decided[1] == pytest.approx(4.0)
    assert np.isnan(decided[0]) and np.all(state[:, 0] == NOMINAL)


def test_suspect_falls_back_but_degraded_latches():
    monitor = ConditionMonitor(1, SETTINGS)
    t = 0.0
    for _ in range(150):                    # 1.5 s of score 0: evidence 0.745 s -> suspect
        monitor.update(t, [0.0])
        t += 0.01
    assert monitor.state[0] == SUSPECT
    for _ in range(200):                    # 2 s of score 1 (restricted score 0): evidence back to 0
        monitor.update(t, [1.0])
        t += 0.01
    assert monitor.state[0] == NOMINAL and monitor.evidence[0] == 0.0
    for _ in range(500):
        monitor.update(t, [0.0])
        t += 0.01
    assert monitor.state[0] == DEGRADED
    for _ in range(1000):
        monitor.update(t, [1.0])
        t += 0.01
    assert monitor.state[0] == DEGRADED and monitor.evidence[0] == 0.0
    monitor.reset()
    assert monitor.state[0] == NOMINAL


def test_a_pause_counts_at_most_max_frame_s_and_a_nan_score_adds_nothing():
    monitor = ConditionMonitor(2, SETTINGS)
    monitor.update(0.0, [0.0, 0.0])
    monitor.update(10.0, [0.0, np.nan])           # 10 s later: counted as 0.1 s
    assert monitor.evidence == pytest.approx([0.05, 0.0])


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="expected 2"):
        ConditionMonitor(2).update(0.0, [1.0])
    with pytest.raises(ValueError, match="drift"):
        MonitorSettings(drift=1.0)
    with pytest.raises(ValueError, match="suspect_s"):
        MonitorSettings(suspect_s=3.0, degraded_s=2.0)


def test_frames_in_contact_add_no_evidence_and_keep_what_there_is():
    # score 0 throughout (0.5 s of evidence per s at drift 0.5); frames 100-299 in contact (probability 0.9):
    # the evidence stays at 0.5 s through them and the decision (2 s of evidence) comes 2 s later than without
    n = 800
    t = np.arange(n) * 0.01
    scores = np.zeros((n, 1))
    contact = np.zeros(n)
    contact[100:300] = 0.9
    gated = MonitorSettings(drift=0.5, suspect_s=0.5, degraded_s=2.0, contact_limit=0.5)
    evidence, _, decided = run_monitor(t, scores, gated, contact)
    assert evidence[99, 0] == pytest.approx(0.495)
    assert np.allclose(evidence[100:300, 0], evidence[99, 0])
    assert decided[0] == pytest.approx(6.0)
    _, _, ungated = run_monitor(t, scores, gated)              # contact not known: every frame counts
    assert ungated[0] == pytest.approx(4.0)


def test_a_contact_limit_of_one_gates_nothing_and_streaming_equals_batch():
    n = 500
    t = np.arange(n) * 0.01
    rng = np.random.default_rng(5)
    scores = rng.uniform(0.0, 1.0, (n, 2))
    contact = rng.uniform(0.0, 1.0, n)
    everything = MonitorSettings(drift=0.5, suspect_s=0.5, degraded_s=2.0, contact_limit=1.0)
    assert np.array_equal(run_monitor(t, scores, everything, contact)[0], run_monitor(t, scores, everything)[0])
    gated = MonitorSettings(drift=0.5, suspect_s=0.5, degraded_s=2.0, contact_limit=0.5)
    batch, _, _ = run_monitor(t, scores, gated, contact)
    monitor = ConditionMonitor(2, gated)
    for k in range(n):
        monitor.update(t[k], scores[k], float(contact[k]))
    assert np.allclose(monitor.evidence, batch[-1])
    assert not np.allclose(batch[-1], run_monitor(t, scores, gated)[0][-1])


def test_contact_settings_and_lengths_are_checked():
    with pytest.raises(ValueError, match="contact_limit"):
        MonitorSettings(contact_limit=0.0)
    with pytest.raises(ValueError, match="contact"):
        run_monitor(np.arange(3) * 0.01, np.zeros((3, 1)), SETTINGS, np.zeros(2))
