"""``na-policy demos``: demonstrations of ``press_hold`` through the real recording path.

Per seed: the simulated rig with the scripted expert on the leader arm (``na-sim rig --task press_hold``),
``collect.launch.xml`` (arm drivers, teleop, F/T driver, recorder) and the estimator
(``estimator.launch.xml``), each its own process over DDS. The recorder's topics are the episode topics
plus ``/estimator/force`` and ``/estimator/contact``, so each bag carries the estimator's outputs as the
policy will see them live. An episode runs from before the expert moves until ``AFTER_TOUCH_S`` after the
tool first touches the fixture. Recording starts only once the graph streams steadily
(:class:`~na_bringup.live_integrity.IntegrityWatch`); an episode during which a driver tripped, a bus went silent
past its error timeout or the rig fell behind wall time is void: discarded and recorded again, as is one that did
not finish or whose graph did not come up, up to ``ATTEMPTS`` times. ``voided.json`` in the output folder lists
every discarded attempt and why.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import yaml

from na_bringup.live_integrity import describe
from na_bringup.sim_graph import GraphError, launched, ros_env, sim_rig
from na_common import topics
from na_policy.dataset import DemoError, load_demo
from na_policy.live import LiveError, LiveProbe
from na_sim.press_task import PRESS_TASK, TOUCH_FORCE, contact_from_truth, make_press_episode

AFTER_TOUCH_S = 5.0           # s recorded after the first touch (press, settle into the band, hold)
TOUCH_TIMEOUT_S = 40.0        # s from the episode start to the first touch
ATTEMPTS = 3
READY_TIMEOUT_S = 120.0


class VoidRunError(LiveError):
    """The run happened, but on a rig that was not sound: its result does not count."""


def recorder_config(path: Path) -> Path:
    """A recorder parameter file: the episode topics plus the estimator's force and contact."""
    recorded = [*topics.EPISODE_TOPICS, topics.ESTIMATED_FORCE, topics.ESTIMATED_CONTACT]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"/**": {"ros__parameters": {"topics": recorded}}}))
    return path


def record_demos(model: Path, out: Path, seeds: list[int], log: Callable[[str], None] = print) -> Path:
    """Record one demonstration per seed into ``out/bags``; returns that folder."""
    from na_msgs.srv import DiscardEpisode, StartEpisode, StopEpisode

    bags = out / "bags"
    config = recorder_config(out / "recorder.yaml")
    probe = LiveProbe()
    clients = (probe.node.create_client(StartEpisode, f"{topics.RECORDER_NODE}/start"),
               probe.node.create_client(StopEpisode, f"{topics.RECORDER_NODE}/stop"),
               probe.node.create_client(DiscardEpisode, f"{topics.RECORDER_NODE}/discard"))
    voided: list[dict] = []
    began = time.monotonic()
    try:
        for k, seed in enumerate(seeds):
            for attempt in range(1, ATTEMPTS + 1):
                bag = None
                try:
                    bag, peak = _record_one(probe, clients, model, out, bags, config, seed)
                    load_demo(bag)
                except (DemoError, LiveError, GraphError) as exc:
                    if bag is not None:
                        shutil.rmtree(bag, ignore_errors=True)
                    if isinstance(exc, VoidRunError):
                        voided.append({"seed": seed, "attempt": attempt, "reason": str(exc)})
                        _write_voided(out, voided)
                    if attempt == ATTEMPTS:
                        raise LiveError(f"seed {seed}: no usable demonstration in {ATTEMPTS} attempts: {exc}") from exc
                    log(f"seed {seed}: recording again ({'VOID: ' if isinstance(exc, VoidRunError) else ''}{exc})")
                    continue
                break
            log(f"[demos {k + 1}/{len(seeds)} {time.monotonic() - began:5.0f}s] seed {seed}: {bag.name} "
                f"(peak contact force {peak:.1f} N)")
    finally:
        probe.close()
    _write_voided(out, voided)
    log(f"demonstrations: {len(voided)} void attempt(s) recorded again (listed in {out / 'voided.json'})")
    return bags


def _write_voided(out: Path, voided: list[dict]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "voided.json").write_text(json.dumps(voided, indent=1) + "\n")


def _record_one(probe: LiveProbe, clients: tuple, model: Path, out: Path, bags: Path, config: Path,
                seed: int) -> tuple[Path, float]:
    from na_msgs.msg import EpisodeInfo
    from na_msgs.srv import DiscardEpisode, StartEpisode, StopEpisode

    start, stop, discard = clients
    log_dir = out / "logs" / f"demo_seed{seed}"
    with sim_rig(out / "sim", log_dir, task=PRESS_TASK, options=f"--task-seed {seed}") as (rig, _, ft_port), \
            launched("collect.launch.xml", {"sim": "true", "sim_dir": str(out / "sim"), "ft_port": str(ft_port),
                                            "output_dir": str(bags), "recorder_config": str(config)},
                     log_dir, env=ros_env()) as collect, \
            launched("estimator.launch.xml", {"model": str(model)}, log_dir, env=ros_env()) as estimator:
        graphs = (rig, collect, estimator)
        probe.reset()
        probe.wait_until_steady(READY_TIMEOUT_S, "the estimator's force and the recorder", graphs, str(log_dir),
                                extra=lambda: probe.data.estimator_force > 30 and start.service_is_ready())
        grams = round(make_press_episode(seed).payload_kg * 1000.0, 1)
        info = EpisodeInfo(task=PRESS_TASK, payload_grams=grams, force_source="ft_sensor", condition="nominal",
                           operator_name="na-policy expert", notes=f"press_hold seed {seed}")
        result = probe.call(start, StartEpisode.Request(info=info), graphs)
        if not result.success:
            raise LiveError(f"the recorder refused to start: {result.message}")
        window = probe.now()
        weight = contact_from_truth(0.0, grams / 1000.0)
        probe.spin_until(lambda: any(f + weight > TOUCH_FORCE for f in probe.data.truth_force_z), TOUCH_TIMEOUT_S,
                         "the expert to touch the fixture", graphs, str(log_dir))
        probe.spin_for(AFTER_TOUCH_S, graphs)
        probe.settle_diagnostics(graphs)
        faults = probe.watch.faults_since(window)
        if faults:
            probe.call(discard, DiscardEpisode.Request(), graphs)
            raise VoidRunError(describe(faults))
        result = probe.call(stop, StopEpisode.Request(), graphs)
        if not result.success:
            raise LiveError(f"the recorder could not stop the episode: {result.message}")
    return Path(result.path), float(np.max(contact_from_truth(probe.data.truth_force_z, grams / 1000.0)))
