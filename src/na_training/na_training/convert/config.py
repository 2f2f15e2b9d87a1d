"""The converter's configuration: built-in defaults (``na_training/config/convert.yaml`` repeats them with
comments), a YAML file over them, and the checks that keep a value from silently giving wrong labels."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from na_common import topics as suite_topics
from na_common.config_files import ConfigFileError, resolve_config
from na_description import SpecError, load_spec
from na_description.yaml_file import load_yaml_mapping
from na_training import CONFIG_DIR
from na_training.labels import LabelError, fixture_from_mapping
from na_training.nad import AXES

# Built-in defaults; na_training/config/convert.yaml repeats them with comments (a test keeps both equal).
DEFAULT_CONFIG: dict[str, Any] = {
    "topics": {
        "follower": suite_topics.FOLLOWER_ARM_STATE,
        "leader": suite_topics.LEADER_ARM_STATE,
        "command": suite_topics.FOLLOWER_COMMAND,
        "ft": suite_topics.FT_WRENCH,
        "grasp": suite_topics.GRASP,
        "truth_wrench": suite_topics.TRUTH_WRENCH,
        "truth_contact": suite_topics.TRUTH_CONTACT,
    },
    "require_leader": True,
    "tolerance": {
        "command_s": 0.015,
        "leader_s": 0.015,
        "ft_half_window_s": 0.005,
        "truth_s": 0.015,
        "follower_gap_s": 0.05,
    },
    "fixture": {"position": [0.22, 0.0, 0.06], "rpy": [0.0, 0.0, 0.0]},
    "tare": {"force": [0.0, 0.0, 0.0], "initial_seconds": 0.0},
    "contact_threshold_n": 0.5,
    "payload_valid_channels": ["x", "y", "z"],
    "split_seed": 0,
    "metadata_defaults": None,
}

# Role -> message type, through the one topic table.
EXPECTED_TYPES = {role: suite_topics.EPISODE_TOPICS[topic] for role, topic in DEFAULT_CONFIG["topics"].items()}


class ConvertError(RuntimeError):
    """A bag or configuration cannot be converted; the message names the bag and the reason."""


# Sections taken as given (the fixture may carry the rig's extra keys, e.g. half_size_m).
_FREE_FORM_KEYS = ("fixture", "metadata_defaults")


def _merge(base: dict[str, Any], override: Mapping[str, Any], where: str) -> dict[str, Any]:
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if key not in base:
            raise ConvertError(f"{where}: unknown key '{key}' (known: {', '.join(sorted(base))})")
        if key in _FREE_FORM_KEYS:
            merged[key] = copy.deepcopy(value)
        elif isinstance(base[key], dict) and isinstance(value, Mapping):
            merged[key] = _merge(base[key], value, f"{where}.{key}")
        else:
            merged[key] = value
    return merged


def robot_config_path(robot: str | None) -> Path | None:
    """A robot's own converter config, ``convert_<robot>.yaml`` (shipped in ``na_training/config/``, else beside
    the robot's spec), used when no ``--config`` is given; None when the robot has none (the defaults apply)."""
    if robot is None:
        return None
    try:
        spec = load_spec(robot)
    except SpecError:
        return None               # the converter names the unknown robot itself
    candidates = [Path(CONFIG_DIR) / f"convert_{spec.name}.yaml"]
    if spec.source is not None:
        candidates.append(spec.source.parent / f"convert_{spec.name}.yaml")
    return next((path for path in candidates if path.is_file()), None)


def load_config(path: str | Path | None = None) -> dict[str, Any]:
    """Converter configuration: the built-in defaults, overridden by a YAML file when given."""
    if path is None:
        return copy.deepcopy(DEFAULT_CONFIG)
    try:
        config_path = resolve_config(path, CONFIG_DIR, "converter config")
    except ConfigFileError as err:
        raise ConvertError(str(err)) from None
    raw = load_yaml_mapping(config_path, ConvertError, "converter config")
    return _merge(DEFAULT_CONFIG, raw, str(config_path))


def validate_config(config: Mapping[str, Any]) -> None:
    """Reject configuration values that would silently produce wrong labels."""
    for key, value in config["tolerance"].items():
        if not isinstance(value, int | float) or not np.isfinite(value) or value < 0:
            raise ConvertError(f"config tolerance.{key} must be a non-negative number of seconds, got {value!r}")
    threshold = config["contact_threshold_n"]
    if not isinstance(threshold, int | float) or not np.isfinite(threshold) or threshold < 0:
        raise ConvertError(f"config contact_threshold_n must be a non-negative number, got {threshold!r}")
    unknown = set(config["payload_valid_channels"]) - set(AXES)
    if unknown:
        raise ConvertError(f"config payload_valid_channels: unknown axes {sorted(unknown)} (use x, y, z)")
    tare = config["tare"]
    if len(tare["force"]) != 3 or not float(tare["initial_seconds"]) >= 0:
        raise ConvertError("config tare: force needs three values and initial_seconds must be >= 0")
    try:
        fixture_from_mapping(config["fixture"], "config fixture")
    except LabelError as err:
        raise ConvertError(str(err)) from err
