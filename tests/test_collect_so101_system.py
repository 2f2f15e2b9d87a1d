"""SO-101 data collection on the simulated rig, processes started as collect.launch.xml robot:=so101
sim:=true describes: the rig serves both arms on Feetech Protocol 0 pty emulators, the SO-101 drivers
(scservo_sdk) and teleop run the arms and the recorder writes one episode whose follower states carry
the six SO-101 joints with Present Load, at >= 95 % of the configured rates, and whose metadata names
the robot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from na_bringup.live_integrity import describe
from na_bringup.live_monitor import GraphWatch
from na_bringup.paths import config_file
from na_bringup.sim_graph import launched, ros_env, sim_rig
from na_common.episode_bag import EpisodeReader
from na_description import load_spec

EPISODE_SECONDS = 5.0
# Share of the configured driver/teleop rates (header stamps) every arm topic must reach: a lower bound with
# margin, as the OpenManipulator-X collect test. Measured on the 2-core machine: 99.2-99.9 % for all three
# topics; with other jobs loading it to a load average of ~15 the drivers dipped to 84-94 % and the teleop's
# commands (best-effort leader subscription) to 64-95 %.
RATE_SHARE = 0.85
SOFT_START_S = 3.0         # config/so101_teleop.yaml soft_start_duration


def configured_rate() -> float:
    """The drivers' loop_rate in config/so101_{leader,follower}_arm.yaml (one value for both)."""
    rates = {yaml.safe_load(config_file(f"so101_{role}_arm.yaml").read_text())["/**"]["ros__parameters"]["loop_rate"]
             for role in ("leader", "follower")}
    assert len(rates) == 1
    return float(rates.pop())


def stamp_s(msg) -> float:
    return msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9


@pytest.mark.system
@pytest.mark.slow
def test_so101_collect_graph_records_an_episode(ros_graph, tmp_path, live) -> None:
    from na_msgs.msg import ArmState, EpisodeInfo
    from na_msgs.srv import StartEpisode, StopEpisode

    spec = load_spec("so101")
    rate = configured_rate()
    out, sim_dir, logs = tmp_path / "episodes", tmp_path / "sim", tmp_path / "logs"
    ros_graph.spin_timeout = 0.05
    node = ros_graph.probe("so101_collect_test")
    states: list = []
    node.create_subscription(ArmState, "/follower/arm_state", states.append, 50)
    start = node.create_client(StartEpisode, "/recorder/start")
    stop = node.create_client(StopEpisode, "/recorder/stop")
    watched = GraphWatch(node)

    def now() -> float:
        return node.get_clock().now().nanoseconds * 1e-9

    attempt = iter(range(1, 100))

    def set_aside(void) -> None:
        """A void episode (marked so by the recorder) is kept apart from the one checked below."""
        if void.episode:
            (tmp_path / "voided").mkdir(exist_ok=True)
            Path(void.episode).rename(tmp_path / "voided" / Path(void.episode).name)

    def episode():
        phase_logs = logs / f"attempt_{next(attempt)}"
        with sim_rig(sim_dir, phase_logs, task="go_up_stay", payload_grams=200.0,
                     robot="so101") as (rig, info, port), \
                launched("collect.launch.xml", {"robot": "so101", "sim": "true", "sim_dir": str(sim_dir),
                                                "ft_port": str(port), "output_dir": str(out)},
                         phase_logs, env=ros_env()) as graph:
            assert info["robot"] == "so101" and info["servo_ids"] == spec.servo_ids

            def ready() -> bool:
                rig.check_alive()
                graph.check_alive()
                return len(states) > (SOFT_START_S + 1.0) * rate and start.service_is_ready() \
                    and watched.watch.ready(now())

            assert ros_graph.wait_for(ready, 120.0), "the SO-101 graph did not come up steadily: " + \
                describe(watched.watch.faults)
            latest = states[-1]
            assert list(latest.name) == spec.joint_names and len(latest.load) == 6
            request = StartEpisode.Request(info=EpisodeInfo(task="go_up_stay", payload_grams=200.0,
                                                            force_source="payload", condition="nominal"))
            started = ros_graph.call(start, request, 30.0)
            assert started.success, started.message
            window, count = now(), len(states)
            assert ros_graph.wait_for(lambda: len(states) >= count + EPISODE_SECONDS * rate, 3 * EPISODE_SECONDS)
            stopped = ros_graph.call(stop, StopEpisode.Request(), 30.0)
            assert stopped.success, stopped.message
            end = now()
            ros_graph.wait_for(lambda: now() > end + 1.2, 5.0)           # the drivers' once-a-second diagnostics
            faults = watched.watch.faults_since(window)
            if faults:
                live.void(f"the episode ran on an unsound rig: {describe(faults)}", window, end, stopped.path)
            return stopped

    stopped = live.run(episode, "the SO-101 episode", set_aside)
    with EpisodeReader(stopped.path) as reader:
        meta = reader.metadata
        stamps: dict[str, list[float]] = {}
        follower = []
        for topic, _, msg in reader.messages(["/leader/arm_state", "/follower/arm_state", "/follower/command"]):
            stamps.setdefault(topic, []).append(stamp_s(msg))
            if topic == "/follower/arm_state":
                follower.append(msg)
    assert meta["robot"] == "so101" and meta["task"] == "go_up_stay" and meta["complete"]
    rates = {topic: (len(s) - 1) / (max(s) - min(s)) for topic, s in stamps.items()}
    print(f"\nSO-101 graph rates (Hz, configured {rate:g}): {rates}")
    for topic in ("/leader/arm_state", "/follower/arm_state", "/follower/command"):
        assert rates.get(topic, 0.0) >= RATE_SHARE * rate, f"{topic}: {rates.get(topic)} Hz"
    assert all(list(m.name) == spec.joint_names and len(m.load) == 6 and len(m.current) == 6 for m in follower)
    load = np.array([m.load for m in follower])
    assert np.all(np.abs(load) <= 1.0) and np.any(load != 0.0)
    stale = np.array([list(m.stale) for m in follower], dtype=bool)
    print(f"stale follower servo readings: {stale.mean():.2%} of {stale.size}")
    assert stale.mean() < 0.05, f"{stale.mean():.1%} of the follower's servo readings were stale"
