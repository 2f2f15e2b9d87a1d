"""The condition monitor scored at the frame, window and episode levels, with decision times and false alarms."""

from __future__ import annotations

import numpy as np
import pytest

from na_common.condition_monitor import MonitorSettings
from na_training.condition_levels import monitor_levels
from na_training.episode import NOMINAL, RESTRICTED
from na_training.synthetic import SyntheticActuator, synthetic_episode

pytestmark = pytest.mark.unit

ACTUATOR = SyntheticActuator(slope=np.array([1.7, 1.8, 1.6, 1.9]), offset=np.array([0.02, -0.03, 0.01, 0.0]))
JOINT3 = 2
FRAMES = 600
SETTINGS = MonitorSettings(drift=0.5, suspect_s=0.25, degraded_s=1.0)


@pytest.fixture(scope="module")
def episodes():
    """Two restricted and three nominal episodes of 600 frames."""
    made = [synthetic_episode(FRAMES, seed=s, actuator=ACTUATOR, restriction_stiffness=0.6 if s < 2 else 0.0,
                              episode_id=f"ep{s}") for s in range(5)]
    assert [e.condition_label for e in made] == [RESTRICTED, RESTRICTED, NOMINAL, NOMINAL, NOMINAL]
    return made


def _scores(restricted_from: int | None, n_motors: int = 5, contact_from: int | None = None) -> dict:
    """The model's outputs: condition scores 1 everywhere, 0 on joint 3 from frame ``restricted_from`` on; contact
    probability 0, or 0.9 from frame ``contact_from`` on (None: no contact output at all)."""
    scores = np.ones((FRAMES, n_motors))
    if restricted_from is not None:
        scores[restricted_from:, JOINT3] = 0.0
    outputs = {"condition": scores}
    if contact_from is not None:
        outputs["contact_prob"] = np.where(np.arange(FRAMES) >= contact_from, 0.9, 0.0)
    return outputs


def test_levels_of_a_monitor_that_decides_halfway(episodes):
    dt = float(np.median(np.diff(episodes[0].time)))
    labelled = [(episodes[0], _scores(300)), (episodes[1], _scores(300)), (episodes[2], _scores(None)),
                (episodes[3], _scores(None))]
    result = monitor_levels(labelled, [(e, s) for e, s in labelled if e.condition_label == NOMINAL] +
                            [(episodes[4], _scores(None))], JOINT3, SETTINGS)
    # evidence grows 0.5 per second of score 0: degraded 2 s after frame 300
    decide_frame = 300 + int(np.ceil(1.0 / (0.5 * dt)))
    assert result["decision_time_s"]["decided"] == 2
    assert result["decision_time_s"]["median"] == pytest.approx(episodes[0].time[decide_frame] - episodes[0].time[0],
                                                                abs=2 * dt)
    assert result["episode"]["accuracy"] == 1.0 and result["episode"]["misclassified"] == 0
    # windows end at frames 63, 95, ..., 575 (17 per episode): restricted ones are degraded from decide_frame on
    ends = np.arange(0, FRAMES - 64 + 1, 32) + 63
    expected_recall = np.mean(ends >= decide_frame)
    assert result["window"]["windows"] == 4 * ends.size
    assert result["window"]["recall"] == pytest.approx(expected_recall, abs=1.0 / ends.size)
    assert result["window"]["precision"] == 1.0
    assert result["false_alarms"]["alarms"] == 0
    assert result["false_alarms"]["per_10_min"] == 0.0


def test_a_nominal_episode_that_reaches_degraded_is_a_false_alarm(episodes):
    nominal = [(episodes[2], _scores(100)), (episodes[3], _scores(None)), (episodes[4], _scores(None))]
    result = monitor_levels([], nominal, JOINT3, SETTINGS)
    seconds = sum(float(e.time[-1] - e.time[0]) for e, _ in nominal)
    assert result["false_alarms"]["alarms"] == 1
    assert result["false_alarms"]["per_10_min"] == pytest.approx(600.0 / seconds)
    assert "window" not in result


def test_low_scores_while_the_model_sees_contact_are_no_false_alarm(episodes):
    """A grasp or a push can lower the condition score; frames in contact add no evidence unless the limit is 1."""
    nominal = [(episodes[2], _scores(100, contact_from=100)), (episodes[3], _scores(None, contact_from=0))]
    assert monitor_levels([], nominal, JOINT3, SETTINGS)["false_alarms"]["alarms"] == 0
    every_frame = MonitorSettings(drift=0.5, suspect_s=0.25, degraded_s=1.0, contact_limit=1.0)
    assert monitor_levels([], nominal, JOINT3, every_frame)["false_alarms"]["alarms"] == 1
    in_contact_later = [(episodes[2], _scores(100, contact_from=500))]     # 400 frames of evidence first
    assert monitor_levels([], in_contact_later, JOINT3, SETTINGS)["false_alarms"]["alarms"] == 1
