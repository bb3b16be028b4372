"""The rank normalisation of :mod:`dpposterior.convergence` as one compiled pass per component (numba).

:func:`dpposterior.convergence.diagnose` rank-normalises every component twice -- its values and their distances
from its median (the folded values) -- with about a dozen numpy passes over all the draws (a sort, gathers,
the tie groups, a scatter, a stable sort of the distances, ...).  Here each component's draws are sorted once
and both sets of ranks follow in linear time while they are in cache: the distances, in the order of the
sorted values, fall and then rise, two sorted runs that a merge puts in order.

The normal scores are looked up in the same table by the same integer (twice the average rank, minus 2), so
they are numpy's bit for bit: a rank is an integer whatever the sort, and ties share their average rank
whatever order they come in (``tests/test_convergence.py`` compares the two on ties, odd and even sizes).
Only finite draws come here (a non-finite block takes the numpy path).  Imported only by
:func:`dpposterior.convergence.diagnose` for large posteriors (numba's import and the cached kernel's load cost
less than they save from about 10^7 draws on), so ``import dpposterior`` stays light.
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
