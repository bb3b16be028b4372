r"""Exact Gibbs sampler for the bounded univariate Gaussian (Kazan & Reiter, App. B-D).

Everything runs on the [0, 1] scale (Theorem 1): with data bounds [a, b], w = b - a,
the released statistics become ystar = (Ybar* - a)/w and s2star = S2*/w^2, the
Laplace scales b1 = 1/(eps1 n) and b2 = 1/(eps2 n), and the draws are mapped back
as mu -> a + w mu, sigma^2 -> w^2 sigma^2.

Model (App. C, eqs. 28-33), latent Ybar, S^2 and omega^2:

    Ybar | mu, s2 ~ N(mu, s2/n),   S^2 | s2 ~ Gam((n-1)/2, (n-1)/(2 s2)),
    Ybar* | Ybar, omega^2 ~ N(Ybar, omega^2),   omega^2 ~ Exp(1/(2 b1^2)),
    S2* | S^2 ~ Lap(S^2, b2),

prior NIG: s2 ~ IG(nu0/2, nu0 sigma0^2/2), mu | s2 ~ N(mu0, s2/kappa0), or flat
p(mu, s2) ∝ 1 (n > 3, Theorem 5).  ``constrained=True`` multiplies by the indicators
of Theorem 2 (s2 <= mu(1 - mu), on the prior) and Theorem 3
(S^2 <= n/(n-1) Ybar(1 - Ybar), on the likelihood), as App. D does.

Full conditionals (App. D, eqs. 48-67), with the sigma^2 one corrected
-----------------------------------------------------------------------
* mu | .      ~ N((n Ybar + kappa0 mu0)/(n + kappa0), s2/(n + kappa0))     (eq. 48; flat: kappa0 = 0),
  constrained: truncated to [1/2 - sqrt(1/4 - s2), 1/2 + sqrt(1/4 - s2)] (eq. 53).
* sigma^2 | . -- derivation.  Collect every factor of the joint density that holds s2:

      prior      (s2)^{-nu0/2-1} exp(-nu0 sigma0^2/(2 s2))           [IG(nu0/2, nu0 sigma0^2/2)]
                 (s2)^{-1/2}    exp(-kappa0 (mu - mu0)^2/(2 s2))       [N(mu0, s2/kappa0) -- depends on s2!]
      Ybar       (s2)^{-1/2}    exp(-n (Ybar - mu)^2/(2 s2))
      S^2        (s2)^{-(n-1)/2} exp(-(n-1) S^2/(2 s2))                [Gam((n-1)/2, (n-1)/(2 s2))]

  Their product is (s2)^{-(n + nu0 + 1)/2 - 1} exp(-B/s2), i.e.

      s2 | . ~ IG((n + nu0 + 1)/2, (nu0 sigma0^2 + (n-1) S^2 + n (Ybar - mu)^2 + kappa0 (mu - mu0)^2)/2).

  The paper's eqs. (38), (49), (54) drop the second prior line (the "+1" in the shape
  and the kappa0 term): that is the semi-conjugate prior mu ~ N(mu0, .) independent of
  s2, not the stated prior (2), so its conditionals belong to no single joint.  Under
  the flat prior the product is (s2)^{-n/2} exp(.) -> IG((n-2)/2, ((n-1)S^2 + n(Ybar-mu)^2)/2),
  the paper's eq. (59), which is right.  The draw is truncated to s2 < (n-1)/(2 n eps2)
  (eq. 49; needed for the TGM form of S^2 below) and, constrained, to s2 <= mu(1-mu) (eq. 54).
* Ybar | .    ~ N((ystar/omega^2 + n mu/s2)/(1/omega^2 + n/s2), 1/(1/omega^2 + n/s2))  (eq. 50),
  constrained: truncated to [1/2 -+ sqrt(1/4 - (n-1)/n S^2)] (eq. 55).
* 1/omega^2 | . ~ InvGauss(1/(b1 |ystar - Ybar|), 1/b1^2)   (eq. 51, Bayesian-LASSO form).
* S^2 | .     ~ TGM((n-1)/2, (n-1)/(2 s2), 1/b2, s2star)   (eq. 52, App. B), constrained:
  truncated to (0, n/(n-1) Ybar(1 - Ybar)] (eq. 57).  The TGM needs (n-1)/(2 s2) > 1/b2,
  i.e. s2 < (n-1)/(2 n eps2) (eq. 47): the sampler enforces it on sigma^2 (reject-and-redraw
  in the paper; here a truncated draw), and refuses releases with eps2 >= 2(n-1)/n, where the
  cut would remove feasible sigma^2 <= 1/4 (Corollary 1) and no constraint saves the form.

Joint update (better mixing)
----------------------------
The Gibbs sweep mixes slowly: S^2 pins sigma^2 (and Ybar pins mu) while the released
statistics are far noisier than the sampling variation.  Each iteration therefore adds
one Metropolis-Hastings move of (mu, log s2) with the latents integrated out:

* Ybar is proposed from its exact conditional under the *unconstrained* model,
  r(Ybar | mu, s2) ∝ N(Ybar; mu, s2/n) exp(-|ystar - Ybar|/b1), a two-piece mixture of
  truncated normals whose normaliser is the normal-Laplace convolution L1(mu, s2);
* S^2 is integrated out in closed form: G(s2, c) = ∫_0^c Gam(x; (n-1)/2, (n-1)/(2 s2))
  Lap(s2star; x, b2) dx is a sum of two incomplete gamma functions (the TGM normaliser,
  eq. 26), with c = n/(n-1) Ybar(1-Ybar) constrained and c = inf otherwise.

The acceptance ratio is prior * L1 * G * s2 (Jacobian) at the proposal over the same at
the current state (r cancels against the target's Ybar factor), so the move leaves the
joint posterior invariant; unconstrained it is a Metropolis step on the exact marginal
p(mu, s2 | ystar, s2star).  S^2 and omega^2 are redrawn from their full conditionals at the start of the next sweep.
The proposal of (mu, log s2) is, per move and chain, a Gaussian random walk or (with
probability 1/2, once the first warm-up window is over) a multivariate-t independence
proposal centred on the warm-up draws -- a mixture of two valid MH kernels.  Both are
fitted during warm-up only, pooled over the chains of each dataset (chains of one dataset
share a target), so the kept draws come from a fixed kernel.  ``joint_update=False`` gives the paper's plain Gibbs sampler.

Chains may belong to different datasets (the problem's arrays have one entry per chain), which
is how simulation studies run thousands of posteriors in one call of :func:`run_chains`.  The
iterations run in compiled kernels over named per-chain records (``CHAIN_STATE`` and the others).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np
from scipy import special

from ..errors import RefusedError
from ..options import MCMCOptions, constrained_option, option
from ..posterior import Posterior
import math

from .mcmc_common import chain_workers, map_chains, warmup_windows
from .truncated import (_jit, inverse_gaussian_recip, log_diff_exp, log_gammainc, log_gammaincc, nb_inverse_gaussian_recip,
                        nb_log_diff_exp, nb_log_gammainc, nb_log_gammaincc, nb_log_ndtr, nb_logaddexp, nb_truncgamma,
                        nb_truncnorm, truncnorm_rvs)

_EPS_S2 = 1e-12  # smallest sigma^2 / S^2 the sampler keeps (on [0, 1]): avoids division by zero


# ---------------------------------------------------------------------------------------
# problem and state
# ---------------------------------------------------------------------------------------
#: the per-dataset numbers of a :class:`Problem`; also the fields of the compiled kernel's parameter record
PROBLEM_ARRAYS = ("n", "ystar", "s2star", "b1", "lam2", "mu0", "sigma0_sq", "kappa0", "nu0")


@dataclass
class Problem:
    """One posterior per chain, on the [0, 1] scale; every field broadcasts to (chains,)."""

    n: np.ndarray
    ystar: np.ndarray
    s2star: np.ndarray
    b1: np.ndarray              # Laplace scale of the released mean
    lam2: np.ndarray            # 1 / Laplace scale of the released variance
    flat: bool
    mu0: np.ndarray
    sigma0_sq: np.ndarray
    kappa0: np.ndarray
    nu0: np.ndarray
    constrained: bool
    #: use the paper's eq. (38)/(49)/(54) sigma^2 conditional (tests only: shows it is wrong)
    paper_sigma2: bool = False

    @property
    def sigma2_max(self):
        """TGM availability (eq. 47): (n-1)/(2 s2) > lam2."""
        return (self.n - 1.0) / (2.0 * self.lam2)

    def expand(self, chains_per: int) -> "Problem":
        """Repeat every per-dataset entry ``chains_per`` times (dataset-major chain order)."""
        keys = PROBLEM_ARRAYS
        datasets = max(np.size(getattr(self, k)) for k in keys)

        def rep(v):
            return np.repeat(np.broadcast_to(np.asarray(v, float), (datasets,)), chains_per)
        return replace(self, **{k: rep(getattr(self, k)) for k in keys})


def make_problem(n, ystar, s2star, eps_mean, eps_var, prior, constrained: bool) -> Problem:
    """Problem on the [0, 1] scale; ``prior`` is a GaussianPrior on the [0, 1] scale."""
    n = np.asarray(n, float)
    flat = prior.kind == "flat"
    prob = Problem(
        n=n, ystar=np.asarray(ystar, float), s2star=np.asarray(s2star, float),
        b1=1.0 / (np.asarray(eps_mean, float) * n), lam2=np.asarray(eps_var, float) * n, flat=flat,
        mu0=np.asarray(0.0 if flat else prior.mu0, float), sigma0_sq=np.asarray(1.0 if flat else prior.sigma0_sq, float),
        kappa0=np.asarray(0.0 if flat else prior.kappa0, float), nu0=np.asarray(0.0 if flat else prior.nu0, float),
        constrained=bool(constrained))
    if np.any(prob.sigma2_max <= 0.25):
        eps_var = np.broadcast_to(np.asarray(eps_var, float), np.shape(n))
        raise RefusedError("release.statistics.variance.epsilon",
                           f"epsilon = {np.max(eps_var):g} >= 2(n-1)/n: the S^2 full conditional is not a truncated "
                           "gamma mixture for all feasible sigma^2 (Kazan & Reiter, eq. 47), so the exact sampler "
                           "does not apply")
    if flat and np.any(n <= 3):
        raise RefusedError("prior.kind", "the flat prior needs n > 3 (Kazan & Reiter, Theorem 5)")
    return prob


@dataclass
class Proposal:
    """Proposals of (mu, log sigma^2) for the joint move, per chain.

    ``chol`` (chains, 2, 2): random-walk Cholesky factor.  After the first warm-up window
    also ``center`` (chains, 2) and ``ind_chol``: a multivariate-t (``T_DF`` degrees of
    freedom) independence proposal fitted to the dataset's warm-up draws, used with
    probability ``P_INDEPENDENT`` per move (a mixture of two valid MH kernels).
    """

    chol: np.ndarray
    center: np.ndarray | None = None
    ind_chol: np.ndarray | None = None


T_DF = 5.0
P_INDEPENDENT = 0.5


# ---------------------------------------------------------------------------------------
# closed-form pieces
# ---------------------------------------------------------------------------------------
def s2_cap(ybar, n):
    """Theorem 3: S^2 <= n/(n-1) Ybar(1 - Ybar) (negative outside [0, 1])."""
    return n / (n - 1.0) * ybar * (1.0 - ybar)


def lam_b(lam, mask):
    """``lam`` (scalar or per-chain array) restricted to ``mask``."""
    lam = np.asarray(lam, float)
    return lam if lam.ndim == 0 else np.broadcast_to(lam, mask.shape)[mask]


def tgm_log_weights(alpha, beta, lam, tau, cap):
    """Unnormalised log weights of the two pieces of TGM(alpha, beta, lam, tau) on (0, cap].

    Piece 1: Gam(alpha, beta - lam) on (0, min(tau, cap)] (only when tau > 0);
    piece 2: Gam(alpha, beta + lam) on (max(tau, 0), cap].  Weights as in eq. (4), including
    the common factor beta^alpha / Gamma(alpha) omitted; see :func:`log_s2_marginal`.
    """
    beta_lo = beta - lam
    beta_hi = beta + lam
    alpha, beta_lo, beta_hi, tau, cap = np.broadcast_arrays(alpha, beta_lo, beta_hi, tau, cap)
    tau_pos = np.maximum(tau, 0.0)
    upper1 = np.minimum(tau_pos, cap)
    with np.errstate(divide="ignore", invalid="ignore"):
        lw1 = np.full(alpha.shape, -np.inf)
        has1 = upper1 > 0
        lw1[has1] = (-lam_b(lam, has1) * tau[has1] - alpha[has1] * np.log(beta_lo[has1])
                     + log_gammainc(alpha[has1], beta_lo[has1] * upper1[has1]))
        # piece 2 mass P(a, x_hi) - P(a, x_lo): through Q right of the bulk, P left of it,
        # each element evaluated once per end point (the incomplete gammas dominate the cost)
        x_lo = beta_hi * tau_pos
        x_hi = beta_hi * cap
        mass2 = np.full(alpha.shape, -np.inf)
        finite = np.isfinite(x_hi)
        use_q = (x_lo > alpha) | ~finite
        only_q = use_q & ~finite
        if only_q.any():
            mass2[only_q] = log_gammaincc(alpha[only_q], x_lo[only_q])
        both_q = use_q & finite
        if both_q.any():
            mass2[both_q] = log_diff_exp(log_gammaincc(alpha[both_q], x_lo[both_q]),
                                         log_gammaincc(alpha[both_q], x_hi[both_q]))
        both_p = ~use_q
        if both_p.any():
            mass2[both_p] = log_diff_exp(log_gammainc(alpha[both_p], x_hi[both_p]),
                                         log_gammainc(alpha[both_p], x_lo[both_p]))
        lw2 = np.where(cap > tau_pos, lam * tau - alpha * np.log(beta_hi) + mass2, -np.inf)
    return lw1, lw2


def log_s2_marginal(sigma2, prob: Problem, cap):
    """log ∫_0^cap Gam(x; (n-1)/2, (n-1)/(2 s2)) Lap(s2star; x, 1/lam2) dx  (Theorem 7 normaliser)."""
    alpha = (prob.n - 1.0) / 2.0
    beta = alpha / sigma2
    lw1, lw2 = tgm_log_weights(alpha, beta, prob.lam2, prob.s2star, cap)
    return np.log(prob.lam2 / 2.0) + alpha * np.log(beta) + np.logaddexp(lw1, lw2)


def normal_laplace_pieces(mu, sigma2, prob: Problem):
    """Two pieces of N(Ybar; mu, s2/n) * exp(-|ystar - Ybar|/b1) split at ystar.

    Returns (log w_left, log w_right, mean_left, mean_right, sd): left piece
    N(mean_left, sd^2) on (-inf, ystar], right piece N(mean_right, sd^2) on [ystar, inf).
    log(w_left + w_right) - log(2 b1) is the log normal-Laplace convolution L1(mu, s2).
    """
    var = sigma2 / prob.n
    sd = np.sqrt(var)
    b1 = prob.b1
    d = prob.ystar - mu
    shift = var / b1
    common = var / (2.0 * b1**2)
    lw_left = -d / b1 + common + special.log_ndtr((d - shift) / sd)
    lw_right = d / b1 + common + special.log_ndtr((-d - shift) / sd)
    return lw_left, lw_right, mu + shift, mu - shift, sd


def log_mean_marginal(mu, sigma2, prob: Problem):
    """log ∫ N(Ybar; mu, s2/n) Lap(ystar; Ybar, b1) dYbar (closed form)."""
    lwl, lwr, *_ = normal_laplace_pieces(mu, sigma2, prob)
    return np.logaddexp(lwl, lwr) - np.log(2.0 * prob.b1)


def log_prior(mu, sigma2, prob: Problem):
    """log p(mu, s2) up to a constant (NIG, eq. 2, or flat)."""
    if prob.flat:
        return np.zeros(np.broadcast(mu, sigma2).shape)
    return (-(prob.nu0 / 2.0 + 1.5) * np.log(sigma2)
            - (prob.nu0 * prob.sigma0_sq + prob.kappa0 * (mu - prob.mu0) ** 2) / (2.0 * sigma2))


def draw_inv_omega2(ybar, prob: Problem, rng):
    """1/omega^2 | . ~ InvGauss(1/(b1 |ystar - Ybar|), 1/b1^2) (eq. 51), one draw per chain."""
    # 1/omega^2 ~ InvGauss(mean 1/(b1 gap), shape 1/b1^2), drawn as omega^2 by the
    # cancellation-free Michael-Schucany-Haas form: 1/rng.wald(...) lost all precision once
    # b1/gap exceeded ~1e8 and returned 0 (omega^2 = inf) beyond ~1e15 (as gibbs_ss._sigma2)
    b1 = np.broadcast_to(prob.b1, ybar.shape)
    return 1.0 / inverse_gaussian_recip(b1 * np.abs(prob.ystar - ybar), b1, rng)


# ---------------------------------------------------------------------------------------
# kernel
# ---------------------------------------------------------------------------------------
def init(prob: Problem, chains: int, rng: np.random.Generator) -> np.ndarray:
    """Overdispersed feasible starting points around the released statistics: (chains,) records of
    :data:`CHAIN_STATE`."""
    shape = (chains,)
    n = np.broadcast_to(prob.n, shape)
    ystar = np.broadcast_to(prob.ystar, shape)
    b1 = np.broadcast_to(prob.b1, shape)
    s2_guess = np.clip(np.broadcast_to(prob.s2star, shape), 1e-3, 0.2)
    mu = ystar + b1 * rng.standard_normal(shape)
    sigma2 = s2_guess * np.exp(0.5 * rng.standard_normal(shape))
    sigma2 = np.minimum(sigma2, 0.9 * np.broadcast_to(prob.sigma2_max, shape))
    if prob.constrained:
        mu = np.clip(mu, 0.02, 0.98)
        sigma2 = np.clip(sigma2, 1e-4, 0.9 * mu * (1.0 - mu))
    ybar = mu + np.sqrt(sigma2 / n) * rng.standard_normal(shape)
    if prob.constrained:
        ybar = np.clip(ybar, 0.01, 0.99)
        s2 = np.minimum(sigma2, 0.9 * s2_cap(ybar, n))
    else:
        s2 = sigma2.copy()
    state = np.zeros(chains, CHAIN_STATE)
    state["mu"], state["sigma2"], state["ybar"], state["s2"] = mu, sigma2, ybar, s2
    state["inv_omega2"] = draw_inv_omega2(ybar, prob, rng)
    return state


def initial_proposal(prob: Problem, chains: int) -> Proposal:
    shape = (chains,)
    sd_mu = np.broadcast_to(np.sqrt(2.0) * prob.b1 + np.sqrt(np.clip(prob.s2star, 1e-3, 0.25) / prob.n), shape)
    chol = np.zeros((chains, 2, 2))
    chol[:, 0, 0] = 1.2 * sd_mu
    chol[:, 1, 1] = 0.5
    return Proposal(chol=chol)


def _adapt(proposal: Proposal, window_mu, window_eta, accept_rate, groups, scale):
    """Per-dataset covariance of (mu, log s2) over a warm-up window -> new Cholesky factors."""
    chains = groups.size
    ngroups = groups.max() + 1
    x = np.stack([window_mu, window_eta], axis=-1)  # (T, C, 2)
    t = x.shape[0]
    counts = np.bincount(groups, minlength=ngroups) * t
    sums = np.zeros((ngroups, 2))
    np.add.at(sums, groups, x.sum(axis=0))
    mean = sums / counts[:, None]
    centred = x - mean[groups][None]
    outer = np.einsum("tci,tcj->cij", centred, centred)
    cov = np.zeros((ngroups, 2, 2))
    np.add.at(cov, groups, outer)
    cov /= np.maximum(counts - 1, 1)[:, None, None]
    acc = np.bincount(groups, weights=accept_rate, minlength=ngroups) / np.bincount(groups, minlength=ngroups)
    scale = scale * np.where(acc < 0.15, 0.6, np.where(acc > 0.45, 1.6, 1.0))
    cov_g = cov * (2.38**2 / 2.0) * scale[:, None, None] ** 2
    # regularise: keep some of the diagonal so a collapsed window cannot freeze the chain
    diag = np.einsum("gii->gi", cov_g)
    cov_g = cov_g + np.eye(2)[None] * (1e-6 * diag.max(axis=1)[:, None, None] + 1e-14)
    try:
        chol = np.linalg.cholesky(cov_g)
    except np.linalg.LinAlgError:
        chol = np.sqrt(np.maximum(diag, 1e-14))[..., None] * np.eye(2)[None]
    # independence proposal: the window's mean and 1.2^2 x its covariance (heavier than the target)
    cov_i = cov * 1.2**2
    cov_i = cov_i + np.eye(2)[None] * (1e-6 * np.einsum("gii->gi", cov_i).max(axis=1)[:, None, None] + 1e-14)
    try:
        ind_chol = np.linalg.cholesky(cov_i)
    except np.linalg.LinAlgError:
        ind_chol = None
    bad = ~np.all(np.isfinite(chol), axis=(1, 2)) | (np.einsum("gii->gi", chol).min(axis=1) <= 0)
    if bad.any():
        return proposal, scale
    new = Proposal(chol=chol[groups].reshape(chains, 2, 2))
    if ind_chol is not None and np.all(np.isfinite(ind_chol)) and np.all(np.isfinite(mean)):
        new.center = mean[groups]
        new.ind_chol = ind_chol[groups]
    return new, scale


# ---------------------------------------------------------------------------------------
# compiled kernel (for speed): the same sweep and joint move, one chain at a time
# ---------------------------------------------------------------------------------------
# The App. D sweep and the joint move (module docstring), scalar code compiled with numba and
# cached on disk.  Each chain draws from its own numpy Generator (spawned from the caller's), so a
# chain's draws do not depend on the other chains or on how chains are spread over threads.
#
# The kernels pass named state: each chain's parameters, state, proposal and flags are numpy
# structured records (numba ``Record`` types), read and written by field name.
_F8 = np.float64
#: per-chain parameters (a :class:`Problem`'s arrays, one chain's entries)
KERNEL_PARAMS = np.dtype([(k, _F8) for k in PROBLEM_ARRAYS])
#: per-chain state: mu, sigma^2, Ybar, S^2, 1/omega^2
CHAIN_STATE = np.dtype([("mu", _F8), ("sigma2", _F8), ("ybar", _F8), ("s2", _F8), ("inv_omega2", _F8)])
#: per-chain proposal of (mu, log sigma^2) (:class:`Proposal`): random-walk Cholesky factor L (L[i, j] is
#: ``rw_ij``); ``independent`` 1 once the t independence proposal is fitted, its centre and Cholesky factor
KERNEL_PROPOSAL = np.dtype([("rw_00", _F8), ("rw_01", _F8), ("rw_10", _F8), ("rw_11", _F8), ("independent", _F8),
                            ("center_mu", _F8), ("center_eta", _F8),
                            ("t_00", _F8), ("t_01", _F8), ("t_10", _F8), ("t_11", _F8)])
#: the run's switches
KERNEL_FLAGS = np.dtype([("flat", np.bool_), ("constrained", np.bool_), ("paper_sigma2", np.bool_),
                         ("joint_update", np.bool_)])


@_jit
def _k_tgm_log_weights(alpha, beta, lam, tau, cap):
    tau_pos = max(tau, 0.0)
    upper1 = min(tau_pos, cap)
    beta_lo = beta - lam
    beta_hi = beta + lam
    lw1 = -np.inf
    if upper1 > 0.0:
        lw1 = -lam * tau - alpha * math.log(beta_lo) + nb_log_gammainc(alpha, beta_lo * upper1)
    lw2 = -np.inf
    if cap > tau_pos:
        x_lo = beta_hi * tau_pos
        x_hi = beta_hi * cap
        if not math.isfinite(x_hi):
            mass2 = nb_log_gammaincc(alpha, x_lo)
        elif x_lo > alpha:
            mass2 = nb_log_diff_exp(nb_log_gammaincc(alpha, x_lo), nb_log_gammaincc(alpha, x_hi))
        else:
            mass2 = nb_log_diff_exp(nb_log_gammainc(alpha, x_hi), nb_log_gammainc(alpha, x_lo))
        lw2 = lam * tau - alpha * math.log(beta_hi) + mass2
    return lw1, lw2


@_jit
def _k_log_s2_marginal(sigma2, par, cap):
    alpha = (par.n - 1.0) / 2.0
    beta = alpha / sigma2
    lw1, lw2 = _k_tgm_log_weights(alpha, beta, par.lam2, par.s2star, cap)
    return math.log(par.lam2 / 2.0) + alpha * math.log(beta) + nb_logaddexp(lw1, lw2)


@_jit
def _k_normal_laplace(mu, sigma2, par):
    var = sigma2 / par.n
    sd = math.sqrt(var)
    b1 = par.b1
    d = par.ystar - mu
    shift = var / b1
    common = var / (2.0 * b1 * b1)
    lwl = -d / b1 + common + nb_log_ndtr((d - shift) / sd)
    lwr = d / b1 + common + nb_log_ndtr((-d - shift) / sd)
    return lwl, lwr, mu + shift, mu - shift, sd


@_jit
def _k_log_prior(mu, sigma2, par, flat):
    if flat:
        return 0.0
    return (-(par.nu0 / 2.0 + 1.5) * math.log(sigma2)
            - (par.nu0 * par.sigma0_sq + par.kappa0 * (mu - par.mu0) ** 2) / (2.0 * sigma2))


@_jit
def _k_feasible(mu, sigma2, par, constrained):
    ok = sigma2 > _EPS_S2 and sigma2 < (par.n - 1.0) / (2.0 * par.lam2)
    if constrained:
        ok = ok and mu > 0.0 and mu < 1.0 and sigma2 <= mu * (1.0 - mu)
    return ok


@_jit
def _k_log_joint_target(mu, sigma2, ybar, log_l1, par, flat, constrained):
    if not _k_feasible(mu, sigma2, par, constrained):
        return -np.inf
    cap = np.inf
    if constrained:
        n = par.n
        cap = n / (n - 1.0) * ybar * (1.0 - ybar)
        if not cap > 0.0:
            return -np.inf
    value = _k_log_prior(mu, sigma2, par, flat) + log_l1 + _k_log_s2_marginal(sigma2, par, cap) + math.log(sigma2)
    return value if math.isfinite(value) else -np.inf


@_jit
def _k_draw_s2(rng, sigma2, ybar, par, constrained):
    """S^2 | . for one chain: TGM (eq. 52; App. B, Algorithm 1), on (0, cap] when constrained (eq. 57)."""
    n = par.n
    alpha = (n - 1.0) / 2.0
    beta = alpha / sigma2
    lam = par.lam2
    tau = par.s2star
    cap = n / (n - 1.0) * ybar * (1.0 - ybar) if constrained else np.inf
    cap = max(cap, 2 * _EPS_S2)
    lw1, lw2 = _k_tgm_log_weights(alpha, beta, lam, tau, cap)
    p1 = math.exp(lw1 - nb_logaddexp(lw1, lw2))
    tau_pos = max(tau, 0.0)
    if rng.random() < p1:
        s2 = nb_truncgamma(rng, alpha, beta - lam, 0.0, min(tau_pos, cap))
    else:
        s2 = nb_truncgamma(rng, alpha, beta + lam, tau_pos, cap)
    return max(s2, _EPS_S2)


@_jit
def _k_draw_s2_many(rng, sigma2, ybar, par, constrained, m):
    """``m`` independent draws of :func:`_k_draw_s2` (tests)."""
    out = np.empty(m)
    for i in range(m):
        out[i] = _k_draw_s2(rng, sigma2, ybar, par, constrained)
    return out


@_jit
def _k_sweep(st, par, flat, constrained, paper_sigma2, rng):
    """One scan of the App. D full conditionals for one chain: S^2, 1/omega^2, mu, sigma^2, Ybar.

    S^2 and omega^2 come first: the joint move integrates them out and leaves them stale, and this
    redraws them from their full conditionals before anything conditions on them."""
    n = par.n
    sigma2_max = (n - 1.0) / (2.0 * par.lam2)
    # S^2 | . : TGM (App. B), truncated to (0, cap] when constrained (eq. 57)
    st.s2 = _k_draw_s2(rng, st.sigma2, st.ybar, par, constrained)
    # 1/omega^2 | . ~ InvGauss(1/(b1 |ystar - Ybar|), 1/b1^2) (eq. 51), cancellation-free
    b1 = par.b1
    st.inv_omega2 = 1.0 / nb_inverse_gaussian_recip(rng, b1 * abs(par.ystar - st.ybar), b1)
    # mu | . (eq. 48 / 53)
    prec_n = n + par.kappa0
    mean = (n * st.ybar + par.kappa0 * par.mu0) / prec_n
    sd = math.sqrt(st.sigma2 / prec_n)
    if constrained:
        half = math.sqrt(max(0.25 - st.sigma2, 0.0))
        st.mu = nb_truncnorm(rng, mean, sd, 0.5 - half, 0.5 + half)
    else:
        st.mu = mean + sd * rng.standard_normal()
    # sigma^2 | . (module docstring / eq. 59), truncated
    mu = st.mu
    if flat:
        shape = (n - 2.0) / 2.0
        rate = ((n - 1.0) * st.s2 + n * (st.ybar - mu) ** 2) / 2.0
    elif paper_sigma2:
        shape = (n + par.nu0) / 2.0
        rate = (par.nu0 * par.sigma0_sq + (n - 1.0) * st.s2 + n * (st.ybar - mu) ** 2) / 2.0
    else:
        shape = (n + par.nu0 + 1.0) / 2.0
        rate = (par.nu0 * par.sigma0_sq + (n - 1.0) * st.s2 + n * (st.ybar - mu) ** 2
                + par.kappa0 * (mu - par.mu0) ** 2) / 2.0
    rate = max(rate, 1e-300)
    upper = sigma2_max
    if constrained:
        upper = min(upper, mu * (1.0 - mu))
    precision = nb_truncgamma(rng, shape, rate, 1.0 / upper, np.inf)
    st.sigma2 = min(max(1.0 / precision, min(_EPS_S2, upper)), upper)
    # Ybar | . (eq. 50 / 55)
    prec = st.inv_omega2 + n / st.sigma2
    mean = (par.ystar * st.inv_omega2 + n * mu / st.sigma2) / prec
    sd = 1.0 / math.sqrt(prec)
    if constrained:
        half = math.sqrt(max(0.25 - (n - 1.0) / n * st.s2, 0.0))
        st.ybar = nb_truncnorm(rng, mean, sd, 0.5 - half, 0.5 + half)
    else:
        st.ybar = mean + sd * rng.standard_normal()


@_jit
def _k_log_t(mu, eta, prop):
    d0 = mu - prop.center_mu
    d1 = eta - prop.center_eta
    y0 = d0 / prop.t_00
    y1 = (d1 - prop.t_10 * y0) / prop.t_11
    return -(T_DF + 2.0) / 2.0 * math.log1p((y0 * y0 + y1 * y1) / T_DF)


@_jit
def _k_joint_move(st, par, prop, flat, constrained, rng):
    """MH move of (mu, log s2, Ybar) with S^2 and omega^2 integrated out (module docstring), one chain;
    returns whether the move was accepted."""
    z0 = rng.standard_normal()
    z1 = rng.standard_normal()
    mu_new = st.mu + prop.rw_00 * z0 + prop.rw_01 * z1
    sigma2_new = st.sigma2 * math.exp(prop.rw_10 * z0 + prop.rw_11 * z1)
    log_q_ratio = 0.0
    if prop.independent > 0.0:
        independent = rng.random() < P_INDEPENDENT
        w = math.sqrt(2.0 * rng.standard_gamma(T_DF / 2.0) / T_DF)
        if independent:
            mu_new = prop.center_mu + (prop.t_00 * z0 + prop.t_01 * z1) / w
            sigma2_new = math.exp(min(prop.center_eta + (prop.t_10 * z0 + prop.t_11 * z1) / w, 700.0))
            log_q_ratio = (_k_log_t(st.mu, math.log(st.sigma2), prop)
                           - _k_log_t(mu_new, math.log(max(sigma2_new, 1e-300)), prop))
    ok = _k_feasible(mu_new, sigma2_new, par, constrained)
    mu_s = mu_new if ok else st.mu
    s2_s = sigma2_new if ok else st.sigma2
    # Ybar from r(Ybar | mu, s2): two-piece truncated-normal mixture split at ystar
    lwl, lwr, ml, mr, sd = _k_normal_laplace(mu_s, s2_s, par)
    log_norm = nb_logaddexp(lwl, lwr)
    ystar = par.ystar
    if rng.random() < math.exp(lwl - log_norm):
        ybar_new = nb_truncnorm(rng, ml, sd, -np.inf, ystar)
    else:
        ybar_new = nb_truncnorm(rng, mr, sd, ystar, np.inf)
    log_2b1 = math.log(2.0 * par.b1)
    log_new = -np.inf
    if ok:
        log_new = _k_log_joint_target(mu_s, s2_s, ybar_new, log_norm - log_2b1, par, flat, constrained)
    lwl, lwr, _, _, _ = _k_normal_laplace(st.mu, st.sigma2, par)
    log_old = _k_log_joint_target(st.mu, st.sigma2, st.ybar, nb_logaddexp(lwl, lwr) - log_2b1, par, flat,
                                  constrained)
    u = rng.random()
    accept = (math.log(u) if u > 0.0 else -np.inf) < (log_new - log_old + log_q_ratio)
    # a current state of log density -inf (possible only at the first steps) always moves
    if not math.isfinite(log_old) and math.isfinite(log_new):
        accept = True
    if accept:
        st.mu = mu_s
        st.sigma2 = s2_s
        st.ybar = ybar_new
    return accept


@_jit
def advance_chain(st, par, prop, flags, rng, skip, n_rec, thin, out_mu, out_s2, out_acc):
    """Run one chain: ``skip`` unrecorded iterations, then ``n_rec`` records every ``thin``.

    ``st``, ``par``, ``prop``, ``flags``: records of :data:`CHAIN_STATE`, :data:`KERNEL_PARAMS`,
    :data:`KERNEL_PROPOSAL`, :data:`KERNEL_FLAGS`.  Updates ``st`` in place,
    writes (mu, sigma2, accepted) of the recorded iterations, returns the number of joint
    moves accepted over all iterations.
    """
    flat = flags.flat
    constrained = flags.constrained
    paper = flags.paper_sigma2
    joint = flags.joint_update
    total = 0
    for i in range(skip + n_rec * thin):
        _k_sweep(st, par, flat, constrained, paper, rng)
        acc = False
        if joint:
            acc = _k_joint_move(st, par, prop, flat, constrained, rng)
            total += acc
        j = i - skip
        if j >= 0 and (j + 1) % thin == 0:
            r = j // thin
            out_mu[r] = st.mu
            out_s2[r] = st.sigma2
            out_acc[r] = acc
    return total


def kernel_params(prob: Problem, chains: int) -> np.ndarray:
    """(chains,) records of :data:`KERNEL_PARAMS`: each chain's entries of the problem's arrays."""
    out = np.zeros(chains, KERNEL_PARAMS)
    for k in PROBLEM_ARRAYS:
        out[k] = np.broadcast_to(np.asarray(getattr(prob, k), float), (chains,))
    return out


def kernel_proposal(proposal: Proposal) -> np.ndarray:
    """(chains,) records of :data:`KERNEL_PROPOSAL` holding ``proposal``."""
    chains = proposal.chol.shape[0]
    out = np.zeros(chains, KERNEL_PROPOSAL)
    for i in range(2):
        for j in range(2):
            out[f"rw_{i}{j}"] = proposal.chol[:, i, j]
            if proposal.center is not None:
                out[f"t_{i}{j}"] = proposal.ind_chol[:, i, j]
    if proposal.center is not None:
        out["independent"] = 1.0
        out["center_mu"], out["center_eta"] = proposal.center[:, 0], proposal.center[:, 1]
    return out


def run_chains(prob: Problem, chains: int, draws: int, warmup: int, rng: np.random.Generator,
               joint_update: bool = True, groups: np.ndarray | None = None, thin: int = 1,
               workers: int | None = None):
    """Run ``chains`` chains (compiled kernel); returns dict of arrays (chains, draws) on [0, 1].

    ``groups[c]`` names the dataset of chain c (for pooled warm-up adaptation).  Starting
    points from :func:`init`; the iterations run in :func:`advance_chain`, one window of warm-up at a time (the proposal
    is refitted between windows, pooled over the chains of a dataset).  ``workers``: threads
    (default :func:`~.mcmc_common.chain_workers`); the draws do not depend on it.
    """
    if groups is None:
        groups = np.zeros(chains, dtype=np.int64)
    state = init(prob, chains, rng)
    proposal = initial_proposal(prob, chains) if joint_update else Proposal(chol=np.zeros((chains, 2, 2)))
    scale = np.ones(groups.max() + 1)
    par = kernel_params(prob, chains)
    flags = np.array((prob.flat, prob.constrained, prob.paper_sigma2, joint_update), KERNEL_FLAGS)[()]
    st = state
    chain_rngs = rng.spawn(chains)
    if workers is None:
        workers = chain_workers(chains, warmup + draws * thin)
    windows = warmup_windows(warmup)
    for w in windows:
        keep = max(w // 2, 1)
        prop = kernel_proposal(proposal)
        hist_mu = np.empty((chains, keep))
        hist_s2 = np.empty((chains, keep))
        hist_acc = np.empty((chains, keep), bool)
        acc = np.array(map_chains(lambda c: advance_chain(st[c], par[c], prop[c], flags, chain_rngs[c], w - keep,
                                                           keep, 1, hist_mu[c], hist_s2[c], hist_acc[c]),
                                   chains, workers), float)
        if joint_update and w >= 10:
            proposal, scale = _adapt(proposal, hist_mu.T, np.log(hist_s2.T), acc / w, groups, scale)
    prop = kernel_proposal(proposal)
    out_mu = np.empty((chains, draws))
    out_s2 = np.empty((chains, draws))
    out_acc = np.zeros((chains, draws), bool)
    map_chains(lambda c: advance_chain(st[c], par[c], prop[c], flags, chain_rngs[c], 0, draws, thin, out_mu[c],
                                        out_s2[c], out_acc[c]), chains, workers)
    return {"mu": out_mu, "sigma2": out_s2, "accepted": out_acc}


def predictive(mu, sigma2, constrained: bool, rng):
    """y_new ~ N(mu, s2) per draw, truncated to [0, 1] when constrained (on [0, 1])."""
    sd = np.sqrt(sigma2)
    if constrained:
        return truncnorm_rvs(mu, sd, np.zeros_like(mu), np.ones_like(mu), rng)
    return mu + sd * rng.standard_normal(mu.shape)


# ---------------------------------------------------------------------------------------
# engine
# ---------------------------------------------------------------------------------------
def problem_from_release(release, prior, constrained: bool) -> Problem:
    lo, width = release.bounds[0], release.width
    scaled_prior = prior.scaled(lo, width)
    ystar = (release.statistics.mean.value - lo) / width
    s2star = release.statistics.variance.value / width**2
    return make_problem(release.n, ystar, s2star, release.epsilon_mean, release.epsilon_variance, scaled_prior,
                        constrained)


@dataclass(frozen=True)
class GibbsOptions(MCMCOptions):
    """Options of engine ``gibbs`` (gaussian): draws, warmup, chains, seed; ``constrained``; ``joint_update``."""

    engine: ClassVar[str] = "gibbs"

    constrained: bool = constrained_option("restrict (mu, sigma2) to what data in the release's bounds allow (Kazan & Reiter Theorem 2)")
    joint_update: bool = option(True, "bool", "add the joint (mu, sigma2, Ybar) Metropolis move to each sweep")


#: bytes per kept warm-up iteration of a chain while the proposal is refitted (:func:`_adapt`): the window's mu,
#: sigma2 and acceptance (17), log sigma2 (8), the stacked (mu, log sigma2) pairs and their centred copy (16 + 16)
WARMUP_BYTES = 57.0
#: bytes per draw while the engine runs: the chains' mu, sigma2, acceptance (17), y_new and its scale (16), the
#: data-scale copies (16) -- measured 49 (2e6 draws)
DRAW_BYTES = 49.0
#: bytes per draw the posterior keeps while it is checked: mu, sigma2, y_new, acceptance
STORED_BYTES = 25.0


def memory_estimate(chains: int, draws: int, warmup: int) -> tuple[float, float]:
    """(bytes of the warm-up windows, bytes per draw x chains) at the engine's peak: the last (largest) warm-up
    window's kept iterations of every chain, refitted by :func:`_adapt`, and each draw's arrays, or the stored
    draws with the convergence checks of one component (``convergence.diagnostics_bytes``), whichever is larger."""
    from ..convergence import diagnostics_bytes

    keep = max((max(w // 2, 1) for w in warmup_windows(warmup)), default=0)
    per_draw = max(DRAW_BYTES, STORED_BYTES + diagnostics_bytes(chains, draws, 1) / (chains * draws))
    return WARMUP_BYTES * chains * keep, per_draw


def check_memory(chains: int, draws: int, warmup: int, method: str = "gibbs") -> None:
    """Refuse, before any chain runs, warm-up windows or draws that would not fit in memory."""
    from ..memory import check_draws_fit

    fixed, per_draw = memory_estimate(chains, draws, warmup)
    check_draws_fit("draws", f"{method}: {draws} draws x {chains} chains after {warmup} warm-up iterations",
                    draws=draws, chains=chains, per_draw=per_draw, fixed=fixed,
                    other="fewer --chains or a shorter --warmup")


def gibbs(model, options) -> Posterior:
    """Engine ``gibbs``: exact Gibbs sampler (+ joint move), draws on the data scale.  Reads the model's release (its
    noisy mean and variance, through :func:`problem_from_release`), parsed prior and the latent statistic's scale
    (``model.latent.state``); names its draws through the model."""
    release, prior = model.release, model.prior.spec
    check_memory(options.chains, options.draws, options.warmup)
    joint_update = options.joint_update
    prob = problem_from_release(release, prior, options.constrained)
    seq = np.random.SeedSequence(options.seed)
    rng_chain, rng_pred = (np.random.default_rng(s) for s in seq.spawn(2))
    res = run_chains(prob, options.chains, options.draws, options.warmup, rng_chain, joint_update=joint_update)
    y_new = predictive(res["mu"], res["sigma2"], options.constrained, rng_pred)
    scale = model.latent.state
    return model.pack(
        {"mu": scale.to_data(res["mu"]), "sigma2": scale.variance_to_data(res["sigma2"])}, "gibbs",
        posterior_predictive={"y_new": scale.to_data(y_new)},
        sample_stats={"joint_move_accepted": res["accepted"]},
        attrs={"joint_update": int(joint_update),
               "sigma2_conditional": "IG((n+nu0+1)/2, (nu0 s0^2 + (n-1)S^2 + n(Ybar-mu)^2 + kappa0(mu-mu0)^2)/2)"
               if prior.kind != "flat" else "IG((n-2)/2, ((n-1)S^2 + n(Ybar-mu)^2)/2)",
               "sigma2_truncation": float(scale.variance_to_data(float(np.max(prob.sigma2_max)))),
               "paper": "Kazan & Reiter, App. C-D"},
    )


def run_batch(sims, prior, method: str, opts: "GibbsOptions"):
    """Batched calibration path (``EngineSpec.batch``): (trials, chains x draws, 2) draws of (mu, sigma2).

    Runs the engine's chains for every simulated release, all in one call of :func:`run_chains` (warm-up
    adaptation pooled per release, as :func:`gibbs` pools it over its chains), with the engine's typed options
    (built by the study as ``infer`` builds them, so it checks the sampler ``infer`` runs); None for releases
    off [0, 1], which then run one by one.
    """
    from ..families.gaussian import GaussianPrior, parse_prior

    prior = parse_prior(prior) if not isinstance(prior, GaussianPrior) else prior
    rel = [s.release for s in sims]
    if any(r.bounds != (0.0, 1.0) for r in rel):
        return None
    T, chains = len(sims), opts.chains
    from ..memory import check_batch_fits

    # (the chains' arrays and the stacked (mu, sigma2) returned; no convergence checks in a calibration study)
    check_batch_fits(method, T, chains, opts.draws, DRAW_BYTES + 16.0, memory_estimate(T * chains, opts.draws,
                                                                                         opts.warmup)[0])
    n = np.array([r.n for r in rel], float)
    prob = make_problem(n, [r.statistics.mean.value for r in rel], [r.statistics.variance.value for r in rel],
                        np.array([r.epsilon_mean for r in rel]), np.array([r.epsilon_variance for r in rel]),
                        prior, opts.constrained).expand(chains)
    rng = np.random.default_rng(opts.seed)
    res = run_chains(prob, T * chains, opts.draws, opts.warmup, rng, joint_update=opts.joint_update,
                     groups=np.repeat(np.arange(T), chains))
    return np.stack([res["mu"], res["sigma2"]], axis=-1).reshape(T, chains * opts.draws, 2)
