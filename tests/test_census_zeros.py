"""Structural zeros in the census family: the manifest field and its refusals, the posterior's zeros, the
simulators and the peers (the engine against enumeration is in test_census.py)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import dpposterior.census as dc
from dpposterior.errors import InputError
from dpposterior.families.census import CensusPrior, draw_histograms, draw_prior, simulate
from dpposterior.families.census_table import build_structure
from dpposterior.inference import census_da as cd
from dpposterior.inference import census_peers as cp
from dpposterior.release import load_release
from test_census import (ATTRS, LEVELS, QUERIES, SBC_VARIANCE, geography, infer_cli, manifest, measure, run_cli,
                         skeleton)

#: cells u18|h, 18+|h (ethnicity h wholly) and u18|b hold no one; u18|w, 18+|w and 18+|b may
ZEROS = [{"eth": "h"}, {"age": ["u18"], "eth": "b"}]
ZERO_CELLS = [0, 2, 3]
ALLOWED = [1, 4, 5]


def _release(seed=0, zeros=ZEROS, invariant=True):
    blocks = geography(2, 1, 2, 3)
    rng = np.random.default_rng(seed)
    x = rng.poisson(4, size=(len(blocks), 6))
    x[:, ZERO_CELLS] = 0
    rows = measure(x, blocks, SBC_VARIANCE, rng)
    extra = {"invariants": {"state_total": {"15": int(x.sum())}}} if invariant else {}
    return dc.release_from(manifest(structural_zeros=zeros, **extra), rows), x


def test_the_mask_and_the_zero_query_cells():
    s = _release()[0].structure
    assert np.flatnonzero(s.structural_zero).tolist() == ZERO_CELLS
    assert s.allowed_cells.tolist() == ALLOWED
    assert s.zero_query_cells("eth").tolist() == [True, False, False]
    assert s.zero_query_cells("age").tolist() == [False, False]
    assert s.zero_query_cells("detailed").tolist() == [True, False, True, True, False, False]
    # no structural zeros: every cell allowed
    assert _release(zeros=None)[0].structure.structural_zero is None


@pytest.mark.parametrize("zeros, field, says", [
    ({"eth": "h"}, "structural_zeros", "must be a list"),
    (["eth"], "structural_zeros[0]", "must be a partial cell"),
    ([{"eth": "h"}, {}], "structural_zeros[1]", "names no attribute"),
    ([{"sex": "f"}], "structural_zeros[0].sex", "unknown attribute"),
    ([{"eth": "h"}, {"age": "old"}], "structural_zeros[1].age", "'old' is not a label of age"),
    ([{"age": []}], "structural_zeros[0].age", "non-empty list"),
    ([{"age": ["u18", 3]}], "structural_zeros[0].age", "3 is not a label of age"),
    ([{"age": ["u18", "18+"]}], "structural_zeros[0]", "zeroes every cell"),
    ([{"age": "u18"}, {"age": "18+"}], "invariants.state_total.15", "leave no cell that may hold a person"),
])
def test_bad_structural_zeros_are_refused_in_one_line(zeros, field, says):
    with pytest.raises(InputError) as err:
        _release(zeros=zeros)
    assert err.value.field == field and says in err.value.reason and "\n" not in str(err.value)


def test_zeroing_every_cell_without_an_invariant_is_refused():
    with pytest.raises(InputError) as err:
        _release(zeros=[{"age": "u18"}, {"age": "18+"}], invariant=False)
    assert err.value.field == "structural_zeros" and "every cell" in err.value.reason


def test_a_noisy_value_in_a_zero_cell_is_noise_not_an_error():
    """A measured cell made only of structural zeros has true value 0; its noisy value may be anything."""
    release, _ = _release()
    s = release.structure
    rows, units, cells = s.measured("block", "detailed")
    assert np.any(s.noisy[rows][np.isin(cells, [0, 2, 3])] != 0)


def test_round_trip_keeps_the_field(tmp_path):
    release, _ = _release()
    path = dc.save(release, tmp_path / "r.json")
    assert json.loads(path.read_text())["structural_zeros"] == ZEROS
    back = load_release(path)
    assert np.array_equal(back.structure.structural_zero, release.structure.structural_zero)
    assert back.sha256 != _release(zeros=None)[0].sha256


def test_posterior_counts_are_zero_there_and_tables_work(tmp_path):
    release, x = _release()
    for partition in (None, "county"):
        post = cd.census_da(release.observation_model(None),
                            cd.CensusDAOptions(draws=30, warmup=20, chains=2, seed=1, quiet=True, partition=partition))
        counts = post.posterior["counts"]
        assert counts.shape[-1] == 6 and np.all(counts[..., ZERO_CELLS] == 0)
        assert counts[..., ALLOWED].sum() > 0
        assert np.all(counts.sum(axis=(2, 3)) == int(x.sum()))
        mix = post.posterior["tract_mix"]
        assert np.all(mix[..., ZERO_CELLS] == 0) and np.allclose(mix.sum(-1), 1.0, atol=1e-5)
    eth = post.counts(level="county", query="eth")
    assert eth.dims == ("chain", "draw", "county", "cell") and np.all(eth.values[..., 0] == 0)
    table = dc.tabulate(post, "tract", "detailed")
    assert np.all(table.loc[table["cell"].isin(["u18|h", "u18|b", "18+|h"]), ["lower", "upper"]].values == 0)
    naive = cd.census_naive(release.observation_model(None),
                            cd.CensusNaiveOptions(draws=10, seed=2)).posterior["counts"]
    assert np.all(naive[..., ZERO_CELLS] == 0) and naive[..., ALLOWED].sum() > 0


def test_cli_infer_and_tabulate_with_structural_zeros(tmp_path):
    infer_cli(_release()[0], tmp_path)
    res = run_cli("tabulate", str(tmp_path / "p.nc"), "--level", "block", "--query", "detailed", "--out",
              str(tmp_path / "t.csv"))
    assert res.returncode == 0, res.stderr
    import pandas as pd

    t = pd.read_csv(tmp_path / "t.csv")
    zero = t["cell"].isin(["u18|h", "u18|b", "18+|h"])
    assert zero.sum() == 12 * 3 and np.all(t.loc[zero].drop(columns=["geocode", "cell"]).values == 0)


def test_prior_draws_and_the_calibrate_simulator_respect_them():
    blocks = geography(2, 2, 2, 3)
    base = build_structure(ATTRS, QUERIES, LEVELS, {"level": ["block"], "geocode": [blocks[0]], "query": ["total"],
                                                    "cell": [""], "noisy_value": [0], "variance": [1.0]},
                           blocks=blocks, structural_zeros=ZEROS)
    rng = np.random.default_rng(0)
    theta = draw_prior(CensusPrior(), base, rng)
    assert np.all(theta["tract_mix"][:, ZERO_CELLS] == 0) and np.allclose(theta["tract_mix"].sum(1), 1)
    x = draw_histograms(dict(theta, alpha=5.0, block_group_mean=np.full(8, 50.0)), base, rng)
    assert np.all(x[:, ZERO_CELLS] == 0) and x[:, ALLOWED].sum() > 0
    zeros = [{"ethnicity": "other"}]
    sim = simulate(None, 24, 1.0, np.random.default_rng(1), structural_zeros=zeros)
    assert np.all(sim.confidential["counts"][:, [2, 5]] == 0)
    assert sim.release.structural_zeros == zeros
    assert sim.release.structure.structural_zero.tolist() == [False, False, True, False, False, True]
    # without them the draws are the ones they always were (same generator use)
    assert skeleton(blocks).structural_zero is None


def test_the_production_simulator_refuses_persons_in_a_zero_cell():
    blocks = geography(1, 1, 1, 2)
    counts = np.ones((2, 2, 8), dtype=np.int64)
    zeros = [{"age": "under 18", "ethrace": "nhpi"}]
    with pytest.raises(InputError) as err:
        dc.simulate((blocks, counts), seed=1, structural_zeros=zeros)
    assert err.value.field == "truth" and "'under 18|nhpi', a structural zero" in err.value.reason
    counts[:, 0, 5] = 0
    release = dc.simulate((blocks, counts), seed=1, structural_zeros=zeros)
    assert release.structural_zeros == zeros and release.structure.structural_zero.sum() == 1
    with pytest.raises(InputError) as err:
        dc.simulate((blocks, counts), seed=1, structural_zeros=[{"age": "old"}])
    assert err.value.field == "structural_zeros[0].age"


def test_peers_know_the_zero_cells():
    """GLS: the zero cells are known 0 (mean 0, sd 0) and the rest equal GLS of the same release told the zeros
    by near-exact measurements of 0 instead; naive and flat-prior read 0 there."""
    release, _ = _release(invariant=False)
    s = release.structure
    res = cp.gls(s)
    mean, sd = res.estimate("block", "detailed")
    assert np.all(mean[:, ZERO_CELLS] == 0) and np.all(sd[:, ZERO_CELLS] == 0)
    assert np.all(np.isfinite(mean)) and np.all(sd[:, ALLOWED] > 0)
    m_eth, sd_eth = res.estimate("county", "eth")
    assert np.all(m_eth[:, 0] == 0) and np.all(sd_eth[:, 0] == 0)
    # the reference: no structural zeros, each zero cell measured at every block as 0 with variance 1e-6
    rows, units, cells = s.measured("block", "detailed")
    noisy, var = s.noisy.copy(), s.variance.copy()
    told = rows[np.isin(cells, ZERO_CELLS)]
    noisy[told], var[told] = 0, 1e-6
    other = [(s.level == li) & (s.query == 3) & np.isin(s.cell, ZERO_CELLS) for li in range(s.L - 1)]
    keep = ~np.any(other, axis=0)  # the upper levels' rows of the zero cells: noise about 0 in the release
    cols = {"level": np.asarray(s.levels)[s.level][keep], "geocode": np.array(
        [s.units[li][u] for li, u in zip(s.level, s.unit)])[keep], "query": np.asarray(s.query_names)[s.query][keep],
        "cell": np.array([s.cell_labels(q)[c] for q, c in zip(np.asarray(s.query_names)[s.query], s.cell)])[keep],
        "noisy_value": noisy[keep], "variance": var[keep]}
    ref = cp.gls(build_structure(ATTRS, QUERIES, LEVELS, cols))
    for lv in ("block", "tract", "state"):
        for q in ("age", "detailed"):
            a, b = res.estimate(lv, q)[0], ref.estimate(lv, q)[0]
            assert np.allclose(a, b, atol=1e-3), (lv, q)
    for fn in (cp.naive, cp.flat_prior):
        for arr in fn(s, "block", "detailed"):
            assert np.all(arr[:, ZERO_CELLS] == 0) and np.all(np.isfinite(arr))
        assert np.all(fn(s, "county", "eth")[0][:, 0] == 0)
