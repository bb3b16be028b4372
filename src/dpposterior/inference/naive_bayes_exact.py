"""Exact posterior of the naive Bayes model from Laplace-noised tables, by enumeration (I = K = J = 2).

Karwa, Kifer & Slavković (paper 002) Sec. 4 write the likelihood of the released
tables as a sum over every confidential table consistent with n,

    p(m | alpha) = sum_D p(m | D) p(D | alpha),

with p(D | alpha) the Dirichlet-multinomial marginal of the model (Sec. 4 / Xiong et al.
App. E.3) and p(m | D) the product of Laplace densities.  Given the class counts
(n_1, n_2) the K tables are independent, and so are their rows, so the sum factorises:

    p(m) = sum_{n_1=0..n} DirMult(n_1, n_2 | n, alpha_.) prod_{k,i} Z_ik(n_i),
    Z_ik(n_i) = sum_{x=0..n_i} DirMult(x, n_i - x | n_i, alpha^k_i.) Lap(m^k_i1 - x) Lap(m^k_i2 - n_i + x).

This is the full sum over all (n+1)^5 / 30-odd tables (about 3e8 for n = 100) evaluated
by distributivity in O(K n^2) work.  Given the tables the posterior is Dirichlet
(conjugacy), so the posterior is a finite mixture of Dirichlets: its moments are
exact weighted sums and draws are exact (tables from the enumerated posterior, then
Dirichlet/Beta draws).

Restricted to I = K = J = 2 and n <= 100; larger tables are refused (the variational
engine ``vb`` handles them).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
from scipy.special import gammaln, logsumexp

from ..errors import RefusedError
from ..options import EngineOptions
from .naive_bayes_vb import check_memory, posterior_from_draws

MAX_N = 100


def _log_dirmult2(x, total, a0, a1):
    """log Dirichlet-multinomial pmf of (x, total - x) given total and alpha = (a0, a1)."""
    return (gammaln(total + 1) - gammaln(x + 1) - gammaln(total - x + 1)
            + gammaln(a0 + a1) - gammaln(total + a0 + a1)
            + gammaln(x + a0) - gammaln(a0) + gammaln(total - x + a1) - gammaln(a1))


def _log_laplace(z, b):
    return -np.log(2.0 * b) - np.abs(z) / b


@dataclass
class ExactPosterior:
    """Everything the enumeration yields (2 classes, K binary features)."""

    log_evidence: float               # log p(m) on the count scale
    class_weights: np.ndarray         # (n+1,) posterior of n_1 (index 0 = class 0 count)
    row_log_z: np.ndarray             # (K, 2, n+1) log Z_ik(n_i)
    row_cond: np.ndarray              # (K, 2, n+1, n+1) posterior of x = n^k_i1 given n_i (rows sum to 1)
    class_mean: np.ndarray            # (2,)
    feature_mean: np.ndarray          # (K, 2, 2)
    class_sd: np.ndarray
    feature_sd: np.ndarray


def check_size(classes: int, levels, n: int) -> None:
    levels = list(levels)
    if classes != 2 or len(levels) != 2 or any(j != 2 for j in levels) or n > MAX_N:
        raise RefusedError(
            "method", f"exact-enumeration is implemented for I = K = J = 2 and n <= {MAX_N} "
            f"(got I = {classes}, K = {len(levels)}, J = {levels}, n = {n}): the number of tables grows "
            "combinatorially; use method 'vb'")


def enumerate_posterior(m, b: float, n: int, alpha_c, alpha_f) -> ExactPosterior:
    """Exact posterior for released counts ``m`` (K, 2, 2) with Laplace scale ``b`` (count scale).

    ``alpha_c`` (2,), ``alpha_f`` (K, 2, 2).  No size check here (tests use it for K != 2)."""
    m = np.asarray(m, float)
    alpha_c = np.asarray(alpha_c, float)
    alpha_f = np.asarray(alpha_f, float)
    K = m.shape[0]
    tot = np.arange(n + 1)[:, None].astype(float)     # n_i
    x = np.arange(n + 1)[None, :].astype(float)       # x = n^k_i1 (first level)
    valid = x <= tot
    xs = np.where(valid, x, 0.0)
    log_t = np.full((K, 2, n + 1, n + 1), -np.inf)
    mean_given = np.zeros((K, 2, n + 1))               # E[p^k_i1 | n_i, m]
    second_given = np.zeros((K, 2, n + 1))             # E[(p^k_i1)^2 | n_i, m]
    for k in range(K):
        for i in range(2):
            a0, a1 = alpha_f[k, i]
            lt = (_log_dirmult2(xs, tot, a0, a1) + _log_laplace(m[k, i, 0] - xs, b)
                  + _log_laplace(m[k, i, 1] - (tot - xs), b))
            log_t[k, i] = np.where(valid, lt, -np.inf)
    row_log_z = logsumexp(log_t, axis=-1)             # (K, 2, n+1)
    row_cond = np.exp(log_t - row_log_z[..., None])
    row_cond /= np.where(valid.any(-1), row_cond.sum(-1), 1.0)[..., None]
    for k in range(K):
        for i in range(2):
            a0, a1 = alpha_f[k, i]
            A = a0 + a1 + tot
            p_mean = (a0 + xs) / A
            p_second = (a0 + xs) * (a0 + xs + 1.0) / (A * (A + 1.0))
            mean_given[k, i] = np.sum(row_cond[k, i] * p_mean, axis=-1)
            second_given[k, i] = np.sum(row_cond[k, i] * p_second, axis=-1)
    n1 = np.arange(n + 1).astype(float)               # count of class 0
    n2 = n - n1
    idx1 = np.arange(n + 1)
    idx2 = n - idx1
    log_w = _log_dirmult2(n1, float(n), alpha_c[0], alpha_c[1])
    for k in range(K):
        log_w = log_w + row_log_z[k, 0, idx1] + row_log_z[k, 1, idx2]
    log_evidence = float(logsumexp(log_w))
    w = np.exp(log_w - log_w.max())
    w /= w.sum()          # explicit: log_w - log_evidence loses digits when |log_w| ~ 1e10 (tiny b)
    A = alpha_c.sum() + n
    c_mean0 = np.sum(w * (alpha_c[0] + n1) / A)
    c_second0 = np.sum(w * (alpha_c[0] + n1) * (alpha_c[0] + n1 + 1) / (A * (A + 1)))
    class_mean = np.array([c_mean0, 1.0 - c_mean0])
    class_sd = np.full(2, np.sqrt(max(c_second0 - c_mean0 ** 2, 0.0)))
    feature_mean = np.zeros((K, 2, 2))
    feature_sd = np.zeros((K, 2, 2))
    for k in range(K):
        for i, idx in ((0, idx1), (1, idx2)):
            mu = np.sum(w * mean_given[k, i, idx])
            sec = np.sum(w * second_given[k, i, idx])
            feature_mean[k, i] = (mu, 1.0 - mu)
            feature_sd[k, i] = np.sqrt(max(sec - mu ** 2, 0.0))
    return ExactPosterior(log_evidence=log_evidence, class_weights=w, row_log_z=row_log_z, row_cond=row_cond,
                          class_mean=class_mean, feature_mean=feature_mean, class_sd=class_sd, feature_sd=feature_sd)


def exact_for_release(release, prior) -> ExactPosterior:
    release.require_laplace("exact-enumeration")
    check_size(release.classes, release.levels, release.n)
    m, _ = release.released_counts()
    return enumerate_posterior(m, release.noise_scale_counts(), release.n, prior.class_alpha,
                               prior.feature_alpha_filled())


def sample_exact(ex: ExactPosterior, n: int, alpha_c, alpha_f, size: int, rng):
    """Exact posterior draws: n_1 ~ p(n_1 | m), x^k_i ~ p(x | n_i, m), then Beta draws (conjugacy)."""
    alpha_c = np.asarray(alpha_c, float)
    alpha_f = np.asarray(alpha_f, float)
    K = ex.row_cond.shape[0]
    n1 = rng.choice(n + 1, size=size, p=ex.class_weights)
    totals = np.stack([n1, n - n1], axis=1)           # (size, 2)
    p0 = rng.beta(alpha_c[0] + n1, alpha_c[1] + n - n1)
    class_prob = np.stack([p0, 1.0 - p0], axis=-1)
    feature_prob = np.zeros((size, K, 2, 2))
    for k in range(K):
        for i in range(2):
            cdf = np.cumsum(ex.row_cond[k, i], axis=-1)[totals[:, i]]     # (size, n+1)
            u = rng.random(size) * cdf[:, -1]
            x = np.minimum(np.sum(cdf < u[:, None], axis=-1), totals[:, i])
            q = rng.beta(alpha_f[k, i, 0] + x, alpha_f[k, i, 1] + totals[:, i] - x)
            feature_prob[:, k, i, 0] = q
            feature_prob[:, k, i, 1] = 1.0 - q
    return class_prob, feature_prob


@dataclass(frozen=True)
class ExactEnumerationOptions(EngineOptions):
    """Options of engine ``exact-enumeration`` (naive-bayes, 2x2 tables): draws, chains, seed (exact draws)."""

    engine: ClassVar[str] = "exact-enumeration"


def exact_engine(model, options):
    """Method ``exact-enumeration``: exact posterior (mixture of Dirichlets) for I = K = J = 2, n <= 100.  Reads the
    model's release (its two noisy 2 x 2 tables) and parsed prior; names its draws through the model."""
    release, prior = model.release, model.prior.spec
    check_size(release.classes, release.levels, release.n)
    # each feature's draws pick their table from the cumulative posterior of x given n_i: a (draws x chains, n + 1)
    # array and its comparison with the uniforms, with the previous feature's array still alive (17 (n + 1) bytes)
    check_memory(release, options, "exact-enumeration", per_draw_extra=17.0 * (release.n + 1))
    ex = exact_for_release(release, prior)
    rng = options.rng()
    size = options.chains * options.draws
    class_prob, feature_prob = sample_exact(ex, release.n, prior.class_alpha, prior.feature_alpha_filled(), size, rng)
    return posterior_from_draws(
        model, "exact-enumeration", class_prob.reshape(options.chains, options.draws, 2),
        feature_prob.reshape(options.chains, options.draws, 2, 2, 2),
        attrs={"log_evidence": ex.log_evidence},
        extras={"exact": ex, "class_mean": ex.class_mean, "feature_mean": ex.feature_mean})
