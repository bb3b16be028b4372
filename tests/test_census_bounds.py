"""Exact bounds in the census family (the DAS's inequality constraints, block-varying structural zeros): the
manifest field and its refusals, the engine against enumeration restricted to the bound set, the partitioned
sweep's draws for any partitioning, the start repaired or refused, and the draws without bounds unchanged."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.special import gammaln

import dpposterior.census as dc
from dpposterior.errors import InputError, RefusedError
from dpposterior.families.census import CensusPrior
from dpposterior.families.census_table import build_structure
from dpposterior.inference import census_da as cd
from dpposterior.mechanisms.discrete_gaussian import DiscreteGaussian
from dpposterior.release import load_release
from test_census import SBC_VARIANCE, geography, manifest, measure

# --------------------------------------------------------------------------- a tiny table, enumerated
TINY_ATTRS = {"a": ["p", "q"], "b": ["r", "s"]}
TINY_QUERIES = {"total": [], "a": ["a"], "detailed": ["a", "b"]}
TINY_BLOCKS = ["150010001001000", "150010001001001"]
#: bounds that bind: block 0's q|s at most 1 (its noisy cell reads 3), block 1's p|r at least 2 (reads 0), block
#: 1's a = q at most 2 (its q cells read 3)
TINY_BOUNDS = [{"level": "block", "geocode": TINY_BLOCKS[0], "query": "detailed", "cell": "q|s", "upper": 1},
               {"level": "block", "geocode": TINY_BLOCKS[1], "query": "detailed", "cell": "p|r", "lower": 2},
               {"level": "block", "geocode": TINY_BLOCKS[1], "query": "a", "cell": "q", "lower": "", "upper": 2}]
#: without the invariant, the state total at most 12 (its noisy value reads 16, the blocks' 10 and 5)
STATE_BOUND = {"level": "state", "geocode": "15", "query": "total", "cell": "", "upper": 12}


def _tiny(invariant: bool, bounds=None):
    rows = {"level": [], "geocode": [], "query": [], "cell": [], "noisy_value": [], "variance": []}
    table = [("state", "15", "total", "", 16, 4.0), ("block", TINY_BLOCKS[0], "total", "", 10, 9.0),
             ("block", TINY_BLOCKS[1], "total", "", 5, 9.0)]
    for blk, vals in zip(TINY_BLOCKS, ([4, 2, 1, 3], [0, 2, -1, 4])):
        table += [("block", blk, "detailed", c, v, 6.25) for c, v in zip(["p|r", "p|s", "q|r", "q|s"], vals)]
    for row in table:
        for col, v in zip(rows, row):
            rows[col].append(v)
    return build_structure(TINY_ATTRS, TINY_QUERIES, ["state", "block"], rows,
                           {"state_total": {"15": 12}} if invariant else None, bounds=bounds)


def _enumerate(s, hyper, keep=(None, None), state_max=None, K=30):
    """The posterior means of every block cell by exact summation over [0, K)^4 per block: each block's factor
    (negative-binomial total x Dirichlet-multinomial, written out, times its block-level measurements' exact
    log-mass), restricted to ``keep[blk](X)`` (the block's bounds), the blocks coupled only through the state total
    (its measurement, its invariant if any, and its bound ``state_max``), summed over the other block's total."""
    a, b, M = hyper["alpha"], hyper["beta"], hyper["block_group_mean"][0]
    pi = np.asarray(hyper["tract_mix"][0], float)
    X = np.array(np.meshgrid(*[np.arange(K)] * 4, indexing="ij")).reshape(4, -1).T
    N = X.sum(1)
    logf, tot = [], np.zeros((2, 4 * (K - 1) + 1))
    for blk in range(2):
        lp = (gammaln(N + a) - gammaln(a) - gammaln(N + 1) + a * np.log(a / (a + M)) + N * np.log(M / (a + M))
              + gammaln(N + 1) + gammaln(b) - gammaln(N + b)
              + (gammaln(X + b * pi) - gammaln(b * pi) - gammaln(X + 1)).sum(1))
        for m in np.flatnonzero((s.level == 1) & (s.unit == blk)):
            cells = s.query_cell[s.query[m]] == s.cell[m]
            lp += DiscreteGaussian(float(s.sigma[m])).logpmf(s.noisy[m] - X[:, cells].sum(1))
        if keep[blk] is not None:
            lp[~keep[blk](X)] = -np.inf
        logf.append(lp)
        tot[blk] = np.bincount(N, weights=np.exp(lp - lp.max()), minlength=tot.shape[1])
    n = np.arange(tot.shape[1])
    both = n[:, None] + n[None, :]
    log_g = np.zeros((n.size, n.size))
    for m in np.flatnonzero(s.level == 0):
        log_g += DiscreteGaussian(float(s.sigma[m])).logpmf(s.noisy[m] - both)
    if s.invariants:
        log_g[both != int(s.invariants["state"][1][0])] = -np.inf
    if state_max is not None:
        log_g[both > state_max] = -np.inf
    g = np.exp(log_g - log_g.max())
    means = np.zeros((2, 4))
    for blk in range(2):
        w = (g if blk == 0 else g.T) @ tot[1 - blk]
        p = np.exp(logf[blk] - logf[blk].max()) * w[N]
        means[blk] = (X * p[:, None]).sum(0) / p.sum()
        assert p[X.max(1) == K - 1].sum() < 1e-9 * p.sum()  # the grid holds the mass
    return means


@pytest.mark.parametrize("invariant, partition", [(False, None), (True, None), (False, "state")])
def test_da_with_bounds_matches_enumeration_restricted_to_them(invariant, partition):
    """Hyperparameters held fixed, bounds that bind on cells of each block, on a marginal cell and (without the
    invariant) on the state total: every draw meets them, and the chain's means of every block cell are within 5
    batch-means standard errors of the exact sums over the states that meet them (40,000 draws; the one-pass sweep,
    and the partitioned sweep at state level).  The same reference without the bounds is far from these draws: a
    sampler that ignored them would fail."""
    bounds = TINY_BOUNDS + ([] if invariant else [STATE_BOUND])
    s = _tiny(invariant, bounds)
    hyper = {"alpha": 0.8, "beta": 3.0, "block_group_mean": [6.0], "tract_mix": [[0.3, 0.3, 0.2, 0.2]]}
    keep = (lambda X: X[:, 3] <= 1, lambda X: (X[:, 0] >= 2) & (X[:, 2] + X[:, 3] <= 2))
    ref = _enumerate(s, hyper, keep, None if invariant else 12)
    prob = cd.Problem(s, CensusPrior())
    runner, lmin = None, 0
    if partition is not None:
        lmin = s.levels.index(partition)
        runner = cd.PartRunner(cd.make_parts(prob, lmin, 1))
    opts = cd.CensusDAOptions(draws=40000, warmup=500, chains=1, seed=9)
    draws = cd._run_chain(prob, opts, np.random.SeedSequence(9), fixed=hyper, runner=runner, lmin=lmin)[0]
    assert draws[:, 0, 3].max() <= 1 and draws[:, 1, 0].min() >= 2 and draws[:, 1, 2:].sum(1).max() <= 2
    if invariant:
        assert np.all(draws.sum((1, 2)) == 12)
    else:
        assert draws.sum((1, 2)).max() <= 12
    flat = draws.astype(float).reshape(-1, 8)
    se = flat.reshape(50, -1, 8).mean(1).std(0, ddof=1) / math.sqrt(50)
    z = np.abs(flat.mean(0) - ref.ravel()) / se
    assert np.all(z < 5), (flat.mean(0), ref.ravel(), z)
    # sensitivity: the posterior without the bounds
    loose = _enumerate(_tiny(invariant), hyper)
    assert np.max(np.abs(flat.mean(0) - loose.ravel()) / se) > 20


# --------------------------------------------------------------------------- partitions
def _release(seed=0, bounds=None, invariant=True):
    blocks = geography(2, 1, 2, 3)
    rng = np.random.default_rng(seed)
    x = rng.poisson(4, size=(len(blocks), 6))
    x[1, 2] = 0  # block 1's u18|b is a structural zero of that block only
    rows = measure(x, blocks, SBC_VARIANCE, rng)
    extra = {"invariants": {"state_total": {"15": int(x.sum())}}} if invariant else {}
    if bounds is not None:
        extra["bounds"] = bounds
    return dc.release_from(manifest(**extra), rows), x


def _bounds_of(x, blocks):
    """Bounds at every level that the truth ``x`` meets, most of them tight: a block's zero cell, a block group's
    18+ count at least its truth, a tract's Hispanic count at most its truth, a county total within 2 of it."""
    s = _release()[0].structure
    bg = s.aggregate(x, "block_group", "age")
    tract = s.aggregate(x, "tract", "eth")
    county = s.aggregate(x, "county", "total")
    out = [{"level": "block", "geocode": blocks[1], "query": "detailed", "cell": "u18|b", "upper": 0}]
    out += [{"level": "block_group", "geocode": str(g), "query": "age", "cell": "18+", "lower": int(bg[u, 1])}
            for u, g in enumerate(s.units[3])]
    out += [{"level": "tract", "geocode": str(g), "query": "eth", "cell": "h", "upper": int(tract[u, 0])}
            for u, g in enumerate(s.units[2])]
    out += [{"level": "county", "geocode": str(g), "query": "total", "cell": "", "lower": int(county[u, 0]) - 2,
             "upper": int(county[u, 0]) + 2} for u, g in enumerate(s.units[1])]
    return out


@pytest.mark.parametrize("level", ["county", "tract"])
def test_partitioned_draws_meet_the_bounds_and_are_the_same_for_any_partitioning(level):
    blocks = geography(2, 1, 2, 3)
    _, x = _release()
    release, _ = _release(bounds=_bounds_of(x, blocks))
    s = release.structure
    prob = cd.Problem(s, CensusPrior())
    lmin = s.levels.index(level)
    opts = cd.CensusDAOptions(draws=15, warmup=10, chains=1, seed=4)
    runs = [cd._run_chain(prob, opts, np.random.SeedSequence(4), runner=cd.PartRunner(cd.make_parts(prob, lmin, k)),
                          lmin=lmin)[0] for k in (1, 2, 3)]
    for other in runs[1:]:
        assert np.array_equal(runs[0], other)
    serial = cd._run_chain(prob, opts, np.random.SeedSequence(4))[0]
    for draws in (runs[0], serial):
        assert all(s.bounds.violated(s, d).size == 0 for d in draws)
        assert np.all(draws.sum((1, 2)) == x.sum())
        assert np.all(draws[:, 1, 2] == 0)


@pytest.fixture
def local_cluster():
    pytest.importorskip("distributed")
    import logging

    from dask.distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                      silence_logs=logging.CRITICAL) as lc:
        yield lc.scheduler_address


@pytest.mark.filterwarnings("ignore::dpposterior.PosteriorWarning")
def test_the_bounds_travel_to_dask_partitions_with_the_same_draws(local_cluster):
    """On a Dask LocalCluster (2 workers) the parts get their bounds and sums each sweep: the draws are those of
    the same partitioned sweep in this process."""
    import dpposterior as dp

    blocks = geography(2, 1, 2, 3)
    _, x = _release()
    release, _ = _release(bounds=_bounds_of(x, blocks))
    run = dict(draws=8, warmup=6, chains=2, seed=3, quiet=True, partition="county")
    here = dp.infer(release, **run)
    there = dp.infer(release, scheduler=local_cluster, partitions=2, **run)
    assert there.attrs["partitions"] == 2
    for name in here.posterior:
        assert np.array_equal(here.posterior[name], there.posterior[name]), name


def test_the_start_is_repaired_to_meet_the_bounds():
    """The start from the noisy cells breaks bounds that the truth meets; it is moved onto them, invariant kept."""
    blocks = geography(2, 1, 2, 3)
    _, x = _release()
    release, _ = _release(bounds=_bounds_of(x, blocks))
    s = release.structure
    prob = cd.Problem(s, CensusPrior())
    start = prob.initial_counts(np.random.default_rng(0))
    assert s.bounds.violated(s, start).size == 0 and start.sum() == x.sum() and start.min() >= 0
    # without the invariant (cells added and removed freely)
    free, _ = _release(bounds=_bounds_of(x, blocks), invariant=False)
    start = cd.Problem(free.structure, CensusPrior()).initial_counts(np.random.default_rng(0))
    assert free.structure.bounds.violated(free.structure, start).size == 0


def test_an_infeasible_start_is_refused_in_one_line():
    """Each block's 18+ count at least 30 while the state holds about 24 per block: every bound alone fits
    the invariant, together they do not."""
    blocks = geography(2, 1, 2, 3)
    bounds = [{"level": "block", "geocode": b, "query": "age", "cell": "18+", "lower": 30} for b in blocks]
    release, _ = _release(bounds=bounds)
    with pytest.raises(RefusedError) as err:
        cd.census_da(release.observation_model(None), cd.CensusDAOptions(draws=2, warmup=1, chains=1, seed=1,
                                                                         quiet=True))
    assert err.value.field == "bounds" and "\n" not in str(err.value)


# --------------------------------------------------------------------------- without bounds, the draws unchanged
def test_no_bounds_and_bounds_that_never_bind_leave_the_draws_unchanged():
    """An empty bounds list, or bounds no state can break (lower 0, no upper), give the draws of the release
    without bounds: the check narrows no window and draws nothing."""
    none, x = _release()
    blocks = geography(2, 1, 2, 3)
    loose = [{"level": "block", "geocode": b, "query": "detailed", "cell": "18+|w"} for b in blocks[:4]]
    loose += [{"level": "county", "geocode": "15001", "query": "total", "cell": "", "lower": 0}]
    for partition in (None, "county"):
        opts = cd.CensusDAOptions(draws=10, warmup=10, chains=2, seed=2, quiet=True, partition=partition)
        base = cd.census_da(none.observation_model(None), opts).posterior
        for bounds in ([], loose):
            post = cd.census_da(_release(bounds=bounds)[0].observation_model(None), opts).posterior
            for name in ("counts", "alpha", "beta", "tau", "tract_mix"):
                assert np.array_equal(np.asarray(post[name]), np.asarray(base[name])), (bounds, name)
    assert _release(bounds=[])[0].structure.bounds is None


# --------------------------------------------------------------------------- the manifest field
def test_rows_are_read_and_merged():
    s = _tiny(False, TINY_BOUNDS + [{"level": "block", "geocode": TINY_BLOCKS[0], "query": "detailed",
                                     "cell": "q|s", "lower": 0, "upper": 3}])
    b = s.bounds
    assert b.size == 3
    assert b.lower.tolist() == [0, 2, 0] and b.upper[0] == 1 and b.upper[2] == 2 and b.upper[1] > 2 ** 60
    assert b.rows(s)[0] == {"level": "block", "geocode": TINY_BLOCKS[0], "query": "detailed", "cell": "q|s",
                            "lower": 0, "upper": 1}


@pytest.mark.parametrize("row, field, says", [
    ({"level": "parish"}, "bounds[0].level", "not one of the manifest's levels"),
    ({"geocode": "150010001001009"}, "bounds[0].geocode", "not a geounit"),
    ({"query": "eth"}, "bounds[0].query", "not a key of queries"),
    ({"cell": "x|y"}, "bounds[0].cell", "not a cell of query detailed"),
    ({"lower": 3, "upper": 2}, "bounds[0].lower", "above its upper bound"),
    ({"lower": -1}, "bounds[0].lower", "must be >= 0"),
    ({"upper": 2.5}, "bounds[0].upper", "whole number"),
    ({"upper": "many"}, "bounds[0].upper", "whole number"),
    ({"upper": True}, "bounds[0].upper", "whole number"),
    ({"sd": 1}, "bounds[0].sd", "unknown field"),
])
def test_bad_rows_are_refused_in_one_line(row, field, says):
    base = {"level": "block", "geocode": TINY_BLOCKS[0], "query": "detailed", "cell": "q|s"}
    with pytest.raises(InputError) as err:
        _tiny(False, [{**base, **row}])
    assert err.value.field == field and says in err.value.reason and "\n" not in str(err.value)


def test_bounds_contradicting_the_invariants_or_the_zeros_are_refused():
    def refused(bounds, invariant=True, zeros=None):
        rows = {"level": ["block"] * 2, "geocode": TINY_BLOCKS, "query": ["total"] * 2, "cell": [""] * 2,
                "noisy_value": [3, 4], "variance": [1.0, 1.0]}
        with pytest.raises(InputError) as err:
            build_structure(TINY_ATTRS, TINY_QUERIES, ["state", "block"], rows,
                            {"state_total": {"15": 12}} if invariant else None, structural_zeros=zeros,
                            bounds=bounds)
        assert "\n" not in str(err.value)
        return err.value

    # a lower bound above the exact state total, on a block inside it
    err = refused([{"level": "block", "geocode": TINY_BLOCKS[1], "query": "a", "cell": "p", "lower": 13}])
    assert err.field == "bounds[0].lower" and "invariants.state_total" in err.reason
    # an upper bound on the state total below its exact value
    err = refused([{"level": "state", "geocode": "15", "query": "total", "cell": "", "upper": 11}])
    assert err.field == "bounds[0].upper" and "12" in err.reason
    # a positive lower bound where the structural zeros leave no one
    err = refused([{"level": "block", "geocode": TINY_BLOCKS[0], "query": "detailed", "cell": "q|s", "lower": 1}],
                  zeros=[{"a": "q", "b": "s"}])
    assert err.field == "bounds[0].lower" and "structural_zeros" in err.reason
    # two rows on one cell that together leave nothing
    err = refused([{"level": "state", "geocode": "15", "query": "a", "cell": "p", "lower": 5},
                   {"level": "state", "geocode": "15", "query": "a", "cell": "p", "upper": 4}], invariant=False)
    assert err.field == "bounds[1].lower"
    with pytest.raises(InputError, match="bounds: must be"):
        _tiny(False, "not rows")


def test_a_bounds_table_file_and_the_round_trip(tmp_path):
    """A CSV table beside the manifest (empty lower and upper allowed), read with geocodes as text; saving
    writes it beside the new manifest; a wrong cell in the file names the column and row."""
    blocks = geography(2, 1, 2, 3)
    _, x = _release()
    bounds = _bounds_of(x, blocks)
    inline, _ = _release(bounds=bounds)
    path = dc.save(inline, tmp_path / "r.json")
    assert json.loads(path.read_text())["bounds"] == bounds
    lines = ["level,geocode,query,cell,lower,upper"] + [
        f"{r['level']},{r['geocode']},{r['query']},{r['cell']},{r.get('lower', '')},{r.get('upper', '')}"
        for r in bounds]
    (tmp_path / "b.csv").write_text("\n".join(lines) + "\n")
    data = json.loads(path.read_text())
    data["bounds"] = "b.csv"
    path.write_text(json.dumps(data))
    back = load_release(path)
    assert back.structure.bounds.rows(back.structure) == inline.structure.bounds.rows(inline.structure)
    (tmp_path / "copy").mkdir()
    again = dc.save(back, tmp_path / "copy" / "c.json")
    assert json.loads(again.read_text())["bounds"] == "c.bounds.parquet"
    copy = load_release(again)
    assert copy.structure.bounds.rows(copy.structure) == inline.structure.bounds.rows(inline.structure)
    (tmp_path / "b.csv").write_text("\n".join(lines[:2] + [lines[2].replace(",age,", ",old,")]) + "\n")
    with pytest.raises(InputError) as err:
        load_release(path)
    assert err.value.field == "bounds.query[1]"


def test_the_memory_estimate_counts_the_bound_index(monkeypatch):
    """The engine's estimate, refused against before anything is allocated, grows by at least the bound index the
    kernels read (``btab``, laid out as the measurement index ``mtab``) when the release has bounds."""
    from dpposterior import memory

    seen = []
    monkeypatch.setattr(memory, "check_fits", lambda est, *args: seen.append(est))
    for bounds in (None, TINY_BOUNDS):
        cd._memory_check(_tiny(False, bounds), 2, 7)
    btab = cd.Problem(_tiny(False, TINY_BOUNDS), CensusPrior()).btab
    assert btab.size > 0 and seen[1] - seen[0] >= btab.nbytes
