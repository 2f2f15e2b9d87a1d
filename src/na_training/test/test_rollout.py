"""MJX rollout: the simulator reproduces CPU MuJoCo under known torques, features from the simulated
state follow the shared contract, torques and velocities are clipped, the model rollout is finite."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from na_description import load_spec
from na_description.features import NUM_FEATURES, episode_features
from na_training.config import SimConfig
from na_training.rollout import ArmSimulator, enable_float64, simulated_features
from na_training.synthetic import TORQUE_PER_AMP


@pytest.fixture(scope="module")
def simulator():
    enable_float64(True)
    return ArmSimulator(load_spec(), SimConfig())


@pytest.fixture(scope="module")
def run_frames(simulator):
    def run(state, torques):
        def body(data, torque):
            data = simulator.advance(data, torque)
            return data, simulator.joints(data)
        return jax.lax.scan(body, state, torques)[1]
    return jax.jit(run)


def test_mjx_reproduces_cpu_mujoco_under_known_torques(simulator, run_frames, synthetic_episodes):
    episode = synthetic_episodes[0]
    start, frames = 10, 40
    torques = episode.effort[start:start + frames] * TORQUE_PER_AMP
    state = simulator.initial_state(jnp.asarray(episode.qpos[start]), jnp.asarray(episode.qvel[start]))
    qpos, qvel = run_frames(state, jnp.asarray(torques))
    assert qpos.dtype == jnp.float64
    np.testing.assert_allclose(np.asarray(qpos), episode.qpos[start + 1:start + frames + 1], atol=1e-7)
    np.testing.assert_allclose(np.asarray(qvel), episode.qvel[start + 1:start + frames + 1], atol=1e-5)


def test_torque_is_clipped_to_spec_bounds_and_velocity_to_10_rad_s(simulator, run_frames):
    bounds = load_spec().effort_bounds
    np.testing.assert_allclose(simulator.clip_torque(jnp.asarray([9.0, -9.0, 1.0, 0.0, 7.0])),
                               np.minimum(np.abs([9.0, -9.0, 1.0, 0.0, 7.0]), bounds) * np.sign([9, -9, 1, 0, 7]))
    state = simulator.initial_state(jnp.zeros(5), jnp.zeros(5))
    _, qvel = run_frames(state, jnp.full((40, 5), 100.0))     # 20x the bound on every joint
    assert np.all(np.isfinite(qvel))
    assert np.max(np.abs(np.asarray(qvel))) <= 10.0 + 1e-9
    assert np.max(np.abs(np.asarray(qvel[:, 0]))) > 1.0          # joint1 did accelerate


def test_features_of_the_simulated_state_follow_the_contract(simulator, synthetic_episodes):
    episode = synthetic_episodes[1]
    feats = jax.jit(lambda *a: simulated_features(load_spec(), *a))(
        episode.command_position, episode.qpos, episode.qvel, episode.effort, episode.input_voltage,
        episode.temperature)
    assert feats.shape == (len(episode), NUM_FEATURES)
    np.testing.assert_allclose(np.asarray(feats), episode.features(), atol=1e-9)
    assert np.allclose(episode.features(), episode_features({      # the contract's goal input is the command
        "goal_position": episode.command_position, "position": np.c_[episode.qpos[:, :4], np.zeros(len(episode))],
        "gripper_slide": episode.qpos[:, 4], "current": episode.effort,
        "velocity": np.c_[episode.qvel[:, :4], episode.qvel[:, 4] / load_spec().gripper.slope],
        "input_voltage": episode.input_voltage, "temperature": episode.temperature}))


def test_substeps_must_make_one_data_frame():
    with pytest.raises(ValueError, match="substeps"):
        ArmSimulator(load_spec(), dataclasses.replace(SimConfig(), substeps=3))


@pytest.mark.slow   # compiles the model + MJX rollout with gradients (shared with test_train)
def test_model_rollout_is_finite_and_has_gradients(tiny_trainer):
    batch = tiny_trainer.train_sampler.fixed(1, tiny_trainer.config.batch_size, 8, seed=3)[0]
    (loss, parts), grads = tiny_trainer._loss_and_grad(tiny_trainer.state.params, batch)
    assert np.isfinite(float(loss)) and all(np.isfinite(float(v)) for v in parts.values())
    leaves = [np.asarray(g) for g in jax.tree.leaves(grads)]
    assert all(np.all(np.isfinite(g)) for g in leaves)
    torque_readout = np.asarray(grads["torque_head"]["readout"]["kernel"][...])
    assert np.abs(torque_readout).sum() > 0          # pose loss reaches the torque head through the simulator
