"""Config files given by name or by path: ``--config cpu`` or ``--config ./my_cpu.yaml``.

A package that ships YAML files keeps them beside its code (package data) and resolves a user's
``--config`` value with :func:`resolve_config`: a value that names an existing file is that file;
a bare name (``cpu``, ``cpu.yaml``) is looked up in the package's own folder. The error lists the
names that exist, so a typo says what was meant.
"""

from __future__ import annotations

from pathlib import Path

SUFFIX = ".yaml"


class ConfigFileError(FileNotFoundError):
    """A config value is neither a file nor one of the shipped names."""


def shipped_names(folder: Path) -> list[str]:
    """The config names (file stems) shipped in ``folder``."""
    return sorted(p.stem for p in folder.glob(f"*{SUFFIX}")) if folder.is_dir() else []


def resolve_config(value: str | Path, folder: Path, what: str = "config") -> Path:
    """The file meant by ``value``: an existing path, else ``folder/value[.yaml]``."""
    path = Path(value).expanduser()
    if path.is_file():
        return path
    is_name = path.parent == Path(".")
    if is_name:
        shipped = folder / (path.name if path.suffix == SUFFIX else path.name + SUFFIX)
        if shipped.is_file():
            return shipped
    if not is_name:
        raise ConfigFileError(f"{what} {str(value)!r} not found (no such file)")
    names = ", ".join(shipped_names(folder)) or "none"
    raise ConfigFileError(f"{what} {str(value)!r} not found: no such file and no shipped {what} of that name "
                          f"(shipped: {names})")
