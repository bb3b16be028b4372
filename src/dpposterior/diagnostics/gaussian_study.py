"""Frequentist coverage of 95% HPD intervals for the bounded Gaussian (Kazan & Reiter, Sec. 4, Figure 2).

Datasets: Y_i ~ N(mu, sigma^2), clamped to [0, 1] by the curator as a real release would
be, then Ybar* = Ybar + Lap(1/(eps1 n)), S2* = S^2 + Lap(1/(eps2 n)).  Every dataset's
posterior is run in one vectorised call of the Gibbs sampler (chains of all datasets
side by side, ``groups`` telling the warm-up adaptation which chains share a target).
The naive posterior (noise ignored) is drawn in closed form for comparison.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..families.gaussian import GaussianPrior
from ..inference.gaussian_gibbs import make_problem, run_chains
from ..inference.gaussian_grid import naive_draws


def simulate_releases(mu, sigma, n, eps_mean, eps_var, datasets, rng):
    """(ystar, s2star, ybar, s2) arrays of length ``datasets`` on [0, 1]."""
    y = np.clip(rng.normal(mu, sigma, size=(datasets, n)), 0.0, 1.0)
    ybar = y.mean(axis=1)
    s2 = y.var(axis=1, ddof=1)
    ystar = ybar + rng.laplace(0.0, 1.0 / (eps_mean * n), datasets)
    s2star = s2 + rng.laplace(0.0, 1.0 / (eps_var * n), datasets)
    return ystar, s2star, ybar, s2


def hpd(draws, prob: float = 0.95):
    """Shortest intervals holding ``prob`` of the draws, row by row: (lower, upper) arrays."""
    x = np.sort(draws, axis=-1)
    m = x.shape[-1]
    k = int(np.ceil(prob * m))
    widths = x[..., k - 1:] - x[..., : m - k + 1]
    start = np.argmin(widths, axis=-1)
    lower = np.take_along_axis(x, start[..., None], axis=-1)[..., 0]
    upper = np.take_along_axis(x, (start + k - 1)[..., None], axis=-1)[..., 0]
    return lower, upper


@dataclass
class CoverageResult:
    covered: np.ndarray      # bool per dataset
    length: np.ndarray       # HPD length per dataset
    naive_covered: np.ndarray
    naive_length: np.ndarray

    @property
    def coverage(self) -> float:
        return float(self.covered.mean())

    @property
    def naive_coverage(self) -> float:
        return float(self.naive_covered.mean())


def coverage_study(mu, sigma, n, eps_mean, eps_var, datasets, *, constrained=False, chains=4, draws=500,
                   warmup=300, seed=0, prior: GaussianPrior | None = None, batch: int = 1000) -> CoverageResult:
    """95% HPD coverage of mu by the Gibbs posterior and by the naive posterior."""
    prior = prior or GaussianPrior("flat")
    seq = np.random.SeedSequence(seed)
    rng_data, rng_chain, rng_naive = (np.random.default_rng(s) for s in seq.spawn(3))
    ystar, s2star, _, _ = simulate_releases(mu, sigma, n, eps_mean, eps_var, datasets, rng_data)
    covered, length = [], []
    for start in range(0, datasets, batch):
        sl = slice(start, min(start + batch, datasets))
        g = sl.stop - sl.start
        prob = make_problem(n, ystar[sl], s2star[sl], eps_mean, eps_var, prior, constrained).expand(chains)
        groups = np.repeat(np.arange(g), chains)
        res = run_chains(prob, g * chains, draws, warmup, rng_chain, groups=groups)
        mu_draws = res["mu"].reshape(g, chains * draws)
        lo, hi = hpd(mu_draws)
        covered.append((lo <= mu) & (mu <= hi))
        length.append(hi - lo)
    naive_cov, naive_len = [], []
    for i in range(datasets):
        drawn = naive_draws(n, ystar[i], max(s2star[i], 1e-6), prior, 2000, rng_naive, constrained)
        if drawn is None:  # no feasible naive mass: the naive interval misses the truth
            naive_cov.append(False)
            naive_len.append(0.0)
            continue
        m, _ = drawn
        lo, hi = hpd(m)
        naive_cov.append(lo <= mu <= hi)
        naive_len.append(hi - lo)
    return CoverageResult(np.concatenate(covered), np.concatenate(length), np.array(naive_cov), np.array(naive_len))
