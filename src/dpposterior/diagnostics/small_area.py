"""Small-area scores shared by ``dpposterior reproduce small-area`` and ``benchmarks/small_area_study.py``
the direct estimator, interval scores against a known truth, and SBC ranks.

**Direct estimator** -- what a least-squares or design-based product gives at one level, each area on its
own (e.g. the Census's noisy measurements divided by a population): for every cell,

    rate_gc = y*_gc / E_gc,    Var = (max(y*_gc, 0) + Var(noise_gc)) / E_gc^2,

the Poisson variance estimated by the (noisy) count and the noise variance added exactly (the discrete
Gaussian's and discrete Laplace's variances in closed form or by summation:
``mechanisms.*.noise_variance``); the interval is the normal one, rate +- z sd, its lower end clipped at
0 (a rate is >= 0; the clip cannot change whether a positive true rate is covered, only the width).
It pools nothing and models nothing about the noise beyond its variance.

Posterior intervals of the rates are equal-tailed (the 5% and 95% quantiles of the draws for 90%).
"""

from __future__ import annotations

import math

import numpy as np


def noise_variance(release) -> np.ndarray:
    """The noise variance of every cell of a small-area release, G x C (each distinct noise's exact variance)."""
    _, inverse, mechs = release.cell_mechanisms()
    return np.array([m.noise_variance for m in mechs], float)[inverse]


def direct_estimate(release) -> tuple[np.ndarray, np.ndarray]:
    """(rate estimate, its standard error), each G x C: see the module docstring."""
    ystar = release.released()
    E = release.exposures()
    return ystar / E, np.sqrt(np.maximum(ystar, 0.0) + noise_variance(release)) / E


def normal_interval(point: np.ndarray, sd: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """point +- z_{(1+prob)/2} sd, the lower end clipped at 0."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(0.5 + prob / 2.0)
    return np.maximum(point - z * sd, 0.0), point + z * sd


def rate_draws(post) -> np.ndarray:
    """The posterior draws of ``rate`` of a small-area Posterior as (draws, G, C), chains pooled."""
    rate = np.asarray(post.posterior["rate"])
    return rate.reshape(-1, *rate.shape[2:])


def equal_tailed(draws: np.ndarray, prob: float) -> tuple[np.ndarray, np.ndarray]:
    """The central ``prob`` interval of draws along axis 0."""
    lo, hi = np.quantile(draws, [0.5 - prob / 2.0, 0.5 + prob / 2.0], axis=0)
    return lo, hi


def interval_scores(lo, hi, point, truth) -> dict:
    """Coverage of ``truth`` by [lo, hi], mean width, and the RMSE of ``point`` (all cells pooled)."""
    lo, hi, point, truth = (np.asarray(a, float) for a in (lo, hi, point, truth))
    return {"coverage": float(np.mean((truth >= lo) & (truth <= hi))), "width": float(np.mean(hi - lo)),
            "rmse": float(math.sqrt(np.mean((point - truth) ** 2)))}


def sbc_rank(draws: np.ndarray, truth: float, keep: int = 99) -> int:
    """Rank of ``truth`` among ``keep`` draws thinned evenly from ``draws`` (flattened): 0..keep."""
    flat = np.asarray(draws, float).reshape(-1)
    step = max(1, len(flat) // keep)
    return int((flat[::step][:keep] < truth).sum())


def sbc_pvalue(ranks, keep: int = 99, bins: int = 10) -> float:
    """Chi-square p-value of SBC ranks (0..keep) in ``bins`` equal bins against uniformity (Talts et al. 2018)."""
    from scipy import stats

    counts = np.bincount(np.asarray(ranks, int) * bins // (keep + 1), minlength=bins)
    return float(stats.chisquare(counts).pvalue)
