"""na-record: drive the recorder from the keyboard.

Enter starts/stops an episode, `d` discards the one being recorded, `g` toggles the payload-grasp
flag (/episode/grasp), `q` quits (stopping a running episode first). Task and payload come from
the command line or are asked for. While recording, one status line shows counts and rates.
Works with a terminal (single keys) and with piped input (one command per line).
"""

from __future__ import annotations

import argparse
import json
import select
import shutil
import signal
import sys
import termios
import time
import tty
from contextlib import contextmanager

import rclpy
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import Bool, String

from na_common import topics
from na_common.dds_transport import use_udp_transport
from na_common.episode_bag.metadata import CONDITION_FORMS, CONDITION_PATTERN, FORCE_SOURCES
from na_msgs.msg import EpisodeInfo
from na_msgs.srv import DiscardEpisode, StartEpisode, StopEpisode
from na_teleop.record_status import RecorderWatch, status_line


def _condition(value: str) -> str:
    if not CONDITION_PATTERN.match(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not {CONDITION_FORMS}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="na-record", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", help="task name (asked for when missing), e.g. pick_place, push_px")
    parser.add_argument("--payload", type=float, help="payload held during grasp intervals, grams (default 0)")
    parser.add_argument("--force-source", choices=FORCE_SOURCES,
                        help="label source (default: payload when --payload > 0, else none)")
    parser.add_argument("--condition", type=_condition, default="nominal",
                        help=f"motor condition label: {CONDITION_FORMS}, e.g. restricted_joint3 (default nominal)")
    parser.add_argument("--operator", default="", help="who drives the leader")
    parser.add_argument("--notes", default="", help="free text stored with each episode")
    parser.add_argument("--recorder", default="/recorder", help="recorder node name (default /recorder)")
    parser.add_argument("--timeout", type=float, default=10.0, help="s to wait for the recorder services")
    return parser


@contextmanager
def single_keys(stream):
    """Unbuffered single-key input on a terminal; line input otherwise."""
    if not stream.isatty():
        yield False
        return
    fd = stream.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


class RecordClient:
    def __init__(self, node: Node, recorder: str, timeout: float) -> None:
        self.node = node
        self.timeout = timeout
        self.start_client = node.create_client(StartEpisode, f"{recorder}/start")
        self.stop_client = node.create_client(StopEpisode, f"{recorder}/stop")
        self.discard_client = node.create_client(DiscardEpisode, f"{recorder}/discard")
        self.grasp_pub = node.create_publisher(Bool, topics.GRASP, 10)
        self.status: dict = {}
        self.watch = RecorderWatch(time.monotonic())
        node.create_subscription(String, f"{recorder}/status", self._on_status, 10)

    def _on_status(self, msg: String) -> None:
        self.status = json.loads(msg.data)
        self.watch.on_status(time.monotonic())

    def wait_ready(self) -> bool:
        return all(c.wait_for_service(timeout_sec=self.timeout)
                   for c in (self.start_client, self.stop_client, self.discard_client))

    def call(self, client, request):
        future = client.call_async(request)
        rclpy.spin_until_future_complete(self.node, future, timeout_sec=self.timeout)
        if not future.done():
            return None
        return future.result()


def main(argv: list[str] | None = None) -> int:
    # Ctrl-C (SIGINT) ends the session even when the shell that started us ignored it (a background job of a
    # script inherits SIGINT as ignored, and Python then installs no handler of its own).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return _run(build_parser().parse_args(argv))
    except KeyboardInterrupt:
        print("\nna-record: interrupted (an episode being recorded stays on disk, marked incomplete, until the "
              "recorder stops it)", file=sys.stderr)
        rclpy.try_shutdown()
        return 130


def _run(args: argparse.Namespace) -> int:
    task = args.task or input("task: ").strip()
    if not task:
        print("na-record: a task name is required", file=sys.stderr)
        return 2
    payload = args.payload if args.payload is not None else float(input("payload grams [0]: ").strip() or 0)
    force_source = args.force_source or ("payload" if payload > 0 else "none")
    # Ctrl-C raises KeyboardInterrupt here (handled in main) instead of invalidating the context mid-call.
    use_udp_transport()
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("na_record")
    client = RecordClient(node, args.recorder, args.timeout)
    if not client.wait_ready():
        print(f"na-record: no recorder services under {args.recorder} (is the recorder running?)", file=sys.stderr)
        node.destroy_node()
        rclpy.try_shutdown()
        return 2
    info = EpisodeInfo(task=task, payload_grams=payload, force_source=force_source, condition=args.condition,
                       operator_name=args.operator, notes=args.notes)
    print("Enter: start/stop   d: discard   g: grasp on/off   q: quit", flush=True)
    grasp = False
    recording = False
    code = 0
    with single_keys(sys.stdin) as keys:
        while True:
            rclpy.spin_once(node, timeout_sec=0.05)
            if (lost := client.watch.lost(time.monotonic(), recording)) is not None:
                print(("\n" if keys else "") + lost, file=sys.stderr, flush=True)
                code = 1
            if recording and keys and not client.watch.reported:
                width = shutil.get_terminal_size().columns - 1
                print("\r" + status_line(client.status, width).ljust(width), end="", flush=True)
            ready, _, _ = select.select([sys.stdin], [], [], 0.1)
            if not ready:
                continue
            text = sys.stdin.read(1) if keys else sys.stdin.readline()
            if text == "":          # end of piped input
                text = "q"
            command = text.strip().lower()
            if keys:
                print()
            if text in ("\n", "\r", "\r\n"):          # Enter
                if not recording:
                    result = client.call(client.start_client, StartEpisode.Request(info=info))
                    recording = bool(result and result.success)
                    client.watch.on_status(time.monotonic())
                else:
                    result = client.call(client.stop_client, StopEpisode.Request())
                    recording = not bool(result and result.success)
                print(result.message if result else "na-record: the recorder did not answer", flush=True)
            elif command == "d":
                result = client.call(client.discard_client, DiscardEpisode.Request())
                recording = False
                print(result.message if result else "na-record: the recorder did not answer", flush=True)
            elif command == "g":
                grasp = not grasp
                client.grasp_pub.publish(Bool(data=grasp))
                print(f"grasp {'on' if grasp else 'off'}", flush=True)
            elif command == "q":
                if recording:
                    result = client.call(client.stop_client, StopEpisode.Request())
                    print(result.message if result else "na-record: the recorder did not answer", flush=True)
                    code = 0 if result and result.success else 1
                break
    node.destroy_node()
    rclpy.try_shutdown()
    return code


if __name__ == "__main__":
    sys.exit(main())
