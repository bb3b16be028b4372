"""MCMC plumbing shared by the engines: chains on threads, warm-up windows, step adaptation.

Sources: Robbins-Monro adaptation of a log step size towards a target acceptance rate, with gain
t^-0.6 and used during warm-up only, so the kept chain is a plain Metropolis-Hastings chain
(Andrieu & Thoms 2008, Sec. 4-5); warm-up windows of doubling length, each ending in an
adaptation (as Stan's windowed adaptation, Stan Reference Manual, "HMC algorithm parameters");
chains as independent streams spawned from one ``numpy.random.Generator`` (NumPy's
``Generator.spawn``), so a chain's draws do not depend on how chains are spread over threads.

Used by ``gaussian_gibbs`` (threads, windows), ``linreg_fixeds`` (threads, Robbins-Monro in its
compiled kernel), ``linreg_normalx`` (:class:`RobbinsMonroAdapter`) and ``da_mcmc``
(Robbins-Monro on its random-walk scales).  The two forms of the
Robbins-Monro update below are kept because the engines' stored draws depend on the last bit of
each (tests/test_bit_identical.py).
"""

from __future__ import annotations

import math

import numba
import numpy as np

#: exponent of the Robbins-Monro gain t^-RM_DECAY (in (1/2, 1]: the gains sum to infinity, their squares do not)
RM_DECAY = 0.6

#: chains x iterations above which chains run on threads (below it the thread start costs more)
PARALLEL_MIN_ITERATIONS = 20_000


# ---------------------------------------------------------------------------------------
# step adaptation
# ---------------------------------------------------------------------------------------
def robbins_monro(log_value, accept_prob, target, t):
    """One Robbins-Monro step on a log scale: log s + (accept - target) / t^0.6 (``t`` >= 1).

    Scalars or arrays; :func:`nb_robbins_monro` is the same arithmetic for compiled kernels."""
    return log_value + (accept_prob - target) / t ** RM_DECAY


nb_robbins_monro = numba.njit(cache=True, nogil=True)(robbins_monro)


class RobbinsMonroAdapter:
    """Robbins-Monro on a log scale with its own counter: log s <- log s + sign g_t (accept - target).

    ``sign=-1`` for parameters where larger values mean smaller moves (a Wishart proposal's
    alpha); ``lower`` / ``upper`` clip the log value.  Only called during warm-up, so the kept
    chain is a plain MH chain.  The gain is multiplied as g_t = 1/t^0.6, not divided as in
    :func:`robbins_monro`: the two round differently in the last bit, and the linear-regression
    engines that use this class store draws made with this form.
    """

    def __init__(self, log_value: np.ndarray, target: float, sign: float = 1.0, lower=None, upper=None):
        self.log_value = np.asarray(log_value, float).copy()
        self.target = target
        self.sign = sign
        self.lower = lower
        self.upper = upper
        self.t = 0

    @property
    def value(self) -> np.ndarray:
        return np.exp(self.log_value)

    def update(self, accept_prob: np.ndarray) -> None:
        self.t += 1
        gain = 1.0 / (self.t ** RM_DECAY)
        self.log_value = self.log_value + self.sign * gain * (np.asarray(accept_prob) - self.target)
        if self.lower is not None or self.upper is not None:
            self.log_value = np.clip(self.log_value, self.lower if self.lower is not None else -np.inf,
                                     self.upper if self.upper is not None else np.inf)


# ---------------------------------------------------------------------------------------
# warm-up windows
# ---------------------------------------------------------------------------------------
def warmup_windows(warmup: int) -> list[int]:
    """Warm-up windows of doubling length from 25 (a short tail merged into the last); an engine
    adapts its proposal at the end of each."""
    windows = []
    remaining, size = warmup, 25
    while remaining > 0:
        size = min(size, remaining)
        if remaining - size < size:  # merge a short tail into the last window
            size = remaining
        windows.append(size)
        remaining -= size
        size *= 2
    return windows


# ---------------------------------------------------------------------------------------
# chains on threads
# ---------------------------------------------------------------------------------------
def chain_workers(chains: int, iterations: int) -> int:
    """Threads for the chains: all cores when the run is long enough to gain from them.

    ``iterations``: per chain (or a cost in the same unit).  Capped by ``NUMBA_NUM_THREADS``
    (set it to 1 for a single-threaded process)."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    cores = min(cores, int(numba.config.NUMBA_NUM_THREADS))
    if chains < 2 or chains * iterations < PARALLEL_MIN_ITERATIONS:
        return 1
    return max(1, min(cores, chains))


def map_chains(fn, chains: int, workers: int) -> list:
    """``[fn(0), ..., fn(chains - 1)]``, the chains spread over ``workers`` threads.

    ``fn`` must run a compiled kernel that releases the GIL (``nogil``) and give each chain its own
    generator, so the result is the same whatever the number of threads."""
    if workers <= 1:
        return [fn(c) for c in range(chains)]
    from concurrent.futures import ThreadPoolExecutor

    blocks = [range(c, chains, workers) for c in range(workers)]
    with ThreadPoolExecutor(workers) as ex:
        parts = list(ex.map(lambda b: [(c, fn(c)) for c in b], blocks))
    out = [None] * chains
    for part in parts:
        for c, v in part:
            out[c] = v
    return out


@numba.njit(cache=True, inline="always")
def splitmix64(z):
    """The splitmix64 finaliser (Steele, Lea & Flood 2014) of a uint64 (or an array of them): the mixing step of
    the counter-based random numbers and derived seeds."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@numba.njit(cache=True, inline="always")
def counter_uniform(key, a, b, c):
    """A uniform in (0, 1) from the counter (a, b, c) under ``key`` (splitmix64 chained): random numbers a kernel
    draws as it goes, in any number, reproducible from one key the chain's generator gives."""
    z = splitmix64(key ^ (np.uint64(a) * np.uint64(0x9E3779B97F4A7C15)))
    z = splitmix64(z + np.uint64(b) * np.uint64(0xD1B54A32D192ED03))
    z = splitmix64(z + np.uint64(c) * np.uint64(0x8CB92BA72F3D8DD7))
    return (np.float64(z >> np.uint64(11)) + 0.5) * (1.0 / 9007199254740992.0)


@numba.njit(cache=True, nogil=True)
def pick_from_log_weights(w, size, top, u):
    """Inverse-CDF draw of an index in [0, size) with probabilities proportional to exp(w[:size]) (``top``: their
    maximum; ``u``: a uniform).  ``w`` is overwritten with the unnormalised weights.  An index of zero weight is
    never picked; the last index is the fallback of round-off."""
    acc = 0.0
    for s in range(size):
        w[s] = math.exp(w[s] - top) if w[s] > -np.inf else 0.0
        acc += w[s]
    target = u * acc
    run = 0.0
    for s in range(size):
        run += w[s]
        if run >= target and w[s] > 0.0:
            return s
    return size - 1
