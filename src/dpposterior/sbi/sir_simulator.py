"""Exact stochastic simulation (Gillespie 1977) of the SIR Markov jump process, compiled with numba.

Xiong, Ju & Zhang Sec. 4.1 and App. E.1: a closed population of K people,
infections at rate beta S I / K, recoveries at rate gamma I, start
(S, I, R) = (K - 1, 1, 0); the infected counts I(t) are recorded at the given
times.  As in the authors' simulator a trajectory stops after ``event_cap``
events (2,000,000 by default); I then stays at its last value.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def _gillespie_batch(beta, gamma, population, initial_infected, times, event_cap, seed):
    np.random.seed(seed)
    n = beta.shape[0]
    n_times = times.shape[0]
    out = np.empty((n, n_times), np.int64)
    out_s = np.empty((n, n_times), np.int64)
    for k in range(n):
        s = population - initial_infected
        i = initial_infected
        t = 0.0
        j = 0
        events = 0
        b = beta[k] / population
        g = gamma[k]
        while j < n_times:
            if i == 0 or events >= event_cap:
                # absorbed (or capped): the state no longer changes
                while j < n_times:
                    out[k, j] = i
                    out_s[k, j] = s
                    j += 1
                break
            rate_infection = b * s * i
            total = rate_infection + g * i
            t_next = t - np.log(1.0 - np.random.random()) / total
            # the state is constant on [t, t_next): record every grid time in it
            while j < n_times and times[j] < t_next:
                out[k, j] = i
                out_s[k, j] = s
                j += 1
            if j >= n_times:
                break
            if np.random.random() * total < rate_infection:
                s -= 1
                i += 1
            else:
                i -= 1
            t = t_next
            events += 1
    return out, out_s


def simulate_sir(beta, gamma, rng: np.random.Generator, population: int = 1_000_000, initial_infected: int = 1,
                 times=None, event_cap: int = 2_000_000, return_susceptible: bool = False):
    """Infected counts I(t) (n, L) for rate vectors ``beta``, ``gamma`` (length n).

    With ``return_susceptible`` the pair (S(t), I(t)) is returned."""
    if times is None:
        times = np.arange(0, 160, 17, dtype=float)
    beta = np.ascontiguousarray(np.atleast_1d(np.asarray(beta, float)))
    gamma = np.ascontiguousarray(np.atleast_1d(np.asarray(gamma, float)))
    times = np.ascontiguousarray(np.asarray(times, float))
    seed = int(rng.integers(0, 2**31 - 1))
    if beta.shape != gamma.shape:
        raise ValueError("beta and gamma must have the same length")
    infected, susceptible = _gillespie_batch(beta, gamma, int(population), int(initial_infected), times,
                                             int(event_cap), seed)
    return (susceptible, infected) if return_susceptible else infected
