"""Training loop on synthetic episodes: loss falls, checkpoints resume exactly, metrics are logged,
the run is deterministic from its seed, and ``na-train`` reports bad input clearly."""

import json

import numpy as np
import pytest

from na_training.batches import DataError, WindowSampler
from na_training.cli import main
from na_training.config import ConfigError, load_config
from na_training.losses import smooth_l1


def test_smooth_l1_matches_its_definition():
    error = np.array([-3.0, -0.1, 0.0, 0.05, 2.0])
    expected = np.where(np.abs(error) < 0.15, 0.5 * error**2 / 0.15, np.abs(error) - 0.075)
    np.testing.assert_allclose(smooth_l1(error, 0.15), expected)


def test_windows_pair_inputs_at_t_with_targets_at_t_plus_1(synthetic_episodes):
    episode = synthetic_episodes[0]
    features = episode.features()
    sampler = WindowSampler([episode], features.mean(axis=0), history_length=9)
    batch = sampler.windows([(0, 3)], horizon=5)
    np.testing.assert_array_equal(batch["qpos0"][0], episode.qpos[3])
    np.testing.assert_array_equal(batch["target_qpos"][0], episode.qpos[4:9])
    np.testing.assert_array_equal(batch["command"][0], episode.command_position[3:8])
    np.testing.assert_array_equal(batch["force"][0], episode.force[4:9])
    np.testing.assert_array_equal(batch["history"][0, -3:], features[:3])
    np.testing.assert_array_equal(batch["history"][0, 0], features.mean(axis=0))
    with pytest.raises(DataError, match="horizon"):
        sampler.starts(len(episode))


@pytest.mark.slow   # the first MJX + model compile takes ~1 min on 2 busy cores (seconds with a warm XLA cache)
def test_a_few_steps_reduce_the_loss_and_checkpoints_resume(tiny_trainer, tmp_path):
    trainer = tiny_trainer
    probe = trainer.train_sampler.fixed(1, trainer.config.batch_size, 8, seed=99)[0]
    before = trainer.evaluate_batch(probe)
    records = []
    trainer.fit(steps=12, resume=False, progress=False, on_metrics=records.append)
    after = trainer.evaluate_batch(probe)
    print(f"loss {before['loss']:.4f} -> {after['loss']:.4f}")
    assert after["loss"] < 0.95 * before["loss"]
    assert after["gripper_mm"] + after["arm"] < before["gripper_mm"] + before["arm"]   # rollout error fell
    lines = [json.loads(line) for line in (trainer.run_dir / "metrics.jsonl").read_text().splitlines()]
    assert any(r["split"] == "train" and r["step"] == 12 for r in lines)
    assert all(np.isfinite(r["loss"]) for r in lines)
    assert any(r["split"] == "val" for r in records)
    run = json.loads((trainer.run_dir / "run.json").read_text())
    assert run["config"]["model"]["d_model"] == 16 and len(run["feature_stats"]["mean"]) == 36

    saved_params = trainer.state.params
    trainer.step()                       # step 13, not checkpointed
    assert trainer.restore()             # back to the step-12 checkpoint
    assert trainer.state.step == 12
    kernel = lambda params: np.asarray(params["encoder"]["input_projection"]["kernel"][...]).ravel()[:50]  # noqa: E731
    for a, b in zip(kernel(saved_params), kernel(trainer.state.params), strict=True):
        assert a == b
    # Deterministic from the seed: the batch of a step depends only on (seed, step).
    np.testing.assert_array_equal(trainer.train_batch(5)["qpos0"], trainer.train_batch(5)["qpos0"])
    assert not np.array_equal(trainer.train_batch(5)["qpos0"], trainer.train_batch(6)["qpos0"])


def test_config_errors_are_clear(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("model: {d_model: 16, typo_key: 3}\n")
    with pytest.raises(ConfigError, match="typo_key"):
        load_config(bad)
    bad.write_text("curriculum: [[5, 8]]\n")
    with pytest.raises(ConfigError, match="step 0"):
        load_config(bad)


def test_cli_reports_bad_input(tmp_path, capsys):
    assert main(["fit", "--out", str(tmp_path / "run"), "--config", str(tmp_path / "missing.yaml")]) == 2
    assert "not found" in capsys.readouterr().err
    assert main(["export", str(tmp_path / "nothing"), "--out", str(tmp_path / "m.onnx")]) == 2
    assert "run directory" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "fit" in capsys.readouterr().out


def test_a_written_and_loaded_episode_trains_as_the_one_in_memory(synthetic_episodes, tmp_path, write_nad):
    from na_training.batches import condition_labels
    from na_training.nad import load_nad

    write_nad(tmp_path / "nad", synthetic_episodes)
    loaded = sorted(load_nad(tmp_path / "nad"), key=lambda ep: ep.name)
    for episode, original in zip(loaded, synthetic_episodes, strict=True):
        np.testing.assert_array_equal(episode.features(), original.features())
        np.testing.assert_array_equal(episode.qpos, original.qpos)
        np.testing.assert_array_equal(episode.qvel, original.qvel)
        np.testing.assert_array_equal(episode.force, original.force)
        label, supervised = condition_labels(episode)
        assert np.all(label == 1.0) and supervised.all()
        assert not condition_labels(episode, tasks=("pick_place",))[1].any()


@pytest.fixture(scope="module")
def hybrid_trainer(tiny_config, synthetic_episodes, tmp_path_factory):
    """The tiny model with the hybrid recipe (float64 like the session's tiny trainer: x64 is process-wide)."""
    from dataclasses import replace

    from na_training.config import HybridConfig
    from na_training.train import Trainer

    config = replace(tiny_config, recipe="hybrid", curriculum=((0, 8),),
                     hybrid=HybridConfig(batch_size=64, torque_weight=5.0, torque_steps=4, rollout_every=2,
                                         eval_windows=64, augment_temperature=2.0))
    messages: list[str] = []
    trainer = Trainer(config, synthetic_episodes[:2], synthetic_episodes[2:],
                      run_dir=tmp_path_factory.mktemp("hybrid_run"), log=messages.append)
    trainer.messages = messages
    yield trainer
    trainer.close()


@pytest.mark.slow   # compiles the hybrid step (model + MJX rollout), ~1 min on 2 busy cores
def test_hybrid_recipe_trains_heads_on_windows_and_the_torque_through_the_simulator(hybrid_trainer):
    trainer = hybrid_trainer
    supervised = trainer.supervised_batch(0)
    assert supervised["windows"].shape == (64, 9, 36) and "torque" in supervised
    rollout_batch = trainer.train_batch(0)
    (_, parts), grads = trainer._hybrid_grad(trainer.state.params, supervised, rollout_batch, np.float32(5.0))
    assert {"force", "gate", "condition", "torque", "arm_mae_rad"} <= set(parts)
    assert "rollout_force" not in parts                 # the rollout carries only the torque path
    force_readout = np.asarray(grads["force_readout"]["kernel"][...])
    torque_readout = np.asarray(grads["torque_head"]["readout"]["kernel"][...])
    assert np.abs(force_readout).sum() > 0 and np.abs(torque_readout).sum() > 0
    # without the warm-start term and the rollout, the torque head gets no gradient
    (_, parts), grads = trainer._supervised_grad(trainer.state.params, supervised, np.float32(0.0))
    assert np.abs(np.asarray(grads["torque_head"]["readout"]["kernel"][...])).sum() == 0

    records = []
    before = trainer.validate(use_ema=False)
    trainer.fit(steps=8, resume=False, progress=False, on_metrics=records.append)
    after = trainer.validate(use_ema=False)
    assert after["loss"] < before["loss"] and np.isfinite(after["rollout_arm_mae_rad"])
    train_records = [r for r in records if r["split"] == "train"]
    assert train_records and all("windows_per_s" in r for r in train_records)
    assert any(m.startswith("compiling the hybrid step") for m in trainer.messages)
    assert any(m.startswith("compiling the recorded-window step") for m in trainer.messages)
