"""Watch the host while a system test runs: how late a SCHED_FIFO 99 thread wakes from a 2 ms sleep. Run by the
workspace conftest beside every system test. A wake-up far later than the kernel's real-time throttling can
explain (it holds real-time threads back at most 50 ms of each second by default) means the machine itself
stopped, so nothing of ours could run either; a failed test's report then says so.

``--log FILE``: the first line is ``realtime 1`` (or 0 where SCHED_FIFO was refused); then one line per wake-up
more than 20 ms late, ``<unix time the sleep began> <ms late>``, flushed as it happens. Ends on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time

SLEEP_S = 0.002
LATE_S = 0.020


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", required=True, help="file to write the late wake-ups to")
    args = parser.parse_args()
    realtime = True
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(99))
    except (AttributeError, OSError):
        realtime = False
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    with open(args.log, "w", buffering=1) as log:
        log.write(f"realtime {int(realtime)}\n")
        while not stop:
            asleep, asleep_wall = time.monotonic(), time.time()
            time.sleep(SLEEP_S)
            lateness = time.monotonic() - asleep - SLEEP_S
            if lateness > LATE_S:
                log.write(f"{asleep_wall:.3f} {lateness * 1e3:.1f}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
