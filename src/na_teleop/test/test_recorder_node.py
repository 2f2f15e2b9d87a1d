"""Recorder node in-process over DDS, and the na-record CLI driving it from piped input."""

from __future__ import annotations

import subprocess

import pytest
from rclpy.parameter import Parameter

from na_common.episode_bag import EpisodeReader


def make_recorder(context, out_dir, robot: str | None = None):
    from na_teleop.recorder_node import RecorderNode

    extra = [] if robot is None else [Parameter("robot", value=robot)]
    return RecorderNode(context=context, parameter_overrides=[
        Parameter("output_dir", value=str(out_dir)),
        Parameter("topics", value=["/follower/arm_state", "/episode/grasp", "/ft/wrench"]),
        Parameter("discovery_period", value=0.05), *extra])


@pytest.mark.node
def test_recorder_node_records_an_episode(ros_graph, tmp_path) -> None:
    from std_msgs.msg import Bool

    from na_msgs.msg import ArmState, EpisodeInfo
    from na_msgs.srv import StartEpisode, StopEpisode

    ros_graph.spin_timeout = 0.02
    recorder = ros_graph.add(make_recorder(ros_graph.context, tmp_path, robot="so101"))
    io = ros_graph.probe("recorder_io")
    state_pub = io.create_publisher(ArmState, "/follower/arm_state", 10)
    grasp_pub = io.create_publisher(Bool, "/episode/grasp", 10)
    start = io.create_client(StartEpisode, "/recorder/start")
    stop = io.create_client(StopEpisode, "/recorder/stop")
    assert ros_graph.wait_for(lambda: state_pub.get_subscription_count() and grasp_pub.get_subscription_count(), 10.0)

    info = EpisodeInfo(task="go_up_stay", payload_grams=300.0, force_source="payload", condition="nominal",
                       operator_name="test")
    started = ros_graph.call(start, StartEpisode.Request(info=info))
    assert started.success, started.message
    assert ros_graph.call(start, StartEpisode.Request(info=info)).success is False   # one at a time

    sent = 0

    def publish() -> None:
        nonlocal sent
        state_pub.publish(ArmState(role="follower", name=["joint1"], position=[0.01 * sent]))
        grasp_pub.publish(Bool(data=sent > 5))
        sent += 1
        ros_graph.spin()

    assert ros_graph.wait_for(lambda: recorder.core.stats["/follower/arm_state"].count >= 20, 10.0, publish)
    stopped = ros_graph.call(stop, StopEpisode.Request())
    assert stopped.success and stopped.message_count >= 40
    assert "/ft/wrench" in stopped.message                     # configured but never published
    with EpisodeReader(stopped.path) as reader:
        assert reader.metadata["payload_grams"] == 300.0 and reader.metadata["operator"] == "test"
        assert reader.metadata["robot"] == "so101"                # the recorder's robot parameter
        states = [m for topic, _, m in reader.messages("/follower/arm_state")]
        assert len(states) == recorder.core.stats["/follower/arm_state"].count
        assert states[3].position[0] == pytest.approx(0.03)


@pytest.mark.node
def test_closing_the_node_ends_a_running_episode_as_incomplete(ros_graph, tmp_path) -> None:
    from na_msgs.msg import EpisodeInfo
    from na_msgs.srv import StartEpisode

    recorder = ros_graph.add(make_recorder(ros_graph.context, tmp_path))
    start = ros_graph.probe("recorder_io").create_client(StartEpisode, "/recorder/start")
    started = ros_graph.call(start, StartEpisode.Request(info=EpisodeInfo(task="circle_cw")))
    assert started.success and recorder.core.recording
    ros_graph.close(recorder)
    with EpisodeReader(started.path) as reader:
        assert reader.metadata["complete"] is False and reader.metadata["task"] == "circle_cw"


@pytest.mark.system
def test_na_record_cli_starts_stops_and_quits(ros_graph, wait_for, tmp_path) -> None:
    from std_msgs.msg import Bool

    ros_graph.spin_timeout = 0.02
    recorder = ros_graph.add(make_recorder(ros_graph.context, tmp_path))
    grasp_pub = ros_graph.probe("cli_io").create_publisher(Bool, "/episode/grasp", 10)
    with ros_graph.spinning():          # the executor spins on a thread; the test only polls

        cli = subprocess.Popen(["na-record", "--task", "circle_cw", "--payload", "0", "--operator", "cli"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            cli.stdin.write("\n")
            cli.stdin.flush()
            assert wait_for(lambda: recorder.core.recording, 30.0)
            assert wait_for(lambda: "/episode/grasp" in recorder.core.stats, 10.0)
            for _ in range(10):
                grasp_pub.publish(Bool(data=True))
            assert wait_for(lambda: recorder.core.stats["/episode/grasp"].count >= 10, 10.0)
            cli.stdin.write("\nq\n")
            cli.stdin.flush()
            output, _ = cli.communicate(timeout=30)
        finally:
            if cli.poll() is None:
                cli.kill()
    assert cli.returncode == 0, output
    assert "episode 000001" in output
    with EpisodeReader(tmp_path / "episode_000001") as reader:
        assert reader.metadata["task"] == "circle_cw" and reader.metadata["operator"] == "cli"
        assert "robot" not in reader.metadata                     # no robot parameter: none recorded
        assert reader.metadata["complete"] is True


@pytest.mark.node
def test_na_record_notices_a_recorder_that_died(ros_graph, wait_for, tmp_path) -> None:
    import threading

    ros_graph.spin_timeout = 0.02
    recorder = ros_graph.add(make_recorder(ros_graph.context, tmp_path))
    # The default --timeout (10 s for the services to appear and for each call): discovery of the in-process
    # recorder can take seconds on a busy machine, and the test is about the silence after the start.
    cli = subprocess.Popen(["na-record", "--task", "circle_cw", "--payload", "0"],
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output_lines: list[str] = []
    try:
        with ros_graph.spinning():
            cli.stdin.write("\n")
            cli.stdin.flush()
            if not wait_for(lambda: recorder.core.recording, 30.0):
                cli.kill()
                pytest.fail(f"no episode started in 30 s; na-record printed: {cli.communicate(timeout=10)[0]!r}")
        # Not spinning any more: the recorder publishes no status and answers no service, as if it died.
        reader = threading.Thread(target=lambda: output_lines.extend(cli.stdout), daemon=True)
        reader.start()
        assert wait_for(lambda: any("said nothing" in line for line in output_lines), 20.0), output_lines
        cli.stdin.write("q\n")
        cli.stdin.flush()
        cli.wait(timeout=30)
        reader.join(timeout=5)
    finally:
        if cli.poll() is None:
            cli.kill()
    assert cli.returncode == 1, "".join(output_lines)
    assert not any("Traceback" in line for line in output_lines), "".join(output_lines)


@pytest.mark.node
def test_na_record_ctrl_c_is_one_line_not_a_traceback() -> None:
    import signal
    import time

    cli = subprocess.Popen(["na-record", "--task", "x", "--payload", "0", "--timeout", "30"],
                           stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(2.0)                               # waiting for recorder services that never come
    cli.send_signal(signal.SIGINT)
    output, _ = cli.communicate(timeout=30)
    assert cli.returncode == 130, output
    assert "interrupted" in output and "Traceback" not in output, output
