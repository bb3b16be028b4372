"""One executor abstraction for embarrassingly parallel loops.

``--scheduler`` chooses: ``serial``, ``processes`` (local worker processes, the
default), ``local`` (a ``dask.distributed.LocalCluster``) or ``tcp://HOST:PORT``
(an existing Dask scheduler).  Tasks get their randomness from
``numpy.random.SeedSequence(seed).spawn(n)``, one child per task, so results are
identical whichever backend runs them.
"""

from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Callable, Iterable

import numpy as np

from .errors import InputError

SCHEDULERS = ("serial", "processes", "local")


def check_scheduler(scheduler: str) -> str:
    if scheduler in SCHEDULERS or (isinstance(scheduler, str) and scheduler.startswith("tcp://")):
        return scheduler
    raise InputError("scheduler", f"must be serial, processes, local or tcp://HOST:PORT (got {scheduler!r})")


def spawn_seeds(seed: int | None, n: int) -> list[np.random.SeedSequence]:
    return np.random.SeedSequence(seed).spawn(n)


@contextmanager
def executor(scheduler: str = "processes", workers: int | None = None):
    """Yield ``run(fn, items) -> list`` that maps ``fn`` over ``items`` in order."""
    check_scheduler(scheduler)
    workers = workers or os.cpu_count() or 1
    if scheduler == "serial":
        yield lambda fn, items: [fn(item) for item in items]
    elif scheduler == "processes":
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        # spawn, not fork: forking a process that holds torch/numba/BLAS threads can deadlock
        with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("spawn")) as pool:
            yield lambda fn, items: list(pool.map(fn, items))
    else:
        from dask.distributed import Client, LocalCluster

        if scheduler == "local":
            cluster = LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                   dashboard_address=None)
            client = Client(cluster)
        else:
            cluster = None
            client = Client(scheduler)
        try:
            def run(fn: Callable, items: Iterable[Any]) -> list:
                futures = client.map(fn, list(items), pure=False)
                return client.gather(futures)

            yield run
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
