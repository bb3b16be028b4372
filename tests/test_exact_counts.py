"""Engine ``exact``: count releases under integer (and continuous) noise, by enumeration.

Each case is checked against a brute-force reference written independently of the engine:
* binomial / multinomial: enumerate every confidential statistic s (every table of n records), weight it by
  its prior predictive mass (scipy.stats.betabinom / Dirichlet-multinomial by itertools) times the noise
  mass computed from the definition (exp(-k^2 / 2 sigma^2) / sum, or q^|k| (1-q)/(1+q)), and mix the
  conjugate posteriors: exact posterior CDFs and moments;
* poisson: a fine grid over lambda times sum_s p(s | lambda) eta(y - s), with p(s | lambda) the n-fold
  convolution computed by repeated np.convolve (not the engine's FFT).
Draws are iid, so a KS test against the reference CDF and moment checks within 4.5 Monte Carlo standard
errors are the tolerances.  Then simulation-based calibration (Talts et al. 2018) of the engine through the public
``calibrate`` study, which the naive (noise-ignoring) method fails.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

import dpposterior as dp
from dpposterior.diagnostics.calibration import calibrate
from dpposterior.errors import InputError, RefusedError

FORMAT = "dpposterior-release/1"
BINOMIAL_DG = {"format": FORMAT, "family": "binomial", "n": 30,
               "statistics": {"successes": {"value": 11, "mechanism": "discrete-gaussian", "sigma": 0.7,
                                            "sensitivity": 1}}}
MULTINOMIAL_DL = {"format": FORMAT, "family": "multinomial", "n": 40,
                  "statistics": {"counts": {"value": [9, 21, 11], "mechanism": "discrete-laplace", "epsilon": 1.0,
                                            "sensitivity": 2}}}
DRAWS, CHAINS = 5000, 4
Z_TOL = 4.5  # standard errors; KS p-value floor below
KS_FLOOR = 1e-3


# --------------------------------------------------------------------------- independent noise masses
def noise_logmass(record: dict, k: np.ndarray) -> np.ndarray:
    """log P(noise = k) from the definition, normalised by brute summation over |k| <= 2000."""
    grid = np.arange(-2000, 2001, dtype=float)
    if record["mechanism"] == "discrete-gaussian":
        def kern(x):
            return -x * x / (2.0 * record["sigma"] ** 2)
    elif record["mechanism"] == "discrete-laplace":
        t = record["sensitivity"] / record["epsilon"]

        def kern(x):
            return -np.abs(x) / t
    else:  # continuous laplace density
        b = record["sensitivity"] / record["epsilon"]
        return -np.abs(k) / b - math.log(2 * b)
    return kern(np.asarray(k, float)) - np.log(np.exp(kern(grid)).sum())


def _release(base, **rec):
    out = {**base, "statistics": {k: {**v, **rec} for k, v in base["statistics"].items()}}
    return out


def _check_draws(x, cdf, mean, sd):
    x = np.asarray(x).ravel()
    # the reference CDF on a fine grid, interpolated (it is smooth; mixtures of betas are slow to evaluate)
    grid = np.linspace(x.min() - 1e-9, x.max() + 1e-9, 1501)
    ref = cdf(grid)
    assert stats.kstest(x, lambda v: np.interp(v, grid, ref)).pvalue > KS_FLOOR
    se = sd / math.sqrt(x.size)
    assert abs(x.mean() - mean) < Z_TOL * se
    assert abs(x.std() - sd) < Z_TOL * sd / math.sqrt(2 * x.size) * 1.5  # kurtosis allowance


# --------------------------------------------------------------------------- binomial
def binomial_reference(release: dict, a: float, b: float):
    n = release["n"]
    rec = release["statistics"]["successes"]
    s = np.arange(n + 1)
    logw = stats.betabinom.logpmf(s, n, a, b) + noise_logmass(rec, rec["value"] - s)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    A, B = a + s, b + n - s
    mean = float((w * A / (A + B)).sum())
    second = float((w * A * (A + 1) / ((A + B) * (A + B + 1))).sum())
    return (lambda x: (w[None, :] * stats.beta.cdf(np.asarray(x)[:, None], A, B)).sum(1)), mean, math.sqrt(second - mean ** 2)


@pytest.mark.parametrize("record", [
    {"value": 11, "mechanism": "discrete-gaussian", "sigma": 0.7, "sensitivity": 1},
    {"value": 11, "mechanism": "discrete-gaussian", "sigma": 4.0, "sensitivity": 1},
    {"value": -2, "mechanism": "discrete-laplace", "epsilon": 0.5, "sensitivity": 1},
    {"value": 11.6, "mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1},
])
def test_binomial_matches_enumeration(record):
    release = {**BINOMIAL_DG, "statistics": {"successes": record}}
    post = dp.infer(release, prior={"kind": "beta", "alpha": 2, "beta": 3}, method="exact", seed=1)
    assert post.method == "exact" and post.iid
    assert post.attrs["omitted_mass_bound"] <= 1e-12
    cdf, mean, sd = binomial_reference(release, 2.0, 3.0)
    _check_draws(post.draws("p"), cdf, mean, sd)


def test_contract_binomial_auto_is_exact_for_integer_noise_and_gibbs_ss_for_laplace():
    post = dp.infer(BINOMIAL_DG, prior={"kind": "beta", "alpha": 2, "beta": 3}, seed=1)
    assert post.method == "exact"
    lap = _release(BINOMIAL_DG, mechanism="laplace", epsilon=1.0, sigma=None)
    lap["statistics"]["successes"].pop("sigma")
    assert dp.infer(lap, seed=1, draws=200, warmup=100).method == "gibbs-ss"


def test_competence_is_judged_on_the_observation_model():
    """``exact`` declares its competence for the release's observation model: competent where the latent statistic
    can be enumerated and the measurement's noise is additive and symmetric, not competent for the same release's
    model with enumeration taken from its latent statistic."""
    import dataclasses

    from dpposterior.inference.exact_counts import competence
    from dpposterior.observation import MOMENTS, SIMULATE

    model = dp.load_release(BINOMIAL_DG).observation_model(None)
    assert competence(model).ok
    without = dataclasses.replace(model, latent=dataclasses.replace(model.latent,
                                                                    capabilities=frozenset({MOMENTS, SIMULATE})))
    verdict = competence(without)
    assert not verdict.ok and verdict.reason.startswith("cannot enumerate")


# --------------------------------------------------------------------------- multinomial
def multinomial_reference(release: dict, alpha: np.ndarray):
    n = release["n"]
    rec = release["statistics"]["counts"]
    y = np.asarray(rec["value"], float)
    K = len(y)
    tables = np.array([c + (n - sum(c),) for c in itertools.product(range(n + 1), repeat=K - 1) if sum(c) <= n])
    A = alpha.sum()
    log_dm = (math.lgamma(n + 1) + math.lgamma(A) - math.lgamma(n + A)
              + (np.vectorize(math.lgamma)(tables + alpha) - np.vectorize(math.lgamma)(tables + 1.0)
                 - np.vectorize(math.lgamma)(alpha)).sum(1))
    logw = log_dm + noise_logmass(rec, y[None, :] - tables).sum(1)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    conc = alpha + tables
    mean = (w[:, None] * conc / (A + n)).sum(0)
    second = (w[:, None] * conc * (conc + 1) / ((A + n) * (A + n + 1))).sum(0)
    sd = np.sqrt(second - mean ** 2)

    def cdf_of(j):
        return lambda x: (w[None, :] * stats.beta.cdf(np.asarray(x)[:, None], conc[:, j], A + n - conc[:, j])).sum(1)
    return cdf_of, mean, sd


@pytest.mark.parametrize("record", [
    {"value": [9, 21, 11], "mechanism": "discrete-laplace", "epsilon": 1.0, "sensitivity": 2},
    {"value": [9, 21, 11], "mechanism": "discrete-gaussian", "sigma": 3.0},
    {"value": [9.4, 20.2, 11.9], "mechanism": "laplace", "epsilon": 0.8, "sensitivity": 2},
])
def test_multinomial_matches_enumeration(record):
    release = {**MULTINOMIAL_DL, "statistics": {"counts": record}}
    post = dp.infer(release, prior={"kind": "dirichlet", "alpha": [1.0, 2.0, 1.5]}, method="exact", seed=2)
    draws = post.draws("p")
    cdf_of, mean, sd = multinomial_reference(release, np.array([1.0, 2.0, 1.5]))
    for j in range(3):
        _check_draws(draws[:, j], cdf_of(j), mean[j], sd[j])


def test_contract_multinomial_auto_is_exact():
    post = dp.infer(MULTINOMIAL_DL, prior={"kind": "dirichlet", "alpha": 1}, seed=1)
    assert post.method == "exact" and post.draws("p").shape == (DRAWS * CHAINS, 3)
    rel = dp.load_release(MULTINOMIAL_DL)
    assert rel.statistics.counts.sensitivity == 2
    # discrete Gaussian counts: the replace-one L2 sensitivity sqrt(2) is derived
    dg = {**MULTINOMIAL_DL, "statistics": {"counts": {"value": [9, 21, 11], "mechanism": "discrete-gaussian",
                                                      "sigma": 2.0}}}
    assert dp.load_release(dg).statistics.counts.sensitivity == pytest.approx(math.sqrt(2))


# --------------------------------------------------------------------------- poisson (truncated sum)
def poisson_reference(release: dict, shape: float, rate: float):
    n, (lo, hi) = release["n"], release["bounds"]
    rec = release["statistics"]["truncated_sum"]
    lo, hi = int(math.ceil(lo)), int(math.floor(hi))
    lam = np.linspace(1e-3, 25.0, 6000)
    post = np.empty_like(lam)
    for i, l in enumerate(lam):
        one = np.zeros(hi + 1)
        x = np.arange(max(lo, 1), hi + 1)
        one[x] = stats.poisson.pmf(x, l)
        one[0] = 1.0 - one.sum()
        dist = np.array([1.0])
        for _ in range(n):
            dist = np.convolve(dist, one)
        s = np.arange(dist.size)
        post[i] = (dist * np.exp(noise_logmass(rec, rec["value"] - s))).sum() * stats.gamma.pdf(l, shape, scale=1 / rate)
    w = post / np.trapezoid(post, lam)
    cdf_grid = np.concatenate([[0.0], np.cumsum(0.5 * (w[1:] + w[:-1]) * np.diff(lam))])
    mean = np.trapezoid(w * lam, lam)
    sd = math.sqrt(np.trapezoid(w * (lam - mean) ** 2, lam))
    return (lambda v: np.interp(v, lam, cdf_grid)), mean, sd


@pytest.mark.parametrize("record", [
    {"value": 61, "mechanism": "discrete-gaussian", "sigma": 4.0},
    {"value": 61, "mechanism": "discrete-laplace", "epsilon": 1.0, "sensitivity": 8},
    {"value": 60.3, "mechanism": "laplace", "epsilon": 1.0, "sensitivity": 8},
])
def test_poisson_matches_grid_reference(record):
    release = {"format": FORMAT, "family": "poisson", "n": 20, "bounds": [0, 8], "statistics": {"truncated_sum": record}}
    post = dp.infer(release, prior={"kind": "gamma", "shape": 2, "rate": 0.5}, method="exact", seed=3)
    cdf, mean, sd = poisson_reference(release, 2.0, 0.5)
    _check_draws(post.draws("rate"), cdf, mean, sd)


def test_poisson_two_modes_are_both_found():
    # s = 20 of n = 10 records inside [0, 3]: low rates (~2) or rates so high that most records exceed 3
    release = {"format": FORMAT, "family": "poisson", "n": 10, "bounds": [0, 3],
               "statistics": {"truncated_sum": {"value": 6, "mechanism": "discrete-gaussian", "sigma": 1.0}}}
    post = dp.infer(release, prior={"kind": "gamma", "shape": 1, "rate": 0.1}, method="exact", seed=4)
    cdf, mean, sd = poisson_reference(release, 1.0, 0.1)
    _check_draws(post.draws("rate"), cdf, mean, sd)


# --------------------------------------------------------------------------- refusals
def test_exact_refuses_options_it_does_not_take():
    with pytest.raises(InputError, match="grid_size"):
        dp.infer(BINOMIAL_DG, method="exact", grid_size=7)
    with pytest.raises(InputError, match="constrained"):
        dp.infer(BINOMIAL_DG, method="exact", constrained=True)
    with pytest.raises(InputError, match="tail_mass"):
        dp.infer(BINOMIAL_DG, method="exact", tail_mass=0.5)


def test_gibbs_ss_refuses_integer_noise():
    with pytest.raises(RefusedError, match="continuous Laplace"):
        dp.infer(BINOMIAL_DG, method="gibbs-ss", draws=100, warmup=10)


@pytest.mark.parametrize("record,reason", [
    ({"value": 11.5, "mechanism": "discrete-gaussian", "sigma": 1.0}, "integers"),
    ({"value": 11, "mechanism": "discrete-gaussian", "sigma": 1.0, "rho": 0.3}, "rho"),
    ({"value": 11, "mechanism": "discrete-gaussian", "sigma": 1.0, "epsilon": 1.0}, "epsilon"),
    ({"value": 11, "mechanism": "discrete-gaussian"}, "sigma"),
    ({"value": 11, "mechanism": "discrete-laplace", "sigma": 1.0, "epsilon": 1.0}, "sigma"),
    ({"value": 11, "mechanism": "discrete-laplace"}, "epsilon"),
    ({"value": 11, "mechanism": "laplace", "epsilon": 1.0, "rho": 0.5}, "rho"),
])
def test_discrete_records_are_checked_in_one_line(record, reason):
    with pytest.raises(InputError, match=reason) as err:
        dp.load_release({**BINOMIAL_DG, "statistics": {"successes": record}})
    assert "\n" not in str(err.value)


def test_rho_that_agrees_is_accepted():
    rel = dp.load_release({**BINOMIAL_DG, "statistics": {"successes": {
        "value": 11, "mechanism": "discrete-gaussian", "sigma": 2.0, "rho": 0.125}}})
    cost = rel.privacy()
    assert cost.rho == pytest.approx(0.125) and cost.accounting == "zcdp"


# --------------------------------------------------------------------------- simulation-based calibration
# Through the public study, ``dpposterior calibrate --mechanism`` (diagnostics.calibration.calibrate): theta ~ prior,
# counts ~ model, integer noise from the mechanism's own sampler, ``exact`` and ``naive`` on every release, the
# randomised rank of the true theta among 99 draws.  Under calibration the ranks are exactly Uniform(0, 1), so the
# KS p-value is uniform (1e-3 fails a correct engine once in a thousand seeds) and the 90% interval's coverage is
# Binomial(T, 0.9) / T (4 standard errors allowed).  Naive must fail the same check at the same settings.
# tests/test_calibrate_mechanisms.py runs the command itself (the CLI, rho = 0.02) for binomial, multinomial and
# poisson.
def _sbc_failures(entry, trials) -> list[str]:
    """Where a method's result fails the check: a KS p-value below 1e-3 or a 90% coverage more than 4 standard
    errors from 0.9, in any coordinate."""
    out = []
    for coordinate, stats in entry["by_coordinate"].items():
        if not stats["ks_pvalue"] > 1e-3:
            out.append(f"{coordinate}: KS {stats['ks']:.3f}, p-value {stats['ks_pvalue']:.2g}")
        if not abs(stats["coverage"]["0.9"] - 0.9) < 4 * math.sqrt(0.09 / trials):
            out.append(f"{coordinate}: 90% coverage {stats['coverage']['0.9']:.3f}")
    return out


def _exact_passes_naive_fails(result, trials):
    exact = result["methods"]["exact"]
    assert exact["failed_trials"] == 0 and exact["trials_used"] == trials
    assert _sbc_failures(exact, trials) == []
    naive = _sbc_failures(result["methods"]["naive"], trials)
    assert naive and naive[0].startswith(result["coordinates"][0] + ":"), naive  # fails in the first coordinate


@pytest.mark.parametrize("mechanism,budget", [
    ("discrete-gaussian", {"rho": 1.0 / 32.0}),  # sigma = 1 / sqrt(2 rho) = 4
    ("discrete-laplace", {"epsilon": 0.25}),  # scale 1 / epsilon = 4
], ids=["dgauss", "dlaplace"])
def test_sbc_binomial_exact_passes_and_naive_fails(mechanism, budget):
    trials = 400
    result = calibrate("binomial", 30, budget.get("epsilon"), trials, ["exact", "naive"],
                       {"kind": "beta", "alpha": 2, "beta": 3}, seed=11, draws=99, mechanism=mechanism,
                       rho=budget.get("rho"))
    assert result["mechanism"] == {"name": mechanism, **budget}
    _exact_passes_naive_fails(result, trials)


@pytest.mark.slow
def test_sbc_multinomial_exact_passes_and_naive_fails():
    """Three categories, discrete Gaussian sigma = Delta_2 / sqrt(2 rho) = sqrt(2) / sqrt(2 / 9) = 3 per count
    (the reduced multinomial study, in the default run, is tests/test_calibrate_mechanisms.py's)."""
    trials = 400
    result = calibrate("multinomial", 30, None, trials, ["exact", "naive"], {"kind": "dirichlet", "alpha": [1, 1, 1]},
                       seed=12, draws=99, mechanism="discrete-gaussian", rho=1.0 / 9.0)
    assert result["coordinates"] == ["p[0]", "p[1]", "p[2]"]
    _exact_passes_naive_fails(result, trials)


# --------------------------------------------------------------------------- naive-bayes tables
def naive_bayes_reference(release: dict, alpha_c=(1.0, 1.0), alpha_f=1.0):
    """I = K = J = 2: every class split n1 and every table row split x, brute force (independent code)."""
    n = release["n"]
    rec = release["statistics"]["tables"]
    m = np.asarray(rec["value"], float)  # (K, 2, 2)
    K = m.shape[0]
    lg = np.vectorize(math.lgamma)

    def log_dm2(x, tot, a0, a1):
        return (lg(tot + 1.0) + lg(a0 + a1) - lg(tot + a0 + a1) + lg(x + a0) - lg(x + 1.0) - lg(a0)
                + lg(tot - x + a1) - lg(tot - x + 1.0) - lg(a1))

    log_w = np.empty(n + 1)
    feat_mean = np.zeros((n + 1, K, 2))
    for n1 in range(n + 1):
        tot = (n1, n - n1)
        lw = float(log_dm2(np.array(n1, float), n, *alpha_c))
        for k in range(K):
            for i in range(2):
                x = np.arange(tot[i] + 1, dtype=float)
                lt = (log_dm2(x, tot[i], alpha_f, alpha_f) + noise_logmass(rec, m[k, i, 0] - x)
                      + noise_logmass(rec, m[k, i, 1] - (tot[i] - x)))
                z = np.logaddexp.reduce(lt)
                lw += z
                feat_mean[n1, k, i] = (np.exp(lt - z) * (alpha_f + x) / (2 * alpha_f + tot[i])).sum()
        log_w[n1] = lw
    w = np.exp(log_w - log_w.max())
    w /= w.sum()
    n1 = np.arange(n + 1)
    class_mean = (w * (alpha_c[0] + n1) / (sum(alpha_c) + n)).sum()
    return class_mean, (w[:, None, None] * feat_mean).sum(0)


@pytest.mark.parametrize("record", [
    {"mechanism": "discrete-gaussian", "sigma": 3.0},
    {"mechanism": "discrete-laplace", "epsilon": 0.5, "sensitivity": 2},
])
def test_naive_bayes_matches_enumeration(record):
    m = [[[30, 12], [8, 50]], [[25, 17], [33, 25]]]
    release = {"format": FORMAT, "family": "naive-bayes", "n": 100, "classes": 2, "levels": [2, 2],
               "statistics": {"tables": {"value": m, "scale": "counts", **record}}}
    post = dp.infer(release, seed=5)
    assert post.method == "exact"
    class_mean, feat_mean = naive_bayes_reference(release)
    cp = post.draws("class_prob")[:, 0]
    assert abs(cp.mean() - class_mean) < Z_TOL * cp.std() / math.sqrt(cp.size)
    fp = post.draws("feature_prob")[:, :, :, 0]  # (draws, K, I)
    se = fp.std(0) / math.sqrt(fp.shape[0])
    assert np.all(np.abs(fp.mean(0) - feat_mean) < Z_TOL * se)


def test_naive_bayes_exact_agrees_with_the_laplace_enumeration_engine_and_vb_refuses_integer_noise():
    m = [[[30.4, 12.2], [8.9, 50.1]], [[25.3, 17.0], [33.2, 25.6]]]
    release = {"format": FORMAT, "family": "naive-bayes", "n": 100, "classes": 2, "levels": [2, 2],
               "statistics": {"tables": {"value": m, "scale": "counts", "mechanism": "laplace", "epsilon": 1.0}}}
    post = dp.infer(release, method="exact", seed=6)
    ref = dp.infer(release, method="exact-enumeration", seed=6, draws=10)
    cp = post.draws("class_prob")[:, 0]
    assert abs(cp.mean() - ref.extras["class_mean"][0]) < Z_TOL * cp.std() / math.sqrt(cp.size)
    dg = {**release, "statistics": {"tables": {"value": [[[30, 12], [8, 50]], [[25, 17], [33, 25]]],
                                               "scale": "counts", "mechanism": "discrete-gaussian", "sigma": 2.0}}}
    with pytest.raises(RefusedError, match="Laplace"):
        dp.infer(dg, method="vb")
    with pytest.raises(InputError, match="counts"):
        dp.load_release({**dg, "statistics": {"tables": {**dg["statistics"]["tables"], "scale": "proportions"}}})
