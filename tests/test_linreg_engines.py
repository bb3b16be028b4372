"""Engines of the linear-regression family against closed forms, by calibration, and under constraints.

Tolerances: a posterior mean estimated from MCMC draws has Monte Carlo sd ~ sd / sqrt(ESS)
(ESS from ArviZ); we accept |mean - reference| < 4.5 sd/sqrt(ESS) (+ a 2% of sd allowance for
the residual release noise, sigma ~ 0.01 against z-likelihood sd ~ 4 here, and for quadrature), and a posterior sd within
4.5/sqrt(2 ESS) relative error (the sd of a sample sd is about sd/sqrt(2 ESS) for near-Gaussian
marginals).  4.5 sigma keeps the false-alarm rate below 1e-5 per comparison.
"""

from __future__ import annotations

import math

import arviz as az
import numpy as np
import pytest
from scipy import stats

from dpposterior.families import linear_regression as lr
from dpposterior.inference import infer
from dpposterior.inference.linreg_bs import feasible_theta, feasible_w
from dpposterior.inference.linreg_common import nearest_psd
from dpposterior.inference.linreg_fixeds import run_fixeds
from dpposterior.inference.linreg_naive import naive_inputs
from dpposterior.inference.linreg_normalx import run_normalx, run_normalx_intercept, start_ab, start_s
from dpposterior.release import load_release

Z = 4.5


def _problem(seed=0, n=1000, J=2, sigma_y=0.2, split="xtx,xty", epsilon=1e6, intercept=False):
    rng = np.random.default_rng(seed)
    X = rng.normal(1.0 if intercept else 0.0, 1.0, size=(n, 2))
    y = X @ np.array([0.3, -0.2]) + rng.normal(0, sigma_y, n) + (0.5 if intercept else 0.0)
    idx = np.array_split(np.arange(n), J)
    rel = lr.make_release([X[i] for i in idx], [y[i] for i in idx], features=["a", "b"], epsilon=epsilon,
                          delta=1e-5, x_norm=float(np.max(np.linalg.norm(X, axis=1))),
                          y_abs=float(np.max(np.abs(y))), split=split, rng=seed + 1, intercept=intercept)
    if intercept:
        X = np.column_stack([np.ones(n), X])
    S = [X[i].T @ X[i] for i in idx]
    z = [X[i].T @ y[i] for i in idx]
    return load_release(rel), S, z, float(y @ y)


def reference_z_only(S_list, z_list, prior, grid=4000):
    """Exact p(theta, sigma2 | S_{1:J}, z_{1:J}) for theta ~ N(m, C), sigma2 ~ IG(a, b),
    z_j | S_j ~ N(S_j theta, sigma2 S_j): 1-d quadrature over sigma2, theta integrated analytically."""
    S = sum(S_list)
    z = sum(z_list)
    R = sum(zj @ np.linalg.solve(Sj, zj) for Sj, zj in zip(S_list, z_list))
    J, d = len(S_list), S.shape[0]
    Cinv = np.linalg.inv(prior.theta_cov)
    m = prior.theta_mean
    lo, hi = stats.invgamma.ppf([1e-7, 1 - 1e-7], prior.a, scale=prior.b)
    s2 = np.linspace(lo * 0.5, hi * 2.0, grid)
    logw = np.empty(grid)
    means = np.empty((grid, d))
    covs = np.empty((grid, d, d))
    for k, v in enumerate(s2):
        P = S / v + Cinv
        h = z / v + Cinv @ m
        mean = np.linalg.solve(P, h)
        logw[k] = (stats.invgamma.logpdf(v, prior.a, scale=prior.b) - 0.5 * J * d * math.log(v) - R / (2 * v)
                   - 0.5 * np.linalg.slogdet(P)[1] + 0.5 * h @ mean)
        means[k] = mean
        covs[k] = np.linalg.inv(P)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = w @ means
    cov = np.einsum("k,kij->ij", w, covs) + np.einsum("k,ki,kj->ij", w, means - mean, means - mean)
    s2_mean = w @ s2
    s2_sd = math.sqrt(w @ (s2 - s2_mean) ** 2)
    return mean, np.sqrt(np.diag(cov)), s2_mean, s2_sd


def _check(post, var, ref_mean, ref_sd):
    draws = post.posterior[var]
    idata = az.convert_to_dataset({var: draws})
    ess = np.atleast_1d(az.ess(idata)[var].values)
    flat = draws.reshape(-1, *draws.shape[2:])
    mean, sd = flat.mean(0), flat.std(0)
    assert np.all(np.abs(mean - ref_mean) < Z * ref_sd / np.sqrt(ess) + 0.02 * ref_sd), (var, mean, ref_mean, ess)
    assert np.all(np.abs(sd / ref_sd - 1) < Z / np.sqrt(2 * ess) + 0.02), (var, sd, ref_sd, ess)


@pytest.mark.parametrize("method", ["mcmc-fixeds", "mcmc-normalx", "naive"])
def test_tiny_noise_matches_exact_posterior_given_s_and_z(method):
    rel, S, z, _ = _problem()
    assert rel.regression_data().sigma_s[0] < 0.02      # epsilon = 1e6: sigma ~ Delta/sqrt(2 eps)
    prior = lr.parse_prior(None, rel)
    m, sd, s2m, s2sd = reference_z_only(S, z, prior)
    post = infer(rel, method=method, draws=1500, warmup=500, chains=4, seed=11)
    _check(post, "theta", m, sd)
    _check(post, "sigma2", s2m, s2sd)


def test_tiny_noise_normalx_intercept_matches_exact_posterior():
    # App. B.2: mcmc-normalx no longer refuses intercept releases; with (S0_j, z_j) almost exact its
    # posterior of (theta, sigma2) is the exact one given the Gram matrices of [1, x]
    # eps = 2e6: the replace-one sensitivity with an intercept needs more budget for the same tiny noise
    rel, S, z, _ = _problem(intercept=True, epsilon=2e6)
    assert rel.intercept and rel.regression_data().sigma_s[0] < 0.02
    prior = lr.parse_prior(None, rel)
    m, sd, s2m, s2sd = reference_z_only(S, z, prior)
    post = infer(rel, method="mcmc-normalx", draws=1500, warmup=500, chains=4, seed=11)
    assert post.attrs["intercept"] == 1 and post.posterior["theta"].shape == (4, 1500, 3)
    assert post.posterior["sigma_x"].shape == (4, 1500, 2, 2)
    _check(post, "theta", m, sd)
    _check(post, "sigma2", s2m, s2sd)


def test_tiny_noise_fast_closed_form():
    rel, S, z, _ = _problem()
    prior = lr.parse_prior(None, rel)
    s2 = 0.05
    post = infer(rel, method="bayes-fixeds-fast", draws=20000, chains=1, seed=1, sigma2_fixed=s2)
    P = sum(S) / s2 + np.linalg.inv(prior.theta_cov)
    cov = np.linalg.inv(P)
    mean = cov @ (sum(z) / s2)
    sd = np.sqrt(np.diag(cov))
    # the residual noise (sigma_z ~ 0.01) moves the mean by ~ S^{-1} sigma_z ~ 2e-5 = 0.3% of sd
    assert np.all(np.abs(post.extras["mean"] - mean) < 1e-2 * sd)
    assert np.allclose(post.extras["cov"], cov, rtol=1e-3)
    # the draws are exact iid draws: ESS = number of draws
    flat = post.draws("theta")
    assert np.all(np.abs(flat.mean(0) - mean) < Z * sd / math.sqrt(20000))
    # default sigma2_fixed is the paper's crude ||Y||/3
    post2 = infer(rel, method="bayes-fixeds-fast", draws=10, chains=1, seed=1)
    assert math.isclose(post2.attrs["sigma2_fixed"], rel.bounds.y_abs / 3)


@pytest.mark.parametrize("intercept", [False, True])
def test_tiny_noise_bs_matches_conjugate_nig(intercept):
    rel, S, z, u = _problem(split="xtx,xty,yty", intercept=intercept)
    prior = lr.parse_prior(None, rel)
    # exact NIG posterior with theta | sigma2 ~ N(m, sigma2 C), sigma2 ~ IG(a, b)
    L0 = np.linalg.inv(prior.theta_cov)
    St, zt, n = sum(S), sum(z), 1000
    Ln = St + L0
    mun = np.linalg.solve(Ln, zt)
    an = prior.a + n / 2
    bn = prior.b + 0.5 * (u - mun @ Ln @ mun)
    theta_sd = np.sqrt(np.diag(np.linalg.inv(Ln)) * bn / (an - 1))
    s2_mean, s2_sd = bn / (an - 1), bn / (an - 1) / math.sqrt(an - 2)
    post = infer(rel, method="mcmc-bs", draws=1000, warmup=200, chains=4, seed=5)
    _check(post, "theta", mun, theta_sd)
    _check(post, "sigma2", s2_mean, s2_sd)


def test_tiny_noise_adassp_is_least_squares():
    rel, S, z, _ = _problem()
    post = infer(rel, method="adassp", seed=0)
    ols = np.linalg.solve(sum(S), sum(z))
    # posterior sd of theta is ~ sigma_y / sqrt(n) = 0.006; the ridge vanishes as noise -> 0
    assert np.allclose(post.posterior["theta"][0, 0], ols, atol=1e-4)
    assert post.attrs["adassp_lambda"] == [0.0, 0.0]


# ----------------------------------------------------------------------------- calibration


def _simulate_batch(B, rng, d=2, J=2, n_j=100, sigma=5.0, kappa=6.0):
    """B datasets from the exact model of mcmc-normalx (x ~ N(0, Sigma_x), Sigma_x ~ IW), noise sd sigma."""
    prior = lr.default_prior(d)
    prior.iw_df = kappa
    prior.iw_scale = (kappa - d - 1) * np.eye(d)         # E Sigma_x = I
    theta = rng.multivariate_normal(prior.theta_mean, prior.theta_cov, size=B)
    sigma2 = prior.b / rng.gamma(prior.a, size=B)
    Shat = np.empty((B, J, d, d))
    zhat = np.empty((B, J, d))
    for b in range(B):
        sig_x = stats.invwishart.rvs(df=kappa, scale=prior.iw_scale, random_state=rng)
        for j in range(J):
            X = rng.multivariate_normal(np.zeros(d), sig_x, size=n_j)
            y = X @ theta[b] + rng.normal(0, math.sqrt(sigma2[b]), n_j)
            M = np.triu(rng.normal(0, sigma, (d, d)))
            Shat[b, j] = X.T @ X + M + np.triu(M, 1).T
            zhat[b, j] = X.T @ y + rng.normal(0, sigma, d)
    return prior, theta, sigma2, Shat, zhat


def _quantile_pvalues(draws_theta, draws_s2, theta, sigma2, thin=5):
    """KS p-values of the posterior quantiles of the truth (uniform under calibration; Cook et al. 2006)."""
    th = draws_theta[:, ::thin]
    q = [np.mean(th[:, :, k] < theta[:, None, k], axis=1) for k in range(theta.shape[1])]
    if draws_s2 is not None:
        q.append(np.mean(draws_s2[:, ::thin] < sigma2[:, None], axis=1))
    return [stats.kstest(qq, "uniform").pvalue for qq in q]


def _calibration(trials, seed, draws, warmup):
    rng = np.random.default_rng(seed)
    prior, theta, sigma2, Shat, zhat = _simulate_batch(trials, rng)
    J = Shat.shape[1]
    sig2 = np.full((trials, J), 25.0)
    s20 = np.full(trials, prior.b / (prior.a - 1))
    th0 = np.zeros((trials, 2))
    out = {}
    fx = run_fixeds(nearest_psd(Shat), zhat, sig2, prior, draws, warmup, rng, th0, s20)
    out["mcmc-fixeds"] = _quantile_pvalues(fx["theta"], fx["sigma2"], theta, sigma2)
    nx = run_normalx(Shat, zhat, np.full(J, 100.0), sig2, sig2, prior, draws, warmup, rng, th0, s20,
                     start_s(Shat))
    out["mcmc-normalx"] = _quantile_pvalues(nx["theta"], nx["sigma2"], theta, sigma2)
    nv = run_fixeds(naive_inputs(Shat), zhat, np.zeros((trials, J)), prior, draws, warmup, rng, th0, s20)
    out["naive"] = _quantile_pvalues(nv["theta"], nv["sigma2"], theta, sigma2)
    return out


def _assert_calibration(out):
    # correct methods: every KS p-value above 1e-3 (false alarm <= 1e-3 per quantity if exactly calibrated);
    # the naive plug-in must fail decisively on theta (p < 1e-6)
    for method in ("mcmc-fixeds", "mcmc-normalx"):
        assert min(out[method]) > 1e-3, (method, out[method])
    assert max(out["naive"][:2]) < 1e-6, out["naive"]


def test_calibration_fixeds_normalx_and_naive_fails():
    out = _calibration(trials=200, seed=2024, draws=600, warmup=300)
    _assert_calibration(out)


def _simulate_intercept_batch(B, rng, dx=2, J=2, n_j=100, sigma=5.0, kappa=6.0):
    """B datasets from the exact intercept model of mcmc-normalx (App. B.2): mu | Sigma_x ~ N(0, Sigma_x/k0),
    x ~ N(mu, Sigma_x), design [1, x]; noise sd sigma on every upper-triangle entry of S0_j and on z_j."""
    d = dx + 1
    prior = lr.default_prior(d, dx)
    prior.iw_df = kappa
    prior.iw_scale = (kappa - dx - 1) * np.eye(dx)
    theta = rng.multivariate_normal(prior.theta_mean, prior.theta_cov, size=B)
    sigma2 = prior.b / rng.gamma(prior.a, size=B)
    Shat = np.empty((B, J, d, d))
    zhat = np.empty((B, J, d))
    for b in range(B):
        sig_x = stats.invwishart.rvs(df=kappa, scale=prior.iw_scale, random_state=rng)
        mu = rng.multivariate_normal(np.zeros(dx), sig_x / prior.mu_kappa)
        for j in range(J):
            X = np.column_stack([np.ones(n_j), rng.multivariate_normal(mu, sig_x, size=n_j)])
            y = X @ theta[b] + rng.normal(0, math.sqrt(sigma2[b]), n_j)
            M = np.triu(rng.normal(0, sigma, (d, d)))
            Shat[b, j] = X.T @ X + M + np.triu(M, 1).T
            zhat[b, j] = X.T @ y + rng.normal(0, sigma, d)
    return prior, theta, sigma2, Shat, zhat


def test_calibration_normalx_intercept_and_naive_fails():
    trials, draws, warmup = 200, 600, 300
    rng = np.random.default_rng(2025)
    prior, theta, sigma2, Shat, zhat = _simulate_intercept_batch(trials, rng)
    J = Shat.shape[1]
    n = np.full(J, 100.0)
    sig2 = np.full((trials, J), 25.0)
    s20 = np.full(trials, prior.b / (prior.a - 1))
    th0 = np.zeros((trials, 3))
    A0, b0 = start_ab(Shat, n)
    nx = run_normalx_intercept(Shat, zhat, n, sig2, sig2, prior, draws, warmup, rng, th0, s20, A0, b0)
    p_nx = _quantile_pvalues(nx["theta"], nx["sigma2"], theta, sigma2)
    assert min(p_nx) > 1e-3, p_nx
    nv = run_fixeds(naive_inputs(Shat), zhat, np.zeros((trials, J)), prior, draws, warmup, rng, th0, s20)
    p_nv = _quantile_pvalues(nv["theta"], nv["sigma2"], theta, sigma2)
    assert max(p_nv[:3]) < 1e-6, p_nv


@pytest.mark.slow
def test_calibration_full():
    out = _calibration(trials=1000, seed=7, draws=2000, warmup=1000)
    _assert_calibration(out)


# ----------------------------------------------------------------------------- constraints


def _unit_release(seed=0, n=200, epsilon=0.5):
    rng = np.random.default_rng(seed)
    x = rng.uniform(0, 1, n)
    y = np.clip(0.2 + 0.5 * x + rng.normal(0, 0.1, n), 0, 1)
    rel = lr.make_release([x[:, None]], [y], features=["x"], epsilon=epsilon, delta=1e-5, x_norm=1.0, y_abs=1.0,
                          intercept=True, mechanism="laplace", split="xtx,xty,yty", rng=seed)
    rel["bounds"]["x_range"] = [0.0, 1.0]
    rel["bounds"]["y_range"] = [0.0, 1.0]
    return load_release(rel)


def test_constrained_bs_never_emits_infeasible_draw():
    rel = _unit_release()
    post = infer(rel, method="mcmc-bs", constrained=True, draws=400, warmup=100, chains=2, seed=3)
    theta, s2 = post.posterior["theta"], post.posterior["sigma2"]
    assert np.all(feasible_theta(theta, s2, True))
    assert np.all(s2 <= 0.25)
    W = post.extras["W"]
    assert np.all(feasible_w(W, np.full(W.shape[:3], 200.0), True))
    # without constraints the same release gives draws outside the feasible region
    free = infer(rel, method="mcmc-bs", draws=400, warmup=100, chains=2, seed=3)
    assert not np.all(feasible_theta(free.posterior["theta"], free.posterior["sigma2"], True))


def test_feasibility_checks_reject_known_violations():
    n = 10.0
    W = np.array([[10, 5, 5], [5, 3.3, 2.5], [5, 2.5, 3.3]])
    assert feasible_w(W, n, True)
    bad = W.copy()
    bad[1, 1] = 6.0                       # x'x > 1'x
    assert not feasible_w(bad, n, True)
    bad = W.copy()
    bad[1, 2] = bad[2, 1] = -0.5          # x'y < 0
    assert not feasible_w(bad, n, True)
    assert feasible_theta(np.array([0.2, 0.5]), np.array(0.1), True)
    assert not feasible_theta(np.array([0.6, 0.5]), np.array(0.1), True)    # theta0 + theta1 > 1
    assert not feasible_theta(np.array([0.1, -0.3]), np.array(0.1), True)   # theta0 + theta1 < 0
    assert not feasible_theta(np.array([0.2, 0.5]), np.array(0.3), True)    # sigma2 > 1/4
