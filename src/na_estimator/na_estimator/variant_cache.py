"""The estimator's remembered inference-variant choices, one per (CPU, ONNX Runtime, model package, threads).

A JSON file in the user cache directory (``$XDG_CACHE_HOME/neuralactuator/inference_variants.json``, default
``~/.cache/neuralactuator/``). An entry is only found again by the same key: another CPU model or ISA flags,
another ONNX Runtime, another model file (its sha256, which covers the sibling files it lists), another thread
count or execution provider misses and the variants are timed again. Delete the file to time again anyway.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

CACHE_FILE = "inference_variants.json"
MAX_ENTRIES = 64               # oldest entries are dropped beyond this (one per model and machine a user ran)


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "neuralactuator"


@dataclass(frozen=True)
class CacheKey:
    cpu: str                   # CPU model name
    isa: str                   # its relevant ISA flags (na_common.machine)
    runtime: str               # onnxruntime version
    model_sha256: str          # the package's main file
    threads: int               # intra-op threads
    provider: str              # execution provider in use

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()[:32]


@dataclass(frozen=True)
class CachedChoice:
    variant: str
    timings_ms: dict[str, float]   # batch-1 p50 of each variant when it was chosen
    measured: str                  # when (UTC, ISO 8601)


class VariantCache:
    """Choices by key, in one JSON file; reads and writes never raise for I/O (a cache that cannot be used is a
    miss, and :meth:`put` says why it could not store)."""

    def __init__(self, directory: str | Path | None = None) -> None:
        self.path = Path(directory or default_cache_dir()) / CACHE_FILE

    def _entries(self) -> dict[str, dict]:
        try:
            entries = json.loads(self.path.read_text())
        except (OSError, json.JSONDecodeError):
            return {}
        return entries if isinstance(entries, dict) else {}

    def get(self, key: CacheKey) -> CachedChoice | None:
        entry = self._entries().get(key.digest())
        if not isinstance(entry, dict) or entry.get("key") != asdict(key):
            return None
        try:
            return CachedChoice(str(entry["variant"]), {str(k): float(v) for k, v in entry["timings_ms"].items()},
                                str(entry["measured"]))
        except (KeyError, TypeError, ValueError, AttributeError):
            return None

    def put(self, key: CacheKey, variant: str, timings_ms: dict[str, float]) -> str | None:
        """Store a choice (atomic replace); None, or why it could not be stored."""
        entries = self._entries()
        entries.pop(key.digest(), None)
        entries[key.digest()] = {"key": asdict(key), "variant": variant,
                                 "timings_ms": {k: round(v, 4) for k, v in timings_ms.items()},
                                 "measured": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        kept = dict(list(entries.items())[-MAX_ENTRIES:])
        written = ""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile("w", dir=self.path.parent, prefix=".variants_", delete=False) as tmp:
                written = tmp.name
                json.dump(kept, tmp, indent=1)
            os.replace(written, self.path)
        except OSError as exc:
            if written:
                with contextlib.suppress(OSError):
                    os.unlink(written)
            return f"cannot write {self.path}: {exc}"
        return None
