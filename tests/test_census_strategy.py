"""The 2020 production privacy-loss allocation mapped onto the census family's queries, the shipped Hawaii
truth table, and the release simulator (dpposterior.families.census_strategy).

The expected numbers are read from the DAS production code (uscensusbureau/DAS_2020_Redistricting_Production_Code,
commit 289ee46: configs/production/pl94/person_US.ini, person_default.ini, programs/strategies/strategies.py,
programs/engine/primitives.py) and its US persons certificate."""

from __future__ import annotations

import gzip
import math
from fractions import Fraction as Fr

import numpy as np
import pytest
from scipy import stats

from dpposterior.errors import InputError
from dpposterior.families import census_strategy as cs
from dpposterior.families.census_table import build_structure
from dpposterior.mechanisms.discrete_gaussian import DiscreteGaussian

PL94 = cs.STRATEGIES["pl94-2020"]


# --------------------------------------------------------------------------- the production allocation
def test_production_numbers_as_published():
    assert cs.PL94_GLOBAL_RHO == Fr(293764, 114921)
    assert round(float(cs.PL94_GLOBAL_RHO), 2) == 2.56
    assert list(cs.PL94_GEOLEVEL_PROPS) == ["US", "State", "County", "Tract", "Block_Group", "Block"]
    assert [p * 4099 for p in cs.PL94_GEOLEVEL_PROPS.values()] == [104, 1440, 447, 687, 1256, 165]


def test_production_fractions_sum_to_one():
    assert sum(cs.PL94_GEOLEVEL_PROPS.values()) == 1
    for level, props in cs.PL94_QUERY_PROPS.items():
        assert sum(props.values()) == 1, level
        assert all(p > 0 for p in props.values())
    assert "total" not in cs.PL94_QUERY_PROPS["US"]
    assert set(cs.PL94_QUERY_PROPS["Block"]) == set(cs.PL94_QUERIES)


def test_every_production_query_is_mapped():
    assert set(cs.REDUCED_QUERY_OF) == set(cs.PL94_QUERIES)
    assert set(cs.REDUCED_QUERY_OF.values()) == set(cs.QUERIES)
    assert cs.REDUCED_QUERY_OF["votingage"] == "age"
    assert {q for q, r in cs.REDUCED_QUERY_OF.items() if r == "ethrace"} == {"hispanic", "cenrace",
                                                                           "hispanic * cenrace"}


def test_mapped_shares_keep_each_levels_budget_and_drop_the_us_level():
    for glevel, level in cs.LEVEL_OF.items():
        got = sum((PL94.share[(level, q)] for q in cs.QUERIES), Fr(0)) if level else Fr(0)
        assert got == (cs.PL94_GEOLEVEL_PROPS[glevel] if level else 0)
    total_share = sum(PL94.share.values(), Fr(0))
    assert total_share == 1 - cs.PL94_GEOLEVEL_PROPS["US"] == Fr(3995, 4099)
    # the shares as fractions of the mapped strategy's own total sum to one
    assert sum((v / total_share for v in PL94.share.values()), Fr(0)) == 1
    assert PL94.rho == Fr(293764, 114921) * Fr(3995, 4099) == Fr(1173587180, 471061179)
    assert PL94.levels == cs.LEVELS and PL94.queries == tuple(cs.QUERIES)


def test_mapping_rule_on_named_cells():
    t, q = cs.PL94_GEOLEVEL_PROPS["Tract"], cs.PL94_QUERY_PROPS["Tract"]
    assert PL94.share[("tract", "ethrace")] == t * (q["hispanic"] + q["cenrace"] + q["hispanic * cenrace"])
    assert PL94.share[("tract", "total")] == t * Fr(1567, 4102)
    assert PL94.share[("tract", "age")] == t * Fr(5, 4102)
    b, q = cs.PL94_GEOLEVEL_PROPS["Block"], cs.PL94_QUERY_PROPS["Block"]
    assert PL94.share[("block", "detailed")] == b * Fr(3945 + 21 + 5 + 71 + 5 + 5, 4097)


def test_variances_follow_the_production_conversion():
    v = cs.noise_variances("pl94-2020")
    assert set(v) == {(lv, q) for lv in cs.LEVELS for q in cs.QUERIES}
    # primitives.py: sigma_sq = 1 / (query_prop * geolevel_prop / global_scale**2); variance = sigma_sq above 100
    block_total = Fr(4099 * 4097, 165 * 5) * Fr(339, 542) ** 2
    assert v[("block", "total")] == pytest.approx(float(block_total), rel=1e-15)
    assert math.sqrt(v[("block", "total")]) == pytest.approx(89.237, abs=1e-3)  # not ~112
    assert v[("block", "age")] == v[("block", "total")]
    # below sigma_sq = 100 the exact discrete-Gaussian variance, as computeDiscreteGaussianVariance sums it
    s2 = 1 / (cs.PL94_GLOBAL_RHO * Fr(1440, 4099) * Fr(3773, 4097))
    assert float(s2) == pytest.approx(1.20919, abs=1e-5)
    assert v[("state", "total")] == pytest.approx(DiscreteGaussian(math.sqrt(s2)).noise_variance, rel=1e-12)
    assert v[("state", "total")] != float(s2)
    for key, var in v.items():
        assert var == pytest.approx(cs.dg_variance(PL94.sigma_sq(*key)), rel=1e-15)
        assert var == pytest.approx(float(PL94.sigma_sq(*key)), rel=1e-6)
    # rho = sensitivity^2 / (2 sigma^2) with the replace-one sensitivity sqrt(2) of a marginal
    sigma = math.sqrt(float(PL94.sigma_sq("county", "detailed")))
    assert DiscreteGaussian(sigma, sensitivity=math.sqrt(2)).rho == pytest.approx(float(PL94.rho_of("county",
                                                                                                  "detailed")))


def test_noise_variances_subsets_and_errors():
    v = cs.noise_variances("pl94-2020", ["county", "block"], ["total"])
    assert list(v) == [("county", "total"), ("block", "total")]
    with pytest.raises(InputError, match=r"^strategy: unknown strategy 'pl94-2010'"):
        cs.noise_variances("pl94-2010")
    with pytest.raises(InputError, match=r"^levels\[0\]: 'us' is not a level"):
        cs.noise_variances("pl94-2020", ["us"], ["total"])
    with pytest.raises(InputError, match=r"^queries\[1\]: 'hhgq' is not a query"):
        cs.noise_variances("pl94-2020", ["state"], ["total", "hhgq"])
    with pytest.raises(InputError, match=r"^levels:"):
        cs.noise_variances("pl94-2020", "state", ["total"])


# --------------------------------------------------------------------------- the shipped truth
@pytest.fixture(scope="module")
def hawaii():
    return cs.read_truth()


def test_shipped_hawaii_table(hawaii):
    geocodes, counts, attributes = hawaii
    assert geocodes.shape == (14732,) and counts.shape == (14732, 2, 8) and counts.dtype == np.int64
    assert int(counts.sum()) == 1_455_271
    assert int(counts[:, 1].sum()) == 1_155_905  # voting age
    assert (counts >= 0).all()
    assert attributes == cs.ATTRIBUTES
    assert len(np.unique(geocodes)) == 14732
    assert all(len(g) == 15 and g.startswith("15") for g in geocodes)
    assert len({g[:5] for g in geocodes}) == 5 and len({g[:11] for g in geocodes}) == 461
    assert len({g[:12] for g in geocodes}) == 1083


def test_read_truth_from_a_path(tmp_path, hawaii):
    geocodes, counts, _ = hawaii
    cats = cs.ATTRIBUTES["ethrace"]
    head = ",".join(["GEOID20"] + [f"u18_{c}" for c in cats] + [f"vap_{c}" for c in cats])
    lines = [head] + [",".join([g] + [str(v) for v in c.ravel()]) for g, c in zip(geocodes[:3], counts[:3])]
    plain = tmp_path / "t.csv"
    plain.write_text("\n".join(lines) + "\n")
    packed = tmp_path / "t.csv.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    for path in (plain, packed):
        g, c, _ = cs.read_truth(path)
        assert (g == geocodes[:3]).all() and (c == counts[:3]).all()
    bad = tmp_path / "bad.csv"
    bad.write_text("GEOID20,pop\n150010201001000,3\n")
    with pytest.raises(InputError, match=r"^truth: bad.csv: the columns must be"):
        cs.read_truth(bad)


# --------------------------------------------------------------------------- the simulator
@pytest.fixture(scope="module")
def hawaii_release():
    return cs.simulate(seed=20200401)


def test_simulate_manifest_and_shapes(hawaii_release):
    manifest, rows = hawaii_release
    assert manifest["format"] == "dpposterior-release/1" and manifest["family"] == "census"
    assert manifest["attributes"] == cs.ATTRIBUTES and manifest["queries"] == cs.QUERIES
    assert manifest["levels"] == list(cs.LEVELS)
    assert manifest["invariants"] == {"state_total": {"15": 1_455_271}}
    assert manifest["strategy"] == {"name": "pl94-2020", "rho": pytest.approx(2.4913689183459544, rel=1e-15)}
    units = {"state": 1, "county": 5, "tract": 461, "block_group": 1083, "block": 14732}
    n = sum(units.values()) * (1 + 2 + 8 + 16)
    assert set(rows) == {"level", "geocode", "query", "cell", "noisy_value", "variance"}
    assert all(len(col) == n for col in rows.values())
    assert rows["noisy_value"].dtype == np.int64
    st = build_structure(manifest["attributes"], manifest["queries"], manifest["levels"], rows,
                         invariants=manifest["invariants"])
    assert st.M == n and st.B == 14732 and [len(u) for u in st.units] == list(units.values())


def _check_noise(noise, var, where):
    """Mean zero and variance ``var`` within Monte Carlo error (|z| < 5; n >= 400 draws)."""
    noise = np.asarray(noise, float)
    n = noise.size
    assert n >= 400, where
    assert abs(noise.mean()) < 5 * math.sqrt(var / n), where
    # the sum of squares / var is close to chi-square(n): the discrete Gaussian is nearly Gaussian for sigma > 1
    p = stats.chi2.cdf(float(np.sum(noise ** 2)) / var, n)
    assert 1e-6 < p < 1 - 1e-6, (where, p)


def test_simulate_noise_has_the_strategys_mean_and_variance(hawaii, hawaii_release):
    geocodes, counts, _ = hawaii
    manifest, rows = hawaii_release
    st = build_structure(manifest["attributes"], manifest["queries"], manifest["levels"], rows)
    variances = cs.noise_variances("pl94-2020")
    x = counts.reshape(len(geocodes), -1)
    for lv in cs.LEVELS:
        for q in cs.QUERIES:
            r, u, k = st.measured(lv, q)
            assert np.all(st.variance[r] == variances[(lv, q)])
            noise = st.noisy[r] - st.aggregate(x, lv, q)[u, k]
            if noise.size >= 400:  # tract and below; the few state and county cells are pooled over seeds below
                _check_noise(noise, variances[(lv, q)], (lv, q))


def test_simulate_noise_pooled_over_seeds_at_every_level_and_query():
    geocodes, counts = _small_truth()
    variances = cs.noise_variances("pl94-2020")
    manifest, rows = cs.simulate((geocodes, counts), seed=0)
    # every seed gives the rows in the same order, so one structure indexes them all
    st = build_structure(manifest["attributes"], manifest["queries"], manifest["levels"], rows)
    x = counts.reshape(len(geocodes), -1)
    noise = {}
    for seed in range(400):
        rows = cs.simulate((geocodes, counts), seed=seed)[1]
        for lv in cs.LEVELS:
            for q in cs.QUERIES:
                r, u, k = st.measured(lv, q)
                noise.setdefault((lv, q), []).append(rows["noisy_value"][r] - st.aggregate(x, lv, q)[u, k])
    for key, parts in noise.items():
        _check_noise(np.concatenate(parts), variances[key], key)


def test_simulate_is_reproducible_by_seed():
    truth = _small_truth()
    a = cs.simulate(truth, seed=7)[1]
    b = cs.simulate(truth, seed=7)[1]
    c = cs.simulate(truth, seed=8)[1]
    for key in a:
        assert np.array_equal(a[key], b[key])
    assert not np.array_equal(a["noisy_value"], c["noisy_value"])
    assert np.array_equal(a["variance"], c["variance"])


def _small_truth():
    rng = np.random.default_rng(0)
    geocodes = ["150010201001000", "150010201001001", "150010201002000", "150030001001000", "150030001001001"]
    return geocodes, rng.integers(0, 20, size=(5, 2, 8))


def test_simulate_small_truth_levels_and_queries():
    geocodes, counts = _small_truth()
    manifest, rows = cs.simulate((geocodes, counts.reshape(5, 16)), levels=("county", "block"),
                                 queries=["total", "detailed"], seed=1)
    assert manifest["levels"] == ["county", "block"]
    assert manifest["queries"] == {"total": [], "detailed": ["age", "ethrace"]}
    assert manifest["invariants"] == {"state_total": {"15": int(counts.sum())}}
    spent = sum(PL94.rho_of(lv, q) for lv in ("county", "block") for q in ("total", "detailed"))
    assert manifest["strategy"] == {"name": "pl94-2020", "rho": pytest.approx(float(spent), rel=1e-15)}
    assert len(rows["level"]) == (2 + 5) * (1 + 16)
    blocks = rows["level"] == "block"
    totals = blocks & (rows["query"] == "total")
    assert list(rows["geocode"][totals]) == sorted(geocodes)
    detailed = blocks & (rows["query"] == "detailed")
    assert list(rows["cell"][detailed][:2]) == ["under 18|hisp", "under 18|white"]
    assert rows["cell"][detailed][8] == "18+|hisp"


def test_simulate_query_cells_in_query_order():
    geocodes, counts = _small_truth()
    x = counts.reshape(5, 16)
    age = cs._query_answers(x, "age")
    assert (age == counts.sum(axis=2)).all()
    assert (cs._query_answers(x, "ethrace") == counts.sum(axis=1)).all()
    assert (cs._query_answers(x, "total")[:, 0] == counts.sum(axis=(1, 2))).all()
    assert (cs._query_answers(x, "detailed") == x).all()


def test_simulate_errors():
    truth = _small_truth()
    with pytest.raises(InputError, match=r"^strategy: unknown strategy 'dhc-2020'"):
        cs.simulate(truth, strategy="dhc-2020")
    with pytest.raises(InputError, match=r"^truth: counts must have shape"):
        cs.simulate((truth[0], np.ones((5, 3), int)))
    with pytest.raises(InputError, match=r"^levels:"):
        cs.simulate(truth, levels=("state", "county"))
    with pytest.raises(InputError, match=r"^queries\[0\]: 'hhgq'"):
        cs.simulate(truth, queries=["hhgq"])
    with pytest.raises(InputError, match=r"^truth: lists a block twice"):
        cs.simulate(([truth[0][0]] * 5, truth[1]))
