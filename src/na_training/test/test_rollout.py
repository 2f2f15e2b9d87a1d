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


def test_an_offset_surrogate_drives_a_pd_actuator_as_the_command_plus_the_offset():
    """The oracle is the absolute path (the target handed to the actuator as is) at the target worked out here:
    the command in the actuator's coordinate (the gripper angle through the spec's own gripper map) plus the
    offset. Clipping to the joint range applies to the sum, not to the offset."""
    enable_float64(True)
    spec = load_spec("panda")
    absolute = ArmSimulator(spec, SimConfig(position_control="absolute"))
    offset = ArmSimulator(spec, SimConfig(position_control="offset"))
    assert offset.offset_channels.all() and not absolute.offset_channels.any()
    lower, upper = np.array([j.lower for j in spec.joints]), np.array([j.upper for j in spec.joints])
    qpos0 = np.r_[(lower[:7] + upper[:7]) / 2, 0.02]
    gripper_angle = 0.3 * spec.gripper.angle_points[0] + 0.7 * spec.gripper.angle_points[1]
    command = np.r_[qpos0[:7] + 0.1, gripper_angle]                # arm rad, gripper as servo angle
    in_actuator_units = np.r_[command[:7], spec.gripper.angle_to_slide(gripper_angle)]
    state = absolute.initial_state(jnp.asarray(qpos0), jnp.zeros(8))

    def step(simulator, surrogate, with_command=True):
        qpos, _ = jax.jit(simulator.advance_coordinates)(state.qpos, state.qvel, jnp.asarray(surrogate),
                                                         jnp.asarray(command) if with_command else None)
        return np.asarray(qpos)[np.asarray(simulator.qpos_index)]

    towards_command = step(absolute, in_actuator_units, with_command=False)
    np.testing.assert_allclose(step(offset, np.zeros(8)), towards_command, atol=1e-12)
    assert np.all(towards_command[:7] - qpos0[:7] > 1e-4)            # the arm did move towards the command
    correction = np.r_[np.full(7, -0.05), 0.002]
    np.testing.assert_allclose(step(offset, correction), step(absolute, in_actuator_units + correction, False),
                               atol=1e-12)
    beyond = np.r_[upper[:7] - command[:7] + 0.5, 0.0]             # the sum past the range: clipped, not wrapped
    np.testing.assert_allclose(step(offset, beyond),
                               step(absolute, np.r_[upper[:7], in_actuator_units[7]], False), atol=1e-12)
    assert not np.allclose(step(absolute, np.zeros(8), False), towards_command, atol=1e-3)


def test_offset_control_needs_the_command_and_leaves_torque_actuators_alone():
    enable_float64(True)
    panda = ArmSimulator(load_spec("panda"), SimConfig(position_control="offset"))
    with pytest.raises(ValueError, match="command"):
        panda.advance(panda.initial_state(jnp.zeros(8), jnp.zeros(8)), jnp.zeros(8))
    omx = ArmSimulator(load_spec(), SimConfig(position_control="offset"))
    assert not omx.offset_channels.any()
    np.testing.assert_allclose(np.asarray(omx.control(jnp.full(5, 0.2), jnp.ones(5))), np.full(5, 0.2))


@pytest.mark.parametrize("replay", [True, False])
def test_a_replayed_gripper_takes_the_recorded_next_state_and_the_arm_stays_simulated(replay):
    from flax import nnx

    from na_description.features import feature_names
    from na_training.model import ModelConfig, build_model
    from na_training.rollout import rollout

    enable_float64(True)
    spec = load_spec("panda")
    simulator = ArmSimulator(spec, SimConfig(remat=False, replay_gripper=replay, position_control="offset"))
    model = build_model(ModelConfig(num_features=len(feature_names(spec)), n_motors=8, d_model=8, num_heads=2,
                                    d_ff=8, num_blocks=1, head_hidden=8))
    graphdef, params, rest = nnx.split(model, nnx.Param, ...)
    horizon, rng = 6, np.random.default_rng(4)
    lower, upper = np.array([j.lower for j in spec.joints]), np.array([j.upper for j in spec.joints])
    qpos0 = np.r_[(lower[:7] + upper[:7]) / 2, 0.01]
    recorded_slide = rng.uniform(0.005, 0.035, horizon)                # the recorded finger, frame after frame
    batch = {"history": np.zeros((1, model.config.history_length - 1, model.config.num_features)),
             "qpos0": qpos0[None], "qvel0": np.zeros((1, 8)),
             "command": np.tile(np.r_[qpos0[:7], spec.gripper.angle_points[0]], (1, horizon, 1)),
             "effort": np.zeros((1, horizon, 8)), "voltage": np.zeros((1, horizon, 8)),
             "temperature": np.full((1, horizon, 8), 30.0),
             "next_qpos": np.tile(np.r_[np.full(7, 9.0), 0.0], (1, horizon, 1)),   # arm values that must not leak
             "next_qvel": np.zeros((1, horizon, 8))}
    batch["next_qpos"][0, :, 7] = recorded_slide
    out = jax.jit(lambda b: rollout(graphdef, params, rest, simulator, b))(
        {k: jnp.asarray(v) for k, v in batch.items()})
    qpos = np.asarray(out["qpos"])[0]
    assert np.all(np.abs(qpos[:, :7]) < 4.0)                            # the arm is simulated, not replayed
    if replay:
        np.testing.assert_array_equal(qpos[:, 7], recorded_slide)
    else:
        assert not np.allclose(qpos[:, 7], recorded_slide, atol=1e-3)


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
