"""Simulated data and releases for ``dpposterior calibrate`` and the benchmarks (Alparslan et al. Sec. 5.1)."""

from __future__ import annotations

import math

import numpy as np

from .. import SimulatedRelease
from ...errors import InputError
from ...release import FORMAT
from .curate import _party_release
from .prior import LinRegPrior, parse_prior
from .release import FAMILY_NAME


# ----------------------------------------------------------------------------- simulation


def make_release(X_parts, y_parts, *, features, epsilon, delta, x_norm, y_abs, intercept=False,
                 mechanism="gaussian", split="xtx,xty", rng=None, sigma=None) -> dict:
    """Release dict from already split data (numpy noise from ``rng``); for simulations and benchmarks.

    ``sigma`` overrides the calibrated Gaussian sd (e.g. to make the noise tiny in tests).
    Rows are NOT clipped here: the caller states the bounds.
    """

    rng = np.random.default_rng(rng)
    parties = []
    for Xj, yj in zip(X_parts, y_parts):
        Xj = np.asarray(Xj, float)
        if intercept:
            Xj = np.column_stack([np.ones(len(Xj)), Xj])
        seeds = [int(s) for s in rng.integers(0, 2**63 - 1, size=4)]
        stats, comp = _party_release(Xj, np.asarray(yj, float), epsilon, delta, mechanism, split, x_norm, y_abs,
                                     seeds, intercept, sigma)
        if sigma is not None:
            for rec in stats.values():
                rec.pop("sensitivity", None)
        parties.append({"n": int(len(yj)), "statistics": stats, "composition": comp})
    out = {"format": FORMAT, "family": FAMILY_NAME, "features": list(features), "intercept": bool(intercept),
           "bounds": {"x_norm": float(x_norm), "y_abs": float(y_abs)}, "parties": parties}
    if sigma is not None:
        out["not_dp"] = f"noise sd set to {float(sigma):g} by the caller, not calibrated to (epsilon, delta)"
    return out


def simulate(prior, n: int, epsilon: float, rng: np.random.Generator, parties: int = 1,
             delta: float | None = None) -> SimulatedRelease:
    """Draw (theta, sigma^2, Sigma_x) from the prior, x ~ N(0, Sigma_x), y, and a release.

    The model of ``mcmc-normalx`` is then exactly true (features are not clipped; the
    bounds are set to the simulated data's maxima, as in Sec. 5.1).  delta = 1/n.
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 2:
        raise InputError("n", "must be an integer >= 2")
    prior = prior if isinstance(prior, LinRegPrior) else parse_prior(prior)
    d = prior.d
    rng = np.random.default_rng(rng)
    theta, sigma2, sigma_x = prior.draw(rng, d)
    X = rng.multivariate_normal(np.zeros(d), sigma_x, size=n)
    y = X @ theta + rng.normal(0.0, math.sqrt(sigma2), size=n)
    x_norm = float(np.max(np.linalg.norm(X, axis=1)))
    y_abs = float(np.max(np.abs(y)))
    idx = np.array_split(np.arange(n), parties)
    rel = make_release([X[i] for i in idx], [y[i] for i in idx], features=[f"x{k + 1}" for k in range(d)],
                       epsilon=epsilon, delta=delta if delta is not None else 1.0 / n, x_norm=x_norm,
                       y_abs=y_abs, rng=rng)
    conf = {"xtx": [(X[i].T @ X[i]).tolist() for i in idx], "xty": [(X[i].T @ y[i]).tolist() for i in idx],
            "yty": [float(y[i] @ y[i]) for i in idx], "sigma2": float(sigma2)}
    # only theta is calibrated generically: every method outputs it (sigma2 is not sampled by
    # bayes-fixeds-fast and adassp); the true sigma2 is kept in ``confidential``
    return SimulatedRelease(theta={"theta": theta}, release=rel, confidential=conf)
