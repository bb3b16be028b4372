"""Compiled (numba) per-iteration kernels: their building blocks against the exact
laws, the cancellation-free inverse-Gaussian draw, reproducibility whatever the number of
threads, agreement of the compiled linreg fixedS kernel with the numpy reference, and that the
kernels are cached on disk (no per-process recompilation).

Tolerances: KS tests at p > 1e-3 on 20,000 draws; the fixedS comparison at 5 Monte Carlo
standard errors (ArviZ ``mcse`` of both samplers, combined); the naive-Bayes interior-point
kernel against its numpy twin to 4 ulps (SIMD and FMA rounding, see the test).
"""

import math

import arviz as az
import numba
import numpy as np
import pytest
from scipy import integrate, stats

from dpposterior.inference import gaussian_gibbs as gg
from dpposterior.inference import truncated as tr

M = 20_000


@numba.njit
def _truncnorm_many(rng, mean, sd, lo, hi, m):
    """``m`` draws of the compiled ``tr.nb_truncnorm``."""
    out = np.empty(m)
    for i in range(m):
        out[i] = tr.nb_truncnorm(rng, mean, sd, lo, hi)
    return out


@numba.njit
def _truncgamma_many(rng, shape, rate, lo, hi, m):
    """``m`` draws of the compiled ``tr.nb_truncgamma``."""
    out = np.empty(m)
    for i in range(m):
        out[i] = tr.nb_truncgamma(rng, shape, rate, lo, hi)
    return out


@numba.njit
def _inverse_gaussian_recip_many(rng, a, b, m):
    """``m`` draws of the compiled ``tr.nb_inverse_gaussian_recip``."""
    out = np.empty(m)
    for i in range(m):
        out[i] = tr.nb_inverse_gaussian_recip(rng, a, b)
    return out


def test_compiled_truncated_normal_and_gamma_far_tails():
    rng = np.random.default_rng(4)
    for lo, hi in ((8.0, 9.0), (-40.0, -39.0), (-1.0, 1.0), (3.0, np.inf), (-np.inf, -12.0)):
        x = _truncnorm_many(rng, 0.0, 1.0, lo, hi, M)
        assert np.all((x >= lo) & (x <= hi))
        assert stats.kstest(x, stats.truncnorm(lo, hi).cdf).pvalue > 1e-3
    for shape, rate, lo, hi in ((21.0, 1.0, 0.0, 1e-3), (21.0, 1.0, 80.0, np.inf), (3.0, 2.0, 0.5, 0.7),
                                (0.6, 1.0, 0.0, 1e-30)):
        x = _truncgamma_many(rng, shape, rate, lo, hi, M)
        assert np.all(np.isfinite(x)) and np.all((x >= lo) & (x <= hi))
        if hi > 1e-20:  # scipy's reference cdf itself underflows in the 1e-30 case
            g = stats.gamma(shape)
            if lo * rate <= shape:
                lo_c, hi_c = g.cdf(lo * rate), g.cdf(hi * rate)
                assert stats.kstest(x * rate, lambda v: (g.cdf(v) - lo_c) / (hi_c - lo_c)).pvalue > 1e-3
            else:
                slo = g.sf(lo * rate)
                assert stats.kstest(x * rate, lambda v: 1 - g.sf(v) / slo).pvalue > 1e-3


def test_compiled_log_incomplete_gammas_match_numpy_versions():
    a = np.array([0.5, 3.0, 21.0, 21.0, 200.0, 21.0])
    x = np.array([1e-3, 2.0, 1e-40, 5000.0, 150.0, 21.0])
    for k in range(a.size):
        sl = slice(k, k + 1)
        assert tr.nb_log_gammainc(a[k], x[k]) == pytest.approx(float(tr.log_gammainc(a[sl], x[sl])[0]), rel=1e-12)
        assert tr.nb_log_gammaincc(a[k], x[k]) == pytest.approx(float(tr.log_gammaincc(a[sl], x[sl])[0]), rel=1e-12)


@pytest.mark.parametrize("sigma2, tau, cap", [(0.05, 0.2224, np.inf), (0.05, -0.1, np.inf), (0.2, 0.2224, 0.15),
                                              (0.01, 0.3, 0.05), (1.5, 0.5, np.inf)])
def test_compiled_tgm_draw_has_the_conditional_law(sigma2, tau, cap):
    """S^2 | sigma^2, S2* (Kazan & Reiter eq. 52 / 57) from the compiled kernel, KS against the density."""
    n, lam = 43, 0.25 * 43
    alpha, beta = (n - 1) / 2, (n - 1) / (2 * sigma2)

    def dens(x):
        return stats.gamma.pdf(x, alpha, scale=1 / beta) * np.exp(-lam * abs(tau - x))

    upper = cap if np.isfinite(cap) else stats.gamma.ppf(1 - 1e-14, alpha, scale=1 / (beta - lam))
    pts = [p for p in (tau,) if 0 < p < upper]
    z, _ = integrate.quad(dens, 0, upper, points=pts or None, limit=200)

    def cdf(v):
        return integrate.quad(dens, 0, min(v, upper), points=[p for p in pts if p < v] or None, limit=200)[0] / z

    ybar = 0.5 - np.sqrt(0.25 - cap * (n - 1) / n) if np.isfinite(cap) else 0.3
    par = np.zeros(1, gg.KERNEL_PARAMS)[0]
    for name, value in dict(n=n, ystar=0.3, s2star=tau, b1=1 / (0.25 * n), lam2=lam, sigma0_sq=1.0).items():
        par[name] = value
    draws = gg._k_draw_s2_many(np.random.default_rng(2), sigma2, ybar, par, bool(np.isfinite(cap)), M)
    if np.isfinite(cap):
        assert draws.max() <= cap * (1 + 1e-12)
    srt = np.sort(draws)
    xs = srt[::200]
    emp = np.searchsorted(srt, xs, side="right") / M
    assert np.max(np.abs(emp - np.array([cdf(v) for v in xs]))) < 1.63 / np.sqrt(M) + 1e-3


@pytest.mark.parametrize("a, b", [(0.3, 1.0), (2.0, 0.5), (1e-3, 1.0)])
def test_inverse_gaussian_recip_law(a, b):
    """1/w, w ~ InvGauss(mean 1/a, shape 1/b^2) (a = b |z| in the samplers): compiled and numpy forms vs scipy."""
    mean, shape = 1.0 / a, 1.0 / b**2
    ref = stats.invgauss(mean / shape, scale=shape)
    x_nb = _inverse_gaussian_recip_many(np.random.default_rng(1), a, b, M)
    x_np = tr.inverse_gaussian_recip(np.full(M, a), b, np.random.default_rng(2))
    for x in (x_nb, x_np):
        assert stats.kstest(1.0 / x, ref.cdf).pvalue > 1e-3


def test_inverse_gaussian_recip_has_no_cancellation():
    """Where numpy's wald cancels (mean/shape ~ 1e20) the draw stays right: 1/w -> b^2 chi^2_1 (Levy limit)."""
    b = 0.1
    for a in (0.0, 1e-21, 1e-12):
        x = _inverse_gaussian_recip_many(np.random.default_rng(3), a * b, b, M)
        assert np.all(np.isfinite(x) & (x > 0))
        assert stats.kstest(x / b**2, stats.chi2(1).cdf).pvalue > 1e-3
        y = tr.inverse_gaussian_recip(np.full(M, a * b), b, np.random.default_rng(4))
        assert stats.kstest(y / b**2, stats.chi2(1).cdf).pvalue > 1e-3
    # what the old form gave: 1/wald underflows the precision and comes out as 1/0 or garbage
    with np.errstate(divide="ignore"):
        old = 1.0 / np.random.default_rng(5).wald(1.0 / (1e-21 * b * b), 1.0 / b**2, size=M)
    assert not (np.all(np.isfinite(old)) and stats.kstest(old / b**2, stats.chi2(1).cdf).pvalue > 1e-3)


def _example1_problem(constrained):
    from dpposterior.demo import PAPER_PRIOR, bundled_release_path
    from dpposterior.families.gaussian import parse_prior
    from dpposterior.release import load_release

    rel = load_release(bundled_release_path())
    return gg.problem_from_release(rel, parse_prior(PAPER_PRIOR, rel), constrained)


@pytest.mark.parametrize("constrained", [False, True])
def test_gaussian_draws_do_not_depend_on_threads(constrained):
    prob = _example1_problem(constrained)
    one = gg.run_chains(prob, 3, 300, 200, np.random.default_rng(7), workers=1)
    two = gg.run_chains(prob, 3, 300, 200, np.random.default_rng(7), workers=2)
    for k in ("mu", "sigma2", "accepted"):
        np.testing.assert_array_equal(one[k], two[k])
    other = gg.run_chains(prob, 3, 300, 200, np.random.default_rng(8), workers=1)
    assert not np.array_equal(one["mu"], other["mu"])


def test_gaussian_kernel_records_carry_the_named_problem_and_proposal():
    """The compiled Gaussian kernel reads its inputs by field name: the parameter record has one
    field per Problem array, in any order, and the proposal record holds the Cholesky factors
    entry by entry (rw_ij = L[i, j]) and the independence proposal's centre."""
    prob = _example1_problem(False)
    par = gg.kernel_params(prob, 3)
    assert par.dtype.names == gg.PROBLEM_ARRAYS
    for name in gg.PROBLEM_ARRAYS:
        np.testing.assert_array_equal(par[name], np.broadcast_to(getattr(prob, name), (3,)))
    chol = np.array([[[1.0, 0.0], [2.0, 3.0]]] * 3)
    ind = np.array([[[4.0, 0.0], [5.0, 6.0]]] * 3)
    center = np.array([[0.4, -2.0]] * 3)
    rec = gg.kernel_proposal(gg.Proposal(chol=chol, center=center, ind_chol=ind))
    for i in range(2):
        for j in range(2):
            np.testing.assert_array_equal(rec[f"rw_{i}{j}"], chol[:, i, j])
            np.testing.assert_array_equal(rec[f"t_{i}{j}"], ind[:, i, j])
    np.testing.assert_array_equal(rec["center_mu"], center[:, 0])
    np.testing.assert_array_equal(rec["center_eta"], center[:, 1])
    assert np.all(rec["independent"] == 1.0)
    assert np.all(gg.kernel_proposal(gg.Proposal(chol=chol))["independent"] == 0.0)
    state = gg.init(prob, 3, np.random.default_rng(0))
    assert state.dtype == gg.CHAIN_STATE and np.all(state["sigma2"] > 0)


def _fixeds_case():
    from dpposterior.families.linear_regression import default_prior, simulate
    from dpposterior.inference.linreg_common import nearest_psd
    from dpposterior.release import load_release

    prior = default_prior(3)
    data = load_release(simulate(prior, 2000, 1.0, np.random.default_rng(11), parties=2).release).regression_data()
    return prior, nearest_psd(data.xtx)[None], data.xty[None], data.sigma_z ** 2


def _mcse(x, method):
    return float(az.mcse(az.from_dict(posterior={"v": x}), method=method)["v"])


def _ess(x):
    return float(az.ess(az.from_dict(posterior={"v": x}), method="bulk")["v"])


def test_fixeds_compiled_matches_numpy_reference_and_threads():
    from dpposterior.inference import linreg_fixeds as lf

    prior, S, zhat, sz2 = _fixeds_case()
    B = 4
    theta0 = np.zeros((B, prior.d))
    s20 = np.full(B, lf.sigma2_start(prior))
    comp = lf.run_fixeds(S, zhat, sz2, prior, 4000, 500, np.random.default_rng(1), theta0, s20, workers=1)
    again = lf.run_fixeds(S, zhat, sz2, prior, 4000, 500, np.random.default_rng(1), theta0, s20, workers=2)
    np.testing.assert_array_equal(comp["theta"], again["theta"])
    np.testing.assert_array_equal(comp["sigma2"], again["sigma2"])
    ref = lf.run_fixeds_numpy(S, zhat, sz2, prior, 4000, 500, np.random.default_rng(2), theta0, s20)
    for name, get in (("theta", lambda o, k: o["theta"][..., k]), ("sigma2", lambda o, k: o["sigma2"])):
        for k in range(prior.d if name == "theta" else 1):
            x, y = get(comp, k), get(ref, k)
            se = math.hypot(_mcse(x, "mean"), _mcse(y, "mean"))
            assert abs(x.mean() - y.mean()) <= 5 * se, (name, k, x.mean(), y.mean(), se)
            # sd of a sd estimate ~ sd / sqrt(2 ESS) (normal approximation; arviz's mcse "sd" fails under numba)
            sd_se = math.hypot(x.std() / math.sqrt(2 * _ess(x)), y.std() / math.sqrt(2 * _ess(y)))
            assert abs(x.std() - y.std()) <= 5 * sd_se, (name, k, x.std(), y.std(), sd_se)


def test_kernels_are_cached_on_disk():
    """numba refuses to cache kernels that embed raw addresses (ctypes); these must be cacheable,
    so a fresh process (a study's worker) loads them instead of recompiling."""
    from dpposterior.inference import linreg_fixeds as lf

    prob = _example1_problem(False)
    gg.run_chains(prob, 1, 10, 10, np.random.default_rng(0), workers=1)
    prior, S, zhat, sz2 = _fixeds_case()
    lf.run_fixeds(S, zhat, sz2, prior, 10, 10, np.random.default_rng(0), np.zeros((1, prior.d)),
                  np.array([0.02]), workers=1)
    tr.nb_truncgamma(np.random.default_rng(0), 3.0, 2.0, 0.5, 0.7)
    for kernel in (gg.advance_chain, lf._fixeds_chain, tr.nb_truncgamma):
        assert type(kernel._cache).__name__ != "NullCache"
        assert len(kernel.signatures) == 1  # one compiled version, whatever the call
        index = kernel._cache._cache_file._index_path
        import os

        assert os.path.exists(index), index


def test_naive_bayes_interior_point_kernel_equals_numpy_reference():
    """The compiled per-block interior-point ascent (Karwa et al. eqs. 10-13) gives the numpy
    reference's iterates to a few ulps, ragged (masked) levels included."""
    from dpposterior.inference import naive_bayes_vb as nb

    rng = np.random.default_rng(0)
    B, K, I, J = 40, 3, 2, 4
    mask = np.ones((K, I, J), bool)
    mask[1, :, 3] = False
    theta = np.where(mask, rng.dirichlet(np.ones(J), size=(B, K, I)), 0.0)
    theta /= theta.sum(-1, keepdims=True)
    A = -rng.random((B, K, I, J)) * 100
    Bc = rng.normal(size=(B, K, I, J)) * 50
    C = -np.full((B, K, I, 1), 30.0)
    m = np.broadcast_to(mask, (B, K, I, J))
    # The two are the same arithmetic in the same order, but not the same instructions: numpy's
    # log and reductions take the SIMD path its CPU dispatch picks (AVX-512 or AVX2 kernels
    # round differently in the last bit), numba's LLVM may contract a*b+c into one FMA.  Each
    # step carries such a difference forward without amplifying it (the ascent contracts towards
    # the optimum; an Armijo accept/reject flip would show as a difference of many orders of
    # magnitude more), so the iterates agree to a small multiple of one ulp: measured 1 ulp at
    # 20 and 100 steps with numpy's AVX-512 paths, 0 without them.  A budget of 4 ulps; exact
    # zeros (masked levels) must stay exact zeros.
    for steps in (1, 3, 20):
        compiled = nb.interior_point_ascent(theta, A, Bc, C, m, steps)
        reference = nb.interior_point_ascent_numpy(theta, A, Bc, C, m, steps)
        np.testing.assert_array_equal(compiled == 0.0, reference == 0.0)
        np.testing.assert_array_max_ulp(compiled, reference, maxulp=4)
