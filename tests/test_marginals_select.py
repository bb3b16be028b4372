"""MST-style private selection of the cliques of a ``marginals`` release (families/marginals_select.py).

Replace-one neighbours throughout.  The privacy checks are exact: every neighbouring pair of tiny data sets,
the selection probabilities computed in closed form (no sampling)."""

from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpposterior.errors import InputError
from dpposterior.families.marginals_select import (SCORE_SENSITIVITY, Selection, mst_scores, opendp_round_rho,
                                                   round_probabilities, select_mst, smallest_connecting_cap)


def chain_data(n, rng):
    """a -> b -> c -> d (each copies its parent with probability 0.8), e independent."""
    a = rng.integers(0, 3, n)
    b = np.where(rng.random(n) < 0.8, a, rng.integers(0, 3, n))
    c = np.where(rng.random(n) < 0.8, b, rng.integers(0, 3, n))
    d = np.where(rng.random(n) < 0.8, c, rng.integers(0, 3, n))
    e = rng.integers(0, 2, n)
    return np.c_[a, b, c, d, e], {"a": 3, "b": 3, "c": 3, "d": 3, "e": 2}


def noisy_one_ways(x, domain, sigma, rng):
    return {a: np.bincount(x[:, i], minlength=size) + rng.normal(0, sigma, size)
            for i, (a, size) in enumerate(domain.items())}


# ------------------------------------------------------------------------------------------- utility


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_large_rho_recovers_the_planted_chain(seed):
    rng = np.random.default_rng(seed)
    x, domain = chain_data(5000, rng)
    ow = noisy_one_ways(x, domain, 5.0, rng)
    sel = select_mst(x, domain, rho_select=5.0, one_way=ow, rng=rng, publication=False)
    edges = {frozenset(e) for e in sel.cliques}
    assert len(sel.cliques) == 4 and sel.rounds == 4
    assert {frozenset("ab"), frozenset("bc"), frozenset("cd")} <= edges
    assert sum("e" in e for e in edges) == 1  # e hangs off the chain by one (arbitrary) edge
    assert sel.rho <= 5.0 and sel.rho == pytest.approx(5.0, rel=1e-12)
    assert sel.sampler == "numpy-gumbel (not for publication)"


def test_tiny_rho_is_uniform_over_candidates():
    rng = np.random.default_rng(11)
    x, domain = chain_data(200, rng)
    x, domain = x[:, :4], {k: domain[k] for k in "abcd"}
    ow = noisy_one_ways(x, domain, 1.0, rng)
    pairs = list(itertools.combinations("abcd", 2))
    runs = 3000
    first, second = np.zeros(6), np.zeros(5)
    for _ in range(runs):
        sel = select_mst(x, domain, rho_select=1e-12, one_way=ow, rng=rng, publication=False)
        e1, e2 = sel.cliques[:2]
        first[pairs.index(e1)] += 1
        rest = [p for p in pairs if p != e1]  # after one edge every other pair joins two components
        second[rest.index(e2)] += 1
    assert stats.chisquare(first).pvalue > 1e-3
    assert stats.chisquare(second).pvalue > 1e-3


def test_scores_are_the_l1_misfit_of_the_independence_estimate():
    x = np.array([[0, 0], [0, 1], [1, 1], [1, 1]])
    s = mst_scores(x, {"u": 2, "v": 2}, {"u": [2.0, 2.0], "v": [-1.0, 3.0]})  # v clipped to (0, 1)
    # table [[1, 1], [0, 2]], estimate 4 * (.5, .5) x (0, 1) = [[0, 2], [0, 2]]
    assert s == {("u", "v"): pytest.approx(2.0)}


# ------------------------------------------------------------------------------------------- privacy


def _tiny_world():
    """n = 3 records of 3 binary attributes: every ordered data set (8^3) and every replace-one neighbour."""
    cells = list(itertools.product([0, 1], repeat=3))
    datasets = list(itertools.product(range(8), repeat=3))
    neighbours = set()
    for ds in datasets:
        for pos in range(3):
            for v in range(8):
                if v != ds[pos]:
                    nb = ds[:pos] + (v,) + ds[pos + 1:]
                    neighbours.add((tuple(sorted(ds)), tuple(sorted(nb))))
    hists = sorted({tuple(sorted(ds)) for ds in datasets})
    index = {h: i for i, h in enumerate(hists)}
    pairs = np.array([(index[a], index[b]) for a, b in neighbours])
    records = [np.array([cells[c] for c in h]) for h in hists]
    return records, pairs


#: noisy one-ways of the tiny world: P(attribute = 0) on a grid, the extremes included (they attain the bound)
GRID = [0.0, 1 / 3, 0.5, 0.9, 1.0]
DOMAIN3 = {"a": 2, "b": 2, "c": 2}


def test_score_sensitivity_by_brute_force_is_the_stated_one():
    records, pairs = _tiny_world()
    worst = 0.0
    for pa, pb, pc in itertools.product(GRID, repeat=3):
        ow = {"a": [3 * pa, 3 - 3 * pa], "b": [3 * pb, 3 - 3 * pb], "c": [3 * pc, 3 - 3 * pc]}
        s = np.array([list(mst_scores(r, DOMAIN3, ow).values()) for r in records])
        worst = max(worst, float(np.abs(s[pairs[:, 0]] - s[pairs[:, 1]]).max()))
    assert worst == pytest.approx(SCORE_SENSITIVITY, abs=1e-12)


@pytest.mark.parametrize("rho_select", [0.5, 8.0])
def test_selection_probabilities_of_neighbours_within_exp_epsilon(rho_select):
    """Exact: each round's law, over every candidate set Kruskal can meet, moves by at most exp(eps_round)
    between replace-one neighbours, and its log-ratios span at most eps_round (bounded range, hence
    eps^2/8-zCDP); the two-round law of the ordered tree moves by at most exp(rounds * eps_round)."""
    records, pairs = _tiny_world()
    ow0 = {"a": [1.0, 2.0], "b": [1.0, 2.0], "c": [1.0, 2.0]}
    sel = select_mst(records[0], DOMAIN3, rho_select=rho_select, one_way=ow0, rng=0, publication=False)
    eps, scale = sel.epsilon_per_round, sel.scale
    assert sel.rounds == 2 and sel.rho <= rho_select
    assert eps == pytest.approx(math.sqrt(8 * rho_select / 2), rel=1e-9)
    assert scale == pytest.approx(2 * SCORE_SENSITIVITY / eps, rel=1e-9)
    candidate_sets = [[0, 1, 2], [1, 2], [0, 2], [0, 1]]  # round 1; round 2 after pair 0, 1 or 2
    worst = worst_range = worst_tree = 0.0
    for pa, pb, pc in itertools.product(GRID, repeat=3):
        ow = {"a": [3 * pa, 3 - 3 * pa], "b": [3 * pb, 3 - 3 * pb], "c": [3 * pc, 3 - 3 * pc]}
        s = np.array([list(mst_scores(r, DOMAIN3, ow).values()) for r in records])
        logp = {}
        for cand in candidate_sets:
            lp = np.log(np.array([round_probabilities(row[cand], scale) for row in s]))
            lr = lp[pairs[:, 0]] - lp[pairs[:, 1]]
            worst = max(worst, float(np.abs(lr).max()))
            worst_range = max(worst_range, float((lr.max(axis=1) - lr.min(axis=1)).max()))
            logp[tuple(cand)] = lp
        tree = np.concatenate([logp[(0, 1, 2)][:, [first]] + logp[tuple(c for c in (0, 1, 2) if c != first)]
                               for first in range(3)], axis=1)  # log P(first, then second), 6 ordered trees
        worst_tree = max(worst_tree, float(np.abs(tree[pairs[:, 0]] - tree[pairs[:, 1]]).max()))
    assert worst <= eps * (1 + 1e-9)
    assert worst_range <= eps * (1 + 1e-9)
    assert worst_tree <= 2 * eps * (1 + 1e-9)
    assert worst > 0.5 * eps  # the bound is not loose by more than a factor 2 on this tiny world


def test_the_budget_is_never_overspent_and_records_round_trip():
    x = np.array([[0, 1, 2], [1, 0, 0], [1, 1, 1]])
    domain = {"p": 2, "q": 2, "r": 3}
    ow = {"p": [1, 2], "q": [2, 1], "r": [1, 1, 1]}
    for rho in [1e-9, 0.001, 0.1, 1 / 3, 2.0, 1e6]:
        sel = select_mst(x, domain, rho_select=rho, one_way=ow, rng=0, publication=False)
        assert sel.rho <= rho and sel.rho == pytest.approx(rho, rel=1e-12)
        assert sel.rho == sel.rounds * sel.epsilon_per_round ** 2 / 8
        rec = sel.to_record()
        assert list(rec) == ["method", "rounds", "epsilon_per_round", "sensitivity", "rho", "sampler"]
        assert Selection.check_record(rec) == rec
        assert Selection.privacy_rho(rec) == sel.rho


# ------------------------------------------------------------------------------------------- OpenDP


def _opendp():
    dp = pytest.importorskip("opendp.prelude")
    if not hasattr(dp.m, "make_noisy_max"):
        pytest.skip("this OpenDP has no make_noisy_max")
    return dp


def test_opendp_path_returns_a_spanning_tree_and_states_opendps_map():
    _opendp()
    rng = np.random.default_rng(5)
    x, domain = chain_data(500, rng)
    ow = noisy_one_ways(x, domain, 2.0, rng)
    sel = select_mst(x, domain, rho_select=0.2, one_way=ow)
    assert sel.sampler.startswith("opendp-") and "make_noisy_max" in sel.sampler
    assert len(sel.cliques) == 4 and all(a != b and a in domain and b in domain for a, b in sel.cliques)
    parent = {a: a for a in domain}

    def root(a):
        while parent[a] != a:
            a = parent[a]
        return a

    for a, b in sel.cliques:  # no cycle: 4 edges on 5 vertices => spanning tree
        assert root(a) != root(b)
        parent[root(a)] = root(b)
    assert sel.rho <= 0.2
    # OpenDP's own privacy map of one round is what the record states per round (to rounding, never above)
    assert sel.opendp_rho_per_round <= sel.epsilon_per_round ** 2 / 8
    assert sel.opendp_rho_per_round == pytest.approx(sel.epsilon_per_round ** 2 / 8, rel=1e-12)


def test_opendp_map_is_the_bounded_range_formula():
    _opendp()
    for scale, d_in in [(1.0, 1.0), (1.0, 2.0), (4.0, 2.0), (2.8284271247461903, 2.0)]:
        assert opendp_round_rho(scale, d_in) == pytest.approx((2 * d_in / scale) ** 2 / 8, rel=1e-12)


def test_opendp_draws_softmax_of_scores_over_scale():
    dp = _opendp()
    dp.enable_features("contrib")
    space = dp.vector_domain(dp.atom_domain(T=float, nan=False)), dp.linf_distance(T=float)
    meas = dp.m.make_noisy_max(*space, dp.zero_concentrated_divergence(), scale=1.5)
    scores = [0.0, 1.0, 2.5]
    counts = np.bincount([meas(scores) for _ in range(3000)], minlength=3)
    assert stats.chisquare(counts, 3000 * round_probabilities(scores, 1.5)).pvalue > 1e-3


# ------------------------------------------------------------------------------------------- refusals

X = np.array([[0, 1], [1, 0], [1, 1]])
DOM = {"u": 2, "v": 2}
OW = {"u": [1.0, 2.0], "v": [2.0, 1.0]}


@pytest.mark.parametrize("kwargs, field", [
    (dict(records=X[:, :1], domain={"u": 2}, one_way={"u": [1, 2]}), "domain"),
    (dict(rho_select=0.0), "rho_select"),
    (dict(rho_select=-1.0), "rho_select"),
    (dict(rho_select=float("nan")), "rho_select"),
    (dict(rho_select=float("inf")), "rho_select"),
    (dict(records=X[:, 0]), "records"),
    (dict(records=np.c_[X, X[:, :1]]), "records"),
    (dict(records=np.zeros((0, 2), int)), "records"),
    (dict(records=X + 0.5), "records"),
    (dict(records=np.array([[0, 2], [1, 0]])), "records.v"),
    (dict(records=np.array([[-1, 0], [1, 0]])), "records.u"),
    (dict(domain={"u": 2, "v": 0}), "domain.v"),
    (dict(one_way={"u": [1.0, 2.0]}), "one_way.v"),
    (dict(one_way={"u": [1.0, 2.0], "v": [1.0, 2.0, 3.0]}), "one_way.v"),
    (dict(one_way={"u": [1.0, 2.0], "v": [1.0, float("nan")]}), "one_way.v"),
    (dict(one_way={**OW, "w": [1.0]}), "one_way.w"),
])
def test_refusals_name_the_field(kwargs, field):
    args = dict(records=X, domain=DOM, one_way=OW, rho_select=1.0, rng=0, publication=False)
    args.update(kwargs)
    records = args.pop("records")
    domain = args.pop("domain")
    with pytest.raises(InputError) as info:
        select_mst(records, domain, **args)
    assert info.value.field == field
    assert "\n" not in str(info.value)


GOOD = {"method": "mst", "rounds": 3, "epsilon_per_round": 0.5, "sensitivity": 2.0, "rho": 0.09375,
        "sampler": "opendp-0.16.0 make_noisy_max (zCDP, exact Gumbel-max)"}


@pytest.mark.parametrize("change, field", [
    ({"method": "aim"}, "selection.method"),
    ({"rounds": 0}, "selection.rounds"),
    ({"rounds": 2.5}, "selection.rounds"),
    ({"epsilon_per_round": -1.0}, "selection.epsilon_per_round"),
    ({"sensitivity": float("nan")}, "selection.sensitivity"),
    ({"rho": 0.05}, "selection.rho"),  # below 3 * 0.5^2 / 8
    ({"sampler": ""}, "selection.sampler"),
    ({"extra": 1}, "selection.extra"),
])
def test_check_record_refuses(change, field):
    with pytest.raises(InputError) as info:
        Selection.check_record({**GOOD, **change})
    assert info.value.field == field and "\n" not in str(info.value)
    missing = dict(GOOD)
    del missing["rho"]
    with pytest.raises(InputError, match="selection.rho: is missing"):
        Selection.check_record(missing)


def test_privacy_rho_recomputes_and_never_goes_below():
    assert Selection.privacy_rho(GOOD) == pytest.approx(0.09375)
    assert Selection.privacy_rho({**GOOD, "rho": 0.5}) == 0.5  # a stated larger rho is kept


# ------------------------------------------------------------------------------------------- cap on the cells


def _spanning_trees(k):
    """Every spanning tree of the complete graph on k vertices, as a tuple of pairs (brute force)."""
    pairs = list(itertools.combinations(range(k), 2))
    for edges in itertools.combinations(pairs, k - 1):
        parent = list(range(k))

        def root(a):
            while parent[a] != a:
                a = parent[a]
            return a

        ok = True
        for a, b in edges:
            if root(a) == root(b):
                ok = False
                break
            parent[root(a)] = root(b)
        if ok:
            yield edges


@pytest.mark.parametrize("seed", range(6))
def test_smallest_connecting_cap_is_the_brute_force_bottleneck(seed):
    rng = np.random.default_rng(seed)
    sizes = [int(v) for v in rng.integers(1, 12, size=int(rng.integers(2, 6)))]
    brute = min(max(sizes[a] * sizes[b] for a, b in tree) for tree in _spanning_trees(len(sizes)))
    assert smallest_connecting_cap(sizes) == brute


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_cap_keeps_every_chosen_table_within_it_and_a_loose_cap_changes_nothing(seed):
    rng = np.random.default_rng(seed)
    x, domain = chain_data(2000, rng)
    x = np.c_[x, rng.integers(0, 7, len(x))]
    domain = {**domain, "f": 7}  # f x a 3-level attribute: 21 cells; f x e: 14
    ow = noisy_one_ways(x, domain, 3.0, rng)
    sel = select_mst(x, domain, rho_select=2.0, one_way=ow, rng=seed, publication=False, max_cells=14)
    assert len(sel.cliques) == 5 and sel.max_cells == 14
    assert {"e", "f"} in [set(c) for c in sel.cliques]  # the only pair of f within 14 cells
    assert all(domain[a] * domain[b] <= 14 for a, b in sel.cliques)
    assert sel.to_record()["max_cells"] == 14 and Selection.check_record(sel.to_record()) == sel.to_record()
    free = select_mst(x, domain, rho_select=2.0, one_way=ow, rng=seed, publication=False)
    loose = select_mst(x, domain, rho_select=2.0, one_way=ow, rng=seed, publication=False, max_cells=21)
    assert loose.cliques == free.cliques and loose.rho == free.rho == sel.rho  # same rounds, same cost
    assert "max_cells" not in free.to_record()


def test_capped_first_round_draws_softmax_over_the_allowed_pairs_only():
    """The cap removes candidates and nothing else: round one's law is softmax(u / s) over the allowed pairs
    (cap 6 on sizes 2, 2, 3, 3 leaves out only (c, d), the 9-cell table, whose pair is made the best scored)."""
    rng = np.random.default_rng(4)
    n = 300
    c = rng.integers(0, 3, n)
    x = np.c_[rng.integers(0, 2, n), rng.integers(0, 2, n), c, np.where(rng.random(n) < 0.9, c, rng.integers(0, 3, n))]
    domain = {"a": 2, "b": 2, "c": 3, "d": 3}
    ow = noisy_one_ways(x, domain, 1.0, rng)
    scores = mst_scores(x, domain, ow)
    assert max(scores, key=scores.get) == ("c", "d")
    allowed = [p for p in itertools.combinations("abcd", 2) if p != ("c", "d")]
    first = dict.fromkeys(allowed, 0)
    runs = 3000
    for _ in range(runs):
        sel = select_mst(x, domain, rho_select=0.5, one_way=ow, rng=rng, publication=False, max_cells=6)
        first[tuple(sel.cliques[0])] += 1  # a KeyError here: a pair beyond the cap was drawn
    prob = round_probabilities(np.array([scores[p] for p in allowed]), sel.scale)
    counts = np.array([first[p] for p in allowed])
    assert stats.chisquare(counts, runs * prob).pvalue > 1e-3


@pytest.mark.parametrize("cap, match", [(5, "smallest cap that connects them is 6"), (0, "integer >= 1"),
                                        (True, "integer >= 1"), (6.0, "integer >= 1")])
def test_a_cap_that_cannot_connect_or_is_not_a_count_is_refused(cap, match):
    x = np.array([[0, 1, 2], [1, 0, 0], [1, 1, 1]])
    domain = {"p": 2, "q": 2, "r": 3}
    ow = {"p": [1, 2], "q": [2, 1], "r": [1, 1, 1]}
    with pytest.raises(InputError, match=match) as info:
        select_mst(x, domain, rho_select=1.0, one_way=ow, rng=0, publication=False, max_cells=cap)
    assert info.value.field == "max_cells" and "\n" not in str(info.value)


@pytest.mark.parametrize("cap", [0, -3, 2.5, "12", True])
def test_check_record_refuses_a_bad_cap(cap):
    with pytest.raises(InputError) as info:
        Selection.check_record({**GOOD, "max_cells": cap})
    assert info.value.field == "selection.max_cells"


# ------------------------------------------------------------------------------------------- through the curator


@pytest.fixture
def wide_csv(tmp_path):
    """Six columns: five of 2-3 levels (``chain_data``) and f of 6 levels, so that every pair holding f has 12-18
    cells and only (e, f) has at most 12."""
    rng = np.random.default_rng(8)
    x, _ = chain_data(400, rng)
    frame = {name: x[:, i] for i, name in enumerate("abcde")}
    frame["f"] = rng.integers(0, 6, len(x))
    path = tmp_path / "wide.csv"
    pd.DataFrame(frame).to_csv(path, index=False)
    return path


def test_curator_mst_with_a_cap_records_it_and_keeps_every_pair_within_it(wide_csv, tmp_path, capsys):
    from dpposterior.cli import main
    from dpposterior.release import load_release

    out = tmp_path / "rel.json"
    code = main(["release", str(wide_csv), "--family", "marginals", "--cliques", "mst", "--max-cells", "12",
                 "--mechanism", "discrete-gaussian", "--rho", "1.0", "--seed", "3", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    release = load_release(out)
    pairs = [m.clique for m in release.measurements if len(m.clique) == 2]
    sizes = release.domain
    assert len(pairs) == 5 and all(sizes[a] * sizes[b] <= 12 for a, b in pairs)
    assert [p for p in pairs if "f" in p] and all(set(p) & {"e", "f"} == {"e", "f"} for p in pairs if "f" in p)
    assert json.loads(out.read_text())["selection"]["max_cells"] == 12
    assert release.privacy().rho == pytest.approx(1.0, rel=1e-9)  # the cap costs nothing and changes no budget


@pytest.mark.parametrize("args, message", [
    (["--cliques", "mst", "--max-cells", "11"], "error: max-cells: 11 leaves the attributes unconnected"),
    (["--cliques", "mst", "--max-cells", "0"], "error: max-cells: must be an integer >= 1"),
    (["--cliques", "a,b;c", "--max-cells", "12"], "error: max-cells: caps the pairs that --cliques mst may choose"),
])
def test_curator_refuses_a_cap_it_cannot_use_in_one_line(wide_csv, tmp_path, capsys, args, message):
    from dpposterior.cli import main

    code = main(["release", str(wide_csv), "--family", "marginals", *args, "--mechanism", "discrete-gaussian",
                 "--rho", "1.0", "--seed", "3", "--out", str(tmp_path / "rel.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().startswith(message) and err.strip().count("\n") == 0, err
