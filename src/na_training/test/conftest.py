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
    """Three short episodes of the MuJoCo arm driven by known torques (2 train, 1 validation)."""
    from na_training.synthetic import synthetic_episode

    return [synthetic_episode(150, seed=seed) for seed in range(3)]


@pytest.fixture(scope="session")
def tiny_trainer(tiny_config, synthetic_episodes, tmp_path_factory):
    """One tiny trainer for the session (its jitted train step compiles once)."""
    from na_training.train import Trainer

    trainer = Trainer(tiny_config, synthetic_episodes[:2], synthetic_episodes[2:],
                      run_dir=tmp_path_factory.mktemp("tiny_run"))
    yield trainer
    trainer.close()
