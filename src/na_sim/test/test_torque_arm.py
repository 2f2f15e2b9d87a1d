"""The simulated Panda (na_sim.torque_arm) and its generated episodes, checked against statics and the bag."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from na_common import episode_bag as eb
from na_description import load_spec
from na_sim import generate as gen
from na_sim.torque_arm import TorqueArm, TorqueArmConfig, TorqueArmError, torque_arm_config_path

READY = np.array([0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785, 0.8])


def _tool_jacobian(q_arm: np.ndarray) -> np.ndarray:
    """Translational Jacobian of the tool site, from MuJoCo directly (not na_description.Kinematics)."""
    spec = load_spec("panda")
    model = mujoco.MjModel.from_xml_path(str(spec.mjcf_path))
    data = mujoco.MjData(model)
    data.qpos[:7] = q_arm
    mujoco.mj_forward(model, data)
    jac = np.zeros((3, model.nv))
    mujoco.mj_jacSite(model, data, jac, None, mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_SITE, "tool"))
    return jac[:, :7]


def test_held_payload_shows_as_commanded_torque_and_the_arm_alone_does_not() -> None:
    spec = load_spec("panda")
    arm = TorqueArm(spec)
    arm.reset(READY, seed=1)
    for _ in range(1500):
        reading = arm.step(READY)
    # The robot compensates its own gravity: at rest the commanded torque is near zero.
    assert np.max(np.abs(reading.effort[:7] * spec.effort_bounds[:7])) < 0.3
    arm.set_payload(0.5)
    readings = [arm.step(READY) for _ in range(3000)][-500:]
    torque = np.mean([r.effort[:7] for r in readings], axis=0) * spec.effort_bounds[:7]
    # Statics: holding 0.5 kg at the tool takes -J^T [0, 0, -0.5 g].
    expected = -_tool_jacobian(READY[:7]).T @ np.array([0.0, 0.0, -0.5 * 9.81])
    assert torque == pytest.approx(expected, abs=0.1)
    # The joint impedance lets the arm sag until the spring holds the payload: joint 2's goal minus its angle
    # times its stiffness (600 N·m/rad) is its payload torque.
    assert READY[1] - np.mean([r.position[1] for r in readings]) == pytest.approx(expected[1] / 600.0, abs=5e-4)


def test_reported_torque_is_quantised_and_noisy() -> None:
    spec = load_spec("panda")
    arm = TorqueArm(spec)
    arm.reset(READY, seed=2)
    torques = np.array([arm.step(READY).effort[:7] * spec.effort_bounds[:7] for _ in range(400)])
    assert np.allclose(torques / 0.001, np.round(torques / 0.001), atol=1e-6)
    assert 0.01 < np.std(torques[200:, 6]) < 0.2          # noise on the smallest joint, none of it drift


def test_config_of_another_robot_is_refused(tmp_path) -> None:
    text = torque_arm_config_path(load_spec("panda")).read_text().replace("robot: panda", "robot: so101")
    (tmp_path / "bad.yaml").write_text(text)
    with pytest.raises(TorqueArmError, match="robot is 'so101', not 'panda'"):
        TorqueArmConfig.from_yaml(tmp_path / "bad.yaml", load_spec("panda"))


@pytest.fixture(scope="module")
def panda_bags(tmp_path_factory):
    out = tmp_path_factory.mktemp("panda")
    options = gen.GenerateOptions(tasks=["go_up_stay", "pick_place"], episodes=1, seed=5, out=out, quick=True,
                                  payloads=[300], robot="panda")
    return gen.generate(options, progress=False, log=lambda _: None)


def test_generated_panda_episode_carries_the_payload_and_causal_commands(panda_bags) -> None:
    spec = load_spec("panda")
    go_up = next(e for e in panda_bags.episodes if e.task == "go_up_stay")
    with eb.EpisodeReader(go_up.path) as reader:
        topics = set(reader.topics)
        assert reader.metadata["robot"] == "panda" and reader.metadata["payload_grams"] == 300
        states = [(stamp, msg) for _, stamp, msg in reader.messages("/follower/arm_state")]
        commands = {stamp: msg for _, stamp, msg in reader.messages("/follower/command")}
        grasp = [(stamp, msg.data) for _, stamp, msg in reader.messages("/episode/grasp")]
        wrench = [(stamp, msg.wrench.force.z) for _, stamp, msg in reader.messages("/sim/truth/wrench")]
    assert "/leader/arm_state" not in topics and "/ft/wrench" not in topics
    stamps = np.array([s for s, _ in states])
    assert np.allclose(np.diff(stamps) * 1e-9, spec.frame_period)          # one state per data frame
    # Each state's goal is the command written at the same stamp (the command in force, not a later pose).
    for stamp, msg in states[::50]:
        assert np.allclose(msg.goal_position, commands[stamp].position)
    held = [z for stamp, z in wrench if z != 0.0]
    assert held and np.allclose(held, -0.3 * 9.81)
    assert any(flag for _, flag in grasp)
    # The commanded torque (load x limit) moves with the payload: joint 2 holds more while grasped.
    grasped_at = {s for s, z in wrench if z != 0.0}
    joint2 = np.array([msg.load[1] * 87.0 for _, msg in states])
    held_mask = np.array([s in grasped_at for s, _ in states])
    assert abs(np.mean(joint2[held_mask]) - np.mean(joint2[~held_mask][:20])) > 0.5
