"""MCMC-B&S: Bernstein & Sheldon (2019) Gibbs-SS for linear regression, extended to J data holders
as in Alparslan, Yildirim & Birbil App. C.1; optional constraints of Kazan & Reiter (Sec. 5, App. I).

Each party j releases ss_j = vech(W_j) + noise, W_j = sum_i w_i w_i' with w = [x~, y]
(x~ = x, or [1, x] with an intercept): the upper triangles of X'X, X'y and y'y.  Per row,
w is Gaussian: x ~ N(mu, Sigma_x) (mu = 0 without intercept, as in C.1), y = x~'theta + e,
e ~ N(0, sigma^2).  The central limit theorem gives ss_j ~ N(n_j mu_1, n_j Sigma_1) with
moments of the products of a Gaussian vector (mean m, covariance K):

    E[w_a w_b] = K_ab + m_a m_b,
    Cov(w_a w_b, w_c w_e) = K_ac K_be + K_ae K_bc + m_a m_c K_be + m_a m_e K_bc + m_b m_c K_ae + m_b m_e K_ac

(Isserlis; the "fourth moments of N(0, Sigma_x)" of C.1 when m = 0).  One iteration:

1. mu_1, Sigma_1 at the current (theta, sigma^2, Sigma_x, mu)                 O(d^4) entries
2. ss_j | ssh_j ~ N(mu_post, Sigma_post) for each party: the Gaussian prior N(n_j mu_1, n_j Sigma_1)
   conditioned on the released coordinates (noise variance sigma_s^2, sigma_z^2, sigma_u^2; an
   unreleased y'y stays latent).  Drawn by pathwise conditioning (Matheron's rule) with
   Cholesky factors only -- O(d^6), the cost the paper compares against.
   Laplace noise: the scale-mixture augmentation of Bernstein & Sheldon (2018):
   noise_k ~ N(0, omega_k) with 1/omega_k | . ~ InverseGaussian(1/(b |r_k|), 1/b^2).
3. Sigma_x ~ IW(Lambda + sum_j S_j, kappa + n) (with an intercept: normal-inverse-Wishart on
   (mu, Sigma_x) with mu | Sigma_x ~ N(0, Sigma_x / k0)).
4. (theta, sigma^2) ~ NIG(a_n, b_n, mu_n, Lambda_n): Lambda_n = S + Lambda_0,
   mu_n = Lambda_n^{-1}(z + Lambda_0 m), a_n = a + n/2,
   b_n = b + (u + m'Lambda_0 m - mu_n'Lambda_n mu_n)/2  (C.1 prints mu_n = Lambda_n(...) and
   drops b_0 and the 1/2 -- typos), with Lambda_0 = C^{-1}, i.e. theta | sigma^2 ~ N(m, sigma^2 C).

A drawn W_j that is not PSD makes b_n meaningless; unconstrained, it is projected to the
nearest PSD matrix (as Bernstein & Sheldon do).  With ``constrained = true`` (data in
[0, 1], Kazan & Reiter App. I) every block is instead drawn from its unconstrained full
conditional and redrawn until feasible: W_j PSD, all entries >= 0, products <= the
matching sums (x_a'x_b <= 1'x_a, x'y <= 1'y, y'y <= 1'y), sums <= n_j; sigma^2 <= 1/4;
and theta such that E[y | x] = theta_0 + x'theta_1 lies in [0, 1] for every x in [0, 1]^p.
If ``max_rejections`` redraws all fail the block keeps its (feasible) current value and
the event is counted in ``sample_stats.stuck`` (Kazan & Reiter, footnote 7: the sampler
can get "stuck").  No infeasible draw is ever emitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import math

import numpy as np

from ..options import MCMCOptions, constrained_option, option
from ..errors import InputError, RefusedError
from ..mechanisms.base import NoiseShape
from .linreg_common import (check_memory, theta_draw_values, chol, initial_theta, inverse_wishart, make_posterior, nearest_psd, prior_arrays,
                            sym, tri_solve, tri_solve_t, check_dims)
from .truncated import inverse_gaussian_recip

DEFAULT_MAX_REJECTIONS = 200


class Layout:
    """Index bookkeeping for vech(W), W = sum w w', w = [x~ (d), y]."""

    def __init__(self, d: int, intercept: bool, has_yty: bool):
        self.d = d
        self.p = d + 1
        self.intercept = intercept
        ia, ib = np.triu_indices(self.p)
        free = ~((ia == 0) & (ib == 0)) if intercept else np.ones(len(ia), bool)
        self.ia, self.ib = ia[free], ib[free]
        self.D = len(self.ia)
        kind = np.where(self.ib < d, 0, np.where(self.ia < d, 1, 2))   # 0 xtx, 1 xty, 2 yty
        self.kind = kind
        self.observed = np.nonzero((kind < 2) | has_yty)[0]

    def observed_values(self, xtx, xty, yty):
        """Released values of the observed free coordinates, in layout order: (..., |O|)."""
        full = np.zeros(xtx.shape[:-2] + (self.D,))
        k0, k1, k2 = (self.kind == 0), (self.kind == 1), (self.kind == 2)
        full[..., k0] = xtx[..., self.ia[k0], self.ib[k0]]
        full[..., k1] = xty[..., self.ia[k1]]
        if yty is not None:
            full[..., k2] = np.asarray(yty)[..., None]
        return full[..., self.observed]

    def noise_var(self, ss2, sz2, su2):
        """Gaussian noise variance of each observed coordinate, in layout order: (..., |O|)."""
        full = np.where(self.kind == 0, ss2[..., None], np.where(self.kind == 1, sz2[..., None], su2[..., None]))
        return full[..., self.observed]

    def to_matrix(self, x, n):
        """Free coordinates (..., D) -> W (..., p, p); W[0, 0] = n with an intercept."""
        W = np.zeros(x.shape[:-1] + (self.p, self.p))
        W[..., self.ia, self.ib] = x
        W[..., self.ib, self.ia] = x
        if self.intercept:
            W[..., 0, 0] = n
        return W

    def from_matrix(self, W):
        return W[..., self.ia, self.ib]


def row_moments(layout: Layout, theta, sigma2, sigma_x, mu):
    """Per-row mean mu_1 (B, D) and covariance Sigma_1 (B, D, D) of vech(w w')."""
    B = theta.shape[0]
    d, p = layout.d, layout.p
    m = np.zeros((B, p))
    K = np.zeros((B, p, p))
    if layout.intercept:
        m[:, 0] = 1.0
        m[:, 1:d] = mu
        K[:, 1:d, 1:d] = sigma_x
    else:
        K[:, :d, :d] = sigma_x
    Kx = K[:, :d, :d]
    m[:, d] = np.einsum("bk,bk->b", m[:, :d], theta)
    kxy = np.einsum("bkl,bl->bk", Kx, theta)
    K[:, :d, d] = kxy
    K[:, d, :d] = kxy
    K[:, d, d] = np.einsum("bk,bk->b", theta, kxy) + sigma2
    a, b = layout.ia, layout.ib
    mu1 = K[:, a, b] + m[:, a] * m[:, b]
    A, Bi = a[:, None], b[:, None]
    C, E = a[None, :], b[None, :]
    ma, mb = m[:, a][:, :, None], m[:, b][:, :, None]
    mc, me = m[:, a][:, None, :], m[:, b][:, None, :]
    Kac, Kbe, Kae, Kbc = K[:, A, C], K[:, Bi, E], K[:, A, E], K[:, Bi, C]
    sig1 = Kac * Kbe + Kae * Kbc + ma * mc * Kbe + ma * me * Kbc + mb * mc * Kae + mb * me * Kac
    return mu1, sym(sig1)


JITTERS = (0.0, 1e-12, 1e-10, 1e-8, 1e-6)


def _safe_chol(M, start: int = 0):
    """Cholesky with a growing relative diagonal jitter for numerically semi-definite matrices.

    Sigma_1 has condition number ~ cond(K)^2 and can fail a plain Cholesky in floating point; a
    jitter of at most 1e-6 of the mean variance is added.  Returns (factor, level used) so the
    caller can start the next iteration at the level that worked (failed attempts cost O(D^3))."""
    scale = np.maximum(np.mean(np.diagonal(M, axis1=-2, axis2=-1), -1), 1e-300)[..., None, None]
    eye = np.eye(M.shape[-1])
    for level in range(start, len(JITTERS)):
        try:
            return np.linalg.cholesky(M + JITTERS[level] * scale * eye), level
        except np.linalg.LinAlgError:
            continue
    raise RefusedError("method", "mcmc-bs: the normal approximation's covariance is not positive definite")


def feasible_w(W, n, intercept: bool, tol: float = 1e-9):
    """Kazan & Reiter App. I inequalities for data in [0, 1], generalised to p features.

    W (..., p, p) with n (...) rows; returns (...) bool.  Entries are sums of products of
    numbers in [0, 1]: all >= 0; with the intercept row (the sums 1'x_a, 1'y) every product
    sum is <= both matching sums and every sum <= n; without it every diagonal <= n.  And W PSD.
    """
    nn = np.asarray(n, float)
    t = tol * np.maximum(nn, 1.0)
    ok = np.all(W >= -t[..., None, None], axis=(-2, -1))
    diag = np.diagonal(W, axis1=-2, axis2=-1)
    if intercept:
        sums = W[..., 0, 1:]
        ok &= np.all(sums <= (nn + t)[..., None], -1)
        bound = np.minimum(sums[..., :, None], sums[..., None, :])
        ok &= np.all(W[..., 1:, 1:] <= bound + t[..., None, None], axis=(-2, -1))
    else:
        ok &= np.all(diag <= (nn + t)[..., None], -1)
    ok &= np.linalg.eigvalsh(W)[..., 0] >= -tol * np.maximum(np.abs(diag).max(-1), 1.0)
    return ok


def feasible_theta(theta, sigma2, intercept: bool):
    """E[y | x] in [0, 1] for all x in [0, 1]^p (Kazan & Reiter eq. 108, generalised) and sigma^2 <= 1/4."""
    if intercept:
        t0, t1 = theta[..., 0], theta[..., 1:]
    else:
        t0, t1 = np.zeros(theta.shape[:-1]), theta
    lo = t0 + np.minimum(t1, 0).sum(-1)
    hi = t0 + np.maximum(t1, 0).sum(-1)
    return (lo >= 0) & (hi <= 1) & (sigma2 > 0) & (sigma2 <= 0.25)


def uniform_w(layout: Layout, n):
    """n_j E[w w'] for w with independent Uniform(0, 1) features and response: a feasible start."""
    p = layout.p
    M = np.full((p, p), 0.25)
    np.fill_diagonal(M, 1.0 / 3.0)
    if layout.intercept:
        M[0, :] = M[:, 0] = 0.5
        M[0, 0] = 1.0
    return np.asarray(n, float)[..., None, None] * M


def run_bs(layout, obs, n, noise, prior, draws, warmup, rng, theta0, sigma2_0, sigma_x0, mu0,
           laplace_b=None, constrained=False, max_rejections=DEFAULT_MAX_REJECTIONS, keep_w=False):
    """Batched Gibbs-SS.  obs: (B|1, J, |O|) released coordinates; n: (J,); noise: (B|1, J, |O|)
    Gaussian noise variances (ignored when ``laplace_b``, the Laplace scales per party (J,) or per
    observed coordinate (J, |O|), is given)."""
    prec, shift = prior_arrays(prior)
    m0 = prior.theta_mean
    theta = np.array(theta0, float)
    sigma2 = np.array(sigma2_0, float)
    sigma_x = np.array(sigma_x0, float)
    mu = None if mu0 is None else np.array(mu0, float)
    B = theta.shape[0]
    J = len(n)
    d, p = layout.d, layout.p
    O = layout.observed
    nO = len(O)
    n = np.asarray(n, float)
    n_total = float(n.sum())
    obs = np.broadcast_to(obs, (B, J, nO))
    if laplace_b is not None:
        lb = np.asarray(laplace_b, float)
        lb = np.broadcast_to(lb if lb.shape[-1:] == (nO,) and lb.ndim >= 2 else lb[..., None], (B, J, nO))
        omega = 2.0 * lb ** 2
    else:
        omega = np.broadcast_to(noise, (B, J, nO))
    W = np.broadcast_to(uniform_w(layout, n), (B, J, p, p)).copy() if constrained else None
    Lam, kappa = prior.iw_scale, prior.iw_df
    k0 = prior.mu_kappa
    out = {"theta": np.empty((B, draws, d)), "sigma2": np.empty((B, draws)),
           "stuck": np.zeros((B, draws), dtype=int)}
    if keep_w:
        out["W"] = np.empty((B, draws, J, p, p))
    sqrt_n = np.sqrt(n)[None, :, None]
    jit1 = jitG = 0
    for t in range(warmup + draws):
        stuck = np.zeros(B, dtype=int)
        # 1. moments of one row's vech(w w')
        mu1, sig1 = row_moments(layout, theta, sigma2, sigma_x, mu)
        L1, jit1 = _safe_chol(sig1, jit1)                           # (B, D, D)
        # 2. ss_j | ssh_j by pathwise conditioning: x = x* + Sigma0[:, O] G^{-1} (obs - x*_O - e*)
        sig_cols = sig1[:, :, O]                                    # (B, D, |O|)
        G = n[None, :, None, None] * sig1[:, None][:, :, O][:, :, :, O] + omega[..., None] * np.eye(nO)
        LG, jitG = _safe_chol(G, jitG)                              # (B, J, |O|, |O|)

        def draw_ss():
            xi = rng.standard_normal((B, J, layout.D))
            xstar = n[None, :, None] * mu1[:, None] + sqrt_n * np.einsum("bkl,bjl->bjk", L1, xi)
            estar = np.sqrt(omega) * rng.standard_normal((B, J, nO))
            resid = obs - xstar[..., O] - estar
            sol = tri_solve_t(LG, tri_solve(LG, resid))
            return xstar + n[None, :, None] * np.einsum("bko,bjo->bjk", sig_cols, sol)

        x = draw_ss()
        W_new = layout.to_matrix(x, n)
        if constrained:
            ok = feasible_w(W_new, n[None, :], layout.intercept)
            tries = 0
            while not ok.all() and tries < max_rejections:
                x2 = draw_ss()
                W2 = layout.to_matrix(x2, n)
                ok2 = feasible_w(W2, n[None, :], layout.intercept)
                take = ~ok & ok2
                W_new = np.where(take[..., None, None], W2, W_new)
                ok = ok | ok2
                tries += 1
            stuck += (~ok).sum(1)
            W = np.where(ok[..., None, None], W_new, W)
        else:
            bad = np.linalg.eigvalsh(W_new)[..., 0] < 0
            if bad.any():
                W_new[bad] = nearest_psd(W_new[bad])
                if layout.intercept:
                    W_new[..., 0, 0] = n
            W = W_new
        if laplace_b is not None:
            r = np.abs(obs - layout.from_matrix(W)[..., O])
            # omega = 1/w, w ~ InvGauss(1/(lb r), 1/lb^2), by the cancellation-free
            # Michael-Schucany-Haas form (as gibbs_ss._sigma2): 1/rng.wald(...) lost precision
            # as lb/r grew (relative error ~1e-16 (lb/r)^2) and needed r floored away from 0
            omega = inverse_gaussian_recip(lb * r, np.broadcast_to(lb, r.shape), rng)
        Wsum = W.sum(1)                                             # (B, p, p)
        # 3. Sigma_x (and mu) | S
        if layout.intercept:
            sx = Wsum[:, 0, 1:d]
            sxx = Wsum[:, 1:d, 1:d]
            xbar = sx / n_total
            kn = k0 + n_total
            psi = Lam + sxx - (n_total ** 2 / kn) * np.einsum("bi,bj->bij", xbar, xbar)
            psi = _pd(psi, Lam)
            sigma_x = inverse_wishart(psi, kappa + n_total, rng)
            Ls = chol(sigma_x)
            mu = n_total * xbar / kn + np.einsum("bij,bj->bi", Ls, rng.standard_normal(xbar.shape)) / math.sqrt(kn)
        else:
            sigma_x = inverse_wishart(_pd(Lam + Wsum[:, :d, :d], Lam), kappa + n_total, rng)
        # 4. (theta, sigma2) | S, z, u  (normal-inverse-gamma)
        S = Wsum[:, :d, :d]
        z = Wsum[:, :d, d]
        u = Wsum[:, d, d]
        Ln = chol(sym(S + prec))
        mun = tri_solve_t(Ln, tri_solve(Ln, z + shift))
        dev = mun - m0
        quad = (u - 2 * np.einsum("bi,bi->b", mun, z) + np.einsum("bi,bij,bj->b", mun, S, mun)
                + np.einsum("bi,ij,bj->b", dev, prec, dev))
        a_n = prior.a + 0.5 * n_total
        b_n = prior.b + 0.5 * np.maximum(quad, 0.0)

        def draw_nig():
            s2 = b_n / rng.gamma(a_n, size=B)
            th = mun + np.sqrt(s2)[:, None] * tri_solve_t(Ln, rng.standard_normal((B, d)))
            return th, s2

        th_new, s2_new = draw_nig()
        if constrained:
            ok = feasible_theta(th_new, s2_new, layout.intercept)
            tries = 0
            while not ok.all() and tries < max_rejections:
                th2, s22 = draw_nig()
                ok2 = feasible_theta(th2, s22, layout.intercept)
                take = ~ok & ok2
                th_new = np.where(take[:, None], th2, th_new)
                s2_new = np.where(take, s22, s2_new)
                ok = ok | ok2
                tries += 1
            stuck += ~ok
            theta = np.where(ok[:, None], th_new, theta)
            sigma2 = np.where(ok, s2_new, sigma2)
        else:
            theta, sigma2 = th_new, s2_new
        if t >= warmup:
            k = t - warmup
            out["theta"][:, k] = theta
            out["sigma2"][:, k] = sigma2
            out["stuck"][:, k] = stuck
            if keep_w:
                out["W"][:, k] = W
    return out


def _pd(psi, Lam):
    """Guard: an IW scale must be PD; fall back to the nearest PSD matrix plus the prior scale."""
    try:
        np.linalg.cholesky(psi)
        return psi
    except np.linalg.LinAlgError:
        return nearest_psd(psi - Lam) + Lam


def setup(data, constrained: bool):
    layout = Layout(data.d, data.intercept, data.yty is not None)
    obs = layout.observed_values(data.xtx, data.xty, data.yty)
    if data.noise_shape is NoiseShape.GAUSSIAN:
        su2 = data.sigma_u ** 2 if data.sigma_u is not None else np.zeros(data.J)
        noise = layout.noise_var(data.sigma_s ** 2, data.sigma_z ** 2, su2)
        lap = None
    else:
        noise = None
        ls = data.laplace_scale
        lap = layout.noise_var(ls[:, 0], ls[:, 1], ls[:, 2])      # per observed coordinate (J, |O|)
    return layout, obs, noise, lap


def initial_state(data, prior, layout, constrained: bool, chains: int):
    prec, shift = prior_arrays(prior)
    s2 = prior.b / (prior.a - 1.0) if prior.a > 1 else prior.b
    d = data.d
    S_sum = nearest_psd(data.xtx.sum(0))
    n = data.n_total
    if constrained:
        theta0 = np.zeros(d)
        if data.intercept:
            theta0[0] = 0.5
        s2 = min(s2, 0.2)
    else:
        theta0 = initial_theta(data, prec, shift, s2)
    if data.intercept:
        xbar = S_sum[0, 1:] / n
        sig = nearest_psd(S_sum[1:, 1:] / n - np.outer(xbar, xbar)) + 1e-6 * np.eye(d - 1)
        mu0 = np.tile(xbar, (chains, 1))
    else:
        sig = S_sum / n + 1e-6 * np.eye(d)
        mu0 = None
    return (np.tile(theta0, (chains, 1)), np.full(chains, s2), np.broadcast_to(sig, (chains,) + sig.shape).copy(),
            mu0)


@dataclass(frozen=True)
class BSOptions(MCMCOptions):
    """Options of engine ``mcmc-bs`` (linear-regression): draws, warmup, chains, seed; ``constrained``
    (data in [0, 1], Kazan & Reiter App. I); ``max_rejections``, redraws of an infeasible block."""

    engine: ClassVar[str] = "mcmc-bs"
    draw_values: ClassVar = staticmethod(theta_draw_values)

    constrained: bool = constrained_option("restrict the data blocks to data in [0, 1] (Kazan & Reiter App. I)")
    max_rejections: int = option(DEFAULT_MAX_REJECTIONS, "int", "redraws of an infeasible block before it keeps "
                                 "its current value", low=0)

def mcmc_bs(model, options):
    """Engine ``mcmc-bs``: Gibbs-SS over the data holders (Bernstein & Sheldon 2019; Alparslan et al. App. C.1).
    Reads the model's release (its parties' noisy moments, resolved by ``release.regression_data()``) and parsed
    prior; names its draws through the model."""
    release, prior = model.release, model.prior.spec
    data = release.regression_data()
    check_dims(data, prior)
    check_memory("mcmc-bs", data, options)
    if prior.iw_scale is None or prior.iw_scale.shape[0] != len(data.features):
        raise InputError("prior.iw_scale", f"must be a {len(data.features)} x {len(data.features)} matrix")
    if options.constrained:
        if data.x_range != (0.0, 1.0) or data.y_range != (0.0, 1.0):
            raise RefusedError("constrained", "needs a release with bounds.x_range = bounds.y_range = [0, 1] "
                                              "(Kazan & Reiter App. I; the curator's --bounds 0 1)")
    max_rej = options.max_rejections
    rng = options.rng()
    layout, obs, noise, lap = setup(data, options.constrained)
    theta0, s20, sig0, mu0 = initial_state(data, prior, layout, options.constrained, options.chains)
    keep_w = options.constrained and layout.p ** 2 * data.J * options.draws * options.chains < 5e6
    out = run_bs(layout, obs[None], data.n, None if noise is None else noise[None], prior, options.draws,
                 options.warmup, rng, theta0, s20, sig0, mu0, laplace_b=lap, constrained=options.constrained,
                 max_rejections=max_rej, keep_w=keep_w)
    extras = {"W": out["W"]} if keep_w else {}
    return make_posterior(model, "mcmc-bs", data, {"theta": out["theta"], "sigma2": out["sigma2"]},
                          options, sample_stats={"stuck": out["stuck"]}, extras=extras,
                          attrs={"stuck_total": int(out["stuck"].sum()),
                                 "prior_form": "theta | sigma2 ~ N(m, sigma2 C) (conjugate, App. C.1)"})
