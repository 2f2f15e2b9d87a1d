"""Training on demonstrations where only the force tells the right action: the force policy learns it, the
proprioceptive one cannot; the exported file round-trips; bad files are refused with one line."""

from __future__ import annotations

import numpy as np
import pytest

from na_policy.dataset import DemoEpisode
from na_policy.policy_file import PolicyFileError, load_policy
from na_policy.train import TrainConfig, fit

NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]


def ambiguous_episodes(count: int = 6, ticks: int = 240) -> list[DemoEpisode]:
    """The same positions in every episode; the next command steps joint 2 down (+0.04 rad) while the force is
    under 5 N and up (-0.04) above it. Positions alone cannot say which."""
    rng = np.random.default_rng(0)
    episodes = []
    for k in range(count):
        position = np.tile(np.linspace(-0.2, 0.2, 5), (ticks, 1))
        force = np.zeros((ticks, 3))
        force[:, 2] = np.repeat(rng.uniform(0, 10, ticks // 20), 20)     # steady for 20 ticks at a time
        command = position.copy()
        command[:, 1] += np.where(force[:, 2] < 5.0, 0.04, -0.04)
        episodes.append(DemoEpisode(name=f"e{k}", time=np.arange(ticks) / 60, position=position, force=force,
                                    contact=np.ones(ticks), command=command, truth_force_z=force[:, 2]))
    return episodes


def test_force_decides_and_the_file_round_trips(tmp_path) -> None:
    episodes = ambiguous_episodes()
    config = TrainConfig(chunk=1, hidden=(32,), steps=400, batch=128, learning_rate=3e-3, obs_noise=0.0)
    force = fit(episodes, TrainConfig(**{**config.__dict__, "variant": "force"}), NAMES, log=lambda _line: None)
    proprio = fit(episodes, TrainConfig(**{**config.__dict__, "variant": "proprio"}), NAMES, log=lambda _line: None)
    ep = episodes[0]
    # Oracle: the joint 2 step by the rule that made the data (sign flips at 5 N).
    truth = np.where(ep.force[:, 2] < 5.0, 0.04, -0.04)
    steady = np.arange(len(truth)) % 20 != 19                        # ticks whose next command has the same force
    from na_policy.features import observation

    def step_error(policy) -> float:
        obs = observation(policy.variant, ep.position, ep.force, ep.contact)
        predicted = np.array([policy.act_chunk(o)[0, 1] for o in obs])     # command - measured, joint 2
        return float(np.mean(np.abs(predicted - truth)[steady]))

    assert step_error(force) < 0.015                   # learnt the rule
    assert step_error(proprio) > 0.025                 # cannot: the same positions ask for both steps
    path = force.save(tmp_path / "force.npz")
    loaded = load_policy(path)
    obs = observation("force", ep.position[0], ep.force[0], ep.contact[0])
    np.testing.assert_allclose(loaded.act_chunk(obs), force.act_chunk(obs), atol=1e-7)
    np.testing.assert_allclose(loaded.start_pose, np.mean([e.command[0] for e in episodes], axis=0))
    assert loaded.variant == "force" and loaded.joint_names == NAMES and loaded.rate_hz == 60.0


def test_bad_policy_files(tmp_path) -> None:
    with pytest.raises(PolicyFileError, match="not found"):
        load_policy(tmp_path / "missing.npz")
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    with pytest.raises(PolicyFileError, match="cannot read"):
        load_policy(tmp_path / "junk.npz")
    np.savez(tmp_path / "other.npz", header=np.array('{"format": "something/else"}'))
    with pytest.raises(PolicyFileError, match="not a policy file"):
        load_policy(tmp_path / "other.npz")
