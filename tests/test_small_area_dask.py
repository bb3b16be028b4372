"""exact-da on Dask partitions gives the serial draws bit for bit -- for any number of
partitions, with parents, area totals and post-processing -- and survives a killed worker.

The clusters are real: a LocalCluster with worker processes for the partitioning tests, and a
``dask scheduler`` plus two ``dask worker`` processes (no nanny: a killed worker stays dead) for the
killed-worker test (the fixture of tests/test_scaling_cluster.py).
"""

from __future__ import annotations

import logging
import os
import signal

import numpy as np
import pytest

pytest.importorskip("distributed")

import dpposterior as dp  # noqa: E402
from dpposterior.errors import RefusedError  # noqa: E402
from dpposterior.families.small_area import SmallAreaPrior, simulate  # noqa: E402
from dpposterior.inference import small_area_dask  # noqa: E402
from test_scaling_cluster import cluster  # noqa: E402,F401  (the real-cluster fixture)

PRIOR = {"alpha_mean": 1.0, "alpha_sd": 1.0}
RUN = dict(prior=PRIOR, seed=5, draws=30, warmup=20, chains=2)


def _release(G=1300, parents=False, post="none", totals=False, seed=1, binomial=False):
    rng = np.random.default_rng(seed)
    _, rel = simulate(SmallAreaPrior(**PRIOR), G, 3, 2.0, rng, exposure=rng.uniform(5, 50, size=G), tau=0.5,
                      postprocessing=post, parents=(np.arange(G) * 7) % 5 if parents else None)
    if binomial:  # whole numbers at risk per area and cell, above every released count
        rel["exposure"] = (np.maximum(np.asarray(rel["statistics"]["counts"]["value"]), 0) + 60).tolist()
    if totals:  # exact area totals, as the Census publishes some
        rel["invariants"] = {"area_totals": [int(max(0, sum(r))) + 0 for r in rel["statistics"]["counts"]["value"]]}
    return dp.load_release(rel)


@pytest.fixture(scope="module")
def local_cluster():
    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.CRITICAL) as lc:
        yield lc.scheduler_address


def _same(a, b):
    assert set(a.posterior) == set(b.posterior)
    for name in a.posterior:
        assert np.array_equal(a.posterior[name], b.posterior[name]), name


@pytest.mark.filterwarnings("ignore::dpposterior.PosteriorWarning")
@pytest.mark.parametrize("case", [dict(), dict(parents=True), dict(post="nonnegative", totals=False),
                                  dict(parents=True, totals=True), dict(parents=True, binomial=True)],
                         ids=["blocks", "parents", "nonnegative", "parents+totals", "binomial+parents"])
def test_identical_draws_for_any_partitioning(local_cluster, case):
    release = _release(**case)
    run = {**RUN, "likelihood": "binomial"} if case.get("binomial") else RUN
    serial = dp.infer(release, **run)
    for parts in (1, 2, 5):
        post = dp.infer(release, scheduler=local_cluster, partitions=parts, **run)
        assert post.attrs["partitions"] == parts and post.attrs["partitions_rebuilt"] == 0
        _same(serial, post)


def test_partitions_and_processes_are_refused_where_unused():
    release = _release(G=20)
    with pytest.raises(RefusedError, match="partitions"):
        dp.infer(release, partitions=2, **RUN)
    with pytest.raises(RefusedError, match="scheduler"):
        dp.infer(release, scheduler="processes", **RUN)


@pytest.mark.filterwarnings("ignore::dpposterior.PosteriorWarning")
def test_a_killed_worker_changes_nothing(cluster, monkeypatch):
    address, procs = cluster
    release = _release(G=900, parents=True)
    serial = dp.infer(release, **RUN)
    killed = []

    def kill_one(it, client):
        if it == 15 and not killed:  # mid-run: SIGKILL the worker process w2 (no nanny: it stays dead)
            pids = client.run(os.getpid)
            victim = next(addr for addr, info in client.scheduler_info()["workers"].items() if info["name"] == "w2")
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(victim)

    monkeypatch.setattr(small_area_dask, "AFTER_ITERATION", kill_one)
    post = dp.infer(release, scheduler=address, partitions=4, **RUN)
    assert killed and procs["w2"].wait(timeout=30) is not None
    assert post.attrs["partitions_rebuilt"] >= 1  # the lost partitions were rebuilt on w1 and replayed
    _same(serial, post)


class _Holder:
    def __init__(self, status):
        self.status = status


def _dask_errors():
    from distributed.client import FutureCancelledError
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    return CommClosedError("in <TCP (closed) ConnectionPool.actor_execute local=... remote=...>"), \
        FutureCancelledError(key="Partition-1", reason="lost dependencies"), KilledWorker("Partition-1", "w2", 3)


@pytest.mark.parametrize("status, exc, lost", [
    ("finished", RuntimeError("Worker holding Actor was lost.  Status: lost"), False),  # its future says otherwise
    ("lost", RuntimeError("Worker holding Actor was lost.  Status: lost"), True),
    ("error", RuntimeError("anything"), True),
    ("finished", OSError("Unable to contact Actor's worker"), True),
    *[("finished", exc, True) for exc in _dask_errors()],  # distributed's own types, whatever their text
    ("finished", RuntimeError("a partition's own error, mentioning an Actor that was lost"), False),
    ("finished", ValueError("a partition's own error: CommClosedError, KilledWorker"), False),
    ("lost", ValueError("a partition's own error"), False),  # only distributed's RuntimeError is told by the future
])
def test_a_lost_worker_is_told_by_dask_types_and_its_future_not_by_the_message(status, exc, lost):
    """A partition is rebuilt when distributed raised one of its lost-worker types (a closed comm -- an OSError
    --, a cancelled or killed holding task) or the RuntimeError an actor raises once the future holding it is
    no longer finished -- Dask's own test before it raises "Worker holding Actor was lost"; an error of the
    partition's own code propagates, whatever its text says."""
    c = small_area_dask._Cluster.__new__(small_area_dask._Cluster)
    c.holders = [_Holder(status)]
    assert c._lost(0, exc) is lost


class _Done:
    def __init__(self, value):
        self.value = value

    def result(self, timeout=None):
        if isinstance(self.value, Exception):
            raise self.value
        return self.value


def test_a_lost_partition_is_rebuilt_and_its_own_error_propagates():
    """``call`` rebuilds a partition whose actor refused the call before sending it (distributed's Actor, once
    the future holding it is lost) and asks the new actor for the sums the replay left; what the partition's
    own code raised -- a RuntimeError while its future is finished included -- propagates at once."""
    c = small_area_dask._Cluster.__new__(small_area_dask._Cluster)

    class Gone:
        def __getattr__(self, name):
            raise RuntimeError("Worker holding Actor was lost.  Status: lost")

    class Rebuilt:
        def unit_sums(self):
            return _Done("sums")

    def start(i):
        c.holders[i] = _Holder("finished")
        return Rebuilt()

    c.holders, c.actors, c._start = [_Holder("lost")], [Gone()], start
    assert c.call("sweep", lambda i: (0, None)) == ["sums"]
    assert isinstance(c.actors[0], Rebuilt)

    class Raises:
        def sweep(self, *args):
            return _Done(RuntimeError("the partition's own error"))

    c.holders, c.actors = [_Holder("finished")], [Raises()]
    with pytest.raises(RuntimeError, match="own error"):
        c.call("sweep", lambda i: (0, None))
