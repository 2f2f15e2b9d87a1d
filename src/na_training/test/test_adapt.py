"""``na-train adapt``: fine-tuning from a parent run with provenance, and one-line refusals that write nothing."""

from __future__ import annotations

import json

import numpy as np
import pytest


@pytest.fixture(scope="module")
def parent_and_nad(tiny_config, synthetic_episodes, tmp_path_factory, write_nad):
    """A tiny parent run (checkpoint of step 0) and a NAD of six episodes (train, val and test split)."""
    from na_training.synthetic import synthetic_episode
    from na_training.train import Trainer

    root = tmp_path_factory.mktemp("adapt")
    episodes = [synthetic_episode(150, seed=300 + k, episode_id=f"ep{k}", task_instance="free_motion")
                for k in range(6)]
    nad = write_nad(root / "nad", episodes)
    trainer = Trainer(tiny_config, synthetic_episodes[:2], run_dir=root / "parent")
    trainer.fit(steps=0, progress=False)
    trainer.save()
    trainer.close()
    return root / "parent", nad


@pytest.mark.slow        # compiles the tiny rollout step
def test_adapt_fine_tunes_from_the_parent_and_records_where_it_came_from(parent_and_nad, tmp_path, capsys):
    from na_training.cli import main
    from na_training.train import load_trained_model

    parent, nad = parent_and_nad
    out = tmp_path / "adapted"
    assert main(["adapt", "--from", str(parent), "--nad", str(nad), "--out", str(out), "--epochs", "2",
                 "--quiet"]) == 0
    description = json.loads((out / "run.json").read_text())
    assert description["adapted_from"]["run"] == str(parent.resolve())
    assert description["adaptation"]["epochs"] == 2 and description["adaptation"]["train_frames"] > 0
    parent_stats = json.loads((parent / "run.json").read_text())["feature_stats"]
    assert description["feature_stats"] == parent_stats                   # kept unless --refit-stats
    before, _ = load_trained_model(parent, use_ema=False)
    after, info = load_trained_model(out, use_ema=False)
    assert info["checkpoint_step"] > 0
    moved = [np.abs(np.asarray(a) - np.asarray(b)).max() for a, b in
             zip(_leaves(before), _leaves(after), strict=True)]
    assert max(moved) > 0            # trained ...
    assert max(moved) < 1.0          # ... from the parent's weights, not from a fresh initialisation


def _leaves(model):
    import jax
    from flax import nnx

    _, params, _ = nnx.split(model, nnx.Param, ...)
    return jax.tree.leaves(params)


@pytest.mark.parametrize("case", ["other_robot", "too_short", "no_checkpoint", "out_not_empty"])
def test_adapt_refuses_bad_input_in_one_line_and_writes_nothing(parent_and_nad, tmp_path, capsys, case,
                                                                write_nad):
    import shutil

    from na_training.cli import main
    from na_training.synthetic import synthetic_episode

    parent, nad = parent_and_nad
    out = tmp_path / "adapted"
    expected = {"other_robot": "joint names differ", "too_short": "needs at least",
                "no_checkpoint": "no checkpoint", "out_not_empty": "not empty"}[case]
    if case == "other_robot":
        nad = shutil.copytree(nad, tmp_path / "nad")
        info = json.loads((nad / "meta" / "info.json").read_text())
        info["joint_names"] = ["shoulder_pan", "shoulder_lift", "elbow_flex", "wrist_flex", "wrist_roll", "gripper"]
        (nad / "meta" / "info.json").write_text(json.dumps(info))
    elif case == "too_short":
        nad = write_nad(tmp_path / "short", [synthetic_episode(40, seed=1, episode_id="tiny")])
    elif case == "no_checkpoint":
        parent = shutil.copytree(parent, tmp_path / "parent")
        shutil.rmtree(parent / "checkpoints")
    else:
        out.mkdir()
        (out / "keep.txt").write_text("user data")
    assert main(["adapt", "--from", str(parent), "--nad", str(nad), "--out", str(out), "--quiet"]) == 2
    errors = capsys.readouterr().err.strip().splitlines()
    assert len(errors) == 1 and expected in errors[0], errors
    if case == "out_not_empty":
        assert sorted(p.name for p in out.iterdir()) == ["keep.txt"]
    else:
        assert not out.exists()
