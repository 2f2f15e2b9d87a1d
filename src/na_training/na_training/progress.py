"""Training progress that says what it is doing: a tqdm bar on a terminal, plain periodic lines in logs.

A bar redraws itself with carriage returns, which fills a log file with one long line; when the
stream is not a terminal the same information is printed as one line every ``period_s`` seconds
(and at the last step). :meth:`Progress.note` prints one-off events (compiling, validating,
checkpoint written) in both modes.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from tqdm import tqdm


class Progress:
    def __init__(self, total: int, initial: int = 0, *, enabled: bool = True, stream: TextIO | None = None,
                 period_s: float = 15.0) -> None:
        self.stream = stream or sys.stdout
        self.enabled = enabled
        self.total = total
        self.period_s = period_s
        self.terminal = enabled and _is_terminal(self.stream)
        self._bar = (tqdm(total=total, initial=initial, unit="step", dynamic_ncols=True, file=self.stream)
                     if self.terminal else None)
        self._last_line = time.monotonic()
        self._started = time.monotonic()
        self._first_step = initial

    def note(self, text: str) -> None:
        """A one-off event line (kept above the bar on a terminal)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.write(text, file=self.stream)
        else:
            print(text, file=self.stream, flush=True)

    def update(self, step: int, fields: dict[str, Any]) -> None:
        """Step ``step`` is done; ``fields`` are shown beside it (bar postfix or periodic line)."""
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.update(step - self._bar.n)
            self._bar.set_postfix(fields, refresh=False)
            return
        now = time.monotonic()
        if now - self._last_line < self.period_s and step < self.total:
            return
        self._last_line = now
        done = step - self._first_step
        eta = (now - self._started) / done * (self.total - step) if done > 0 else float("nan")
        shown = ", ".join(f"{k} {v}" for k, v in fields.items())
        print(f"step {step}/{self.total}: {shown}; eta {_duration(eta)}", file=self.stream, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _duration(seconds: float) -> str:
    if seconds != seconds:      # NaN
        return "?"
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"
