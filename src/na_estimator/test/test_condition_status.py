"""ConditionStatus: per-motor statuses of one diagnostics period (oracle: means and evidence computed by hand)."""

from __future__ import annotations

from na_common.condition_monitor import MonitorSettings
from na_common.diagnostics import OK, WARN
from na_estimator.condition_status import ConditionStatus

JOINTS = ("joint1", "joint2", "joint3", "joint4", "gripper")


def test_the_supervised_motor_is_graded_by_the_monitor_and_the_others_report_only() -> None:
    status = ConditionStatus(JOINTS, "joint3")
    status.add([0.1, 1.0, 0.6, 1.0, 1.0], 0.0)
    status.add([0.1, 1.0, 0.2, 1.0, 1.0], 0.01)     # joint3 mean 0.4, but 10 ms of evidence: still nominal
    by_joint = {s.joint: s for s in status.statuses(1.0)}
    assert by_joint["joint3"].level == OK and by_joint["joint3"].values["condition_mean"] == "0.400"
    assert by_joint["joint3"].values["condition_min"] == "0.200"
    assert by_joint["joint3"].values["monitor_state"] == "nominal"
    assert by_joint["joint1"].level == OK and "not supervised" in by_joint["joint1"].message
    assert by_joint["joint1"].values["supervised"] == "false" and "monitor_state" not in by_joint["joint1"].values


def test_a_restricted_looking_motor_becomes_suspect_then_degraded_and_stays_so() -> None:
    status = ConditionStatus(JOINTS, "joint3", MonitorSettings(drift=0.5, suspect_s=0.5, degraded_s=2.0))
    # joint3 scores 0 every 10 ms: evidence grows by (1 - 0 - 0.5) * 0.01 = 5 ms per frame
    for k in range(150):                            # 1.49 s of frames: evidence 0.745 s (suspect from 0.5 s)
        status.add([1.0, 1.0, 0.0, 1.0, 1.0], 0.01 * k)
    joint3 = status.statuses(1.5)[2]
    assert joint3.level == WARN and joint3.values["monitor_state"] == "suspect" and "suspect" in joint3.message
    for k in range(150, 450):                       # evidence 2.245 s: degraded once it passed 2 s (frame 400)
        status.add([1.0, 1.0, 0.0, 1.0, 1.0], 0.01 * k)
    joint3 = status.statuses(3.0)[2]
    assert joint3.level == WARN and joint3.values["monitor_state"] == "degraded"
    assert joint3.values["degraded_at_s"] == "4.0"
    for k in range(450, 1000):                      # nominal scores again: the decision stays
        status.add([1.0, 1.0, 1.0, 1.0, 1.0], 0.01 * k)
    assert status.statuses(5.5)[2].values["monitor_state"] == "degraded"
    status.reset_monitor()
    status.add([1.0, 1.0, 1.0, 1.0, 1.0], 10.0)
    assert status.statuses(1.0)[2].level == OK


def test_estimates_in_contact_add_no_evidence() -> None:
    """A grasp or a push lowers the score without a fault: the estimate's contact probability gates the monitor."""
    status = ConditionStatus(JOINTS, "joint3", MonitorSettings(drift=0.5, suspect_s=0.5, degraded_s=2.0,
                                                               contact_limit=0.5))
    for k in range(600):                            # 6 s of joint3 at score 0, all of it in contact
        status.add([1.0, 1.0, 0.0, 1.0, 1.0], 0.01 * k, 0.9)
    assert status.statuses(6.0)[2].values["monitor_state"] == "nominal"
    for k in range(600, 750):                       # out of contact: 1.49 s adds 0.745 s of evidence
        status.add([1.0, 1.0, 0.0, 1.0, 1.0], 0.01 * k, 0.1)
    assert status.statuses(1.5)[2].values["monitor_state"] == "suspect"


def test_a_period_without_estimates_is_unknown_and_periods_do_not_mix() -> None:
    status = ConditionStatus(JOINTS, "joint3")
    status.add([1.0, 1.0, 0.0, 1.0, 1.0], 0.0)
    status.statuses(1.0)
    idle = status.statuses(1.0)
    assert {s.level for s in idle} == {WARN} and all("unknown" in s.message for s in idle)
    status.add([1.0, 1.0, 0.9, 1.0, 1.0], 0.5)
    status.add([1.0, 1.0, float("nan"), 1.0, 1.0], 0.51)  # not counted
    joint3 = status.statuses(1.0)[2]
    assert joint3.level == OK and joint3.values["estimates"] == "1"
