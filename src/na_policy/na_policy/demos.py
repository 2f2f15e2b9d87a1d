"""``na-policy demos``: demonstrations of ``press_hold`` through the real recording path.

Per seed: the simulated rig with the scripted expert on the leader arm (``na-sim rig --task press_hold``),
``collect.launch.xml`` (arm drivers, teleop, F/T driver, recorder) and the estimator
(``estimator.launch.xml``), each its own process over DDS. The recorder's topics are the episode topics
plus ``/estimator/force`` and ``/estimator/contact``, so each bag carries the estimator's outputs as the
policy will see them live. An episode runs from before the expert moves until ``AFTER_TOUCH_S`` after the
tool first touches the fixture. An episode whose recording began after the expert moved (a slow start of the
graph), in which the follower did not follow (a driver trip on a stalled host), that did not finish or whose
graph did not come up, is deleted and recorded again, up to ``ATTEMPTS`` times.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

from na_bringup.sim_graph import GraphError, launched, ros_env, sim_rig
from na_common import topics
from na_policy.dataset import DemoError, load_demo
from na_policy.live import LiveError, LiveProbe
from na_sim.press_task import PRESS_TASK, TOUCH_FORCE, contact_from_truth, make_press_episode

AFTER_TOUCH_S = 5.0           # s recorded after the first touch (press, settle into the band, hold)
TOUCH_TIMEOUT_S = 40.0        # s from the episode start to the first touch
ATTEMPTS = 3


def recorder_config(path: Path) -> Path:
    """A recorder parameter file: the episode topics plus the estimator's force and contact."""
    recorded = [*topics.EPISODE_TOPICS, topics.ESTIMATED_FORCE, topics.ESTIMATED_CONTACT]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"topics": recorded}}}))
    return path


def record_demos(model: Path, out: Path, seeds: list[int], log: Callable[[str], None] = print) -> Path:
    """Record one demonstration per seed into ``out/bags``; returns that folder."""
    from na_msgs.srv import StartEpisode, StopEpisode

    bags = out / "bags"
    config = recorder_config(out / "recorder.yaml")
    probe = LiveProbe()
    start = probe.node.create_client(StartEpisode, f"{topics.RECORDER_NODE}/start")
    stop = probe.node.create_client(StopEpisode, f"{topics.RECORDER_NODE}/stop")
    began = time.monotonic()
    try:
        for k, seed in enumerate(seeds):
            for attempt in range(1, ATTEMPTS + 1):
                bag = None
                try:
                    bag, peak = _record_one(probe, start, stop, model, out, bags, config, seed)
                    load_demo(bag)
                except (DemoError, LiveError, GraphError) as exc:
                    if bag is not None:
                        shutil.rmtree(bag, ignore_errors=True)
                    if attempt == ATTEMPTS:
                        raise LiveError(f"seed {seed}: no usable demonstration in {ATTEMPTS} attempts: {exc}") from exc
                    log(f"seed {seed}: recording again ({exc})")
                    continue
                break
            log(f"[demos {k + 1}/{len(seeds)} {time.monotonic() - began:5.0f}s] seed {seed}: {bag.name} "
                f"(peak contact force {peak:.1f} N)")
    finally:
        probe.close()
    return bags


def _record_one(probe: LiveProbe, start, stop, model: Path, out: Path, bags: Path, config: Path,
                seed: int) -> tuple[Path, float]:
    from na_msgs.msg import EpisodeInfo
    from na_msgs.srv import StartEpisode, StopEpisode

    log_dir = out / "logs" / f"demo_seed{seed}"
    with sim_rig(out / "sim", log_dir, task=PRESS_TASK, options=f"--task-seed {seed}") as (rig, _, ft_port), \
            launched("collect.launch.xml", {"sim": "true", "sim_dir": str(out / "sim"), "ft_port": str(ft_port),
                                            "output_dir": str(bags), "recorder_config": str(config)},
                     log_dir, env=ros_env()) as collect, \
            launched("estimator.launch.xml", {"model": str(model)}, log_dir, env=ros_env()) as estimator:
        graphs = (rig, collect, estimator)
        probe.reset()
        probe.spin_until(lambda: probe.data.estimator_force > 30 and start.service_is_ready(), 90.0,
                         "the estimator's force and the recorder", graphs, str(log_dir))
        grams = round(make_press_episode(seed).payload_kg * 1000.0, 1)
        info = EpisodeInfo(task=PRESS_TASK, payload_grams=grams, force_source="ft_sensor", condition="nominal",
                           operator_name="na-policy expert", notes=f"press_hold seed {seed}")
        result = probe.call(start, StartEpisode.Request(info=info), graphs)
        if not result.success:
            raise LiveError(f"the recorder refused to start: {result.message}")
        weight = contact_from_truth(0.0, grams / 1000.0)
        probe.spin_until(lambda: any(f + weight > TOUCH_FORCE for f in probe.data.truth_force_z), TOUCH_TIMEOUT_S,
                         "the expert to touch the fixture", graphs, str(log_dir))
        probe.spin_for(AFTER_TOUCH_S, graphs)
        result = probe.call(stop, StopEpisode.Request(), graphs)
        if not result.success:
            raise LiveError(f"the recorder could not stop the episode: {result.message}")
    return Path(result.path), float(np.max(contact_from_truth(probe.data.truth_force_z, grams / 1000.0)))
