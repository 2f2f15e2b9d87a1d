"""Which value of a LeRobot feature is which motor and signal, through the namings datasets use.

A feature's ``names`` (``meta/info.json``; a list, ``{"motors": [...]}`` or nested lists) are matched to the robot
spec's joints by name, never by position:

* ``shoulder_pan.pos`` (LeRobot since 2025), ``main_shoulder_pan`` (older recordings: an arm prefix, no suffix),
  ``shoulder_pan.load_pct`` (a signal and its unit after the motor);
* generic numbering ``motor_1`` ... ``motor_6`` / ``joint_0`` ... ``joint_5``: by number, 0- or 1-based or the servo
  IDs, in the spec's servo order;
* any column order, alphabetical included.

A signal comes from ``observation.state`` / ``action`` entries or from a feature of its own
(``observation.load``, ``observation.velocity``, ...), whose bare motor names take the feature's signal.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from na_description import RobotSpec
from na_description.spec import JointNameError, joint_order
from na_training.lerobot_format import flatten_names

STATE_KEY, ACTION_KEY = "observation.state", "action"
# Words naming a signal after the motor (``<motor>.<word>[_<unit>]``) -> NAD per-joint field.
SIGNAL_WORDS = {"pos": "position", "position": "position", "vel": "velocity", "velocity": "velocity",
                "speed": "velocity", "load": "load", "effort": "effort", "current": "current", "cur": "current",
                "pwm": "pwm", "voltage": "input_voltage", "volt": "input_voltage", "temperature": "temperature",
                "temp": "temperature"}
# Features holding one signal per motor, and the signal of their bare motor names.
FEATURE_SIGNALS = {STATE_KEY: "position", ACTION_KEY: "position", "observation.load": "load",
                   "observation.effort": "effort", "observation.velocity": "velocity", "observation.vel": "velocity",
                   "observation.current": "current", "observation.voltage": "input_voltage",
                   "observation.temperature": "temperature", "observation.pwm": "pwm"}
_SEPARATORS = r"[._\s/:-]"
_GENERIC = re.compile(rf"(?:^|{_SEPARATORS})(motor|joint|servo|m)[_]?(\d+)(?={_SEPARATORS}|$)")


@dataclass(frozen=True)
class Entry:
    """One value of a feature: its column position, the spec joint (index), the signal and the unit named."""

    position: int
    joint: int
    signal: str
    unit: str | None


@dataclass(frozen=True)
class Signal:
    """Where one per-motor signal sits: the feature (Parquet column), the index of each spec joint in it, the unit."""

    feature: str
    index: np.ndarray
    unit: str | None


def _split_signal(rest: str, default: str | None) -> tuple[str | None, str | None]:
    """``pos`` -> (position, None); ``load_pct`` -> (load, pct); ``""`` -> (default, None); unknown -> (None, None)."""
    rest = rest.strip("._ /:-")
    if not rest:
        return default, None
    for word in sorted(SIGNAL_WORDS, key=len, reverse=True):
        if rest == word or rest.startswith(word + "_"):
            unit = rest[len(word) + 1:] or None
            return SIGNAL_WORDS[word], unit
    return None, None


def _spec_match(name: str, spec: RobotSpec) -> tuple[int, str] | None:
    """(joint index, what follows the motor) when a spec motor name is a separated part of ``name``."""
    for joint in sorted(spec.joint_names, key=len, reverse=True):
        found = re.search(rf"(?:^|{_SEPARATORS}){re.escape(joint)}(?={_SEPARATORS}|$)", name)
        if found:
            return spec.joint_names.index(joint), name[found.end():]
    return None


def _generic_base(numbers: Sequence[int], spec: RobotSpec) -> dict[int, int] | None:
    """Generic number -> joint index: the servo IDs, or 1..n, or 0..n-1 (in that order of preference)."""
    wanted = sorted(set(numbers))
    if wanted == sorted(spec.servo_ids):
        return {sid: k for k, sid in enumerate(spec.servo_ids)}
    for base in (1, 0):
        if wanted == list(range(base, base + spec.n_motors)):
            return {base + k: k for k in range(spec.n_motors)}
    return None


def parse_entries(names: Sequence[str], spec: RobotSpec, default: str | None) -> list[Entry]:
    """The entries of one feature that name a spec motor and a known signal (others are left out)."""
    names = [str(n) for n in names]
    generic = {k: _GENERIC.search(n) for k, n in enumerate(names) if _spec_match(n, spec) is None}
    generic = {k: m for k, m in generic.items() if m is not None}
    base = _generic_base([int(m.group(2)) for m in generic.values()], spec) if generic else None
    entries = []
    for k, name in enumerate(names):
        matched = _spec_match(name, spec)
        if matched is None and k in generic and base is not None:
            number = int(generic[k].group(2))
            matched = (base[number], name[generic[k].end():]) if number in base else None
        if matched is None:
            continue
        signal, unit = _split_signal(matched[1], default)
        if signal is not None:
            entries.append(Entry(k, matched[0], signal, unit))
    return entries


def match_motor_names(names: Sequence[str], spec: RobotSpec, where: str) -> np.ndarray:
    """Index array putting values named ``names`` (one per motor, any naming above) into spec order; ValueError
    naming what is missing, unknown or duplicated."""
    entries = parse_entries(names, spec, default="position")
    try:
        order = joint_order([spec.joint_names[e.joint] for e in entries], spec.joint_names, spec.name)
    except JointNameError as err:
        raise ValueError(f"{where}: motor names {list(names)}: {err}") from None
    return np.array([entries[k].position for k in order])


def feature_names(info: Mapping[str, Any], key: str) -> list[str] | None:
    feature = info["features"].get(key)
    return flatten_names(feature.get("names")) if isinstance(feature, Mapping) else None


def find_signals(info: Mapping[str, Any], spec: RobotSpec) -> dict[str, Signal]:
    """Every per-motor signal the dataset records: ``position`` and ``command`` (from the action) and the telemetry
    signals, each covering every spec joint. ValueError naming a feature whose motors do not match."""
    found: dict[str, Signal] = {}
    keys = [STATE_KEY, ACTION_KEY, *(k for k in info["features"] if k in FEATURE_SIGNALS and
                                     k not in (STATE_KEY, ACTION_KEY))]
    for key in keys:
        names = feature_names(info, key)
        if key not in info["features"]:
            continue
        shape = info["features"][key].get("shape") or [0]
        if names is None:
            raise ValueError(f"feature {key!r} names no motors ({shape[0]} unnamed values): which value is which "
                             "motor is unknown")
        by_signal: dict[str, list[Entry]] = {}
        for entry in parse_entries(names, spec, FEATURE_SIGNALS[key]):
            signal = "effort" if entry.signal == "effort" else entry.signal
            if signal == "effort":
                signal = spec.effort_signal
            if key == ACTION_KEY:
                if signal != "position":
                    continue
                signal = "command"
            by_signal.setdefault(signal, []).append(entry)
        for signal, entries in by_signal.items():
            if signal in found:
                continue
            motors = [spec.joint_names[e.joint] for e in entries]
            try:
                order = joint_order(motors, spec.joint_names, spec.name)
            except JointNameError as err:
                raise ValueError(f"feature {key!r} ({signal}): {err}") from None
            units = {entries[k].unit for k in order}
            if len(units) > 1:
                raise ValueError(f"feature {key!r} ({signal}): motors name different units {sorted(map(str, units))}")
            found[signal] = Signal(key, np.array([entries[k].position for k in order]), units.pop())
    return found


def describe_names(info: Mapping[str, Any], signal: Signal) -> str:
    """``shoulder_pan.pos, ...`` of one signal, in spec order, for the report."""
    names = feature_names(info, signal.feature) or []
    return ", ".join(names[k] for k in signal.index)
