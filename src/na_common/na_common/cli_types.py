"""Argument types for the command-line tools: a bad value is refused by argparse in one line naming the option."""

from __future__ import annotations

import argparse
import math


def positive_int(text: str) -> int:
    """A whole number of at least 1 (counts: episodes, jobs)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text}")
    return value


def positive_float(text: str) -> float:
    """A finite number above 0 (durations, rates, periods)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a finite number above 0, got {text}")
    return value
