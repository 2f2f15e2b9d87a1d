"""The launch XML reader on small synthetic launch files: args, substitutions, includes, groups,
conditions, node resolution (ros-args) and ROS name resolution with remaps; and na-launch running what it
resolves (start, supervise, stop)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from na_bringup.launch_run import main, start_processes, stop_processes, supervise
from na_bringup.launch_xml import LaunchError, expand_name, load_launch, resolve_name
from na_common.ament import find_executable


def write(path: Path, text: str) -> Path:
    path.write_text(f'<?xml version="1.0"?>\n{text}\n')
    return path


def test_args_defaults_overrides_and_required(tmp_path: Path) -> None:
    f = write(tmp_path / "a.launch.xml", """<launch>
      <arg name="mode" default="fast" description="speed"/>
      <arg name="needed" description="a required one"/>
      <let name="combined" value="$(var mode)-$(var needed)"/>
      <executable cmd="echo $(var combined)" name="show"/>
    </launch>""")
    with pytest.raises(LaunchError, match="required argument 'needed'"):
        load_launch(f)
    description = load_launch(f, {"needed": "x"})
    assert description.processes[0].command() == ["echo", "fast-x"]
    assert load_launch(f, {"needed": "x", "mode": "slow"}).processes[0].command() == ["echo", "slow-x"]
    assert description.arguments["mode"].description == "speed"
    with pytest.raises(LaunchError, match="unknown launch argument"):
        load_launch(f, {"needed": "x", "typo": "1"})


def test_substitutions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NA_TEST_VALUE", "from-env")
    f = write(tmp_path / "s.launch.xml", """<launch>
      <arg name="flag" default="true"/>
      <executable name="e" cmd="x $(env NA_TEST_VALUE) $(env NA_TEST_MISSING fallback) $(dirname)
         $(find-pkg-share na_teleop) $(not $(var flag)) $(and $(var flag) 1) $(or false 0) $(equals a a)"/>
    </launch>""")
    cmd = load_launch(f).processes[0].command()
    assert cmd[1:4] == ["from-env", "fallback", str(tmp_path.resolve())]
    assert cmd[4].endswith("share/na_teleop") and Path(cmd[4]).is_dir()
    assert cmd[5:] == ["false", "true", "false", "true"]
    bad = write(tmp_path / "b.launch.xml", '<launch><executable cmd="$(find-pkg-share no_such_pkg)"/></launch>')
    with pytest.raises(LaunchError, match="no_such_pkg"):
        load_launch(bad)
    unknown = write(tmp_path / "u.launch.xml", '<launch><executable cmd="$(command ls)"/></launch>')
    with pytest.raises(LaunchError, match="unsupported substitution"):
        load_launch(unknown)


def test_conditions_groups_and_namespaces(tmp_path: Path) -> None:
    f = write(tmp_path / "g.launch.xml", """<launch>
      <arg name="sim" default="false"/>
      <node pkg="na_teleop" exec="teleop" name="hw" if="$(var sim)"/>
      <node pkg="na_teleop" exec="teleop" name="real" unless="$(var sim)"/>
      <group>
        <push-ros-namespace namespace="outer"/>
        <let name="scoped" value="inside"/>
        <node pkg="na_teleop" exec="teleop" name="a" namespace="inner"/>
        <node pkg="na_teleop" exec="teleop" name="b" namespace="/absolute"/>
      </group>
      <node pkg="na_teleop" exec="teleop" name="c"/>
      <let name="check" value="$(var scoped)" if="false"/>
    </launch>""")
    names = [p.fully_qualified_name for p in load_launch(f).processes]
    assert names == ["/real", "/outer/inner/a", "/absolute/b", "/c"]
    assert load_launch(f, {"sim": "true"}).processes[0].fully_qualified_name == "/hw"
    with pytest.raises(LaunchError, match="true/false"):
        load_launch(f, {"sim": "maybe"})
    leak = write(tmp_path / "leak.launch.xml", """<launch>
      <group><let name="scoped" value="inside"/></group>
      <executable cmd="echo $(var scoped)"/>
    </launch>""")
    with pytest.raises(LaunchError, match="'scoped' is not set"):
        load_launch(leak)


def test_include_passes_args_and_scopes_them(tmp_path: Path) -> None:
    write(tmp_path / "child.launch.xml", """<launch>
      <arg name="who" default="child-default" description="d"/>
      <executable cmd="echo $(var who) $(var top)" name="child"/>
    </launch>""")
    parent = write(tmp_path / "parent.launch.xml", """<launch>
      <arg name="top" default="T"/>
      <include file="$(dirname)/child.launch.xml"><arg name="who" value="given"/></include>
      <include file="$(dirname)/child.launch.xml"/>
      <executable cmd="echo $(var top)" name="parent"/>
    </launch>""")
    description = load_launch(parent)
    assert [p.command() for p in description.processes] == [
        ["echo", "given", "T"], ["echo", "child-default", "T"], ["echo", "T"]]
    assert set(description.arguments) == {"top", "who"}
    # A command-line argument reaches the included file's <arg>, as with `ros2 launch`.
    assert load_launch(parent, {"who": "cli"}).processes[1].command() == ["echo", "cli", "T"]
    missing = write(tmp_path / "m.launch.xml", '<launch><include file="$(dirname)/nope.launch.xml"/></launch>')
    with pytest.raises(LaunchError, match="not found"):
        load_launch(missing)


def test_node_resolution_builds_the_ros_args(tmp_path: Path) -> None:
    params = tmp_path / "p.yaml"
    params.write_text("/**:\n  ros__parameters:\n    x: 1\n")
    f = write(tmp_path / "n.launch.xml", """<launch>
      <node pkg="na_teleop" exec="teleop" name="tele" namespace="arm" args="--extra 1">
        <param from="$(dirname)/p.yaml"/>
        <param name="stale_timeout" value="0.2"/>
        <remap from="leader/arm_state" to="/leader/arm_state"/>
        <env name="NA_FLAG" value="1"/>
      </node>
      <node pkg="na_teleop" exec="not_installed" name="ghost"/>
    </launch>""")
    node, ghost = load_launch(f).processes
    assert node.executable_path == find_executable("na_teleop", "teleop") and node.executable_path.is_file()
    assert node.command() == [
        str(node.executable_path), "--extra", "1", "--ros-args", "-r", "__node:=tele", "-r", "__ns:=/arm",
        "--params-file", str(params.resolve()), "-p", "stale_timeout:=0.2",
        "-r", "leader/arm_state:=/leader/arm_state"]
    assert node.env == {"NA_FLAG": "1"}
    assert node.fully_qualified_name == "/arm/tele"
    assert node.resolve_name("leader/arm_state") == "/leader/arm_state"
    assert node.resolve_name("follower/command") == "/arm/follower/command"
    assert ghost.executable_path is None
    with pytest.raises(LaunchError, match="not_installed"):
        ghost.command()


@pytest.mark.parametrize(("text", "message"), [
    ("<launch><node exec='x'/></launch>", "missing attribute 'pkg'"),
    ("<launch><timer period='1'/></launch>", "unsupported element"),
    ("<notlaunch/>", "root element"),
    ("<launch><node pkg='a' exec='b'><bogus/></node></launch>", "unsupported element inside <node>"),
    ("<launch><executable cmd='echo $(var x'/></launch>", "unbalanced"),
])
def test_invalid_launch_files_are_clear_errors(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "bad.launch.xml"
    f.write_text(text)
    with pytest.raises(LaunchError, match=message):
        load_launch(f)


def test_malformed_xml_names_the_file(tmp_path: Path) -> None:
    f = tmp_path / "broken.launch.xml"
    f.write_text("<launch><arg name='a'></launch>")
    with pytest.raises(LaunchError, match=r"broken\.launch\.xml: not well-formed"):
        load_launch(f)


@pytest.mark.parametrize(("name", "namespace", "node", "remaps", "expected"), [
    ("chatter", "/", "n", [], "/chatter"),
    ("chatter", "/ns", "n", [], "/ns/chatter"),
    ("/abs", "/ns", "n", [], "/abs"),
    ("~/private", "/ns", "n", [], "/ns/n/private"),
    ("chatter", "/ns", "n", [("chatter", "other")], "/ns/other"),
    ("chatter", "/ns", "n", [("/ns/chatter", "/x")], "/x"),
    ("chatter", "/ns", "n", [("__node", "m"), ("talk", "/y")], "/ns/chatter"),
])
def test_name_resolution(name, namespace, node, remaps, expected) -> None:
    assert resolve_name(name, namespace, node, remaps) == expected
    assert expand_name("a/b", "/", "n") == "/a/b"


def test_start_and_stop_processes(tmp_path: Path) -> None:
    script = tmp_path / "sleeper.py"
    script.write_text("import time\nwhile True:\n    time.sleep(0.05)\n")
    f = write(tmp_path / "run.launch.xml", f"""<launch>
      <executable cmd="{sys.executable} {script}" name="sleeper"/>
    </launch>""")
    processes = start_processes(load_launch(f).processes)
    assert processes[0].poll() is None
    codes = stop_processes(processes, timeout=5.0)
    assert codes[0] is not None


def test_stop_processes_ends_a_child_left_behind_by_a_process_that_exited(tmp_path: Path) -> None:
    """A process that exits on SIGINT while its child ignores SIGINT: the child must not outlive the stop."""
    import os
    import time

    child_pid_file = tmp_path / "child.pid"
    script = tmp_path / "parent.py"
    script.write_text(
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"   # even where the runner ignores SIGINT
        "child = subprocess.Popen([sys.executable, '-c', 'import signal, time\\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\\nwhile True: time.sleep(0.05)'])\n"
        f"open({str(child_pid_file)!r}, 'w').write(str(child.pid))\n"
        "try:\n    while True: time.sleep(0.05)\nexcept KeyboardInterrupt:\n    sys.exit(0)\n")
    f = write(tmp_path / "p.launch.xml", f"""<launch>
      <executable cmd="{sys.executable} {script}" name="parent"/>
    </launch>""")
    processes = start_processes(load_launch(f).processes)
    deadline = time.monotonic() + 20
    while not (child_pid_file.is_file() and child_pid_file.read_text()) and time.monotonic() < deadline:
        time.sleep(0.05)
    child_pid = int(child_pid_file.read_text())
    stop_processes(processes, timeout=2.0)
    assert processes[0].returncode == 0                        # the parent went on SIGINT
    def running(pid: int) -> bool:               # a zombie (killed, not yet reaped by whoever adopted it) is not
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return False
        return state not in ("Z", "X")

    deadline = time.monotonic() + 5
    while running(child_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    if running(child_pid):
        os.kill(child_pid, 9)
        pytest.fail("the child that ignored SIGINT outlived stop_processes")


def test_cli_prints_commands_and_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = write(tmp_path / "c.launch.xml", """<launch>
      <arg name="word" default="hello" description="what to echo"/>
      <executable cmd="echo $(var word)"/>
    </launch>""")
    assert main([str(f), "word:=bye"]) == 0
    assert capsys.readouterr().out.strip() == "echo bye"
    assert main([str(f), "--show-args"]) == 0
    assert "what to echo" in capsys.readouterr().out
    assert main([str(f), "word=bye"]) == 2
    assert "name:=value" in capsys.readouterr().err


def test_run_keeps_the_others_when_one_exits_and_stops_all_on_a_shutdown_process(tmp_path: Path) -> None:
    """As ros2 launch: a process that exits does not take the others down, unless it is on_exit=shutdown."""
    import time


    f = write(tmp_path / "d.launch.xml", """<launch>
      <executable cmd="sleep 0.2" name="short"/>
      <executable cmd="sleep 0.8" name="longer"/>
    </launch>""")
    description = load_launch(f)
    processes = start_processes(description.processes)
    begin = time.monotonic()
    supervise(description.processes, processes, poll_s=0.05)
    assert time.monotonic() - begin >= 0.7                     # waited for the longer one too
    assert [p.returncode for p in processes] == [0, 0]

    g = write(tmp_path / "e.launch.xml", """<launch>
      <executable cmd="sleep 0.2" name="short" on_exit="shutdown"/>
      <executable cmd="sleep 30" name="long"/>
    </launch>""")
    description = load_launch(g)
    processes = start_processes(description.processes)
    supervise(description.processes, processes, poll_s=0.05)
    assert processes[1].poll() is None                         # returned as soon as the shutdown one exited
    stop_processes(processes, timeout=5.0)
    with pytest.raises(LaunchError, match="on_exit='respawn'"):
        load_launch(write(tmp_path / "f.launch.xml", '<launch><executable cmd="true" on_exit="respawn"/></launch>'))
