"""Push episodes start and end with the tool clear of their fixture: a live rig that loops its task places the next
episode's fixture while the arm rests at home, and on the SO-101 some placements had put the cube on the resting tool
(16 N at the start of a quick push_px episode, enough to trip teleop's overload guard in the live demo)."""

from __future__ import annotations

import numpy as np
import pytest

from na_description import load_spec
from na_sim.ik import Kinematics
from na_sim.rig_config import RigConfig
from na_sim.tasks import PUSH_AXES, make_task

RIG_CONFIGS = {"open_manipulator_x": "sim_rig", "so101": "sim_rig_so101"}


def _gap_to_cube(tool: np.ndarray, centre: np.ndarray, half: float) -> float:
    """Distance (m) from a point to the surface of the axis-aligned cube of half size ``half`` at ``centre``."""
    return float(np.linalg.norm(np.maximum(np.abs(tool - centre) - half, 0.0)))


@pytest.mark.parametrize("robot", sorted(RIG_CONFIGS))
@pytest.mark.parametrize("axis", PUSH_AXES)
def test_the_tool_at_the_first_and_last_pose_is_clear_of_the_fixture(robot: str, axis: str) -> None:
    spec = load_spec(robot)
    config = RigConfig.from_yaml(RIG_CONFIGS[robot])
    half, radius = float(config.fixture_half_size[0]), float(config.tool_collider_radius)
    kin = Kinematics(spec)
    for seed in range(12):
        episode = make_task(f"push_{axis}", seed, quick=seed % 2 == 0, spec=spec, kinematics=kin,
                            fixture_half_size=half, tool_radius=radius)
        centre = np.asarray(episode.fixture.position)
        for t in (0.0, episode.duration):
            tool = kin.tool_position(episode.pose(t)[:spec.n_arm])
            gap = _gap_to_cube(tool, centre, half)
            assert gap > radius, f"{robot} push_{axis} seed {seed} at t={t:.1f} s: tool {gap * 1e3:.1f} mm from cube"


def test_a_home_pose_that_no_fixture_face_clears_is_planned_again() -> None:
    """The SO-101's upward press (pz) has its fixture just above the resting tool: a home pose drawn about 3 cm
    high leaves no face of the box clear of it (seeds 17, 23 and 25 below, about 1 in 20 seeds). Such a draw is
    planned again from new numbers, as an unreachable one is, instead of ending a whole generation run."""
    spec = load_spec("so101")
    config = RigConfig.from_yaml(RIG_CONFIGS["so101"])
    half, radius = float(config.fixture_half_size[0]), float(config.tool_collider_radius)
    kin = Kinematics(spec)
    for seed in range(30):
        episode = make_task("push_pz", seed, quick=True, spec=spec, kinematics=kin, fixture_half_size=half,
                            tool_radius=radius)
        centre = np.asarray(episode.fixture.position)
        gap = _gap_to_cube(kin.tool_position(episode.pose(0.0)[:spec.n_arm]), centre, half)
        assert gap > radius + 0.005, f"push_pz seed {seed}: resting tool {gap * 1e3:.1f} mm from the cube"
