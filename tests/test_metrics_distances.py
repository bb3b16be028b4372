"""diagnostics.metrics computes its distances with compiled kernels (diagnostics/distance_kernels.py) in
scipy.spatial.distance's order, so the calibration studies' MMD is what it was with ``cdist``/``pdist``, bit
for bit (scipy.spatial is no longer imported by calibration workers)."""

from __future__ import annotations

import numpy as np
import pytest

from dpposterior.diagnostics import metrics

distance = pytest.importorskip("scipy.spatial.distance")


@pytest.mark.parametrize("seed", range(40))
def test_distances_equal_scipy_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    d = int(rng.integers(1, 40))
    n, m = (int(v) for v in rng.integers(2, 250, size=2))
    x = rng.standard_normal((n, d)) * rng.exponential(5.0) + rng.normal(0, 100)
    y = rng.standard_normal((m, d)) * rng.exponential(1.0)
    np.testing.assert_array_equal(metrics.sq_distances(x, y), distance.cdist(x, y, "sqeuclidean"))
    pooled = np.vstack([x, y])
    np.testing.assert_array_equal(metrics.pair_distances(pooled), distance.pdist(pooled))


def test_distances_of_non_contiguous_and_one_dimensional_input():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((60, 6))[:, ::2]  # a strided view
    y = rng.standard_normal(45)               # one coordinate
    np.testing.assert_array_equal(metrics.sq_distances(x, x), distance.cdist(x, x, "sqeuclidean"))
    np.testing.assert_array_equal(metrics.pair_distances(y), distance.pdist(y[:, None]))
    assert metrics.pair_distances(np.zeros((1, 3))).shape == (0,)


def test_mmd_and_bandwidth_equal_the_scipy_formulas():
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((300, 3)), rng.standard_normal((200, 3)) + 0.3
    pooled = np.vstack([x, y])
    d = distance.pdist(pooled)
    assert metrics.median_bandwidth(x, y) == float(np.median(d[d > 0]))
    h = metrics.median_bandwidth(x, y)
    gamma = 1.0 / (2.0 * h * h)
    kxx = np.exp(-gamma * distance.cdist(x, x, "sqeuclidean"))
    kyy = np.exp(-gamma * distance.cdist(y, y, "sqeuclidean"))
    kxy = np.exp(-gamma * distance.cdist(x, y, "sqeuclidean"))
    expected = ((kxx.sum() - np.trace(kxx)) / (300 * 299) + (kyy.sum() - np.trace(kyy)) / (200 * 199)
                - 2.0 * kxy.mean())
    assert metrics.mmd(x, y) == float(expected)
