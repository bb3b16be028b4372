"""Scale-out of the small-area engine ``exact-da`` on Dask.

The areas are split into partitions -- runs of whole *units* (a parent's areas, or a block of
``small_area.BLOCK`` areas), see inference/small_area.py.  Each partition lives in one Dask actor
(a stateful object pinned to a worker) that holds its areas' latent counts and area effects for every
chain.  Per iteration the client sends the shared parameters, each actor sweeps its areas (phase 1)
and returns its unit sums; the client updates the shared parameters (phase 2), asks each actor for
the log-likelihood change of the non-centred tau proposal (phase 3), and decides it and the shifts
(phase 4).  The client runs the *same* compiled phase functions as the in-process driver, on the unit
sums concatenated in unit order, and every random number is keyed by (chain, area or parameter,
iteration): the draws are bit-identical to ``--scheduler serial`` for any number of partitions and
workers (tests/test_small_area_dask.py).

A worker that dies takes its actors with it.  The client keeps a log of the messages it sent each
partition (the shared parameters of every iteration); a lost partition is rebuilt on a live worker
from its data and its seed and replays the log -- the counter-based random numbers make the replay
exact -- so the run goes on with the same draws.  ``--worker-timeout`` (execution.WORKER_TIMEOUT)
bounds the wait for a live worker.
"""

from __future__ import annotations

import numpy as np

from . import small_area_kernels as sa

#: seconds a partition call may take before the client checks its worker (a sweep of a large
#: partition is long; a lost worker is reported by Dask at once, so this only guards a hang)
CALL_TIMEOUT = 3600.0

#: called as ``AFTER_ITERATION(it, client)`` after each iteration (tests kill a worker from it); None: nothing
AFTER_ITERATION = None


class Partition:
    """A Dask actor: one partition's plan (:meth:`small_area_kernels.Plan.part`) and the state of every chain
    over its areas."""

    def __init__(self, plan: sa.Plan):
        self.plan = plan
        self.areas = plan.areas()
        self.sums = plan.sums()
        self.v = None

    def sweep(self, it: int, shared: sa.Shared):
        p = self.plan
        self.v = shared.v  # the binomial sweep updates v_p of this partition's parents in place
        sa.sweep_partition(it, p.run, p.table, p.noise, p.units, shared, self.areas, self.sums)
        return self.unit_sums()

    def nc_delta(self, shared: sa.Shared):
        p = self.plan
        sa.nc_delta_partition(p.run, p.table, p.noise, p.units, shared, self.areas, self.sums)
        return self.sums.UD, self.sums.DA, self.sums.DT0, self.sums.DT1, self.sums.DG, self.sums.DH

    def unit_sums(self):
        """The unit sums of the last sweep, and the parents' v (binomial: updated by the sweep)."""
        return self.sums.UY, self.sums.UB, self.sums.UG, self.sums.UH, self.sums.USU, self.sums.USS, self.v

    def replay(self, messages) -> int:
        for msg in messages:
            self.sweep(*msg)
        return len(messages)

    def result(self):
        return self.areas.out_u


def _partition_units(plan: sa.Plan, parts: int) -> list[tuple[int, int]]:
    """``parts`` runs of whole units with about equal numbers of cells (fewer if there are fewer units)."""
    ustart = plan.units.ustart
    U = ustart.shape[0] - 1
    parts = max(1, min(parts, U))
    cells = ustart[1:]  # areas up to the end of each unit
    cuts = [0]
    for k in range(1, parts):
        u = int(np.searchsorted(cells, plan.G * k / parts))
        u = min(max(u + 1, cuts[-1] + 1), U - (parts - k))
        cuts.append(u)
    cuts.append(U)
    return [(cuts[i], cuts[i + 1]) for i in range(parts)]


def _lost_worker_errors() -> tuple:
    """What distributed raises for a call on an actor whose worker is gone: its comm closed -- ``CommClosedError``
    and the plain ``OSError("Unable to contact Actor's worker")`` of ``distributed.actor`` (both ``OSError``s) --,
    or the task that holds the actor cancelled (``FutureCancelledError``) or killed with every worker that ran it
    (``KilledWorker``), which an actor call raises when it waits for that task."""
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return CommClosedError, OSError, FutureCancelledError, KilledWorker


class _Cluster:
    """The actors of one run, rebuilt from the message log when their worker is lost."""

    def __init__(self, client, plan: sa.Plan, ranges, worker_timeout: float):
        self.client = client
        self.plan = plan
        self.ranges = ranges
        self.worker_timeout = worker_timeout
        self.log: list[list] = [[] for _ in ranges]  # per partition: the sweep messages sent so far
        self.rebuilt = 0
        self.holders: list = [None] * len(ranges)  # per partition: the future that created its actor
        self.actors = [self._start(i) for i in range(len(ranges))]

    def _workers(self) -> list[str]:
        from ..execution import live_workers

        return live_workers(self.client, self.worker_timeout)

    def _start(self, i: int):
        workers = self._workers()
        where = [workers[i % len(workers)]]
        fut = self.client.submit(Partition, self.plan.part(*self.ranges[i]), actor=True, workers=where,
                                 allow_other_workers=True, pure=False)
        actor = fut.result(timeout=CALL_TIMEOUT)
        self.holders[i] = fut
        if self.log[i]:
            actor.replay(self.log[i]).result(timeout=CALL_TIMEOUT)
            self.rebuilt += 1
        return actor

    def _lost(self, i: int, exc: BaseException) -> bool:
        """Whether partition ``i``'s worker is gone: distributed raised one of :func:`_lost_worker_errors`, or
        the ``RuntimeError`` an actor raises once the future holding it is no longer finished ("Worker holding
        Actor was lost", ``distributed.actor.Actor.__getattr__``) -- told by that future's status, not by the
        message.  A ``RuntimeError`` the partition's own code raised leaves that future finished, and
        propagates."""
        if isinstance(exc, _lost_worker_errors()):
            return True
        return isinstance(exc, RuntimeError) and self.holders[i].status not in ("finished", "pending")

    def shared_part(self, i: int, shared: sa.Shared) -> sa.Shared:
        return self.plan.shared_part(shared, *self.ranges[i])

    def _ask(self, i: int, method: str, args: tuple):
        """``method`` on partition ``i``'s actor: its future, or -- the actor refused the call before sending it
        (its worker lost) -- a :class:`_Refused` that raises the same error when asked for the result."""
        try:
            return getattr(self.actors[i], method)(*args)
        except Exception as exc:  # noqa: BLE001 - told apart where the result is read (call, _lost)
            return _Refused(exc)

    def call(self, method: str, make_args) -> list:
        """``method`` on every actor (arguments per partition from ``make_args(i)``).  A partition whose worker
        was lost is rebuilt on a live worker, replaying its log -- which already holds this iteration's sweep
        -- and then asked again (after a ``sweep``, for the sums the replay left)."""
        futures = [self._ask(i, method, make_args(i)) for i in range(len(self.actors))]
        out: list = [None] * len(self.actors)
        for i, fut in enumerate(futures):
            for attempt in range(4):
                try:
                    out[i] = fut.result(timeout=CALL_TIMEOUT)
                    break
                except Exception as exc:
                    if not self._lost(i, exc) or attempt == 3:
                        raise
                    self.actors[i] = self._start(i)
                    fut = self._ask(i, "unit_sums", ()) if method == "sweep" else self._ask(i, method, make_args(i))
        return out


class _Refused:
    """An actor call that was never sent: ``result`` raises the error the actor raised."""

    def __init__(self, exc: Exception):
        self.exc = exc

    def result(self, timeout=None):
        raise self.exc


def run_dask(plan: sa.Plan, partitions: int | None, ex) -> dict:
    """The four phases with phase 1 and 3 on Dask actors, on executor ``ex`` (one that runs actors:
    ``execution.Executor.runs_actors``); the same output as :func:`small_area_kernels.run_serial`."""
    from ..execution import WORKER_TIMEOUT

    client = ex.dask_client()
    nthreads = sum(client.nthreads().values()) or 1
    ranges = _partition_units(plan, partitions or nthreads)
    from .. import progress

    progress.status(f"Dask: loading {len(ranges)} partitions of {plan.G} areas onto the workers (each compiles the "
                   "samplers on its first run after install)")
    cluster = _Cluster(client, plan, ranges, getattr(ex, "worker_timeout", WORKER_TIMEOUT))
    out = plan.draws()
    shared = sa._copy(plan.shared)
    sums = plan.sums()  # every unit's, in unit order
    total = plan.run.warmup + plan.run.draws
    for it in range(total + 1):
        progress.status(f"Dask: iteration {it} of {total} on {len(ranges)} partitions")
        msgs = []
        for i in range(len(ranges)):
            msg = (it, cluster.shared_part(i, shared))
            cluster.log[i].append(msg)
            msgs.append(msg)
        parts = cluster.call("sweep", lambda i: msgs[i])
        if it == total:
            break
        for k, name in enumerate(("UY", "UB", "UG", "UH", "USU", "USS")):
            np.concatenate([p[k] for p in parts], axis=1, out=getattr(sums, name))
        if plan.run.binom and plan.units.has_p:  # the parents' v, as the partitions' sweeps left them
            np.concatenate([p[6] for p in parts], axis=1, out=shared.v)
        sa.shared_a(it, plan.run, plan.prior, plan.units, shared, sums)
        deltas = cluster.call("nc_delta", lambda i: (cluster.shared_part(i, shared),))
        for k, name in enumerate(("UD", "DA", "DT0", "DT1", "DG", "DH")):
            np.concatenate([d[k] for d in deltas], axis=1, out=getattr(sums, name))
        sa.shared_b(it, plan.run, plan.prior, plan.units, shared, sums, out)
        if AFTER_ITERATION is not None:
            AFTER_ITERATION(it, client)
    out_u = np.concatenate(cluster.call("result", lambda i: ()), axis=2)
    return {**sa.draws_dict(out, out_u, plan), "partitions": len(ranges), "partitions_rebuilt": cluster.rebuilt}
