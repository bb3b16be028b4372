"""Variational posterior of the naive Bayes log-linear model from Laplace-noised two-way tables.

Karwa, Kifer & Slavković, *Private Posterior Distributions from Variational
Approximations* (paper 002), Sec. 4.1 and App. 7.  Released m^k_ij = n^k_ij + e,
e ~ Laplace(b) (count scale; ``families/naive_bayes.py`` converts proportions).

Mean-field family (Sec. 4.1):
  q(n_.) = Multinomial(N, theta_.),  q(n^k_i. | n_i) = Multinomial(n_i, theta^k_i.),
  q(beta_ijk) (Laplace = Gaussian scale mixture, Kotz et al. Prop. 2.2), q(p) unrestricted.

Lower bound (eq. 2 / eq. 7, with every constant kept so that it bounds the log
evidence of the count-scale release; the multinomial coefficients of q(n) and
p(n | p) cancel):

  L = sum_ijk [ -log(2b) - mu_ijk E_ijk / (2 b^2) - 1/(2 mu_ijk) ]                  (beta part)
    + sum_Dirichlet blocks [ log B(a) - log B(alpha) + sum_j (alpha_j + c_j - a_j) E_a log p_j
                             - sum_j c_j log theta_j ]                                 (n and p part)

  E_ijk = E_q[(m - n)^2] = N pi (1 - pi) + (N pi - m)^2 with pi = theta_i theta^k_ij (App. 7.1),
  c = expected counts (N theta_i for the class block, N theta_i theta^k_ij for feature blocks).

The beta part is E_q[log p(m, beta | n)] - E_q[log q(beta)] for q(beta) = InverseGaussian(mu,
lambda = 1): the E[log beta] terms cancel, E[beta] = mu, E[1/beta] = 1/mu + 1.

Coordinate ascent, each step an exact block maximisation or an ascent step, so L
never decreases (an MM algorithm):
  * q(beta_ijk) = InverseGaussian(lambda = 1, mu = b / sqrt(E_ijk))               eq. (3)
  * q(p^k_i.) = Dirichlet(alpha^k_ij + N theta_i theta^k_ij),  q(p) = Dirichlet(alpha_i + N theta_i)
                                                           eqs. (4)-(5) (the "+ a_i" there is a typo)
  * theta^k_i. and theta_. maximise sum_j A_j t_j^2 + B_j t_j + C t_j log t_j on the simplex
    (eq. 6, coefficients in Sec. 4.1) by the first-order interior-point method of Tseng,
    Bomze & Schachinger (2011) with the Armijo rule, eqs. (10)-(13):
    d = W r, r = grad f - (theta' grad f) e, step s = s0 nu^l, s0 < -1/min_j r_j.

Start (Sec. 4.1, "Choice of starting values"): the naive estimates -- noisy counts
truncated to [0, N] and renormalised; 0.5 is added to every count so the start is
strictly inside the simplex, as the interior-point method requires.  Stop when L
improves by less than ``tol``.

All arrays carry a leading batch axis B (datasets / noise draws), so the benchmark
fits hundreds of releases at once.  Shapes: m, mu, theta_f, a_f: (B, K, I, J) with J
the largest number of levels and ``mask`` (K, I, J) marking real levels.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

import numba
import numpy as np
from scipy.special import digamma, gammaln, xlogy

from ..errors import InputError
from ..options import EngineOptions, confidential_option, option
from ..posterior import Posterior

#: Armijo constants (eq. 12): sufficient-increase fraction sigma and backtracking factor nu
ARMIJO_SIGMA = 1e-4
ARMIJO_NU = 0.5
MAX_BACKTRACK = 60
#: fraction of the largest feasible step -1/min_j r_j tried first (eq. 13 needs a strict inequality)
STEP_FRACTION = 0.99
#: interior-point steps per block and outer iteration
INNER_STEPS = 3
#: pseudo-count keeping the naive starting point inside the simplex
START_PSEUDOCOUNT = 0.5
DEFAULT_TOL = 1e-6
DEFAULT_MAX_ITER = 5000


@dataclass
class Problem:
    """A batch of count-scale releases sharing one table shape and prior."""

    m: np.ndarray          # (B, K, I, J) noisy counts, 0 in padding
    mask: np.ndarray       # (K, I, J) real levels
    b: np.ndarray          # (B,) Laplace scale on the count scale
    N: np.ndarray          # (B,) public number of records
    alpha_c: np.ndarray    # (I,)
    alpha_f: np.ndarray    # (K, I, J), 0 in padding

    @classmethod
    def from_release(cls, release, prior) -> "Problem":
        m, mask = release.released_counts()
        return cls(m=m[None], mask=mask, b=np.array([release.noise_scale_counts()]),
                   N=np.array([float(release.n)]), alpha_c=np.asarray(prior.class_alpha, float),
                   alpha_f=prior.feature_alpha_filled())


@dataclass
class VBFit:
    theta_c: np.ndarray
    theta_f: np.ndarray
    mu: np.ndarray
    a_c: np.ndarray
    a_f: np.ndarray
    #: (iterations + 1, B) lower bound after each outer iteration (NaN once a dataset has stopped)
    trace: np.ndarray
    iterations: np.ndarray
    converged: np.ndarray
    extras: dict = field(default_factory=dict)


# -- pieces of the bound ----------------------------------------------------------------------

def expected_sq_error(theta_c, theta_f, m, N):
    """E_q[(m - n)^2] = Var(n) + (E n - m)^2 with n ~ Binomial(N, theta_i theta^k_ij) (App. 7.1)."""
    Nb = N[:, None, None, None]
    pi = theta_c[:, None, :, None] * theta_f
    return Nb * pi * (1.0 - pi) + (Nb * pi - m) ** 2


def _log_beta(a, mask):
    """log B(a) = sum_j lgamma(a_j) - lgamma(sum_j a_j) over the last axis, masked."""
    a_sum = np.sum(np.where(mask, a, 0.0), axis=-1)
    return np.sum(np.where(mask, gammaln(np.where(mask, a, 1.0)), 0.0), axis=-1) - gammaln(a_sum)


def _elog(a, mask):
    """E_{Dirichlet(a)}[log p_j] = psi(a_j) - psi(sum a) (App. 7.1), 0 in padding."""
    a_sum = np.sum(np.where(mask, a, 0.0), axis=-1, keepdims=True)
    return np.where(mask, digamma(np.where(mask, a, 1.0)) - digamma(a_sum), 0.0)


def _dirichlet_block(a, alpha, counts, theta, mask):
    """log B(a) - log B(alpha) + sum (alpha + c - a) E log p - sum c log theta, summed over the last axis."""
    elog = _elog(a, mask)
    lin = np.sum(np.where(mask, (alpha + counts - a) * elog - xlogy(counts, np.where(mask, theta, 1.0)), 0.0), axis=-1)
    return _log_beta(a, mask) - _log_beta(alpha, mask) + lin


def lower_bound(pb: Problem, theta_c, theta_f, mu, a_c, a_f) -> np.ndarray:
    """The variational lower bound L (eq. 7 with constants), one value per dataset, shape (B,)."""
    B = theta_c.shape[0]
    b2 = (pb.b ** 2)[:, None, None, None]
    E = expected_sq_error(theta_c, theta_f, pb.m, pb.N)
    mu_safe = np.where(pb.mask, mu, 1.0)
    noise = np.where(pb.mask, -np.log(2.0 * pb.b)[:, None, None, None] - mu_safe * E / (2.0 * b2)
                     - 0.5 / mu_safe, 0.0).sum(axis=(1, 2, 3))
    Nb = pb.N[:, None]
    cls_mask = np.ones_like(theta_c, dtype=bool)
    cls = _dirichlet_block(a_c, np.broadcast_to(pb.alpha_c, a_c.shape), Nb * theta_c, theta_c, cls_mask)
    feat_counts = pb.N[:, None, None, None] * theta_c[:, None, :, None] * theta_f
    feat = _dirichlet_block(a_f, np.broadcast_to(pb.alpha_f, a_f.shape), feat_counts, theta_f,
                            np.broadcast_to(pb.mask, a_f.shape)).sum(axis=(1, 2))
    return noise + cls + feat.reshape(B)


def optimal_mu(pb: Problem, theta_c, theta_f):
    """eq. (3): q(beta_ijk) = InverseGaussian(lambda = 1, mu = b / sqrt(E[(m - n)^2]))."""
    E = expected_sq_error(theta_c, theta_f, pb.m, pb.N)
    E = np.where(pb.mask, np.maximum(E, 1e-300), 1.0)
    return np.where(pb.mask, pb.b[:, None, None, None] / np.sqrt(E), 1.0)


def optimal_dirichlet(pb: Problem, theta_c, theta_f):
    """eqs. (4)-(5): a = alpha + expected counts under q(n)."""
    a_c = pb.alpha_c + pb.N[:, None] * theta_c
    a_f = pb.alpha_f + pb.N[:, None, None, None] * theta_c[:, None, :, None] * theta_f
    return a_c, np.where(pb.mask, a_f, 0.0)


# -- the interior-point step on the simplex (Tseng, Bomze & Schachinger; eqs. 10-13) -------------

def _simplex_objective(theta, A, Bc, C, mask):
    return np.sum(np.where(mask, A * theta ** 2 + Bc * theta + C * xlogy(theta, theta), 0.0), axis=-1)


def interior_point_ascent_numpy(theta, A, Bc, C, mask, steps: int = INNER_STEPS):
    """Reference (numpy, all blocks at once) version of :func:`interior_point_ascent`.

    Maximise f(t) = sum_j A_j t_j^2 + B_j t_j + C t_j log t_j over the simplex, every block
    (leading axes) at once, by ``steps`` first-order interior-point steps with the Armijo rule.
    Each accepted step increases f; a block with no acceptable step stays where it is."""
    theta = np.where(mask, theta, 0.0)
    for _ in range(steps):
        grad = np.where(mask, 2.0 * A * theta + Bc + C * (np.log(np.where(mask, theta, 1.0)) + 1.0), 0.0)
        # theta' grad e of eq. (11), with theta normalised: without it a rounding error in sum(theta)
        # is multiplied by (1 - s theta'grad) at every step and grows geometrically
        gbar = np.sum(theta * grad, axis=-1, keepdims=True) / np.sum(theta, axis=-1, keepdims=True)
        r = np.where(mask, grad - gbar, 0.0)                       # eq. (11)
        d = theta * r                                              # d = W r
        # grad' d = sum theta r^2 (since sum theta r = 0); the second form has no cancellation
        slope = np.sum(theta * r * r, axis=-1)
        rmin = np.min(np.where(mask, r, np.inf), axis=-1)
        scale = np.maximum(np.max(np.abs(np.where(mask, theta * grad, 0.0)), axis=-1), 1e-300)
        active = (slope > 1e-15 * scale) & (rmin < 0)
        s_max = STEP_FRACTION / np.where(active, -rmin, 1.0)                 # eq. (13)
        # first trial step: the Newton step of the concave line function phi(s) = f(theta + s d)
        # (phi'(0) = slope, phi''(0) = sum 2 A d^2 + C d^2 / theta < 0), capped by eq. (13); any
        # s0 in (0, -1/min r) is admissible and this one is usually accepted without backtracking
        curv = np.sum(np.where(mask, (2.0 * A + C / np.where(mask & (theta > 0), theta, 1.0)) * d * d, 0.0), axis=-1)
        s_newton = np.where(curv < 0, slope / np.where(curv < 0, -curv, 1.0), np.inf)
        s = np.where(active, np.minimum(s_max, s_newton), 0.0)
        f0 = _simplex_objective(theta, A, Bc, C, mask)
        # a block whose predicted gain is below the rounding of f has converged: no backtracking
        active &= 0.5 * s * slope > 1e-13 * (1.0 + np.abs(f0))
        s = np.where(active, s, 0.0)
        new = theta.copy()
        pending = active.copy()
        for _ in range(MAX_BACKTRACK):
            if not pending.any():
                break
            cand = theta + s[..., None] * d
            cand = np.where(mask, np.maximum(cand, 0.0), 0.0)
            cand = cand / np.sum(cand, axis=-1, keepdims=True)   # stay on the simplex to rounding
            f1 = _simplex_objective(cand, A, Bc, C, mask)
            ok = pending & (f1 >= f0 + ARMIJO_SIGMA * s * slope) & (f1 >= f0)   # eq. (12)
            new = np.where(ok[..., None], cand, new)
            pending &= ~ok
            s = np.where(pending, s * ARMIJO_NU, s)
        if np.array_equal(new, theta):
            break
        theta = new
    return theta


@numba.njit(cache=True, nogil=True)
def _simplex_objective_1(t, A, Bc, C, mask):
    f = 0.0
    for j in range(t.shape[0]):
        if mask[j]:
            f += A[j] * t[j] ** 2 + Bc[j] * t[j] + (C[j] * (t[j] * math.log(t[j])) if t[j] > 0.0 else 0.0)
    return f


@numba.njit(cache=True, nogil=True)
def _interior_point_blocks(theta, A, Bc, C, mask, steps):
    """:func:`interior_point_ascent_numpy` one block (row) at a time, compiled for speed.

    The same steps: eq. (11) direction with theta normalised, first trial step the Newton step
    of the line function capped by eq. (13), Armijo backtracking (eq. 12).  A block stops when
    a step leaves it unchanged -- it would stay unchanged at every later step, which is what
    the batched version's per-block masks do, so the result is the same.
    """
    nb, J = theta.shape
    out = np.empty((nb, J))
    grad = np.empty(J)
    r = np.empty(J)
    d = np.empty(J)
    cand = np.empty(J)
    for b in range(nb):
        t = out[b]
        for j in range(J):
            t[j] = theta[b, j] if mask[b, j] else 0.0
        for _ in range(steps):
            st = 0.0
            tg = 0.0
            for j in range(J):
                if mask[b, j]:
                    lt = math.log(t[j]) if t[j] > 0.0 else -np.inf
                    grad[j] = 2.0 * A[b, j] * t[j] + Bc[b, j] + C[b, j] * (lt + 1.0)
                else:
                    grad[j] = 0.0
                st += t[j]
                tg += t[j] * grad[j]
            gbar = tg / st
            slope = 0.0
            rmin = np.inf
            scale = 0.0
            curv = 0.0
            for j in range(J):
                if mask[b, j]:
                    r[j] = grad[j] - gbar
                    rmin = min(rmin, r[j])
                    scale = max(scale, abs(t[j] * grad[j]))
                else:
                    r[j] = 0.0
                d[j] = t[j] * r[j]
                slope += t[j] * r[j] * r[j]
                if mask[b, j]:
                    curv += (2.0 * A[b, j] + C[b, j] / (t[j] if t[j] > 0.0 else 1.0)) * d[j] * d[j]
            scale = max(scale, 1e-300)
            if not (slope > 1e-15 * scale and rmin < 0.0):
                break
            s = STEP_FRACTION / -rmin
            if curv < 0.0:
                s = min(s, slope / -curv)
            f0 = _simplex_objective_1(t, A[b], Bc[b], C[b], mask[b])
            if not (0.5 * s * slope > 1e-13 * (1.0 + abs(f0))):
                break
            moved = False
            for _bt in range(MAX_BACKTRACK):
                tot = 0.0
                for j in range(J):
                    cand[j] = max(t[j] + s * d[j], 0.0) if mask[b, j] else 0.0
                    tot += cand[j]
                for j in range(J):
                    cand[j] = cand[j] / tot
                f1 = _simplex_objective_1(cand, A[b], Bc[b], C[b], mask[b])
                if f1 >= f0 + ARMIJO_SIGMA * s * slope and f1 >= f0:
                    for j in range(J):
                        if cand[j] != t[j]:
                            moved = True
                        t[j] = cand[j]
                    break
                s = s * ARMIJO_NU
            if not moved:
                break
    return out


def interior_point_ascent(theta, A, Bc, C, mask, steps: int = INNER_STEPS):
    """Maximise f(t) = sum_j A_j t_j^2 + B_j t_j + C t_j log t_j over the simplex, every block
    (leading axes), by ``steps`` first-order interior-point steps with the Armijo rule
    (compiled kernel :func:`_interior_point_blocks`; numpy reference
    :func:`interior_point_ascent_numpy`)."""
    shape = np.broadcast_shapes(np.shape(theta), np.shape(A), np.shape(Bc), np.shape(C), np.shape(mask))
    J = shape[-1]

    def rows(x, dtype=float):
        return np.ascontiguousarray(np.broadcast_to(np.asarray(x, dtype), shape).reshape(-1, J))

    out = _interior_point_blocks(rows(theta), rows(A), rows(Bc), rows(C), rows(mask, np.bool_), int(steps))
    return out.reshape(shape)


def _update_theta_f(pb: Problem, theta_c, theta_f, mu, a_f):
    """Feature blocks theta^k_i. (eq. 6): A_j, B_j, C_j of Sec. 4.1."""
    Nb = pb.N[:, None, None, None]
    w = np.where(pb.mask, mu, 0.0) / (pb.b ** 2)[:, None, None, None]
    tc = theta_c[:, None, :, None]
    A = -0.5 * w * Nb * (Nb - 1.0) * tc ** 2
    Bc = -0.5 * w * Nb * tc + w * Nb * tc * pb.m + Nb * tc * _elog(a_f, np.broadcast_to(pb.mask, a_f.shape))
    C = -Nb * tc
    return interior_point_ascent(theta_f, A, Bc, C, np.broadcast_to(pb.mask, theta_f.shape))


def _update_theta_c(pb: Problem, theta_c, theta_f, mu, a_c, a_f):
    """Class block theta_. : D_i, E_i, F_i of Sec. 4.1."""
    Nb = pb.N[:, None, None, None]
    w = np.where(pb.mask, mu, 0.0) / (pb.b ** 2)[:, None, None, None]
    mask = np.broadcast_to(pb.mask, theta_f.shape)
    D = -np.sum(0.5 * w * Nb * (Nb - 1.0) * theta_f ** 2, axis=(1, 3))
    inner = Nb * theta_f * (-0.5 * w + w * pb.m + _elog(a_f, mask)) - Nb * xlogy(theta_f, np.where(mask, theta_f, 1.0))
    E = np.sum(np.where(mask, inner, 0.0), axis=(1, 3)) + pb.N[:, None] * _elog(a_c, np.ones_like(a_c, dtype=bool))
    F = -pb.N[:, None] * np.ones_like(theta_c)
    return interior_point_ascent(theta_c, D, E, F, np.ones_like(theta_c, dtype=bool))


# -- starting point and naive estimates ----------------------------------------------------------

def clipped_tables(pb: Problem):
    """Noisy counts truncated to [0, N] and rescaled so each table sums to N (naive estimates)."""
    Nb = pb.N[:, None, None, None]
    c = np.where(pb.mask, np.clip(pb.m, 0.0, Nb), 0.0)
    total = c.sum(axis=(2, 3), keepdims=True)
    cells = pb.mask.sum(axis=(1, 2))[None, :, None, None]
    uniform = np.where(pb.mask, Nb / cells, 0.0)
    return np.where(total > 0, c * Nb / np.where(total > 0, total, 1.0), uniform)


def naive_counts(pb: Problem):
    """(class counts (B, I), feature counts (B, K, I, J)): the naive plug-in counts; the class
    counts are the row sums averaged over the K tables (one consistent estimate of n_.)."""
    c = clipped_tables(pb)
    return c.sum(axis=3).mean(axis=1), c


def starting_point(pb: Problem):
    class_counts, c = naive_counts(pb)
    theta_f = np.where(pb.mask, c + START_PSEUDOCOUNT, 0.0)
    theta_f = theta_f / theta_f.sum(axis=-1, keepdims=True)
    theta_c = class_counts + START_PSEUDOCOUNT
    theta_c = theta_c / theta_c.sum(axis=-1, keepdims=True)
    return theta_c, theta_f


# -- the algorithm --------------------------------------------------------------------------------

def fit_vb(pb: Problem, tol: float = DEFAULT_TOL, max_iter: int = DEFAULT_MAX_ITER) -> VBFit:
    """Coordinate ascent on the lower bound for every release of the batch until it improves by < tol."""
    theta_c, theta_f = starting_point(pb)
    mu = optimal_mu(pb, theta_c, theta_f)
    a_c, a_f = optimal_dirichlet(pb, theta_c, theta_f)
    bound = lower_bound(pb, theta_c, theta_f, mu, a_c, a_f)
    B = bound.shape[0]
    trace = [bound.copy()]
    active = np.ones(B, dtype=bool)
    iterations = np.zeros(B, dtype=int)
    for _ in range(max_iter):
        new_f = _update_theta_f(pb, theta_c, theta_f, mu, a_f)
        new_c = _update_theta_c(pb, theta_c, new_f, mu, a_c, a_f)
        new_mu = optimal_mu(pb, new_c, new_f)
        new_a_c, new_a_f = optimal_dirichlet(pb, new_c, new_f)
        new_bound = lower_bound(pb, new_c, new_f, new_mu, new_a_c, new_a_f)
        sel4 = active[:, None, None, None]
        sel2 = active[:, None]
        theta_f = np.where(sel4, new_f, theta_f)
        theta_c = np.where(sel2, new_c, theta_c)
        mu = np.where(sel4, new_mu, mu)
        a_c = np.where(sel2, new_a_c, a_c)
        a_f = np.where(sel4, new_a_f, a_f)
        improvement = new_bound - bound
        bound = np.where(active, new_bound, bound)
        iterations += active
        trace.append(np.where(active, new_bound, np.nan))
        active &= ~(improvement < tol)
        if not active.any():
            break
    return VBFit(theta_c=theta_c, theta_f=theta_f, mu=mu, a_c=a_c, a_f=a_f, trace=np.array(trace),
                 iterations=iterations, converged=~active)


# -- posterior output -----------------------------------------------------------------------------

def dirichlet_draws(a_c, a_f, mask, chains: int, draws: int, rng):
    """Independent draws from Dirichlet(a_c) and every Dirichlet(a_f[k, i, :J_k]) (gamma normalisation);
    feature_prob is NaN at padded levels."""
    g = rng.standard_gamma(np.broadcast_to(a_c, (chains, draws, a_c.shape[-1])))
    class_prob = g / g.sum(axis=-1, keepdims=True)
    shape = (chains, draws) + a_f.shape
    gf = rng.standard_gamma(np.broadcast_to(np.where(mask, a_f, 1.0), shape)) * mask
    feature_prob = gf / gf.sum(axis=-1, keepdims=True)
    feature_prob = np.where(mask, feature_prob, np.nan)
    return class_prob, feature_prob


def make_posterior(model, method: str, a_c, a_f, mask, options, sample_stats=None, attrs=None,
                   extras=None) -> Posterior:
    """Posterior of independent Dirichlet factors q(p) = Dir(a_c) x prod Dir(a_f[k, i])."""
    class_prob, feature_prob = dirichlet_draws(a_c, a_f, mask, options.chains, options.draws, options.rng())
    return posterior_from_draws(model, method, class_prob, feature_prob, sample_stats, attrs, extras)


def posterior_from_draws(model, method, class_prob, feature_prob, sample_stats=None, attrs=None,
                         extras=None) -> Posterior:
    """``class_prob`` (chain, draw, I), ``feature_prob`` (chain, draw, K, I, Jmax) NaN-padded, named through the
    release's observation model ``model``."""
    release = model.release
    base_attrs = {"scale": release.scale, "noise_scale_counts": release.noise_scale_counts(),
                  "feature_prob_padding": "NaN at levels j >= levels[k]"}
    base_attrs.update(attrs or {})
    # every caller's draws are independent: Dirichlet factors (vb, naive, non-private) or exact mixtures
    post = model.pack({"class_prob": class_prob, "feature_prob": feature_prob}, method,
                      sample_stats=sample_stats or {},
                      sample_stats_dims={"lower_bound": ["vb_iteration"]} if sample_stats else None,
                      attrs=base_attrs, iid=True)
    post.extras.update(extras or {})
    return post


@dataclass(frozen=True)
class NaiveOptions(EngineOptions):
    """Options of engine ``naive`` (naive-bayes): draws, chains, seed (independent Dirichlet draws)."""

    engine: ClassVar[str] = "naive"


@dataclass(frozen=True)
class VBOptions(EngineOptions):
    """Options of engine ``vb`` (naive-bayes): draws, chains, seed (independent draws from the fitted
    factors); ``tol`` and ``max_iter``, the coordinate ascent's stopping rule."""

    engine: ClassVar[str] = "vb"

    tol: float = option(DEFAULT_TOL, "float", "stop when the lower bound improves by less", low=0.0)
    max_iter: int = option(DEFAULT_MAX_ITER, "int", "most coordinate-ascent iterations", low=1)


@dataclass(frozen=True)
class NonPrivateOptions(EngineOptions):
    """Options of engine ``non-private`` (naive-bayes, simulations only): draws, chains, seed;
    ``confidential``: ``{"tables": ...}``, the simulated release's confidential tables."""

    engine: ClassVar[str] = "non-private"

    confidential: object = confidential_option()


#: bytes per drawn value (a cell of the padded tables, or a class probability) while the Dirichlet draws are made:
#: the gamma draws, their normalisation and the NaN-padded copy (measured 20-23)
DRAW_VALUE_BYTES = 24.0
#: float64 arrays of the padded tables' shape alive at once while ``vb`` fits (the problem's counts, mask and
#: prior, theta, mu, the Dirichlet parameters and the update's temporaries; measured 10-11), and while the plug-in
#: engines (naive, non-private) form their counts (measured 5)
FIT_ARRAYS = {"vb": 12.0, "naive": 6.0, "non-private": 6.0}


def check_memory(release, options, method: str, per_draw_extra: float = 0.0, fixed_extra: float = 0.0) -> None:
    """Refuse, before the tables are padded, a fit or Dirichlet draws that would not fit in memory: the padded
    tables' values (``table_draw_values``) times the fit's arrays, and draws x chains x those values."""
    from ..families.naive_bayes import table_draw_values
    from ..memory import check_draws_fit

    values = table_draw_values(release)
    check_draws_fit("draws", f"{method}: {options.draws} draws x {options.chains} chains of {values:,} table values "
                    "(padded to the most levels)", draws=options.draws, chains=options.chains,
                    per_draw=DRAW_VALUE_BYTES * values + per_draw_extra,
                    fixed=8.0 * FIT_ARRAYS.get(method, 0.0) * values + fixed_extra,
                    other="fewer --chains; tables of fewer levels (the tables are padded to the most levels)")


def vb_engine(model, options) -> Posterior:
    """Method ``vb`` (auto): the variational posterior of Karwa et al. Sec. 4.  Reads the model's release (the noisy
    tables, padded) and parsed prior; names its draws through the model."""
    release, prior = model.release, model.prior.spec
    check_memory(release, options, "vb")
    quiet = options.quiet
    tol, max_iter = options.tol, options.max_iter
    release.require_laplace("vb")
    pb = Problem.from_release(release, prior)
    fit = fit_vb(pb, tol=tol, max_iter=max_iter)
    trace = fit.trace[:, 0]
    trace = trace[np.isfinite(trace)]
    attrs = {"vb_iterations": int(fit.iterations[0]), "vb_converged": bool(fit.converged[0]),
             "vb_lower_bound": float(trace[-1]), "vb_tol": tol, "vb_max_iter": max_iter}
    if not fit.converged[0] and not quiet:
        import sys

        print(f"warning: vb did not converge in {max_iter} iterations (bound still improving by >= {tol:g})",
              file=sys.stderr)
    return make_posterior(model, "vb", fit.a_c[0], fit.a_f[0], pb.mask, options,
                          sample_stats={"lower_bound": trace[None, None, :]}, attrs=attrs,
                          extras={"fit": fit, "theta_c": fit.theta_c[0], "theta_f": fit.theta_f[0]})


def naive_engine(model, options) -> Posterior:
    """Method ``naive``: noisy counts clipped to [0, n], rescaled to total n, plugged into the
    conjugate Dirichlet posterior as if they were the confidential counts (reads what ``vb`` reads)."""
    release, prior = model.release, model.prior.spec
    check_memory(release, options, "naive")
    pb = Problem.from_release(release, prior)
    class_counts, feat = naive_counts(pb)
    a_c = pb.alpha_c + class_counts[0]
    a_f = np.where(pb.mask, pb.alpha_f + feat[0], 0.0)
    return make_posterior(model, "naive", a_c, a_f, pb.mask, options)


def confidential_tables(release, confidential) -> np.ndarray:
    """Validate confidential counts (K, I, J_k) -> padded array (K, I, Jmax)."""
    if isinstance(confidential, dict):
        confidential = confidential.get("tables")
    if confidential is None:
        raise InputError("confidential", "method 'non-private' needs the confidential tables (simulations only)")
    _, mask = release.released_counts()
    out = np.zeros(mask.shape)
    try:
        for k, jk in enumerate(release.levels):
            t = np.asarray(confidential[k], dtype=float)
            if t.shape[0] != release.classes:
                raise ValueError
            out[k, :, :jk] = t[:, :jk]
            if t.shape[1] > jk and np.any(t[:, jk:] != 0):
                raise ValueError
    except (ValueError, IndexError, TypeError):
        raise InputError("confidential", f"must be {release.K} tables of shape classes x levels[k]") from None
    if np.any(out < 0) or np.any(out != np.round(out)):
        raise InputError("confidential", "counts must be non-negative integers")
    if np.any(np.abs(out.sum(axis=(1, 2)) - release.n) > 0):
        raise InputError("confidential", f"every table must sum to n = {release.n}")
    return out


def nonprivate_engine(model, options) -> Posterior:
    """Method ``non-private`` (simulations only): Dirichlet(alpha + n) from the confidential counts (reads the model's
    release for the tables' shape, and its parsed prior)."""
    release, prior = model.release, model.prior.spec
    check_memory(release, options, "non-private")
    tables = confidential_tables(release, options.confidential)
    _, mask = release.released_counts()
    a_c = np.asarray(prior.class_alpha, float) + tables[0].sum(axis=1)
    a_f = np.where(mask, prior.feature_alpha_filled() + tables, 0.0)
    return make_posterior(model, "non-private", a_c, a_f, mask, options)
