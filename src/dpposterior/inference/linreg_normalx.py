"""MCMC-normalX (Alparslan, Yildirim & Birbil, Algorithm 1; derivations in App. A).

Model (Fig. 1): x_i ~ N(0, Sigma_x), Sigma_x ~ IW(Lambda, kappa), so S_j | Sigma_x ~ W(Sigma_x, n_j);
Shat_j = S_j + sigma_s M_j; zhat_j | S_j, theta, sigma_y^2 ~ N(S_j theta, sigma_y^2 S_j + sigma_z^2 I)
(z_j integrated out, eq. 10).  One iteration, for every chain at once:

1. Sigma_x ~ IW(Lambda + sum_j S_j, kappa + n)                                   eq. (11)
2. each S_j by MH with the Wishart proposal S'_j ~ W(S_j / alpha_j, alpha_j) (mean S_j),
   target p(S_j | ...) ∝ W(S_j; Sigma_x, n_j) p(Shat_j | S_j) N(zhat_j; S_j theta, sigma_y^2 S_j + sigma_z^2 I)
   and proposal ratio (|S|/|S'|)^{alpha-(d+1)/2} exp(alpha/2 (tr(S^{-1}S') - tr(S'^{-1}S)))   App. A.3
   (the papers' README lists the slips of A.3 this follows the derivation for);
   log alpha_j adapted towards acceptance 0.2 (Andrieu & Thoms 2008) during warm-up only;
3. theta ~ N(m_p, Sigma_p)                                                        eq. (12)
4. sigma_y^2 by random-walk MH                                                     App. A.4

Cost per iteration O(J d^3).  Features are assumed centred (no intercept): the
intercept model of App. B.2 is not implemented for this engine (refused).
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import RefusedError
from .linreg_common import (LOG2PI, Adapter, check_dims, chol, initial_theta, inverse_wishart, logdet_chol,
                            make_posterior, nearest_psd, prior_arrays, refuse_constrained, require_gaussian,
                            sample_gaussian_canonical, sigma2_rw_step, sym, theta_precision, tri_solve,
                            wishart_factor, zhat_loglik)
from .linreg_fixeds import sigma2_start

TARGET_ACCEPT_S = 0.2


def _zhat_loglik_party(S, zhat, theta, sigma2, sz2):
    """log N(zhat_j; S_j theta, sigma2 S_j + sigma_z^2 I) per (B, J)."""
    d = S.shape[-1]
    K = sigma2[:, None, None, None] * S + np.asarray(sz2, float)[..., None, None] * np.eye(d)
    L = chol(K)
    r = zhat - np.einsum("bjkl,bl->bjk", S, theta)
    q = tri_solve(L, r)
    return -0.5 * np.sum(q * q, -1) - 0.5 * logdet_chol(L) - 0.5 * d * LOG2PI


def _s_log_target(S, LS, Shat, n, ss2, Lsig, zhat, theta, sigma2, sz2):
    """log of W(S; Sigma_x, n_j) p(Shat | S) N(zhat; S theta, .) up to constants; (B, J)."""
    d = S.shape[-1]
    M = tri_solve(Lsig[:, None], S)                        # L^{-1} S
    M2 = tri_solve(Lsig[:, None], np.swapaxes(M, -1, -2))  # L^{-1} S L^{-T}
    tr = np.trace(M2, axis1=-2, axis2=-1)
    wish = 0.5 * (n - d - 1.0) * logdet_chol(LS) - 0.5 * tr
    diff = Shat - S
    # upper triangle entries are the independent noise coordinates: sum_{a<=b} diff^2
    sq = 0.5 * (np.sum(diff * diff, (-2, -1)) + np.sum(np.diagonal(diff, axis1=-2, axis2=-1) ** 2, -1))
    noise = -0.5 * sq / ss2
    return wish + noise + _zhat_loglik_party(S, zhat, theta, sigma2, sz2)


def initial_alpha(S0, n, ss2):
    """A starting alpha: proposal variance of the diagonal (2 s^2/alpha) = 2.38^2/D times the smaller of
    the noise variance and the Wishart variance 2 s^2/n_j (s = mean diagonal)."""
    d = S0.shape[-1]
    D = d * (d + 1) / 2
    s = np.mean(np.diagonal(S0, axis1=-2, axis2=-1), -1)
    v = np.minimum(ss2, 2.0 * s ** 2 / n)
    return np.maximum(d + 2.0, 2.0 * s ** 2 * D / (2.38 ** 2 * v))


def run_normalx(Shat, zhat, n, ss2, sz2, prior, draws, warmup, rng, theta0, sigma2_0, S0, alpha0=None):
    """Batched Algorithm 1.  Shat: (B|1, J, d, d); zhat: (B|1, J, d); n: (J,); ss2, sz2: (J,) or (B, J);
    theta0 (B, d), sigma2_0 (B,), S0 (B, J, d, d) positive definite."""
    prec, shift = prior_arrays(prior)
    theta = np.array(theta0, float)
    sigma2 = np.array(sigma2_0, float)
    S = np.array(S0, float)
    B, J, d = S.shape[0], S.shape[1], S.shape[-1]
    n = np.asarray(n, float)
    ss2 = np.broadcast_to(np.asarray(ss2, float), (B, J))
    Lam = prior.iw_scale
    kappa = prior.iw_df
    if alpha0 is None:
        alpha0 = initial_alpha(S, n, ss2)
    alpha_ad = Adapter(np.log(np.broadcast_to(alpha0, (B, J))), TARGET_ACCEPT_S, sign=-1.0,
                       lower=math.log(d + 1.0))
    step_ad = Adapter(np.log(0.5 * sigma2), target=0.3)
    out = {"theta": np.empty((B, draws, d)), "sigma2": np.empty((B, draws)),
           "sigma_x": np.empty((B, draws, d, d)), "accept_s": np.empty((B, draws)),
           "accept_sigma2": np.empty((B, draws), dtype=bool)}
    n_total = float(n.sum())
    for t in range(warmup + draws):
        # 1. Sigma_x | S_{1:J}
        sigma_x = inverse_wishart(Lam + S.sum(1), kappa + n_total, rng)
        Lsig = chol(sigma_x)
        # 2. S_j | Sigma_x, theta, sigma2, Shat_j, zhat_j  (all j at once, independently)
        alpha = alpha_ad.value
        LS = chol(S)
        F = wishart_factor(LS / np.sqrt(alpha)[..., None, None], alpha, rng)
        S_new = sym(F @ np.swapaxes(F, -1, -2))
        logdet_old = logdet_chol(LS)
        logdet_new = logdet_chol(F)
        tr_old_new = np.sum(tri_solve(LS, F) ** 2, (-2, -1))     # tr(S^{-1} S')
        tr_new_old = np.sum(tri_solve(F, LS) ** 2, (-2, -1))     # tr(S'^{-1} S)
        log_q = (alpha - 0.5 * (d + 1)) * (logdet_old - logdet_new) + 0.5 * alpha * (tr_old_new - tr_new_old)
        lt_old = _s_log_target(S, LS, Shat, n, ss2, Lsig, zhat, theta, sigma2, sz2)
        lt_new = _s_log_target(S_new, F, Shat, n, ss2, Lsig, zhat, theta, sigma2, sz2)
        log_r = np.nan_to_num(lt_new - lt_old + log_q, nan=-np.inf)
        acc_prob = np.exp(np.minimum(0.0, log_r))
        acc = rng.random((B, J)) < acc_prob
        S = np.where(acc[..., None, None], S_new, S)
        # 3. theta | S, sigma2, zhat
        P, h = theta_precision(S, zhat, sigma2, sz2, prec, shift)
        theta, _ = sample_gaussian_canonical(P, h, rng)
        # 4. sigma2 | theta, S, zhat
        sigma2, s2_prob, s2_acc = sigma2_rw_step(
            sigma2, step_ad.value, lambda s2: zhat_loglik(S, zhat, theta, s2, sz2), prior.a, prior.b, rng)
        if t < warmup:
            alpha_ad.update(acc_prob)
            step_ad.update(s2_prob)
        else:
            k = t - warmup
            out["theta"][:, k] = theta
            out["sigma2"][:, k] = sigma2
            out["sigma_x"][:, k] = sigma_x
            out["accept_s"][:, k] = acc.mean(1)
            out["accept_sigma2"][:, k] = s2_acc
    out["alpha"] = alpha_ad.value
    return out


def start_s(xtx: np.ndarray) -> np.ndarray:
    """A positive-definite start for S_j: Higham's projection with a small eigenvalue floor."""
    top = np.max(np.linalg.eigvalsh(xtx), axis=-1)
    out = []
    for s, t in zip(xtx.reshape(-1, *xtx.shape[-2:]), top.ravel()):
        out.append(nearest_psd(s, max(1e-6 * t, 1e-12)))
    return np.stack(out).reshape(xtx.shape)


def mcmc_normalx(release, prior, options):
    data = release.regression_data()
    require_gaussian(data, "mcmc-normalx")
    refuse_constrained(options, "mcmc-normalx")
    check_dims(data, prior)
    if data.intercept:
        raise RefusedError("method", "mcmc-normalx assumes centred features without an intercept (the "
                                     "App. B.2 model is not implemented); use mcmc-fixeds or mcmc-bs")
    if np.any(data.n < data.d):
        raise RefusedError("method", f"mcmc-normalx needs n_j >= d = {data.d} rows per party (Wishart model)")
    rng = options.rng()
    C = options.chains
    s2 = sigma2_start(prior)
    prec, shift = prior_arrays(prior)
    theta0 = np.tile(initial_theta(data, prec, shift, s2), (C, 1))
    S0 = np.broadcast_to(start_s(data.xtx), (C,) + data.xtx.shape).copy()
    out = run_normalx(data.xtx[None], data.xty[None], data.n, data.sigma_s ** 2, data.sigma_z ** 2, prior,
                      options.draws, options.warmup, rng, theta0, np.full(C, s2), S0)
    return make_posterior("mcmc-normalx", data, {"theta": out["theta"], "sigma2": out["sigma2"]}, options,
                          sigma_x=out["sigma_x"],
                          sample_stats={"accept_s": out["accept_s"], "accept_sigma2": out["accept_sigma2"]},
                          attrs={"wishart_alpha": out["alpha"].ravel().tolist()})
