"""A reference posterior for the ``sir`` family by a time-change grid.

Xiong, Ju & Zhang Sec. 4.1 and App. E.1: SIR jump process with infection rate beta S I / K and
recovery rate gamma I, released as s_i = Binomial(N, (I(t_i) + m) / (K + 2m)) / N.

**Time change.**  Write R0 = beta / gamma and tau = gamma t.  In tau-time the rates are
R0 S I / K and I, so the jump chain (including the event cap, which counts events) depends on R0
alone and

    I_{beta, gamma}(t)  =  I_{R0, 1}(gamma t)     in distribution, jointly over t.

One trajectory simulated at (R0, 1) and read at tau = gamma_j t_i for a whole grid of gamma_j is
therefore an exact draw of I(t_1..t_L) at *every* (R0, gamma_j).  The release's likelihood
p(s | R0, gamma_j) = E[prod_i Binom(N s_i; N, p(I(t_i)))] is estimated without bias at every grid
point by averaging over T trajectories; the posterior on the grid is prior x that estimate.  Its
cost is T trajectories per R0 grid value, not per (R0, gamma) pair.

The grid is in (log R0, log gamma); log beta = log R0 + log gamma is linear, so the Jacobian is
constant and the prior density is evaluated at (log beta, log gamma).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats
from scipy.special import logsumexp

from ..sbi.sir_simulator import simulate_sir


def time_change_log_likelihoods(log_r0: float, log_gamma: np.ndarray, observed: np.ndarray, mechanism,
                                times: np.ndarray, trajectories: int, rng: np.random.Generator,
                                initial_infected: int = 1, event_cap: int = 2_000_000) -> np.ndarray:
    """Log density of the release under each of ``trajectories`` simulated epidemics at
    R0 = exp(log_r0) and every gamma = exp(log_gamma[j]): array (trajectories, len(log_gamma)).

    ``mechanism`` is the release's :class:`~dpposterior.mechanisms.BinomialTrajectory`."""
    log_gamma = np.asarray(log_gamma, float)
    times = np.asarray(times, float)
    observed = np.asarray(observed, float)
    if observed.shape != times.shape:
        raise ValueError("observed must have one value per time")
    tau = np.exp(log_gamma)[:, None] * times[None, :]               # (G, L) tau-times to read
    query, inverse = np.unique(tau.ravel(), return_inverse=True)    # sorted, as the simulator needs
    r0 = float(np.exp(log_r0))
    infected = simulate_sir(np.full(trajectories, r0), np.ones(trajectories), rng,
                            population=mechanism.population, initial_infected=initial_infected,
                            times=query, event_cap=event_cap)       # (T, Q)
    at = infected[:, inverse].reshape(trajectories, *tau.shape)    # (T, G, L)
    k = np.rint(observed * mechanism.trials)
    return stats.binom.logpmf(k, mechanism.trials, mechanism.success_prob(at)).sum(-1)


@dataclass
class GridPosterior:
    """Posterior mass on a (log R0, log gamma) grid."""

    log_r0: np.ndarray          # (A,) grid values
    log_gamma: np.ndarray       # (G,)
    log_likelihood: np.ndarray  # (A, G) log of the mean over trajectories
    log_prior: np.ndarray       # (A, G)
    trajectories: np.ndarray    # (A,) trajectories behind each row

    @property
    def log_weight(self) -> np.ndarray:
        lw = self.log_likelihood + self.log_prior
        return lw - logsumexp(lw)

    def theta(self) -> np.ndarray:
        """Grid points as (log beta, log gamma), shape (A * G, 2), in log_weight's ravel order."""
        a, g = np.meshgrid(self.log_r0, self.log_gamma, indexing="ij")
        return np.column_stack([(a + g).ravel(), g.ravel()])

    def moments(self) -> tuple[np.ndarray, np.ndarray]:
        w = np.exp(self.log_weight.ravel())
        th = self.theta()
        mean = w @ th
        return mean, np.sqrt(w @ (th - mean) ** 2)

    def sample(self, draws: int, rng: np.random.Generator) -> np.ndarray:
        """Draws in (log beta, log gamma): a grid cell by its mass, then uniform within the cell
        (the grid's half steps), so that the draws are continuous.  The jitter adds step^2 / 12 of
        variance per (log R0, log gamma) axis (about 0.4% of the sd of log beta for sir-eps10)."""
        w = np.exp(self.log_weight.ravel())
        cell = rng.choice(w.size, size=draws, p=w / w.sum())
        ia, ig = np.unravel_index(cell, self.log_weight.shape)
        da = np.diff(self.log_r0).mean() if self.log_r0.size > 1 else 0.0
        dg = np.diff(self.log_gamma).mean() if self.log_gamma.size > 1 else 0.0
        a = self.log_r0[ia] + da * (rng.random(draws) - 0.5)
        g = self.log_gamma[ig] + dg * (rng.random(draws) - 0.5)
        return np.column_stack([a + g, g])


def check_grid(log_r0, log_gamma) -> tuple[np.ndarray, np.ndarray]:
    """Both axes as arrays, or a ValueError unless each is increasing and evenly spaced
    (:meth:`GridPosterior.sample` jitters by one cell width)."""
    out = []
    for name, axis in (("log_r0", log_r0), ("log_gamma", log_gamma)):
        axis = np.asarray(axis, float)
        steps = np.diff(axis) if axis.ndim == 1 else np.array([np.nan])
        if axis.ndim != 1 or axis.size < 1 or np.any(~(steps > 0)) or not np.allclose(steps, steps.mean() if steps.size else 0):
            raise ValueError(f"{name} must be an increasing, evenly spaced grid (cells of one width)")
        out.append(axis)
    return out[0], out[1]


def grid_posterior(log_r0, log_gamma, log_likelihood_sum, trajectories, prior) -> GridPosterior:
    """Assemble a :class:`GridPosterior` from per-row log-sum-exp likelihoods (A, G) over
    ``trajectories`` (A,) simulations and a ``prior`` on (log beta, log gamma) with ``log_prob``
    (e.g. the family's :class:`~dpposterior.sbi.GaussianPrior`)."""
    log_r0, log_gamma = check_grid(log_r0, log_gamma)
    trajectories = np.asarray(trajectories, float)
    if trajectories.shape != log_r0.shape or np.any(trajectories <= 0):
        raise ValueError("trajectories must give a positive count for every log_r0 row")
    if np.shape(log_likelihood_sum) != (log_r0.size, log_gamma.size):
        raise ValueError(f"log_likelihood_sum must have shape ({log_r0.size}, {log_gamma.size})")
    loglik = np.asarray(log_likelihood_sum, float) - np.log(trajectories)[:, None]
    a, g = np.meshgrid(log_r0, log_gamma, indexing="ij")
    th = np.column_stack([(a + g).ravel(), g.ravel()])
    log_prior = np.asarray(prior.log_prob(th), float).reshape(a.shape)
    return GridPosterior(log_r0, log_gamma, loglik, log_prior, trajectories)


def release_log_likelihoods(release, log_r0: float, log_gamma, trajectories: int,
                            rng: np.random.Generator) -> np.ndarray:
    """:func:`time_change_log_likelihoods` for a ``sir`` release (its mechanism, times, start and event cap)."""
    return time_change_log_likelihoods(log_r0, log_gamma, release.statistics.infected.array(), release.mechanism(),
                                       np.asarray(release.times, float), int(trajectories), rng,
                                       release.initial_infected, release.event_cap)


def reference_posterior(release, log_r0, log_gamma, trajectories: int, rng: np.random.Generator,
                        prior=None) -> GridPosterior:
    """The grid posterior of a ``sir`` release (serial; ``benchmarks/sir_reference.py`` runs the
    same computation in checkpointed parallel chunks): ``trajectories`` epidemics per log R0 value."""
    from ..families.sir import parse_prior

    prior = parse_prior(prior, release)
    log_r0, log_gamma = check_grid(log_r0, log_gamma)   # before any simulation
    if int(trajectories) < 1:
        raise ValueError("trajectories must be >= 1")
    rows = [logsumexp(release_log_likelihoods(release, a, log_gamma, trajectories, rng), axis=0) for a in log_r0]
    return grid_posterior(log_r0, log_gamma, np.array(rows), np.full(len(rows), float(trajectories)), prior)
