"""Bayes-fixedS-fast (Alparslan, Yildirim & Birbil, Algorithm 3).

With S_j fixed at the nearest PSD matrix S~_j to Shat_j (Higham 1988) and sigma_y^2
fixed at an estimate s2, the posterior of theta is Gaussian in closed form:

    Sigma_post^{-1} = sum_j U_j + C^{-1},   U_j = S~_j (s2 S~_j + sigma_z^2 I)^{-1} S~_j,
    m_post = Sigma_post (C^{-1} m + sum_j u_j), u_j = S~_j (s2 S~_j + sigma_z^2 I)^{-1} zhat_j.

s2 is the analysis key ``sigma2_fixed``; by default the paper's crude estimate
||Y||/3 (Sec. 4.2; the README of the papers notes it is used as a variance as it
stands).  Draws are exact and iid (no warm-up); ``sigma2`` is not a variable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


import numpy as np

from ..options import EngineOptions, option
from .linreg_common import (check_memory, theta_draw_values, check_dims, chol, crude_sigma2, make_posterior, nearest_psd, prior_arrays, require_gaussian,
                            theta_precision, tri_solve, tri_solve_t)


def fast_moments(S, zhat, sz2, sigma2, prior):
    """Batched closed form: S (B, J, d, d), zhat (B|1, J, d), sigma2 (B,) -> (mean (B, d), chol of precision)."""
    prec, shift = prior_arrays(prior)
    P, h = theta_precision(S, zhat, sigma2, sz2, prec, shift)
    L = chol(P)
    return tri_solve_t(L, tri_solve(L, h)), L


def sigma2_fixed_of(data, options) -> float:
    """``sigma2_fixed`` as given (:class:`FastOptions`), or a crude estimate from the release."""
    value = options.sigma2_fixed
    return crude_sigma2(data) if value is None else value


@dataclass(frozen=True)
class FastOptions(EngineOptions):
    """Options of engine ``bayes-fixeds-fast`` (linear-regression): draws, chains, seed (independent
    draws); ``sigma2_fixed``, the fixed noise variance (none: a crude estimate from the release)."""

    engine: ClassVar[str] = "bayes-fixeds-fast"
    draw_values: ClassVar = staticmethod(theta_draw_values)

    sigma2_fixed: float | None = option(None, "float", "fixed noise variance sigma2 (none: estimated from the release)",
                                        low=0.0, nullable=True)

def bayes_fixeds_fast(model, options):
    """Engine ``bayes-fixeds-fast``: the fixed-S posterior of theta in closed form (Alparslan et al. Algorithm
    3). Reads the model's release (its parties' noisy moments, resolved by ``release.regression_data()``) and
    parsed prior; names its draws through the model."""
    release, prior = model.release, model.prior.spec
    data = release.regression_data()
    require_gaussian(data, "bayes-fixeds-fast")
    check_dims(data, prior)
    check_memory("bayes-fixeds-fast", data, options)
    s2 = sigma2_fixed_of(data, options)
    S = nearest_psd(data.xtx)[None]
    mean, L = fast_moments(S, data.xty[None], data.sigma_z ** 2, np.array([s2]), prior)
    rng = options.rng()
    eps = rng.standard_normal((options.chains, options.draws, data.d))
    draws = mean[0] + tri_solve_t(np.broadcast_to(L[0], (options.chains, options.draws) + L.shape[1:]), eps)
    cov = tri_solve_t(L[0], tri_solve(L[0], np.eye(data.d)))
    return make_posterior(model, "bayes-fixeds-fast", data, {"theta": draws}, options,
                          attrs={"sigma2_fixed": s2, "exact_draws": 1},
                          extras={"mean": mean[0], "cov": 0.5 * (cov + cov.T)}, iid=True)
