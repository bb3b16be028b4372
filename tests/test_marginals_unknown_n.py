"""The ``marginals`` family with the total n unknown (a release without ``n``): the prior on n, ``da``'s birth/death
moves on the records against brute-force enumeration over every table of every n, calibration of n by SBC, and
the one-line refusals.

Tolerances come from the Monte Carlo error of the draws (ArviZ's ESS); the seeds are fixed, and the chains are
statistical on any CPU (the compiled kernels are not bit-identical across CPUs).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.special import gammaln

from dpposterior import infer, load_release
from dpposterior.errors import InputError
from dpposterior.families.marginals import observation_model, variable_name


def _release(measurements, domain, n=None):
    out = {"format": "dpposterior-release/1", "family": "marginals", "domain": domain, "measurements": measurements}
    if n is not None:
        out["n"] = n
    return out


def _tables(cells: int, n: int) -> np.ndarray:
    """Every count table of ``cells`` cells summing to n, one per row."""
    return np.array([np.bincount(c, minlength=cells) for c in
                     itertools.combinations_with_replacement(range(cells), n)], dtype=np.int64).reshape(-1, cells)


def _enumerate(release, concentration, n_values):
    """Posterior moments by summing over every full table T of every n in ``n_values``:

        weight(n, T) = P(n) * DM(T | n, alpha) * prod_m eta_m(y_m | t_m(T)),

    DM the hyper-Dirichlet's Dirichlet-multinomial law of the table (multinomial coefficient included: prod over
    the cliques of the ordered-record law, over the separators divided; Dawid & Lauritzen 1993, Sec. 7) and P(n)
    constant over ``n_values`` (the uniform prior, or the flat one truncated where its mass is negligible).
    Returns E and sd of n, E[p_C] of every junction-tree clique and E[n p_C] (the expected counts)."""
    model = observation_model(release, {"concentration": concentration})
    tree = model.latent.state
    attrs = list(tree.attributes)
    shape = tuple(tree.sizes[a] for a in attrs)
    cells = np.array(list(itertools.product(*(range(s) for s in shape))))
    alpha = tree.prior_alpha(concentration)

    def log_dm(counts, alph):  # log law of one ordering of the records (rows: tables)
        return (gammaln(alph.sum()) - gammaln(alph.sum() + counts.sum(axis=1))
                + (gammaln(alph[None] + counts) - gammaln(alph)[None]).sum(axis=1))

    def clique_table(T, clique):  # (rows, cells of clique) from full tables
        idx = np.ravel_multi_index(tuple(cells[:, attrs.index(a)] for a in clique), tree.shape(clique))
        out = np.zeros((len(T), math.prod(tree.shape(clique))))
        for j in range(len(cells)):
            out[:, idx[j]] += T[:, j]
        return out

    logw, ns, post_p = [], [], []
    for n in n_values:
        T = _tables(len(cells), n)
        lw = gammaln(n + 1) - gammaln(T + 1).sum(axis=1)
        tc = [clique_table(T, c) for c in tree.cliques]
        for k, c in enumerate(tree.cliques):
            lw = lw + log_dm(tc[k], alpha[k].ravel())
            if tree.parents[k] >= 0 and tree.separators[k]:
                sep = tree.separators[k]
                lw = lw - log_dm(clique_table(T, sep), tree.marginal_of_table(alpha[k], c, sep).ravel())
        for meas in model.measurements:
            t = clique_table(T, meas.query.clique)
            lw = lw + meas.mechanism.logpdf(np.asarray(meas.values, float).ravel()[None], t).sum(axis=1)
        logw.append(lw)
        ns.append(np.full(len(T), n))
        post_p.append([(alpha[k].ravel()[None] + tc[k]) / (concentration + n) for k in range(len(tree.cliques))])
    logw = np.concatenate(logw)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    n_all = np.concatenate(ns).astype(float)
    mean_n = float(w @ n_all)
    sd_n = float(np.sqrt(w @ (n_all - mean_n) ** 2))
    e_p, e_count = [], []
    for k, c in enumerate(tree.cliques):
        p = np.concatenate([pp[k] for pp in post_p])
        e_p.append((w @ p).reshape(tree.shape(c)))
        e_count.append((w @ (p * n_all[:, None])).reshape(tree.shape(c)))
    return tree, mean_n, sd_n, e_p, e_count


def _ess(x):
    import arviz as az

    return max(float(az.ess(np.asarray(x, float))), 1.0)


def _mean_z(draws, want):
    """(mean - want) / its Monte Carlo sd, per cell (sd / sqrt(ESS))."""
    flat = np.asarray(draws, float).reshape(draws.shape[0], draws.shape[1], -1)
    want = np.asarray(want, float).ravel()
    return np.array([(flat[:, :, i].mean() - want[i]) / (flat[:, :, i].std() / math.sqrt(_ess(flat[:, :, i])))
                     for i in range(flat.shape[2])])


def _sd_z(draws, want):
    """(sd - want) / its Monte Carlo sd: the delta method on the mean of (x - mean)^2, whose own ESS counts."""
    x = np.asarray(draws, float)
    sq = (x - x.mean()) ** 2
    se_var = sq.std() / math.sqrt(_ess(sq))
    sd = math.sqrt(sq.mean())
    return (sd - want) / (se_var / (2.0 * sd))


# Two binary attributes.  ONE_CLIQUE: the (a, b) table through the discrete Gaussian (sigma 2: its sum has sd 4)
# and the a margin through the discrete Laplace (epsilon 1, b = 2: its sum has sd about 4); the noisy sums are 22
# and 21, so the posterior of n (sd about 3) reaches the prior's upper end 25 -- the bound shapes it.
ONE_CLIQUE = [{"clique": ["a", "b"], "value": [[7, 4], [6, 5]], "mechanism": "discrete-gaussian", "sigma": 2.0},
              {"clique": ["a"], "value": [12, 9], "mechanism": "discrete-laplace", "epsilon": 1.0}]
# Two one-way margins: the model is a forest of two cliques (a), (b), so a birth draws each from its own root.
FOREST = [{"clique": ["a"], "value": [9, 5], "mechanism": "discrete-gaussian", "sigma": 1.5},
          {"clique": ["b"], "value": [4, 11], "mechanism": "discrete-laplace", "epsilon": 1.0}]
# a - b - c: the cliques (a, b) and (b, c) share the separator b, so a birth draws c given b.
CHAIN = [{"clique": ["a", "b"], "value": [[3, 1], [2, 3]], "mechanism": "discrete-gaussian", "sigma": 1.0},
         {"clique": ["b", "c"], "value": [[2, 2], [1, 3]], "mechanism": "discrete-laplace", "epsilon": 2.0}]
BINARY2 = {"a": 2, "b": 2}


@pytest.mark.parametrize("case", ["one-clique-uniform", "forest-flat", "chain-uniform"])
def test_da_with_n_unknown_matches_enumeration_over_every_table_of_every_n(case):
    """E[n], sd(n), every clique cell's E[p] and the expected counts E[n p] of ``da`` (with its birth/death moves)
    within 5 Monte Carlo sds (ESS-based) of the enumeration.

    The check of the acceptance ratio: with the uniform prior's ratio P(n+1)/P(n) dropped (births past 25 accepted)
    the one-clique case's sd(n) comes out 2.57 against 2.39 (8.6 Monte Carlo sds) and E[n] 20.41 against 20.25
    (5.6), so this test fails (tried).  Measured at seed 21: E[n] 20.247 +- 0.026 against 20.253, sd(n) 2.411
    against 2.390 (z 1.1); the largest |z| over the three cases is 3.1 (the forest's E[n]; 2.2, -1.3, -1.2 at
    other seeds with 4x the draws)."""
    conc = 2.0
    if case == "one-clique-uniform":
        release, prior, n_values = _release(ONE_CLIQUE, BINARY2), {"n_range": [1, 25]}, range(1, 26)
    elif case == "forest-flat":  # flat on n >= 1: enumerated to 45, 10 posterior sds above the noisy sums
        release, prior, n_values = _release(FOREST, BINARY2), {}, range(1, 46)
    else:
        release, prior, n_values = _release(CHAIN, {"a": 2, "b": 2, "c": 2}), {"n_range": [1, 12]}, range(1, 13)
    release = load_release(release)
    tree, mean_n, sd_n, e_p, e_count = _enumerate(release, conc, n_values)
    post = infer(release, method="da", prior={"concentration": conc, **prior}, draws=2500, warmup=200, chains=4,
                 seed=21)
    n = post.posterior["n"]
    assert np.asarray(n).dtype.kind == "i"
    z = {"E[n]": _mean_z(n, mean_n)[0], "sd(n)": _sd_z(n, sd_n)}
    for k, c in enumerate(tree.cliques):
        z[f"E[p[{c}]]"] = np.abs(_mean_z(post.posterior[variable_name(c)], e_p[k])).max()
        z[f"E[n p[{c}]]"] = np.abs(_mean_z(post.marginal(list(c), counts=True).values, e_count[k])).max()
    assert max(abs(v) for v in z.values()) < 5, (z, mean_n, float(np.mean(n)), sd_n, float(np.std(n)))


def test_records_array_grows_and_counts_follow_each_draws_n():
    """One birth/death move per sweep starts the records' array with 2 spare rows, so it must grow as n wanders:
    the kept clique counts still sum to each draw's n, and counts=True scales each draw by its own n."""
    release = _release(ONE_CLIQUE, BINARY2)
    post = infer(release, method="da", prior={"n_range": [1, 60]}, draws=300, warmup=0, chains=2, seed=4, n_moves=1)
    n = np.asarray(post.posterior["n"])
    assert n.max() > 22 + 2  # beyond the first capacity (start 22, median of the sums 22 and 21, + 2 rows)
    counts = post.extras["clique_counts"]["p[a,b]"]
    np.testing.assert_array_equal(counts.sum(axis=(2, 3)), n)
    p = post.marginal(["a", "b"]).values
    np.testing.assert_allclose(post.marginal(["a", "b"], counts=True).values, p * n[:, :, None, None])
    assert post.attrs["n_prior"] == "uniform on 1..60"


def test_same_seed_same_draws_serial_and_parallel(monkeypatch):
    from dpposterior.inference import mcmc_common

    release = _release(CHAIN, {"a": 2, "b": 2, "c": 2})
    one = infer(release, method="da", draws=60, warmup=10, chains=2, seed=3)
    monkeypatch.setattr(mcmc_common, "chain_workers", lambda chains, iterations: 2)
    two = infer(release, method="da", draws=60, warmup=10, chains=2, seed=3)
    for name in ("n", "p[a,b]", "p[b,c]"):
        np.testing.assert_array_equal(one.posterior[name], two.posterior[name])
    assert one.attrs["options_n_moves"] >= 20


def test_default_moves_sized_from_the_noise():
    """4 x the smallest measurement's total-noise variance: the (a) margin's discrete Laplace at epsilon 1 (b = 2,
    variance 2 e^{-1/2} / (1 - e^{-1/2})^2 = 7.83 per cell, 2 cells) against the (a, b) table's 4 x 4: 4 x 15.7."""
    from dpposterior.inference.marginals_da import N_UNBOUNDED, Problem

    model = observation_model(load_release(_release(ONE_CLIQUE, BINARY2)), {})
    prob = Problem(model)
    q = math.exp(-0.5)
    assert prob.default_moves() == math.ceil(4 * 2 * 2 * q / (1 - q) ** 2)
    assert prob.n is None and prob.n_start == 22 and (prob.n_lo, prob.n_hi) == (1, N_UNBOUNDED)


@pytest.mark.parametrize("prior, message", [
    ({"n_range": [5, 2]}, r"^prior\.n_range: must have 1 <= lo <= hi"),
    ({"n_range": [0, 10]}, r"^prior\.n_range: must have 1 <= lo <= hi"),
    ({"n_range": [1.5, 10]}, r"^prior\.n_range: must be two integers"),
    ({"n_range": [3]}, r"^prior\.n_range: must be two integers"),
    ({"n_range": "1-10"}, r"^prior\.n_range: must be two integers"),
])
def test_bad_n_range_is_refused_in_one_line(prior, message):
    with pytest.raises(InputError, match=message) as err:
        infer(_release(FOREST, BINARY2), method="da", prior=prior, draws=10, warmup=0, chains=1, seed=0)
    assert "\n" not in str(err.value)


def test_n_range_and_n_moves_refused_where_the_release_states_n():
    stated = _release(FOREST, BINARY2, n=14)
    with pytest.raises(InputError, match=r"^prior\.n_range: the release states n = 14") as err:
        infer(stated, method="da", prior={"n_range": [1, 30]}, draws=10, warmup=0, chains=1, seed=0)
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match=r"^n_moves: birth/death moves apply only to a release without n") as err:
        infer(stated, method="da", n_moves=50, draws=10, warmup=0, chains=1, seed=0)
    assert "\n" not in str(err.value)
    with pytest.raises(InputError, match=r"^n_moves: must be an integer >= 1"):
        infer(_release(FOREST, BINARY2), method="da", n_moves=0, draws=10, warmup=0, chains=1, seed=0)


def test_naive_takes_the_noisy_total_as_n():
    post = infer(_release(ONE_CLIQUE, BINARY2), method="naive", draws=20, chains=1, seed=0)
    assert set(np.unique(post.posterior["n"]).tolist()) == {22}


# --------------------------------------------------------------------------- simulation-based calibration
def _sbc(trials, seed):
    from dpposterior.diagnostics.calibration import calibrate

    return calibrate("marginals", 20, None, trials, ["da"], seed=seed, draws=100,
                     prior={"n_range": [5, 40], "domain": {"a": 2, "b": 2}, "measure": [["a", "b"], ["a"]]},
                     mechanism="discrete-gaussian", rho=0.3, return_ranks=True)


def _n_rank_pvalue(res):
    coords = res["methods"]["da"]["by_coordinate"]
    return coords["n"]["ks_pvalue"], min(c["ks_pvalue"] for c in coords.values())


def test_sbc_ranks_of_n_are_uniform():
    """Reduced SBC: n uniform on 5..40 and released without n, two discrete-Gaussian tables at rho = 0.3 in all
    (sigma 2.6 per cell): the rank KS p-value of n above 1e-3, and every coordinate's (n and the four cells of
    p[a,b]) above 1e-3 / 5 (Bonferroni)."""
    p_n, p_min = _n_rank_pvalue(_sbc(60, seed=3))
    assert p_n > 1e-3 and p_min > 1e-3 / 5, (p_n, p_min)


@pytest.mark.slow
def test_sbc_ranks_of_n_are_uniform_full():
    p_n, p_min = _n_rank_pvalue(_sbc(500, seed=4))
    assert p_n > 1e-3 and p_min > 1e-3 / 5, (p_n, p_min)


def test_file_round_trip_and_synthetic_sets_keep_each_draws_n(tmp_path):
    from dpposterior.posterior import Posterior
    from dpposterior.synthetic import synthesize

    post = infer(_release(FOREST, BINARY2), method="da", draws=40, warmup=20, chains=2, seed=5)
    post.to_netcdf(tmp_path / "p.nc")
    back = Posterior.read(tmp_path / "p.nc")
    np.testing.assert_array_equal(np.asarray(back.posterior["n"]), np.asarray(post.posterior["n"]))
    np.testing.assert_allclose(back.marginal(["a"], counts=True).values, post.marginal(["a"], counts=True).values,
                               rtol=1e-6)
    n = np.asarray(post.posterior["n"]).ravel()
    sets = synthesize(back, m=3, seed=1)
    assert [len(s) for s in sets] == [int(n[s.attrs["posterior_draw"]]) for s in sets]
