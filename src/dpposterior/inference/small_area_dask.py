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
    """A Dask actor: one partition's areas and the state of every chain over them."""

    def __init__(self, data: dict):
        self.d = data
        self.y = data["y"].copy()
        self.u = data["u"].copy()
        ch, g = self.u.shape
        units = data["ustart"].shape[0] - 1
        c = data["ystar"].shape[1]
        self.Ysum = np.zeros((ch, g))
        self.out_u = np.empty((ch, data["draws"], g))
        self.UY, self.UB = np.zeros((ch, units, c)), np.zeros((ch, units, c))
        self.USU, self.USS, self.UD = np.zeros((ch, units)), np.zeros((ch, units)), np.zeros((ch, units))
        self.DA, self.DT0, self.DT1 = (np.zeros((ch, units, c)) for _ in range(3))
        self.v = None

    def sweep(self, it, alpha, v, dp, hyp):
        d = self.d
        self.v = v  # the binomial sweep updates v_p of this partition's parents in place
        sa.sweep_partition(d["keys"], it, d["warmup"], d["binom"], d["has_p"], d["ystar"], d["E"], d["kind"], d["scale"], d["half"],
                           d["zero_pp"], d["zero_tab"], d["gtab"], d["zrow"], d["has_totals"], d["pair_sweeps"], d["lgam"],
                           d["akey"], d["ubase"], d["ustart"], d["uparent"], alpha, v, dp, hyp, self.y, self.u, self.Ysum,
                           self.out_u, self.UY, self.UB, self.USU, self.USS)
        return self.sums()

    def nc_delta(self, alpha, v, hyp):
        d = self.d
        sa.nc_delta_partition(d["binom"], d["E"], d["ustart"], d["uparent"], alpha, v, hyp, self.u, self.Ysum, self.y,
                              self.UD, self.DA, self.DT0, self.DT1)
        return self.UD, self.DA, self.DT0, self.DT1

    def sums(self):
        """The unit sums of the last sweep, and the parents' v (binomial: updated by the sweep)."""
        return self.UY, self.UB, self.USU, self.USS, self.v

    def replay(self, messages) -> int:
        for msg in messages:
            self.sweep(*msg)
        return len(messages)

    def result(self):
        return self.out_u


def _partition_units(plan: sa.Plan, parts: int) -> list[tuple[int, int]]:
    """``parts`` runs of whole units with about equal numbers of cells (fewer if there are fewer units)."""
    U = plan.ustart.shape[0] - 1
    parts = max(1, min(parts, U))
    cells = plan.ustart[1:]  # areas up to the end of each unit
    cuts = [0]
    for k in range(1, parts):
        u = int(np.searchsorted(cells, plan.G * k / parts))
        u = min(max(u + 1, cuts[-1] + 1), U - (parts - k))
        cuts.append(u)
    cuts.append(U)
    return [(cuts[i], cuts[i + 1]) for i in range(parts)]


def _partition_data(plan: sa.Plan, u0: int, u1: int) -> dict:
    s = plan.area_slice(u0, u1)
    base = int(plan.uparent[u0]) if plan.has_p else 0
    return {"keys": plan.keys, "warmup": plan.warmup, "draws": plan.draws, "binom": plan.binom, "has_p": plan.has_p,
            "ystar": plan.ystar[s], "E": plan.E[s],
            "kind": plan.kind, "scale": plan.scale[s], "half": plan.half[s], "zero_pp": plan.zero_pp[s],
            "zero_tab": plan.zero_tab, "gtab": plan.gtab, "zrow": plan.zrow[s], "has_totals": plan.has_totals,
            "pair_sweeps": plan.pair_sweeps, "lgam": plan.lgam, "akey": plan.akey[s],
            "ubase": u0, "ustart": plan.ustart[u0:u1 + 1] - plan.ustart[u0], "uparent": plan.uparent[u0:u1] - base,
            "y": plan.y[:, s], "u": plan.u[:, s]}


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
        data = _partition_data(self.plan, *self.ranges[i])
        fut = self.client.submit(Partition, data, actor=True, workers=where, allow_other_workers=True, pure=False)
        actor = fut.result(timeout=CALL_TIMEOUT)
        self.holders[i] = fut
        if self.log[i]:
            actor.replay(self.log[i]).result(timeout=CALL_TIMEOUT)
            self.rebuilt += 1
        return actor

    def _lost(self, i: int, exc: BaseException) -> bool:
        """Whether partition ``i``'s worker is gone: its comm failed (``OSError``, Dask's "Unable to contact
        Actor's worker"), or the future holding its actor is no longer finished -- the state in which Dask raises
        "Worker holding Actor was lost" (``distributed.actor.Actor.__getattr__``).  A ``RuntimeError`` the
        partition's own code raised leaves that future finished, and propagates."""
        return isinstance(exc, OSError) or self.holders[i].status not in ("finished", "pending")

    def _v_slice(self, i: int, arr: np.ndarray) -> np.ndarray:
        if not self.plan.has_p:
            return arr.copy()
        u0, u1 = self.ranges[i]
        return np.ascontiguousarray(arr[:, self.plan.uparent[u0]:self.plan.uparent[u1 - 1] + 1])

    def call(self, method: str, make_args) -> list:
        """``method`` on every actor (arguments per partition from ``make_args(i)``).  A partition whose worker
        was lost is rebuilt on a live worker, replaying its log -- which already holds this iteration's sweep
        -- and then asked again (after a ``sweep``, for the sums the replay left)."""
        futures = [getattr(a, method)(*make_args(i)) for i, a in enumerate(self.actors)]
        out: list = [None] * len(self.actors)
        for i, fut in enumerate(futures):
            for attempt in range(4):
                try:
                    out[i] = fut.result(timeout=CALL_TIMEOUT)
                    break
                except (RuntimeError, OSError) as exc:
                    if not self._lost(i, exc) or attempt == 3:
                        raise
                    self.actors[i] = self._start(i)
                    fut = self.actors[i].sums() if method == "sweep" else getattr(self.actors[i], method)(*make_args(i))
        return out


def run_dask(plan: sa.Plan, partitions: int | None) -> dict:
    """The four phases with phase 1 and 3 on Dask actors; the same output as :func:`small_area.run_serial`."""
    from ..execution import WORKER_TIMEOUT, current_executor

    ex = current_executor()
    client = ex.dask_client() if ex is not None else None
    if client is None:
        raise RuntimeError("run_dask needs a Dask executor (dpposterior.infer(..., scheduler='local' or tcp://))")
    nthreads = sum(client.nthreads().values()) or 1
    ranges = _partition_units(plan, partitions or nthreads)
    from .. import progress

    progress.status(f"Dask: loading {len(ranges)} partitions of {plan.G} areas onto the workers (each compiles the "
                   "samplers on its first run after install)")
    cluster = _Cluster(client, plan, ranges, getattr(ex, "worker_timeout", WORKER_TIMEOUT))
    out = sa.output_arrays(plan)
    am, asd, ts, tps = plan.prior
    alpha, v, hyp = plan.alpha.copy(), plan.v.copy(), plan.hyp.copy()
    dp = np.zeros_like(v)
    total = plan.warmup + plan.draws
    for it in range(total + 1):
        progress.status(f"Dask: iteration {it} of {total} on {len(ranges)} partitions")
        msgs = []
        for i in range(len(ranges)):
            msg = (it, alpha.copy(), cluster._v_slice(i, v), cluster._v_slice(i, dp), hyp.copy())
            cluster.log[i].append(msg)
            msgs.append(msg)
        sums = cluster.call("sweep", lambda i: msgs[i])
        if it == total:
            break
        UY = np.concatenate([s[0] for s in sums], axis=1)
        UB = np.concatenate([s[1] for s in sums], axis=1)
        USU = np.concatenate([s[2] for s in sums], axis=1)
        USS = np.concatenate([s[3] for s in sums], axis=1)
        if plan.binom and plan.has_p:  # the parents' v, as the partitions' sweeps left them
            v[:] = np.concatenate([s[4] for s in sums], axis=1)
        sa.shared_a(plan.keys, it, plan.G, plan.has_p, plan.binom, am, asd, ts, tps, plan.uparent, UY, UB, USS,
                    alpha, v, hyp)
        deltas = cluster.call("nc_delta", lambda i: (alpha.copy(), cluster._v_slice(i, v), hyp.copy()))
        UD = np.concatenate([d[0] for d in deltas], axis=1)
        DA, DT0, DT1 = (np.concatenate([d[k] for d in deltas], axis=1) for k in (1, 2, 3))
        sa.shared_b(plan.keys, it, plan.warmup, plan.G, plan.has_p, plan.binom, am, asd, ts, tps, plan.n_unit, USU,
                    UD, DA, DT0, DT1, alpha, v, dp, hyp, out["alpha"], out["v"], out["tau"], out["taup"])
        if AFTER_ITERATION is not None:
            AFTER_ITERATION(it, client)
    parts = cluster.call("result", lambda i: ())
    out["u"] = sa.unpermute(plan, np.concatenate(parts, axis=2))
    out["partitions"] = len(ranges)
    out["partitions_rebuilt"] = cluster.rebuilt
    return out
