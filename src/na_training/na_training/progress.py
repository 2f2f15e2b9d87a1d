"""Progress of a long run: a tqdm bar on a terminal, plain periodic lines in a log.

A bar redraws itself with carriage returns, which turns a log file into one long line; so the bar
is drawn only when the stream is a terminal, and otherwise a line such as
``convert: 120/340 bags, 1,562,310 messages (41,112 messages/s), 14.0 s`` is written every
``interval_s`` seconds and once at the end.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    """Counts items (e.g. bags) and messages; ``advance`` after each item, ``close`` at the end."""

    def __init__(self, label: str, total: int, unit: str, *, enabled: bool = True, stream: TextIO | None = None,
                 interval_s: float = 10.0, clock=time.monotonic) -> None:
        self.label, self.total, self.unit = label, total, unit
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.interval_s = interval_s
        self._clock = clock
        self._start = self._last_line = clock()
        self.done = self.messages = self.skipped = 0
        self._done_in_line = 0
        self._bar = None
        if enabled and _is_terminal(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=label, unit=unit, file=self.stream, dynamic_ncols=True)

    def advance(self, messages: int = 0, skipped: bool = False) -> None:
        self.done += 1
        self.messages += messages
        self.skipped += int(skipped)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(f"{self.rate():,.0f} messages/s", refresh=False)
            self._bar.update(1)
        elif self._clock() - self._last_line >= self.interval_s:
            self._write_line()

    def rate(self) -> float:
        """Messages per second so far."""
        return self.messages / max(self._clock() - self._start, 1e-9)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        elif self.enabled and self.done > self._done_in_line:
            self._write_line()
        self.enabled = False

    def line(self) -> str:
        skipped = f", {self.skipped} skipped" if self.skipped else ""
        return (f"{self.label}: {self.done}/{self.total} {self.unit}s{skipped}, {self.messages:,} messages "
                f"({self.rate():,.0f} messages/s), {self._clock() - self._start:.1f} s")

    def _write_line(self) -> None:
        self._last_line = self._clock()
        self._done_in_line = self.done
        print(self.line(), file=self.stream, flush=True)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):     # closed or not a file
        return False
