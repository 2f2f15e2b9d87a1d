"""Conversion throughput of ``na-train convert`` (prints messages/s, the machine and its load).

Messages are all the messages in the bags, every topic (the sum of the rosbag2 message counts),
whether the converter reads a topic or not. The time is the wall clock of one ``convert()`` call
in this process (imports done, worker processes started inside the call).

On given bags, e.g. the standard generated benchmark::

    na-sim generate --tasks all --episodes 10 --quick --seed 0 --out /tmp/bags
    python src/na_training/benchmarks/convert_throughput.py --bags /tmp/bags --frame-period 0.017 --jobs 1 2

Each round converts with every ``--jobs`` value in turn (the order alternates between rounds), so a
round's speed-up compares runs made under the same machine load; each run also prints the CPU
time it used and how many CPUs other processes kept busy meanwhile (on a shared machine whose
kernel shares CPU time between sessions, a second worker gains nothing while other sessions are
busy, so only runs where the others were near zero measure ``--jobs``). The datasets of all runs
are compared byte for byte (and with ``--reference NAD``, e.g. one written by an earlier converter).
Without ``--bags`` it writes ``--episodes`` synthetic bags of ``--seconds`` each (follower, leader
and command at 100 Hz, F/T at ``--ft-rate``) and times them with and without resampling.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import resource
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from na_common import topics
from na_common.episode_bag import EpisodeWriter, make_header, message_class, read_rosbag2_info, topic_summaries
from na_common.machine import cpu_info
from na_description import load_spec
from na_training.convert import convert, expand_bag_paths
from na_training.convert.run import default_jobs

T0 = 1_000_000_000_000  # ns


# ----------------------------------------------------------------------------------------- synthetic bags

def _arm_state(stamp: int, q: np.ndarray, role: str, names: list[str]):
    n = len(names)
    return message_class(topics.ARM_STATE_TYPE)(
        header=make_header(stamp, "world"), role=role, name=names, position=q, gripper_slide=0.005,
        goal_gripper_slide=0.005, velocity=q * 0.1, goal_position=q, current=np.full(n, 0.1), pwm=np.zeros(n),
        input_voltage=np.full(n, 12.0), temperature=np.full(n, 30.0), hardware_error=np.zeros(n, np.uint8),
        stale=np.zeros(n, bool), timeout_errors=0, crc_errors=0, partial_errors=0, dropped_cycles=0,
        bus_cycle_duration=0.002)


def _wrench(stamp: int, force: np.ndarray):
    vec = message_class("geometry_msgs/msg/Vector3")
    wrench = message_class("geometry_msgs/msg/Wrench")(force=vec(x=force[0], y=force[1], z=force[2]),
                                                       torque=vec(x=0.0, y=0.0, z=0.0))
    return message_class(topics.WRENCH_STAMPED_TYPE)(header=make_header(stamp, "ft_sensor"), wrench=wrench)


def write_episode(out: Path, seconds: float, ft_rate: float, names: list[str]) -> int:
    command_type = message_class(topics.JOINT_COMMAND_TYPE)
    meta = {"task": "push", "payload_grams": 0.0, "force_source": "ft_sensor", "condition": "nominal",
            "source": "generated"}
    count = 0
    with EpisodeWriter(out, meta) as writer:
        for topic, msgtype in ((topics.FOLLOWER_ARM_STATE, topics.ARM_STATE_TYPE),
                               (topics.LEADER_ARM_STATE, topics.ARM_STATE_TYPE),
                               (topics.FOLLOWER_COMMAND, topics.JOINT_COMMAND_TYPE),
                               (topics.FT_WRENCH, topics.WRENCH_STAMPED_TYPE)):
            writer.add_topic(topic, msgtype)
        ft_period = int(1e9 / ft_rate)
        next_ft = T0
        for k in range(int(seconds * 100) + 1):
            stamp = T0 + k * 10_000_000
            q = np.sin(stamp / 1e9 + np.arange(len(names)))
            while next_ft <= stamp:
                writer.write(topics.FT_WRENCH, next_ft, _wrench(next_ft, np.array([0.0, 0.0, 1.0])))
                next_ft += ft_period
                count += 1
            writer.write(topics.FOLLOWER_COMMAND, stamp - 2_000_000, command_type(
                header=make_header(stamp - 2_000_000), name=names, position=q, gripper_slide=0.005))
            writer.write(topics.LEADER_ARM_STATE, stamp - 3_000_000, _arm_state(stamp - 3_000_000, q, "leader", names))
            writer.write(topics.FOLLOWER_ARM_STATE, stamp, _arm_state(stamp, q, "follower", names))
            count += 3
    return count


# ----------------------------------------------------------------------------------------- machine

def machine() -> str:
    """CPU model and ISA flags, CPUs usable here, Python and the libraries that do the work."""
    import pyarrow
    import rosbags

    version = getattr(rosbags, "__version__", None) or _dist_version("rosbags")
    return (f"{cpu_info().describe()} ({default_jobs()} usable here); Python {platform.python_version()}, "
            f"numpy {np.__version__}, pyarrow {pyarrow.__version__}, rosbags {version}")


def _dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def _busy_seconds() -> float | None:
    """CPU seconds the whole machine has been busy (all processes, /proc/stat), None where unknown."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)          # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    """CPU seconds of this process and its finished children (the conversion's worker processes)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def load() -> str:
    """1-minute load average and, where the kernel reports it, the share of time tasks waited for a CPU."""
    text = f"load {os.getloadavg()[0]:.2f}"
    try:
        some = Path("/proc/pressure/cpu").read_text().split()[1]        # "avg10=12.34"
        text += f", CPU pressure {some.split('=')[1]} % (10 s)"
    except (OSError, IndexError):
        pass
    return text


# ----------------------------------------------------------------------------------------- runs

def count_messages(bags: list[Path]) -> int:
    """All messages of the bags, every topic, from their rosbag2 metadata."""
    return sum(t.count for bag in bags for t in topic_summaries(read_rosbag2_info(bag)).values())


def dataset_digest(root: Path) -> str:
    """One hash over every file of a dataset (relative path and bytes)."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


@dataclass
class Timing:
    seconds: float               # wall clock
    cpu: float                   # CPU seconds of the conversion (this process and its workers)
    others: float | None         # CPUs the rest of the machine kept busy meanwhile, on average

    def describe(self) -> str:
        others = "" if self.others is None else f", other processes busy on {max(self.others, 0.0):.2f} CPUs"
        return f"CPU {self.cpu:.2f} s ({self.cpu / self.seconds:.2f} CPUs){others}"


def timed_convert(bags: list[Path], out: Path, rate_hz: float | None, jobs: int) -> Timing:
    shutil.rmtree(out, ignore_errors=True)
    busy, own, start = _busy_seconds(), _own_seconds(), time.perf_counter()
    convert(bags, out, rate_hz=rate_hz, progress=False, jobs=jobs)
    seconds, cpu = time.perf_counter() - start, _own_seconds() - own
    after = _busy_seconds()
    others = None if busy is None or after is None else (after - busy - cpu) / seconds
    return Timing(seconds, cpu, others)


def bench_bags(bags: list[Path], rate_hz: float | None, jobs_list: list[int], rounds: int, work: Path,
               reference: Path | None) -> None:
    messages = count_messages(bags)
    print(f"machine: {machine()}")
    print(f"bags: {len(bags)}, {messages:,} messages (all topics); frames: "
          f"{'every follower sample' if rate_hz is None else f'resampled to {1 / rate_hz:g} s'}")
    rates: dict[int, list[float]] = {j: [] for j in jobs_list}
    digests: set[str] = set()
    for r in range(rounds):
        order = jobs_list if r % 2 == 0 else list(reversed(jobs_list))
        for jobs in order:
            before = load()
            timing = timed_convert(bags, work / f"nad_jobs{jobs}", rate_hz, jobs)
            rates[jobs].append(messages / timing.seconds)
            digests.add(dataset_digest(work / f"nad_jobs{jobs}"))
            print(f"round {r + 1} --jobs {jobs}: {timing.seconds:.2f} s, {messages / timing.seconds:,.0f} messages/s; "
                  f"{timing.describe()}; {before} before, {load()} after")
        if len(jobs_list) > 1:
            base = rates[jobs_list[0]][-1]
            print("  same round: " + ", ".join(f"--jobs {j} / --jobs {jobs_list[0]} = {rates[j][-1] / base:.2f}x"
                                               for j in jobs_list[1:]))
    for jobs in jobs_list:
        print(f"--jobs {jobs}: best {max(rates[jobs]):,.0f}, median {statistics.median(rates[jobs]):,.0f} "
              f"messages/s over {rounds} round(s)")
    if len(jobs_list) > 1:
        for jobs in jobs_list[1:]:
            ratios = [a / b for a, b in zip(rates[jobs], rates[jobs_list[0]], strict=True)]
            print(f"speed-up --jobs {jobs} vs --jobs {jobs_list[0]} (same round): "
                  f"median {statistics.median(ratios):.2f}x, best {max(ratios):.2f}x")
    print(f"datasets of all runs byte-identical: {'yes' if len(digests) == 1 else 'NO'}")
    if reference is not None:
        same = dataset_digest(reference) in digests and len(digests) == 1
        print(f"byte-identical to {reference}: {'yes' if same else 'NO'}")


def bench_synthetic(episodes: int, seconds: float, ft_rate: float, jobs_list: list[int], work: Path) -> None:
    names = load_spec().joint_names
    bags = work / "bags"
    start = time.perf_counter()
    messages = sum(write_episode(bags, seconds, ft_rate, names) for _ in range(episodes))
    print(f"machine: {machine()}")
    print(f"wrote {episodes} bags, {messages} messages in {time.perf_counter() - start:.2f} s")
    for label, rate in (("native 100 Hz", None), ("resampled 1/0.017 Hz", 1 / 0.017)):
        for jobs in jobs_list:
            before = load()
            timing = timed_convert(expand_bag_paths([bags]), work / "nad", rate, jobs)
            print(f"{label}, --jobs {jobs}: {messages} messages in {timing.seconds:.2f} s "
                  f"({messages / timing.seconds:,.0f} messages/s, {episodes * seconds / timing.seconds:.1f} recorded "
                  f"s per s; {timing.describe()}; {before})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bags", nargs="+", type=Path, metavar="DIR",
                        help="bags or folders of bags to convert (default: write synthetic bags)")
    timing = parser.add_mutually_exclusive_group()
    timing.add_argument("--frame-period", type=float, metavar="S", help="resample to frames of S seconds")
    timing.add_argument("--rate", type=float, metavar="HZ", help="resample to HZ")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1], metavar="N",
                        help="worker process counts to time, e.g. 1 2 (default: 1)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds over the --jobs values (given bags)")
    parser.add_argument("--reference", type=Path, metavar="NAD", help="a dataset the output must equal byte for byte")
    parser.add_argument("--work", type=Path, help="where the datasets are written (default: a temporary folder)")
    parser.add_argument("--episodes", type=int, default=2, help="synthetic bags")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of a synthetic bag")
    parser.add_argument("--ft-rate", type=float, default=500.0, help="F/T sample rate of the synthetic bags (Hz)")
    args = parser.parse_args()
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)        # a fresh folder is fine; its datasets are removed
    with tempfile.TemporaryDirectory(dir=args.work) as tmp:
        if args.bags:
            rate = 1.0 / args.frame_period if args.frame_period else args.rate
            bench_bags(expand_bag_paths(args.bags), rate, args.jobs, args.rounds, Path(tmp), args.reference)
        else:
            bench_synthetic(args.episodes, args.seconds, args.ft_rate, args.jobs, Path(tmp))


if __name__ == "__main__":
    main()
