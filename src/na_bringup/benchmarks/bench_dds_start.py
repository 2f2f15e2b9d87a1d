"""Start-up stalls of a Python node's publishing, with and without Fast DDS's shared-memory transport.

A node that starts while other participants already run opens their ports as it discovers them. On Fast DDS's
shared-memory transport that open can wait 333 ms on a port check while holding locks a publish needs, and rclpy
holds the GIL through the publish, so the whole process stops (``na_common.dds_transport``). This benchmark
starts ``--peers`` idle participants, then ``--starts`` fresh processes one after another. Each creates a node
and a publisher and publishes at 100 Hz for ``--seconds``; it reports how long the node and the publisher took to
create and the longest gap between two of its publishes. It runs the same sequence twice, on a private domain each:

* ``localhost-shm``: ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST`` as such (rmw_fastrtps adds shared memory);
* ``localhost-udp``: the same after ``na_common.dds_transport.use_udp_transport`` (what this suite's processes run).

A freeze is a step (node, publisher or publish gap) of at least ``--freeze-ms``.

    python src/na_bringup/benchmarks/bench_dds_start.py --peers 10 --starts 15
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
import time

from na_common.dds_transport import plain_localhost_environment, use_udp_transport
from na_common.machine import machine_line

_FRESH = textwrap.dedent("""
    import json, sys, time
    import rclpy
    from std_msgs.msg import String
    rclpy.init()
    t0 = time.monotonic(); node = rclpy.create_node("fresh_publisher"); t1 = time.monotonic()
    pub = node.create_publisher(String, "/dds_start_bench", 10); t2 = time.monotonic()
    end = time.monotonic() + float(sys.argv[1]); last = time.monotonic(); worst_gap = 0.0; next_at = last
    while time.monotonic() < end:
        pub.publish(String(data="x"))
        now = time.monotonic(); worst_gap = max(worst_gap, now - last); last = now
        next_at += 0.01
        time.sleep(max(0.0, next_at - time.monotonic()))
    print(json.dumps({"node_ms": 1e3 * (t1 - t0), "publisher_ms": 1e3 * (t2 - t1), "gap_ms": 1e3 * worst_gap}))
    node.destroy_node(); rclpy.shutdown()
""")

_PEER = textwrap.dedent("""
    import sys, time
    import rclpy
    from rclpy.executors import ExternalShutdownException
    from std_msgs.msg import String
    rclpy.init(); node = rclpy.create_node(f"idle_peer_{sys.argv[1]}")
    node.create_subscription(String, "/dds_start_bench", lambda message: None, 10)
    end = time.monotonic() + float(sys.argv[2])
    try:
        while time.monotonic() < end:
            rclpy.spin_once(node, timeout_sec=0.1)
    except (KeyboardInterrupt, ExternalShutdownException):   # terminated by the benchmark
        pass
""")


def _environment(transport: str, domain: int) -> dict[str, str]:
    environ = {**plain_localhost_environment(os.environ), "ROS_DOMAIN_ID": str(domain)}
    if transport == "localhost-udp":
        use_udp_transport(environ)
    return environ


def run(transport: str, domain: int, peers: int, starts: int, seconds: float, freeze_ms: float) -> list[dict]:
    environ = _environment(transport, domain)
    lifetime = 8.0 + starts * (seconds + 3.0)
    idle = [subprocess.Popen([sys.executable, "-c", _PEER, str(k), str(lifetime)], env=environ)
            for k in range(peers)]
    results = []
    try:
        time.sleep(5.0)   # the peers' ports exist and have been checked by their watchdogs
        for k in range(starts):
            done = subprocess.run([sys.executable, "-c", _FRESH, str(seconds)], env=environ, capture_output=True,
                                  text=True, timeout=60 + seconds)
            lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
            if done.returncode != 0 or not lines:
                raise SystemExit(f"{transport}: start {k + 1} failed: {done.stderr.strip()[-400:]}")
            result = json.loads(lines[-1])
            result["freeze"] = max(result.values()) >= freeze_ms
            results.append(result)
            print(f"{transport:14s} start {k + 1:2d}: node {result['node_ms']:6.1f} ms, publisher "
                  f"{result['publisher_ms']:6.1f} ms, longest publish gap {result['gap_ms']:6.1f} ms"
                  f"{'  FREEZE' if result['freeze'] else ''}", flush=True)
            time.sleep(1.0)
    finally:
        for process in idle:
            process.terminate()
        for process in idle:
            process.wait(timeout=10)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n\n".join(__doc__.split("\n\n")[1:]))
    parser.add_argument("--peers", type=int, default=10, help="idle participants running before the starts (10)")
    parser.add_argument("--starts", type=int, default=15, help="fresh publishing processes per transport (15)")
    parser.add_argument("--seconds", type=float, default=2.0, help="each fresh process publishes this long (2 s)")
    parser.add_argument("--freeze-ms", type=float, default=250.0, help="a step this long is a freeze (250 ms)")
    parser.add_argument("--domain", type=int, default=int(os.environ.get("ROS_DOMAIN_ID", "0")) or 77,
                        help="first of the two private ROS domains used")
    args = parser.parse_args(argv)
    print(f"machine: {machine_line()}", flush=True)
    summary = []
    for offset, transport in enumerate(("localhost-shm", "localhost-udp")):
        results = run(transport, (args.domain + offset) % 232, args.peers, args.starts, args.seconds, args.freeze_ms)
        frozen = sum(result["freeze"] for result in results)
        worst = max(max(result["node_ms"], result["publisher_ms"], result["gap_ms"]) for result in results)
        summary.append(f"{transport}: {frozen} of {len(results)} starts froze (>= {args.freeze_ms:.0f} ms), "
                       f"longest step {worst:.0f} ms")
    print("\n".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
