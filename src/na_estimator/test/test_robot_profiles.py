"""One estimator for every arm: the SO-101 reads Present Load as its effort input, and a model made for
another arm is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from na_description import load_spec
from na_description.features import episode_features, feature_names, history_windows
from na_estimator.estimator_core import ArmInput, EstimatorCore
from na_estimator.onnx_model import ModelLoadError, OnnxActuatorModel

SO101 = load_spec("so101")
OMX = load_spec()


def test_each_arm_names_its_effort_channel_and_the_so101_features_are_in_percent_of_load() -> None:
    omx_names, so_names = feature_names(OMX), feature_names(SO101)
    assert len(omx_names) == 36 and sum(n.startswith("current.") for n in omx_names) == 5
    # 6 goals + 5 arm positions + slide + 4 x 6 telemetry + goal slide + 5 tracking errors + finger error
    assert len(so_names) == 6 + 5 + 1 + 24 + 1 + 5 + 1
    assert not any(n.startswith("current.") for n in so_names)
    assert [n for n in so_names if n.startswith("load.")] == [f"load.{j}" for j in SO101.joint_names]
    rng = np.random.default_rng(3)
    frames = 12
    load = rng.uniform(-0.6, 0.6, (frames, 6))
    columns = {"goal_position": rng.normal(0, 0.3, (frames, 6)), "position": rng.normal(0, 0.3, (frames, 6)),
               "gripper_slide": rng.uniform(0, 1, frames), "load": load, "velocity": rng.normal(0, 1, (frames, 6)),
               "input_voltage": np.full((frames, 6), 12.0), "temperature": np.full((frames, 6), 30.0)}
    x = episode_features(columns, SO101)
    for k, joint in enumerate(SO101.joint_names):      # a fraction of the maximum output, in percent
        np.testing.assert_allclose(x[:, so_names.index(f"load.{joint}")], 100.0 * load[:, k])
    with pytest.raises(ValueError, match="load"):
        episode_features({k: v for k, v in columns.items() if k != "load"}, SO101)


def test_a_model_of_another_arm_is_refused_by_name(model_builder) -> None:
    so101_model = model_builder("so101.onnx", robot="so101")
    with pytest.raises(ModelLoadError, match="trained for robot 'so101', this arm is 'open_manipulator_x'"):
        OnnxActuatorModel(so101_model, OMX)
    omx_model = model_builder("omx.onnx")
    with pytest.raises(ModelLoadError, match="trained for robot 'open_manipulator_x', this arm is 'so101'"):
        OnnxActuatorModel(omx_model, SO101)


def _so101_input(stamp: float, rng: np.random.Generator, load: np.ndarray | None = None) -> ArmInput:
    return ArmInput(stamp=stamp, names=SO101.joint_names, position=rng.uniform(-0.5, 0.5, 6),
                    gripper_slide=float(rng.uniform(0, 1.0)), velocity=rng.uniform(-1, 1, 6),
                    effort=rng.uniform(-0.5, 0.5, 6) if load is None else load,
                    input_voltage=rng.uniform(11.5, 12.1, 6), temperature=rng.uniform(30, 40, 6))


def test_the_so101_estimator_streams_what_the_vectorised_training_path_computes(model_builder) -> None:
    model = OnnxActuatorModel(model_builder("so101.onnx", robot="so101"), SO101, providers=["CPUExecutionProvider"])
    core = EstimatorCore(model, SO101, stale_timeout=0.1, future_tolerance=0.02, command_timeout=0.5, max_gap=0.1)
    rng = np.random.default_rng(11)
    command = rng.uniform(-0.3, 0.3, 6)
    core.on_command(0.0, command, SO101.joint_names, now=0.0)
    inputs = [_so101_input(0.01 * (k + 1), rng) for k in range(15)]
    streamed = [core.on_arm_state(arm, now=arm.stamp + 0.001) for arm in inputs]
    assert all(e is not None for e in streamed)
    columns = {"goal_position": np.tile(command, (15, 1)), "position": np.stack([a.position for a in inputs]),
               "gripper_slide": np.array([a.gripper_slide for a in inputs]),
               "load": np.stack([a.effort for a in inputs]), "velocity": np.stack([a.velocity for a in inputs]),
               "input_voltage": np.stack([a.input_voltage for a in inputs]),
               "temperature": np.stack([a.temperature for a in inputs])}
    windows = history_windows(episode_features(columns, SO101), model.contract.feature_mean)
    offline, _ = model.infer(windows[-1])
    np.testing.assert_allclose(streamed[-1].force_raw, np.asarray(offline["force_raw"]).reshape(-1), atol=1e-5)
    # Present Load cannot exceed the full output: a reading beyond it is corrupt, not estimated on
    refused = core.counters.invalid_input
    assert core.on_arm_state(_so101_input(0.5, rng, load=np.full(6, 3.0)), now=0.501) is None
    assert core.counters.invalid_input == refused + 1
