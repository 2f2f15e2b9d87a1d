"""``na-sim rig``: the simulated rig live, behind the same wires as the real hardware (ROS-free).

Starts the physics (``Rig`` + ``RealtimeRunner``), one servo bus emulator per arm (leader and
follower, each on its own pty, the robot spec's servo IDs and baud rate; the OpenManipulator-X's
XM430s on Protocol 2.0, the SO-101's STS3215s on Protocol 0), the ATI Net F/T UDP emulator and the
serial F/T emulator fed by the rig's true sensor wrench, and optionally a scripted operator that
moves the leader arm through a task of ``na_sim.tasks``. It prints (and with ``--info-out`` writes
as JSON) the pty paths and the UDP port once the physics keeps pace with wall time, then runs until
SIGINT/SIGTERM or ``--duration``. Each servo bus is served from a process of its own
(:mod:`na_sim.bus_process`); when the physics falls behind wall time past ``STALL_MARGIN_S`` the rig says
so (stderr, and ``/diagnostics`` with ``--ros``). SIGUSR1 silences the follower's bus for ``DRILL_SILENCE_S``
(a fault drill: the follower driver trips).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from na_common.netft import RDT_PORT
from na_sim.bus_process import DEFAULT_PRIORITY, BusSetup, start_bus
from na_sim.child_process import ChildProcess, take_realtime
from na_sim.faults import DxlFaults, FtFaults
from na_sim.ft_process import FtSetup, start_ft
from na_sim.press_task import PRESS_TASK
from na_sim.rig_record import TruthLink
from na_sim.rt_budget import describe_cpu_share, read_rt_budget
from na_sim.shared_tables import PhysicsSide
from na_sim.steal_time import StealHistory, describe_steal
from na_sim.thread_clock import ThreadClock
from na_sim.truth_publisher import TruthSetup, start_truth_publisher

OPERATOR_RATE_HZ = 100.0          # how often the scripted operator moves the leader
GIL_SWITCH_INTERVAL_S = 5e-4      # physics and operator share one interpreter
PHYSICS_PRIORITY = 55             # SCHED_FIFO of the physics: like the buses, above the drivers' loops (50). It stands
# for hardware, steps every 8.5 ms (the drivers every 10 ms) and counts as fallen behind after 50 ms, where a driver
# trips only after 0.5 s without replies. Below them (40) it was the part that waited whenever the real-time work
# wanted more than the cores (src/na_sim/README.md, Headroom).
FT_PRIORITY = 0                   # normal scheduling for the F/T sensor process, at FT_NICE where allowed:
FT_NICE = -10                     # real-time work that runs steadily (the physics, the F/T streams) keeps the
# CPUs from the kernel's normal-priority workers, which carry the bytes of every pseudo-terminal. When it
# took both cores of a 2-core machine, both emulated buses went silent for up to the kernel's real-time
# throttling window (0.95 s). The F/T streams are paced by their own clocks and reach their drivers through
# socket and pty buffers, so they can wait a few milliseconds; the physics keeps the servos' time base.
PHYSICS_PAUSE_S = 2e-5            # the physics' sleep between the parts of a period's work (RealtimeRunner)
EXCHANGE_PERIOD_S = 0.009         # longest step between two register exchanges: below the drivers' 10 ms reads
STALL_MARGIN_S = 0.05             # physics behind wall time by more than this: said, and on /diagnostics as ERROR
READY_WINDOW_S = 0.5              # the rig reports ready after running this long without such a stall
READY_TIMEOUT_S = 60.0            # ... or gives up after this long
SUPERVISE_PERIOD_S = 0.1          # how often the supervisor looks at the parts
DRILL_SILENCE_S = 1.0             # SIGUSR1: the follower's bus says nothing this long (a trip, for fault drills)


def exchange_period(timestep_s: float) -> float:
    """Period of the live physics loop: whole MuJoCo steps, at most ``EXCHANGE_PERIOD_S``, between two register
    exchanges with the buses (each exchange costs about as much as two steps), so every 10 ms bus read still
    finds values newer than the last read."""
    return max(1, int(EXCHANGE_PERIOD_S / timestep_s + 1e-9)) * timestep_s


def add_rig_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options of ``na-sim rig`` (shared by the na-sim CLI and ``python -m na_sim.live_rig``)."""
    parser.add_argument("--robot", default=None,
                        help="robot of the rig: omx_x / open_manipulator_x (default) or so101; selects its shipped "
                             "rig config (sim_rig, sim_rig_so101) unless --config names one")
    parser.add_argument("--config", default=None,
                        help="rig configuration: a YAML file or a name shipped in na_sim/config/ (default: the "
                             "robot's); its robot: key must match --robot")
    parser.add_argument("--seed", type=int, default=0, help="rig seed: servo individuality and noise (default 0)")
    parser.add_argument("--task", default=None,
                        help="scripted operator task for the leader arm (see na_sim.tasks); default: none, "
                             "the leader rests")
    parser.add_argument("--task-seed", type=int, default=None, help="seed of the task (default: --seed)")
    parser.add_argument("--payload-grams", type=float, default=None, help="payload of a payload task (g)")
    parser.add_argument("--loop-task", action="store_true", help="replay the task with the next seed when done")
    parser.add_argument("--fixture-only", action="store_true",
                        help=f"with --task {PRESS_TASK}: place the seed's fixture and start pose but leave the leader "
                             "resting (a policy drives the follower)")
    parser.add_argument("--duration", type=float, default=0.0, help="seconds to run; 0 = until SIGINT/SIGTERM")
    parser.add_argument("--info-out", type=Path, default=None, help="write pty paths and UDP port as JSON here")
    parser.add_argument("--link-dir", type=Path, default=None,
                        help="also link the ports as DIR/leader_arm, DIR/follower_arm, DIR/ft_serial (stable names "
                             "for launch files; removed at stop)")
    parser.add_argument("--ros", action="store_true",
                        help="publish ground truth (/sim/truth/wrench, /sim/truth/contact) and the operator's grasp "
                             "(/episode/grasp) on ROS 2")
    parser.add_argument("--netft-port", "--ft-port", type=int, default=0,
                        help=f"UDP port of the Net F/T emulator on 127.0.0.1 (0 = ephemeral; the real "
                             f"sensor uses {RDT_PORT})")
    parser.add_argument("--netft-rate", type=float, default=500.0, help="Net F/T record rate in Hz (default 500)")
    parser.add_argument("--serial-ft-rate", type=float, default=200.0, help="serial F/T line rate in Hz (default 200)")
    parser.add_argument("--no-netft", action="store_true", help="do not start the Net F/T emulator")
    parser.add_argument("--no-serial-ft", action="store_true", help="do not start the serial F/T emulator")
    parser.add_argument("--wire-time", action="store_true", help="emulate the 1 Mbps byte time on the servo buses")
    parser.add_argument("--bus-priority", type=int, default=DEFAULT_PRIORITY,
                        help=f"SCHED_FIFO priority of the two bus processes (default {DEFAULT_PRIORITY}, above the "
                             "arm drivers' loops; 0 = normal scheduling; needs CAP_SYS_NICE, else normal)")
    parser.add_argument("--physics-priority", type=int, default=PHYSICS_PRIORITY,
                        help=f"SCHED_FIFO priority of the physics (default {PHYSICS_PRIORITY}, above the arm drivers' "
                             "loops, below the buses; 0 = normal scheduling)")
    parser.add_argument("--ft-priority", type=int, default=FT_PRIORITY,
                        help=f"SCHED_FIFO priority of the F/T sensor process (default {FT_PRIORITY}: normal scheduling "
                             f"at nice {FT_NICE} where allowed; steady real-time work on a machine without a core to "
                             "spare delays the kernel's pseudo-terminal workers, and with them both emulated buses)")
    parser.add_argument("--dxl-drop-rate", type=float, default=0.0, help="fault: status packets dropped (0-1)")
    parser.add_argument("--dxl-corrupt-rate", type=float, default=0.0,
                        help="fault: probability per status-packet byte of corruption (0-1)")
    parser.add_argument("--ft-drop-rate", type=float, default=0.0, help="fault: F/T records/lines dropped (0-1)")
    parser.add_argument("--status-every", type=float, default=5.0, help="seconds between status lines (0 = none)")
    return parser


class ScriptedOperator:
    """Plays a task episode on the leader arm in real time: pose, grasp, fixture and restriction."""

    def __init__(self, rig: Any, task: str, seed: int, payload_grams: float | None, loop: bool) -> None:
        from na_sim.tasks import check_task_name
        self.rig, self.task, self.seed, self.payload_grams, self.loop = rig, check_task_name(task), seed, \
            payload_grams, loop
        self.episodes = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="na_sim_operator", daemon=True)
        self._episode = self._make_episode(seed)   # planned up front: bad task options fail before start

    def _make_episode(self, seed: int) -> Any:
        from na_sim.tasks import make_task
        config = self.rig.config
        return make_task(self.task, seed, self.payload_grams, spec=self.rig.spec,
                         fixture_half_size=float(config.fixture_half_size[0]), tool_radius=config.tool_collider_radius)

    def start(self) -> ScriptedOperator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def _begin(self, episode: Any) -> float:
        self.rig.set_payload(None)
        self.rig.set_fixture(episode.fixture)
        self.rig.set_restriction(episode.restricted)
        self.episodes += 1
        return time.monotonic()

    def _run(self) -> None:
        try:
            episode = self._episode
            started, grasped, seed = self._begin(episode), False, self.seed
            while not self._stop.wait(1.0 / OPERATOR_RATE_HZ):
                t = time.monotonic() - started
                if t > episode.duration and self.loop:
                    seed += 1
                    episode = self._make_episode(seed)
                    started, grasped = self._begin(episode), False
                    t = 0.0
                t = min(t, episode.duration)
                self.rig.set_leader_pose(episode.pose(t))
                if episode.grasped(t) != grasped:
                    grasped = not grasped
                    self.rig.set_payload(episode.payload_kg if grasped else None)
        except BaseException as exc:   # surfaced to the owner through .error
            self.error = exc


class PressOperator:
    """The ``press_hold`` task on the rig (na_sim.press_task). Both arms start at the seed's hover pose with the
    seed's object in the gripper and the follower's torque on, so that it holds there until a driver takes
    it. The driver's start-up turns the torque off for a moment (EEPROM settings) and the arm sags, so the
    fixture is placed only once the driver has the torque on again and the follower is back at the start pose
    (teleop's soft start, or a policy's); then, unless ``fixture_only``, the closed-loop expert moves the leader
    arm from the rig's true contact force: it holds the hover for ``SETTLE_SECONDS``, plays one episode and then
    holds (``--loop-task`` does not apply)."""

    def __init__(self, rig: Any, seed: int, fixture_only: bool) -> None:
        from na_sim.press_task import PressExpert, make_press_episode
        self.rig, self.fixture_only = rig, fixture_only
        self.episode = make_press_episode(seed, spec=rig.spec, fixture_half_size=float(rig.config.fixture_half_size[2]))
        self.expert = PressExpert(self.episode, rig.spec)
        self.episodes = 1
        self.phase = "driver"          # driver -> return -> placed
        self.error: BaseException | None = None
        self._torque_seen_off = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="na_sim_press", daemon=True)
        rig.reset(rig.seed, pose=self.episode.start_pose)
        rig.set_payload(self.episode.payload_kg)
        rig.configure_follower(torque=True)

    def start(self) -> PressOperator:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2.0)

    def _advance(self) -> None:
        from na_sim.press_task import START_TOLERANCE
        registers = self.rig.follower_registers
        torque = [regs.get("torque_enable") for regs in registers]
        if self.phase == "driver":
            # A driver took the arm: it turned the torque off and on again (seen when polled in between) or it
            # armed the Bus Watchdog, which it does after torque-on (a start-up quicker than one poll).
            self._torque_seen_off |= not all(torque)
            armed = all(regs.get("bus_watchdog") != 0 for regs in registers)
            if all(torque) and (self._torque_seen_off or armed):
                self.phase = "return"
                print("na-sim rig: press_hold: a driver has the follower; the fixture comes once it is back at the "
                      "start pose", flush=True)
        elif self.phase == "return":
            q = self.rig.truth.joint_position
            if np.all(np.abs(q[:4] - self.episode.start_pose[:4]) < START_TOLERANCE) and \
                    self.expert.clear_of_face(q, self.rig.config.tool_collider_radius):
                self.rig.set_fixture(self.episode.fixture)
                self.expert.engage()
                self.phase = "placed"
                print(f"na-sim rig: press_hold: fixture placed, face at {self.episode.face_height * 1000:.1f} mm, "
                      f"object {self.episode.payload_kg * 1000:.0f} g", flush=True)

    def _run(self) -> None:
        try:
            period = 1.0 / OPERATOR_RATE_HZ
            while not self._stop.wait(period):
                self._advance()
                if not self.fixture_only:
                    force_z = float(self.rig.truth.contact_force_base[2])
                    self.rig.set_leader_pose(self.expert.step(period, force_z))
        except BaseException as exc:   # surfaced to the owner through .error
            self.error = exc


def _check_args(args: argparse.Namespace) -> str | None:
    """A message for the first bad option, else None."""
    rates = {"--dxl-drop-rate": args.dxl_drop_rate, "--dxl-corrupt-rate": args.dxl_corrupt_rate,
             "--ft-drop-rate": args.ft_drop_rate}
    for name, value in rates.items():
        if not 0.0 <= value <= 1.0:
            return f"{name} must be between 0 and 1, got {value}"
    for name, value in (("--bus-priority", args.bus_priority), ("--physics-priority", args.physics_priority),
                        ("--ft-priority", args.ft_priority)):
        if not 0 <= value <= 99:
            return f"{name} must be 0..99, got {value}"
    if args.duration < 0 or args.status_every < 0:
        return "--duration and --status-every must be >= 0"
    if args.netft_rate <= 0 or args.serial_ft_rate <= 0:
        return "F/T rates must be > 0"
    if not 0 <= args.netft_port <= 65535:
        return f"--netft-port must be 0..65535, got {args.netft_port}"
    if args.payload_grams is not None and args.task is None:
        return "--payload-grams needs --task"
    if args.fixture_only and args.task != PRESS_TASK:
        return f"--fixture-only needs --task {PRESS_TASK}"
    if args.task is not None and args.task != PRESS_TASK:
        from na_sim.tasks import TaskError, check_task_name
        try:
            check_task_name(args.task)
        except TaskError as exc:
            return str(exc)
    return None


LINK_NAMES = {"leader_port": "leader_arm", "follower_port": "follower_arm", "serial_ft_port": "ft_serial"}


def _link_ports(link_dir: Path, info: dict[str, Any]) -> dict[str, str]:
    """Symlink each pty under a stable name in ``link_dir`` (replacing stale links)."""
    link_dir.mkdir(parents=True, exist_ok=True)
    links = {}
    for key, name in LINK_NAMES.items():
        target = info.get(key)
        if not target:
            continue
        link = link_dir / name
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(target)
        links[name] = str(link)
    return links


def _write_info(path: Path, info: dict[str, Any]) -> None:
    """Atomic JSON write: a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(info, indent=2) + "\n")
    os.replace(temporary, path)


def run_live_rig(args: argparse.Namespace) -> int:
    """Run the live rig until SIGINT/SIGTERM or ``--duration``; 0 on a clean stop."""
    problem = _check_args(args)
    if problem:
        print(f"na-sim rig: {problem}", file=sys.stderr)
        return 2
    from na_sim.realtime_runner import RealtimeRunner
    from na_sim.rig import Rig
    from na_sim.rig_config import RigConfig, RigConfigError, rig_config_for, robot_name
    from na_sim.tasks import TaskError, check_task_name

    try:
        config = RigConfig.from_yaml(args.config if args.config else rig_config_for(args.robot))
        if args.robot is not None and config.robot != robot_name(args.robot):
            raise RigConfigError(f"rig config {args.config} is for robot '{config.robot}', "
                                 f"not '{robot_name(args.robot)}'")
        if args.task == PRESS_TASK and config.robot != robot_name("omx_x"):
            raise TaskError(f"task '{PRESS_TASK}' is planned for the OpenManipulator-X, not '{config.robot}'")
        if args.task is not None and args.task != PRESS_TASK:
            from na_description import load_spec

            check_task_name(args.task, load_spec(config.robot))
    except (RigConfigError, TaskError) as exc:
        print(f"na-sim rig: {exc}", file=sys.stderr)
        return 2
    print("na-sim rig: building the rig ...", flush=True)
    began = time.monotonic()
    rig = Rig(config, seed=args.seed)
    task_seed = args.seed if args.task_seed is None else args.task_seed
    try:
        if args.task == PRESS_TASK:
            operator = PressOperator(rig, task_seed, args.fixture_only)
        else:
            operator = None if args.task is None else ScriptedOperator(
                rig, args.task, task_seed, args.payload_grams, args.loop_task)
    except TaskError as exc:
        print(f"na-sim rig: {exc}", file=sys.stderr)
        return 2

    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    dxl_faults = DxlFaults(drop_status_rate=args.dxl_drop_rate, corrupt_byte_rate=args.dxl_corrupt_rate,
                           seed=args.seed)
    ft_faults = FtFaults(drop_rate=args.ft_drop_rate, seed=args.seed)
    started: list[Any] = []
    stop, silence = threading.Event(), threading.Event()
    previous_handlers = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous_handlers[signum] = signal.signal(signum, lambda *_: stop.set())
        previous_handlers[signal.SIGUSR1] = signal.signal(signal.SIGUSR1, lambda *_: silence.set())
    try:
        truth_link = TruthLink(rig)
        started.append(truth_link)
        children = _start_children(rig, args, truth_link, dxl_faults, ft_faults, started)
        runner = RealtimeRunner(rig, period=exchange_period(rig.config.timestep_s), stall_margin=STALL_MARGIN_S,
                                links=(*(link for link, _ in children.buses.values()), truth_link),
                                pause_s=PHYSICS_PAUSE_S)
        truth_link.runner = runner
        physics_realtime = take_realtime(args.physics_priority)     # the runner and operator threads inherit it
        for part in (runner, operator):
            if part is not None:
                part.start()
                started.append(part)
        ft = children.ft.facts
        info = {
            "leader_port": children.buses["leader"][1].facts["port_path"],
            "follower_port": children.buses["follower"][1].facts["port_path"],
            "robot": rig.spec.name,
            "servo_ids": [r.servo_id for r in rig.follower_registers],
            "baud_rate": rig.spec.baud_rate,
            "netft": None if ft["netft"] is None else {"host": ft["netft"][0], "port": ft["netft"][1]},
            "serial_ft_port": ft["serial_port"] or None,
            "task": args.task,
            "pid": os.getpid(),
            "realtime": {"buses": all(bus.facts["realtime"] for _, bus in children.buses.values()),
                         "physics": physics_realtime, "ft": ft["realtime"]},
            "stall_margin_s": STALL_MARGIN_S,
        }
        if args.link_dir is not None:
            info["links"] = _link_ports(args.link_dir, info)
        if children.truth is not None:
            children.truth.facts                     # noqa: B018  (up before the rig says it is ready)
            info["ros_truth"] = True
        if not _wait_for_pace(runner, stop):
            print(f"na-sim rig: the physics did not keep pace with wall time for {READY_WINDOW_S:.1f} s within "
                  f"{READY_TIMEOUT_S:.0f} s (worst lag {runner.worst_lag * 1e3:.0f} ms): the machine is too busy",
                  file=sys.stderr)
            return 1
        if stop.is_set():
            return 0
        info["ready_after_s"] = round(time.monotonic() - began, 3)
        print("na-sim rig ready: " + json.dumps(info), flush=True)
        if args.info_out is not None:
            try:
                _write_info(args.info_out, info)
            except OSError as exc:
                print(f"na-sim rig: cannot write --info-out {args.info_out}: {exc}", file=sys.stderr)
                return 2
        return _supervise(args, stop, silence, rig, runner, operator, children, began)
    finally:
        for part in reversed(started):
            part.stop()
        if args.link_dir is not None:
            for name in LINK_NAMES.values():
                link = args.link_dir / name
                if link.is_symlink():
                    link.unlink()
        _remove_own_info(args.info_out)
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
        print("na-sim rig: stopped", flush=True)


@dataclass
class _Children:
    """The rig's processes besides the physics: one bus per arm (with its shared tables), the F/T sensors and,
    with ``--ros``, the truth publisher."""

    buses: dict[str, tuple[PhysicsSide, ChildProcess]]
    ft: ChildProcess
    truth: ChildProcess | None

    def dead(self) -> list[str]:
        parts = [*(bus for _, bus in self.buses.values()), self.ft, *([self.truth] if self.truth else [])]
        return [part.name for part in parts if not part.alive]


class _ArmBus:
    """One arm's bus process and its shared tables, stopped as one part of the rig."""

    def __init__(self, link: PhysicsSide, bus: ChildProcess) -> None:
        self.link, self.bus = link, bus

    def stop(self) -> None:
        self.bus.stop()
        self.link.close()


def _start_children(rig: Any, args: argparse.Namespace, truth_link: TruthLink, dxl_faults: DxlFaults,
                    ft_faults: FtFaults, started: list[Any]) -> _Children:
    """Start every child side by side (each spawn takes a second or so on a busy machine)."""
    family = rig.family
    buses = {}
    for role, registers in (("leader", rig.leader_registers), ("follower", rig.follower_registers)):
        link = PhysicsSide(registers, family.physics_bytes, family.error_bytes, family.clock_bytes)
        try:
            bus = start_bus(BusSetup(family.name, rig.spec.name, tuple(r.snapshot() for r in registers),
                                     link.channels, rig.spec.baud_rate, args.wire_time, dxl_faults,
                                     args.bus_priority), f"{role}-bus")
        except BaseException:
            link.close()
            raise
        started.append(_ArmBus(link, bus))
        buses[role] = (link, bus)
    ft = start_ft(FtSetup(truth_link.path, not args.no_netft, args.netft_port, args.netft_rate, not args.no_serial_ft,
                          args.serial_ft_rate, ft_faults, args.ft_priority, FT_NICE))
    started.append(ft)
    truth = None
    if args.ros:
        truth = start_truth_publisher(TruthSetup(truth_link.path, STALL_MARGIN_S))
        started.append(truth)
    return _Children(buses, ft, truth)


def _wait_for_pace(runner: Any, stop: threading.Event) -> bool:
    """True once the physics ran ``READY_WINDOW_S`` without lagging past its margin (or a stop came)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    calm_since = time.monotonic()
    seen = 0
    while not stop.is_set():
        if runner.error is not None:
            return True            # the supervisor reports it
        now = time.monotonic()
        if len(runner.stalls) != seen or runner.lag > runner.stall_margin:
            seen, calm_since = len(runner.stalls), now
        if now - calm_since >= READY_WINDOW_S:
            return True
        if now > deadline:
            return False
        stop.wait(0.02)
    return True


def _remove_own_info(path: Path | None) -> None:
    """Delete the --info-out file of this rig (its ports are gone); leave one another rig wrote since."""
    if path is None:
        return
    try:
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()
    except (OSError, ValueError, AttributeError):
        pass


def _supervise(args: argparse.Namespace, stop: threading.Event, silence: threading.Event, rig: Any, runner: Any,
               operator: Any, children: _Children, began: float) -> int:
    """Wait for a stop; say when the physics fell behind; a status line every ``--status-every`` s; 1 if a
    part failed. ``silence`` (SIGUSR1, a fault drill) silences the follower's bus for ``DRILL_SILENCE_S``."""
    deadline = time.monotonic() + args.duration if args.duration > 0 else None
    next_status = time.monotonic() + args.status_every
    reported = 0
    steal = StealHistory()
    steal.sample()
    rt_budget = read_rt_budget()
    status_from = runner.times         # the physics thread's times at the last status line
    while not stop.is_set():
        wait = SUPERVISE_PERIOD_S if deadline is None else max(0.0, min(SUPERVISE_PERIOD_S,
                                                                         deadline - time.monotonic()))
        stop.wait(wait)
        steal.sample()
        for name, part in (("physics", runner), ("operator", operator)):
            if part is not None and part.error is not None:
                print(f"na-sim rig: {name} failed: {part.error!r}", file=sys.stderr)
                return 1
        dead = children.dead()
        if dead and not stop.is_set():
            print(f"na-sim rig: the {', '.join(dead)} process died", file=sys.stderr)
            return 1
        if silence.is_set():
            silence.clear()
            children.buses["follower"][1].request(("silence", DRILL_SILENCE_S))
            print(f"na-sim rig: fault drill: the follower's bus is silent for {DRILL_SILENCE_S:.0f} s", flush=True)
        ended = len(runner.stalls) - (1 if runner.lag > runner.stall_margin else 0)
        for stall in runner.stalls[reported:ended]:
            print(f"na-sim rig: physics fell behind wall time by {stall.worst * 1e3:.0f} ms at "
                  f"t={stall.began - began:.2f} s (margin {runner.stall_margin * 1e3:.0f} ms; "
                  f"{runner.skipped} steps skipped so far; {stall.split.describe('the physics thread')}; "
                  f"{describe_cpu_share(stall.cpu_share, stall.share_span, rt_budget)}; "
                  f"{describe_steal(steal.worst_cpu_steal(stall.began, stall.began + stall.worst))})",
                  file=sys.stderr, flush=True)
        reported = max(reported, ended)
        if args.status_every > 0 and not stop.is_set() and time.monotonic() >= next_status:
            next_status += args.status_every
            packets = "/".join(str(link.counters["packets"]) for link, _ in children.buses.values())
            records = children.ft.request("counters")["records"]
            times, busy = runner.times, ""
            if times is not None and status_from is not None and times.wall > status_from.wall:
                since = ThreadClock.split(status_from, times)
                busy = f", physics thread on a CPU {since.ran / since.wall * 100:.0f} % of the time"
            status_from = times
            print(f"  t={rig.truth.time:8.2f} s  steps {runner.steps} (skipped {runner.skipped}, worst lag "
                  f"{runner.worst_lag * 1e3:.1f} ms{busy})  bus packets leader/follower {packets}  "
                  f"Net F/T records {records}", flush=True)
        if deadline is not None and time.monotonic() >= deadline:
            break
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = add_rig_arguments(argparse.ArgumentParser(prog="na-sim rig", description=__doc__,
                                                       formatter_class=argparse.RawDescriptionHelpFormatter))
    return run_live_rig(parser.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
