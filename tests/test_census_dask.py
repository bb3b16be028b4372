"""The census ``da`` engine's partitions: the partitioned sweep on a Dask LocalCluster gives, bit for bit, the
draws of the same sweep in this process, for any number of partitions; the options are refused where unused.
(The partitioned sweep's law is checked against enumeration in tests/test_census.py.)"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("distributed")

import dpposterior as dp  # noqa: E402
from dpposterior.errors import InputError, RefusedError  # noqa: E402
from test_census import _small_release  # noqa: E402
from test_scaling_cluster import cluster  # noqa: E402,F401  (a scheduler and two killable workers)
from test_small_area_dask import _same, local_cluster  # noqa: E402,F401  (the LocalCluster fixture)

RUN = dict(draws=8, warmup=6, chains=2, seed=3, quiet=True)
# draws this few are flagged (R-hat, ESS): the tests compare draws, not posteriors
pytestmark = pytest.mark.filterwarnings("ignore::dpposterior.PosteriorWarning")


@pytest.mark.parametrize("level", ["county", "tract"])
def test_identical_draws_for_any_partitioning(local_cluster, level):
    release, x = _small_release()
    serial = dp.infer(release, partition=level, **RUN)
    assert serial.attrs["partition"] == level and serial.attrs["partitions"] == 1
    for parts in (2, 3):
        post = dp.infer(release, scheduler=local_cluster, partition=level, partitions=parts, **RUN)
        assert post.attrs["partitions"] == min(parts, 2)  # two counties, one tract each
        _same(serial, post)
    assert np.all(serial.posterior["counts"].sum(axis=(2, 3)) == x.sum())
    # the one-pass sweep is another chain (other moves' order and streams), not these draws
    assert not np.array_equal(dp.infer(release, **RUN).posterior["counts"], serial.posterior["counts"])


def test_dask_defaults_to_county_partitions(local_cluster):
    release, _ = _small_release()
    post = dp.infer(release, scheduler=local_cluster, **RUN)
    assert post.attrs["partition"] == "county" and post.attrs["partitions"] == 2
    _same(post, dp.infer(release, partition="county", **RUN))


def test_partition_options_are_refused_where_unused():
    release, _ = _small_release()
    with pytest.raises(RefusedError, match="partitions"):
        dp.infer(release, partitions=2, **RUN)
    with pytest.raises(InputError, match="partition.*above the block"):
        dp.infer(release, partition="block", **RUN)
    with pytest.raises(InputError, match="partition.*above the block"):
        dp.infer(release, partition="district", **RUN)


def test_a_killed_worker_changes_nothing(cluster, monkeypatch):
    """A worker SIGKILLed mid-run (no nanny: it stays dead) with parts on it: the parts are scattered again on
    the live worker, the sweep's tasks run again, and the draws are those of the in-process run."""
    import os
    import signal

    from dpposterior.inference import census_da

    address, procs = cluster
    release, _ = _small_release()
    run = {**RUN, "draws": 10, "warmup": 10}
    serial = dp.infer(release, partition="tract", **run)
    killed = []

    def kill_one(sweeps, client):
        if sweeps == 8 and not killed:
            pids = client.run(os.getpid)
            victim = next(addr for addr, info in client.scheduler_info()["workers"].items() if info["name"] == "w2")
            os.kill(pids[victim], signal.SIGKILL)
            killed.append(victim)

    monkeypatch.setattr(census_da, "AFTER_SWEEP", kill_one)
    post = dp.infer(release, scheduler=address, partition="tract", partitions=2, **run)
    assert killed and procs["w2"].wait(timeout=30) is not None
    assert post.attrs["partitions_rebuilt"] >= 1
    _same(serial, post)


class _ScatterClient:
    """A client whose scheduler refuses the first ``refusals`` scatters (KeyError: a worker it no longer has)."""

    def __init__(self, refusals):
        self.refusals, self.calls = refusals, 0

    def scatter(self, data, workers=None):
        self.calls += 1
        if self.calls <= self.refusals:
            raise KeyError(workers[0])
        return ("handle", workers[0])


@pytest.mark.parametrize("refusals, timeout, placed", [(2, 30.0, True), (10 ** 6, 0.5, False)])
def test_parts_are_placed_again_when_a_listed_worker_is_gone(monkeypatch, refusals, timeout, placed):
    """The client's list of workers lags the scheduler's: a scatter to a worker killed a moment ago is refused
    with KeyError (seen in CI after a SIGKILL).  The parts are placed again on the workers listed then; with no
    placement for --worker-timeout seconds, a one-line ClusterError."""
    from dpposterior.execution import ClusterError
    from dpposterior.inference import census_da as cd

    runner = cd.PartRunner.__new__(cd.PartRunner)
    runner.parts, runner.client, runner.worker_timeout = ["p0", "p1"], _ScatterClient(refusals), timeout
    monkeypatch.setattr(cd.PartRunner, "_workers", lambda self: ["tcp://w1", "tcp://w2"])
    if placed:
        runner._place()
        assert runner.handles == [("handle", "tcp://w1"), ("handle", "tcp://w2")]
        assert runner.client.calls == 2 + 2  # two refused, then both parts
    else:
        with pytest.raises(ClusterError, match="worker-timeout"):
            runner._place()
