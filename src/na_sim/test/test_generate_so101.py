"""Offline episode generator with the SO-101: STS3215 decoding, Protocol 0 bus times, the robot name
in the metadata, payload load on shoulder_lift, per-robot tasks and payload sets."""

from __future__ import annotations

import dataclasses

import mujoco
import numpy as np
import pytest

from na_common import episode_bag as eb
from na_description import load_spec
from na_description.model import load_model
from na_sim import generate as gen
from na_sim import tasks
from na_sim.cli import main as cli_main
from na_sim.task_profile import task_profile
from na_sim.tasks import make_task

SO101 = load_spec("so101")
STALL_CURRENT = 2.7          # A at 12 V, STS3215 datasheet
STALL_TORQUE = 2.94         # N·m at 12 V, STS3215 datasheet
# Protocol 0 at 1 Mbps (10 bits per byte), counted by hand from the packet format FF FF ID LEN INST/ERR
# params CHK (6 bytes around the parameters): Sync Read of 15 bytes from 6 servos = instruction
# 6 + 2 + 6 bytes and 6 replies of 6 + 15 bytes; Sync Write of the 2-byte Goal Position = 6 + 2 + 6 * 3
# bytes. Plus the 1 ms USB latency timer per transaction.
READ_S = ((6 + 2 + 6) + 6 * (6 + 15)) * 10e-6 + 0.001
WRITE_S = (6 + 2 + 6 * 3) * 10e-6 + 0.001
JITTER_S = 0.0003


def _generate(out, payload: float, seconds: float):
    options = gen.GenerateOptions(tasks=["go_up_stay"], robot="so101", episodes=1, seed=2, out=out, quick=True,
                                  payloads=[payload], max_seconds=seconds)
    report = gen.generate(options, progress=False, log=lambda _: None)
    assert len(report.episodes) == 1
    return report.episodes[0]


def _first_episode_seed(task: str, run_seed: int) -> int:
    """The seed the generator gives the first episode of ``task`` in a run at ``run_seed`` (from its plan)."""
    return gen.plan_episodes(gen.GenerateOptions(tasks=[task], robot="so101", episodes=1, seed=run_seed))[0][2]


def _read(path, topic):
    with eb.EpisodeReader(path) as reader:
        return [(stamp, msg) for _, stamp, msg in reader.messages(topic)]


@pytest.fixture(scope="module")
def episodes(tmp_path_factory):
    episode = make_task("go_up_stay", _first_episode_seed("go_up_stay", 2), 500.0, quick=True, spec=SO101)
    seconds = episode.grasp_intervals[0][0] + 5.0          # into the lifted hold
    out = tmp_path_factory.mktemp("so101")
    return {grams: _generate(out, grams, seconds) for grams in (0.0, 500.0)}


def test_metadata_names_the_robot_and_messages_the_spec_joints(episodes):
    path = episodes[500.0].path
    meta = eb.episode_metadata(path, eb.read_rosbag2_info(path))
    assert meta["robot"] == "so101" and meta["task"] == "go_up_stay" and meta["payload_grams"] == 500.0
    _, state = _read(path, "/follower/arm_state")[-1]
    assert list(state.name) == SO101.joint_names
    for topic in ("/leader/joint_states", "/follower/joint_states", "/follower/command"):
        assert list(_read(path, topic)[-1][1].name) == SO101.joint_names


def test_arm_state_carries_sts_load_current_and_status(episodes):
    states = np.array([msg.load for _, msg in _read(episodes[500.0].path, "/follower/arm_state")])
    messages = [msg for _, msg in _read(episodes[500.0].path, "/follower/arm_state")]
    assert states.shape == (len(messages), 6)
    assert np.all(np.abs(states) <= 1.0) and np.any(np.abs(states[:, 1]) > 0.05)
    last = messages[-1]
    np.testing.assert_array_equal(last.pwm, last.load)            # Present Load is the output duty
    currents = np.array([m.current for m in messages])
    assert np.all(np.abs(currents) < STALL_CURRENT) and np.max(np.abs(currents[:, 1])) > 0.05
    assert np.all((last.input_voltage > 11.0) & (last.input_voltage < 12.5))
    assert np.all((last.temperature > 20.0) & (last.temperature < 50.0))
    assert list(last.hardware_error) == [0] * 6
    leader = [msg for _, msg in _read(episodes[500.0].path, "/leader/arm_state")]
    assert len(leader[-1].load) == 6 and np.all(np.array([m.load for m in leader]) == 0.0)   # torque off


def test_bus_stamps_are_protocol0_sync_read_and_write_times(episodes):
    leader = _read(episodes[0.0].path, "/leader/arm_state")
    follower = _read(episodes[0.0].path, "/follower/arm_state")
    cycle_ns = 10_000_000
    t0 = leader[0][0] - round(leader[0][1].bus_cycle_duration * 1e9)
    leader_offsets = np.array([(stamp - t0) % cycle_ns for stamp, _ in leader[1:]]) * 1e-9
    follower_offsets = np.array([(stamp - t0) % cycle_ns for stamp, _ in follower[1:]]) * 1e-9
    assert np.all(leader_offsets > READ_S - 1e-6) and np.all(leader_offsets < READ_S + JITTER_S + 1e-6)
    both = READ_S + WRITE_S
    assert np.all(follower_offsets > both - 1e-6) and np.all(follower_offsets < both + JITTER_S + 1e-6)


def test_held_payload_shows_in_the_shoulder_lift_load(episodes):
    """While the 500 g payload is held still, |Present Load| of shoulder_lift exceeds the most the arm alone
    could need (its static gravity torque at the recorded pose over the stall torque, +20 %) and stays below
    what arm plus payload could need. Gravity torques from the SO-101 model's masses and a point payload at
    the tool site."""
    model = load_model(SO101)
    data = mujoco.MjData(model)
    site = mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, SO101.tool_site)
    jacobian = np.zeros((3, model.nv))
    episode = make_task("go_up_stay", _first_episode_seed("go_up_stay", 2), 500.0, quick=True, spec=SO101)
    rows = _read(episodes[500.0].path, "/follower/arm_state")
    t0 = rows[0][0]
    measured, arm_only, with_payload = [], [], []
    for stamp, msg in rows:
        # lifted and holding still: the static torques below hold only there (the lift's end varies by episode)
        if (stamp - t0) * 1e-9 < episode.grasp_intervals[0][0] + 2.5 or np.max(np.abs(msg.velocity[:4])) > 0.03:
            continue
        data.qpos[:] = msg.position
        mujoco.mj_forward(model, data)
        mujoco.mj_jacSite(model, data, jacobian, None, site)
        arm = data.qfrc_bias[1]                                           # holding torque, arm only
        measured.append(abs(msg.load[1]))
        arm_only.append(abs(arm))
        with_payload.append(abs(arm + 0.5 * 9.81 * jacobian[2, 1]))
    assert len(measured) > 50
    assert np.mean(measured) > 1.2 * np.mean(arm_only) / STALL_TORQUE
    assert np.mean(measured) < 1.2 * np.mean(with_payload) / STALL_TORQUE


def test_robot_tasks_payload_sets_and_mismatches_are_one_line_errors(tmp_path, capsys, monkeypatch):
    plan = gen.plan_episodes(gen.GenerateOptions(tasks=["payload"], robot="so101", out=tmp_path))
    assert sorted({grams for task, grams, _ in plan if task == "pick_place"}) == [0, 200, 300, 400, 500]
    assert {task for task, _, _ in plan} == {"pick_place", "go_up_stay"}
    assert gen.resolve_tasks(["all"], SO101) == list(tasks.TASK_IDS)          # the SO-101 runs every task
    # A robot whose profile lists fewer tasks: the others and groups without any of its tasks are refused.
    narrow = dataclasses.replace(task_profile(SO101), tasks=("circle_cw", "go_up_stay"))
    monkeypatch.setattr(tasks, "profile_of", lambda spec: narrow if spec.name == "so101" else task_profile(spec))
    for argv, expected in (
        (["--robot", "so101", "--tasks", "push_px"], "task 'push_px' is not in the task profile of robot 'so101'"),
        (["--robot", "so101", "--tasks", "push"], "group 'push' has no task robot 'so101' runs"),
        (["--robot", "so101", "--rig-config", "sim_rig", "--tasks", "circle_cw"],
         "is for robot 'open_manipulator_x', not 'so101'"),
        (["--robot", "ur5", "--tasks", "circle_cw"], "no simulated rig for robot 'ur5'"),
    ):
        assert cli_main(["generate", *argv, "--out", str(tmp_path / "x"), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert expected in err and "\n" not in err
    assert not (tmp_path / "x").exists()


def test_push_episode_presses_the_fixture_within_the_scripted_force_range(tmp_path):
    episode = make_task("push_nz", _first_episode_seed("push_nz", 4), quick=True, spec=SO101)
    start, stop = episode.press_intervals[0]
    options = gen.GenerateOptions(tasks=["push_nz"], robot="so101", episodes=1, seed=4, out=tmp_path, quick=True,
                                  max_seconds=stop)
    path = gen.generate(options, progress=False, log=lambda _: None).episodes[0].path
    t0 = _read(path, "/sim/truth/wrench")[0][0]
    pressing = [np.linalg.norm([m.wrench.force.x, m.wrench.force.y, m.wrench.force.z])
                for stamp, m in _read(path, "/sim/truth/wrench") if start + 0.3 < (stamp - t0) * 1e-9 < stop]
    assert pressing and 3.0 < np.median(pressing) < 30.0            # the task aims at roughly 5-20 N
    contact = [m.data for stamp, m in _read(path, "/sim/truth/contact") if (stamp - t0) * 1e-9 < start - 2.0]
    assert not any(contact)                                          # no touch before the approach
    assert len(_read(path, "/ft/wrench")) > 150 * stop               # ~200 Hz sensor stream in push episodes
