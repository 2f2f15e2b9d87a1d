"""Independent tasks in worker processes, results in task order (``na-train convert --jobs``).

Each task is a picklable call. With one job the calls run in this process; with more they run in a
``concurrent.futures`` process pool and come back in the order they were given, whatever order the
workers finish in, so the caller's output does not depend on the job count. Workers are forked
(the parent's imports come along; measured faster to start than spawn or forkserver) and ignore
Ctrl-C: the parent handles it, cancels what has not started and waits for what has.

A worker that dies (killed, out of memory, a crash in native code) breaks the whole pool, and every
task not yet finished fails with it. The first of those is then run again alone in a fresh
worker: if that worker dies too, the task is the culprit and fails with ``BrokenProcessPool``;
otherwise the remaining tasks go to a new pool and the run goes on.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context
from typing import Any, TypeVar

START_METHOD = "fork"

Result = TypeVar("Result")


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask, e.g. a container's or taskset's share)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:            # not Linux
        return max(1, os.cpu_count() or 1)


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _new_pool(jobs: int) -> ProcessPoolExecutor:
    return ProcessPoolExecutor(max_workers=jobs, mp_context=get_context(START_METHOD), initializer=_ignore_sigint)


def _returning(value: Any) -> Callable[[], Any]:
    return lambda: value


def _raising(error: BaseException) -> Callable[[], Any]:
    def outcome() -> Any:
        raise error
    return outcome


class OrderedWorkers:
    """``with OrderedWorkers(jobs) as workers: for outcome in workers.run(fn, args_list): ...``

    ``run`` yields, per task and in task order, a zero-argument callable that returns the task's
    result or raises its exception. Leaving the ``with`` block, or :meth:`close`, cancels the tasks
    that have not started and waits for the running ones.
    """

    def __init__(self, jobs: int) -> None:
        if jobs < 1:
            raise ValueError(f"jobs must be >= 1, got {jobs}")
        self.jobs = jobs
        self._pool: ProcessPoolExecutor | None = None

    def __enter__(self) -> OrderedWorkers:
        if self.jobs > 1:
            self._pool = _new_pool(self.jobs)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Cancel what has not started, wait for what has (no worker is left running afterwards)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def run(self, fn: Callable[..., Result], tasks: Sequence[tuple[Any, ...]]) -> Iterator[Callable[[], Result]]:
        if self._pool is None:
            for args in tasks:
                yield lambda args=args: fn(*args)
            return
        futures: list[Future] = [self._pool.submit(fn, *args) for args in tasks]
        for k, args in enumerate(tasks):
            try:
                outcome = _returning(futures[k].result())
            except BrokenProcessPool:
                outcome = self._alone(fn, args)
                self.close()
                self._pool = _new_pool(self.jobs)
                futures[k + 1:] = [self._pool.submit(fn, *later) for later in tasks[k + 1:]]
            except Exception as err:            # the task's own exception, raised where the caller asks
                outcome = _raising(err)
            yield outcome

    @staticmethod
    def _alone(fn: Callable[..., Result], args: tuple[Any, ...]) -> Callable[[], Result]:
        """The task run again in a fresh single worker (so a death is its own)."""
        with _new_pool(1) as pool:
            try:
                return _returning(pool.submit(fn, *args).result())
            except Exception as err:
                return _raising(err)
