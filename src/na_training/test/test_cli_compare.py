"""``na-train compare`` wired into the ``na-train`` CLI: baselines alone, with a run directory, bad input."""

from __future__ import annotations

import json

import numpy as np
import pytest

PUSH = np.array([2.0, -1.0, -2.5])     # N, environment on robot, base frame
STEP = 0.00425                         # s: one MuJoCo step of the arm model per frame


def _write_nad(write_nad, root):
    """A NAD v1 from synthetic episodes where the baselines' assumptions hold (linear current map, no friction,
    one plain Euler step per frame).

    Two episodes per task instance: one train, one test (the NAD split rule for n = 2)."""
    from na_training.synthetic import SyntheticActuator, force_pulse, synthetic_episode

    actuator = SyntheticActuator(slope=np.array([1.7, 1.8, 1.6, 1.9]), offset=np.zeros(4))
    frames = round(3.0 / STEP)

    def episode(seed: int, episode_id: str, task: str, **options):
        return synthetic_episode(frames, seed, actuator=actuator, frame_period=STEP, implicit_damping=False,
                                 episode_id=episode_id, task=task, **options)

    episodes = []
    for s in range(2):
        episodes.append(episode(s, f"free{s}", "free"))
        episodes.append(episode(10 + s, f"push{s}", "push",
                                tool_force=force_pulse(frames, STEP, PUSH * (1 + 0.2 * s), 0.8, 2.2)))
        episodes.append(episode(20 + s, f"band{s}", "free", restriction_stiffness=0.6))
    return write_nad(root, episodes)


@pytest.fixture(scope="module")
def compare_nad(tmp_path_factory, write_nad):
    return _write_nad(write_nad, tmp_path_factory.mktemp("compare") / "nad")


def test_na_train_lists_eval_and_compare(capsys):
    from na_training.cli import main

    with pytest.raises(SystemExit):
        main(["--help"])
    listing = capsys.readouterr().out
    assert "eval" in listing and "compare" in listing
    with pytest.raises(SystemExit):
        main(["compare", "--help"])
    assert "--model" in capsys.readouterr().out


def test_compare_through_na_train_scores_every_baseline(compare_nad, tmp_path, capsys):
    from na_training.cli import main

    # A short MLP run keeps that baseline in the path; how well it learns is test_hybrid.py's business.
    assert main(["compare", "--nad", str(compare_nad), "--mlp-steps", "200", "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "| ID-Linear |" in printed and "Random Forest" in printed
    results = json.loads((tmp_path / "out" / "comparison.json").read_text())
    assert "MLP (recorded windows)" in results["force_mae"]
    assert results["episodes"]["test"] == 3
    for method in ("ID-Linear", "ID-Friction", "GMO"):
        # exact dynamics, linear motors: every force baseline recovers the push to a few tens of mN
        assert results["force_mae"][method]["push/0g"] < 0.05, method
    assert results["force_mae"]["ID-Linear"]["push/0g"] < 0.1 * np.abs(PUSH).mean()


def test_compare_exports_and_scores_a_run_directory(compare_nad, tiny_config, synthetic_episodes, tmp_path):
    from na_training.cli import main
    from na_training.nad import read_episode_table
    from na_training.train import Trainer

    trainer = Trainer(tiny_config, synthetic_episodes[:2], run_dir=tmp_path / "run")
    trainer.fit(steps=0, progress=False)
    trainer.save()
    trainer.close()
    assert main(["compare", "--nad", str(compare_nad), "--model", str(tmp_path / "run"), "--no-mlp",
                 "--out", str(tmp_path / "out")]) == 0
    assert (tmp_path / "out" / "model.onnx").is_file()
    results = json.loads((tmp_path / "out" / "comparison.json").read_text())
    learned = results["force_mae"]["NeuralActuator"]
    assert set(learned) == set(results["force_mae"]["GMO"])        # same task/payload groups as the baselines
    assert results["best_classical_to_learned_force_mae"] is not None
    # The condition experiment is the task recorded restricted ("free" here), both conditions; the
    # push episodes carry a nominal label but are not part of it (paper Sec. IV-G).
    experiment = [row for row in read_episode_table(compare_nad) if row["split"] == "test" and row["task"] == "free"]
    test_frames = sum(row["frame_count"] for row in experiment)
    restricted_frames = sum(row["frame_count"] for row in experiment if row["condition_label"] == 0.0)
    condition = results["condition"]["NeuralActuator"]
    assert condition["granularity"] == "frames"      # every frame of the experiment, positive = restricted
    assert (condition["samples"], condition["positives"]) == (test_frames, restricted_frames)


def test_compare_refuses_bad_input(tmp_path, capsys):
    from na_training.cli import main

    assert main(["compare", "--nad", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["compare", "--nad", str(tmp_path), "--model", str(tmp_path / "nothing.onnx")]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["compare", "--nad", str(tmp_path), "--out", str(tmp_path / "out")]) == 2
    assert "not a NAD directory" in capsys.readouterr().err
