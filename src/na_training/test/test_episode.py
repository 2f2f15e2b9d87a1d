"""The one episode type: field names keep their meaning from the bag to the model, and its views.

``goal_position`` is the servo's Goal Position read back in ``ArmState``, ``command_position`` the
``JointCommand`` sent to the follower (NAD.md, "Field names"); the feature view takes the command.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from na_description import load_spec

SPEC = load_spec()
T0 = 1_000 * 1_000_000_000          # ns, episode start
PERIOD = 10_000_000                 # ns: the follower at 100 Hz
FRAMES = 40


def _bag(out: Path) -> tuple[Path, dict[int, np.ndarray], dict[int, np.ndarray]]:
    """A bag whose ArmState goal register lags the commands and is offset from them, so that the two can never be
    mistaken for each other: (bag, readback by follower stamp, command in force at each follower stamp)."""
    from na_common.episode_bag import ARM_STATE, JOINT_COMMAND, EpisodeWriter, make_header, message_class

    n = SPEC.n_motors
    names = SPEC.joint_names

    def arm_state(stamp: int, role: str, position: np.ndarray, goal: np.ndarray):
        return message_class(ARM_STATE)(
            header=make_header(stamp, "world"), role=role, name=names, position=position, gripper_slide=0.005,
            goal_gripper_slide=0.004, velocity=np.zeros(n), goal_position=goal, current=np.full(n, 0.1),
            pwm=np.zeros(n), load=np.zeros(0), input_voltage=np.full(n, 12.0), temperature=np.full(n, 30.0),
            hardware_error=np.zeros(n, np.uint8), stale=np.zeros(n, bool), timeout_errors=0, crc_errors=0,
            partial_errors=0, dropped_cycles=0, bus_cycle_duration=0.002)

    readback, commanded = {}, {}
    meta = {"task": "free_motion", "payload_grams": 0.0, "force_source": "none", "condition": "nominal",
            "source": "generated", "seed": 1}
    with EpisodeWriter(out, meta) as writer:
        for topic, msgtype in (("/follower/arm_state", ARM_STATE), ("/leader/arm_state", ARM_STATE),
                               ("/follower/command", JOINT_COMMAND)):
            writer.add_topic(topic, msgtype)
        for k in range(FRAMES):
            stamp = T0 + k * PERIOD
            position = 0.01 * k * np.arange(1, n + 1)
            command = position + 0.2 + 0.001 * k                     # sent 2 ms before this follower read
            goal = position + 0.05 * np.arange(1, n + 1) - 0.3         # the register as read back
            writer.write("/follower/command", stamp - 2_000_000, message_class(JOINT_COMMAND)(
                header=make_header(stamp - 2_000_000, "world"), name=names, position=command, gripper_slide=0.004))
            writer.write("/leader/arm_state", stamp - 1_000_000,
                         arm_state(stamp - 1_000_000, "leader", position, position))
            writer.write("/follower/arm_state", stamp, arm_state(stamp, "follower", position, goal))
            readback[stamp], commanded[stamp] = goal, command
        return writer.path, readback, commanded


def test_a_converted_bag_keeps_the_readback_and_the_command_apart(tmp_path: Path) -> None:
    from na_training.cli import main
    from na_training.nad import load_nad

    bag, readback, commanded = _bag(tmp_path / "bags")
    assert main(["convert", str(bag), "--out", str(tmp_path / "nad"), "--jobs", "1", "--quiet"]) == 0
    (episode,) = load_nad(tmp_path / "nad")
    stamps = episode.columns["stamp_ns"]
    assert len(stamps) == FRAMES
    np.testing.assert_array_equal(episode.goal_position, np.stack([readback[s] for s in stamps]))
    np.testing.assert_array_equal(episode.command_position, np.stack([commanded[s] for s in stamps]))
    # the model's goal inputs are the command, as the live estimator feeds /follower/command
    n = SPEC.n_motors
    np.testing.assert_array_equal(episode.features()[:, :n], episode.command_position)
    assert not np.allclose(episode.features()[:, :n], episode.goal_position)


def test_views_follow_the_stored_columns() -> None:
    from na_training.synthetic import synthetic_episode

    episode = synthetic_episode(12, seed=4)
    columns = dict(episode.columns)
    columns["force_valid_y"] = np.ones(12, bool)
    columns["force_valid_y"][3] = False
    columns["force_z"] = np.full(12, -1.5)
    columns["force_z"][4] = np.nan                  # marked valid but not a number: not a label
    columns["frame_valid"] = np.ones(12, bool)
    columns["frame_valid"][6] = False
    episode = replace(episode, columns=columns)

    expected_valid = np.ones((12, 3), bool)
    expected_valid[3, 1] = expected_valid[4, 2] = False
    np.testing.assert_array_equal(episode.force_valid, expected_valid)
    np.testing.assert_array_equal(episode.force[:, 2], np.r_[[-1.5] * 4, 0.0, [-1.5] * 7])
    assert not episode.valid[6] and episode.valid.sum() == 11
    assert not episode.force_mask[6].any() and episode.force_mask.sum() == 3 * 11 - 2
    assert [s for s in range(10) if episode.valid[s:s + 3].all()] == episode.valid_window_starts(3).tolist()
    gripper = SPEC.joint_names[-1]
    np.testing.assert_array_equal(episode.qpos[:, -1], columns["gripper_slide"])
    np.testing.assert_array_equal(episode.qvel[:, -1], columns[f"velocity_{gripper}"] * SPEC.gripper.slope)
    np.testing.assert_array_equal(episode.qpos[:, 0], columns[f"position_{SPEC.joint_names[0]}"])
    assert episode.condition_label == 1 and episode.is_nominal
    unlabelled = replace(episode, meta={**episode.meta, "condition_label": None},
                         columns={**columns, f"condition_{SPEC.condition_joint}": np.r_[np.zeros(8), np.ones(4)]})
    assert unlabelled.condition_label == 0 and not unlabelled.is_nominal      # the median frame label
