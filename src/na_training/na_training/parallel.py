"""Data-parallel training over devices and processes with JAX's own engines.

One 1-D :class:`jax.sharding.Mesh` over the devices (axis ``data``): every batch is split along its
first axis (rows) over the mesh, parameters, EMA and optimiser state are replicated, and ``jax.jit``
(GSPMD) partitions the step and inserts the gradient all-reduce. The loss of a sharded step is the
loss of the whole global batch (means over all rows, not a mean of per-device means), so a run on N
devices follows the single-device run with the same global batch, up to float reduction order.

Several processes (hosts) join through :func:`initialize_distributed` (``jax.distributed``); each
then builds only the rows of the global batch that live on its own devices (:meth:`DataParallel.local_rows`).
"""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

DATA_AXIS = "data"
DEFAULT_INIT_TIMEOUT_S = 300
COMPILE_BARRIER_TIMEOUT_S = 3600
_barrier_numbers = itertools.count()


class ParallelError(ValueError):
    """Devices, batch sizes or the multi-process setup cannot be used as asked (one-line message)."""


def select_devices(count: int | None = None) -> list[jax.Device]:
    """The first ``count`` devices of the run (all processes' devices; default: all of them)."""
    devices = jax.devices()
    if count is None:
        return devices
    if count < 1:
        raise ParallelError(f"--devices must be >= 1, got {count}")
    if count > len(devices):
        kind = devices[0].platform.upper()
        hint = (" (more CPU devices: XLA_FLAGS=--xla_force_host_platform_device_count=N before the start)"
                if kind == "CPU" else "")
        raise ParallelError(f"--devices {count}: only {len(devices)} {kind} device(s) visible{hint}")
    if jax.process_count() > 1 and count != len(devices):
        raise ParallelError(f"--devices {count}: a run of {jax.process_count()} processes uses all "
                            f"{len(devices)} devices (leave --devices out)")
    return devices[:count]


class DataParallel:
    """The mesh, the two shardings (rows split / replicated) and the moves of host data onto them."""

    def __init__(self, devices: Sequence[jax.Device] | None = None) -> None:
        devices = list(devices) if devices is not None else jax.devices()
        self.mesh = Mesh(np.asarray(devices), (DATA_AXIS,))
        self.rows = NamedSharding(self.mesh, PartitionSpec(DATA_AXIS))
        self.replicated = NamedSharding(self.mesh, PartitionSpec())

    @property
    def device_count(self) -> int:
        return self.mesh.size

    @property
    def is_primary(self) -> bool:
        """Whether this process writes the run directory's files and prints (process 0)."""
        return jax.process_index() == 0

    def describe(self) -> str:
        devices = self.mesh.devices.ravel()
        text = f"{len(devices)} {devices[0].platform.upper()} device(s)"
        if jax.process_count() > 1:
            text += f" over {jax.process_count()} processes (this is process {jax.process_index()})"
        return text

    def check_batch_size(self, rows: int, name: str) -> None:
        if rows % self.device_count:
            raise ParallelError(f"{name} {rows} is not divisible by the {self.device_count} devices; use a "
                                f"multiple of {self.device_count}, or a --devices count that divides it")

    def local_rows(self, rows: int) -> slice:
        """The rows of a ``rows``-row global batch held by this process's devices (one contiguous block)."""
        blocks = sorted({(index[0].start or 0, rows if index[0].stop is None else index[0].stop)
                         for index in self.rows.addressable_devices_indices_map((rows,)).values()})
        for (_, stop), (start, _) in itertools.pairwise(blocks):
            if stop != start:
                raise ParallelError("this process's devices do not hold one contiguous block of the batch")
        return slice(blocks[0][0], blocks[-1][1])

    def place_rows(self, local: Mapping[str, np.ndarray], rows: int) -> dict[str, jax.Array]:
        """Global row-sharded arrays of a ``rows``-row batch from this process's block of it."""
        block = self.local_rows(rows)
        placed = {}
        for key, values in local.items():
            values = np.asarray(values)
            if values.shape[0] != block.stop - block.start:
                raise ParallelError(f"batch array {key!r} has {values.shape[0]} rows, this process holds "
                                    f"{block.stop - block.start}")
            shape = (rows, *values.shape[1:])
            placed[key] = jax.make_array_from_callback(
                shape, self.rows, lambda index, v=values: v[_shift(index, block.start)])
        return placed

    def place_batch(self, batch: Mapping[str, np.ndarray]) -> dict[str, jax.Array]:
        """A whole global batch (built alike by every process, e.g. validation) onto the mesh."""
        rows = int(next(iter(batch.values())).shape[0])
        block = self.local_rows(rows)
        return self.place_rows({k: np.asarray(v)[block] for k, v in batch.items()}, rows)

    def replicate(self, tree: Any) -> Any:
        """A pytree of arrays (identical in every process) replicated on every device of the mesh."""
        def put(value):
            host = np.asarray(value)
            return jax.make_array_from_callback(host.shape, self.replicated, lambda index: host[index])
        return jax.tree.map(put, tree)

    def jit(self, function: Callable) -> Callable:
        """``jax.jit`` whose outputs (losses, gradients, parameters) are replicated over the mesh."""
        return jax.jit(function, out_shardings=self.replicated)


def _shift(index: tuple[slice, ...], offset: int) -> tuple[slice, ...]:
    rows = index[0]
    start = (rows.start or 0) - offset
    stop = None if rows.stop is None else rows.stop - offset
    return (slice(start, stop), *index[1:])


def wait_for_coordinator(address: str, timeout_s: float) -> None:
    """Wait until something listens at ``address`` (HOST:PORT), at most ``timeout_s``.

    Why not leave the wait to JAX: when ``jax.distributed``'s connect deadline passes it aborts the
    process (a fatal log line and a stack dump), so the unreachable case is caught here first."""
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ParallelError(f"--coordinator {address!r} is not HOST:PORT")
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0):
                return
        except OSError as err:
            if time.monotonic() >= deadline:
                raise ParallelError(f"coordinator {address} did not answer within {timeout_s:g} s ({err}); is "
                                    f"process 0 running and the port reachable?") from None
            time.sleep(0.2)


def initialize_distributed(coordinator: str | None = None, num_processes: int | None = None,
                           process_id: int | None = None, timeout_s: float = DEFAULT_INIT_TIMEOUT_S) -> None:
    """Join a multi-process run (``jax.distributed.initialize``) before any other JAX call.

    With ``coordinator`` None, JAX detects the cluster from its environment (SLURM, Open MPI, ...).
    CPU processes exchange gradients through gloo collectives."""
    if coordinator is not None:
        if num_processes is None or process_id is None:
            raise ParallelError("--coordinator needs --num-processes and --process-id")
        if num_processes < 1 or not 0 <= process_id < num_processes:
            raise ParallelError(f"--process-id must be in [0, {num_processes}) and --num-processes >= 1, got "
                                f"--process-id {process_id} --num-processes {num_processes}")
        started = time.monotonic()
        if process_id != 0:
            wait_for_coordinator(coordinator, timeout_s)
        timeout_s = max(1.0, timeout_s - (time.monotonic() - started))
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    try:
        jax.distributed.initialize(coordinator, num_processes, process_id, initialization_timeout=int(timeout_s))
    except (RuntimeError, ValueError) as err:
        first_line = (str(err).strip().splitlines() or [type(err).__name__])[0][:200]
        hint = "" if coordinator else " (--distributed found no cluster environment JAX knows; give --coordinator)"
        raise ParallelError(f"jax.distributed could not start: {first_line}{hint}") from None



def compile_then_sync(function: Callable, args: Sequence[Any], what: str) -> None:
    """Compile ``function`` for ``args`` and wait until every process has compiled it too.

    CPU collectives (gloo) give a peer 30 s to join the first collective of a program; one process's compile
    can take longer than another's, so the first run waits at a barrier of jax.distributed's coordination
    service (no collective; through Orbax's helper) instead. The next call reuses the compiled executable."""
    if jax.process_count() == 1:
        return
    import orbax.checkpoint as ocp

    function.lower(*args).compile()
    barrier = ocp.multihost.get_barrier_sync_fn()
    barrier(key=f"na_training compiled {next(_barrier_numbers)}: {what}", timeout_ms=COMPILE_BARRIER_TIMEOUT_S * 1000)
