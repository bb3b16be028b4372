"""adaSSP (Wang 2018), distributed variant of Alparslan, Yildirim & Birbil App. C.2 -- a point estimate.

    theta_hat = (sum_j Shat_j + I sum_j lambda_j)^{-1} sum_j zhat_j                        eq. (15)

with the adaptive ridge of Wang (2018, Alg. 2) computed by each data holder j:

    lambda_j = max{0, sqrt(d ln(6/delta_j) ln(2 d^2/rho)) sigma_j - lambda~_min,j},  sigma_j = ||X||^2/(eps_j/3),
    lambda~_min,j = max{lambda_min,j^released - ln(6/delta_j) sigma_j, 0}.

``lambda_min^released`` is the release's ``lambda_min`` record (the curator's
``--epsilon-split adassp`` spends eps/3, delta/3 on it and 2/3 on (xtx, xty), as in
App. C.2).  A release without it (the paper's joint (xtx, xty) release) has no
private lambda_min; we then use the post-processing lower bound
lambda~_min,j = max{lambda_min(Shat_j) - 2 sqrt(d) sigma_s,j, 0} (the spectral norm of
sigma_s M is about 2 sqrt(d) sigma_s) with sigma_j = sigma_s,j / sqrt(ln(6/delta_j)).

The output is a degenerate posterior: one chain holding the single draw theta_hat
(attrs ``point_estimate = 1``); it has no uncertainty and no ``sigma2``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import math

import numpy as np

from ..options import EngineOptions, option
from .linreg_common import check_dims, make_posterior


def adassp_estimate(xtx, xty, lambdas) -> np.ndarray:
    """eq. (15); xtx (B, J, d, d), xty (B, J, d), lambdas (B, J) -> (B, d)."""
    d = xtx.shape[-1]
    A = xtx.sum(-3) + lambdas.sum(-1)[..., None, None] * np.eye(d)
    rhs = xty.sum(-2)
    # A may be indefinite (noisy Shat with too small a ridge): plain solve, not Cholesky
    return np.linalg.solve(A, rhs[..., None])[..., 0]


def adassp_lambdas(data, rho: float) -> np.ndarray:
    d = data.d
    J = data.J
    lam = np.empty(J)
    for j in range(J):
        if data.lambda_min is not None:
            eps_total = 3.0 * data.lambda_epsilon[j]
            delta_total = 3.0 * data.lambda_delta[j]
            sig = data.x_eff ** 2 / (eps_total / 3.0)
            lam_tilde = max(data.lambda_min[j] - math.log(6.0 / delta_total) * sig, 0.0)
        else:
            delta_total = data.delta[j] if data.delta is not None else 1e-6
            sig = data.sigma_s[j] / math.sqrt(math.log(6.0 / delta_total))
            lam_tilde = max(float(np.linalg.eigvalsh(data.xtx[j])[0]) - 2.0 * math.sqrt(d) * data.sigma_s[j], 0.0)
        lam[j] = max(0.0, math.sqrt(d * math.log(6.0 / delta_total) * math.log(2.0 * d * d / rho)) * sig
                     - lam_tilde)
    return lam


@dataclass(frozen=True)
class AdasspOptions(EngineOptions):
    """Options of engine ``adassp`` (linear-regression, a point estimate: one chain, one draw): seed; ``rho``,
    the share of the privacy budget adaSSP's own eigenvalue estimate would spend (Wang 2018)."""

    engine: ClassVar[str] = "adassp"
    takes_draws: ClassVar[bool] = False

    rho: float = option(0.05, "float", "adaSSP's budget share for its eigenvalue bound", low=0.0, high=1.0)

def adassp(model, options):
    """Engine ``adassp``: the adaSSP point estimate (Wang 2018; Alparslan et al. App. C.2). Reads the model's
    release (its parties' noisy moments, resolved by ``release.regression_data()``) and parsed prior; names its
    draws through the model."""
    release, prior = model.release, model.prior.spec
    data = release.regression_data()
    check_dims(data, prior)
    rho = options.rho
    lam = adassp_lambdas(data, float(rho))
    theta = adassp_estimate(data.xtx[None], data.xty[None], lam[None])[0]
    return make_posterior(model, "adassp", data, {"theta": theta[None, None, :]}, options,
                          attrs={"point_estimate": 1, "adassp_lambda": lam.tolist(), "adassp_rho": float(rho),
                                 "note": "adaSSP is a point estimate: one chain, one draw, no uncertainty"},
                          iid=True)
