"""Naive plug-in for linear regression: the noisy statistics taken as exact.

The same sampler as MCMC-fixedS (Alparslan et al. Algorithm 2) with S_j = Shat_j
and sigma_z = 0, i.e. the exact-data likelihood z_j | S_j ~ N(S_j theta, sigma_y^2 S_j)
of Proposition 3.1 evaluated at the released values.  Shat_j must be positive
definite for that likelihood to exist, so it is lifted to the nearest PSD matrix with
a tiny eigenvalue floor (1e-9 of its largest eigenvalue).  This is the
noise-ignoring baseline that calibration studies must show to be wrong.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..options import MCMCOptions
from .linreg_common import (check_memory, theta_draw_values, check_dims, make_posterior, nearest_psd, prior_arrays,
                            theta_precision, tri_solve, tri_solve_t, chol)
from .linreg_fixeds import run_fixeds, sigma2_start


def naive_inputs(xtx: np.ndarray) -> np.ndarray:
    top = np.max(np.linalg.eigvalsh(xtx), axis=-1)
    floor = 1e-9 * np.maximum(top, 1e-300)
    return np.stack([nearest_psd(s, f) for s, f in zip(xtx.reshape(-1, *xtx.shape[-2:]), floor.ravel())]
                    ).reshape(xtx.shape)


@dataclass(frozen=True)
class NaiveOptions(MCMCOptions):
    """Options of engine ``naive`` (linear-regression; a Gibbs chain on the noisy statistics taken as
    exact): draws, warmup, chains, seed."""

    engine: ClassVar[str] = "naive"
    draw_values: ClassVar = staticmethod(theta_draw_values)


def naive(model, options):
    """Engine ``naive``: the noisy moments taken as exact. Reads the model's release (its parties' noisy
    moments, resolved by ``release.regression_data()``) and parsed prior; names its draws through the model."""
    release, prior = model.release, model.prior.spec
    data = release.regression_data()
    check_dims(data, prior)
    check_memory("naive", data, options)
    rng = options.rng()
    S = naive_inputs(data.xtx)[None]
    zhat = data.xty[None]
    sz2 = np.zeros(data.J)
    s2 = sigma2_start(prior)
    prec, shift = prior_arrays(prior)
    P, h = theta_precision(S, zhat, np.array([s2]), sz2, prec, shift)
    L = chol(P)
    theta0 = np.tile(tri_solve_t(L, tri_solve(L, h))[0], (options.chains, 1))
    out = run_fixeds(S, zhat, sz2, prior, options.draws, options.warmup, rng, theta0, np.full(options.chains, s2))
    return make_posterior(model, "naive", data, {"theta": out["theta"], "sigma2": out["sigma2"]},
                          options, sample_stats={"accept_sigma2": out["accept_sigma2"]},
                          attrs={"note": "noise ignored: released statistics treated as exact"})
