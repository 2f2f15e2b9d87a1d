"""Per-episode servo health from a recorded episode bag (ROS-free: the bag reader is na_common.episode_bag).

Reads the follower's ``ArmState`` (temperature, effort, error bits) and, when the bag has them, the estimator's
condition scores (the ``condition`` of ``/estimator/estimate`` with its contact probability, else
``/estimator/condition``), and summarises each motor against its datasheet
(:mod:`na_description.datasheet_margins`). Levels follow /diagnostics: ERROR for error bits or a temperature at
the shutdown limit, WARN for an effort above the near-stall fraction, a supervised condition mean below the
estimator's warning level or a supervised motor that the condition monitor (:mod:`na_common.condition_monitor`,
run over the recorded scores; estimates in contact add no evidence) left suspect or degraded, OK otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from na_common import topics
from na_common.condition_monitor import NOMINAL, STATE_NAMES, run_monitor
from na_common.diagnostics import CONDITION_WARN_BELOW, ERROR, OK, WARN, Level
from na_common.episode_bag import EpisodeBagError, EpisodeReader, list_episodes
from na_description import RobotSpec, SpecError, load_spec
from na_description.datasheet_margins import (
    EFFORT_WARNING_FRACTION,
    DatasheetReference,
    datasheet_reference,
    effort_margin,
    temperature_margin,
)


class HealthInputError(ValueError):
    """The input is not something a report can be made of; the message is the one line the CLI prints."""


@dataclass
class EpisodeSeries:
    """One episode's follower telemetry (spec motor order) and, if recorded, its condition scores."""

    name: str
    path: Path
    spec: RobotSpec
    time: np.ndarray                          # s since the first arm state, [T]
    temperature: np.ndarray                   # degC, [T, n]
    effort: np.ndarray                        # A or fraction of full output, [T, n]
    hardware_error: np.ndarray                # error bits, [T, n]
    condition_time: np.ndarray | None = None  # s on the same clock, [C]
    condition: np.ndarray | None = None       # score, [C, n]
    condition_contact: np.ndarray | None = None   # the model's contact probability of those estimates, [C]


def episode_paths(path: str | Path) -> list[Path]:
    """One episode bag folder, or the episode folders inside a folder; HealthInputError when there is none."""
    path = Path(path)
    if (path / "metadata.yaml").is_file():
        return [path]
    if not path.is_dir():
        raise HealthInputError(f"{path}: not an episode bag folder or a folder of them")
    try:
        found = [p for p in list_episodes(path) if (p / "metadata.yaml").is_file()]
    except EpisodeBagError as err:
        raise HealthInputError(str(err)) from err
    if not found:
        raise HealthInputError(f"{path}: not an episode bag (no metadata.yaml) and no episode_NNNNNN bags inside")
    return found


def spec_for(robot: str | None) -> RobotSpec | None:
    """The spec named by ``--robot`` (None: each bag's own robot)."""
    if robot is None:
        return None
    try:
        return load_spec(robot)
    except SpecError as err:
        raise HealthInputError(f"--robot: {err}") from err


def _episode_spec(path: Path, metadata: dict[str, Any], wanted: RobotSpec | None) -> RobotSpec:
    named = metadata.get("robot")
    if wanted is not None:
        if named and named != wanted.name:
            raise HealthInputError(f"{path}: a bag of robot {named!r}, not {wanted.name!r} (--robot)")
        return wanted
    try:
        return load_spec(named or None)
    except SpecError as err:
        raise HealthInputError(f"{path}: {err}") from err


def _ordered(spec: RobotSpec, names, values, field: str) -> np.ndarray:
    return spec.reorder(list(names), np.asarray(values, dtype=float), field)


def read_episode(path: Path, wanted: RobotSpec | None = None) -> EpisodeSeries:
    """The telemetry of one episode bag; HealthInputError for a bag that cannot be read or has no arm states."""
    try:
        with EpisodeReader(path) as reader:
            spec = _episode_spec(path, reader.metadata, wanted)
            if topics.FOLLOWER_ARM_STATE not in reader.topics:
                raise HealthInputError(f"{path}: no arm states ({topics.FOLLOWER_ARM_STATE} is not in the bag)")
            reference = datasheet_reference(spec)
            # the whole estimate first: it also holds the contact probability, which the condition monitor gates on
            wanted_topics = [topics.FOLLOWER_ARM_STATE] + [t for t in (topics.ESTIMATE, topics.ESTIMATED_CONDITION)
                                                          if t in reader.topics]
            condition_topic = next((t for t in wanted_topics[1:]), None)
            stamps, temps, efforts, errors, c_stamps, scores, contact = [], [], [], [], [], [], []
            for topic, stamp, msg in reader.messages(wanted_topics):
                if topic == topics.FOLLOWER_ARM_STATE:
                    effort = msg.load if reference.effort_signal == "load" else msg.current
                    if len(effort) != len(msg.name):
                        raise HealthInputError(f"{path}: arm states without {reference.effort_signal} values "
                                               f"(a bag of another robot? see --robot)")
                    stamps.append(stamp)
                    temps.append(_ordered(spec, msg.name, msg.temperature, "temperature"))
                    efforts.append(_ordered(spec, msg.name, effort, reference.effort_signal))
                    errors.append(_ordered(spec, msg.name, msg.hardware_error, "hardware_error"))
                elif topic == condition_topic:
                    values = msg.score if topic == topics.ESTIMATED_CONDITION else msg.condition
                    c_stamps.append(stamp)
                    scores.append(_ordered(spec, msg.name, values, "condition"))
                    if topic == topics.ESTIMATE:
                        contact.append(msg.contact_probability)
    except EpisodeBagError as err:
        raise HealthInputError(str(err)) from err
    except ValueError as err:                  # a JointNameError: names that are not the spec's
        if isinstance(err, HealthInputError):
            raise
        raise HealthInputError(f"{path}: {err} (a bag of another robot? see --robot)") from err
    if not stamps:
        raise HealthInputError(f"{path}: no arm states ({topics.FOLLOWER_ARM_STATE} holds no message)")
    t0 = stamps[0]
    series = EpisodeSeries(path.name, path, spec, (np.asarray(stamps) - t0) * 1e-9, np.array(temps),
                           np.array(efforts), np.array(errors).astype(int))
    if scores:
        series.condition_time = (np.asarray(c_stamps) - t0) * 1e-9
        series.condition = np.array(scores)
        series.condition_contact = np.array(contact, dtype=float) if contact else None
    return series


def _level_name(level: Level) -> str:
    return level.name


def summarise(series: EpisodeSeries) -> dict[str, Any]:
    """Per-motor figures and levels of one episode, and the episode's worst level (JSON-ready)."""
    spec = series.spec
    reference: DatasheetReference = datasheet_reference(spec)
    e_margin = effort_margin(series.effort, reference)
    t_margin = temperature_margin(series.temperature, reference)
    supervised = spec.joint_names.index(spec.condition_joint)
    monitor_state, monitor_decided = np.zeros(spec.n_motors, dtype=int), np.full(spec.n_motors, np.nan)
    if series.condition is not None and len(series.condition):
        _, states, monitor_decided = run_monitor(series.condition_time, series.condition,
                                                 contact_probability=series.condition_contact)
        monitor_state = states[-1]
    motors = []
    for k, joint in enumerate(spec.joint_names):
        bits = int(np.bitwise_or.reduce(series.hardware_error[:, k]))
        error_frames = int(np.count_nonzero(series.hardware_error[:, k]))
        near_stall = float(np.mean(e_margin[:, k] < 1.0 - EFFORT_WARNING_FRACTION))
        reasons: list[str] = []
        level = OK
        if bits:
            level = ERROR
            reasons.append(f"error bits {', '.join(reference.describe_error(bits))} in {error_frames} states")
        if float(np.min(t_margin[:, k])) <= 0.0:
            level = ERROR
            reasons.append(f"temperature reached the {reference.temperature_limit_c:.0f} degC shutdown limit")
        if near_stall > 0.0:
            level = max(level, WARN)
            reasons.append(f"effort above {EFFORT_WARNING_FRACTION:.0%} of the datasheet stall figure in "
                           f"{near_stall:.1%} of states")
        motor: dict[str, Any] = {
            "joint": joint, "servo_id": spec.servo_ids[k],
            "temperature_max_c": float(np.max(series.temperature[:, k])),
            "temperature_margin_min_c": float(np.min(t_margin[:, k])),
            "effort_peak": float(np.max(np.abs(series.effort[:, k]))),
            "effort_margin_min": float(np.min(e_margin[:, k])),
            "near_stall_share": near_stall,
            "hardware_error_bits": f"0x{bits:02X}", "hardware_errors": reference.describe_error(bits),
            "hardware_error_states": error_frames, "condition_supervised": k == supervised,
        }
        if series.condition is not None:
            mean = float(np.mean(series.condition[:, k]))
            state, decided = monitor_state[k], monitor_decided[k]
            motor.update(condition_mean=mean, condition_min=float(np.min(series.condition[:, k])))
            if k == supervised:                 # the only head trained on labels: the only one decided on
                motor.update(monitor_state=STATE_NAMES[state],
                             monitor_degraded_at_s=float(decided) if np.isfinite(decided) else None)
            if k == supervised and mean < CONDITION_WARN_BELOW:
                level = max(level, WARN)
                reasons.append(f"condition mean {mean:.2f} below {CONDITION_WARN_BELOW:.2f}")
            if k == supervised and state != NOMINAL:
                level = max(level, WARN)
                reasons.append(f"condition monitor: {STATE_NAMES[state]}"
                               + (f" (decided after {decided:.1f} s)" if np.isfinite(decided) else ""))
        motor.update(level=_level_name(level), reasons=reasons)
        motors.append(motor)
    worst = max((Level[m["level"]] for m in motors), default=OK)
    return {
        "episode": series.name, "path": str(series.path), "robot": spec.name, "servo_model": reference.servo_model,
        "states": int(series.time.size), "duration_s": float(series.time[-1]) if series.time.size else 0.0,
        "effort_signal": reference.effort_signal, "effort_unit": reference.effort_unit,
        "effort_datasheet": reference.effort_source, "temperature_limit_c": reference.temperature_limit_c,
        "condition_recorded": series.condition is not None, "level": _level_name(worst), "motors": motors,
    }


def markdown(summaries: list[dict[str, Any]]) -> str:
    """The summaries as a short markdown report: one table per episode."""
    lines = ["# Servo health report", ""]
    for s in summaries:
        lines += [f"## {s['episode']}: {s['level']}", "",
                  f"{s['robot']} ({s['servo_model']}), {s['states']} states over {s['duration_s']:.1f} s; effort "
                  f"against the {s['effort_datasheet']}, temperature against {s['temperature_limit_c']:.0f} degC; "
                  f"condition {'recorded' if s['condition_recorded'] else 'not recorded'}.", "",
                  "| joint | level | max temp (degC) | min effort margin | near stall | error bits | condition mean "
                  "| why |", "|---|---|---|---|---|---|---|---|"]
        for m in s["motors"]:
            condition = f"{m['condition_mean']:.2f}" if "condition_mean" in m else "-"
            lines.append(f"| {m['joint']} | {m['level']} | {m['temperature_max_c']:.0f} | {m['effort_margin_min']:.2f} "
                         f"| {m['near_stall_share']:.1%} | {m['hardware_error_bits']} | {condition} "
                         f"| {'; '.join(m['reasons'])} |")
        lines.append("")
    return "\n".join(lines)
