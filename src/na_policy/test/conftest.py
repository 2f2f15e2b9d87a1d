"""Policies built by hand for the tests: a constant action chunk (zero weights, the action in the bias)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from na_policy.features import observation_size
from na_policy.policy_file import Policy

NAMES = ["joint1", "joint2", "joint3", "joint4", "gripper"]
START = np.array([0.0, 0.15, -0.46, 1.66, -0.26])


def constant_policy(variant: str = "force", delta: float = 0.01, chunk: int = 4) -> Policy:
    """Every command = measured position + ``delta`` on every joint."""
    inputs = observation_size(variant)
    return Policy(variant=variant, chunk=chunk, joint_names=list(NAMES),
                  kernels=[np.zeros((inputs, chunk * 5), np.float32)], biases=[np.zeros(chunk * 5, np.float32)],
                  obs_mean=np.zeros(inputs, np.float32), obs_std=np.ones(inputs, np.float32),
                  act_mean=np.full(chunk * 5, delta, np.float32), act_std=np.ones(chunk * 5, np.float32),
                  start_pose=START.copy())


@pytest.fixture
def make_policy() -> Callable[..., Policy]:
    return constant_policy
