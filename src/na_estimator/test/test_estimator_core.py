"""Estimator core: contract checks, provider fallback, guards, causal window, hysteresis."""

from __future__ import annotations

import json

import numpy as np
import pytest

from na_common.diagnostics import WARN
from na_description import load_spec
from na_description.features import HISTORY_LENGTH, episode_features, history_windows
from na_estimator.estimator_core import ArmInput, ContactHysteresis, EstimatorCore
from na_estimator.onnx_model import ModelLoadError, OnnxActuatorModel

SPEC = load_spec()
PERIOD = 0.01


NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]      # the arm's joints, spec order


def arm_input(stamp: float, rng: np.random.Generator) -> ArmInput:
    return ArmInput(stamp=stamp, names=NAMES, position=rng.uniform(-0.5, 0.5, 5),
                    gripper_slide=float(rng.uniform(0, 0.01)), velocity=rng.uniform(-1, 1, 5),
                    effort=rng.uniform(-0.5, 0.5, 5), input_voltage=rng.uniform(11.5, 12.1, 5),
                    temperature=rng.uniform(30, 40, 5))


def shuffled(arm: ArmInput, order: list[int]) -> ArmInput:
    """The same state as a driver would send it with its joints in another order."""
    return ArmInput(stamp=arm.stamp, names=[arm.names[k] for k in order], gripper_slide=arm.gripper_slide,
                    stale=None if arm.stale is None else arm.stale[order],
                    **{f: getattr(arm, f)[order] for f in ArmInput.ARRAYS})


def make_core(path, **kwargs) -> EstimatorCore:
    return EstimatorCore(OnnxActuatorModel(path, SPEC, providers=["CPUExecutionProvider"]), SPEC, **kwargs)


def test_provider_falls_back_to_cpu_and_says_so(contract_model) -> None:
    model = OnnxActuatorModel(contract_model, SPEC, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert model.provider.in_use == "CPUExecutionProvider"
    assert "CUDAExecutionProvider" in model.provider.describe()


@pytest.mark.parametrize(("override", "message"), [
    ({"feature_names": json.dumps(["x"] * 36)}, "feature names differ"),
    ({"joint_names": json.dumps(["a", "b", "c", "d", "e"])}, "joint names"),
    ({"schema_version": "na-features/0"}, "feature schema"),
])
def test_mismatched_model_is_refused_with_the_difference(model_builder, override, message) -> None:
    path = model_builder("bad.onnx", metadata_overrides=override)
    with pytest.raises(ModelLoadError, match=message):
        OnnxActuatorModel(path, SPEC)


def test_reordered_features_are_named(model_builder) -> None:
    from na_description.features import feature_names

    names = feature_names(SPEC)
    names[0], names[1] = names[1], names[0]
    path = model_builder("swap.onnx", metadata_overrides={"feature_names": json.dumps(names)})
    with pytest.raises(ModelLoadError, match="different order: position 0"):
        OnnxActuatorModel(path, SPEC)


def test_missing_model_file_is_a_clear_error(tmp_path) -> None:
    with pytest.raises(ModelLoadError, match="not found"):
        OnnxActuatorModel(tmp_path / "none.onnx", SPEC)


def test_streaming_estimates_equal_offline_windows(contract_model) -> None:
    """The one-frame path (window by window) gives what the vectorised training path gives."""
    core = make_core(contract_model)
    rng = np.random.default_rng(1)
    command = rng.uniform(-0.5, 0.5, 5)
    inputs = [arm_input(1.0 + k * PERIOD, rng) for k in range(20)]
    core.on_command(0.999, command, NAMES)
    streamed = [core.on_arm_state(a, now=a.stamp + 0.001) for a in inputs]
    assert all(e is not None for e in streamed)
    columns = {"goal_position": np.tile(command, (20, 1)), "position": np.stack([a.position for a in inputs]),
               "gripper_slide": np.array([a.gripper_slide for a in inputs]),
               "current": np.stack([a.effort for a in inputs]), "velocity": np.stack([a.velocity for a in inputs]),
               "input_voltage": np.stack([a.input_voltage for a in inputs]),
               "temperature": np.stack([a.temperature for a in inputs])}
    windows = history_windows(episode_features(columns, SPEC), core.model.contract.feature_mean)
    offline = core.model.infer_batch(windows)
    np.testing.assert_allclose(np.stack([e.force for e in streamed]), offline["force"], atol=1e-5)
    assert [e.window_fill for e in streamed][:HISTORY_LENGTH + 1] == [*range(1, HISTORY_LENGTH + 1), HISTORY_LENGTH]


def test_bad_input_never_becomes_an_estimate(contract_model) -> None:
    core = make_core(contract_model, stale_timeout=0.05)
    rng = np.random.default_rng(2)
    good = arm_input(1.0, rng)
    assert core.on_arm_state(good, now=1.0) is None          # no command yet
    assert core.counters.no_command == 1
    core.on_command(0.99, np.zeros(5), NAMES)
    assert core.on_arm_state(good, now=1.001) is not None
    nan = arm_input(1.01, rng)
    nan.effort[2] = np.nan
    assert core.on_arm_state(nan, now=1.011) is None
    volts = arm_input(1.02, rng)
    volts.input_voltage[:] = 40.0
    assert core.on_arm_state(volts, now=1.021) is None
    flagged = arm_input(1.03, rng)
    flagged.stale = np.array([False, True, False, False, False])
    assert core.on_arm_state(flagged, now=1.031) is None
    assert core.counters.invalid_input == 2 and core.counters.stale_servo == 1
    assert "['joint2'] stale" in core.last_refusal
    assert core.on_arm_state(arm_input(1.0, rng), now=1.04) is None   # not after the last stamp, fresh
    assert core.counters.out_of_order == 1
    assert core.on_arm_state(arm_input(1.04, rng), now=1.2) is None   # 160 ms old on arrival
    assert core.counters.stale_input == 1
    assert core.counters.estimates == 1
    level, message = core.status()
    assert level == WARN and "6 inputs refused" in message and "0.160 s old" in message


def test_names_in_another_order_give_the_same_estimate(contract_model) -> None:
    rng = np.random.default_rng(4)
    states = [arm_input(1.0 + k * PERIOD, rng) for k in range(12)]
    command = rng.uniform(-0.5, 0.5, 5)
    order = [4, 2, 0, 3, 1]
    in_spec_order, reordered = make_core(contract_model), make_core(contract_model)
    in_spec_order.on_command(0.999, command, NAMES)
    reordered.on_command(0.999, command[order], [NAMES[k] for k in order])
    expected = [in_spec_order.on_arm_state(a, now=a.stamp + 0.001) for a in states]
    got = [reordered.on_arm_state(shuffled(a, order), now=a.stamp + 0.001) for a in states]
    assert reordered.counters.estimates == 12 and reordered.counters.bad_names == 0
    np.testing.assert_allclose([e.force for e in got], [e.force for e in expected], atol=1e-9)
    np.testing.assert_allclose([e.torque_surrogate for e in got], [e.torque_surrogate for e in expected], atol=1e-9)


@pytest.mark.parametrize(("names", "n_values", "reason"), [
    (["joint1", "joint2", "joint3", "joint4", "wrist"], 5, "unknown ['wrist']"),
    (["joint1", "joint2", "joint3", "joint4"], 4, "missing ['gripper']"),
    (["joint1", "joint2", "joint3", "joint4", "gripper", "joint3"], 6, "duplicated ['joint3']"),
    ([], 5, "position has 5 values for 0 joint names"),
    (["joint1", "joint2", "joint3", "joint4"], 5, "position has 5 values for 4 joint names"),
])
def test_states_and_commands_with_names_that_do_not_fit_are_refused(contract_model, names, n_values,
                                                                      reason) -> None:
    core = make_core(contract_model)
    rng = np.random.default_rng(5)
    assert core.on_command(0.999, np.zeros(n_values), names) is False
    assert core.counters.bad_names == 1 and reason in core.last_refusal and "JointCommand" in core.last_refusal
    assert core.on_command(0.999, np.zeros(5), NAMES)
    good = arm_input(1.0, rng)
    bad = ArmInput(stamp=1.0, names=names, gripper_slide=good.gripper_slide,
                   **{f: np.resize(getattr(good, f), n_values) for f in ArmInput.ARRAYS})
    assert core.on_arm_state(bad, now=1.001) is None
    assert core.counters.bad_names == 2 and reason in core.last_refusal and "ArmState" in core.last_refusal
    assert core.counters.estimates == 0
    assert core.status()[0] == WARN and reason in core.status()[1]
    assert core.on_arm_state(good, now=1.001) is not None                 # the next good state is estimated on


def test_a_stale_flag_array_of_another_length_is_refused(contract_model) -> None:
    core = make_core(contract_model)
    core.on_command(0.999, np.zeros(5), NAMES)
    state = arm_input(1.0, np.random.default_rng(6))
    state.stale = np.zeros(4, dtype=bool)
    assert core.on_arm_state(state, now=1.001) is None
    assert core.counters.bad_names == 1 and "stale has 4 values for 5 joint names" in core.last_refusal


def test_gap_restarts_the_window(contract_model) -> None:
    core = make_core(contract_model, max_gap=0.1)
    rng = np.random.default_rng(3)
    core.on_command(0.0, np.zeros(5), NAMES)
    fills = [core.on_arm_state(arm_input(t, rng), now=t).window_fill for t in (0.01, 0.02, 0.03)]
    assert fills == [1, 2, 3]
    after_gap = core.on_arm_state(arm_input(0.7, rng), now=0.7)
    assert after_gap is None  # the command is 0.7 s old: refused
    core.on_command(0.7, np.zeros(5), NAMES)
    after_gap = core.on_arm_state(arm_input(0.71, rng), now=0.71)
    assert after_gap.window_fill == 1 and core.counters.window_resets == 1


def test_contact_hysteresis() -> None:
    contact = ContactHysteresis(on=0.6, off=0.4)
    assert [contact.update(p) for p in (0.5, 0.61, 0.5, 0.41, 0.39, 0.5)] == [False, True, True, True, False, False]
    with pytest.raises(ValueError, match="off"):
        ContactHysteresis(on=0.3, off=0.5)


# ---------------------------------------------------------------- probes of every refusal branch
BAD_VALUES = (np.nan, np.inf, -np.inf)


def fed_core(path, **kwargs) -> tuple[EstimatorCore, np.random.Generator]:
    """A core with a command and one estimate behind it (stamps from 1.0 s on, 10 ms apart)."""
    core = make_core(path, **kwargs)
    rng = np.random.default_rng(8)
    assert core.on_command(0.999, np.zeros(5), NAMES)
    assert core.on_arm_state(arm_input(1.0, rng), now=1.001) is not None
    return core, rng


def test_non_finite_values_in_every_field_and_joint_are_refused(contract_model) -> None:
    """NaN, +inf and -inf in each array field at each joint (the gripper too) and in the gripper slide: every
    probe is counted as invalid input, none is estimated on, and the next good state is."""
    core, rng = fed_core(contract_model)
    probes = [(field, joint, bad) for field in ArmInput.ARRAYS for joint in range(5) for bad in BAD_VALUES]
    probes += [("gripper_slide", None, bad) for bad in BAD_VALUES]
    stamp = 1.0
    for k, (field, joint, bad) in enumerate(probes, start=1):
        stamp += PERIOD
        assert core.on_command(stamp, np.zeros(5), NAMES)
        probe = arm_input(stamp, rng)
        if joint is None:
            probe.gripper_slide = bad
        else:
            getattr(probe, field)[joint] = bad
        assert core.on_arm_state(probe, now=stamp + 0.001) is None, (field, joint, bad)
        assert core.counters.invalid_input == k, (field, joint, bad)
        assert core.counters.estimates == k, (field, joint, bad)        # the probe did not count as an estimate
        stamp += PERIOD
        assert core.on_arm_state(arm_input(stamp, rng), now=stamp + 0.001) is not None, (field, joint, bad)
    assert core.counters.refused == len(probes) == 5 * 5 * 3 + 3


def test_non_finite_commands_are_refused_and_the_previous_command_is_kept(contract_model) -> None:
    core, rng = fed_core(contract_model)
    reference, _ = fed_core(contract_model)                 # the same history, given only the good command
    count = 0
    for joint in range(5):
        for bad in BAD_VALUES:
            command = np.zeros(5)
            command[joint] = bad
            assert core.on_command(1.0, command, NAMES) is False
            count += 1
            assert core.counters.invalid_input == count and "JointCommand" in core.last_refusal
    state = arm_input(1.01, rng)
    got, expected = core.on_arm_state(state, now=1.011), reference.on_arm_state(state, now=1.011)
    np.testing.assert_array_equal(got.force, expected.force)     # estimated on the last good command (zeros)


@pytest.mark.parametrize("field", ArmInput.ARRAYS)
@pytest.mark.parametrize("length", [4, 6])
def test_an_array_of_another_length_than_the_names_is_refused(contract_model, field, length) -> None:
    core, rng = fed_core(contract_model)
    probe = arm_input(1.01, rng)
    setattr(probe, field, np.resize(getattr(probe, field), length))
    assert core.on_arm_state(probe, now=1.011) is None
    assert core.counters.bad_names == 1 and f"{field} has {length} values for 5 joint names" in core.last_refusal
    assert core.on_arm_state(arm_input(1.02, rng), now=1.021) is not None


def test_stale_by_age_and_out_of_order_are_separate_branches(contract_model) -> None:
    core, rng = fed_core(contract_model, stale_timeout=0.1)
    # Older than the stale timeout (and also before the last state): counted by its age.
    assert core.on_arm_state(arm_input(0.5, rng), now=1.01) is None
    assert core.counters.stale_input == 1 and core.counters.out_of_order == 0 and "0.510 s old" in core.last_refusal
    # Fresh but not after the last estimated-on state (a duplicate, or reordered in transport).
    assert core.on_arm_state(arm_input(1.0, rng), now=1.01) is None
    assert core.on_arm_state(arm_input(0.95, rng), now=1.01) is None
    assert core.counters.out_of_order == 2 and core.counters.stale_input == 1
    # Stamped after the last state but older than the timeout when it arrives (e.g. after a stall).
    assert core.on_arm_state(arm_input(1.05, rng), now=1.2) is None
    assert core.counters.stale_input == 2 and core.counters.out_of_order == 0 + 2
    assert core.counters.estimates == 1


def test_a_corrupt_state_is_invalid_even_when_it_arrives_after_a_newer_one(contract_model) -> None:
    """A state with a NaN that reached the node after a newer real state (delayed in transport) is counted as
    invalid, not hidden among the out-of-order duplicates; a clean late state is still out of order."""
    core, rng = fed_core(contract_model, stale_timeout=0.1)
    assert core.on_arm_state(arm_input(1.02, rng), now=1.021) is not None
    late_and_corrupt = arm_input(1.015, rng)
    late_and_corrupt.effort[0] = np.nan
    assert core.on_arm_state(late_and_corrupt, now=1.022) is None
    assert core.counters.invalid_input == 1 and core.counters.out_of_order == 0
    assert core.on_arm_state(arm_input(1.015, rng), now=1.022) is None
    assert core.counters.invalid_input == 1 and core.counters.out_of_order == 1


@pytest.mark.parametrize("ahead", [3600.0, 0.3, 0.05])
def test_a_state_from_the_future_is_refused_and_does_not_poison_the_history(contract_model, ahead) -> None:
    """One state stamped ``ahead`` s after the node's clock is refused (future_stamp); all of the real
    states after it are still estimated on (the bug: it became the newest stamp and every later state
    was refused as out of order)."""
    core, rng = fed_core(contract_model, future_tolerance=0.02)
    assert core.on_arm_state(arm_input(1.01 + ahead, rng), now=1.01) is None
    assert core.counters.future_stamp == 1 and "ahead of this node's clock" in core.last_refusal
    stamps = 1.01 + PERIOD * np.arange(1, 41)
    estimates = [core.on_arm_state(arm_input(t, rng), now=t + 0.002) for t in stamps]
    assert all(e is not None for e in estimates)
    assert core.counters.estimates == 41 and core.counters.out_of_order == 0 and core.counters.refused == 1


def test_a_command_from_the_future_is_refused_and_the_current_goal_kept(contract_model) -> None:
    core, rng = fed_core(contract_model, future_tolerance=0.02)
    reference, _ = fed_core(contract_model, future_tolerance=0.02)
    assert core.on_command(3601.0, np.full(5, 0.4), NAMES, now=1.005) is False
    assert core.counters.future_stamp == 1 and "JointCommand stamped" in core.last_refusal
    assert core.on_command(1.015, np.full(5, 0.4), NAMES, now=1.016)          # 1 ms ahead of nothing: fresh
    state = arm_input(1.02, rng)
    assert reference.on_command(1.015, np.full(5, 0.4), NAMES, now=1.016)
    np.testing.assert_array_equal(core.on_arm_state(state, now=1.021).force,
                                  reference.on_arm_state(state, now=1.021).force)


def test_a_stamp_within_the_future_tolerance_is_estimated_on(contract_model) -> None:
    core, rng = fed_core(contract_model, future_tolerance=0.02)
    assert core.on_arm_state(arm_input(1.02, rng), now=1.01) is not None          # 10 ms ahead: clock skew
    assert core.on_arm_state(arm_input(1.06, rng), now=1.03) is None              # 30 ms ahead
    assert core.counters.future_stamp == 1 and core.counters.estimates == 2
    with pytest.raises(ValueError, match="future_tolerance"):
        make_core(contract_model, future_tolerance=-0.1)


def test_a_new_model_restarts_the_stamp_history(contract_model, model_builder) -> None:
    core, rng = fed_core(contract_model)
    assert core.on_arm_state(arm_input(1.05, rng), now=1.051) is not None
    core.set_model(OnnxActuatorModel(model_builder("other.onnx", seed=3), SPEC, providers=["CPUExecutionProvider"]))
    estimate = core.on_arm_state(arm_input(1.04, rng), now=1.051)                 # before the last stamp, fresh
    assert estimate is not None and estimate.window_fill == 1


def test_states_that_never_arrived_are_counted_not_refused(contract_model) -> None:
    core = make_core(contract_model)
    rng = np.random.default_rng(8)
    stamps = [k * PERIOD for k in range(1, 31)] + [0.30 + 0.06 + k * PERIOD for k in range(20)]  # 5 lost
    for t in stamps:
        core.on_command(t - 0.001, np.zeros(5), NAMES)
        assert core.on_arm_state(arm_input(t, rng), now=t + 0.001) is not None
    assert core.counters.missed_inputs == 5
    assert core.counters.refused == 0 and core.counters.estimates == len(stamps)
    level, message = core.status()
    assert level != WARN and "5 never arrived" in message
