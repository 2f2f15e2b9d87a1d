"""``na-train eval`` on a real NAD v1 written from simulated episodes, with an untrained tiny run.

The run's weights are random (a checkpoint at step 0): the tests check the plumbing and that the
reported numbers equal independent computations through the training code path, not accuracy.
One rollout shape (8 episodes x 119 steps) is compiled for the module; XLA's persistent cache
(tests' conftest) makes later sessions fast.
"""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

FRAMES = 120
# task, condition label, payload (g); two episodes each: one train, one test (NAD split rule for n = 2)
INSTANCES = (("push_px", 1.0, 0.0), ("nopush_px", 1.0, 0.0), ("pick_place", 1.0, 200.0),
             ("pick_place_restricted", 0.0, 200.0))


def _force_profile(task: str, payload: float) -> np.ndarray:
    force = np.zeros((FRAMES, 3))
    if task == "push_px":
        force[40:90, 0] = -6.0
    elif payload:
        force[30:100, 2] = -payload / 1000.0 * 9.80665      # nominal payload label [0, 0, -m g]
    return force


def _write_nad(write_nad, root):
    from na_training.synthetic import synthetic_episode

    episodes = []
    for k, (task, condition, payload) in enumerate(pair for pair in INSTANCES for _ in range(2)):
        episodes.append(synthetic_episode(
            FRAMES, seed=100 + k, tool_force=_force_profile(task, payload), episode_id=f"ep{k}", task=task,
            task_instance=f"{task}/{payload:g}g", payload_grams=payload,
            force_source="ft_sensor" if task.startswith(("push", "nopush")) else "payload",
            condition="nominal" if condition else "restricted_joint3", condition_label=condition))
    return write_nad(root, episodes)


@pytest.fixture(scope="module")
def nad_and_run(tiny_config, synthetic_episodes, tmp_path_factory, write_nad):
    """The NAD and a run directory holding the untrained tiny model (checkpoint of step 0)."""
    from na_training.train import Trainer

    root = tmp_path_factory.mktemp("eval")
    nad_dir = _write_nad(write_nad, root / "nad")
    trainer = Trainer(tiny_config, synthetic_episodes[:2], run_dir=root / "run")
    trainer.fit(steps=0, progress=False)       # writes run.json, trains nothing
    trainer.save()
    trainer.close()
    return nad_dir, root / "run"


@pytest.fixture(scope="module")
def evaluated(nad_and_run, tmp_path_factory):
    from na_training.cli import main

    nad_dir, run_dir = nad_and_run
    out = tmp_path_factory.mktemp("eval_out")
    code = main(["eval", str(run_dir), "--nad", str(nad_dir), "--horizons", "20", "200", "--out", str(out),
                 "--plots", "2", "--quiet"])
    return code, out, json.loads((out / "eval.json").read_text()) if code == 0 else None


def test_eval_writes_the_paper_tables_and_plots(evaluated):
    code, out, results = evaluated
    assert code == 0
    assert results["episodes"] == 4 and results["frames"] == 4 * FRAMES
    groups = {"push_px/0g", "nopush_px/0g", "pick_place/200g", "pick_place_restricted/200g", "avg"}
    for horizon in ("20", "200"):
        rows = results["rollout"][horizon]["rows"]
        assert set(rows) == groups
        for row in rows.values():
            values = [row[k] for k in ("joint1", "joint2", "joint3", "joint4", "gripper", "force")]
            assert all(v is not None and v >= 0 for v in values), row
    # every episode has 119 steps with a next state: shorter than 200, not than 20
    assert results["rollout"]["200"]["shorter_episodes"] and not results["rollout"]["20"]["shorter_episodes"]
    markdown = (out / "eval.md").read_text()
    assert "### 200 steps" in markdown and "| **Avg** |" in markdown and "shorter than 200 steps" in markdown
    plots = sorted((out / "plots").glob("*.png"))
    assert len(plots) == 2 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in plots)
    assert any("push_px" in p.name for p in plots)          # the strongest label is plotted first


def test_streaming_metrics_use_the_comparison_selection(evaluated, nad_and_run):
    """Streaming force MAE, false contacts and condition metrics recomputed from the model itself."""
    from na_description.features import history_windows
    from na_training.baselines.metrics import classification_metrics, force_mae
    from na_training.nad import load_nad
    from na_training.train import load_trained_model

    _, _, results = evaluated
    nad_dir, run_dir = nad_and_run
    model, _ = load_trained_model(run_dir)
    pad = np.asarray(model.feature_mean[...])
    stream = results["streaming"]
    truth, scores = [], []
    for ep in load_nad(nad_dir, "test"):
        outputs = model(history_windows(ep.features(), pad, model.config.history_length))
        task = ep.meta["task"]
        if task != "pick_place_restricted":     # nominal episodes carry the force metrics
            expected = force_mae(np.asarray(outputs["force"]), ep.force, ep.force_valid)
            assert stream["force_mae"][f"{task}/{ep.meta['payload_grams']:g}g"] == pytest.approx(
                expected, rel=1e-4)
        if task == "push_px":                   # presses: contact runs whose force reaches the 3 N default
            edges = np.diff(np.concatenate([[0], ep.contact.astype(int), [0]]))
            runs = zip(np.flatnonzero(edges == 1), np.flatnonzero(edges == -1), strict=True)
            strong = [a for a, b in runs if np.linalg.norm(ep.force[a:b], axis=1).max() >= 3.0]
            assert strong and stream["onset_lag"]["presses"] == len(strong)
        if task == "nopush_px":
            assert stream["false_contact_rate"] == pytest.approx(np.mean(np.asarray(outputs["contact_prob"]) > 0.5))
        if task.startswith("pick_place"):
            truth.append(np.full(len(ep), task == "pick_place_restricted"))
            scores.append(1.0 - np.asarray(outputs["condition"])[:, 2])
    assert stream["no_contact_tasks"] == ["nopush_px"]
    expected = classification_metrics(np.concatenate(truth), np.concatenate(scores) > 0.5, np.concatenate(scores))
    condition = stream["condition"]
    assert condition["samples"] == 2 * FRAMES and condition["positives"] == FRAMES
    for key in ("accuracy", "precision", "recall", "auc"):
        assert condition[key] == pytest.approx(expected[key], abs=1e-6)


def test_rollout_errors_match_the_training_rollout(evaluated, nad_and_run):
    """Joint/gripper MAE over whole episodes equal those of the training batch builder's windows."""
    from na_description import load_spec
    from na_training.batches import RECORDED_INPUTS, WindowSampler
    from na_training.evaluate import ROLLOUT_BATCH, RolloutEvaluator, group_of, load_split
    from na_training.train import load_trained_model

    _, _, results = evaluated
    nad_dir, run_dir = nad_and_run
    model, description = load_trained_model(run_dir)
    from na_training.config import config_from_dict

    config = config_from_dict(description["config"])
    episodes = load_split(nad_dir, "test", [])
    horizon = FRAMES - 1
    sampler = WindowSampler(episodes, np.asarray(model.feature_mean[...]),
                            model.config.history_length, label_shift=1)
    picks = [(k % len(episodes), 0) for k in range(ROLLOUT_BATCH)]
    batch = sampler.windows(picks, horizon)
    evaluator = RolloutEvaluator(model, config, load_spec())
    outputs = evaluator._run(evaluator._params, {k: batch[k] for k in ("history", "qpos0", "qvel0",
                                                                       *RECORDED_INPUTS)})
    error = np.abs(np.asarray(outputs["qpos"]) - batch["target_qpos"])
    for k, ep in enumerate(episodes):
        row = results["rollout"]["200"]["rows"][group_of(ep)]
        assert row["joint2"] == pytest.approx(np.degrees(error[k, :, 1].mean()), rel=1e-6)
        assert row["gripper"] == pytest.approx(1000 * error[k, :, 4].mean(), rel=1e-6)


def test_eval_refuses_bad_input_with_a_message(nad_and_run, tmp_path, capsys):
    from na_training.cli import main

    nad_dir, run_dir = nad_and_run
    assert main(["eval", str(tmp_path / "none"), "--nad", str(nad_dir)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["eval", str(tmp_path), "--nad", str(nad_dir)]) == 2
    assert "run.json" in capsys.readouterr().err
    assert main(["eval", str(run_dir), "--nad", str(tmp_path / "no_nad")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["eval", str(run_dir), "--nad", str(tmp_path)]) == 2
    assert "not a NAD directory" in capsys.readouterr().err
    assert main(["eval", str(run_dir), "--nad", str(nad_dir), "--split", "val"]) == 2   # n = 2: no val episode
    assert "no episodes" in capsys.readouterr().err
    other = tmp_path / "other_run"
    shutil.copytree(run_dir, other)
    description = json.loads((other / "run.json").read_text())
    description["feature_names"] = description["feature_names"][:-1]
    (other / "run.json").write_text(json.dumps(description))
    assert main(["eval", str(other), "--nad", str(nad_dir), "--out", str(tmp_path / "out")]) == 2
    assert "does not match the run" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _damaged_copy(run_dir, tmp_path, damage: str):
    """A copy of a real run directory with its run.json or its checkpoint files damaged."""
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    if damage == "run.json":
        (copy / "run.json").write_text("{}")
    else:
        files = [p for p in (copy / "checkpoints").rglob("*") if p.is_file() and p.stat().st_size > 0]
        assert files, "the run has no checkpoint files to damage"
        for path in files:
            path.write_bytes(b"\x00garbage" * 8)
    return copy


@pytest.mark.parametrize("damage", ["run.json", "checkpoint"])
def test_export_and_eval_of_a_damaged_run_give_one_line(nad_and_run, tmp_path, capsys, damage):
    from na_training.cli import main

    nad_dir, run_dir = nad_and_run
    damaged = _damaged_copy(run_dir, tmp_path, damage)
    for command in (["export", str(damaged), "--out", str(tmp_path / "model.onnx")],
                    ["eval", str(damaged), "--nad", str(nad_dir), "--out", str(tmp_path / "eval"), "--quiet"]):
        assert main(command) == 2, command
        errors = [line for line in capsys.readouterr().err.splitlines() if "error" in line.lower()]
        assert len(errors) == 1 and "Traceback" not in errors[0], errors
        assert ("lacks" if damage == "run.json" else "cannot be restored") in errors[0]
    assert not (tmp_path / "model.onnx").exists()
