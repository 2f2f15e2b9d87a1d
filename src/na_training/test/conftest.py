"""Shared fixtures of the na_training model/rollout/training/export tests.

MJX compiles slowly on a CPU, so one tiny trainer (and its jitted step) is shared by the whole
session, and XLA's persistent compilation cache (``NA_JAX_CACHE``, default
``~/.cache/na_training/jax``) makes later sessions start in seconds.
"""

from __future__ import annotations

import os
from pathlib import Path

import jax
import pytest

jax.config.update("jax_compilation_cache_dir",
                  os.environ.get("NA_JAX_CACHE", str(Path.home() / ".cache" / "na_training" / "jax")))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)

TINY_CONFIG = "tiny"   # the shipped test config, na_training/config/train/tiny.yaml


@pytest.fixture(scope="session")
def tiny_config():
    from na_training.config import load_config

    return load_config(TINY_CONFIG)


@pytest.fixture(scope="session")
def synthetic_episodes():
    """Three short episodes of the MuJoCo arm driven by known torques (2 train, 1 validation): the first in free
    motion, the others pushed at the tool (the same way, with other strengths) from 1.0 s to 2.2 s."""
    from na_description import load_spec
    from na_training.synthetic import force_pulse, synthetic_episode

    push = force_pulse(150, load_spec().frame_period, [1.5, 0.0, -2.0], 1.0, 2.2)
    return [synthetic_episode(150, seed=0), synthetic_episode(150, seed=1, tool_force=push),
            synthetic_episode(150, seed=2, tool_force=0.7 * push)]


@pytest.fixture(scope="session")
def tiny_trainer(tiny_config, synthetic_episodes, tmp_path_factory):
    """One tiny trainer for the session (its jitted train step compiles once)."""
    from na_training.train import Trainer

    trainer = Trainer(tiny_config, synthetic_episodes[:2], synthetic_episodes[2:],
                      run_dir=tmp_path_factory.mktemp("tiny_run"))
    yield trainer
    trainer.close()


# ------------------------------------------------------------------------------------ test NADs

def write_test_nad(root: Path, episodes: list, split_seed: int = 0) -> Path:
    """A real NAD v1 (the converter's own writer) holding in-memory episodes (``na_training.synthetic``)."""
    from na_training.nad import EPISODE_META_COLUMNS, NadWriter, build_columns

    spec = episodes[0].spec
    writer = NadWriter(root, build_columns(spec.joint_names, [spec.condition_joint], with_truth=False))
    for episode in episodes:
        meta = {k: episode.meta[k] for k in EPISODE_META_COLUMNS if k in episode.meta
                and k not in ("episode_index", "split", "data_file")}
        writer.add_episode(meta, episode.columns)
    writer.finish({"robot": spec.name, "joint_names": spec.joint_names, "condition_joints": [spec.condition_joint]},
                  {"episodes": []}, split_seed=split_seed)
    return Path(root)


@pytest.fixture(scope="session")
def write_nad():
    """``write_nad(root, episodes, split_seed=0)``: a NAD written with the converter's writer."""
    return write_test_nad
