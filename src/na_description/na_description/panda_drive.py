"""The Franka Emika Panda's joint drives as an actuator family (the spec's ``servo.model: Panda``).

The Panda has no servo bus or control table: the robot is commanded in joint torque through its own
controller and reports the commanded torque, which the suite carries as ``ArmState.load`` (a signed fraction
of each joint's torque limit, the spec's ``effort``). This module holds what the per-family lookups
(:mod:`na_description.servo_tables`) read; docs/REFERENCES.md, Franka Emika Panda.
"""

from __future__ import annotations

MODEL = "Panda"
REPORTS_LOAD = True            # the commanded torque travels in ArmState.load
# Torque at full load (1.0) on the weakest joints (5-7: 12 N*m; joints 1-4: 87 N*m); the lowest torque per
# unit of effort any joint has, where the baselines bound their effort-to-torque slopes from below.
TORQUE_AT_FULL_LOAD = 12.0     # N*m
# The robot adds gravity from its own model to what its controller commands and reports the commanded torque
# without it (libfranka tau_J_d): a rigid-body observer must leave gravity out of the torque it compares with.
EFFORT_EXCLUDES_GRAVITY = True
# Plausible supply voltage in the record (V): the arm's 48 V DC bus (the servo families run on 5-20 V).
INPUT_VOLTAGE_RANGE_V = (20.0, 60.0)
