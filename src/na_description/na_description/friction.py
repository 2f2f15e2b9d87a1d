"""Joint friction of a servo arm: a Stribeck curve with viscous term, and the backlash flank (ROS-free).

Per joint, the friction torque opposing the motion is ``[Fc + (Fs − Fc)·exp(−(q̇/vs)²)]·sgn(q̇) + Fv·q̇``, ``sgn``
smoothed as tanh(q̇/SIGN_VELOCITY); ``d`` ∈ {−1, 0, +1} is the gear flank in contact, a hysteretic state that
takes sign(q̇) once |q̇| exceeds the backlash velocity and keeps it until the joint moves the other way.
:class:`FrictionCurrentMap` turns the servo's effort signal into joint torque with them (fitted by the ID-Friction
baseline in na_training, paper Sec. IV-D (ii); read by the wear monitor).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Smoothing of sgn(q̇): a bit below the XM430 velocity resolution, 0.229 rpm ≈ 0.024 rad/s
# (docs/REFERENCES.md, XM430-W350).
SIGN_VELOCITY = 0.01
DEFAULT_BACKLASH_VELOCITY = 0.05      # rad/s: |q̇| that moves the gear onto the other flank


def smooth_sign(velocity: np.ndarray) -> np.ndarray:
    return np.tanh(np.asarray(velocity) / SIGN_VELOCITY)


def stribeck_friction(velocity: np.ndarray, coulomb, stribeck, viscous, stribeck_velocity) -> np.ndarray:
    """Friction torque opposing the motion (positive along q̇); parameters broadcast per joint."""
    velocity = np.asarray(velocity, dtype=float)
    peak = np.asarray(coulomb) + (np.asarray(stribeck) - np.asarray(coulomb)) * np.exp(
        -((velocity / np.asarray(stribeck_velocity)) ** 2))
    return peak * smooth_sign(velocity) + np.asarray(viscous) * velocity


def backlash_flank(velocity: np.ndarray, threshold: float = DEFAULT_BACKLASH_VELOCITY,
                   initial: np.ndarray | None = None) -> np.ndarray:
    """Causal flank state d [T, n]: sign of the last motion faster than ``threshold``; before any, ``initial``
    (the state a previous stretch ended in; default 0)."""
    velocity = np.asarray(velocity, dtype=float)
    flank = np.zeros_like(velocity)
    state = np.zeros(velocity.shape[1:]) if initial is None else np.asarray(initial, dtype=float).copy()
    for k in range(velocity.shape[0]):
        moving = np.abs(velocity[k]) > threshold
        state = np.where(moving, np.sign(velocity[k]), state)
        flank[k] = state
    return flank


@dataclass
class FrictionCurrentMap:
    """Per-joint parameters of the ID-Friction actuator model (arrays of length n)."""

    slope: np.ndarray
    offset: np.ndarray
    coulomb: np.ndarray
    stribeck: np.ndarray
    viscous: np.ndarray
    stribeck_velocity: np.ndarray
    backlash: np.ndarray
    backlash_velocity: float = DEFAULT_BACKLASH_VELOCITY

    def torque(self, current: np.ndarray, velocity: np.ndarray, flank: np.ndarray | None = None) -> np.ndarray:
        """Joint torque [T, n]; ``flank`` the backlash flank state per frame (default: from the velocity, starting
        at 0)."""
        friction = stribeck_friction(velocity, self.coulomb, self.stribeck, self.viscous, self.stribeck_velocity)
        flank = backlash_flank(velocity, self.backlash_velocity) if flank is None else flank
        return current * self.slope + self.offset - friction + self.backlash * flank
