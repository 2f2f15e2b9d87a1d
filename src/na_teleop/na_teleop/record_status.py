"""What na-record shows while recording, and how it notices that the recorder is gone (ROS-free).

The status line names each topic by a short label that is unique (arm + stream), and is cut to the
terminal width: a line wider than the terminal wraps, and every refresh would scroll a new line.
"""

from __future__ import annotations

from na_common import topics

# Short, unambiguous labels for the episode topics; other topics show their full name.
LABELS = {
    topics.LEADER_ARM_STATE: "leader",
    topics.FOLLOWER_ARM_STATE: "follower",
    topics.FOLLOWER_COMMAND: "command",
    topics.LEADER_JOINT_STATES: "leader_js",
    topics.FOLLOWER_JOINT_STATES: "follower_js",
    topics.FT_WRENCH: "ft",
    topics.GRASP: "grasp",
    topics.TRUTH_WRENCH: "truth_force",
    topics.TRUTH_CONTACT: "truth_contact",
}
STATUS_PERIOD_S = 0.5          # the recorder publishes ~/status this often
SILENCE_LIMIT_S = 3.0          # no status for this long while recording: the recorder is gone


def topic_label(topic: str) -> str:
    return LABELS.get(topic, topic)


def status_line(status: dict, width: int) -> str:
    """One line of at most ``width`` characters (an ellipsis marks a cut)."""
    if not status.get("recording"):
        line = "idle" + (f" - {status['error']}" if status.get("error") else "")
    else:
        rates = "  ".join(f"{topic_label(t)} {v['rate_hz']:.0f}Hz" for t, v in status.get("topics", {}).items())
        line = f"REC {status['episode']} {status['elapsed']:6.1f}s  {rates}"
    width = max(width, 4)
    return line if len(line) <= width else line[: width - 1] + "…"


class RecorderWatch:
    """Notices a recorder that stopped publishing its status while an episode was being recorded."""

    def __init__(self, now: float, silence_limit: float = SILENCE_LIMIT_S) -> None:
        self.last_status = now
        self.silence_limit = silence_limit
        self.reported = False

    def on_status(self, now: float) -> None:
        self.last_status = now
        self.reported = False

    def lost(self, now: float, recording: bool) -> str | None:
        """A one-line message the first time the recorder is found silent while recording, else None."""
        silent = now - self.last_status
        if not recording or silent < self.silence_limit or self.reported:
            return None
        self.reported = True
        return (f"na-record: the recorder has said nothing for {silent:.0f} s (did it die?); the episode on disk "
                "is repaired when a recorder starts again on its folder")
