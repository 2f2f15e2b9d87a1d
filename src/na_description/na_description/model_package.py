"""The model package ``na-train export`` writes: one main file and the other accepted inference variants beside it.

``model.onnx`` is a complete model (the variant that was fastest on the exporting machine, metadata
``inference_variant``) and loads on its own as before. Its metadata ``variant_files`` (JSON) names every other
variant that passed the exporter's accuracy checks: ``{"int8-dynamic": {"file": "model.int8-dynamic.onnx",
"sha256": "..."}, ...}``, files in the same directory. Each of those is a complete model too (its own
``inference_variant``, ``variant_files`` ``{}``). The estimator chooses among them on the machine it runs on
(na_estimator.variant_choice).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

VARIANT_FILES_KEY = "variant_files"
VARIANT_CHECKS_KEY = "variant_checks"
# In each int8 variant's record of ``variant_checks``: the bits of its int8 weights. Exports before 7-bit weights
# did not record it; theirs are 8.
INT8_WEIGHT_BITS_KEY = "int8_weight_bits"
LEGACY_INT8_WEIGHT_BITS = 8
DEFAULT_VARIANT = "fp32"        # a file without ``inference_variant`` (exported before variants existed)


def sibling_name(main: str | Path, variant: str) -> str:
    """The file name of ``variant`` beside the main file ``main``: ``model.onnx`` -> ``model.int8-dynamic.onnx``."""
    return f"{Path(main).stem}.{variant}.onnx"


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class PackageError(ValueError):
    """A variant that is not in the package, or whose file is missing or not the one exported (one line)."""


@dataclass(frozen=True)
class ModelPackage:
    main: Path
    default: str                                   # the main file's variant
    listed: dict[str, dict[str, str]] = field(default_factory=dict)   # the other variants: {"file", "sha256"}

    @property
    def names(self) -> list[str]:
        """Every variant of the package, the main file's first."""
        return [self.default, *self.listed]

    def path(self, variant: str) -> Path:
        """The checked file of ``variant``; PackageError (one line) when it is not in the package, missing on disk
        or not the file that was exported (another sha256)."""
        if variant == self.default:
            return self.main
        if variant not in self.listed:
            raise PackageError(f"inference variant '{variant}' is not in {self.main.name} "
                               f"(it has {', '.join(self.names)})")
        entry = self.listed[variant]
        path = self.main.parent / entry["file"]
        if not path.is_file():
            raise PackageError(f"inference variant '{variant}' of {self.main.name} is missing: no file {path}")
        if entry.get("sha256") and file_sha256(path) != entry["sha256"]:
            raise PackageError(f"inference variant '{variant}': {path} is not the file exported with "
                               f"{self.main.name} (sha256 differs)")
        return path


def read_package(main: str | Path, metadata: Mapping[str, str]) -> ModelPackage:
    """The package described by the main file's ``metadata`` (a file without ``variant_files`` is a package of one)."""
    try:
        listed = json.loads(metadata.get(VARIANT_FILES_KEY) or "{}")
    except json.JSONDecodeError as exc:
        raise PackageError(f"{Path(main).name}: metadata '{VARIANT_FILES_KEY}' is not valid JSON: {exc}") from exc
    if not isinstance(listed, dict) or not all(isinstance(v, dict) and "file" in v for v in listed.values()):
        raise PackageError(f"{Path(main).name}: metadata '{VARIANT_FILES_KEY}' must map variant names to "
                           "{\"file\": ..., \"sha256\": ...}")
    default = metadata.get("inference_variant", DEFAULT_VARIANT)
    listed.pop(default, None)
    return ModelPackage(Path(main), default, listed)


def int8_weight_bits(metadata: Mapping[str, str]) -> dict[str, int]:
    """The bits of the int8 weights of each int8 variant that the main file's ``variant_checks`` records
    (:data:`LEGACY_INT8_WEIGHT_BITS` where the exporter did not write them); empty without a readable record."""
    try:
        records = json.loads(metadata.get(VARIANT_CHECKS_KEY) or "[]")
    except json.JSONDecodeError:
        return {}
    if not isinstance(records, list):
        return {}
    return {str(r["name"]): int(r.get(INT8_WEIGHT_BITS_KEY, LEGACY_INT8_WEIGHT_BITS)) for r in records
            if isinstance(r, dict) and str(r.get("name", "")).startswith("int8")}
