"""Importance-sampling correction of SPPE's simulations with the public mechanism's density.

Xiong, Ju & Zhang (Sec. 2-3) write the likelihood of a release as an integral over the confidential
data, p(s_dp^o | theta) = E_{x ~ f(. | theta)}[eta(s_dp^o | s(x))], where the privacy mechanism eta is
public and has a density (the mechanism's ``logpdf``).  So every simulation (theta_i, s_i = s(x_i))
that SPPE draws already carries an unbiased estimate of the likelihood at theta_i, eta(s_dp^o | s_i):
noise-aware ABC with the mechanism itself as the kernel is exact, with no tolerance (Wilkinson 2013,
"Approximate Bayesian computation gives exact results under the assumption of model error").
Round r of SPPE draws its N_r parameters from a known density g_r (the prior on round 1, then the flow
q(theta | s_dp^o) of round r - 1, or that region of the prior for truncated proposals), so the pooled
simulations of all rounds are an importance sample for the posterior with the deterministic-mixture
(balance heuristic) weights (Veach & Guibas 1995; Owen & Zhou 2000; adaptive: Cornuet et al. 2012, AMIS)

    w_i  proportional to  pi(theta_i) eta(s_dp^o | s_i) / sum_r (N_r / N) g_r(theta_i).

The random likelihood factor keeps the self-normalised estimate consistent (it is the pseudo-marginal
idea of Andrieu & Roberts 2009 applied to importance sampling).  The weights are Pareto-smoothed
(PSIS, Vehtari et al. 2024, ``arviz.psislw``), whose k-hat says whether the estimate can be trusted
(not above min(1 - 1/log10 S, 0.7) for S weighted draws: their Sec. 3.2.4), and the weighted sample is turned into draws by resampling and a kernel that keeps
the weighted mean and covariance (Liu & West 2001): theta* = a theta_j + (1 - a) mean + h L z, with
a = sqrt(1 - h^2), L L' the weighted covariance and h Silverman's bandwidth at the effective sample size.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
from scipy.special import logsumexp

#: PSIS k-hat above which an importance estimate is unreliable, for large samples (Vehtari et al. 2024, Sec. 3.2.4)
KHAT_THRESHOLD = 0.7


def khat_threshold(draws: int) -> float:
    """Vehtari et al.'s sample-size-dependent threshold min(1 - 1/log10 S, 0.7) (0.7 from S = 2,154 on;
    fewer draws estimate the tail, and so k-hat, less well)."""
    return float(min(1.0 - 1.0 / np.log10(max(draws, 11)), KHAT_THRESHOLD))


def min_ess(dim: int) -> float:
    """The smallest Kish ESS at which ``correction="auto"`` uses the weighted sample: 2 (d + 1).

    Below it the Liu–West kernel's weighted covariance rests on fewer than two effective points per
    free parameter of a d-dimensional mean and scale; a heuristic floor, not a published rule.  Above
    it but with PSIS k-hat over its threshold the weighted sample is still used (with a warning): on
    every such run measured (linreg-ju eps = 10 and SIR eps = 10, 2 rounds; docs/sbi.md, "Importance
    correction") it was closer to the exact posterior than the last round's flow."""
    return 2.0 * (int(dim) + 1)


def mixture_log_weights(log_prior, log_likelihood, log_proposals, counts) -> np.ndarray:
    """Unnormalised log weights log pi + log eta - log sum_r (N_r/N) g_r of the pooled simulations.

    ``log_prior`` (n,), ``log_likelihood`` (n,) = log eta(s_dp^o | s_i), ``log_proposals`` (R, n) = log g_r
    at every pooled parameter, ``counts`` (R,) = N_r, the simulations drawn from g_r.
    """
    log_proposals = np.atleast_2d(np.asarray(log_proposals, float))
    counts = np.asarray(counts, float)
    if log_proposals.shape[0] != counts.size:
        raise ValueError(f"{log_proposals.shape[0]} proposal densities for {counts.size} rounds")
    share = np.log(counts / counts.sum())[:, None]
    log_mix = logsumexp(log_proposals + share, axis=0)
    return np.asarray(log_prior, float) + np.asarray(log_likelihood, float) - log_mix


def effective_sample_size(log_weights) -> float:
    """Kish's ESS (sum w)^2 / sum w^2 of unnormalised log weights."""
    lw = np.asarray(log_weights, float)
    lw = lw - logsumexp(lw)
    return float(np.exp(-logsumexp(2 * lw)))


def pareto_smooth(log_weights) -> tuple[np.ndarray, float]:
    """PSIS-smoothed, normalised log weights and k-hat (ArviZ's ``psislw``, dpposterior.arviz_compat)."""
    from ..arviz_compat import psislw

    lw = np.asarray(log_weights, float)
    with warnings.catch_warnings():   # psislw warns on k-hat > 0.7 itself; the caller reports it
        warnings.simplefilter("ignore")
        return psislw(lw - lw.max())


def kernel_resample(theta, log_weights, n: int, rng: np.random.Generator) -> np.ndarray:
    """n draws from the weighted sample: multinomial resampling and the Liu-West shrinkage kernel.

    Keeps the weighted mean and covariance of (theta, w) in expectation; the bandwidth h is
    Silverman's rule at the Kish effective sample size, so the kernel vanishes as the sample grows.
    """
    theta = np.asarray(theta, float)
    if theta.ndim == 1:
        theta = theta[:, None]
    lw = np.asarray(log_weights, float)
    w = np.exp(lw - logsumexp(lw))
    d = theta.shape[1]
    mean = w @ theta
    cov = np.atleast_2d(np.cov(theta.T, aweights=w, bias=True))
    ess = effective_sample_size(lw)
    h = min((4.0 / ((d + 2) * ess)) ** (1.0 / (d + 4)), 1.0)
    a = np.sqrt(1.0 - h ** 2)
    chol = np.linalg.cholesky(cov + 1e-12 * np.trace(cov) / d * np.eye(d))
    idx = rng.choice(len(w), size=n, p=w)
    return a * theta[idx] + (1 - a) * mean + h * rng.standard_normal((n, d)) @ chol.T


@dataclass
class ImportanceResult:
    """The corrected posterior: ``theta`` (draws), the PSIS-smoothed normalised ``log_weights`` of the
    pooled simulations, ``ess`` (Kish, of the smoothed weights), ``khat`` and the ``khat_threshold`` of
    this many weighted simulations."""

    theta: np.ndarray
    log_weights: np.ndarray
    ess: float
    khat: float
    khat_threshold: float = KHAT_THRESHOLD
    min_ess: float = 0.0

    @property
    def reliable(self) -> bool:
        """PSIS k-hat at or below its threshold: the Monte Carlo error of the estimate is under control."""
        return self.khat <= self.khat_threshold

    @property
    def usable(self) -> bool:
        """ESS at or above :func:`min_ess`: what ``correction="auto"`` requires to use the weighted sample."""
        return self.ess >= self.min_ess


def importance_posterior(theta, log_prior, log_likelihood, log_proposals, counts, n: int,
                         rng: np.random.Generator) -> ImportanceResult:
    """The importance-sampling posterior of the pooled simulations (module docstring): n draws."""
    lw = mixture_log_weights(log_prior, log_likelihood, log_proposals, counts)
    finite = np.isfinite(lw)
    if not finite.any():
        raise ValueError("no simulation has a finite importance weight (every eta(s_dp^o | s_i) is 0)")
    theta = np.asarray(theta, float)
    smoothed = np.full(lw.shape, -np.inf)
    smoothed[finite], khat = pareto_smooth(lw[finite])
    draws = kernel_resample(theta[finite], smoothed[finite], n, rng)
    return ImportanceResult(draws, smoothed, effective_sample_size(smoothed[finite]), khat,
                            khat_threshold(int(finite.sum())), min_ess(theta.shape[1]))
