"""Offline episode generator: real rig physics -> real rosbag2 MCAP episodes, read back two ways."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest
from rosbags.highlevel import AnyReader

from na_common import episode_bag as eb
from na_sim import generate as gen
from na_sim.cli import main as cli_main
from na_sim.tasks import PUSH_AXES, make_task

ARM_TOPICS = ("/leader/arm_state", "/follower/arm_state", "/leader/joint_states", "/follower/joint_states",
              "/follower/command", "/sim/truth/wrench", "/sim/truth/contact")


def _generate(out, tasks, seed=3, max_seconds=None, payloads=None):
    options = gen.GenerateOptions(tasks=tasks, episodes=1, seed=seed, out=out, quick=True, payloads=payloads,
                                  max_seconds=max_seconds)
    report = gen.generate(options, progress=False, log=lambda _: None)
    assert len(report.episodes) == 1
    return report.episodes[0]


def _rate(stamps: list[int]) -> float:
    return (len(stamps) - 1) / ((stamps[-1] - stamps[0]) * 1e-9)


def _read(path, topic):
    with eb.EpisodeReader(path) as reader:
        return [(stamp, msg) for _, stamp, msg in reader.messages(topic)]


@pytest.fixture(scope="module")
def circle(tmp_path_factory):
    return _generate(tmp_path_factory.mktemp("circle"), ["circle_cw"], max_seconds=3.0)


def _first_episode_seed(task: str, run_seed: int = 3) -> int:
    """The seed the generator gives the first episode of ``task`` in a run at ``run_seed`` (from its plan)."""
    return gen.plan_episodes(gen.GenerateOptions(tasks=[task], episodes=1, seed=run_seed))[0][2]


@pytest.fixture(scope="module")
def push(tmp_path_factory):
    episode = make_task("push_px", _first_episode_seed("push_px"), quick=True)
    first_press = episode.press_intervals[0][0]
    return _generate(tmp_path_factory.mktemp("push"), ["push_px"], max_seconds=first_press + 0.6), episode


@pytest.fixture(scope="module")
def payload(tmp_path_factory):
    episode = make_task("go_up_stay", _first_episode_seed("go_up_stay"), 300.0, quick=True)
    grasp_start = episode.grasp_intervals[0][0]
    return _generate(tmp_path_factory.mktemp("payload"), ["go_up_stay"], max_seconds=grasp_start + 1.0,
                     payloads=[300.0]), episode


def test_bag_layout_metadata_and_both_readers(circle):
    path = circle.path
    assert path.name == "episode_000001" and (path / "episode_000001_0.mcap").is_file()
    with eb.EpisodeReader(path) as reader:
        meta = reader.metadata
        topics = reader.topics
    assert set(topics) == set(ARM_TOPICS) | {"/episode/grasp"}       # no F/T in a free-motion task
    assert topics["/follower/arm_state"].msgtype == eb.ARM_STATE
    assert meta["source"] == "generated" and meta["task"] == "circle_cw" and meta["seed"] == circle.seed
    assert "run seed 3" in meta["notes"]
    assert meta["force_source"] == "none" and meta["condition"] == "nominal" and meta["fixture"] is None
    assert meta["task_instance"] == "circle_cw_0g_nominal" and meta["complete"] is True
    assert meta["stop_stamp"] - meta["start_stamp"] == pytest.approx(3.0e9, abs=2e7)
    sidecar = json.loads((path / "episode.json").read_text())
    assert sidecar["topics"]["/follower/arm_state"]["count"] == topics["/follower/arm_state"].count
    with AnyReader([path]) as reader:           # plain rosbags, types from the bag itself
        conns = [c for c in reader.connections if c.topic == "/follower/arm_state"]
        first = next(reader.deserialize(raw, c.msgtype) for c, _, raw in reader.messages(connections=conns))
    assert list(first.name) == ["joint1", "joint2", "joint3", "joint4", "gripper"] and first.role == "follower"


def test_rates_and_stamps(circle):
    for topic in ARM_TOPICS:
        stamps = [s for s, _ in _read(circle.path, topic)]
        assert _rate(stamps) == pytest.approx(gen.DRIVER_RATE_HZ, rel=0.05), topic
    grasp = [s for s, _ in _read(circle.path, "/episode/grasp")]
    assert _rate(grasp) == pytest.approx(gen.GRASP_RATE_HZ, rel=0.05)
    for stamp, msg in _read(circle.path, "/follower/arm_state")[:20]:
        assert eb.stamp_to_ns(msg.header.stamp) == stamp      # bag time = read completion stamp


def test_arm_states_follow_the_teleop_chain(circle):
    states = [m for _, m in _read(circle.path, "/follower/arm_state")]
    leaders = [m for _, m in _read(circle.path, "/leader/arm_state")]
    commands = [m for _, m in _read(circle.path, "/follower/command")]
    pulse = 2 * np.pi / 4096
    # One cycle latency: the goal read with sample k is the command made from leader sample k-1.
    for k in range(1, len(states)):
        np.testing.assert_allclose(states[k].goal_position, commands[k - 1].position, atol=0.51 * pulse)
        np.testing.assert_allclose(commands[k].position, leaders[k].position, atol=1e-12)
    follower = np.array([m.position for m in states])
    leader = np.array([m.position for m in leaders])
    assert np.ptp(leader[:, 0]) > 0.05                       # the operator moved the leader
    assert np.max(np.abs(follower[-1, :4] - leader[-1, :4])) < 0.1   # the follower tracks it
    current = np.array([m.current for m in states])
    assert np.max(np.abs(current[:, 1:4])) > 0.05            # holding the arm against gravity draws current
    voltage = np.array([m.input_voltage for m in states])
    assert voltage.min() > 10.0 and voltage.max() < 13.0
    slide = np.array([m.gripper_slide for m in states])
    assert np.all((slide > -0.012) & (slide < 0.021))
    joint_states = [m for _, m in _read(circle.path, "/follower/joint_states")]
    assert joint_states[5].position[4] == pytest.approx(states[5].gripper_slide)


def test_push_episode_has_contact_force_and_ft(push):
    result, episode = push
    with eb.EpisodeReader(result.path) as reader:
        meta = reader.metadata
        assert "/ft/wrench" in reader.topics
    assert meta["force_source"] == "ft_sensor"
    assert meta["fixture"] == {"position": list(episode.fixture.position), "rpy": [0.0, 0.0, 0.0]}
    ft = _read(result.path, "/ft/wrench")
    assert _rate([s for s, _ in ft]) == pytest.approx(gen.FT_RATE_HZ, rel=0.05)
    assert ft[0][1].header.frame_id == gen.FT_FRAME
    contact = np.array([m.data for _, m in _read(result.path, "/sim/truth/contact")])
    truth = np.array([[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z]
                      for _, m in _read(result.path, "/sim/truth/wrench")])
    d = np.asarray(PUSH_AXES["px"])
    assert contact[:100].sum() == 0 and contact.sum() > 20
    # Environment on the tool pushes back against the press (docs/INTERFACES.md sign) ...
    assert np.max(-(truth @ d)) > 3.0
    assert np.all(np.linalg.norm(truth[~contact], axis=1) < 1e-9)
    # ... and the tared sensor (frame = base here, rpy 0) reads the tool pushing along +X.
    force = np.array([[m.wrench.force.x, m.wrench.force.y, m.wrench.force.z] for _, m in ft])
    assert np.max(force @ d) > 3.0
    assert np.std(force[:100], axis=0).max() < 0.1           # before contact: only sensor noise


def test_payload_episode_holds_grasp(payload):
    result, episode = payload
    grasp = [(s, m.data) for s, m in _read(result.path, "/episode/grasp")]
    start_ns = grasp[0][0]
    on = [s for s, flag in grasp if flag]
    assert on and (on[0] - start_ns) * 1e-9 == pytest.approx(episode.grasp_intervals[0][0], abs=0.011)
    truth = [(s, m.wrench.force.z) for s, m in _read(result.path, "/sim/truth/wrench")]
    held = [fz for s, fz in truth if s >= on[0] + 10_000_000]
    assert held and np.allclose(held, -0.3 * 9.81, atol=1e-6)
    assert all(fz == 0 for s, fz in truth if s < on[0])


def test_deterministic_per_seed(tmp_path):
    a = _generate(tmp_path / "a", ["sweep_joint2"], seed=5, max_seconds=1.0)
    b = _generate(tmp_path / "b", ["sweep_joint2"], seed=5, max_seconds=1.0)
    c = _generate(tmp_path / "c", ["sweep_joint2"], seed=6, max_seconds=1.0)

    def current(result):
        return np.array([m.current for _, m in _read(result.path, "/follower/arm_state")])

    np.testing.assert_array_equal(current(a), current(b))
    assert (a.path / "episode_000001_0.mcap").read_bytes() == (b.path / "episode_000001_0.mcap").read_bytes()
    assert not np.array_equal(current(a), current(c))


def test_unknown_task_is_refused_before_writing(tmp_path, capsys):
    out = tmp_path / "never"
    with pytest.raises(gen.GenerateError, match="unknown task 'circle'"):
        gen.generate(gen.GenerateOptions(tasks=["circle"], out=out), progress=False)
    assert not out.exists()
    assert cli_main(["generate", "--tasks", "push_qx", "--out", str(out)]) == 2
    assert "unknown task 'push_qx'" in capsys.readouterr().err
    assert not out.exists()


@pytest.mark.parametrize("option, value, says", [
    ("--jobs", "0", "--jobs: must be at least 1"),
    ("--episodes", "0", "--episodes: must be at least 1"),
    ("--max-seconds", "inf", "--max-seconds: must be a finite number above 0"),
])
def test_a_bad_count_or_duration_is_one_line_and_writes_nothing(tmp_path, capsys, option, value, says):
    out = tmp_path / "never"
    with pytest.raises(SystemExit) as refused:
        cli_main(["generate", "--tasks", "sweep_gripper", "--out", str(out), option, value])
    assert refused.value.code == 2
    assert says in capsys.readouterr().err
    assert not out.exists()


def test_cli_generate_and_groups(tmp_path, capsys):
    rc = cli_main(["generate", "--tasks", "sweep_gripper", "--episodes", "2", "--seed", "1", "--out", str(tmp_path),
                   "--max-seconds", "0.3", "--quick", "--no-progress"])
    assert rc == 0 and "real time" in capsys.readouterr().out
    assert [p.name for p in eb.list_episodes(tmp_path)] == ["episode_000001", "episode_000002"]
    assert gen.resolve_tasks(["push", "push_px,circle_cw"]) == [*(f"push_{a}" for a in PUSH_AXES), "circle_cw"]
    plan = gen.plan_episodes(gen.GenerateOptions(tasks=["pick_place_restricted", "push_py"], episodes=2, seed=4))
    assert [(task, grams) for task, grams, _ in plan] == [
        ("pick_place_restricted", 0.0), ("pick_place_restricted", 0.0), ("pick_place_restricted", 200.0),
        ("pick_place_restricted", 200.0), ("push_py", 0.0), ("push_py", 0.0)]
    first, second = plan[0][2], plan[1][2]
    assert first != second and [seed for _, _, seed in plan] == [first, second] * 3    # episode i: one seed per run


def test_runs_with_other_seeds_repeat_no_episode():
    """Episode seeds were run seed + i: a run at seed 61 repeated episodes 2-5 of a run at seed 59, so data
    generated as held out was the training data's commanded motions again."""
    def seeds(run_seed: int) -> set[int]:
        plan = gen.plan_episodes(gen.GenerateOptions(tasks=["circle_cw"], episodes=10, seed=run_seed))
        return {seed for _, _, seed in plan}

    runs = {run_seed: seeds(run_seed) for run_seed in (0, 1, 2, 59, 61, 79)}
    assert all(len(s) == 10 for s in runs.values())
    for a in runs:
        for b in runs:
            assert a == b or not runs[a] & runs[b], (a, b)
    assert seeds(61) == runs[61]                                                # reproducible
    with pytest.raises(gen.GenerateError, match="--seed must be >= 0"):
        gen.plan_episodes(gen.GenerateOptions(tasks=["circle_cw"], episodes=1, seed=-1))


def test_restricted_condition_reaches_the_rig_and_metadata(tmp_path):
    from na_sim.rig import Rig
    from na_sim.rig_config import RigConfig

    result = _generate(tmp_path, ["pick_place_restricted"], max_seconds=0.2, payloads=[200.0])
    with eb.EpisodeReader(result.path) as reader:
        meta = reader.metadata
    assert meta["condition"] == "restricted_joint3"
    assert meta["task_instance"] == "pick_place_restricted_200g_restricted_joint3"
    assert meta["force_source"] == "payload" and meta["payload_grams"] == 200.0
    rig = Rig(RigConfig.from_yaml(), seed=0)
    episode = make_task("pick_place_restricted", 3, 200.0, quick=True)
    with eb.EpisodeWriter(tmp_path / "direct", {**episode.metadata(), "source": "generated"}) as writer:
        gen.run_episode(rig, episode, writer, 0, with_ft=False, max_seconds=0.05)
    assert rig.condition == "restricted_joint3"


@pytest.mark.parametrize("jax_loaded", [False, True], ids=["forked", "spawned"])
def test_parallel_workers_write_the_same_bags(tmp_path, monkeypatch, jax_loaded):
    """--jobs only changes the wall time: ids, stamps and bytes equal a one-process run, whether the workers are
    forked or (in a process that has loaded JAX, here a stand-in module) spawned."""
    if jax_loaded:
        monkeypatch.setitem(sys.modules, "jax", sys.modules.get("jax") or types.ModuleType("jax"))
    else:
        monkeypatch.delitem(sys.modules, "jax", raising=False)

    def run(out, jobs):
        options = gen.GenerateOptions(tasks=["sweep_joint2", "push_nx"], episodes=1, seed=2, out=out, quick=True,
                                      max_seconds=1.0)
        return gen.generate(options, progress=False, log=lambda _: None, jobs=jobs)

    serial, parallel = run(tmp_path / "serial", 1), run(tmp_path / "parallel", 2)
    assert [e.path.name for e in serial.episodes] == [e.path.name for e in parallel.episodes]
    for a, b in zip(serial.episodes, parallel.episodes, strict=True):
        for name in (f"{a.path.name}_0.mcap", "metadata.yaml", "episode.json"):
            assert (a.path / name).read_bytes() == (b.path / name).read_bytes(), name
    assert parallel.elapsed_seconds > 0
