"""Recorder core and bag repair: episodes are written, reported, discarded; a killed recorder's
partial episode becomes readable up to its last flushed chunk; write failures are loud."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest

from na_common.bag_repair import recover_incomplete_episodes
from na_common.episode_bag import BOOL, EpisodeReader, message_class, serialize
from na_teleop.recorder_core import RecorderCore, RecorderError

TOPICS = {"/episode/grasp": BOOL}


def raw_bool(value: bool) -> bytes:
    return serialize(message_class(BOOL)(data=value), BOOL)


def test_episode_is_written_reported_and_readable(tmp_path) -> None:
    core = RecorderCore(tmp_path, dict(TOPICS), configured_topics=["/episode/grasp", "/ft/wrench"])
    core.prepare()
    core.start({"task": "pick_place", "payload_grams": 200.0}, stamp_ns=1_000_000_000)
    for k in range(100):
        core.on_message("/episode/grasp", 1_000_000_000 + k * 10_000_000, raw_bool(k % 2 == 0))
    status = core.live_status(now_ns=2_000_000_000)
    assert status["recording"] and status["topics"]["/episode/grasp"]["count"] == 100
    report = core.stop(stamp_ns=2_000_000_000)
    assert report.complete and report.topics["/episode/grasp"]["count"] == 100
    assert report.topics["/episode/grasp"]["rate_hz"] == pytest.approx(100.0, rel=1e-6)
    assert report.missing_topics == ["/ft/wrench"]
    assert report.duration == pytest.approx(1.0)
    with EpisodeReader(report.path) as reader:
        assert reader.metadata["task"] == "pick_place"
        assert reader.metadata["force_source"] == "payload"
        assert reader.metadata["source"] == "live" and reader.metadata["complete"] is True
        assert [m.data for _, _, m in reader.messages()][:3] == [True, False, True]
    assert json.loads((tmp_path / "episode_000001" / "report.json").read_text())["complete"] is True


def test_discard_removes_the_episode_and_numbering_goes_on(tmp_path) -> None:
    core = RecorderCore(tmp_path, dict(TOPICS))
    core.prepare()
    core.start({"task": "a"}, 0)
    core.on_message("/episode/grasp", 1, raw_bool(True))
    discarded = core.discard()
    assert not discarded.exists()
    with pytest.raises(RecorderError, match="not recording"):
        core.stop(5)
    writer = core.start({"task": "b"}, 10)
    assert writer.path.name == "episode_000001"


def test_start_needs_a_task_and_one_episode_at_a_time(tmp_path) -> None:
    core = RecorderCore(tmp_path, dict(TOPICS))
    core.prepare()
    with pytest.raises(RecorderError, match="task"):
        core.start({"task": ""}, 0)
    core.start({"task": "a"}, 0)
    with pytest.raises(RecorderError, match="already recording"):
        core.start({"task": "b"}, 0)


def test_unwritable_directory_is_a_clear_error(tmp_path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("x")
    with pytest.raises(RecorderError, match="cannot create output directory"):
        RecorderCore(blocked / "episodes", dict(TOPICS)).prepare()
    if os.geteuid() != 0:   # root ignores directory permissions
        readonly = tmp_path / "ro"
        readonly.mkdir(mode=0o500)
        with pytest.raises(RecorderError, match="not writable"):
            RecorderCore(readonly, dict(TOPICS)).prepare()


def test_disk_full_ends_the_episode_loudly_and_keeps_it(tmp_path, monkeypatch) -> None:
    core = RecorderCore(tmp_path, dict(TOPICS))
    core.prepare()
    writer = core.start({"task": "a"}, 0)
    core.on_message("/episode/grasp", 1, raw_bool(True))

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(writer, "write_raw", full)
    core.on_message("/episode/grasp", 2, raw_bool(True))
    assert not core.recording
    assert "disk full" in core.error
    assert (writer.path / "episode.json").is_file()
    with pytest.raises(RecorderError, match="disk full"):
        core.stop(3)


KILLED_RECORDER = textwrap.dedent("""
    import os, signal, sys
    from na_common.episode_bag import BOOL, message_class, serialize
    from na_teleop.recorder_core import RecorderCore
    raw = serialize(message_class(BOOL)(data=True), BOOL)
    core = RecorderCore(sys.argv[1], {"/episode/grasp": BOOL}, flush_period=0.0)
    core.prepare()
    core.start({"task": "first"}, 0)
    for k in range(50):
        core.on_message("/episode/grasp", k, raw)
    core.stop(100)
    core.start({"task": "second"}, 200)
    for k in range(30):
        core.on_message("/episode/grasp", 200 + k, raw)   # flush_period 0: every message is flushed
    bio = core.writer._writer.storage.bio            # a chunk record cut off mid-write
    bio.write(bytes([0x06]) + (1000).to_bytes(8, "little") + b"half a chunk")
    bio.flush()
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_sigkill_keeps_finished_episodes_and_the_partial_one_readable(tmp_path) -> None:
    result = subprocess.run([sys.executable, "-c", KILLED_RECORDER, str(tmp_path)], capture_output=True, timeout=60)
    assert result.returncode == -signal.SIGKILL
    first, second = tmp_path / "episode_000001", tmp_path / "episode_000002"
    assert (first / "metadata.yaml").is_file() and not (second / "metadata.yaml").is_file()
    report = recover_incomplete_episodes(tmp_path)
    assert report.repaired == [second] and report.set_aside == []
    with EpisodeReader(first) as reader:
        assert reader.metadata["complete"] is True and len(list(reader.messages())) == 50
    with EpisodeReader(second) as reader:
        assert reader.metadata["complete"] is False
        assert len(list(reader.messages())) == 30
    assert json.loads((second / "episode.json").read_text())["recovered"] is True
    assert list(second.glob("*.mcap.partial"))   # the original bytes are kept
    assert recover_incomplete_episodes(tmp_path).repaired == []   # idempotent


def test_report_rates_use_header_stamps_when_messages_have_them(tmp_path) -> None:
    """Messages that arrive in a burst but were sampled at 100 Hz report 100 Hz and a 10 ms gap."""
    from na_common.episode_bag import WRENCH_STAMPED, make_header
    from na_common.episode_bag.messages import cdr_header_stamp_ns

    vector = message_class("geometry_msgs/msg/Vector3")
    wrench = message_class("geometry_msgs/msg/Wrench")
    stamped = message_class(WRENCH_STAMPED)
    core = RecorderCore(tmp_path, {"/ft/wrench": WRENCH_STAMPED, **TOPICS})
    core.prepare()
    core.start({"task": "a"}, 0)
    for k in range(50):
        sample_ns = 5_000_000_000 + k * 10_000_000
        zero = vector(x=0.0, y=0.0, z=0.0)
        raw = serialize(stamped(header=make_header(sample_ns), wrench=wrench(force=zero, torque=zero)), WRENCH_STAMPED)
        assert cdr_header_stamp_ns(raw) == sample_ns
        core.on_message("/ft/wrench", 6_000_000_000 + k * 1000, raw)   # all received within 50 µs
        core.on_message("/episode/grasp", 6_000_000_000 + k * 1000, raw_bool(True))
    report = core.stop(7_000_000_000)
    assert report.topics["/ft/wrench"]["rate_hz"] == pytest.approx(100.0)
    assert report.topics["/ft/wrench"]["max_gap_s"] == pytest.approx(0.01)
    assert report.topics["/episode/grasp"]["rate_hz"] > 1e5          # no header: receive times


RECORDING_UNTIL_KILLED = textwrap.dedent("""
    import sys, time
    from na_common.episode_bag import BOOL, message_class, serialize
    from na_teleop.recorder_core import RecorderCore
    raw = serialize(message_class(BOOL)(data=True), BOOL)
    core = RecorderCore(sys.argv[1], {"/episode/grasp": BOOL})      # the default chunk period
    core.prepare()
    core.start({"task": "killed"}, 0)
    k = 0
    while True:                                                      # 100 Hz until the parent kills us
        core.on_message("/episode/grasp", k * 10_000_000, raw)
        print(k, flush=True)
        k += 1
        time.sleep(0.01)
""")


def test_a_recorder_killed_mid_episode_is_repaired_by_the_next_start(tmp_path) -> None:
    """SIGKILL with the default chunk period; the next recorder's start-up repairs the episode, losing at most
    about one chunk period, and does not reuse its number."""
    chunk_period = 1.0                               # the recorder's default (config/recorder.yaml)
    process = subprocess.Popen([sys.executable, "-c", RECORDING_UNTIL_KILLED, str(tmp_path)],
                               stdout=subprocess.PIPE, text=True)
    written = 0
    for line in process.stdout:                      # about 2.5 s of messages
        written = int(line) + 1
        if written >= 250:
            break
    process.kill()
    process.wait(timeout=10)
    episode = tmp_path / "episode_000001"
    assert not (episode / "metadata.yaml").is_file()

    core = RecorderCore(tmp_path, dict(TOPICS))
    report = core.prepare()
    assert report.repaired == [episode] and report.set_aside == []
    with EpisodeReader(episode) as reader:
        kept = len(list(reader.messages()))
        assert reader.metadata["complete"] is False
    # messages per second x (chunk period + scheduling slack on a loaded machine)
    assert written - kept <= 100 * (chunk_period + 0.5), f"kept {kept} of {written} messages"
    assert kept > 0
    core.start({"task": "next"}, 0)
    assert core.writer.path.name == "episode_000002"
    core.stop(1)


def test_unrepairable_leftovers_are_set_aside_and_never_block_a_start(tmp_path) -> None:
    """A recorder killed within a fraction of a second leaves an empty MCAP (and a writer may die before its
    sidecar): the start-up moves such folders aside, keeps their bytes, and numbering goes on after them."""
    from na_common.episode_bag import EpisodeWriter

    empty = EpisodeWriter(tmp_path, {"task": "a", "payload_grams": 0, "force_source": "none",
                                     "condition": "nominal", "source": "live"})
    empty.abort()
    next(empty.path.glob("*.mcap")).write_bytes(b"")                  # 0-byte MCAP, sidecar present
    no_sidecar = tmp_path / "episode_000002"
    no_sidecar.mkdir()
    (no_sidecar / "episode_000002_0.mcap").write_bytes(b"\x89MCAP0\r\n")
    garbled = tmp_path / "episode_000003"
    garbled.mkdir()
    (garbled / "episode.json").write_text("{not json")
    (garbled / "episode_000003_0.mcap").write_bytes(b"junk")

    core = RecorderCore(tmp_path, dict(TOPICS))
    report = core.prepare()
    assert report.repaired == []
    moved = sorted(path.name for path, _reason in report.set_aside)
    assert moved == ["episode_000001.unreadable", "episode_000002.unreadable", "episode_000003.unreadable"]
    assert all(reason for _path, reason in report.set_aside)
    assert (tmp_path / "episode_000003.unreadable" / "episode.json").read_text() == "{not json"   # nothing lost
    assert len(report.warnings()) == 3
    core.start({"task": "b"}, 0)
    assert core.writer.path.name == "episode_000004"
    core.stop(1)
    assert core.prepare().set_aside == []                            # a second start has nothing to move


# ---- integrity: faults from /diagnostics -----------------------------------------------------------------
def status(name: str, level: int, message: str):
    from na_common.diagnostics import Level, StatusReport

    return StatusReport(name=name, level=Level(level), message=message, hardware_id="/dev/ttyUSB1")


TRIP_MESSAGE = ("follower tripped, torque off and holding: servo 13 (joint3): no valid reply for 0.52 s (error "
                "timeout 0.50 s); call /follower/arm_driver/reboot")


def healthy_follower():
    return [status("/follower/arm_driver: bus", 0, "running"), status("/follower/arm_driver: trip", 0, "not tripped"),
            status("/follower/arm_driver: servo 13 (joint3)", 0, "ok")]


def tripped_follower():
    return [status("/follower/arm_driver: bus", 0, "running"), status("/follower/arm_driver: trip", 2, TRIP_MESSAGE),
            status("/follower/arm_driver: servo 13 (joint3)", 2, "tripped: no valid reply for 0.52 s (error timeout "
                                                                  "0.50 s); not responding")]


def test_a_follower_trip_during_an_episode_marks_it_void_with_time_and_message(tmp_path) -> None:
    core = RecorderCore(tmp_path, dict(TOPICS))
    core.prepare()
    core.on_diagnostics(healthy_follower(), 900_000_000)
    writer = core.start({"task": "pick_place"}, stamp_ns=1_000_000_000)
    core.on_message("/episode/grasp", 1_100_000_000, raw_bool(False))
    assert not core.on_diagnostics(healthy_follower(), 1_200_000_000)
    assert len(core.on_diagnostics(tripped_follower(), 1_500_000_000)) == 2
    # Written at once: a recorder killed now still leaves the episode marked.
    sidecar = json.loads((writer.path / "episode.json").read_text())
    assert sidecar["void"] is True and "no valid reply" in sidecar["void_reason"]
    assert not core.on_diagnostics(tripped_follower(), 1_600_000_000)          # the same trip, reported again
    core.on_diagnostics(healthy_follower(), 1_800_000_000)                    # rebooted
    report = core.stop(stamp_ns=2_000_000_000)
    assert report.void and "VOID" in report.lines()[0] and "no valid reply" in report.lines()[0]
    with EpisodeReader(report.path) as reader:                                # metadata.yaml custom_data
        meta = reader.metadata
    on_disk = json.loads((writer.path / "episode.json").read_text())
    for source in (meta, on_disk):
        assert source["void"] is True
        assert source["void_reason"] == f"/follower/arm_driver: trip: {TRIP_MESSAGE}"
        trip = [f for f in source["faults"] if f["status"] == "/follower/arm_driver: trip"]
        assert len(trip) == 1 and len(source["faults"]) == 2
        assert trip[0]["message"] == TRIP_MESSAGE and trip[0]["level"] == "ERROR" and trip[0]["void"] is True
        assert trip[0]["since_ns"] == 1_500_000_000 and trip[0]["until_ns"] == 1_800_000_000


def test_other_errors_are_recorded_without_voiding_and_episodes_keep_their_own_faults(tmp_path) -> None:
    core = RecorderCore(tmp_path, dict(TOPICS))
    core.prepare()
    core.start({"task": "push"}, stamp_ns=0)
    core.on_diagnostics([status("estimator", 2, "model failed"),
                         status("/ft/ft_driver: netft", 3, "no good reading within the stale timeout"),
                         status("policy", 1, "holding")], 100)
    first = core.stop(stamp_ns=1_000)
    with EpisodeReader(first.path) as reader:
        meta = reader.metadata
    assert meta["void"] is False and meta["void_reason"] == ""
    assert sorted((f["status"], f["level"], f["void"]) for f in meta["faults"]) == [
        ("/ft/ft_driver: netft", "STALE", False), ("estimator", "ERROR", False)]
    # A trip that began between episodes and lasts into the next one belongs to it; the first stays clean.
    core.on_diagnostics(tripped_follower(), 2_000)
    core.start({"task": "push"}, stamp_ns=3_000)
    second = core.stop(stamp_ns=4_000)
    with EpisodeReader(second.path) as reader:
        assert reader.metadata["void"] is True
        assert {f["since_ns"] for f in reader.metadata["faults"] if f["void"]} == {2_000}
    with EpisodeReader(first.path) as reader:
        assert reader.metadata["void"] is False


def test_a_discarded_episode_leaves_no_faults_to_the_next(tmp_path) -> None:
    core = RecorderCore(tmp_path, dict(TOPICS))
    core.prepare()
    core.start({"task": "a"}, 0)
    core.on_diagnostics(tripped_follower(), 10)
    core.on_diagnostics(healthy_follower(), 20)
    core.discard()
    core.start({"task": "a"}, 30)
    with EpisodeReader(core.stop(40).path) as reader:
        assert reader.metadata["void"] is False and reader.metadata["faults"] == []


def test_the_simulated_rig_falling_behind_voids_the_episode(tmp_path) -> None:
    core = RecorderCore(tmp_path, dict(TOPICS))
    core.prepare()
    core.start({"task": "push"}, stamp_ns=0)
    core.on_diagnostics([status("sim_rig: physics", 0, "at pace")], 100)
    core.on_diagnostics([status("sim_rig: physics", 2, "physics fell behind wall time by 83 ms (margin 50 ms)")], 200)
    report = core.stop(stamp_ns=1_000)
    with EpisodeReader(report.path) as reader:
        meta = reader.metadata
    assert meta["void"] is True and "fell behind" in meta["void_reason"]
