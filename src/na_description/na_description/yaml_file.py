"""Reading a YAML configuration file whose top level is a mapping, with errors that name the file.

Shared by the robot spec, the rig config, the converter config and the training configs (every
package depends on na_description)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


def load_yaml_mapping(path: str | Path, error: type[Exception], what: str = "config file") -> dict[str, Any]:
    """The mapping in ``path``; raises ``error`` for a missing file, invalid YAML or another top level."""
    path = Path(path)
    if not path.is_file():
        raise error(f"{what} not found: {path}")
    try:
        raw = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise error(f"{path}: not valid YAML: {exc}") from exc
    if not isinstance(raw, dict):
        raise error(f"{path}: the top level must be a mapping, not {type(raw).__name__}")
    return raw
