"""The live rig's ground truth and pace, from the physics process to the processes that serve them (ROS-free).

After every step the physics publishes one record (:class:`TruthLink`, a runner link): the true force on
the tool, contact, grasp, the wrench on the F/T sensor, and how far the physics is behind wall time.
The F/T emulators and the ROS truth publisher, each in a process of its own, read the latest record
(:class:`RigRecordReader`) without a lock and without waiting for the physics, so what they send always
belongs to one step, and a stalled physics shows as a stalled truth, not as a silent sensor.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from na_sim.shared_tables import SnapshotChannel
from na_sim.thread_clock import TimeSplit

RIG_RECORD_DTYPE = np.dtype([
    ("time", np.float64), ("force_base", np.float64, (3,)), ("contact_force_base", np.float64, (3,)),
    ("contact", np.uint8), ("grasp", np.uint8), ("payload_kg", np.float64), ("sensor_wrench", np.float64, (6,)),
    ("lag", np.float64), ("worst_lag", np.float64), ("stalls", np.uint64), ("last_stall_lag", np.float64),
    ("skipped", np.uint64), ("steps", np.uint64),
    ("last_stall_span", np.float64), ("last_stall_ran", np.float64), ("last_stall_waited", np.float64)])


@dataclass(frozen=True)
class TruthSample:
    """What the truth publisher sends of one step."""

    time: float
    force_base: np.ndarray
    contact: bool
    grasp: bool


class TruthLink:
    """Physics side: publishes ``rig.truth`` and the runner's pace after every step (``runner`` set once it
    exists; ``pull`` does nothing: nothing comes back)."""

    def __init__(self, rig: Any) -> None:
        self.rig = rig
        self.runner: Any = None
        self.channel = SnapshotChannel(RIG_RECORD_DTYPE.itemsize)
        self._record = np.zeros((), dtype=RIG_RECORD_DTYPE)
        self.push(rig.truth.time, 0)

    @property
    def path(self) -> str:
        return self.channel.path

    def pull(self) -> None:
        pass

    def push(self, time_s: float, steps: int) -> None:
        truth, record, runner = self.rig.truth, self._record, self.runner
        record["time"] = time_s
        record["force_base"], record["contact_force_base"] = truth.force_base, truth.contact_force_base
        record["contact"], record["grasp"], record["payload_kg"] = truth.contact, truth.grasp, truth.payload_kg
        record["sensor_wrench"] = truth.sensor_wrench
        record["steps"] = steps
        if runner is not None:
            record["lag"], record["worst_lag"], record["skipped"] = runner.lag, runner.worst_lag, runner.skipped
            record["stalls"] = len(runner.stalls)
            if runner.stalls:
                stall = runner.stalls[-1]
                record["last_stall_lag"] = stall.worst
                record["last_stall_span"], record["last_stall_ran"], record["last_stall_waited"] = stall.split
        self.channel.publish(record.tobytes())

    def stop(self) -> None:
        self.channel.close()


class RigRecordReader:
    """Another process's view of the latest record."""

    def __init__(self, path: str) -> None:
        self.channel = SnapshotChannel(RIG_RECORD_DTYPE.itemsize, path)

    def read(self) -> np.void:
        return np.frombuffer(self.channel.read(), dtype=RIG_RECORD_DTYPE)[0]

    def sensor_wrench(self) -> np.ndarray:
        return self.read()["sensor_wrench"].copy()

    def truth(self) -> TruthSample:
        record = self.read()
        return TruthSample(float(record["time"]), record["force_base"].copy(), bool(record["contact"]),
                           bool(record["grasp"]))

    def close(self) -> None:
        self.channel.close()


class PaceStatus:
    """The rig's own ``/diagnostics`` status from the records: ERROR for ``hold_s`` after the physics fell behind
    wall time past ``margin`` (a new stall counted), WARN while it lags by more than half the margin."""

    def __init__(self, reader: RigRecordReader, margin: float, hold_s: float = 1.5) -> None:
        self.reader, self.margin, self.hold_s = reader, margin, hold_s
        self._stalls, self._stall_seen = 0, -float("inf")

    def status(self) -> dict[str, Any]:
        record = self.reader.read()
        stalls = int(record["stalls"])
        if stalls > self._stalls:
            self._stalls, self._stall_seen = stalls, time.monotonic()
        if time.monotonic() - self._stall_seen < self.hold_s:
            split = TimeSplit(float(record["last_stall_span"]), float(record["last_stall_ran"]),
                              float(record["last_stall_waited"]))
            level, message = 2, (f"physics fell behind wall time by {record['last_stall_lag'] * 1e3:.0f} ms "
                                 f"(margin {self.margin * 1e3:.0f} ms; {split.describe('the physics thread')})")
        elif record["lag"] > self.margin / 2:
            level, message = 1, f"physics lagging by {record['lag'] * 1e3:.0f} ms"
        else:
            level, message = 0, "at pace"
        values = {"lag_ms": f"{record['lag'] * 1e3:.1f}", "worst_lag_ms": f"{record['worst_lag'] * 1e3:.1f}",
                  "stalls": str(stalls), "skipped_steps": str(int(record["skipped"])),
                  "steps": str(int(record["steps"])), "sim_time_s": f"{record['time']:.3f}"}
        return {"level": level, "message": message, "values": values}
