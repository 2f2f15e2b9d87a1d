"""``na-launch``: start (or print) the processes a ROS 2 XML launch file describes, and stop them as
``ros2 launch`` does. The reading and resolving is ``na_bringup.launch_xml``; this module runs the result:
each process in its own process group, SIGINT then SIGTERM then SIGKILL to each group until it is empty.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from na_bringup.launch_xml import LaunchError, ProcessSpec, load_launch
from na_common.ament import package_prefix


# --------------------------------------------------------------------------- running
def start_processes(processes: Sequence[ProcessSpec], env: Mapping[str, str] | None = None,
                    stdout=None, stderr=None) -> list[subprocess.Popen]:
    """Start every process (in order); each in its own process group so it can be signalled alone."""
    started: list[subprocess.Popen] = []
    try:
        for spec in processes:
            process_env = {**os.environ, **(env or {}), **spec.env}
            started.append(subprocess.Popen(spec.command(), env=process_env, cwd=spec.cwd, stdout=stdout,
                                            stderr=stderr, start_new_session=True))
    except Exception:
        stop_processes(started)
        raise
    return started


def group_alive(process: subprocess.Popen) -> bool:
    """Whether the process or anything left in its process group (children it started) still runs; a zombie
    left for its adoptive parent to reap does not count."""
    if process.poll() is None:
        return True
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            state, _parent, group = (entry / "stat").read_text().rsplit(")", 1)[1].split()[:3]
        except (OSError, ValueError):
            continue
        if int(group) == process.pid and state not in ("Z", "X"):
            return True
    return False


def stop_processes(processes: Sequence[subprocess.Popen], timeout: float = 5.0) -> list[int | None]:
    """SIGINT (as ``ros2 launch`` does), then SIGTERM, then SIGKILL to each process group until it is empty;
    returns the exit codes. A group whose first process has exited is signalled on, so no child it left behind
    (e.g. a rig's bus process) outlives the launch."""
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGKILL):
        alive = [p for p in processes if group_alive(p)]
        for process in alive:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
        deadline = time.monotonic() + timeout
        while any(group_alive(p) for p in alive) and time.monotonic() < deadline:
            time.sleep(0.02)
    return [p.poll() for p in processes]


# --------------------------------------------------------------------------- CLI
def _parse_assignments(items: Sequence[str]) -> dict[str, str]:
    values = {}
    for item in items:
        if ":=" not in item:
            raise LaunchError(f"launch arguments are name:=value, got {item!r}")
        key, value = item.split(":=", 1)
        values[key] = value
    return values


def locate_launch_file(words: Sequence[str]) -> tuple[Path, list[str]]:
    """``FILE args...`` or ``PACKAGE FILE args...`` (as ``ros2 launch``) -> the file and the rest."""
    if not words:
        raise LaunchError("give a launch file: PACKAGE FILE (e.g. na_bringup collect.launch.xml) or a path")
    if len(words) >= 2 and ":=" not in words[1] and not Path(words[0]).is_file():
        share = package_prefix(words[0])
        if share is None:
            raise LaunchError(f"package '{words[0]}' not found on AMENT_PREFIX_PATH (source .venv/na_env.sh)")
        path = share / "share" / words[0] / "launch" / words[1]
        if not path.is_file():
            raise LaunchError(f"package '{words[0]}' has no launch file {words[1]} (looked in {path.parent})")
        return path, list(words[2:])
    return Path(words[0]), list(words[1:])


def main(argv: Sequence[str] | None = None) -> int:
    # Ctrl-C (SIGINT) stops the processes even when na-launch was started with SIGINT ignored (a background job
    # of a script inherits it so), as ros2 launch installs its own handler too.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    parser = argparse.ArgumentParser(
        prog="na-launch",
        description="Read a ROS 2 XML launch file and print (default) or run the processes it describes. "
                    "A stand-in for `ros2 launch PACKAGE FILE name:=value ...` where the launch packages are "
                    "absent.")
    parser.add_argument("words", nargs="+", metavar="[PACKAGE] FILE [name:=value ...]",
                        help="a package and one of its launch files (na_bringup collect.launch.xml), or a path "
                             "to a launch file; then launch arguments as name:=value")
    parser.add_argument("-s", "--show-args", action="store_true", help="list the launch arguments and exit")
    parser.add_argument("--run", action="store_true",
                        help="start the processes and wait; Ctrl-C stops them (SIGINT, then SIGTERM/SIGKILL)")
    options = parser.parse_args(argv)
    try:
        path, arguments = locate_launch_file(options.words)
        description = load_launch(path, _parse_assignments(arguments))
    except LaunchError as exc:
        print(f"na-launch: error: {exc}", file=sys.stderr)
        return 2
    if options.show_args:
        for arg in description.arguments.values():
            default = "(required)" if arg.default is None else f"(default: '{arg.default}')"
            print(f"    '{arg.name}':\n        {arg.description}\n        {default}")
        return 0
    for spec in description.processes:
        try:
            print(shlex.join(spec.command()))
        except LaunchError as exc:
            print(f"# {spec.label}: {exc}")
    if not options.run:
        return 0
    try:
        processes = start_processes(description.processes)
    except LaunchError as exc:
        print(f"na-launch: error: {exc}", file=sys.stderr)
        return 2
    print(f"[na-launch] started {len(processes)} processes; Ctrl-C to stop", flush=True)

    def on_sigterm(signum, frame) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the children the same way as Ctrl-C

    signal.signal(signal.SIGTERM, on_sigterm)
    with contextlib.suppress(KeyboardInterrupt):
        supervise(description.processes, processes)
    codes = stop_processes(processes)
    return 0 if all(code in (0, -signal.SIGINT, None) for code in codes) else 1


def supervise(specs: Sequence[ProcessSpec], processes: Sequence[subprocess.Popen], poll_s: float = 0.2) -> None:
    """Wait as ``ros2 launch`` does: report each exit; return when all have exited, or when one marked
    ``on_exit="shutdown"`` exits (the caller then stops the rest)."""
    reported: set[int] = set()
    while len(reported) < len(processes):
        for index, (spec, process) in enumerate(zip(specs, processes, strict=True)):
            if index in reported or process.poll() is None:
                continue
            reported.add(index)
            print(f"[na-launch] {spec.label} exited with code {process.returncode}", file=sys.stderr, flush=True)
            if spec.shutdown_on_exit:
                print(f"[na-launch] {spec.label} is on_exit=shutdown: stopping the rest", file=sys.stderr,
                      flush=True)
                return
        time.sleep(poll_s)


if __name__ == "__main__":
    raise SystemExit(main())
