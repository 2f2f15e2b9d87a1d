"""Latencies of the most recent events of a node (ROS-free): what its /diagnostics and summaries report."""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import numpy as np


@dataclass
class LatencyStats:
    """The most recent latencies (s), 2,000 at most."""

    samples: deque = field(default_factory=lambda: deque(maxlen=2000))

    def add(self, seconds: float) -> None:
        self.samples.append(seconds)

    def percentile(self, q: float) -> float:
        return float(np.percentile(np.fromiter(self.samples, float), q)) if self.samples else math.nan
