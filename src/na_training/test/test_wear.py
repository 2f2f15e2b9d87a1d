"""The wear monitor on synthetic arms whose friction the test sets: doubled friction is decided degraded, the
healthy arm at other seeds is not, frames in contact carry no evidence, and a saved reference decides the same."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from na_common.condition_monitor import EvidenceMonitor
from na_description import load_spec
from na_description.wear import WearFrames, WearReference, WearSettings, standardised_excess
from na_training.synthetic import SyntheticActuator, synthetic_episode
from na_training.wear import WearEvidence

pytestmark = pytest.mark.unit

FRAMES = 900                       # 15 s at the spec's 60 Hz
NOISE_A = 0.03                     # current noise of the recording (A)
DEGRADED = 2                       # written out: not taken from the module under test


def _actuator(friction_factor: float) -> SyntheticActuator:
    n = load_spec().n_arm
    # a healthy arm's friction (N·m, N·m·s/rad), chosen here; a worn one multiplies it
    return SyntheticActuator(slope=np.full(n, 1.6), offset=np.zeros(n),
                             coulomb=np.full(n, 0.06 * friction_factor), stribeck=np.full(n, 0.08 * friction_factor),
                             viscous=np.full(n, 0.02 * friction_factor), stribeck_velocity=np.full(n, 0.1),
                             backlash=np.zeros(n))


def _episodes(seeds, friction_factor: float):
    return [synthetic_episode(FRAMES, seed=s, actuator=_actuator(friction_factor), current_noise=NOISE_A,
                              episode_id=f"e{s}", episode_index=s) for s in seeds]


def _no_contact(episode) -> np.ndarray:
    return np.zeros(len(episode))


@pytest.fixture(scope="module")
def fitted():
    wear = WearEvidence(load_spec())
    reference = wear.fit([(e, _no_contact(e)) for e in _episodes(range(6), 1.0)])
    return wear, reference


def test_doubled_friction_is_degraded_and_the_healthy_arm_is_not(fitted):
    wear, reference = fitted
    assert np.all(reference.degraded > 0) and np.all(np.isfinite(reference.degraded))
    for episode in _episodes(range(100, 104), 1.0):
        _, state, decided = wear.run(episode, _no_contact(episode))
        assert not np.any(state[-1] == DEGRADED), f"healthy episode {episode.name} decided degraded"
        assert np.all(np.isnan(decided))
    for episode in _episodes(range(200, 204), 2.0):
        evidence, state, decided = wear.run(episode, _no_contact(episode))
        assert np.any(state[-1] == DEGRADED), f"worn episode {episode.name}: evidence {evidence[-1]}"
        assert np.nanmin(decided) < episode.time[-1] - episode.time[0]


def test_frames_in_contact_add_no_evidence(fitted):
    wear, _ = fitted
    episode = _episodes([201], 2.0)[0]
    evidence, state, _ = wear.run(episode, np.ones(len(episode)))
    assert np.all(evidence == 0.0) and np.all(state == 0)
    # half the frames in contact: evidence only from the others, so never more than with none in contact
    half = (np.arange(len(episode)) % 2).astype(float)
    evidence_half, _, _ = wear.run(episode, half)
    evidence_none, _, _ = wear.run(episode, _no_contact(episode))
    assert evidence_half[-1].max() < evidence_none[-1].max()


def test_a_saved_reference_decides_the_same(fitted, tmp_path):
    wear, reference = fitted
    reference.save(tmp_path / "wear_reference.json")
    loaded = WearEvidence(load_spec(), WearReference.load(tmp_path / "wear_reference.json"))
    episode = _episodes([202], 2.0)[0]
    original, _, decided = wear.run(episode, _no_contact(episode))
    again, _, decided_again = loaded.run(episode, _no_contact(episode))
    np.testing.assert_allclose(again, original, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(np.isnan(decided), np.isnan(decided_again))


def test_bad_references_and_settings_are_refused(tmp_path):
    (tmp_path / "other.json").write_text('{"kind": "something-else", "version": 1}')
    with pytest.raises(ValueError, match="not a wear reference"):
        WearReference.load(tmp_path / "other.json")
    (tmp_path / "broken.json").write_text("{")
    with pytest.raises(ValueError, match="not a readable wear reference"):
        WearReference.load(tmp_path / "broken.json")
    with pytest.raises(ValueError, match="margin"):
        WearSettings(margin=0.5)
    incomplete = _banded_reference().to_json()
    del incomplete["acceleration_edges"]
    (tmp_path / "incomplete.json").write_text(json.dumps(incomplete))
    with pytest.raises(ValueError, match=r"not a complete wear reference.*acceleration_edges"):
        WearReference.load(tmp_path / "incomplete.json")
    short = _banded_reference().to_json()
    short["spread"] = [[1.0], [0.25]]                  # one spread for two bands
    (tmp_path / "short.json").write_text(json.dumps(short))
    with pytest.raises(ValueError, match="one mean and spread per acceleration band"):
        WearReference.load(tmp_path / "short.json")
    with pytest.raises(ValueError, match="no nominal episodes"):
        WearEvidence(load_spec()).fit([])


def test_a_motor_the_reference_never_moved_carries_no_evidence(fitted, tmp_path):
    _, reference = fitted
    data = reference.to_json()
    data["monitored"] = [True, True, True, False]
    partial = WearEvidence(load_spec(), WearReference.from_json(data))
    episode = _episodes([203], 2.0)[0]
    evidence, state, decided = partial.run(episode, _no_contact(episode))
    assert np.all(evidence[:, 3] == 0.0) and np.isnan(decided[3])
    assert np.all(state[-1, :3] == DEGRADED)


def test_streaming_in_batches_gives_the_numbers_of_the_whole_episode(fitted):
    wear, reference = fitted
    episode = _episodes([204], 2.0)[0]
    contact = (np.arange(len(episode)) % 7 == 0).astype(float)        # some frames in contact
    evidence, state, decided = wear.run(episode, contact)
    frames = WearFrames(load_spec(), reference.friction, reference.settings)
    monitor = EvidenceMonitor(4, reference.suspect, reference.degraded, reference.settings.max_frame_s)
    arm = {name: episode.arm(name) for name in ("position", "velocity", episode.spec.effort_signal)}
    edges = [0, 1, 2, 50, 51, 300, 777, len(episode)]                  # batches of 1, 1, 48, 1, 249, 477, ...
    for start, stop in itertools.pairwise(edges):
        w, acceleration = frames.opposing(episode.time[start:stop], arm["position"][start:stop],
                                          arm["velocity"][start:stop], arm[episode.spec.effort_signal][start:stop],
                                          episode.gripper_slide[start:stop], contact[start:stop])
        excess = standardised_excess(w, acceleration, reference)
        for t, values in zip(episode.time[start:stop], excess, strict=True):
            states = monitor.accumulate(t, values)
        np.testing.assert_allclose(monitor.evidence, evidence[stop - 1], rtol=1e-9, atol=1e-12)
        np.testing.assert_array_equal(states, state[stop - 1])
    np.testing.assert_allclose(monitor.decided_at, decided, rtol=1e-9)


def _recorded(wear, episode, nominal: bool = True):
    from na_training.monitor_cli import RecordedExcess

    return RecordedExcess(episode.index, episode.name, "circle_cw", nominal, episode.time,
                          wear.excess(episode, _no_contact(episode)))


def test_the_whole_recording_runs_in_episode_order_without_a_reset(fitted):
    from na_training.monitor_cli import continuous_wear

    wear, _ = fitted
    healthy = _episodes([105], 1.0)[0]
    worn = _episodes([205], 2.0)[0]
    worn.meta["episode_index"], healthy.meta["episode_index"] = 1, 2     # recorded worn first, listed last
    result = continuous_wear(wear, [_recorded(wear, e) for e in (healthy, worn)])
    _, _, alone = wear.run(worn, _no_contact(worn))
    assert result["degraded_at_s"] == pytest.approx(np.nanmin(alone), abs=1e-9)
    duration = (healthy.time[-1] - healthy.time[0]) + (worn.time[-1] - worn.time[0])
    assert result["operation_s"] == pytest.approx(duration, abs=0.5)
    assert result["decided_in"]["episode"] == worn.name
    assert result["decided_in"]["after_s"] == pytest.approx(np.nanmin(alone), abs=1e-9)


def test_a_decision_in_a_restricted_episode_is_named_and_left_out_of_the_nominal_run(fitted):
    """A healthy arm's recording ends with the condition experiment's restricted episodes: a decision there is
    the fault seen, not a false alarm. The report names the episode it fell in, and the run over the episodes
    labelled nominal only (the false-alarm figure) leaves it out."""
    from na_training.monitor_cli import continuous_wear

    wear, _ = fitted
    healthy = _episodes([106, 107], 1.0)
    stiff = _episodes([206], 2.0)[0]                 # stands in for a restricted episode: labelled not nominal
    stiff.meta["episode_index"] = 300                # recorded last
    sequences = [_recorded(wear, e) for e in healthy] + [_recorded(wear, stiff, nominal=False)]
    every = continuous_wear(wear, sequences)
    healthy_s = sum(e.time[-1] - e.time[0] for e in healthy)
    assert every["degraded_at_s"] > healthy_s
    assert every["decided_in"]["episode"] == stiff.name and every["decided_in"]["nominal"] is False
    assert every["decided_in"]["after_s"] == pytest.approx(every["degraded_at_s"] - healthy_s, abs=0.5)
    nominal = continuous_wear(wear, sequences, nominal_only=True)
    assert nominal["degraded_at_s"] is None and nominal["decided_in"] is None
    assert nominal["operation_s"] == pytest.approx(healthy_s, abs=0.5)
    # how close the healthy arm came: below its thresholds on every motor; a degraded motor reached its own
    healthy_shares = nominal["largest_evidence_of_threshold"]
    assert set(healthy_shares) == set(load_spec().arm_joint_names)
    assert all(0.0 <= share < 1.0 for share in healthy_shares.values())
    assert all(every["largest_evidence_of_threshold"][joint] >= 1.0 for joint in every["degraded_motors"])


def test_the_never_degraded_line_names_the_motor_that_came_closest():
    from na_training.monitor_cli import continuous_line

    run = {"operation_s": 600.0, "degraded_at_s": None, "decided_in": None,
           "largest_evidence_of_threshold": {"joint1": 0.2, "joint2": 0.71, "joint3": 0.05}}
    line = continuous_line(run, "the episodes labelled nominal only")
    assert line.endswith("never degraded (largest evidence 0.71 of its threshold, on joint2).")


def _banded_reference(version: int = 2) -> WearReference:
    """Two motors; motor 0 in two |q̈| bands split at 1 rad/s² (mean 0 / 1 N·m, spread 1 / 2 N·m), motor 1 in one
    band (mean 0.5, spread 0.25); drift 0.5. Version 1 has one band per motor (the first band's numbers)."""
    data = {"kind": "na-wear-reference", "version": version, "robot": "open_manipulator_x",
            "joint_names": ["a", "b"],
            "friction": {"slope": [1.0, 1.0], "offset": [0.0, 0.0], "coulomb": [0.0, 0.0], "stribeck": [0.0, 0.0],
                         "viscous": [0.0, 0.0], "stribeck_velocity": [0.1, 0.1], "backlash": [0.0, 0.0],
                         "backlash_velocity": 0.05},
            "mean": [[0.0, 1.0], [0.5, 0.5]], "spread": [[1.0, 2.0], [0.25, 0.25]],
            "acceleration_edges": [[1.0], [1e9]], "degraded": [3.0, 3.0],
            "settings": {"min_speed": 0.1, "contact_limit": 0.5, "drift": 0.5, "margin": 1.5,
                         "min_degraded_s": 1.0, "max_frame_s": 0.1, "acceleration_quantiles": [0.5]},
            "episodes": 1, "monitored": [True, True]}
    if version == 1:
        data["mean"], data["spread"] = [0.0, 0.5], [1.0, 0.25]
        del data["acceleration_edges"], data["settings"]["acceleration_quantiles"]
    return WearReference.from_json(data)


def test_each_frame_is_standardised_by_the_band_of_its_acceleration():
    reference = _banded_reference()
    w = np.array([[3.0, 1.0], [3.0, 1.0], [3.0, np.nan]])
    acceleration = np.array([[0.5, 0.0], [-2.0, 5.0], [1.0, 0.0]])      # |q̈| 0.5: low band; 2 and 1: high band
    excess = standardised_excess(w, acceleration, reference)
    # by hand: (3 - 0) / 1 - 0.5 = 2.5; (3 - 1) / 2 - 0.5 = 0.5; motor 1 always (1 - 0.5) / 0.25 - 0.5 = 1.5
    np.testing.assert_allclose(excess, [[2.5, 1.5], [0.5, 1.5], [0.5, np.nan]])


def test_a_reference_saved_before_the_bands_reads_as_one_band(tmp_path):
    old = _banded_reference(version=1)
    assert old.mean.shape == (2, 1) and old.acceleration_edges.shape == (2, 0)
    assert old.settings.acceleration_quantiles == ()
    excess = standardised_excess(np.array([[3.0, 1.0]]), np.array([[7.0, 7.0]]), old)
    np.testing.assert_allclose(excess, [[2.5, 1.5]])
    old.save(tmp_path / "again.json")
    again = WearReference.load(tmp_path / "again.json")
    np.testing.assert_allclose(standardised_excess(np.array([[3.0, 1.0]]), np.array([[7.0, 7.0]]), again),
                               [[2.5, 1.5]])


def test_the_fitted_reference_has_a_band_per_quantile_and_bad_bands_are_refused(fitted):
    _, reference = fitted
    quantiles = reference.settings.acceleration_quantiles
    assert reference.mean.shape == reference.spread.shape == (4, len(quantiles) + 1)
    assert reference.acceleration_edges.shape == (4, len(quantiles))
    assert np.all(np.diff(reference.acceleration_edges, axis=1) > 0)
    assert np.all(reference.spread > 0)
    with pytest.raises(ValueError, match="acceleration_quantiles"):
        WearSettings(acceleration_quantiles=(0.8, 0.5))
    with pytest.raises(ValueError, match="acceleration_quantiles"):
        WearSettings(acceleration_quantiles=(0.5, 1.0))
