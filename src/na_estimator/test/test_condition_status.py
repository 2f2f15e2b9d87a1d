"""ConditionStatus: per-motor statuses of one diagnostics period (oracle: means computed by hand)."""

from __future__ import annotations

from na_common.diagnostics import OK, WARN
from na_estimator.condition_status import ConditionStatus

JOINTS = ("joint1", "joint2", "joint3", "joint4", "gripper")


def test_the_supervised_motor_warns_on_a_low_mean_and_the_others_report_only() -> None:
    status = ConditionStatus(JOINTS, "joint3")
    status.add([0.1, 1.0, 0.6, 1.0, 1.0])
    status.add([0.1, 1.0, 0.2, 1.0, 1.0])          # joint3 mean 0.4 < 0.5
    by_joint = {s.joint: s for s in status.statuses(1.0)}
    assert by_joint["joint3"].level == WARN and by_joint["joint3"].values["condition_mean"] == "0.400"
    assert by_joint["joint3"].values["condition_min"] == "0.200"
    assert by_joint["joint1"].level == OK and "not supervised" in by_joint["joint1"].message
    assert by_joint["joint1"].values["supervised"] == "false"


def test_a_period_without_estimates_is_unknown_and_periods_do_not_mix() -> None:
    status = ConditionStatus(JOINTS, "joint3")
    status.add([1.0, 1.0, 0.0, 1.0, 1.0])
    status.statuses(1.0)
    idle = status.statuses(1.0)
    assert {s.level for s in idle} == {WARN} and all("unknown" in s.message for s in idle)
    status.add([1.0, 1.0, 0.9, 1.0, 1.0])
    status.add([1.0, 1.0, float("nan"), 1.0, 1.0])  # not counted
    joint3 = status.statuses(1.0)[2]
    assert joint3.level == OK and joint3.values["estimates"] == "1"
