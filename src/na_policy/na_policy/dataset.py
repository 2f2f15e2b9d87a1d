"""Demonstration bags -> behaviour-cloning samples (ROS-free).

Each episode is resampled on the policy's clock (``RATE_HZ``) by header stamps, exactly as the policy
node sees its inputs: at each tick the newest follower state, the newest estimator outputs computed from
an *earlier* state (live, the estimate of the current state arrives after the policy has answered it),
and as targets the teleop commands in effect over the next ``chunk`` ticks, relative to the measured
position (action chunking). Frames before the expert starts to move the leader arm (the hover while the
graph came up and the teleop's soft start) are cut down to ``LEAD_IN_S``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from na_common import topics
from na_common.episode_bag import EpisodeReader, stamp_to_ns
from na_policy.features import observation

RATE_HZ = 60.0
LEAD_IN_S = 0.1              # s of hover kept before the leader moves (a longer wait teaches the policy to wait)
MOVE_THRESHOLD = 3e-3        # rad, a leader joint change that counts as the expert moving (2 encoder pulses)
MAX_TRACKING_ERROR = 0.15    # rad, command - measured on an arm joint; beyond it the follower was not following
ESTIMATOR_TOPICS = (topics.ESTIMATED_FORCE, topics.ESTIMATED_CONTACT)


class DemoError(ValueError):
    """A demonstration bag that cannot be used; the message says why."""


@dataclass
class DemoEpisode:
    """One demonstration on the policy clock: arrays of ``T`` ticks."""

    name: str
    time: np.ndarray             # (T,) s since the first tick
    position: np.ndarray         # (T, 5) measured follower position
    force: np.ndarray            # (T, 3) estimator force (from an earlier state), tared at rest before the move
    contact: np.ndarray          # (T,) estimator contact probability
    command: np.ndarray          # (T, 5) teleop command in effect at the tick
    truth_force_z: np.ndarray    # (T,) upward ground-truth force on the tool (simulated rig), nan when absent
    payload_grams: float = 0.0   # the held object (episode metadata)


def _latest(stamps: np.ndarray, query: np.ndarray, strict: bool = False) -> np.ndarray:
    """Index of the newest stamp <= query (< query if ``strict``); -1 where none."""
    return np.searchsorted(stamps, query, side="left" if strict else "right") - 1


def load_demo(path: str | Path, rate_hz: float = RATE_HZ) -> DemoEpisode:
    path = Path(path)
    series: dict[str, list] = {name: [] for name in ("state_t", "state_q", "cmd_t", "cmd_q", "force_t", "force",
                                                      "contact_t", "contact", "truth_t", "truth", "leader_t",
                                                      "leader_q")}
    with EpisodeReader(path) as reader:
        payload_grams = float(reader.metadata.get("payload_grams", 0.0))
        present = set(reader.topics)
        needed = [topics.FOLLOWER_ARM_STATE, topics.FOLLOWER_COMMAND, topics.LEADER_ARM_STATE, *ESTIMATOR_TOPICS]
        if missing := [t for t in needed if t not in present]:
            raise DemoError(f"demonstration {path} lacks {', '.join(missing)} (recorded without the estimator?)")
        wanted = needed + ([topics.TRUTH_WRENCH] if topics.TRUTH_WRENCH in present else [])
        for topic, _, msg in reader.messages(wanted):
            stamp = stamp_to_ns(msg.header.stamp) * 1e-9
            if topic == topics.FOLLOWER_ARM_STATE:
                series["state_t"].append(stamp)
                series["state_q"].append(np.asarray(msg.position, dtype=float))
            elif topic == topics.LEADER_ARM_STATE:
                series["leader_t"].append(stamp)
                series["leader_q"].append(np.asarray(msg.position, dtype=float))
            elif topic == topics.FOLLOWER_COMMAND:
                series["cmd_t"].append(stamp)
                series["cmd_q"].append(np.asarray(msg.position, dtype=float))
            elif topic == topics.ESTIMATED_FORCE:
                series["force_t"].append(stamp)
                f = msg.wrench.force
                series["force"].append([f.x, f.y, f.z])
            elif topic == topics.ESTIMATED_CONTACT:
                series["contact_t"].append(stamp)
                series["contact"].append(msg.probability)
            else:
                series["truth_t"].append(stamp)
                series["truth"].append(msg.wrench.force.z)
    arrays = {k: np.asarray(v, dtype=float) for k, v in series.items()}
    for key in ("state_t", "cmd_t", "force_t", "contact_t", "leader_t"):
        if arrays[key].size < 10:
            raise DemoError(f"demonstration {path} has only {arrays[key].size} messages on {key.split('_')[0]}")
        order = np.argsort(arrays[key], kind="stable")
        arrays[key] = arrays[key][order]
        value_key = {"state_t": "state_q", "cmd_t": "cmd_q", "force_t": "force", "contact_t": "contact",
                     "leader_t": "leader_q"}[key]
        arrays[value_key] = arrays[value_key][order]
    start = max(arrays["state_t"][0], arrays["cmd_t"][0], arrays["force_t"][0], arrays["contact_t"][0]) + 0.05
    ticks = np.arange(start, arrays["state_t"][-1], 1.0 / rate_hz)
    state = _latest(arrays["state_t"], ticks)
    state_stamp = arrays["state_t"][state]
    force = _latest(arrays["force_t"], state_stamp, strict=True)
    contact = _latest(arrays["contact_t"], state_stamp, strict=True)
    command = _latest(arrays["cmd_t"], ticks)
    ok = (force >= 0) & (contact >= 0) & (command >= 0)
    ticks, state, force, contact, command = ticks[ok], state[ok], force[ok], contact[ok], command[ok]
    cmd = arrays["cmd_q"][command]
    leader = arrays["leader_q"][np.maximum(_latest(arrays["leader_t"], ticks), 0)]
    moved = np.flatnonzero(np.max(np.abs(leader - leader[0]), axis=1) > MOVE_THRESHOLD)
    if moved.size == 0:
        raise DemoError(f"demonstration {path}: the leader arm never moves (the expert did not run)")
    first = max(0, int(moved[0] - LEAD_IN_S * rate_hz))
    if moved[0] < 2:
        raise DemoError(f"demonstration {path} starts after the expert began to move (recorded too late)")
    sl = slice(first, None)
    lag = np.max(np.abs(cmd[sl, :4] - arrays["state_q"][state][sl, :4]))
    if lag > MAX_TRACKING_ERROR:
        raise DemoError(f"demonstration {path}: the follower did not follow (command {lag:.2f} rad from the measured "
                        "position; a driver trip?)")
    truth = np.full(ticks.shape, np.nan)
    if arrays["truth_t"].size:
        order = np.argsort(arrays["truth_t"])
        index = _latest(arrays["truth_t"][order], ticks)
        truth = np.where(index >= 0, arrays["truth"][order][np.maximum(index, 0)], np.nan)
    rest = arrays["force"][force][first: max(first + 1, int(moved[0]))]       # at rest at the hover
    tared = arrays["force"][force][sl] - np.median(rest, axis=0)
    return DemoEpisode(name=path.name, time=ticks[sl] - ticks[first], position=arrays["state_q"][state][sl],
                       force=tared, contact=arrays["contact"][contact][sl], command=cmd[sl],
                       truth_force_z=truth[sl], payload_grams=payload_grams)


def samples(episodes: list[DemoEpisode], variant: str, chunk: int) -> tuple[np.ndarray, np.ndarray]:
    """Observations (N, D) and action chunks (N, chunk, 5): command at tick t+1 ... t+chunk minus the measured
    position at t (the last command repeats past an episode's end)."""
    obs, actions = [], []
    for ep in episodes:
        n = len(ep.time)
        future = np.minimum(np.arange(n)[:, None] + np.arange(1, chunk + 1)[None, :], n - 1)
        obs.append(observation(variant, ep.position, ep.force, ep.contact))
        actions.append(ep.command[future] - ep.position[:, None, :])
    if not obs:
        raise DemoError("no demonstrations to learn from")
    return np.concatenate(obs).astype(np.float32), np.concatenate(actions).astype(np.float32)


def load_demos(folder: str | Path, log=print) -> list[DemoEpisode]:
    """Every usable episode bag under ``folder``; unusable ones are skipped with a line saying why."""
    folder = Path(folder)
    paths = sorted(p for p in folder.rglob("episode_*") if p.is_dir())
    if not paths:
        raise DemoError(f"no episode_* bag directories under {folder}")
    episodes = []
    for path in paths:
        try:
            episodes.append(load_demo(path))
        except Exception as exc:  # a broken bag is one line, not the end of training
            log(f"skipping {path.name}: {exc}")
    if not episodes:
        raise DemoError(f"none of the {len(paths)} bags under {folder} is a usable demonstration")
    return episodes
