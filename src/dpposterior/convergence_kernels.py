"""The rank normalisation, the bulk ESS and the split R-hat of :mod:`dpposterior.convergence`, compiled (numba).

:func:`dpposterior.convergence.diagnose` rank-normalises every component twice -- its values and their distances
from its median (the folded values) -- with about a dozen numpy passes over all the draws (a sort, gathers,
the tie groups, a scatter, a stable sort of the distances, ...).  Here each component's draws are sorted once
and both sets of ranks follow in linear time while they are in cache: the distances, in the order of the
sorted values, fall and then rise, two sorted runs that a merge puts in order.

The normal scores are looked up in the same table by the same integer (twice the average rank, minus 2), so
they are numpy's bit for bit: a rank is an integer whatever the sort, and ties share their average rank
whatever order they come in (``tests/test_convergence.py`` compares the two on ties, odd and even sizes).
Only finite draws come here (a non-finite block takes the numpy path).

:func:`ess_rows` and :func:`rhat_rows` are ``convergence._ess_rows`` and ``_rhat_rows`` (Vehtari et al. 2021,
eqs. 10-13 with Geyer's initial positive and monotone sequences; BDA3 eq. 11.4) on the rank-normalised rows: the
autocovariances are summed directly, lag by lag, and only as far as Geyer's sequence reads them -- a few lags for
a chain that mixes, where an FFT computes every lag -- so they equal numpy's to rounding, not bit for bit.

Imported only by :func:`dpposterior.convergence.diagnose` for large posteriors (numba's import and the cached
kernels' load cost less than they save from about 10^7 draws on), so ``import dpposterior`` stays light.
"""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _ranked(values, index, count, table, out):
    """``out[index[t]] = table[start + end]`` for sorted ``values[:count]``, where start..end are the positions of
    the tie group holding position t (``start + end`` is twice its average rank, minus 2)."""
    j = 0
    while j < count:
        e = j
        while e + 1 < count and values[e + 1] == values[j]:
            e += 1
        score = table[j + e]
        for t in range(j, e + 1):
            out[index[t]] = score
        j = e + 1


@njit(cache=True, nogil=True)
def z_and_folded(flat, order, table, z, folded):
    """For each row of ``flat`` (K, N), all finite, and ``order`` its argsort: the normal scores
    ``table[2 rank - 2]`` of its values into ``z`` and of their distances from the row's median (``np.median``'s)
    into ``folded``."""
    K, N = flat.shape
    half = N // 2
    ordered = np.empty(N)
    dist = np.empty(N)
    where = np.empty(N, np.int64)
    for k in range(K):
        row = flat[k]
        index = order[k]
        for t in range(N):
            ordered[t] = row[index[t]]
        _ranked(ordered, index, N, table, z[k])
        if N % 2:
            median = ordered[half]
        else:
            median = (ordered[half - 1] + ordered[half]) / 2.0
        # below the median the distances fall along the sorted values, from it on they rise: merge the two runs
        right = 0
        while right < N and ordered[right] < median:
            right += 1
        left = right - 1
        for t in range(N):
            if right < N and (left < 0 or abs(ordered[right] - median) <= abs(ordered[left] - median)):
                dist[t] = abs(ordered[right] - median)
                where[t] = index[right]
                right += 1
            else:
                dist[t] = abs(ordered[left] - median)
                where[t] = index[left]
                left -= 1
        _ranked(dist, where, N, table, folded[k])


@njit(cache=True, nogil=True, error_model="numpy")
def _mean(values):
    """The mean with one correction pass (as accurate as numpy's pairwise sum on offset draws, 1e8 + noise)."""
    n = values.shape[0]
    first = 0.0
    for v in values:
        first += v
    first /= n
    rest = 0.0
    for v in values:
        rest += v - first
    return first + rest / n


@njit(cache=True, nogil=True, error_model="numpy")
def _autocov_mean(d, lag):
    """The chains' mean autocovariance at ``lag`` (biased: divided by the draws) of centred (chain, draw) rows."""
    m, n = d.shape
    total = 0.0
    for c in range(m):
        s = 0.0
        for i in range(n - lag):
            s += d[c, i] * d[c, i + lag]
        total += s / n
    return total / m


@njit(cache=True, nogil=True, error_model="numpy")
def ess_rows(x, resolution, out):
    """``convergence._ess_rows`` of (K, chain, draw) float64 into ``out`` (K,): the same estimator, its
    autocovariances summed directly lag by lag instead of by FFT, and only as far as Geyer's initial positive
    sequence reads them (a few lags for a chain that mixes) -- equal to the numpy version to rounding."""
    K, m, n = x.shape
    size = m * n
    j_max = max((n - 1) // 2 - 1, 0)
    floor = 1.0 / np.log10(size)
    d = np.empty((m, n))
    means = np.empty(m)
    for k in range(K):
        row = x[k]
        lo, hi, bad = np.inf, -np.inf, False
        for c in range(m):
            for i in range(n):
                v = row[c, i]
                if v != v:
                    bad = True
                lo = min(lo, v)
                hi = max(hi, v)
        if bad:
            out[k] = np.nan
            continue
        if hi - lo < resolution:
            out[k] = size
            continue
        for c in range(m):
            means[c] = _mean(row[c])
            for i in range(n):
                d[c, i] = row[c, i] - means[c]
        mean_var = _autocov_mean(d, 0) * n / (n - 1.0)
        var_plus = mean_var * (n - 1.0) / n
        if m > 1:
            grand = _mean(means)
            spread = 0.0
            for c in range(m):
                spread += (means[c] - grand) ** 2
            var_plus += spread / (m - 1)
        rho1 = 1.0 - (mean_var - _autocov_mean(d, 1)) / var_plus
        if rho1 != rho1:
            out[k] = np.nan
            continue
        # pairs P_0 = 1 + rho_1, P_j = rho_2j + rho_2j+1 up to the first that is not positive (or j_max)
        pair = 1.0 + rho1
        running = pair  # min(P_0..P_j): the monotone sequence
        kept = 0.0
        even = 1.0
        j = 0
        while pair > 0 and j < j_max:
            kept += running
            j += 1
            even = 1.0 - (mean_var - _autocov_mean(d, 2 * j)) / var_plus
            odd = 1.0 - (mean_var - _autocov_mean(d, 2 * j + 1)) / var_plus
            pair = even + odd
            running = min(running, pair)
        if j == 0:
            rho_2j = 1.0
        elif even > 0 or pair >= 0:
            rho_2j = even
        else:
            rho_2j = 0.0
        tau = -1.0 + 2.0 * kept + rho_2j
        if floor > tau:
            tau = floor
        out[k] = size / tau


@njit(cache=True, nogil=True, error_model="numpy")
def rhat_rows(x, out):
    """``convergence._rhat_rows`` of (K, chain, draw) float64 into ``out`` (K,): sqrt(((n-1)/n W + B/n) / W)."""
    K, m, n = x.shape
    means = np.empty(m)
    for k in range(K):
        row = x[k]
        within = 0.0
        for c in range(m):
            means[c] = _mean(row[c])
            s = 0.0
            for i in range(n):
                s += (row[c, i] - means[c]) ** 2
            within += s / (n - 1.0)
        within /= m
        grand = _mean(means)
        spread = 0.0
        for c in range(m):
            spread += (means[c] - grand) ** 2
        between = n * spread / (m - 1.0)
        out[k] = np.sqrt((between / within + n - 1.0) / n)
