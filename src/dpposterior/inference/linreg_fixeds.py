"""MCMC-fixedS (Alparslan, Yildirim & Birbil, Algorithm 2).

S_j is fixed at S~_j, the nearest positive semi-definite matrix to the released
Shat_j (Higham 1988; Sec. 4.2: clip negative eigenvalues, the PSD maximum-likelihood
estimate of S_j).  Each iteration draws theta from its Gaussian full conditional
eq. (12), with z_j integrated out (zhat_j | S_j, theta, sigma_y^2 ~ N(S_j theta,
sigma_y^2 S_j + sigma_z^2 I)), then updates sigma_y^2 by a random-walk MH move
(App. A.4) whose step is adapted towards acceptance 0.3 during warm-up only.
Cost per iteration O(J d^3), independent of n.  Needs no model for x.

Compiled kernel (for speed).  Because S_j is fixed, each S_j = U_j diag(l_j) U_j' is
diagonalised once, and K_j = sigma_y^2 S_j + sigma_z^2 I = U_j diag(sigma_y^2 l_j + sigma_z^2) U_j'
shares its eigenvectors: eq. (12)'s precision is sum_j U_j diag(l^2/(sigma_y^2 l + sigma_z^2)) U_j'
+ C^{-1}, its shift sum_j U_j diag(l/(sigma_y^2 l + sigma_z^2)) U_j' zhat_j + C^{-1} m, and the
App. A.4 log likelihood sum_j sum_k [-(U_j'(zhat_j - S_j theta))_k^2 / (sigma_y^2 l_k + sigma_z^2)
- log(sigma_y^2 l_k + sigma_z^2) - log 2 pi]/2.  The same conditionals as the numpy path
(:func:`run_fixeds_numpy`) without one Cholesky factor of K_j per iteration; each chain runs
in a numba kernel with its own generator (spawned from the caller's).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import math

import numba
import numpy as np

from ..options import MCMCOptions
from .mcmc_common import RobbinsMonroAdapter, chain_workers, map_chains, nb_robbins_monro
from .linreg_common import (check_memory, theta_draw_values, check_dims, initial_theta, make_posterior, nearest_psd, prior_arrays, require_gaussian, theta_sigma2_step)


def run_fixeds_numpy(S, zhat, sz2, prior, draws: int, warmup: int, rng, theta0, sigma2_0,
                     step0=None) -> dict:
    """Reference (numpy, batched) Algorithm 2, as :func:`run_fixeds`.  S: (B|1, J, d, d); zhat: (B|1, J, d); sz2: (J,) or (B, J);
    theta0: (B, d); sigma2_0: (B,).  Returns dict of arrays (B, draws, ...)."""
    prec, shift = prior_arrays(prior)
    theta = np.array(theta0, dtype=float)
    sigma2 = np.array(sigma2_0, dtype=float)
    B, d = theta.shape
    if step0 is None:
        step0 = 0.5 * sigma2
    adapter = RobbinsMonroAdapter(np.log(np.broadcast_to(step0, (B,))), target=0.3)
    out_theta = np.empty((B, draws, d))
    out_s2 = np.empty((B, draws))
    out_acc = np.empty((B, draws), dtype=bool)
    for t in range(warmup + draws):
        theta, sigma2, acc_prob, acc = theta_sigma2_step(S, zhat, sigma2, sz2, prec, shift, prior,
                                                         adapter.value, rng)
        if t < warmup:
            adapter.update(acc_prob)
        else:
            k = t - warmup
            out_theta[:, k] = theta
            out_s2[:, k] = sigma2
            out_acc[:, k] = acc
    return {"theta": out_theta, "sigma2": out_s2, "accept_sigma2": out_acc, "sigma2_step": adapter.value}


@numba.njit(cache=True, nogil=True)
def _fixeds_chain(lam, U, utz, sz2, prec, shift, a, b, theta, sigma2, log_step, warmup, draws, rng,
                  out_theta, out_s2, out_acc):
    """One chain of Algorithm 2 in the eigenbasis of the fixed S_j (module docstring).

    lam (J, d), U (J, d, d), utz (J, d) = U_j' zhat_j, sz2 (J,).  Robbins-Monro on the log
    random-walk step towards acceptance 0.3 during warm-up only (:func:`~.mcmc_common.robbins_monro`).
    Returns (sigma2, log step).
    """
    J, d = lam.shape
    P = np.empty((d, d))
    L = np.empty((d, d))
    h = np.empty(d)
    y = np.empty(d)
    ut = np.empty((J, d))
    for t in range(warmup + draws):
        # theta | S, sigma2, zhat ~ N(P^{-1} h, P^{-1}) (eq. 12)
        for i in range(d):
            h[i] = shift[i]
            for k in range(d):
                P[i, k] = prec[i, k]
        for j in range(J):
            for k in range(d):
                den = sigma2 * lam[j, k] + sz2[j]
                wp = lam[j, k] * lam[j, k] / den
                wh = lam[j, k] * utz[j, k] / den
                for i in range(d):
                    uik = U[j, i, k]
                    h[i] += uik * wh
                    for m in range(i + 1):
                        P[i, m] += uik * wp * U[j, m, k]
        for i in range(d):  # Cholesky of P (lower)
            for m in range(i + 1):
                s = P[i, m]
                for k in range(m):
                    s -= L[i, k] * L[m, k]
                if i == m:
                    L[i, i] = math.sqrt(s)
                else:
                    L[i, m] = s / L[m, m]
        for i in range(d):  # y = L^{-1} h
            s = h[i]
            for k in range(i):
                s -= L[i, k] * y[k]
            y[i] = s / L[i, i]
        for i in range(d):  # y += z; theta = L'^{-1} y = mean + L'^{-1} z
            y[i] += rng.standard_normal()
        for i in range(d - 1, -1, -1):
            s = y[i]
            for k in range(i + 1, d):
                s -= L[k, i] * theta[k]
            theta[i] = s / L[i, i]
        # sigma_y^2 by random-walk MH (App. A.4): residuals U_j'(zhat_j - S_j theta) once
        for j in range(J):
            for k in range(d):
                s = 0.0
                for i in range(d):
                    s += U[j, i, k] * theta[i]
                ut[j, k] = utz[j, k] - lam[j, k] * s
        step = math.exp(log_step)
        prop = sigma2 + step * rng.standard_normal()
        acc_prob = 0.0
        if prop > 0.0:
            log_r = -(a + 1.0) * (math.log(prop) - math.log(sigma2)) - b / prop + b / sigma2
            for j in range(J):
                for k in range(d):
                    dn = prop * lam[j, k] + sz2[j]
                    do = sigma2 * lam[j, k] + sz2[j]
                    r2 = ut[j, k] * ut[j, k]
                    log_r += -0.5 * (r2 / dn - r2 / do) - 0.5 * (math.log(dn) - math.log(do))
            if log_r == log_r:  # NaN -> rejected
                acc_prob = math.exp(min(0.0, log_r))
        accept = rng.random() < acc_prob
        if accept:
            sigma2 = prop
        if t < warmup:
            log_step = nb_robbins_monro(log_step, acc_prob, 0.3, t + 1.0)
        else:
            r = t - warmup
            for i in range(d):
                out_theta[r, i] = theta[i]
            out_s2[r] = sigma2
            out_acc[r] = accept
    return sigma2, log_step


def run_fixeds(S, zhat, sz2, prior, draws: int, warmup: int, rng, theta0, sigma2_0,
               step0=None, workers: int | None = None) -> dict:
    """Batched Algorithm 2 (compiled).  S: (B|1, J, d, d); zhat: (B|1, J, d); sz2: (J,) or (B, J);
    theta0: (B, d); sigma2_0: (B,).  Returns dict of arrays (B, draws, ...).

    Falls back to :func:`run_fixeds_numpy` when some K_j can be singular (sigma_z = 0 with a
    singular S_j), where the numpy path's Cholesky factor refuses as before."""
    theta = np.array(theta0, dtype=float)
    B, d = theta.shape
    S = np.asarray(S, float)
    J = S.shape[-3]
    lam, U = np.linalg.eigh(0.5 * (S + np.swapaxes(S, -1, -2)))
    lam = np.maximum(lam, 0.0)
    sz2_b = np.broadcast_to(np.asarray(sz2, float), (B, J))
    if np.any((sz2_b <= 0) & (np.broadcast_to(lam.min(axis=-1), (B, J)) <= 0)):
        return run_fixeds_numpy(S, zhat, sz2, prior, draws, warmup, rng, theta0, sigma2_0, step0)
    utz = np.einsum("...jik,...ji->...jk", U, np.broadcast_to(np.asarray(zhat, float), S.shape[:-1]))
    lam = np.broadcast_to(lam, (B, J, d))
    U = np.broadcast_to(U, (B, J, d, d))
    utz = np.broadcast_to(utz, (B, J, d))
    prec, shift = prior_arrays(prior)
    sigma2 = np.broadcast_to(np.asarray(sigma2_0, float), (B,)).copy()
    if step0 is None:
        step0 = 0.5 * sigma2
    log_step = np.log(np.broadcast_to(step0, (B,))).astype(float)
    out_theta = np.empty((B, draws, d))
    out_s2 = np.empty((B, draws))
    out_acc = np.zeros((B, draws), dtype=bool)
    rngs = rng.spawn(B)
    a, b = float(prior.a), float(prior.b)
    if workers is None:
        workers = chain_workers(B, (warmup + draws) * J * d * d // 25)

    def one(c):
        return _fixeds_chain(np.ascontiguousarray(lam[c]), np.ascontiguousarray(U[c]), np.ascontiguousarray(utz[c]),
                             np.ascontiguousarray(sz2_b[c]), prec, shift, a, b, theta[c], sigma2[c], log_step[c],
                             int(warmup), int(draws), rngs[c], out_theta[c], out_s2[c], out_acc[c])

    res = map_chains(one, B, workers)
    return {"theta": out_theta, "sigma2": np.asarray(out_s2), "accept_sigma2": out_acc,
            "sigma2_step": np.exp(np.array([r[1] for r in res]))}


def sigma2_start(prior) -> float:
    return prior.b / (prior.a - 1.0) if prior.a > 1 else prior.b


@dataclass(frozen=True)
class FixedSOptions(MCMCOptions):
    """Options of engine ``mcmc-fixeds`` (linear-regression): draws, warmup, chains, seed."""

    engine: ClassVar[str] = "mcmc-fixeds"
    draw_values: ClassVar = staticmethod(theta_draw_values)


def mcmc_fixeds(model, options):
    """Engine ``mcmc-fixeds``: S_j fixed at the nearest PSD matrix (Alparslan et al. Algorithm 2). Reads the
    model's release (its parties' noisy moments, resolved by ``release.regression_data()``) and parsed prior;
    names its draws through the model."""
    release, prior = model.release, model.prior.spec
    data = release.regression_data()
    require_gaussian(data, "mcmc-fixeds")
    check_dims(data, prior)
    check_memory("mcmc-fixeds", data, options)
    rng = options.rng()
    S = nearest_psd(data.xtx)[None]
    zhat = data.xty[None]
    sz2 = data.sigma_z ** 2
    s2 = sigma2_start(prior)
    prec, shift = prior_arrays(prior)
    theta0 = np.tile(initial_theta(data, prec, shift, s2), (options.chains, 1))
    out = run_fixeds(S, zhat, sz2, prior, options.draws, options.warmup, rng, theta0,
                     np.full(options.chains, s2))
    return make_posterior(model, "mcmc-fixeds", data, {"theta": out["theta"], "sigma2": out["sigma2"]},
                          options, sample_stats={"accept_sigma2": out["accept_sigma2"]},
                          attrs={"sigma2_rw_step": out["sigma2_step"].tolist()})
