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

import logging
import math
import os
import warnings
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Callable, Iterable, Iterator

import numpy as np

from .errors import InputError

SCHEDULERS = ("serial", "processes", "local")
#: seconds to wait for an existing Dask scheduler (tcp://) before giving up with a one-line error
CONNECT_TIMEOUT = 10
#: default seconds a tcp:// run waits while no worker is connected (``--worker-timeout``): long enough
#: for workers that are being started or restarted to join, short enough not to look like a hang
WORKER_TIMEOUT = 120.0
#: seconds between checks of a tcp:// cluster's workers while units are in flight
_MONITOR_EVERY = 1.0


class ClusterError(InputError):
    """The Dask cluster cannot finish the work: no worker for too long, or the scheduler is gone."""

    def __init__(self, reason: str):
        super().__init__("scheduler", reason)


def live_workers(client, worker_timeout: float) -> list[str]:
    """The addresses of the Dask workers connected now, sorted; waits while there are none, up to
    ``worker_timeout`` seconds (``--worker-timeout``), then raises :class:`ClusterError`."""
    import time

    start = time.monotonic()
    while True:
        workers = sorted(client.scheduler_info().get("workers", {}))
        if workers:
            return workers
        if time.monotonic() - start > worker_timeout:
            raise ClusterError(f"no Dask worker connected for {worker_timeout:g} s (--worker-timeout)")
        time.sleep(0.2)


def check_scheduler(scheduler: str, reachable: bool = False) -> str:
    """``scheduler`` unchanged if valid, else a one-line :class:`InputError` naming the field.

    ``reachable=True`` (the CLI) also opens a TCP connection to a ``tcp://`` scheduler, so that a
    wrong address is refused before any work even when the engine would never use it.
    """
    if isinstance(scheduler, str) and scheduler in SCHEDULERS:
        return scheduler
    if isinstance(scheduler, str) and scheduler.startswith("tcp://"):
        host, _, port = scheduler[len("tcp://"):].rpartition(":")
        if host and port.isdigit() and 0 < int(port) < 65536:
            if reachable:
                import socket

                try:
                    with socket.create_connection((host.strip("[]"), int(port)), timeout=5.0):
                        pass
                except OSError as exc:
                    raise InputError("scheduler", f"no Dask scheduler answers at {scheduler} "
                                     f"({exc.strerror or exc})") from None
            return scheduler
        raise InputError("scheduler", f"a Dask scheduler address must look like tcp://HOST:PORT (got {scheduler!r})")
    raise InputError("scheduler", f"must be serial, processes, local or tcp://HOST:PORT (got {scheduler!r})")


_WORKERS: ContextVar = ContextVar("dpposterior_workers", default=None)


def check_workers(workers, field: str = "workers") -> int | None:
    """``workers`` as an int (None stays None), else a one-line :class:`InputError`."""
    if workers is None:
        return None
    if isinstance(workers, bool) or not isinstance(workers, (int, np.integer)) or workers < 1:
        raise InputError(field, f"must be a positive integer (got {workers!r})")
    return int(workers)


@contextmanager
def use_workers(workers: int | None):
    """Inside the block, :func:`default_workers` returns ``workers`` (None: no change).

    This is how ``--workers N`` reaches executors started deep inside a command (the
    gallery's studies, an engine's simulation batches) without threading it through
    every call.
    """
    token = _WORKERS.set(check_workers(workers))
    try:
        yield
    finally:
        _WORKERS.reset(token)


def default_workers() -> int:
    """Worker count for ``processes`` and ``local``: ``--workers`` (:func:`use_workers`) if set,
    else ``$DPPOSTERIOR_WORKERS`` if set, else the CPUs this process may use."""
    if _WORKERS.get() is not None:
        return _WORKERS.get()
    env = os.environ.get("DPPOSTERIOR_WORKERS")
    if env:
        if not env.isdigit() or int(env) < 1:
            raise InputError("DPPOSTERIOR_WORKERS", f"must be a positive integer (got {env!r})")
        return int(env)
    try:  # the CPUs this process may run on (a container or taskset may allow fewer than cpu_count)
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return os.cpu_count() or 1


def spawn_seeds(seed: int | None, n: int) -> list[np.random.SeedSequence]:
    """``n`` independent child seeds of ``seed`` (the same whichever backend runs the tasks)."""
    return np.random.SeedSequence(seed).spawn(n)


def trial_seed(seed: int, index: int, *path: int) -> np.random.SeedSequence:
    """Child ``index`` of ``SeedSequence(seed)`` -- equal to ``spawn_seeds(seed, N)[index]`` for
    any N > index -- or, with ``path``, that child's descendant ``path`` (spawn key
    ``(index, *path)``).  Built directly, so a unit of trials needs only the root seed and its
    trial indices: a trial's randomness does not depend on which unit it was grouped in."""
    return np.random.SeedSequence(seed, spawn_key=(int(index), *map(int, path)))


#: target units per worker when a study sizes its own units (at least 4, see :func:`unit_size`)
UNITS_PER_WORKER = 8
#: largest unit (trials): bounds the work lost to a kill and a unit's memory
MAX_UNIT = 250


def unit_size(total: int, workers: int, *, per_worker: int = UNITS_PER_WORKER, maximum: int = MAX_UNIT) -> int:
    """Items per unit when ``total`` items are shared by ``workers`` workers.

    ``ceil(total / (per_worker * workers))``, between 1 and ``maximum``: about ``per_worker``
    units per worker (never fewer than 4 per worker when there are that many items, since
    ceil(x) <= 2x for x >= 1), so that the last wave of units is short and a slow or lost
    worker costs little, while each unit still holds enough work to amortise its dispatch.
    """
    total, workers = int(total), max(1, int(workers))
    return int(min(maximum, max(1, math.ceil(total / (per_worker * workers)))))


def worker_count(scheduler: str, workers: int | None = None) -> int:
    """How many tasks ``scheduler`` runs at once: 1 for ``serial``; ``workers`` (else
    :func:`default_workers`) for ``processes`` and ``local``; for ``tcp://`` ``workers`` if
    given, else the threads of the cluster's workers (asked of the scheduler)."""
    check_scheduler(scheduler)
    workers = check_workers(workers)
    if scheduler == "serial":
        return 1
    if workers is not None:
        return workers
    if not scheduler.startswith("tcp://"):
        return default_workers()
    from dask.distributed import Client

    try:
        with Client(scheduler, timeout=CONNECT_TIMEOUT) as client:
            info = client.scheduler_info()
    except OSError as exc:
        raise InputError("scheduler", f"cannot reach Dask scheduler {scheduler} ({exc})") from None
    return max(1, sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values()))


class Executor:
    def __init__(self, kind: str, pool=None, client=None, address: str | None = None,
                 worker_timeout: float | None = None):
        self.kind = kind
        self._pool = pool
        self._client = client
        self.address = address
        self.worker_timeout = WORKER_TIMEOUT if worker_timeout is None else float(worker_timeout)
        #: called with the number of connected workers whenever it changes (Dask backends; progress)
        self.on_workers: Callable[[int], None] | None = None

    @property
    def in_process(self) -> bool:
        """Whether its tasks run in this process, one after another (``serial``): an engine may then run its own
        compiled loop instead of mapping tasks."""
        return self.kind == "serial"

    @property
    def runs_actors(self) -> bool:
        """Whether it can keep state on its workers from one call to the next -- Dask actors, stateful objects
        pinned to a worker (``local``, ``tcp://``); :meth:`dask_client` gives their client."""
        return self.kind == "dask"

    def dask_client(self):
        """The Dask client of a ``local`` / ``tcp://`` executor (engines that keep state on workers, e.g. the
        small-area partitions), else None."""
        return self._client if self.runs_actors else None

    def imap_unordered(self, fn: Callable, items: Iterable[Any]) -> Iterator[tuple[int, Any]]:
        items = list(items)
        if self.kind == "serial":
            import copy

            for i, item in enumerate(items):
                # a copy, as the other backends get (pickled): a task that mutates its input
                # (e.g. SeedSequence.spawn advances a counter) must not change the caller's units
                yield i, fn(copy.deepcopy(item))
        elif self.kind == "processes":
            from concurrent.futures import as_completed

            import cloudpickle  # (a dependency of dask) closures and lambdas travel too, as with Dask

            futures = {self._pool.submit(_call_cloudpickled, cloudpickle.dumps((fn, item))): i
                       for i, item in enumerate(items)}
            try:
                for fut in as_completed(futures):
                    yield futures[fut], fut.result()
            finally:
                for fut in futures:
                    fut.cancel()
        else:
            yield from self._dask_imap(fn, items)

    def _dask_imap(self, fn: Callable, items: list) -> Iterator[tuple[int, Any]]:
        """Dask futures as they finish, watching the cluster.

        Each future is released as soon as its result is in hand, so the scheduler forgets it: a
        worker that dies later does not make Dask recompute units already finished.  While no
        worker is connected for ``worker_timeout`` seconds, or once the scheduler is gone, a
        :class:`ClusterError` ends the run (one line) instead of a silent wait or a traceback.
        """
        import time
        from concurrent.futures import CancelledError

        client = self._client
        pending = {fut.key: (i, fut) for i, fut in enumerate(client.map(fn, items, pure=False))}
        workers, idle_since, next_check = None, None, 0.0
        try:
            while pending:
                finished = [key for key, (_, fut) in pending.items() if fut.done()]
                for key in finished:
                    i, fut = pending.pop(key)
                    try:
                        result = fut.result()
                    except CancelledError:
                        raise ClusterError(f"lost the Dask scheduler {self.address} (its tasks were "
                                           "cancelled)") from None
                    except OSError:
                        # the task finished but its result could not be fetched (Dask's CommClosedError is
                        # an OSError): if the scheduler no longer answers, that is the one-line ClusterError;
                        # otherwise the unit itself raised an OSError, and it propagates as it is
                        self._connected_workers()
                        raise
                    except Exception as exc:
                        if type(exc).__name__ != "KilledWorker":
                            raise
                        raise ClusterError(f"unit {i} ended every Dask worker that ran it on {self.address} "
                                           "(KilledWorker: out of memory or a crash?)") from None
                    fut.release()
                    del fut
                    yield i, result
                now = time.monotonic()
                if now >= next_check:
                    next_check = now + _MONITOR_EVERY
                    count = self._connected_workers()
                    if count != workers:
                        workers = count
                        if self.on_workers is not None:
                            self.on_workers(count)
                    idle_since = (idle_since or now) if count == 0 else None
                    if idle_since is not None and now - idle_since >= self.worker_timeout:
                        raise ClusterError(f"no Dask worker connected to {self.address} for "
                                           f"{self.worker_timeout:g} s (--worker-timeout)")
                if not finished:
                    time.sleep(0.05)
        finally:
            if pending and client.status == "running":
                client.cancel([fut for _, fut in pending.values()])

    def _connected_workers(self) -> int:
        """Workers the scheduler knows now; a :class:`ClusterError` when it no longer answers."""
        if self._client.status not in ("running", "connecting", "newly-created"):
            raise ClusterError(f"lost the Dask scheduler {self.address} (client {self._client.status})")
        try:
            return len(self._client.nthreads())
        except Exception as exc:  # noqa: BLE001 - comm errors come in many types (OSError, CommClosedError...)
            raise ClusterError(f"lost the Dask scheduler {self.address} ({type(exc).__name__})") from None

    def map(self, fn: Callable, items: Iterable[Any]) -> list:
        items = list(items)
        out: list = [None] * len(items)
        for i, result in self.imap_unordered(fn, items):
            out[i] = result
        return out


def _call_cloudpickled(payload: bytes):
    import cloudpickle

    fn, item = cloudpickle.loads(payload)
    return fn(item)


class LazyExecutor:
    """An :class:`Executor` for ``scheduler`` started on first use (no pool or cluster is
    started for engines that never map anything); :func:`use_executor` closes it."""

    def __init__(self, scheduler: str, workers: int | None = None):
        self.scheduler = check_scheduler(scheduler)
        self.workers = workers
        self._cm = None
        self._ex: Executor | None = None

    def _get(self) -> Executor:
        if self._ex is None:
            self._cm = executor(self.scheduler, workers=self.workers)
            self._ex = self._cm.__enter__()
        return self._ex

    @property
    def kind(self) -> str:
        return self._get().kind

    # the capabilities follow from the scheduler's name, so asking them starts no pool or cluster
    @property
    def in_process(self) -> bool:
        return self.scheduler == "serial"

    @property
    def runs_actors(self) -> bool:
        return self.scheduler == "local" or self.scheduler.startswith("tcp://")

    def imap_unordered(self, fn, items):
        return self._get().imap_unordered(fn, items)

    def dask_client(self):
        return self._get().dask_client()

    @property
    def worker_timeout(self) -> float:
        return self._get().worker_timeout

    def map(self, fn, items):
        return self._get().map(fn, items)

    def close(self) -> None:
        if self._cm is not None:
            cm, self._cm, self._ex = self._cm, None, None
            cm.__exit__(None, None, None)


_CURRENT: ContextVar = ContextVar("dpposterior_executor", default=None)


@contextmanager
def use_executor(scheduler: str = "serial", workers: int | None = None):
    """Make a (lazily started) executor for ``scheduler`` the current one inside the block.

    ``dpposterior.infer`` runs every engine inside ``use_executor(--scheduler)``; code deep in
    an engine (e.g. the SBI simulators' batches) picks it up with :func:`current_executor`
    instead of threading an executor through every call.
    """
    lazy = LazyExecutor(scheduler, workers)
    token = _CURRENT.set(lazy)
    try:
        yield lazy
    finally:
        _CURRENT.reset(token)
        lazy.close()


def current_executor():
    """The executor set by the innermost :func:`use_executor`, or None outside one."""
    return _CURRENT.get()


@contextmanager
def executor(scheduler: str = "processes", workers: int | None = None, worker_timeout: float | None = None):
    """Context manager yielding an :class:`Executor` for ``scheduler``.

    ``workers`` (processes / local only) defaults to :func:`default_workers`.
    ``fn`` passed to the executor must be a module-level (picklable) function for
    every backend but ``serial``; with ``tcp://`` the Dask workers must also be able
    to import ``dpposterior`` (install it in the workers' environment).  ``worker_timeout`` (Dask):
    seconds without a connected worker before a :class:`ClusterError` (default :data:`WORKER_TIMEOUT`).
    """
    check_scheduler(scheduler)
    workers = check_workers(workers) or default_workers()
    if scheduler == "serial":
        yield Executor("serial")
    elif scheduler == "processes":
        from concurrent.futures import ProcessPoolExecutor

        # not a plain fork: forking a process that holds torch/numba/BLAS threads can deadlock.
        # One BLAS/OpenMP thread per worker (as Dask does): W workers x C BLAS threads on C
        # cores oversubscribe.  Children (and the forkserver) read the environment when they start.
        with _environ(WORKER_THREAD_ENV), \
                ProcessPoolExecutor(max_workers=workers, mp_context=process_context()) as pool:
            yield Executor("processes", pool=pool)
    else:
        from dask.distributed import Client, LocalCluster

        from . import progress

        progress.status(f"Dask: starting {workers or 'a'} local worker(s)" if scheduler == "local"
                       else f"Dask: connecting to {scheduler}")
        cluster = None
        if scheduler == "local":
            # one thread per worker: our tasks are numpy-bound, and one process per core
            # scales the way a real cluster does; no dashboard (no port to collide on)
            with warnings.catch_warnings():
                # the scheduler's HTTP endpoint falls back to a free port when 8787 is taken
                # (another cluster on a shared machine): harmless, so not worth a warning
                warnings.filterwarnings("ignore", message=r"Port \d+ is already in use")
                cluster = _local_cluster(LocalCluster, n_workers=workers, threads_per_worker=1,
                                         processes=True, dashboard_address=None,
                                         silence_logs=logging.CRITICAL)
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout=CONNECT_TIMEOUT)
            except OSError as exc:
                raise InputError("scheduler", f"cannot reach Dask scheduler {scheduler} ({exc})") from None
        # a lost scheduler is reported in one line (ClusterError); the client's own reconnection
        # tracebacks, logged at ERROR while it retries, would bury it
        quiet_logs = _raise_log_level(("distributed.client", "distributed.comm", "distributed.core",
                                       "distributed.batched"), logging.CRITICAL)
        try:
            yield Executor("dask", client=client, address=scheduler if scheduler != "local" else "local",
                           worker_timeout=worker_timeout)
        finally:
            try:
                client.close()
            finally:
                quiet_logs()
                if cluster is not None:
                    cluster.close()


def _raise_log_level(names, level: int) -> Callable[[], None]:
    """Raise the named loggers to at least ``level``; returns the function that restores them."""
    loggers = [logging.getLogger(name) for name in names]
    before = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(max(level, lg.getEffectiveLevel()))

    def restore() -> None:
        for lg, old in zip(loggers, before):
            lg.setLevel(old)

    return restore


#: imported once by the forkserver that forks the ``processes`` workers (dpposterior/worker_preload.py)
WORKER_PRELOAD = ("dpposterior.worker_preload",)


def process_context():
    """The multiprocessing context of ``processes`` pools: forkserver, preloaded, where the platform has it.

    A spawned worker re-imports numpy, scipy.special, numba and the package (~1.9 s each here, the start-up
    C of docs/scaling.md); a forkserver imports :data:`WORKER_PRELOAD` once -- it stays up for later pools
    of this process -- and forks each worker from itself, a single-threaded process, so workers start warm
    (docs/scaling.md, "Workers start warm").  Elsewhere (Windows) workers are spawned.  Results do not depend on it: every task carries
    its own seed.
    """
    import multiprocessing as mp

    if "forkserver" not in mp.get_all_start_methods():
        return mp.get_context("spawn")
    context = mp.get_context("forkserver")
    context.set_forkserver_preload(["__main__", *WORKER_PRELOAD])  # '__main__': the default's entry
    return context


#: thread caps for local worker processes (the user's own settings win)
WORKER_THREAD_ENV = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


@contextmanager
def _environ(values: dict[str, str]):
    """Set the variables of ``values`` that are not already set, for the duration of the block."""
    added = [k for k in values if k not in os.environ]
    for key in added:
        os.environ[key] = values[key]
    try:
        yield
    finally:
        for key in added:
            os.environ.pop(key, None)


def _local_cluster(cluster_cls, **kwargs):
    """A LocalCluster whose workers do not get Dask's MALLOC_TRIM_THRESHOLD_=65536.

    Dask sets that variable in every nanny-spawned worker to return memory to the OS
    sooner; with it glibc mmaps and unmaps each of our large temporary numpy arrays,
    which makes calibration tasks ~1.5-2x slower in CPU time than in a plain worker
    process (benchmarks/scaling.py; docs/scaling.md).
    """
    import dask

    env = dict(dask.config.get("distributed.nanny.pre-spawn-environ", default={}) or {})
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    with dask.config.set({"distributed.nanny.pre-spawn-environ": env}):
        return cluster_cls(**kwargs)


def _batch_task(task):
    fn, batch, seed = task
    return fn(batch, np.random.default_rng(seed))


def map_batches(fn: Callable[[np.ndarray, np.random.Generator], np.ndarray], rows, *, seed,
                batch_size: int = 1000, scheduler: str = "serial", ex: "Executor | None" = None) -> np.ndarray:
    """``fn(batch, rng)`` over row batches of ``rows``, concatenated in order.

    For vectorised simulators (SBI simulation batches, benchmark grids): batch ``k``
    gets its own generator from ``SeedSequence(seed).spawn``, so the result is the same
    for every backend and every number of workers (but depends on ``batch_size``).
    ``fn`` must be a module-level function for ``processes`` and Dask; pass ``ex`` to
    reuse a running executor (e.g. one per SMC-ABC run rather than one per round).
    """
    rows = np.asarray(rows)
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise InputError("batch_size", f"must be a positive integer (got {batch_size!r})")
    starts = range(0, len(rows), int(batch_size))
    seeds = spawn_seeds(seed, len(starts))
    tasks = [(fn, rows[s:s + batch_size], ss) for s, ss in zip(starts, seeds)]
    if not tasks:
        return fn(rows, np.random.default_rng(seed))
    if ex is not None and not (getattr(ex, "scheduler", None) == "serial" or len(tasks) == 1):
        parts = ex.map(_batch_task, tasks)
    elif ex is not None or scheduler == "serial" or len(tasks) == 1:
        check_scheduler(scheduler)
        parts = [_batch_task(t) for t in tasks]  # in process: no pickling, same numbers
    else:
        with executor(scheduler) as own:
            parts = own.map(_batch_task, tasks)
    return np.concatenate(parts, axis=0)
