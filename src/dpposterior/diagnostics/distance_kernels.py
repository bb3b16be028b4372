"""Compiled pairwise distances for the calibration studies' MMD (``diagnostics.metrics``): importing scipy.spatial costs every worker ~0.08 s.

The same numbers as ``scipy.spatial.distance``'s ``cdist(x, y, "sqeuclidean")`` and ``pdist(x)`` (Euclidean,
condensed order), bit for bit: each pair's squared differences are added coordinate by coordinate from 0, in
the order scipy adds them, and the Euclidean distance is the correctly rounded square root of that sum
(``tests/test_metrics_distances.py``).  They stand in for scipy.spatial because importing it costs every
calibration worker ~0.08 s (the whole of scipy.sparse comes with it), and numpy's broadcasting twins are
2.5x slower per call (a 400-trial study would pay seconds to save the 0.08 s).  No ``fastmath``: the
additions must not be reordered or contracted.
"""

from __future__ import annotations

import math

import numba
import numpy as np

_jit = numba.njit(cache=True, nogil=True)


@_jit
def distances(x, y, condensed):
    """Pairwise distances between rows, one kernel for both uses (one compile at the first run after install,
    one cache load per process):

    * ``condensed`` False: the (n, m) squared Euclidean distances between the rows of ``x`` (n, d) and
      ``y`` (m, d), flattened row by row -- ``cdist(x, y, "sqeuclidean").ravel()``;
    * ``condensed`` True: the Euclidean distances between the rows of ``x``, pairs (i, j) with i < j in row
      order -- ``pdist(x)`` (``y`` is not read).
    """
    n, d = x.shape
    if condensed:
        out = np.empty(n * (n - 1) // 2)
        at = 0
        for i in range(n - 1):
            for j in range(i + 1, n):
                total = 0.0
                for k in range(d):
                    diff = x[i, k] - x[j, k]
                    total += diff * diff
                out[at] = math.sqrt(total)
                at += 1
        return out
    m = y.shape[0]
    out = np.empty(n * m)
    for i in range(n):
        for j in range(m):
            total = 0.0
            for k in range(d):
                diff = x[i, k] - y[j, k]
                total += diff * diff
            out[i * m + j] = total
    return out
