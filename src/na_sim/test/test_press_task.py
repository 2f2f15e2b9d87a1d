"""press_hold: seeded episodes, the success criterion on hand-made force traces, the expert's phases, and the
expert on the rig's physics (offline, no ROS) reaching the force band for fixtures of different heights and
objects of different mass."""

from __future__ import annotations

import numpy as np
import pytest

from na_sim.press_task import PressExpert, make_press_episode, score_press

BAND = (7.0, 9.0)           # N, the task's band as documented (README of na_policy)


def test_seeds_vary_the_face_height_and_mass_and_repeat_exactly() -> None:
    heights = [make_press_episode(seed).face_height for seed in range(12)]
    masses = [make_press_episode(seed).payload_kg for seed in range(12)]
    assert min(masses) >= 0.0 and max(masses) <= 0.5 and max(masses) - min(masses) > 0.2
    assert len(set(np.round(heights, 6))) == 12
    assert min(heights) >= 0.05 - 1e-9 and max(heights) <= 0.085 + 1e-9
    assert max(heights) - min(heights) > 0.015                  # spread: positions cannot be memorised
    again = make_press_episode(3)
    assert again.face_height == heights[3]
    np.testing.assert_array_equal(again.start_pose, make_press_episode(4).start_pose)   # one start for all


def test_fixture_top_face_is_at_the_face_height() -> None:
    episode = make_press_episode(5, fixture_half_size=0.02)
    assert episode.fixture.position[2] + 0.02 == pytest.approx(episode.face_height)
    assert episode.hover[2] - 0.008 > 0.085                        # the hover clears the highest face


def _trace(segments: list[tuple[float, float]], dt: float = 0.01) -> tuple[np.ndarray, np.ndarray]:
    """Piecewise-constant force: [(seconds, newtons), ...]."""
    forces = np.concatenate([np.full(round(seconds / dt), newtons) for seconds, newtons in segments])
    return np.arange(forces.size) * dt, forces


def test_score_success_after_a_continuous_hold() -> None:
    times, forces = _trace([(1.0, 0.0), (0.5, 3.0), (2.0, 8.0)])
    score = score_press(times, forces, band=BAND, hold=1.5, slam=20.0)
    assert score.success
    assert score.time_to_success == pytest.approx(3.0, abs=0.02)    # band entered at 1.5 s, held 1.5 s
    assert score.peak_force == pytest.approx(8.0)
    assert not score.slammed


def test_score_a_gap_restarts_the_hold_and_too_soft_fails() -> None:
    times, forces = _trace([(1.0, 8.0), (0.1, 6.0), (1.0, 8.0), (2.0, 9.5)])
    score = score_press(times, forces, band=BAND, hold=1.5, slam=20.0)
    assert not score.success and np.isnan(score.time_to_success)
    assert score.longest_hold == pytest.approx(0.99, abs=0.02)


def test_score_a_slam_fails_even_if_the_band_follows() -> None:
    times, forces = _trace([(0.5, 0.0), (0.02, 25.0), (3.0, 8.0)])
    score = score_press(times, forces, band=BAND, hold=1.5, slam=20.0)
    assert not score.success and score.slammed


def test_contact_force_adds_back_the_weight() -> None:
    from na_sim.press_task import contact_from_truth

    np.testing.assert_allclose(contact_from_truth([-2.0, 5.0], 0.3), [-2.0 + 0.3 * 9.81, 5.0 + 0.3 * 9.81])


def test_score_rejects_mismatched_arrays() -> None:
    with pytest.raises(ValueError, match="one length"):
        score_press(np.zeros(3), np.zeros(4))


def test_expert_phases() -> None:
    expert = PressExpert(make_press_episode(1))
    start = expert.height
    for _ in range(100):
        expert.step(0.01, 0.0)
    assert expert.phase == "wait" and expert.height == start      # nothing before engage
    expert.engage()
    for _ in range(int(5.0 / 0.01) + 100):                         # settle, then 1 s of descent
        expert.step(0.01, 0.0)
    assert expert.phase == "descend" and start - expert.height == pytest.approx(0.025, abs=0.004)
    expert.step(0.01, 2.0)
    assert expert.phase == "press"
    before = expert.height
    expert.step(0.1, 2.0)                                           # too soft: press deeper
    assert expert.height < before
    before = expert.height
    expert.step(0.1, 14.0)                                          # too hard: back off
    assert expert.height > before


@pytest.mark.parametrize("seed", [0, 2])
def test_expert_reaches_the_band_on_the_rig(seed: int) -> None:
    """The expert drives the follower's goals directly (no buses): the task is feasible and the criterion met."""
    from na_sim.rig import Rig

    rig = Rig(seed=0)
    episode = make_press_episode(seed, spec=rig.spec, fixture_half_size=float(rig.config.fixture_half_size[2]))
    rig.reset(0, pose=episode.start_pose)
    rig.set_payload(episode.payload_kg)
    rig.configure_follower()
    rig.set_fixture(episode.fixture)
    expert = PressExpert(episode, rig.spec)
    expert.engage()
    period, times, forces = 0.01, [], []
    for k in range(int(16.0 / period)):
        rig.set_follower_goal(expert.step(period, float(rig.truth.contact_force_base[2])))
        truth = rig.advance(period)
        times.append(k * period)
        forces.append(float(truth.force_base[2]) + episode.payload_kg * 9.81)   # weight added back
    score = score_press(np.array(times), np.array(forces), band=BAND, hold=1.5, slam=20.0)
    assert score.success, f"seed {seed}: longest hold {score.longest_hold:.2f} s, peak {score.peak_force:.1f} N"


def test_rig_options_for_the_task() -> None:
    import argparse

    from na_sim.live_rig import _check_args, add_rig_arguments

    parser = add_rig_arguments(argparse.ArgumentParser())
    assert _check_args(parser.parse_args(["--task", "press_hold", "--task-seed", "4", "--fixture-only"])) is None
    assert "--fixture-only needs --task press_hold" in _check_args(parser.parse_args(["--task", "push_px",
                                                                                      "--fixture-only"]))


def test_fixture_appears_only_after_a_driver_took_the_arm_back_to_the_start() -> None:
    from na_sim.live_rig import PressOperator
    from na_sim.rig import Rig

    rig = Rig(seed=0)
    operator = PressOperator(rig, seed=4, fixture_only=True)
    assert rig.payload_kg == pytest.approx(make_press_episode(4).payload_kg)
    operator._advance()
    assert rig.fixture is None and operator.phase == "driver"        # torque on since the start: no driver yet
    for regs in rig.follower_registers:                               # a driver's start-up: torque off ... on
        regs.set("torque_enable", 0)
    operator._advance()
    for regs in rig.follower_registers:
        regs.set("torque_enable", 1)
    operator._advance()
    assert operator.phase in ("return", "placed")
    rig.advance(0.5)                                                  # holding at the start pose
    operator._advance()
    assert operator.phase == "placed" and rig.fixture is not None


def test_a_quick_driver_start_is_seen_by_its_armed_watchdog() -> None:
    from na_sim.live_rig import PressOperator
    from na_sim.rig import Rig

    rig = Rig(seed=0)
    operator = PressOperator(rig, seed=5, fixture_only=True)
    operator._advance()
    assert operator.phase == "driver"
    for regs in rig.follower_registers:          # torque off and on between two polls; the watchdog stays armed
        regs.set("bus_watchdog", 10)
    operator._advance()
    assert operator.phase in ("return", "placed")
