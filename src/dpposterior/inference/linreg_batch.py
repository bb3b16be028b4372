"""Batched calibration path of the linear-regression engines (``families.EngineSpec.batch``).

``dpposterior calibrate --family linear-regression`` analyses every simulated release of a unit
in one call of each sampler -- Algorithm 2 (``mcmc-fixeds``, :mod:`.linreg_fixeds`), Algorithm 1
(``mcmc-normalx``, :mod:`.linreg_normalx`), Algorithm 3 (``bayes-fixeds-fast``,
:mod:`.linreg_fast`) and the noise-ignoring ``naive`` (:mod:`.linreg_naive`) -- of Alparslan,
Yildirim & Birbil (ICML 2023), whose batch axis runs over releases.
"""

from __future__ import annotations

import numpy as np

from ..families.linear_regression import LinRegPrior, parse_prior
from ..mechanisms.base import NoiseShape
from ..release import load_release
from .linreg_common import nearest_psd, tri_solve_t
from .linreg_fast import fast_moments
from .linreg_fixeds import run_fixeds, sigma2_start
from .linreg_naive import naive_inputs
from .linreg_normalx import run_normalx, start_s


def run_batch(sims, prior, method: str, options):
    """(trials, draws, d) theta draws of every simulated release at once (one chain per release; the
    samplers' batch axis runs over releases), with ``method``'s typed options.  None where the releases differ
    in shape or are not Gaussian-noised; those trials then go through ``infer`` one by one."""
    draws, seed = options.draws, options.seed
    warmup = getattr(options, "warmup", None)
    if method not in ("mcmc-fixeds", "mcmc-normalx", "naive", "bayes-fixeds-fast"):
        return None
    data = [load_release(sim.release).regression_data() for sim in sims]
    if len({(dd.J, tuple(dd.n)) for dd in data}) != 1 or any(dd.noise_shape is not NoiseShape.GAUSSIAN for dd in data):
        return None
    prior = prior if isinstance(prior, LinRegPrior) else parse_prior(prior)
    from ..memory import check_batch_fits
    from .linreg_common import memory_estimate

    # one chain per release, all at once: the engine's estimate at B chains (its convergence-check share included,
    # a small overestimate here)
    fixed, per_draw, _ = memory_estimate(method, int(data[0].d), int(data[0].J), len(sims), int(draws))
    check_batch_fits(method, len(sims), 1, int(draws), per_draw, fixed)
    rng = np.random.default_rng(seed)
    warmup = 1000 if warmup is None else warmup
    Shat = np.stack([dd.xtx for dd in data])
    zhat = np.stack([dd.xty for dd in data])
    ss2 = np.stack([dd.sigma_s ** 2 for dd in data])
    sz2 = np.stack([dd.sigma_z ** 2 for dd in data])
    B = len(sims)
    s20 = np.full(B, sigma2_start(prior))
    if method == "bayes-fixeds-fast":
        s2 = np.array([dd.y_abs / 3.0 for dd in data])
        mean, L = fast_moments(nearest_psd(Shat), zhat, sz2, s2, prior)
        eps = rng.standard_normal((B, draws, prior.d))
        return mean[:, None, :] + tri_solve_t(L[:, None], eps)
    mean0, _ = fast_moments(nearest_psd(Shat), zhat, sz2, s20, prior)
    if method == "mcmc-fixeds":
        out = run_fixeds(nearest_psd(Shat), zhat, sz2, prior, draws, warmup, rng, mean0, s20)
    elif method == "naive":
        out = run_fixeds(naive_inputs(Shat), zhat, np.zeros_like(sz2), prior, draws, warmup, rng, mean0, s20)
    else:
        out = run_normalx(Shat, zhat, data[0].n, ss2, sz2, prior, draws, warmup, rng, mean0, s20, start_s(Shat))
    return out["theta"]
