"""MCMC-fixedS (Alparslan, Yildirim & Birbil, Algorithm 2).

S_j is fixed at S~_j, the nearest positive semi-definite matrix to the released
Shat_j (Higham 1988; Sec. 4.2: clip negative eigenvalues, the PSD maximum-likelihood
estimate of S_j).  Each iteration draws theta from its Gaussian full conditional
eq. (12), with z_j integrated out (zhat_j | S_j, theta, sigma_y^2 ~ N(S_j theta,
sigma_y^2 S_j + sigma_z^2 I)), then updates sigma_y^2 by a random-walk MH move
(App. A.4) whose step is adapted towards acceptance 0.3 during warm-up only.
Cost per iteration O(J d^3), independent of n.  Needs no model for x.
"""

from __future__ import annotations

import numpy as np

from .linreg_common import (Adapter, check_dims, initial_theta, make_posterior, nearest_psd, prior_arrays,
                            refuse_constrained, require_gaussian, theta_sigma2_step)


def run_fixeds(S, zhat, sz2, prior, draws: int, warmup: int, rng, theta0, sigma2_0,
               step0=None) -> dict:
    """Batched Algorithm 2.  S: (B|1, J, d, d); zhat: (B|1, J, d); sz2: (J,) or (B, J);
    theta0: (B, d); sigma2_0: (B,).  Returns dict of arrays (B, draws, ...)."""
    prec, shift = prior_arrays(prior)
    theta = np.array(theta0, dtype=float)
    sigma2 = np.array(sigma2_0, dtype=float)
    B, d = theta.shape
    if step0 is None:
        step0 = 0.5 * sigma2
    adapter = Adapter(np.log(np.broadcast_to(step0, (B,))), target=0.3)
    out_theta = np.empty((B, draws, d))
    out_s2 = np.empty((B, draws))
    out_acc = np.empty((B, draws), dtype=bool)
    for t in range(warmup + draws):
        theta, sigma2, acc_prob, acc = theta_sigma2_step(S, zhat, sigma2, sz2, prec, shift, prior,
                                                         adapter.value, rng)
        if t < warmup:
            adapter.update(acc_prob)
        else:
            k = t - warmup
            out_theta[:, k] = theta
            out_s2[:, k] = sigma2
            out_acc[:, k] = acc
    return {"theta": out_theta, "sigma2": out_s2, "accept_sigma2": out_acc, "sigma2_step": adapter.value}


def sigma2_start(prior) -> float:
    return prior.b / (prior.a - 1.0) if prior.a > 1 else prior.b


def mcmc_fixeds(release, prior, options):
    data = release.regression_data()
    require_gaussian(data, "mcmc-fixeds")
    refuse_constrained(options, "mcmc-fixeds")
    check_dims(data, prior)
    rng = options.rng()
    S = nearest_psd(data.xtx)[None]
    zhat = data.xty[None]
    sz2 = data.sigma_z ** 2
    s2 = sigma2_start(prior)
    prec, shift = prior_arrays(prior)
    theta0 = np.tile(initial_theta(data, prec, shift, s2), (options.chains, 1))
    out = run_fixeds(S, zhat, sz2, prior, options.draws, options.warmup, rng, theta0,
                     np.full(options.chains, s2))
    return make_posterior("mcmc-fixeds", data, {"theta": out["theta"], "sigma2": out["sigma2"]}, options,
                          sample_stats={"accept_sigma2": out["accept_sigma2"]},
                          attrs={"sigma2_rw_step": out["sigma2_step"].tolist()})
