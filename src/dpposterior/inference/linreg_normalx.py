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

Cost per iteration O(J d^3).

Intercept (App. B.2, :func:`run_normalx_intercept`).  With the design [1, x] the Gram matrix is
S0_j = [[n_j, n_j b_j'], [n_j b_j, A_j + n_j b_j b_j']] with b_j the feature mean of party j and
A_j = (n_j - 1) Sigma_hat_j its scatter matrix; under x_i ~ N(mu, Sigma_x)
A_j | Sigma_x ~ W(Sigma_x, n_j - 1) (B.2 writes Sigma_hat ~ W(n-1, Sigma_x): the scatter, not the
sample covariance, has that law) and b_j | mu, Sigma_x ~ N(mu, Sigma_x / n_j), independent.  S0_j
replaces S_j in the model of zhat_j and Shat_j.  The feature mean mu, whose prior B.2 leaves open,
gets the prior of ``mcmc-bs``: mu | Sigma_x ~ N(0, Sigma_x / k0), k0 = ``prior.mu_kappa`` (default 1),
a normal-inverse-Wishart prior with Sigma_x ~ IW(Lambda, kappa).  One iteration:

1. (Sigma_x, mu) jointly: Sigma_x ~ IW(Lambda + sum_j (A_j + n_j b_j b_j') - k_n mu_n mu_n', kappa + n)
   (mu integrated out), k_n = k0 + n, mu_n = sum_j n_j b_j / k_n; then mu ~ N(mu_n, Sigma_x / k_n);
2. each A_j by MH with the Wishart proposal W(A_j / alpha_j, alpha_j) as above, target
   W(A_j; Sigma_x, n_j - 1) N(b_j; mu, Sigma_x / n_j) p(Shat_j | S0_j) N(zhat_j; S0_j theta, sigma_y^2 S0_j + sigma_z^2 I);
3. each b_j by MH with b'_j = b_j + s_j e, e ~ N(0, I), and A'_j = A_j + n_j (b_j b_j' - b'_j b'_j')
   (the feature block of S0_j is kept; the map is a translation in A for given (b, b') and is
   reversed by -e, so the proposal is symmetric; a non-positive-definite A'_j is rejected);
   log s_j adapted towards acceptance 0.3 during warm-up only; same target as 2;
4., 5. theta and sigma_y^2 as above with S0_j in place of S_j.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar
import math

import numpy as np

from ..options import MCMCOptions
from ..errors import RefusedError
from .linreg_common import (check_memory, LOG2PI, check_dims, chol, initial_theta, inverse_wishart, logdet_chol,
                            make_posterior, nearest_psd, prior_arrays, require_gaussian, sym,
                            theta_sigma2_step, tri_solve, wishart_factor)
from .linreg_fixeds import sigma2_start
from .mcmc_common import RobbinsMonroAdapter

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
    alpha_ad = RobbinsMonroAdapter(np.log(np.broadcast_to(alpha0, (B, J))), TARGET_ACCEPT_S, sign=-1.0,
                       lower=math.log(d + 1.0))
    step_ad = RobbinsMonroAdapter(np.log(0.5 * sigma2), target=0.3)
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
        # 3-4. theta | S, sigma2, zhat, then sigma2 | theta, S, zhat
        theta, sigma2, s2_prob, s2_acc = theta_sigma2_step(S, zhat, sigma2, sz2, prec, shift, prior,
                                                            step_ad.value, rng)
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


# ----------------------------------------------------------------------------- intercept (App. B.2)


def gram_intercept(A, b, n):
    """S0 = [[n, n b'], [n b, A + n b b']] for A (..., dx, dx), b (..., dx), n broadcast to A's batch."""
    n = np.broadcast_to(np.asarray(n, float), A.shape[:-2])
    dx = A.shape[-1]
    S0 = np.empty(A.shape[:-2] + (dx + 1, dx + 1))
    nb = n[..., None] * b
    S0[..., 0, 0] = n
    S0[..., 0, 1:] = nb
    S0[..., 1:, 0] = nb
    S0[..., 1:, 1:] = A + nb[..., :, None] * b[..., None, :]
    return S0


def _ab_log_target(A, LA, b, mu, Shat, n, ss2, Lsig, zhat, theta, sigma2, sz2):
    """log of W(A; Sigma_x, n_j - 1) N(b; mu, Sigma_x/n_j) p(Shat | S0) N(zhat; S0 theta, .) up to constants."""
    dx = A.shape[-1]
    M = tri_solve(Lsig[:, None], A)
    M2 = tri_solve(Lsig[:, None], np.swapaxes(M, -1, -2))
    tr = np.trace(M2, axis1=-2, axis2=-1)
    wish = 0.5 * (n - 1.0 - dx - 1.0) * logdet_chol(LA) - 0.5 * tr
    r = tri_solve(Lsig[:, None], b - mu[:, None])
    gauss = -0.5 * n * np.sum(r * r, -1)
    S0 = gram_intercept(A, b, np.broadcast_to(n, A.shape[:-2]))
    diff = Shat - S0
    sq = 0.5 * (np.sum(diff * diff, (-2, -1)) + np.sum(np.diagonal(diff, axis1=-2, axis2=-1) ** 2, -1))
    noise = -0.5 * sq / ss2
    return wish + gauss + noise + _zhat_loglik_party(S0, zhat, theta, sigma2, sz2)


def start_ab(xtx: np.ndarray, n: np.ndarray):
    """Starts (A_j, b_j) from the released Gram matrices of [1, x]: b = xtx[0, 1:] / n_j,
    A = nearest PD matrix to xtx[1:, 1:] - n_j b b'."""
    n = np.asarray(n, float)
    b = xtx[..., 0, 1:] / n[..., None]
    A = xtx[..., 1:, 1:] - n[..., None, None] * b[..., :, None] * b[..., None, :]
    return start_s(A), b


def run_normalx_intercept(Shat, zhat, n, ss2, sz2, prior, draws, warmup, rng, theta0, sigma2_0, A0, b0,
                          alpha0=None, step0=None):
    """Batched Algorithm 1 with the intercept model of App. B.2 (module docstring).
    Shat: (B|1, J, d, d), d = dx + 1; zhat: (B|1, J, d); A0 (B, J, dx, dx) positive definite; b0 (B, J, dx)."""
    prec, shift = prior_arrays(prior)
    theta = np.array(theta0, float)
    sigma2 = np.array(sigma2_0, float)
    A = np.array(A0, float)
    b = np.array(b0, float)
    B, J, dx = A.shape[0], A.shape[1], A.shape[-1]
    d = dx + 1
    n = np.asarray(n, float)
    ss2 = np.broadcast_to(np.asarray(ss2, float), (B, J))
    Lam = prior.iw_scale
    kappa = prior.iw_df
    k0 = float(prior.mu_kappa)
    if alpha0 is None:
        alpha0 = initial_alpha(A, n - 1.0, ss2)
    if step0 is None:
        sa = np.mean(np.diagonal(A, axis1=-2, axis2=-1), -1) / (n - 1.0)      # feature variance scale
        step0 = 2.38 / math.sqrt(dx) * np.minimum(np.sqrt(ss2) / n, np.sqrt(sa / n))
    alpha_ad = RobbinsMonroAdapter(np.log(np.broadcast_to(alpha0, (B, J))), TARGET_ACCEPT_S, sign=-1.0,
                       lower=math.log(dx + 1.0))
    b_ad = RobbinsMonroAdapter(np.log(np.broadcast_to(step0, (B, J))), target=0.3)
    step_ad = RobbinsMonroAdapter(np.log(0.5 * sigma2), target=0.3)
    out = {"theta": np.empty((B, draws, d)), "sigma2": np.empty((B, draws)),
           "sigma_x": np.empty((B, draws, dx, dx)), "mu_x": np.empty((B, draws, dx)),
           "accept_s": np.empty((B, draws)), "accept_b": np.empty((B, draws)),
           "accept_sigma2": np.empty((B, draws), dtype=bool)}
    n_total = float(n.sum())
    k_n = k0 + n_total
    nJ = n[None, :, None]
    for t in range(warmup + draws):
        # 1. (Sigma_x, mu) | A_{1:J}, b_{1:J}: normal-inverse-Wishart update
        mu_n = np.sum(nJ * b, 1) / k_n
        psi = (Lam + np.sum(A + nJ[..., None] * b[..., :, None] * b[..., None, :], 1)
               - k_n * mu_n[:, :, None] * mu_n[:, None, :])
        sigma_x = inverse_wishart(sym(psi), kappa + n_total, rng)
        Lsig = chol(sigma_x)
        mu = mu_n + np.einsum("bkl,bl->bk", Lsig, rng.standard_normal((B, dx))) / math.sqrt(k_n)
        # 2. A_j by MH with the Wishart proposal
        alpha = alpha_ad.value
        LA = chol(A)
        F = wishart_factor(LA / np.sqrt(alpha)[..., None, None], alpha, rng)
        A_new = sym(F @ np.swapaxes(F, -1, -2))
        logdet_old = logdet_chol(LA)
        logdet_new = logdet_chol(F)
        tr_old_new = np.sum(tri_solve(LA, F) ** 2, (-2, -1))
        tr_new_old = np.sum(tri_solve(F, LA) ** 2, (-2, -1))
        log_q = (alpha - 0.5 * (dx + 1)) * (logdet_old - logdet_new) + 0.5 * alpha * (tr_old_new - tr_new_old)
        lt_old = _ab_log_target(A, LA, b, mu, Shat, n, ss2, Lsig, zhat, theta, sigma2, sz2)
        lt_new = _ab_log_target(A_new, F, b, mu, Shat, n, ss2, Lsig, zhat, theta, sigma2, sz2)
        log_r = np.nan_to_num(lt_new - lt_old + log_q, nan=-np.inf)
        acc_prob = np.exp(np.minimum(0.0, log_r))
        acc = rng.random((B, J)) < acc_prob
        A = np.where(acc[..., None, None], A_new, A)
        LA = np.where(acc[..., None, None], F, LA)
        lt_cur = np.where(acc, lt_new, lt_old)
        # 3. b_j by MH keeping the feature block A + n b b' of S0_j fixed
        b_new = b + b_ad.value[..., None] * rng.standard_normal((B, J, dx))
        A_b = sym(A + nJ[..., None] * (b[..., :, None] * b[..., None, :] - b_new[..., :, None] * b_new[..., None, :]))
        ok = np.linalg.eigvalsh(A_b)[..., 0] > 0
        A_b = np.where(ok[..., None, None], A_b, A)
        b_new = np.where(ok[..., None], b_new, b)
        LA_b = chol(A_b)
        lt_b = _ab_log_target(A_b, LA_b, b_new, mu, Shat, n, ss2, Lsig, zhat, theta, sigma2, sz2)
        log_rb = np.where(ok, np.nan_to_num(lt_b - lt_cur, nan=-np.inf), -np.inf)
        acc_prob_b = np.exp(np.minimum(0.0, log_rb))
        acc_b = rng.random((B, J)) < acc_prob_b
        A = np.where(acc_b[..., None, None], A_b, A)
        b = np.where(acc_b[..., None], b_new, b)
        S0 = gram_intercept(A, b, np.broadcast_to(n, (B, J)))
        # 4-5. theta | S0, sigma2, zhat, then sigma2 | theta, S0, zhat
        theta, sigma2, s2_prob, s2_acc = theta_sigma2_step(S0, zhat, sigma2, sz2, prec, shift, prior,
                                                            step_ad.value, rng)
        if t < warmup:
            alpha_ad.update(acc_prob)
            b_ad.update(acc_prob_b)
            step_ad.update(s2_prob)
        else:
            k = t - warmup
            out["theta"][:, k] = theta
            out["sigma2"][:, k] = sigma2
            out["sigma_x"][:, k] = sigma_x
            out["mu_x"][:, k] = mu
            out["accept_s"][:, k] = acc.mean(1)
            out["accept_b"][:, k] = acc_b.mean(1)
            out["accept_sigma2"][:, k] = s2_acc
    out["alpha"] = alpha_ad.value
    out["b_step"] = b_ad.value
    return out


@dataclass(frozen=True)
class NormalXOptions(MCMCOptions):
    """Options of engine ``mcmc-normalx`` (linear-regression): draws, warmup, chains, seed."""

    engine: ClassVar[str] = "mcmc-normalx"


def mcmc_normalx(model, options):
    """Engine ``mcmc-normalx``: the features normal, Sigma_x drawn (Alparslan et al. Algorithm 1). Reads the
    model's release (its parties' noisy moments, resolved by ``release.regression_data()``) and parsed prior;
    names its draws through the model."""
    release, prior = model.release, model.prior.spec
    data = release.regression_data()
    require_gaussian(data, "mcmc-normalx")
    check_dims(data, prior)
    check_memory("mcmc-normalx", data, options)
    if np.any(data.n < data.d):
        raise RefusedError("method", f"mcmc-normalx needs n_j >= d = {data.d} rows per party (Wishart model)")
    rng = options.rng()
    C = options.chains
    s2 = sigma2_start(prior)
    prec, shift = prior_arrays(prior)
    theta0 = np.tile(initial_theta(data, prec, shift, s2), (C, 1))
    if data.intercept:
        A0, b0 = start_ab(data.xtx, data.n)
        out = run_normalx_intercept(data.xtx[None], data.xty[None], data.n, data.sigma_s ** 2, data.sigma_z ** 2,
                                    prior, options.draws, options.warmup, rng, theta0, np.full(C, s2),
                                    np.broadcast_to(A0, (C,) + A0.shape).copy(),
                                    np.broadcast_to(b0, (C,) + b0.shape).copy())
    else:
        S0 = np.broadcast_to(start_s(data.xtx), (C,) + data.xtx.shape).copy()
        out = run_normalx(data.xtx[None], data.xty[None], data.n, data.sigma_s ** 2, data.sigma_z ** 2, prior,
                          options.draws, options.warmup, rng, theta0, np.full(C, s2), S0)
    stats = {"accept_s": out["accept_s"], "accept_sigma2": out["accept_sigma2"]}
    attrs = {"wishart_alpha": out["alpha"].ravel().tolist()}
    if data.intercept:
        stats["accept_b"] = out["accept_b"]
        attrs["b_step"] = out["b_step"].ravel().tolist()
        attrs["mu_kappa"] = float(prior.mu_kappa)
    return make_posterior(model, "mcmc-normalx", data, {"theta": out["theta"], "sigma2": out["sigma2"]},
                          options, sigma_x=out["sigma_x"],
                          sample_stats=stats, attrs=attrs)
