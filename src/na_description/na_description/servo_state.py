"""The present state of a group of servos, decoded from their state blocks to SI (ROS-free).

Each family's table decodes its own block into this one shape (:func:`na_description.xm430.decode_states`,
:func:`na_description.sts3215.decode_states`); the arm driver and the offline generator both call
those, so a live reading and a generated one come from the same code.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ServoStates:
    """One entry per servo, in the order the blocks were given; servo side (before the robot spec's homing and
    drive direction)."""

    position: np.ndarray        # rad (servo angle, 0 at the middle step)
    velocity: np.ndarray        # rad/s
    current: np.ndarray         # A, signed
    pwm: np.ndarray             # fraction of full output duty, signed
    load: np.ndarray            # fraction of full output, signed (STS3215 Present Load); NaN for XM430
    input_voltage: np.ndarray   # V
    temperature: np.ndarray     # degC
    error: np.ndarray           # the family's error bits (XM430 Hardware Error Status, STS3215 Status), int
