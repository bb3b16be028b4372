"""The census baselines (inference/census_peers.py): GLS against a dense constrained least-squares
reference and by simulation, the naive reading and the flat-prior per-cell posterior by enumeration."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

from dpposterior.errors import InputError, RefusedError
from dpposterior.families.census_table import LEVEL_DIGITS, build_structure
from dpposterior.inference import census_peers as cp

ATTRS = {"age": ["u18", "18+"], "eth": ["h", "w", "b"]}
QUERIES = {"total": [], "age": ["age"], "eth": ["eth"], "detailed": ["age", "eth"]}
LEVELS = ["state", "county", "tract", "block_group", "block"]


def random_blocks(rng, n):
    out = set()
    while len(out) < n:
        county = rng.choice(["001", "003"])
        tract = rng.choice(["000100", "000200"])
        bg = rng.choice(["1", "2"])
        out.add(f"15{county}{tract}{bg}{int(rng.integers(0, 3)):03d}")
    return sorted(out)


def cells_of(query):
    attrs = QUERIES[query]
    return ["|".join(c) for c in itertools.product(*(ATTRS[a] for a in attrs))] if attrs else [""]


def make_rows(rng, blocks, keep, noisy=None, levels=LEVELS):
    """Rows for each (geounit, query cell) kept with probability ``keep`` (``keep`` squared at blocks, so
    that sparse cases leave some block cells unidentified); noisy values uniform, or 0 when ``noisy``."""
    rows = {k: [] for k in ("level", "geocode", "query", "cell", "noisy_value", "variance")}
    for lv in levels:
        for g in sorted({b[:LEVEL_DIGITS[lv]] for b in blocks}):
            for q in QUERIES:
                for c in cells_of(q):
                    if rng.random() >= (keep * keep if lv == "block" else keep):
                        continue
                    rows["level"].append(lv)
                    rows["geocode"].append(g)
                    rows["query"].append(q)
                    rows["cell"].append(c)
                    rows["variance"].append(float(rng.uniform(4.0, 30.0)))
                    rows["noisy_value"].append(int(rng.integers(-3, 25)) if noisy is None else 0)
    return rows


# --------------------------------------------------------------------------- dense reference
def design(s):
    """The measurement matrix over the block histograms x[b, c] flattened (b major)."""
    X = np.zeros((s.M, s.B * s.C))
    for i in range(s.M):
        for b in np.flatnonzero(s.block_unit[s.level[i]] == s.unit[i]):
            X[i, b * s.C + np.flatnonzero(s.query_cell[s.query[i]] == s.cell[i])] = 1.0
    return X


def query_rows(s, li, qi):
    """Rows a[u, k] of the linear functionals "cell k of query qi at geounit u" over x."""
    U, K = len(s.units[li]), int(s.query_sizes[qi])
    A = np.zeros((U, K, s.B * s.C))
    for u in range(U):
        for k in range(K):
            for b in np.flatnonzero(s.block_unit[li] == u):
                A[u, k, b * s.C + np.flatnonzero(s.query_cell[qi] == k)] = 1.0
    return A


def dense_gls(s):
    """Weighted least squares of x subject to the invariants G x = t, by the constraints' null space
    (x = x0 + N phi) and the pseudo-inverse of phi's information; a functional a'x is estimable iff N'a
    lies in that information's range.  Returns est(level, query) -> (mean, sd), NaN where not estimable."""
    n = s.B * s.C
    X = design(s)
    w = 1.0 / s.variance
    y = s.noisy.astype(float)
    G, t = [], []
    for lv, (idx, tot) in s.invariants.items():
        li = s.levels.index(lv)
        for u, tt in zip(idx, tot):
            g = np.zeros(n)
            for b in np.flatnonzero(s.block_unit[li] == u):
                g[b * s.C:(b + 1) * s.C] = 1.0
            G.append(g)
            t.append(float(tt))
    if G:
        G, t = np.array(G), np.array(t)
        x0 = np.linalg.lstsq(G, t, rcond=None)[0]
        _, sv, Vt = np.linalg.svd(G)
        N = Vt[(sv > 1e-10).sum():].T
    else:
        x0, N = np.zeros(n), np.eye(n)
    XN = X @ N
    info = XN.T @ (w[:, None] * XN)
    pinv = np.linalg.pinv(info, rcond=1e-10, hermitian=True)
    phi = pinv @ (XN.T @ (w * (y - X @ x0)))

    def est(level, query):
        li, qi = s.levels.index(level), s.query_names.index(query)
        A = query_rows(s, li, qi)
        mean = np.full(A.shape[:2], np.nan)
        sd = mean.copy()
        for u, k in np.ndindex(*A.shape[:2]):
            na = N.T @ A[u, k]
            if np.linalg.norm(info @ (pinv @ na) - na) > 1e-7 * max(1.0, np.linalg.norm(na)):
                continue
            mean[u, k] = A[u, k] @ x0 + na @ phi
            sd[u, k] = np.sqrt(max(na @ pinv @ na, 0.0))
        return mean, sd

    return est


def true_invariants(s, x, levels):
    out = {}
    for lv in levels:
        tot = s.aggregate(x, lv, "total")[:, 0]
        out[f"{lv}_total"] = {str(g): int(v) for g, v in zip(s.units[s.levels.index(lv)], tot)}
    return out


CASES = [(0, 6, 0.9, ()), (1, 7, 0.6, ()), (2, 6, 0.45, ()), (3, 8, 0.6, ("state",)),
         (4, 7, 0.45, ("state", "county")), (5, 6, 0.35, ("tract",))]
#: several roots (two counties, each with a flat prior) and levels skipped
SHORT = ["county", "tract", "block"]


@pytest.mark.parametrize("seed,n_blocks,keep,inv_levels,levels",
                         [c + (LEVELS,) for c in CASES] + [(6, 7, 0.5, (), SHORT), (7, 7, 0.5, ("county",), SHORT)])
def test_gls_equals_dense_constrained_least_squares(seed, n_blocks, keep, inv_levels, levels):
    rng = np.random.default_rng(seed)
    blocks = random_blocks(rng, n_blocks)
    rows = make_rows(rng, blocks, keep, levels=levels)
    s = build_structure(ATTRS, QUERIES, levels, rows, blocks=blocks)
    invariants = None
    if inv_levels:
        x = rng.integers(0, 6, size=(s.B, s.C))
        invariants = true_invariants(s, x, inv_levels)
        s = build_structure(ATTRS, QUERIES, levels, rows, blocks=blocks, invariants=invariants)
    got = cp.gls(s)
    ref = dense_gls(s)
    for lv in levels:
        for q in QUERIES:
            m1, s1 = got.estimate(lv, q)
            m2, s2 = ref(lv, q)
            assert np.array_equal(np.isnan(m1), np.isnan(m2)), (lv, q)
            assert np.array_equal(np.isnan(s1), np.isnan(m1))
            ok = ~np.isnan(m2)
            np.testing.assert_allclose(m1[ok], m2[ok], rtol=1e-8, atol=1e-8)
            np.testing.assert_allclose(s1[ok], s2[ok], rtol=1e-8, atol=1e-8)
    if inv_levels:
        for lv in inv_levels:
            m, sd = got.estimate(lv, "total")
            idx, tot = s.invariants[lv]
            np.testing.assert_allclose(m[idx, 0], tot, atol=1e-8)
            np.testing.assert_allclose(sd[idx, 0], 0.0, atol=1e-6)


def test_sparse_cases_include_unidentified_cells():
    # the dense comparison above is only telling if some cells are unidentified and some are not
    rng = np.random.default_rng(2)
    blocks = random_blocks(rng, 6)
    s = build_structure(ATTRS, QUERIES, LEVELS, make_rows(rng, blocks, 0.45), blocks=blocks)
    mean, _ = cp.gls(s).estimate("block", "detailed")
    assert np.isnan(mean).any() and not np.isnan(mean).all()


def test_unidentified_split_is_nan_but_its_sum_is_not():
    # blocks measured only in total, the state in detail: the blocks' detailed split is not
    # identified, their totals and the state's detail are
    blocks = ["150010001001000", "150010001001001"]
    rows = {k: [] for k in ("level", "geocode", "query", "cell", "noisy_value", "variance")}

    def add(lv, g, q, c, y):
        for k, v in zip(rows, (lv, g, q, c, y, 9.0)):
            rows[k].append(v)

    for b, y in zip(blocks, (10, 14)):
        add("block", b, "total", "", y)
    for c, y in zip(cells_of("detailed"), (3, 5, 2, 4, 6, 4)):
        add("state", "15", "detailed", c, y)
    s = build_structure(ATTRS, QUERIES, LEVELS, rows, blocks=blocks)
    r = cp.gls(s)
    assert np.isnan(r.estimate("block", "detailed")[0]).all()
    assert np.isfinite(r.estimate("block", "total")[0]).all()
    assert np.isfinite(r.estimate("state", "detailed")[0]).all()
    lo, hi = cp.gls_interval(r, "block", "total", 0.9)
    mean, sd = r.estimate("block", "total")
    np.testing.assert_allclose(hi - lo, 2 * 1.6448536269514722 * sd)


def test_contradicting_invariants_are_refused():
    rng = np.random.default_rng(7)
    blocks = random_blocks(rng, 6)
    rows = make_rows(rng, blocks, 0.8)
    s = build_structure(ATTRS, QUERIES, LEVELS, rows, blocks=blocks)
    counties = {str(g): 10 for g in s.units[1]}
    inv = {"county_total": counties, "state_total": {"15": 10 * len(counties) + 1}}
    s = build_structure(ATTRS, QUERIES, LEVELS, rows, blocks=blocks, invariants=inv)
    with pytest.raises(RefusedError) as err:
        cp.gls(s)
    assert err.value.field == "invariants"


# --------------------------------------------------------------------------- simulation
def discrete_gaussian(rng, sigma, size):
    """Exact draws by enumeration over +-14 sigma (mass beyond below 1e-40)."""
    out = np.empty(size, dtype=np.int64)
    for i, sg in enumerate(sigma):
        k = np.arange(-int(14 * sg) - 1, int(14 * sg) + 2)
        p = np.exp(-k * k / (2 * sg * sg))
        out[i] = rng.choice(k, p=p / p.sum())
    return out


def test_gls_is_unbiased_and_its_sds_are_right_by_simulation():
    rng = np.random.default_rng(11)
    blocks = random_blocks(rng, 12)
    rows = make_rows(rng, blocks, 0.85, noisy=True)
    s0 = build_structure(ATTRS, QUERIES, LEVELS, rows, blocks=blocks)
    x = rng.integers(0, 8, size=(s0.B, s0.C))
    s0 = build_structure(ATTRS, QUERIES, LEVELS, rows, blocks=blocks,
                         invariants=true_invariants(s0, x, ["state"]))
    truth_rows = np.array([s0.aggregate(x, s0.level[i], s0.query[i])[s0.unit[i], s0.cell[i]]
                           for i in range(s0.M)])
    truth = s0.aggregate(x, "tract", "total")[:, 0]
    truth_bg = s0.aggregate(x, "block_group", "age")
    n = 300
    z, z_bg = [], []
    for _ in range(n):
        noise = discrete_gaussian(rng, s0.sigma, s0.M)
        r = cp.gls(dataclasses.replace(s0, noisy=truth_rows + noise))
        m, sd = r.estimate("tract", "total")
        z.append((m[:, 0] - truth) / sd[:, 0])
        m, sd = r.estimate("block_group", "age")
        z_bg.append(((m - truth_bg) / sd).ravel())
    for zs in (np.array(z), np.array(z_bg)):
        assert np.isfinite(zs).all()
        # each column: mean ~ N(0, 1/n), sample sd ~ N(1, 1/(2n)); 4 Monte Carlo standard errors
        assert np.all(np.abs(zs.mean(axis=0)) < 4 / np.sqrt(n))
        assert np.all(np.abs(zs.std(axis=0, ddof=1) - 1) < 4 / np.sqrt(2 * n))


# --------------------------------------------------------------------------- per-cell baselines
def small_structure(values, variances):
    blocks = [f"1500100010010{i:02d}" for i in range(len(values))]
    rows = {"level": ["block"] * len(values), "geocode": blocks, "query": ["total"] * len(values),
            "cell": [""] * len(values), "noisy_value": list(values), "variance": list(variances)}
    return build_structure(ATTRS, QUERIES, LEVELS, rows, blocks=blocks)


def test_naive_clips_at_zero_and_is_nan_where_unmeasured():
    s = small_structure([-5, 3, 40], [4.0, 9.0, 100.0])
    point, lo, hi = cp.naive(s, "block", "total", coverage=0.9)
    z = 1.6448536269514722
    np.testing.assert_allclose(point[:, 0], [0, 3, 40])
    np.testing.assert_allclose(lo[:, 0], [0, 0, 40 - 10 * z])
    np.testing.assert_allclose(hi[:, 0], [0, 3 + 3 * z, 40 + 10 * z])
    assert np.isnan(cp.naive(s, "block", "age")[0]).all()
    assert np.isnan(cp.naive(s, "state", "total")[0]).all()


def brute_force(y, sigma, coverage):
    k = np.arange(0, max(y, 0) + int(40 * sigma) + 1)
    w = np.exp(-(y - k) ** 2 / (2 * sigma ** 2) - (-(y - k) ** 2 / (2 * sigma ** 2)).max())
    cdf = np.cumsum(w) / w.sum()
    q = [(1 - coverage) / 2, 0.5, (1 + coverage) / 2]
    return [k[np.flatnonzero(cdf >= p - 1e-12)[0]] for p in q]


def test_flat_prior_matches_brute_force_enumeration():
    values = [-40, -3, 0, 1, 2, 7, 15, 60, 500, -2]
    variances = [4.0, 2.5, 1.0, 9.0, 30.0, 0.8, 16.0, 400.0, 1000.0, 50.0]
    s = small_structure(values, variances)
    for coverage in (0.9, 0.5):
        med, lo, hi = cp.flat_prior(s, "block", "total", coverage=coverage)
        for i, (y, sg) in enumerate(zip(values, s.sigma)):
            assert [lo[i, 0], med[i, 0], hi[i, 0]] == brute_force(y, sg, coverage), (y, sg)
    assert np.isnan(cp.flat_prior(s, "state", "total")[0]).all()


# --------------------------------------------------------------------------- bad input
def test_bad_input_names_the_field():
    s = small_structure([1, 2], [4.0, 4.0])
    cases = [(lambda: cp.gls("a release"), "structure"),
             (lambda: cp.naive(s, "nation", "total"), "level"),
             (lambda: cp.flat_prior(s, "block", "race"), "query"),
             (lambda: cp.flat_prior(s, "block", "total", coverage=1.5), "coverage"),
             (lambda: cp.naive(s, "block", "total", coverage=True), "coverage"),
             (lambda: cp.gls(s).estimate("block", "race"), "query"),
             (lambda: cp.gls(s).interval("tract", "total", coverage=0), "coverage"),
             (lambda: cp.gls_interval(None, "block", "total"), "result")]
    for call, field in cases:
        with pytest.raises(InputError) as err:
            call()
        assert err.value.field == field
        assert "\n" not in str(err.value)
    huge = small_structure([1, 2], [4.0, 1e16])
    with pytest.raises(InputError) as err:
        cp.flat_prior(huge, "block", "total")
    assert err.value.field == "measurements.variance"
