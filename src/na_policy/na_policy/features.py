"""What a policy sees: the two observation variants of the behaviour-cloning comparison (ROS-free).

* ``proprio``: the follower's measured joint positions (5, rad, gripper as servo angle), what a
  position-only policy knows;
* ``force``: the same plus the estimator's gated tool force (3, N, base frame, ``/estimator/force``), tared:
  minus its value when the policy starts (at rest at the start pose, before any contact; as one tares an F/T
  sensor, it removes the held object's weight), and the contact probability (1, ``/estimator/contact``).

Both the training data (:mod:`na_policy.dataset`) and the policy node (:mod:`na_policy.core`) build the
observation through :func:`observation`, so demonstrations and the live loop cannot drift apart.
"""

from __future__ import annotations

import numpy as np

FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "proprio": ("position",),
    "force": ("position", "force", "contact"),
}
FEATURE_SIZES = {"position": 5, "force": 3, "contact": 1}
# Smallest standard deviation used to normalise a feature (a constant channel must not blow up).
FEATURE_STD_FLOOR = {"position": 1e-3, "force": 0.2, "contact": 0.05}


class FeatureError(ValueError):
    """Unknown feature set, or an input of the wrong size."""


def check_variant(variant: str) -> tuple[str, ...]:
    if variant not in FEATURE_SETS:
        raise FeatureError(f"unknown policy variant '{variant}'; known: {', '.join(FEATURE_SETS)}")
    return FEATURE_SETS[variant]


def uses_estimator(variant: str) -> bool:
    return "force" in check_variant(variant)


def observation_size(variant: str) -> int:
    return sum(FEATURE_SIZES[name] for name in check_variant(variant))


def std_floor(variant: str) -> np.ndarray:
    return np.concatenate([np.full(FEATURE_SIZES[n], FEATURE_STD_FLOOR[n]) for n in check_variant(variant)])


def observation(variant: str, position: np.ndarray, force: np.ndarray | None = None,
                contact_probability: float | None = None) -> np.ndarray:
    """The observation vector of ``variant``; arrays may carry leading batch dimensions."""
    position = np.asarray(position, dtype=np.float32)
    if position.shape[-1] != FEATURE_SIZES["position"]:
        raise FeatureError(f"position needs {FEATURE_SIZES['position']} values, got shape {position.shape}")
    parts = [position]
    if uses_estimator(variant):
        if force is None or contact_probability is None:
            raise FeatureError(f"variant '{variant}' needs the estimator's force and contact probability")
        force = np.asarray(force, dtype=np.float32)
        if force.shape[-1] != 3:
            raise FeatureError(f"force needs 3 values, got shape {force.shape}")
        contact = np.asarray(contact_probability, dtype=np.float32)[..., None]
        parts += [force, contact]
    return np.concatenate(parts, axis=-1)
