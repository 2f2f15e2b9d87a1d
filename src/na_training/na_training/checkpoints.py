"""Orbax checkpoint reading for a run directory: a restore that refuses a checkpoint of another model config from
its saved shapes, and a one-line error, never a hang, for a damaged one."""

from __future__ import annotations

import contextlib
import logging
import threading
from pathlib import Path
from typing import Any

import jax
import orbax.checkpoint as ocp


def _path_name(path: tuple[Any, ...]) -> str:
    """``params/blocks/0/kernel/value``: one spelling for the key paths of Orbax metadata and of a live tree."""
    parts = []
    for key in path:
        for field in ("key", "idx", "name"):
            if hasattr(key, field):
                parts.append(str(getattr(key, field)))
                break
        else:
            parts.append(str(key))
    return "/".join(parts)


def shape_mismatch(directory: str | Path, step: int, abstract: Any) -> str | None:
    """The first array whose saved shape differs from ``abstract``'s, said in a few words; None when the saved
    model arrays all fit (or the checkpoint's metadata cannot tell, which the restore itself then reports).

    Checking the shapes first keeps a checkpoint of another model config away from Orbax's restore, whose
    failure leaves background work behind that once hung the process at exit."""
    try:
        with ocp.CheckpointManager(Path(directory), item_handlers=ocp.StandardCheckpointHandler()) as reader:
            metadata = reader.item_metadata(step)
    except Exception:            # unreadable metadata: the restore names the damage
        return None
    if metadata is None:
        return None
    saved = {_path_name(path): tuple(getattr(leaf, "shape", ()) or ())
             for path, leaf in jax.tree_util.tree_leaves_with_path(metadata)}
    wanted = {_path_name(path): tuple(leaf.shape) for path, leaf in jax.tree_util.tree_leaves_with_path(abstract)}
    params = sorted(name for name in wanted if name.startswith("params/"))
    if not any(name in saved for name in params):      # the two trees spell their keys differently: the restore decides
        return None
    for name in params:
        if name not in saved:
            return f"the checkpoint has no array {name}"
        if saved[name] != wanted[name]:
            return f"{name} is {saved[name]} in the checkpoint, {wanted[name]} in this config"
    extra = sorted(name for name in saved if name.startswith("params/") and name not in wanted)
    return f"the checkpoint has an array {extra[0]} that this config does not" if extra else None


def close_briefly(manager: ocp.CheckpointManager, timeout_s: float = 5.0) -> None:
    """Close a manager whose restore failed, giving up after ``timeout_s``: its background work may be stuck on
    the failure, and an error must not turn into a hang."""
    def close() -> None:
        with contextlib.suppress(Exception):
            manager.close()

    closer = threading.Thread(target=close, daemon=True, name="orbax-close")
    closer.start()
    closer.join(timeout_s)


def restore_checkpoint(manager: ocp.CheckpointManager, step: int, abstract: Any, run_dir: str | Path | None) -> Any:
    """Orbax restore of ``step`` into ``abstract`` (shapes, dtypes, target shardings); a one-line
    ``ValueError`` for a damaged checkpoint or one of another model config."""
    # A failing restore also makes Orbax's internal event loop log the same error with a page of TensorStore
    # details ("unhandled exception during asyncio.run() shutdown"), and its background work, left running, once
    # printed "Event loop is closed" tracebacks during interpreter shutdown after the error line: those loggers
    # are quiet here, and the callers close the manager with ``close_briefly``.
    mismatch = shape_mismatch(manager.directory, step, abstract)
    if mismatch:
        raise ValueError(f"{run_dir}: checkpoint {step} cannot be restored into this model ({mismatch}); "
                         "is it from another model config?")
    quiet = [logging.getLogger(name) for name in ("asyncio", "concurrent.futures")]
    levels = [log.level for log in quiet]
    for log in quiet:
        log.setLevel(logging.CRITICAL)
    try:
        return manager.restore(step, args=ocp.args.StandardRestore(abstract))
    except Exception as err:      # orbax/tensorstore raise many types for a damaged or foreign checkpoint
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        raise ValueError(f"{run_dir}: checkpoint {step} cannot be restored ({type(err).__name__}: "
                         f"{first_line}); is it damaged, or from another model config?") from None
    finally:
        for log, level in zip(quiet, levels, strict=True):
            log.setLevel(level)
