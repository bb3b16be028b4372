"""Distances between two sets of posterior draws (Xiong, Ju & Zhang Sec. 4; Bernstein & Sheldon Fig. 1c).

``mmd`` -- maximum mean discrepancy with a Gaussian kernel, bandwidth by the
median heuristic on the pooled sample (Gretton et al. 2012, unbiased U-statistic).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist, pdist


def _as_2d(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x.reshape(x.shape[0], -1)


def median_bandwidth(x, y) -> float:
    pooled = np.vstack([_as_2d(x), _as_2d(y)])
    if len(pooled) > 2000:  # the median of a subsample is as good and O(n^2) cheaper
        pooled = pooled[np.random.default_rng(0).choice(len(pooled), 2000, replace=False)]
    d = pdist(pooled)
    med = np.median(d[d > 0]) if np.any(d > 0) else 1.0
    return float(med)


def mmd(x, y, bandwidth: float | None = None) -> float:
    """Unbiased squared MMD between samples ``x`` (n, d) and ``y`` (m, d); Gaussian kernel."""
    x, y = _as_2d(x), _as_2d(y)
    if x.shape[1] != y.shape[1]:
        raise ValueError("mmd: x and y must have the same dimension")
    h = bandwidth if bandwidth is not None else median_bandwidth(x, y)
    gamma = 1.0 / (2.0 * h * h)
    kxx = np.exp(-gamma * cdist(x, x, "sqeuclidean"))
    kyy = np.exp(-gamma * cdist(y, y, "sqeuclidean"))
    kxy = np.exp(-gamma * cdist(x, y, "sqeuclidean"))
    n, m = len(x), len(y)
    sxx = (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
    syy = (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
    return float(sxx + syy - 2.0 * kxy.mean())
