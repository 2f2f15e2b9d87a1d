"""na-record's status line and recorder watch (pure)."""

from __future__ import annotations

from na_teleop.record_status import RecorderWatch, status_line

STATUS = {"recording": True, "episode": "episode_000007", "elapsed": 12.34, "error": "",
          "topics": {"/leader/arm_state": {"count": 1234, "rate_hz": 100.2},
                     "/follower/arm_state": {"count": 1233, "rate_hz": 99.8},
                     "/leader/joint_states": {"count": 1234, "rate_hz": 100.0},
                     "/follower/joint_states": {"count": 1233, "rate_hz": 100.0},
                     "/follower/command": {"count": 1230, "rate_hz": 100.0},
                     "/ft/wrench": {"count": 6000, "rate_hz": 500.0},
                     "/my/other/topic": {"count": 3, "rate_hz": 1.0}}}


def test_each_topic_has_its_own_label():
    line = status_line(STATUS, 1000)
    for label in ("leader 100Hz", "follower 100Hz", "leader_js 100Hz", "follower_js 100Hz", "command 100Hz",
                  "ft 500Hz", "/my/other/topic 1Hz"):
        assert label in line
    assert line.startswith("REC episode_000007   12.3s")


def test_the_line_never_exceeds_the_terminal_width():
    for width in (120, 80, 40, 10):
        line = status_line(STATUS, width)
        assert len(line) <= width
    assert status_line(STATUS, 40).endswith("…")
    assert status_line({"recording": False, "error": "disk full"}, 80) == "idle - disk full"


def test_a_silent_recorder_is_reported_once_and_only_while_recording():
    watch = RecorderWatch(now=100.0, silence_limit=3.0)
    assert watch.lost(102.9, recording=True) is None
    assert watch.lost(110.0, recording=False) is None           # idle: nothing to lose
    message = watch.lost(103.5, recording=True)
    assert message is not None and "said nothing for 4 s" in message
    assert watch.lost(104.0, recording=True) is None             # said once
    watch.on_status(105.0)
    assert watch.lost(107.0, recording=True) is None
    assert watch.lost(108.5, recording=True) is not None
