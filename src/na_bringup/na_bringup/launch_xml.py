"""ROS 2 launch XML reader and process resolver (a subset of the ``ros2 launch`` XML front end);
``na_bringup.launch_run`` starts what it resolves (``na-launch``).

``launch``/``launch_ros`` have no wheels, so this module reads the suite's launch files and
turns them into the processes they describe: the executable path from the ament index
(``<prefix>/lib/<pkg>/<exec>``) and the ``--ros-args`` that ``launch_ros`` would pass
(``-r __node:=``, ``-r __ns:=``, ``--params-file``, ``-p``, ``-r from:=to``). Tests use it to
validate the launch files and the system tests and demos use it to start the graph.

Supported: ``<launch>``, ``<arg name default description>``, ``<let>``, ``<include file>`` with
``<arg name value>``, ``<group>`` (scoped) with ``<push-ros-namespace>``, ``<node pkg exec name
namespace args output>`` with ``<param name value>``, ``<param from>``, ``<remap from to>``,
``<env>``, ``<executable cmd name cwd output>``, ``<set-env>``, the ``if``/``unless`` attributes
and the substitutions ``$(var)``, ``$(env NAME [default])``, ``$(find-pkg-share)``,
``$(find-pkg-prefix)``, ``$(dirname)``, ``$(not)``, ``$(and)``, ``$(or)``, ``$(equals)``.
Anything else is an error that names the file and element (never silently ignored).
"""

from __future__ import annotations

import os
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from na_common.ament import find_executable, package_prefix

TRUE_VALUES = ("true", "1")
FALSE_VALUES = ("false", "0")


class LaunchError(ValueError):
    """A launch file is invalid, an argument is missing, or a package/executable cannot be found."""


@dataclass(frozen=True)
class LaunchArg:
    name: str
    default: str | None
    description: str
    source: Path


@dataclass
class ProcessSpec:
    """One process a launch file starts: a ROS node (``package`` set) or a plain executable."""

    label: str                               # node name or executable name, for messages
    source: Path                             # launch file that declares it
    package: str | None = None
    executable: str | None = None
    executable_path: Path | None = None      # None when the executable is not installed
    node_name: str | None = None
    namespace: str = "/"
    arguments: list[str] = field(default_factory=list)
    params_files: list[Path] = field(default_factory=list)
    parameters: dict[str, str] = field(default_factory=dict)
    remappings: list[tuple[str, str]] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    cwd: str | None = None
    command_override: list[str] | None = None   # <executable cmd=...>
    shutdown_on_exit: bool = False           # on_exit="shutdown": its exit ends the whole launch

    @property
    def is_node(self) -> bool:
        return self.package is not None

    @property
    def fully_qualified_name(self) -> str | None:
        if self.node_name is None:
            return None
        return join_namespace(self.namespace, self.node_name)

    def ros_arguments(self) -> list[str]:
        """The ``--ros-args`` part as ``launch_ros`` builds it."""
        out: list[str] = []
        if self.node_name:
            out += ["-r", f"__node:={self.node_name}"]
        if self.namespace != "/":
            out += ["-r", f"__ns:={self.namespace}"]
        for path in self.params_files:
            out += ["--params-file", str(path)]
        for key, value in self.parameters.items():
            out += ["-p", f"{key}:={value}"]
        for source, target in self.remappings:
            out += ["-r", f"{source}:={target}"]
        return ["--ros-args", *out] if out else []

    def command(self) -> list[str]:
        """The full argv; raises :class:`LaunchError` when the executable is missing."""
        if self.command_override is not None:
            return list(self.command_override)
        if self.executable_path is None:
            raise LaunchError(f"{self.source}: executable '{self.executable}' of package '{self.package}' "
                              "is not installed (run scripts/bootstrap.sh?)")
        return [str(self.executable_path), *self.arguments, *self.ros_arguments()]

    def resolve_name(self, name: str) -> str:
        """Resolve a topic/service name as this node sees it (namespace, ``~``, then remaps)."""
        return resolve_name(name, self.namespace, self.node_name or "", self.remappings)


@dataclass
class LaunchDescription:
    """Everything one launch file (with its includes) resolves to for a set of arguments."""

    source: Path
    arguments: dict[str, LaunchArg]          # every <arg> declared, includes too (first declaration wins)
    processes: list[ProcessSpec]
    included_files: list[Path]


# --------------------------------------------------------------------------- names
def join_namespace(namespace: str, name: str) -> str:
    namespace = "/" + namespace.strip("/")
    return (namespace.rstrip("/") + "/" + name.strip("/")) if name else namespace


def expand_name(name: str, namespace: str, node_name: str) -> str:
    """ROS 2 name expansion: absolute stays, ``~`` is the node's private namespace, else relative to ns."""
    namespace = "/" + namespace.strip("/")
    if name.startswith("/"):
        return name
    if name == "~" or name.startswith("~/"):
        return join_namespace(join_namespace(namespace, node_name), name[2:])
    return join_namespace(namespace, name)


def resolve_name(name: str, namespace: str, node_name: str, remappings: Sequence[tuple[str, str]]) -> str:
    """Expand ``name`` and apply the first matching remap rule (both sides expanded, as rcl does)."""
    expanded = expand_name(name, namespace, node_name)
    for source, target in remappings:
        if source.startswith("__"):
            continue
        if expand_name(source, namespace, node_name) == expanded:
            return expand_name(target, namespace, node_name)
    return expanded




# --------------------------------------------------------------------------- substitutions
def _split_call(text: str, start: int) -> tuple[str, int]:
    """Body of ``$(...)`` starting at ``text[start] == '$'``; returns (body, index after ')')."""
    depth, i = 0, start + 1
    while i < len(text):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return text[start + 2:i], i + 1
        i += 1
    raise LaunchError(f"unbalanced substitution in {text!r}")


def _words(body: str) -> list[str]:
    """Split a substitution body into words; nested $(...) and quotes stay whole."""
    words, current, i, quote = [], "", 0, None
    while i < len(body):
        c = body[i]
        if quote:
            if c == quote:
                quote = None
            else:
                current += c
        elif c in "'\"":
            quote = c
        elif c == "$" and body[i + 1:i + 2] == "(":
            _, end = _split_call(body, i)
            current += body[i:end]
            i = end
            continue
        elif c.isspace():
            if current:
                words.append(current)
            current = ""
        else:
            current += c
        i += 1
    if current:
        words.append(current)
    return words


class _Scope:
    """Launch configurations (args and lets) plus the pushed ROS namespace and extra env."""

    def __init__(self, configs: dict[str, str], namespace: str = "/", env: dict[str, str] | None = None,
                 current_file: Path | None = None) -> None:
        self.configs = configs
        self.namespace = namespace
        self.env = env or {}
        self.current_file = current_file

    def child(self, current_file: Path | None = None) -> _Scope:
        return _Scope(dict(self.configs), self.namespace, dict(self.env), current_file or self.current_file)


def substitute(text: str, scope: _Scope) -> str:
    out, i = "", 0
    while i < len(text):
        if text.startswith("$(", i):
            body, end = _split_call(text, i)
            out += _evaluate(body, scope)
            i = end
        else:
            out += text[i]
            i += 1
    return out


def _bool(value: str, what: str) -> bool:
    low = value.strip().lower()
    if low in TRUE_VALUES:
        return True
    if low in FALSE_VALUES:
        return False
    raise LaunchError(f"{what}: expected true/false (or 1/0), got {value!r}")


def _evaluate(body: str, scope: _Scope) -> str:
    words = _words(body)
    if not words:
        raise LaunchError("empty substitution $()")
    kind, args = words[0], [substitute(w, scope) for w in words[1:]]
    if kind == "var":
        if len(args) != 1:
            raise LaunchError(f"$(var) takes one name, got {args}")
        if args[0] not in scope.configs:
            raise LaunchError(f"launch argument or variable '{args[0]}' is not set (declare it with <arg>)")
        return scope.configs[args[0]]
    if kind == "env":
        if not 1 <= len(args) <= 2:
            raise LaunchError(f"$(env NAME [default]) takes one or two words, got {args}")
        if args[0] in scope.env:
            return scope.env[args[0]]
        if args[0] in os.environ:
            return os.environ[args[0]]
        if len(args) == 2:
            return args[1]
        raise LaunchError(f"environment variable '{args[0]}' is not set and $(env) has no default")
    if kind in ("find-pkg-share", "find-pkg-prefix"):
        if len(args) != 1:
            raise LaunchError(f"$({kind}) takes one package name, got {args}")
        prefix = package_prefix(args[0])
        if prefix is None:
            raise LaunchError(f"package '{args[0]}' not found on AMENT_PREFIX_PATH")
        return str(prefix / "share" / args[0]) if kind == "find-pkg-share" else str(prefix)
    if kind == "dirname":
        if scope.current_file is None:
            raise LaunchError("$(dirname) outside a launch file")
        return str(scope.current_file.parent)
    if kind == "not":
        return "false" if _bool(args[0], "$(not)") else "true"
    if kind in ("and", "or"):
        values = [_bool(a, f"$({kind})") for a in args]
        return "true" if (all(values) if kind == "and" else any(values)) else "false"
    if kind == "equals":
        if len(args) != 2:
            raise LaunchError(f"$(equals) takes two values, got {args}")
        return "true" if args[0] == args[1] else "false"
    raise LaunchError(f"unsupported substitution $({kind} ...)")


# --------------------------------------------------------------------------- parser
class _Parser:
    def __init__(self) -> None:
        self.arguments: dict[str, LaunchArg] = {}
        self.processes: list[ProcessSpec] = []
        self.included: list[Path] = []

    def error(self, scope: _Scope, element: ET.Element, message: str) -> LaunchError:
        return LaunchError(f"{scope.current_file}: <{element.tag}>: {message}")

    def attr(self, scope: _Scope, element: ET.Element, name: str, required: bool = False) -> str | None:
        raw = element.get(name)
        if raw is None:
            if required:
                raise self.error(scope, element, f"missing attribute '{name}'")
            return None
        try:
            return substitute(raw, scope)
        except LaunchError as exc:
            raise self.error(scope, element, str(exc)) from exc

    def active(self, scope: _Scope, element: ET.Element) -> bool:
        condition_if, condition_unless = self.attr(scope, element, "if"), self.attr(scope, element, "unless")
        try:
            if condition_if is not None and not _bool(condition_if, "if"):
                return False
            return not (condition_unless is not None and _bool(condition_unless, "unless"))
        except LaunchError as exc:
            raise self.error(scope, element, str(exc)) from exc

    def parse_file(self, path: Path, scope: _Scope) -> None:
        path = path.resolve()
        if not path.is_file():
            raise LaunchError(f"launch file not found: {path}")
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as exc:
            raise LaunchError(f"{path}: not well-formed XML: {exc}") from exc
        if root.tag != "launch":
            raise LaunchError(f"{path}: root element must be <launch>, got <{root.tag}>")
        self.included.append(path)
        file_scope = scope.child(current_file=path)
        self.parse_children(root, file_scope)

    def parse_children(self, parent: ET.Element, scope: _Scope) -> None:
        for element in parent:
            if not isinstance(element.tag, str):        # comments
                continue
            tag = element.tag.replace("_", "-")
            if not self.active(scope, element):
                continue
            handler = getattr(self, "on_" + tag.replace("-", "_"), None)
            if handler is None:
                raise self.error(scope, element, "unsupported element")
            handler(element, scope)

    # ----------------------------------------------------------------- elements
    def on_arg(self, element: ET.Element, scope: _Scope) -> None:
        name = self.attr(scope, element, "name", required=True)
        default = self.attr(scope, element, "default")
        description = element.get("description", "")
        self.arguments.setdefault(name, LaunchArg(name, default, description, scope.current_file))
        if name in scope.configs:      # given on the command line or by the including file
            return
        if default is not None:
            scope.configs[name] = default
        else:
            raise self.error(scope, element, f"required argument '{name}' not given ({description})")

    def on_let(self, element: ET.Element, scope: _Scope) -> None:
        scope.configs[self.attr(scope, element, "name", required=True)] = self.attr(
            scope, element, "value", required=True)

    def on_set_env(self, element: ET.Element, scope: _Scope) -> None:
        scope.env[self.attr(scope, element, "name", required=True)] = self.attr(scope, element, "value",
                                                                                required=True)

    def on_push_ros_namespace(self, element: ET.Element, scope: _Scope) -> None:
        ns = self.attr(scope, element, "namespace", required=True)
        scope.namespace = ns if ns.startswith("/") else join_namespace(scope.namespace, ns)

    def on_group(self, element: ET.Element, scope: _Scope) -> None:
        scoped = _bool(self.attr(scope, element, "scoped") or "true", "scoped")
        inner = scope.child() if scoped else scope
        ns = self.attr(scope, element, "ns")
        if ns:
            inner.namespace = ns if ns.startswith("/") else join_namespace(inner.namespace, ns)
        self.parse_children(element, inner)

    def on_include(self, element: ET.Element, scope: _Scope) -> None:
        file_attr = self.attr(scope, element, "file", required=True)
        path = Path(file_attr)
        if not path.is_absolute():
            path = scope.current_file.parent / path
        inner = scope.child()
        for child in element:
            if not isinstance(child.tag, str):
                continue
            if child.tag != "arg":
                raise self.error(scope, child, "only <arg name value> is allowed inside <include>")
            inner.configs[self.attr(scope, child, "name", required=True)] = self.attr(
                scope, child, "value", required=True)
        self.parse_file(path, inner)

    def on_node(self, element: ET.Element, scope: _Scope) -> None:
        package = self.attr(scope, element, "pkg", required=True)
        executable = self.attr(scope, element, "exec", required=True)
        name = self.attr(scope, element, "name")
        ns = self.attr(scope, element, "namespace") or ""
        namespace = ns if ns.startswith("/") else join_namespace(scope.namespace, ns)
        process = ProcessSpec(
            label=join_namespace(namespace, name or executable), source=scope.current_file, package=package,
            executable=executable, executable_path=find_executable(package, executable), node_name=name,
            namespace=namespace, shutdown_on_exit=self._shutdown_on_exit(element, scope),
            arguments=shlex.split(self.attr(scope, element, "args") or ""), env=dict(scope.env))
        for child in element:
            if not isinstance(child.tag, str):
                continue
            if child.tag == "param":
                self._node_param(child, scope, process)
            elif child.tag == "remap":
                process.remappings.append((self.attr(scope, child, "from", required=True),
                                           self.attr(scope, child, "to", required=True)))
            elif child.tag == "env":
                process.env[self.attr(scope, child, "name", required=True)] = self.attr(
                    scope, child, "value", required=True)
            else:
                raise self.error(scope, child, "unsupported element inside <node>")
        self.processes.append(process)

    def _node_param(self, child: ET.Element, scope: _Scope, process: ProcessSpec) -> None:
        source = self.attr(scope, child, "from")
        if source is not None:
            path = Path(source)
            if not path.is_absolute():
                path = scope.current_file.parent / path
            process.params_files.append(path.resolve())
            return
        process.parameters[self.attr(scope, child, "name", required=True)] = self.attr(
            scope, child, "value", required=True)

    def on_executable(self, element: ET.Element, scope: _Scope) -> None:
        cmd = shlex.split(self.attr(scope, element, "cmd", required=True))
        if not cmd:
            raise self.error(scope, element, "empty cmd")
        env = dict(scope.env)
        for child in element:
            if isinstance(child.tag, str):
                if child.tag != "env":
                    raise self.error(scope, child, "unsupported element inside <executable>")
                env[self.attr(scope, child, "name", required=True)] = self.attr(scope, child, "value",
                                                                                required=True)
        self.processes.append(ProcessSpec(
            label=self.attr(scope, element, "name") or Path(cmd[0]).name, source=scope.current_file,
            command_override=cmd, env=env, cwd=self.attr(scope, element, "cwd"),
            shutdown_on_exit=self._shutdown_on_exit(element, scope)))

    def _shutdown_on_exit(self, element: ET.Element, scope: _Scope) -> bool:
        """``on_exit="shutdown"`` (as in ros2 launch); without it a process may exit alone."""
        value = self.attr(scope, element, "on_exit")
        if value not in (None, "shutdown"):
            raise self.error(scope, element, f"on_exit='{value}' is not supported (only 'shutdown')")
        return value == "shutdown"


def load_launch(path: str | Path, arguments: Mapping[str, str] | None = None) -> LaunchDescription:
    """Parse ``path`` with ``name:=value`` style ``arguments`` and resolve its processes."""
    parser = _Parser()
    path = Path(path).resolve()
    # Command-line arguments are launch configurations visible everywhere, as in `ros2 launch`.
    parser.parse_file(path, _Scope(dict(arguments or {})))
    unknown = sorted(set(arguments or {}) - set(parser.arguments))
    if unknown:
        raise LaunchError(f"{path}: unknown launch argument(s) {unknown}; declared: {sorted(parser.arguments)}")
    return LaunchDescription(path, parser.arguments, parser.processes, parser.included)
