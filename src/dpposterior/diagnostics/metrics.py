"""Distances between two sets of posterior draws (Xiong, Ju & Zhang Sec. 4; Bernstein & Sheldon Fig. 1c).

``mmd`` -- maximum mean discrepancy with a Gaussian kernel, bandwidth by the
median heuristic on the pooled sample (Gretton et al. 2012, unbiased U-statistic).  Its distances come
from a compiled kernel equal to scipy.spatial.distance's ``cdist``/``pdist`` bit for bit
(``diagnostics/distance_kernels.py``): importing scipy.spatial cost every calibration worker ~0.08 s.
"""

from __future__ import annotations

import numpy as np


def _as_2d(x) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    return x[:, None] if x.ndim == 1 else x.reshape(x.shape[0], -1)


def sq_distances(x, y) -> np.ndarray:
    """(n, m) squared Euclidean distances between the rows of ``x`` (n, d) and ``y`` (m, d): scipy's
    ``cdist(x, y, "sqeuclidean")``, bit for bit (summed coordinate by coordinate, not |x|^2 + |y|^2 - 2 x.y,
    which cancels for near points)."""
    from .distance_kernels import distances  # numba: imported where used

    x, y = np.ascontiguousarray(_as_2d(x)), np.ascontiguousarray(_as_2d(y))
    return distances(x, y, False).reshape(x.shape[0], y.shape[0])


def pair_distances(x) -> np.ndarray:
    """Euclidean distances between the rows of ``x``, pairs i < j in row order: scipy's ``pdist(x)``, bit for bit."""
    from .distance_kernels import distances

    x = np.ascontiguousarray(_as_2d(x))
    return distances(x, x, True)


def median_bandwidth(x, y) -> float:
    pooled = np.vstack([_as_2d(x), _as_2d(y)])
    if len(pooled) > 2000:  # the median of a subsample is as good and O(n^2) cheaper
        pooled = pooled[np.random.default_rng(0).choice(len(pooled), 2000, replace=False)]
    d = pair_distances(pooled)
    med = np.median(d[d > 0]) if np.any(d > 0) else 1.0
    return float(med)


def mmd(x, y, bandwidth: float | None = None) -> float:
    """Unbiased squared MMD between samples ``x`` (n, d) and ``y`` (m, d); Gaussian kernel."""
    x, y = _as_2d(x), _as_2d(y)
    if x.shape[1] != y.shape[1]:
        raise ValueError("mmd: x and y must have the same dimension")
    h = bandwidth if bandwidth is not None else median_bandwidth(x, y)
    gamma = 1.0 / (2.0 * h * h)
    kxx = np.exp(-gamma * sq_distances(x, x))
    kyy = np.exp(-gamma * sq_distances(y, y))
    kxy = np.exp(-gamma * sq_distances(x, y))
    n, m = len(x), len(y)
    sxx = (kxx.sum() - np.trace(kxx)) / (n * (n - 1))
    syy = (kyy.sum() - np.trace(kyy)) / (m * (m - 1))
    return float(sxx + syy - 2.0 * kxy.mean())


# ---------------------------------------------------------------------------
# Xiong, Ju & Zhang Sec. 4.1 metrics: C2ST, NLOG, LMD, and per-marginal KS (Fig. 3, 12).
# ---------------------------------------------------------------------------

def c2st(x, y, folds: int = 5, seed: int = 0, max_samples: int = 2000, epochs: int = 300,
         hidden: int | None = None) -> float:
    """Classifier two-sample test (Lopez-Paz & Oquab 2016): cross-validated accuracy.

    A small MLP (two hidden layers of 10*d ReLU units, as in sbi's c2st) is trained
    full-batch with Adam to tell ``x`` from ``y`` (pooled, z-scored; equal sizes, at
    most ``max_samples`` each) and scored on held-out folds.  0.5 = indistinguishable,
    1.0 = disjoint.  Deterministic for a given ``seed``.
    """
    import torch

    x, y = _as_2d(x), _as_2d(y)
    if x.shape[1] != y.shape[1]:
        raise ValueError("c2st: x and y must have the same dimension")
    rng = np.random.default_rng(seed)
    n = min(len(x), len(y), max_samples)
    x = x[rng.choice(len(x), n, replace=False)]
    y = y[rng.choice(len(y), n, replace=False)]
    data = np.vstack([x, y])
    mean, std = data.mean(0), data.std(0)
    data = (data - mean) / np.where(std > 0, std, 1.0)
    labels = np.r_[np.zeros(n), np.ones(n)]
    order = rng.permutation(2 * n)
    data, labels = data[order], labels[order]
    d = data.shape[1]
    h = hidden or 10 * d
    fold_of = np.arange(2 * n) % folds
    gen = torch.Generator().manual_seed(seed)
    scores = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny nets: more threads only contend on a shared machine
    try:
        scores = _c2st_folds(torch, data, labels, fold_of, folds, d, h, gen, epochs)
    finally:
        torch.set_num_threads(threads)
    return float(np.mean(scores))


def _c2st_folds(torch, data, labels, fold_of, folds, d, h, gen, epochs):
    scores = []
    for f in range(folds):
        tr, te = fold_of != f, fold_of == f
        xt = torch.as_tensor(data[tr], dtype=torch.float32)
        yt = torch.as_tensor(labels[tr], dtype=torch.float32)
        torch.manual_seed(int(torch.randint(0, 2**31 - 1, (1,), generator=gen)))
        net = torch.nn.Sequential(torch.nn.Linear(d, h), torch.nn.ReLU(), torch.nn.Linear(h, h), torch.nn.ReLU(),
                                  torch.nn.Linear(h, 1)).float()  # float32 whatever the global default
        opt = torch.optim.Adam(net.parameters(), lr=1e-2)
        for _ in range(epochs):
            loss = torch.nn.functional.binary_cross_entropy_with_logits(net(xt)[:, 0], yt)
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            pred = (net(torch.as_tensor(data[te], dtype=torch.float32))[:, 0] > 0).numpy()
        scores.append(np.mean(pred == labels[te].astype(bool)))
    return scores


def nlog(draws, truth, bandwidth=None) -> float:
    """NLOG: -log of the posterior density at the true parameter, from draws by a Gaussian KDE.

    ``draws`` (n, d) on the same (unconstrained) scale as ``truth`` (d,).  Engines with
    an explicit density (SPPE's flow) can evaluate it exactly instead.
    """
    from scipy.stats import gaussian_kde

    draws = _as_2d(draws)
    truth = np.atleast_1d(np.asarray(truth, float)).reshape(-1, 1)
    kde = gaussian_kde(draws.T, bw_method=bandwidth)
    return float(-kde.logpdf(truth)[0])


def lmd(model, draws, rng=None, n: int = 1000) -> float:
    """LMD: log of the median l2 distance from s_dp simulated at posterior draws to the observed s_dp.

    ``model`` is a :class:`dpposterior.sbi.SimulatorModel`; ``draws`` (m, d) unconstrained.
    """
    rng = np.random.default_rng(rng)
    draws = _as_2d(draws)
    pick = draws[rng.choice(len(draws), min(n, len(draws)), replace=False)]
    sdp = model.privatize(model.statistics(pick, rng), rng)
    return float(np.log(np.median(np.linalg.norm(sdp - model.observed, axis=1))))


def marginal_ks(x, y) -> np.ndarray:
    """Two-sample Kolmogorov-Smirnov statistic of every marginal (column) of x against y."""
    from scipy.stats import ks_2samp

    x, y = _as_2d(x), _as_2d(y)
    if x.shape[1] != y.shape[1]:
        raise ValueError("marginal_ks: x and y must have the same dimension")
    return np.array([ks_2samp(x[:, j], y[:, j]).statistic for j in range(x.shape[1])])
