"""Offline episode generator: scripted operator + simulated rig -> the recorder's episode bags.

No ROS, no pty: the rig (:class:`na_sim.rig.Rig`) is stepped as fast as the CPU allows and the
servo control tables are read and written the way the arm drivers do over the bus, so a
generated bag carries the same topics, types, stamps and units as a live recording
(docs/INTERFACES.md). One cycle of the 100 Hz driver loop (docs/REFERENCES.md, Authors' setup) at time t:

1. leader driver: one Sync Read of the servo family's state block from every leader servo
   (XM430: Present PWM .. Present Temperature; STS3215: Present Position .. Present Current),
   decoded by the functions the drivers decode with (:mod:`na_sim.bus_readout`), its messages' fields
   built as the driver builds them (:mod:`na_description.arm_state`) -> ``/leader/arm_state``,
   ``/leader/joint_states``; stamp = t + bus time (the read completion, as the drivers stamp it);
2. follower driver: Sync Write of the last teleop command (one cycle latency), then Sync Read
   -> ``/follower/arm_state``, ``/follower/joint_states``;
   (the robot comes from the rig config, ``--robot`` or ``--rig-config``; its name is stored in
   every episode's metadata as ``robot``, the spec name, e.g. ``so101``)
3. teleop: follower goal = leader pose (clamped to the joint limits) -> ``/follower/command``;
4. ground truth -> ``/sim/truth/wrench`` (base frame, environment on tool), ``/sim/truth/contact``;
   the operator's grasp flag -> ``/episode/grasp`` (on change and at 10 Hz);
5. physics to t + 10 ms; in ``ft_sensor`` episodes the F/T sensor is sampled every 5 ms
   (~200 Hz; docs/REFERENCES.md, Serial F/T sensor) -> ``/ft/wrench`` (sensor frame, tared, with noise).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from na_common import episode_bag as eb
from na_common import topics
from na_common.episode_bag.layout import next_episode_id
from na_description import RobotSpec, SpecError, load_spec
from na_description.arm_state import ArmStateFields, arm_state_fields, joint_state_fields
from na_description.model import Kinematics
from na_sim.bus_readout import ArmBus, arm_bus
from na_sim.rig import Rig
from na_sim.rig_config import RigConfig, RigConfigError, rig_config_for, robot_name
from na_sim.tasks import (
    PAYLOAD_TASKS,
    PUSH_AXES,
    TASK_IDS,
    TaskEpisode,
    TaskError,
    check_task_name,
    make_task,
    profile_of,
    robot_tasks,
)
from na_sim.torque_arm import TorqueArm, is_torque_arm
from na_sim.torque_episode import run_torque_episode

DRIVER_RATE_HZ = 100.0           # teleop/driver loop while recording (docs/REFERENCES.md, Authors' setup)
FT_RATE_HZ = 200.0               # the authors' F/T sensor rate, ≈200 Hz (docs/REFERENCES.md, Serial F/T sensor)
GRASP_RATE_HZ = 10.0             # /episode/grasp heartbeat (also sent on every change)
BUS_JITTER_S = 0.0003            # s, uniform extra bus time per transaction (assumed)
TELEOP_DELAY_S = 0.0002          # s from the leader sample to the published command (assumed)
FT_FORCE_NOISE_N = 0.02          # N, std of the tared sensor's force noise (assumed, ATI-class sensor)
FT_TORQUE_NOISE_NM = 0.001       # N·m, std of the torque noise (assumed)
BASE_STAMP_NS = 1_735_689_600 * 1_000_000_000   # 2025-01-01T00:00:00Z: start of a generated session
EPISODE_GAP_NS = 5 * 1_000_000_000              # idle time between consecutive generated episodes

# Default payload sets: the robot's task profile (OpenManipulator-X: Table A15, SO-101: Table A16).
# Task groups; a robot's group holds the group's tasks its task profile runs.
TASK_GROUPS: dict[str, tuple[str, ...]] = {
    "all": TASK_IDS,
    "free": ("circle_cw", "circle_ccw", "sweep_joint1", "sweep_joint2", "sweep_joint3", "sweep_joint4",
             "sweep_gripper", "lean_extend"),
    "payload": ("pick_place", "go_up_stay"),
    "push": tuple(f"push_{a}" for a in PUSH_AXES),
    "nopush": tuple(f"nopush_{a}" for a in PUSH_AXES),
    "contact": tuple(f"{p}_{a}" for a in PUSH_AXES for p in ("push", "nopush")),
    "condition": ("pick_place", "pick_place_restricted"),
}

TOPIC_TYPES: dict[str, str] = topics.EPISODE_TOPICS
FT_FRAME = "ft_sensor"


class GenerateError(ValueError):
    """Bad generator request (unknown task, bad payload list, unusable output directory)."""


def resolve_tasks(names: Iterable[str], spec: RobotSpec | None = None) -> list[str]:
    """Expand task ids and group names (``all``, ``free``, ``payload``, ``push``, ...) in order, once each;
    with ``spec``, groups hold only the tasks of that robot's task profile and other tasks are refused."""
    out: list[str] = []
    known = robot_tasks(spec) if spec is not None else TASK_IDS
    for raw in names:
        for name in filter(None, (n.strip() for n in raw.split(","))):
            expanded = TASK_GROUPS.get(name)
            if expanded is not None:
                expanded = tuple(t for t in expanded if t in known)
                if not expanded:
                    raise GenerateError(f"group '{name}' has no task robot '{spec.name}' runs "
                                        f"(its tasks: {', '.join(known)})")
            else:
                try:
                    expanded = (check_task_name(name, spec),)
                except TaskError as err:
                    raise GenerateError(f"{err}; groups: {', '.join(TASK_GROUPS)}") from None
            out.extend(t for t in expanded if t not in out)
    if not out:
        raise GenerateError("no tasks given")
    return out


@dataclass
class GenerateOptions:
    tasks: Sequence[str]
    episodes: int = 1                           # per task and payload
    seed: int = 0
    out: Path = Path("episodes")
    payloads: Sequence[float] | None = None     # None: PAPER_PAYLOADS per payload task
    quick: bool = False                         # shorter scripted episodes (tests, smoke runs)
    max_seconds: float | None = None            # cut every episode after this many simulated seconds
    ft_always: bool = False                     # also write /ft/wrench in episodes without a fixture task
    rig_config: Path | None = None              # default: the robot's shipped rig config (sim_rig.yaml)
    robot: str | None = None                    # spec name or omx_x; default: the rig config's robot
    operator: str = "na-sim generate"


@dataclass
class EpisodeResult:
    path: Path
    task: str
    payload_grams: float
    seed: int
    sim_seconds: float
    wall_seconds: float
    physics_seconds: float          # wall time inside Rig.step (the rest: drivers, messages, bag)
    counts: dict[str, int]


@dataclass
class GenerateReport:
    episodes: list[EpisodeResult] = field(default_factory=list)
    elapsed_seconds: float = 0.0                # wall clock of the whole run (0 while running)

    @property
    def sim_seconds(self) -> float:
        return sum(e.sim_seconds for e in self.episodes)

    @property
    def wall_seconds(self) -> float:
        return sum(e.wall_seconds for e in self.episodes)

    @property
    def physics_seconds(self) -> float:
        return sum(e.physics_seconds for e in self.episodes)

    @property
    def realtime_factor(self) -> float:
        """Simulated seconds per wall-clock second of the run (all workers together)."""
        return self.sim_seconds / max(self.elapsed_seconds or self.wall_seconds, 1e-9)


def torque_arm_spec(options: GenerateOptions) -> RobotSpec | None:
    """The spec of the run's robot when it is a torque-commanded arm without a servo bus (the Panda:
    :mod:`na_sim.torque_arm`, no rig config), else None."""
    if options.rig_config is not None or options.robot is None:
        return None
    try:
        spec = load_spec(robot_name(options.robot))
    except SpecError:
        return None                     # the rig config lookup names the unknown robot
    return spec if is_torque_arm(spec) else None


def run_robot(options: GenerateOptions) -> tuple[RigConfig | None, RobotSpec]:
    """The run's rig config and robot spec: (None, its spec) for a torque arm, else the rig config and the spec
    it names."""
    torque_spec = torque_arm_spec(options)
    if torque_spec is not None:
        return None, torque_spec
    config = load_rig_config(options)
    return config, load_spec(config.robot)


def load_rig_config(options: GenerateOptions) -> RigConfig:
    """The run's rig config: ``rig_config``, else the shipped one of ``robot`` (default the OpenManipulator-X's);
    a rig config of another robot than ``robot`` is a one-line error."""
    config = RigConfig.from_yaml(options.rig_config if options.rig_config is not None
                                 else rig_config_for(options.robot))
    if options.robot is not None and config.robot != robot_name(options.robot):
        raise RigConfigError(f"rig config {options.rig_config} is for robot '{config.robot}', "
                             f"not '{robot_name(options.robot)}'")
    return config


PROGRESS_LINE_S = 10.0     # s between plain progress lines when stderr is not a terminal


def _on_terminal() -> bool:
    """Whether stderr is a terminal: the progress bar is drawn only there (in a log it is one long line)."""
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


def plan_episodes(options: GenerateOptions) -> list[tuple[str, float, int]]:
    """(task, payload g, episode seed) for every episode of the run, in generation order.

    Episode i of a task gets seed :func:`episode_seed` ``(options.seed, i)``, so ``push_*`` and ``nopush_*``
    of one run with the same i are a matched pair (same commanded motion), and runs with other seeds repeat none
    of them.
    """
    if options.episodes < 1:
        raise GenerateError(f"--episodes must be >= 1, got {options.episodes}")
    if options.seed < 0:
        raise GenerateError(f"--seed must be >= 0, got {options.seed}")
    _, spec = run_robot(options)
    profile = profile_of(spec)
    plan = []
    for task in resolve_tasks(options.tasks, spec):
        if task in PAYLOAD_TASKS:
            payloads = profile.payloads.get(task, (0.0,)) if options.payloads is None else tuple(options.payloads)
        else:
            payloads = (0.0,)
        for payload in payloads:
            if not np.isfinite(payload) or payload < 0:
                raise GenerateError(f"payloads must be masses >= 0 g, got {payload}")
            plan.extend((task, float(payload), episode_seed(options.seed, i)) for i in range(options.episodes))
    return plan


def episode_seed(run_seed: int, index: int) -> int:
    """The seed of episode ``index`` of a task in the run ``run_seed``: drawn from both (NumPy's SeedSequence),
    so two runs share an episode only by a 1-in-2^32 chance. ``run_seed + index`` (used before) made a run at
    seed 61 repeat the commanded motions of episodes 2-5 of a run at seed 59: data "never trained on" that was."""
    return int(np.random.SeedSequence([run_seed, index]).generate_state(1)[0])


class _Messages:
    """Builders for the episode messages (rosbags classes from the episode_bag type store)."""

    def __init__(self, spec: RobotSpec) -> None:
        self.spec = spec
        self.names = spec.joint_names
        self.frame = spec.base_frame
        self.gripper = next((k for k, j in enumerate(spec.joints) if j.type == "gripper"), None)
        c = eb.message_class
        self.ArmState, self.JointState, self.JointCommand = c(eb.ARM_STATE), c(eb.JOINT_STATE), c(eb.JOINT_COMMAND)
        self.WrenchStamped, self.Wrench, self.Vector3 = c(eb.WRENCH_STAMPED), c("geometry_msgs/msg/Wrench"), \
            c("geometry_msgs/msg/Vector3")
        self.Bool = c(eb.BOOL)
        self.Header, self.Time = c("std_msgs/msg/Header"), c("builtin_interfaces/msg/Time")
        self.no_stale = np.zeros(spec.n_motors, dtype=bool)

    def header(self, stamp_ns: int, frame: str | None = None):
        """Header for one stamp; messages of the same sample share it (they are only serialised)."""
        sec, nanosec = divmod(stamp_ns, 1_000_000_000)
        return self.Header(stamp=self.Time(sec=sec, nanosec=nanosec), frame_id=self.frame if frame is None else frame)

    def slide(self, angle: float) -> float:
        return float(self.spec.gripper.angle_to_slide(angle))

    def read_arm(self, bus: ArmBus, role: str, bus_seconds: float) -> ArmStateFields:
        """One driver cycle's read of an arm, as its ArmState fields (every servo fresh, no bus errors)."""
        states, goal = bus.sync_read()
        return arm_state_fields(self.spec, role, states, goal, reports_load=bus.table.REPORTS_LOAD,
                                stale=self.no_stale, bus_cycle_duration=bus_seconds)

    def arm_state(self, header, fields: ArmStateFields):
        return self.ArmState(header=header, **fields.message_fields())

    def joint_state(self, header, fields: ArmStateFields):
        return self.JointState(header=header, **joint_state_fields(self.spec, fields))

    def command(self, header, goal: np.ndarray):
        return self.JointCommand(header=header, name=self.names, position=goal,
                                 gripper_slide=self.slide(goal[self.gripper]))

    def wrench(self, header, force: np.ndarray, torque: np.ndarray):
        v = self.Vector3
        return self.WrenchStamped(header=header, wrench=self.Wrench(
            force=v(x=float(force[0]), y=float(force[1]), z=float(force[2])),
            torque=v(x=float(torque[0]), y=float(torque[1]), z=float(torque[2]))))

    def flag(self, value: bool):
        return self.Bool(data=bool(value))


# ---- one episode ------------------------------------------------------------------------------
def start_episode(rig: Rig, episode: TaskEpisode, first_pose: np.ndarray) -> None:
    """Power both arms up and reset the rig for ``episode``: both arms start where the operator holds the
    leader (``first_pose``), the follower driver enables torque there; the episode's fixture and restriction."""
    for regs in (*rig.leader_registers, *rig.follower_registers):
        rig.family.power_up(regs)
    rig.reset(seed=episode.seed, pose=first_pose)
    rig.configure_follower()
    rig.set_fixture(episode.fixture)
    rig.set_restriction(episode.restricted)


def run_episode(rig: Rig, episode: TaskEpisode, writer: eb.EpisodeWriter, start_ns: int, *,
                with_ft: bool, max_seconds: float | None = None,
                on_progress: Callable[[float], None] | None = None) -> tuple[float, float]:
    """Play ``episode`` on ``rig`` and write every topic to ``writer``.

    Returns (simulated seconds, wall seconds spent in the physics).
    """
    spec = rig.spec
    msgs = _Messages(spec)
    rng = np.random.default_rng([episode.seed, 0xB2])
    leader_bus = arm_bus(rig.family.name, spec, rig.leader_registers)
    follower_bus = arm_bus(rig.family.name, spec, rig.follower_registers)
    for topic, msgtype in TOPIC_TYPES.items():
        if topic != topics.FT_WRENCH or with_ft:
            writer.add_topic(topic, msgtype)

    duration = episode.duration if max_seconds is None else min(episode.duration, max_seconds)
    dt = 1.0 / DRIVER_RATE_HZ
    n_cycles = int(np.floor(duration * DRIVER_RATE_HZ + 1e-9))
    ft_per_cycle = round(FT_RATE_HZ / DRIVER_RATE_HZ) if with_ft else 1
    sub_dt = dt / ft_per_cycle
    times = np.arange(n_cycles * ft_per_cycle + 1) * sub_dt
    leader_poses = episode.poses(times)

    start_episode(rig, episode, leader_poses[0])
    payload_kg = episode.payload_kg
    grasped = False
    pending_command: np.ndarray | None = None
    grasp_every = round(DRIVER_RATE_HZ / GRASP_RATE_HZ)
    zero3 = np.zeros(3)
    truth = rig.truth
    physics = 0.0
    clock = time.perf_counter

    for k in range(n_cycles):
        t = k * dt
        t_ns = start_ns + round(t * 1e9)
        # 1. leader driver
        leader_read = leader_bus.read_seconds + rng.uniform(0, BUS_JITTER_S)
        leader = msgs.read_arm(leader_bus, "leader", leader_read)
        leader_ns = t_ns + round(leader_read * 1e9)
        header = msgs.header(leader_ns)
        writer.write(topics.LEADER_ARM_STATE, leader_ns, msgs.arm_state(header, leader))
        writer.write(topics.LEADER_JOINT_STATES, leader_ns, msgs.joint_state(header, leader))
        # 2. follower driver: write the previous command, then read
        follower_bus_time = follower_bus.read_seconds + rng.uniform(0, BUS_JITTER_S)
        if pending_command is not None:
            follower_bus.sync_write_goal(pending_command)
            follower_bus_time += follower_bus.write_seconds
        follower = msgs.read_arm(follower_bus, "follower", follower_bus_time)
        follower_ns = t_ns + round(follower_bus_time * 1e9)
        header = msgs.header(follower_ns)
        writer.write(topics.FOLLOWER_ARM_STATE, follower_ns, msgs.arm_state(header, follower))
        writer.write(topics.FOLLOWER_JOINT_STATES, follower_ns, msgs.joint_state(header, follower))
        # 3. teleop: follower goal = leader pose
        pending_command = np.clip(leader.position, follower_bus.lower, follower_bus.upper)
        command_ns = leader_ns + round(TELEOP_DELAY_S * 1e9)
        writer.write(topics.FOLLOWER_COMMAND, command_ns, msgs.command(msgs.header(command_ns), pending_command))
        # 4. operator grasp and ground truth at t
        now_grasped = episode.grasped(t)
        if now_grasped != grasped:
            rig.set_payload(payload_kg if now_grasped else None)
        if now_grasped != grasped or k % grasp_every == 0:
            writer.write(topics.GRASP, t_ns, msgs.flag(now_grasped))
        grasped = now_grasped
        truth = rig.truth
        writer.write(topics.TRUTH_WRENCH, t_ns, msgs.wrench(msgs.header(t_ns), truth.force_base, zero3))
        writer.write(topics.TRUTH_CONTACT, t_ns, msgs.flag(truth.contact))
        # 5. physics to the next cycle; F/T samples in between
        for j in range(1, ft_per_cycle + 1):
            rig.set_leader_pose(leader_poses[k * ft_per_cycle + j])
            tick = clock()
            # Registers are exchanged once per bus cycle, on the step before the next read (the goal
            # written this cycle takes effect then, within the bus latency of a real arm).
            truth = rig.step(sub_dt, registers=j == ft_per_cycle)
            physics += clock() - tick
            if with_ft:
                ft_ns = t_ns + round(j * sub_dt * 1e9)
                force = truth.sensor_wrench[:3] + rng.normal(0.0, FT_FORCE_NOISE_N, 3)
                torque = truth.sensor_wrench[3:] + rng.normal(0.0, FT_TORQUE_NOISE_NM, 3)
                writer.write(topics.FT_WRENCH, ft_ns, msgs.wrench(msgs.header(ft_ns, FT_FRAME), force, torque))
        if on_progress is not None and k % 100 == 99:
            on_progress(100 * dt)
    if on_progress is not None:
        on_progress((n_cycles % 100) * dt)
    return n_cycles * dt, physics


def episode_metadata(episode: TaskEpisode, options: GenerateOptions, start_ns: int, robot: str) -> dict:
    """The episode's metadata: the task's keys, the robot (spec name) and the generator's keys."""
    meta = episode.metadata()
    meta.update(robot=robot, source="generated", operator=options.operator, start_stamp=start_ns,
                notes=f"na-sim generate, run seed {options.seed}" + (", quick" if options.quick else ""))
    return meta


_WORKER_RIG: dict[str, Any] = {}


def _fixture_geometry(config: RigConfig | None) -> dict[str, float]:
    """The F/T fixture's half size and the tool collider's radius the push tasks plan with (a torque arm has no
    fixture: its task profile lists no push task, so zeros)."""
    if config is None:
        return {"fixture_half_size": 0.0, "tool_radius": 0.0}
    return {"fixture_half_size": float(config.fixture_half_size[0]), "tool_radius": config.tool_collider_radius}


def _episode_sim_seconds(episode: TaskEpisode, max_seconds: float | None) -> float:
    """Simulated seconds ``run_episode`` will produce (whole driver cycles)."""
    duration = episode.duration if max_seconds is None else min(episode.duration, max_seconds)
    return int(np.floor(duration * DRIVER_RATE_HZ + 1e-9)) / DRIVER_RATE_HZ


def _run_planned(options: GenerateOptions, planned: tuple[str, float, int], episode_id: int, start_ns: int,
                 on_progress: Callable[[float], None] | None = None) -> EpisodeResult:
    """Plan, simulate and write one episode; the rig is built once per process and reset per episode,
    so an episode's bag depends only on (run seed, task, payload, episode seed), not on the worker."""
    key = f"{options.seed}:{options.rig_config}:{options.robot}"
    if key not in _WORKER_RIG:
        config, spec = run_robot(options)
        rig = TorqueArm(spec, seed=options.seed) if config is None else Rig(config, seed=options.seed, spec=spec)
        _WORKER_RIG.clear()
        _WORKER_RIG[key] = (config, spec, Kinematics(spec), rig)
    config, spec, kin, rig = _WORKER_RIG[key]
    task, payload, seed = planned
    episode = make_task(task, seed, payload, quick=options.quick, spec=spec, kinematics=kin,
                        **_fixture_geometry(config))
    writer = eb.EpisodeWriter(options.out, {**episode_metadata(episode, options, start_ns, spec.name),
                                            "episode_id": episode_id})
    wall = time.perf_counter()
    try:
        if config is None:
            sim_seconds, physics = run_torque_episode(rig, episode, writer, start_ns, max_seconds=options.max_seconds,
                                                      messages=_Messages(spec), on_progress=on_progress)
        else:
            sim_seconds, physics = run_episode(rig, episode, writer, start_ns,
                                               with_ft=options.ft_always or episode.force_source == "ft_sensor",
                                               max_seconds=options.max_seconds, on_progress=on_progress)
    except BaseException:
        writer.close(complete=False)
        raise
    path = writer.close(complete=True, stop_stamp_ns=start_ns + round(sim_seconds * 1e9))
    return EpisodeResult(path, episode.task, episode.payload_grams, episode.seed, sim_seconds,
                         time.perf_counter() - wall, physics, writer.counts)


def generate(options: GenerateOptions, *, progress: bool = True, log: Callable[[str], None] = print,
             jobs: int = 1) -> GenerateReport:
    """Generate every planned episode into ``options.out`` (new ``episode_NNNNNN`` directories).

    ``jobs`` > 1 simulates episodes in that many worker processes; the bags are the same as with one.
    """
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    from tqdm import tqdm

    plan = plan_episodes(options)
    out = Path(options.out)
    if out.exists() and not out.is_dir():
        raise GenerateError(f"--out {out} exists and is not a directory")
    config, spec = run_robot(options)
    kin = Kinematics(spec)
    episodes = [make_task(task, seed, payload, quick=options.quick, spec=spec, kinematics=kin,
                          **_fixture_geometry(config)) for task, payload, seed in plan]
    durations = [_episode_sim_seconds(e, options.max_seconds) for e in episodes]
    # Each run seed gets its own session start (1000 s apart), so stamps are reproducible per seed;
    # episode ids and start stamps are fixed up front, whatever order the workers finish in.
    session_ns = BASE_STAMP_NS + (options.seed % 100_000) * 1_000_000_000_000
    starts = [session_ns + sum(round(d * 1e9) + EPISODE_GAP_NS for d in durations[:i]) for i in range(len(plan))]
    first_id = next_episode_id(out)
    report = GenerateReport()
    wall = time.perf_counter()
    bar = tqdm(total=round(sum(durations), 2), unit="sim s", disable=not progress or not _on_terminal(),
               dynamic_ncols=True,
               bar_format="{l_bar}{bar}| {n:.1f}/{total:.1f} sim s [{elapsed}<{remaining}, {rate_fmt}]")
    last_line = time.monotonic()

    def episode_done() -> None:
        """In a log (no bar): one plain line every PROGRESS_LINE_S seconds and after the last episode."""
        nonlocal last_line
        if not progress or not bar.disable:
            return
        done = len(report.episodes)
        if time.monotonic() - last_line >= PROGRESS_LINE_S or done == len(plan):
            last_line = time.monotonic()
            log(f"generate: {done}/{len(plan)} episodes, {report.sim_seconds:.1f} s simulated, "
                f"{time.perf_counter() - wall:.0f} s wall")

    try:
        if jobs <= 1 or len(plan) == 1:
            for i, planned in enumerate(plan):
                bar.set_description(f"{planned[0]} {planned[1]:g} g seed {planned[2]}")
                report.episodes.append(_run_planned(options, planned, first_id + i, starts[i], bar.update))
                bar.set_postfix_str(f"{report.realtime_factor:.0f}x real time")
                episode_done()
        else:
            # fork starts workers fastest, but a process that has loaded JAX (multithreaded) must not fork: its
            # workers could deadlock on a lock another thread held at the fork; they are spawned then.
            context = get_context("spawn" if "jax" in sys.modules else "fork")
            with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
                futures = [pool.submit(_run_planned, options, planned, first_id + i, starts[i])
                           for i, planned in enumerate(plan)]
                for future, duration in zip(futures, durations, strict=True):
                    report.episodes.append(future.result())
                    bar.update(duration)
                    episode_done()
    finally:
        bar.close()
    report.elapsed_seconds = time.perf_counter() - wall
    share = report.physics_seconds / max(report.wall_seconds, 1e-9)
    log(f"generated {len(report.episodes)} episode(s), {report.sim_seconds:.1f} s simulated in "
        f"{report.elapsed_seconds:.1f} s wall ({jobs} job(s)): {report.realtime_factor:.1f}x real time "
        f"({100 * share:.0f} % of it in the rig physics) -> {out}")
    return report
