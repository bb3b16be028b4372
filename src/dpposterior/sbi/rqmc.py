"""Uniforms for the nested (R)QMC estimator of the inner integral (Xiong, Ju & Zhang eq. 11).

For each simulated (theta_i, x_i) the inner integral
I(theta, x) = int eta(s_dp | x) g(s_dp, theta) ds_dp is estimated by
(1/M) sum_j g(tau(v_j, s(x_i)), theta) with v_1..v_M either an independently
scrambled Sobol' point set (RQMC, scipy.stats.qmc; RMSE O(M^-1+delta), eq. 12)
or i.i.d. uniforms (plain MC, RMSE O(M^-1/2)).  Eq. 12 assumes bounded Hardy-Krause
variation, which an unbounded quantile (Laplace, Gaussian) composed with a log-density violates;
the measured RQMC rates (about M^-0.75 for the 9-10 dimensional flow integrands, M^-1 for
integrands with a |log u| face singularity) are in docs/benchmarks.md (Figure 7).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.stats import qmc


def inner_uniforms(n: int, m: int, dim: int, rng: np.random.Generator, rqmc: bool = True) -> np.ndarray:
    """Uniforms of shape (n, m, dim): one independently scrambled Sobol' set of m points per row.

    Values are clipped to the open interval so inverse CDFs stay finite.
    """
    if not rqmc or m == 1:
        # one Sobol' point is a uniform draw anyway; MC = i.i.d.
        u = rng.random((n, m, dim))
    else:
        u = np.empty((n, m, dim))
        seeds = rng.integers(0, 2**63 - 1, size=n)
        power_of_two = (m & (m - 1)) == 0
        with warnings.catch_warnings():
            # non-power-of-2 sizes lose the balance property but stay unbiased
            warnings.simplefilter("ignore", UserWarning)
            for i in range(n):
                engine = qmc.Sobol(d=dim, scramble=True, seed=int(seeds[i]))
                u[i] = engine.random_base2(int(np.log2(m))) if power_of_two else engine.random(m)
    tiny = np.finfo(float).eps
    return np.clip(u, tiny, 1.0 - tiny)
