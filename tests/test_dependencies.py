"""Dependency direction between the packages, checked on the source: imports run from nodes and tools
to cores, never back; no two modules import each other, however indirectly; the training package runs
without ROS; no installed module is too long to read in one sitting.

Only the installed modules (``src/PKG/PKG/``) are walked: tests and the benchmark scripts beside a package
are tools, and may drive a package with another (e.g. the driver benchmark talks to the emulator). The
estimator's benchmarks are the one exception, checked on their own below."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROS_MODULES = ("rclpy", "na_msgs", "rcl_interfaces", "std_msgs", "sensor_msgs", "geometry_msgs",
               "diagnostic_msgs", "visualization_msgs", "std_srvs", "builtin_interfaces", "ament_index_python")


def imports_of(package: str) -> dict[str, set[str]]:
    """Module file -> every module name it imports (also inside functions), for one package's modules."""
    found: dict[str, set[str]] = {}
    for path in (SRC / package / package).rglob("*.py"):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
        found[str(path.relative_to(SRC))] = names
    return found


def offenders(package: str, forbidden: tuple[str, ...]) -> list[str]:
    return sorted(f"{file} imports {name}" for file, names in imports_of(package).items()
                  for name in names if name.split(".")[0] in forbidden)


# Lower layers never import higher ones (package -> packages it must not import).
LAYERS = {
    "na_common": ("na_description", "na_sim", "na_driver", "na_teleop", "na_estimator", "na_training",
                  "na_bringup", "na_policy"),
    "na_description": ("na_common", "na_sim", "na_driver", "na_teleop", "na_estimator", "na_training",
                       "na_bringup", "na_policy"),
    "na_teleop": ("na_sim", "na_training", "na_estimator", "na_driver", "na_bringup", "na_policy"),
    "na_driver": ("na_sim", "na_training", "na_estimator", "na_teleop", "na_bringup", "na_policy"),
    "na_estimator": ("na_sim", "na_training", "na_teleop", "na_driver", "na_bringup", "na_policy"),
    "na_sim": ("na_training", "na_estimator", "na_teleop", "na_driver", "na_bringup", "na_policy"),
    "na_training": ("na_sim", "na_teleop", "na_driver", "na_bringup", "na_policy"),
    "na_bringup": ("na_policy",),
}


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_imports_point_down_the_layers(package: str) -> None:
    assert offenders(package, LAYERS[package]) == []


def test_training_needs_no_ros() -> None:
    """na_training (the training image has no ROS) imports neither rclpy nor any message package."""
    assert offenders("na_training", ROS_MODULES) == []


def test_only_one_common_module_imports_rclpy() -> None:
    users = {file for file, names in imports_of("na_common").items()
             if any(n.split(".")[0] in ROS_MODULES for n in names)}
    assert users <= {"na_common/na_common/ros_node.py"}


def test_the_walker_sees_imports_inside_functions(tmp_path) -> None:
    """The oracle itself: a lazy import inside a function counts (a ROS import cannot hide there)."""
    source = "def f():\n    import rclpy\n    from na_msgs.msg import ArmState\n"
    names = {n.module if isinstance(n, ast.ImportFrom) else n.names[0].name
             for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Import | ast.ImportFrom)}
    assert names == {"rclpy", "na_msgs.msg"}


def test_evaluation_and_comparison_are_peers() -> None:
    """``na-train eval`` and ``na-train compare`` share episodes and metrics from their own modules; neither
    reaches into the other (private helpers borrowed across tools are how copies start)."""
    found = imports_of("na_training")
    assert "na_training.baselines.compare" not in found["na_training/na_training/evaluate.py"]
    assert "na_training.evaluate" not in found["na_training/na_training/baselines/compare.py"]


# ---- module size ----------------------------------------------------------------------------------------
MAX_MODULE_LINES = 600
NOT_SPLIT = "Not split:"      # a module docstring paragraph starting so says why a longer module stays whole


def installed_modules(src: Path = SRC) -> Iterator[Path]:
    """Every installed Python module: ``src/PKG/PKG/**/*.py``."""
    for package in sorted(p for p in src.iterdir() if (p / p.name).is_dir()):
        yield from sorted((package / package.name).rglob("*.py"))


def test_no_installed_module_is_over_600_lines() -> None:
    too_long = []
    for path in installed_modules():
        text = path.read_text()
        lines = len(text.splitlines())
        docstring = ast.get_docstring(ast.parse(text)) or ""
        if lines > MAX_MODULE_LINES and not any(par.startswith(NOT_SPLIT) for par in docstring.split("\n\n")):
            too_long.append(f"{path.relative_to(SRC)}: {lines} lines")
    assert too_long == [], f"split these by job, or state why not in a '{NOT_SPLIT}' docstring paragraph"


# ---- import circles -------------------------------------------------------------------------------------
def module_name(path: Path, src: Path) -> str:
    """``src/PKG/PKG/a/b.py`` -> ``PKG.a.b`` (a package's ``__init__.py`` is the package)."""
    parts = list(path.relative_to(src).with_suffix("").parts[1:])
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Installed module -> the installed modules it imports, at module level, inside functions or under
    ``TYPE_CHECKING`` alike. ``from P import n`` names module ``P.n`` when that is a module, else ``P``; the
    parent packages a submodule import runs first are not counted (a package ``__init__`` that re-exports its
    submodules is no circle as long as no submodule imports from that ``__init__``)."""
    paths = {module_name(path, src): path for path in installed_modules(src)}
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        found: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:        # relative: from the module's own package upwards
                    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = ".".join([*package[:len(package) - node.level + 1], *filter(None, [node.module])])
                found |= {f"{base}.{alias.name}" if f"{base}.{alias.name}" in paths else base
                          for alias in node.names}
        graph[name] = {module for module in found if module in paths and module != name}
    return graph


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted; the groups sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(circles)


def test_no_import_circle() -> None:
    """Shared pieces live below every module that uses them; a lazy import does not hide a circle."""
    assert import_circles(import_graph()) == []


def test_the_circle_finder_sees_a_circle_through_a_function(tmp_path: Path) -> None:
    """The oracle itself, on a made-up package: a -> b at module level, b -> a inside a function; c imports
    both (relatively) and is in no circle."""
    package = tmp_path / "pkg" / "pkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import g\n")
    (package / "b.py").write_text("def g():\n    from pkg import a\n    return a\n")
    (package / "c.py").write_text("from . import a, b\n")
    graph = import_graph(tmp_path)
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": {"pkg.a", "pkg.b"}}
    assert import_circles(graph) == [["pkg.a", "pkg.b"]]


# ---- the estimator and training -------------------------------------------------------------------------
def training_imports_in(folder: Path) -> list[str]:
    return sorted(f"{path.relative_to(SRC)}:{node.lineno}" for path in folder.rglob("*.py")
                  for node in ast.walk(ast.parse(path.read_text()))
                  if isinstance(node, ast.Import | ast.ImportFrom)
                  and any(name.split(".")[0] == "na_training"
                          for name in ([a.name for a in node.names] if isinstance(node, ast.Import)
                                       else [node.module or ""])))


@pytest.mark.parametrize("folder", ["na_estimator", "test", "benchmarks"])
def test_the_estimator_imports_nothing_from_training(folder: str) -> None:
    """The estimator package (the node, its tests, its benchmarks) does not reach up into training."""
    assert training_imports_in(SRC / "na_estimator" / folder) == []
