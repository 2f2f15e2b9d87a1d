"""Adds up the closing lines of several pytest runs into one line, ``suite: N passed, N failed, N skipped``.

``scripts/test.sh`` runs the suite in two pytest runs (the system tests alone); this prints the whole suite's count
once at the end. Errors count as failures. Exits 1 when a log has no closing line (a run that crashed)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

_CLOSING = re.compile(r"\b(?:passed|failed|skipped|errors?|deselected|no tests ran)\b.* in [0-9.]+s")
_COUNT = re.compile(r"(\d+) (passed|failed|skipped|errors?)\b")


def closing_counts(log: Path) -> dict[str, int] | None:
    """The counts on the last closing line of one pytest log; None when it has none."""
    lines = [line for line in log.read_text(errors="replace").splitlines() if _CLOSING.search(line)]
    if not lines:
        return None
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for number, word in _COUNT.findall(lines[-1]):
        counts["failed" if word.startswith("error") else word] += int(number)
    return counts


def main(logs: list[str]) -> int:
    total = {"passed": 0, "failed": 0, "skipped": 0}
    for log in logs:
        counts = closing_counts(Path(log))
        if counts is None:
            print(f"suite: the pytest run logged in {log} ended without a closing line", file=sys.stderr)
            return 1
        for key, number in counts.items():
            total[key] += number
    print(f"suite: {total['passed']} passed, {total['failed']} failed, {total['skipped']} skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
