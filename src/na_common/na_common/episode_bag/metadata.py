"""Episode metadata (docs/INTERFACES.md, "Episode bags"): its keys and the Python type of each, the checks
every writer and reader applies, its rosbag2 ``custom_data`` form, and where a bag keeps it."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from na_common.episode_bag.layout import SIDECAR_NAME, EpisodeBagError, json_default

FORCE_SOURCES = ("none", "payload", "ft_sensor")
# An episode's motor condition: "nominal", or "restricted_<joint>" (that joint mechanically restricted, e.g.
# restricted_joint3 on the OpenManipulator-X, restricted_elbow_flex on the SO-101).
CONDITION_PATTERN = re.compile(r"^(nominal|restricted_[a-z][a-z0-9_]*)$")
CONDITION_FORMS = "nominal or restricted_<joint>"
NOMINAL_CONDITION = "nominal"


def restricted_condition(joint: str) -> str:
    """The ``condition`` of an episode whose ``joint`` is mechanically restricted (``restricted_<joint>``)."""
    return f"restricted_{joint}"


SOURCES = ("live", "generated")

# Integrity of a live episode (written by the recorder from /diagnostics): ``faults`` lists every driver or
# estimator ERROR/STALE status seen during the episode (a list of dicts, see docs/INTERFACES.md); ``void`` is
# true when an arm driver tripped or its bus or a servo went silent, with ``void_reason`` the first such fault.
FAULTS_KEY = "faults"
VOID_KEY = "void"
VOID_REASON_KEY = "void_reason"

# Episode metadata keys (docs/INTERFACES.md) and the Python type each holds.
STRING_KEYS = ("task", "force_source", "condition", "operator", "notes", "source", "task_instance", "robot",
               VOID_REASON_KEY)
INT_KEYS = ("episode_id", "start_stamp", "stop_stamp", "seed")
FLOAT_KEYS = ("payload_grams",)
BOOL_KEYS = ("complete", VOID_KEY)
REQUIRED_KEYS = ("task", "payload_grams", "force_source", "condition", "source")


def task_instance_id(task: str, payload_grams: float, condition: str) -> str:
    """The unit of the 8:1:1 split: task + payload + condition, e.g. ``pick_place_200g_nominal``."""
    grams = f"{payload_grams:g}"
    return f"{task}_{grams}g_{condition}"


def void_reason(metadata: Mapping[str, Any]) -> str | None:
    """Why an episode's metadata marks it void (a driver tripped or a bus went silent), or None when it does not."""
    if not metadata.get(VOID_KEY):
        return None
    return str(metadata.get(VOID_REASON_KEY) or "marked void (no reason recorded)")


def validate_metadata(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """Check the keys and values of episode metadata and fill the optional ones."""
    missing = [k for k in REQUIRED_KEYS if k not in metadata]
    if missing:
        raise EpisodeBagError(f"episode metadata lacks required keys: {', '.join(missing)}")
    meta = dict(metadata)
    for key, allowed in (("force_source", FORCE_SOURCES), ("source", SOURCES)):
        if meta[key] not in allowed:
            raise EpisodeBagError(f"episode metadata '{key}' = {meta[key]!r}; expected one of {', '.join(allowed)}")
    if not CONDITION_PATTERN.match(str(meta["condition"])):
        raise EpisodeBagError(f"episode metadata 'condition' = {meta['condition']!r}; expected {CONDITION_FORMS}")
    try:
        meta["payload_grams"] = float(meta["payload_grams"])
    except (TypeError, ValueError):
        raise EpisodeBagError(f"episode metadata 'payload_grams' = {meta['payload_grams']!r} is not a number") from None
    if not math.isfinite(meta["payload_grams"]) or meta["payload_grams"] < 0:
        raise EpisodeBagError(f"episode metadata 'payload_grams' must be >= 0, got {meta['payload_grams']}")
    meta.setdefault("operator", "")
    meta.setdefault("notes", "")
    meta.setdefault("seed", None)
    meta.setdefault("task_instance", task_instance_id(meta["task"], meta["payload_grams"], meta["condition"]))
    for key in STRING_KEYS:
        if key in meta:                    # ``robot`` is optional (recordings without it name no robot)
            meta[key] = str(meta[key])
    if VOID_KEY in meta:
        meta[VOID_KEY] = bool(meta[VOID_KEY])
    if not isinstance(meta.get(FAULTS_KEY, []), list):
        raise EpisodeBagError(f"episode metadata '{FAULTS_KEY}' must be a list, got {meta[FAULTS_KEY]!r}")
    try:
        metadata_to_custom_data(meta)
    except (TypeError, ValueError) as err:
        raise EpisodeBagError(f"episode metadata cannot be stored: {err}") from None
    return meta


def _to_json(value: Any) -> str:
    return json.dumps(value, default=json_default)


def metadata_to_custom_data(metadata: Mapping[str, Any]) -> dict[str, str]:
    """Flatten metadata to rosbag2 ``custom_data`` strings: strings as they are, the rest as JSON."""
    return {key: value if isinstance(value, str) else _to_json(value) for key, value in metadata.items()}


def metadata_from_custom_data(custom: Mapping[str, str]) -> dict[str, Any]:
    """Inverse of :func:`metadata_to_custom_data` (known keys get their type back)."""
    meta: dict[str, Any] = {}
    for key, text in custom.items():
        if key in STRING_KEYS:
            meta[key] = text
            continue
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text
        if key in INT_KEYS and value is not None:
            value = int(value)
        elif key in FLOAT_KEYS:
            value = float(value)
        elif key in BOOL_KEYS:
            value = bool(value)
        meta[key] = value
    return meta


def episode_metadata(path: str | Path, info: Mapping[str, Any]) -> dict[str, Any] | None:
    """Episode metadata of a bag: its ``custom_data``, else its sidecar, else None."""
    custom = info.get("custom_data") or {}
    if custom:
        return metadata_from_custom_data(custom)
    sidecar = Path(path) / SIDECAR_NAME
    if not sidecar.is_file():
        return None
    try:
        meta = json.loads(sidecar.read_text())
    except json.JSONDecodeError as err:
        raise EpisodeBagError(f"{sidecar} is not valid JSON: {err}") from err
    meta.pop("topics", None)
    return meta

