"""Shared fixtures of the na_training model/rollout/training/export tests.

MJX compiles slowly on a CPU, so one tiny trainer (and its jitted step) is shared by the whole
session, and XLA's persistent compilation cache (``NA_JAX_CACHE``, default
``~/.cache/na_training/jax``) makes later sessions start in seconds.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import jax
import numpy as np
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


# ------------------------------------------------------------------------------------ test NADs

@dataclass
class NadTestEpisode:
    """One episode of a test NAD: arrays over frames for the joints in ``joints`` (spec names; the other
    joints stay zero), everything not given neutral (voltage 12 V, temperature 35 degC)."""

    episode_id: str
    task: str
    time: np.ndarray                          # [T] s
    joints: list[str]
    position: np.ndarray                      # [T, len(joints)] servo-side rad
    velocity: np.ndarray
    current: np.ndarray
    command: np.ndarray                       # goal sent to the follower
    force: np.ndarray                         # [T, 3] N
    contact: np.ndarray                       # [T] bool
    goal_position: np.ndarray | None = None   # the follower's goal register (default: zeros)
    voltage: np.ndarray | None = None
    temperature: np.ndarray | None = None
    gripper_slide: np.ndarray | float = 0.01
    condition: str = "nominal"
    condition_label: float = 1.0
    task_instance: str | None = None
    payload_grams: float = 0.0
    force_source: str = "none"
    seed: int = 0


def write_test_nad(root: Path, episodes: list[NadTestEpisode], split_seed: int = 0) -> Path:
    """A real NAD v1 (the converter's own writer) holding ``episodes``."""
    from na_description import load_spec
    from na_training.nad import NadWriter, build_columns

    spec = load_spec()
    columns = build_columns(spec.joint_names, ["joint3"], with_truth=False)
    writer = NadWriter(root, columns)
    for e in episodes:
        n = len(e.time)
        data = {c.name: np.zeros(n, dtype=c.dtype) for c in columns}
        data.update(time=e.time, stamp_ns=10**12 + np.round(e.time * 1e9).astype(np.int64),
                    aligned=np.ones(n, bool), frame_valid=np.ones(n, bool), contact=e.contact,
                    gripper_slide=np.broadcast_to(np.asarray(e.gripper_slide, dtype=float), (n,)),
                    condition_joint3=np.full(n, e.condition_label))
        for k, joint in enumerate(e.joints):
            data[f"position_{joint}"] = e.position[:, k]
            data[f"velocity_{joint}"] = e.velocity[:, k]
            data[f"current_{joint}"] = e.current[:, k]
            data[f"command_position_{joint}"] = e.command[:, k]
            if e.goal_position is not None:
                data[f"goal_position_{joint}"] = e.goal_position[:, k]
        for k, joint in enumerate(spec.joint_names):
            data[f"input_voltage_{joint}"] = np.full(n, 12.0) if e.voltage is None else e.voltage[:, k]
            data[f"temperature_{joint}"] = np.full(n, 35.0) if e.temperature is None else e.temperature[:, k]
        for a, axis in enumerate("xyz"):
            data[f"force_{axis}"] = e.force[:, a]
            data[f"force_valid_{axis}"] = np.ones(n, bool)
        writer.add_episode({"episode_id": e.episode_id, "task": e.task,
                            "task_instance": e.task_instance or f"{e.task}/{e.condition}",
                            "payload_grams": e.payload_grams, "force_source": e.force_source,
                            "condition": e.condition, "condition_label": e.condition_label, "frame_count": n,
                            "duration_s": float(e.time[-1]), "source_bag": f"bags/{e.episode_id}",
                            "source": "generated", "seed": e.seed, "operator": "test", "notes": "",
                            "complete": True}, data)
    writer.finish({"robot": spec.name, "joint_names": spec.joint_names, "condition_joints": ["joint3"]},
                  {"episodes": []}, split_seed=split_seed)
    return Path(root)


def nad_episode_from_arrays(e, task: str, condition: str, condition_label: float | None = None,
                            force_source: str | None = None) -> NadTestEpisode:
    """A baselines ``EpisodeArrays`` (arm joints only) as a test NAD episode."""
    from na_description import load_spec

    label = float(e.condition) if condition_label is None else condition_label
    return NadTestEpisode(e.episode_id, task, e.time, list(load_spec().arm_joint_names), e.position, e.velocity,
                          e.effort, e.goal_position, e.force, e.contact, goal_position=e.goal_position,
                          condition=condition, condition_label=label,
                          force_source=e.force_source if force_source is None else force_source)


def nad_episode_from_simulation(ep, episode_id: str, task: str = "free_motion", **fields) -> NadTestEpisode:
    """A ``na_training.synthetic`` MuJoCo episode (all joints; the gripper as servo angle) as a test NAD episode."""
    from na_description import load_spec

    spec = load_spec()
    gripper = spec.gripper
    frames = len(ep)
    position = np.c_[ep.qpos[:, :4], gripper.slide_to_angle(ep.qpos[:, 4])]
    velocity = np.c_[ep.qvel[:, :4], ep.qvel[:, 4] / gripper.slope]       # slide m/s -> servo rad/s
    return NadTestEpisode(episode_id, task, np.arange(frames) * spec.frame_period, list(spec.joint_names),
                          position, velocity, ep.effort, ep.goal, ep.force,
                          fields.pop("contact", np.linalg.norm(ep.force, axis=1) > 0.01),
                          voltage=ep.voltage, temperature=ep.temperature, gripper_slide=ep.qpos[:, 4], **fields)


@pytest.fixture(scope="session")
def nad_builder():
    """Builds test NADs with the converter's writer: ``write(root, episodes, split_seed)``, episodes from
    ``from_arrays(EpisodeArrays, task, condition)`` or ``from_simulation(synthetic episode, id, task)``."""
    from types import SimpleNamespace

    return SimpleNamespace(write=write_test_nad, from_arrays=nad_episode_from_arrays,
                           from_simulation=nad_episode_from_simulation)
