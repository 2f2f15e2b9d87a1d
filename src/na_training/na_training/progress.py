"""Progress of a long job: a tqdm bar on a terminal, plain periodic lines in a log.

A bar redraws itself with carriage returns, which turns a log file into one long line; so the bar
is drawn only when the stream is a terminal, and otherwise the same information is printed as one
plain line every few seconds (and once at the end). ``ItemProgress`` counts items and messages
(conversion: ``convert: 120/340 bags, 1,562,310 messages (41,112 messages/s), 14.0 s``);
``StepProgress`` counts training steps with their metrics and an ETA, and ``note`` prints one-off
events (compiling, validating) in both modes.
"""

from __future__ import annotations

import sys
import time
from typing import Any, TextIO

from tqdm import tqdm


class ItemProgress:
    """Counts items (e.g. bags) and messages (``what``: e.g. frames); ``advance`` after each item, ``close`` at the
    end."""

    def __init__(self, label: str, total: int, unit: str, *, enabled: bool = True, stream: TextIO | None = None,
                 interval_s: float = 10.0, clock=time.monotonic, what: str = "messages") -> None:
        self.label, self.total, self.unit, self.what = label, total, unit, what
        self.stream = sys.stderr if stream is None else stream
        self.enabled = enabled
        self.interval_s = interval_s
        self._clock = clock
        self._start = self._last_line = clock()
        self.done = self.messages = self.skipped = 0
        self._done_in_line = 0
        self._bar = None
        if enabled and is_terminal(self.stream):
            self._bar = tqdm(total=total, desc=label, unit=unit, file=self.stream, dynamic_ncols=True)

    def advance(self, messages: int = 0, skipped: bool = False) -> None:
        self.done += 1
        self.messages += messages
        self.skipped += int(skipped)
        if not self.enabled:
            return
        if self._bar is not None:
            self._bar.set_postfix_str(f"{self.rate():,.0f} {self.what}/s", refresh=False)
            self._bar.update(1)
        elif self._clock() - self._last_line >= self.interval_s:
            self._write_line()

    def rate(self) -> float:
        """Messages (or ``what``) per second so far."""
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
        return (f"{self.label}: {self.done}/{self.total} {self.unit}s{skipped}, {self.messages:,} {self.what} "
                f"({self.rate():,.0f} {self.what}/s), {self._clock() - self._start:.1f} s")

    def _write_line(self) -> None:
        self._last_line = self._clock()
        self._done_in_line = self.done
        print(self.line(), file=self.stream, flush=True)


class StepProgress:
    def __init__(self, total: int, initial: int = 0, *, enabled: bool = True, stream: TextIO | None = None,
                 period_s: float = 15.0) -> None:
        self.stream = stream or sys.stdout
        self.enabled = enabled
        self.total = total
        self.period_s = period_s
        self.terminal = enabled and is_terminal(self.stream)
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


def is_terminal(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (progress bars only there; logs get plain lines)."""
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _duration(seconds: float) -> str:
    if seconds != seconds:      # NaN
        return "?"
    seconds = round(seconds)
    return f"{seconds // 60} min {seconds % 60:02d} s" if seconds >= 60 else f"{seconds} s"
