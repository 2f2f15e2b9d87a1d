"""What a LeRobot dataset is, read from its ``meta/info.json`` and values: the robot (any robot_type spelling, or
told by the motor names), where each motor signal sits, and the units of positions and telemetry, each decision with
the reason the import reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from na_description import RobotSpec, SpecError, load_spec
from na_training.lerobot_format import flatten_names, major_version, read_info
from na_training.lerobot_names import Signal, describe_names, find_signals
from na_training.lerobot_read import EpisodeSource
from na_training.lerobot_robots import (
    ACCEPTED_ROBOT_TYPES,
    FORCE_FEATURE,
    FORCE_NAMES,
    normalise_robot_type,
    robot_for_type,
)
from na_training.lerobot_units import (
    Calibration,
    LeRobotUnitsError,
    check_gripper,
    decide_unit,
    infer_joint_units,
)

SUPPORTED_VERSIONS = ("v2", "v3")
NEUTRAL_VOLTAGE_V = 12.0                 # the specs' 12 V servo supply, as the simulated rig runs it
NEUTRAL_TEMPERATURE_C = 25.0             # room temperature, the simulated rig's ambient
POSITION_UNIT_WORDS = {"deg": "degrees", "degrees": "degrees", "range": "range", "m100_100": "range",
                       "steps": "steps", "raw": "steps"}
TELEMETRY = ("velocity", "load", "current", "pwm", "input_voltage", "temperature")


class LeRobotImportError(ValueError):
    """The dataset cannot be imported; the message says exactly what is missing, ambiguous or wrong."""

# ----------------------------------------------------------------------------------------- layout

@dataclass
class Layout:
    """What ``meta/info.json`` says about a dataset, checked against the robot spec."""

    version: str
    fps: float
    robot_type: str
    spec: RobotSpec
    signals: dict[str, Signal]
    force: bool                              # observation.force (+ validity, contact) of an export
    total_episodes: int | None
    notes: list[str] = field(default_factory=list)


def _spec_for(info: Mapping[str, Any], robot: str | None, where: str) -> tuple[RobotSpec, str]:
    """The robot spec: ``--robot``, else the one ``robot_type`` names (any spelling), else told by motor names."""
    robot_type = info.get("robot_type")
    try:
        named, note = robot_for_type(robot_type)
    except ValueError as err:
        raise LeRobotImportError(f"{where}: {err}") from None
    try:
        spec = load_spec(robot) if robot is not None else None
    except SpecError as err:
        raise LeRobotImportError(f"--robot: {err}") from None
    unknown = normalise_robot_type(robot_type) in ("", "none", "null", "unknown")
    if spec is not None:
        if (named is not None and named != spec.name) or (named is None and not unknown):
            accepted = ", ".join(sorted(ACCEPTED_ROBOT_TYPES.get(spec.name, {})))
            raise LeRobotImportError(f"{where}: robot_type {robot_type!r} is not the {spec.name} (spellings taken "
                                     f"for it: {accepted or 'none'}; see --robot)")
        return spec, note
    if named is not None:
        return load_spec(named), note
    if not unknown:
        raise LeRobotImportError(f"{where}: robot_type {robot_type!r} is not an arm this suite models (known: "
                                 f"{', '.join(ACCEPTED_ROBOT_TYPES)}; see --robot)")
    for candidate in ACCEPTED_ROBOT_TYPES:               # no robot type: the arm whose motor names match
        spec = load_spec(candidate)
        try:
            if {"position", "command"} <= set(find_signals(info, spec)):
                return spec, "no robot_type recorded: told from the motor names"
        except ValueError:
            continue
    raise LeRobotImportError(f"{where}: no robot_type recorded and the motor names match no known arm; give --robot")


def read_layout(root: Path, robot: str | None) -> tuple[dict[str, Any], Layout]:
    """``meta/info.json`` checked: version, robot, fps, the motor signals and the effort signal the model needs."""
    info = read_info(root)
    where = f"{root / 'meta' / 'info.json'}"
    version = major_version(info)
    if version not in SUPPORTED_VERSIONS:
        readable = " and ".join(v + ".x" for v in SUPPORTED_VERSIONS)
        raise LeRobotImportError(f"{where}: codebase_version {info.get('codebase_version') or 'missing'} is not "
                                 f"supported (this importer reads {readable})")
    spec, note = _spec_for(info, robot, where)
    notes = [f"robot_type {info.get('robot_type')!r}: {note}"] if note else []
    features = info["features"]
    for key in ("observation.state", "action"):
        if key not in features:
            raise LeRobotImportError(f"{where}: no {key!r} feature (needed for the follower "
                                     f"{'position' if key == 'observation.state' else 'command'})")
    try:
        signals = find_signals(info, spec)
    except ValueError as err:
        raise LeRobotImportError(f"{where}: {err}") from None
    for name, key in (("position", "observation.state"), ("command", "action")):
        if name not in signals:
            raise LeRobotImportError(f"{where}: feature {key!r} has no entries naming {spec.name}'s motors "
                                     f"(names: {features[key].get('names')})")
    if spec.effort_signal not in signals:
        word = "Present Load" if spec.effort_signal == "load" else "Present Current"
        raise LeRobotImportError(f"{where}: no {word} column (observation.state entries <motor>.{spec.effort_signal} "
                                 f"or a feature observation.{spec.effort_signal} / observation.effort), which the "
                                 f"{spec.name} model reads as effort")
    fps = float(info.get("fps") or 0)
    if fps <= 0:
        raise LeRobotImportError(f"{where}: fps {info.get('fps')!r} is not a frame rate")
    if abs(1.0 / fps - spec.frame_period) > 1e-6:
        notes.append(f"fps {fps:g} differs from {spec.name}'s frame period {spec.frame_period:.6g} s: the NAD keeps "
                     f"the dataset's {1.0 / fps:.6g} s frames (convert or resample before training at the spec's rate)")
    force = FORCE_FEATURE in features and flatten_names(features[FORCE_FEATURE].get("names")) == FORCE_NAMES
    if FORCE_FEATURE in features and not force:
        notes.append(f"{FORCE_FEATURE} is not named {', '.join(FORCE_NAMES)} (base frame, N): not taken as force "
                     "labels")
    total = info.get("total_episodes")
    return info, Layout(version=version, fps=fps, robot_type=str(info.get("robot_type") or ""), spec=spec,
                        signals=signals, force=force, notes=notes,
                        total_episodes=None if total is None else int(total))


# ----------------------------------------------------------------------------------------- units

@dataclass
class Units:
    joint: str
    joint_reason: str
    telemetry: dict[str, tuple[str, str]]        # signal -> (unit, how it was told)
    calibration: Calibration | None


def _joint_units(info: Mapping[str, Any], layout: Layout, episodes: Sequence[EpisodeSource], given: str,
                 calibration: Calibration | None) -> tuple[str, str]:
    if given != "auto":
        return given, "given (--joint-units)"
    named = {POSITION_UNIT_WORDS.get(layout.signals[s].unit or "") for s in ("position", "command")} - {None}
    if len(named) == 1:
        return named.pop(), "named in the position names"
    hint = (info.get("neural_actuator") or {}).get("joint_units") if isinstance(info.get("neural_actuator"),
                                                                                 Mapping) else None
    if hint in POSITION_UNIT_WORDS.values():
        return str(hint), "stated in meta/info.json (neural_actuator.joint_units)"
    state = np.concatenate([e.values["position"] for e in episodes])
    try:
        return infer_joint_units(state, layout.spec, calibration, layout.spec.joint_names)
    except LeRobotUnitsError as err:
        raise LeRobotImportError(str(err)) from None


def decide_units(info: Mapping[str, Any], layout: Layout, episodes: Sequence[EpisodeSource], joint_units: str,
                 load_units: str, calibration: Calibration | None) -> Units:
    joint, reason = _joint_units(info, layout, episodes, joint_units, calibration)
    if joint == "range" and calibration is None:
        raise LeRobotImportError(f"joint positions are in LeRobot's -100..100 range mode ({reason}), which cannot be "
                                 "converted to radians without the arm's calibration file (--calibration FILE or "
                                 "--robot-id ID)")
    gripper = layout.spec.n_motors - 1
    for source in episodes:           # the readings only: LeRobot clamps them, not a policy's actions
        try:
            check_gripper(source.values["position"][:, gripper], f"episode {source.lerobot_index} gripper", joint)
        except LeRobotUnitsError as err:
            raise LeRobotImportError(str(err)) from None
    telemetry = {}
    cli_load = {"percent": "pct", "fraction": "frac", "permille": "permille", "raw": "raw"}.get(load_units)
    for signal in TELEMETRY:
        if signal not in layout.signals:
            continue
        unit = cli_load if signal == "load" and cli_load else layout.signals[signal].unit
        values = np.concatenate([e.values[signal].ravel() for e in episodes])
        try:
            telemetry[signal] = decide_unit(signal, values, unit, layout.spec, f"{layout.signals[signal].feature}")
        except LeRobotUnitsError as err:
            raise LeRobotImportError(str(err)) from None
    return Units(joint, reason, telemetry, calibration)



def statements(info: Mapping[str, Any], layout: Layout, units: Units) -> list[str]:
    """One line per decision the import took: robot, names, units, calibration, what is filled."""
    spec, signals = layout.spec, layout.signals
    lines = [f"robot {spec.name} (robot_type {layout.robot_type or 'none'}, LeRobot {layout.version})", *layout.notes,
             f"positions: {describe_names(info, signals['position'])}; commands: "
             f"{describe_names(info, signals['command'])}",
             f"joint units: {units.joint} ({units.joint_reason}); gripper: 0..100 of "
             + ("the calibrated range" if units.calibration else "the spec's jaw limits (no calibration)")]
    if units.calibration is not None:
        lines.append(f"calibration: {units.calibration.path}")
        lines += units.calibration.warnings
    for signal, (_, how) in units.telemetry.items():
        lines.append(f"{signal}: {signals[signal].feature} [{describe_names(info, signals[signal])}] in {how}")
    filled = [s for s in ("velocity", "input_voltage", "temperature") if s not in units.telemetry]
    if filled:
        lines.append("not recorded, filled: " + ", ".join(
            {"velocity": "velocity from finite differences of the position",
             "input_voltage": f"voltage {NEUTRAL_VOLTAGE_V:g} V",
             "temperature": f"temperature {NEUTRAL_TEMPERATURE_C:g} degC"}[s] for s in filled))
    lines.append("force labels: observation.force (N, base frame)" if layout.force else "no force labels")
    return lines
