"""One executor abstraction for embarrassingly parallel loops.

``--scheduler`` chooses: ``serial``, ``processes`` (local worker processes, the
default), ``local`` (a ``dask.distributed.LocalCluster``) or ``tcp://HOST:PORT``
(an existing Dask scheduler).  Tasks get their randomness from
``numpy.random.SeedSequence(seed).spawn(n)``, one child per task, so results are
identical whichever backend runs them.

:func:`executor` yields an :class:`Executor` whose ``imap_unordered(fn, items)``
yields ``(index, result)`` as tasks complete (so callers can checkpoint each
one) and whose ``map(fn, items)`` returns results in order.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .errors import InputError

SCHEDULERS = ("serial", "processes", "local")


def check_scheduler(scheduler: str) -> str:
    if scheduler in SCHEDULERS or (isinstance(scheduler, str) and scheduler.startswith("tcp://")):
        return scheduler
    raise InputError("scheduler", f"must be serial, processes, local or tcp://HOST:PORT (got {scheduler!r})")


def spawn_seeds(seed: int | None, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent child seeds of ``seed`` (the same whichever backend runs the tasks)."""
    return np.random.SeedSequence(seed).spawn(n)


class Executor:
    def __init__(self, kind: str, pool=None, client=None):
        self.kind = kind
        self._pool = pool
        self._client = client

    def imap_unordered(self, fn: Callable, items: Iterable[Any]) -> Iterator[tuple[int, Any]]:
        items = list(items)
        if self.kind == "serial":
            for i, item in enumerate(items):
                yield i, fn(item)
        elif self.kind == "processes":
            from concurrent.futures import as_completed

            futures = {self._pool.submit(fn, item): i for i, item in enumerate(items)}
            try:
                for fut in as_completed(futures):
                    yield futures[fut], fut.result()
            finally:
                for fut in futures:
                    fut.cancel()
        else:
            from dask.distributed import as_completed

            futures = self._client.map(fn, items, pure=False)
            index = {fut.key: i for i, fut in enumerate(futures)}
            try:
                for fut in as_completed(futures):
                    yield index[fut.key], fut.result()
            finally:
                self._client.cancel(futures)

    def map(self, fn: Callable, items: Iterable[Any]) -> list:
        items = list(items)
        out: list = [None] * len(items)
        for i, result in self.imap_unordered(fn, items):
            out[i] = result
        return out


@contextmanager
def executor(scheduler: str = "processes", workers: int | None = None):
    """Context manager yielding an :class:`Executor` for ``scheduler``."""
    check_scheduler(scheduler)
    workers = workers or os.cpu_count() or 1
    if scheduler == "serial":
        yield Executor("serial")
    elif scheduler == "processes":
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: forking a process that holds torch/numba/BLAS threads can deadlock
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            yield Executor("processes", pool=pool)
    else:
        from dask.distributed import Client, LocalCluster

        cluster = None
        if scheduler == "local":
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout=10)
            except OSError as exc:
                raise InputError("scheduler", f"cannot reach Dask scheduler {scheduler} ({exc})") from None
        try:
            yield Executor("dask", client=client)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
