"""Posterior predictive draws of y at new design rows."""

from __future__ import annotations


import numpy as np

from ...errors import InputError


# ----------------------------------------------------------------------------- prediction


def posterior_predictive(posterior, X_new, rng=None, noise: bool = True) -> np.ndarray:
    """Draws of y at new rows ``X_new`` (m x features): array (chain, draw, m).

    Adds the intercept column when the posterior has one and ``X_new`` lacks it.  The
    observation noise uses the sampled ``sigma2`` (or the fixed sigma2 of
    ``bayes-fixeds-fast``); ``noise=False`` gives draws of the regression mean x'theta.
    """
    theta = np.asarray(posterior.posterior["theta"])
    d = theta.shape[-1]
    X_new = np.atleast_2d(np.asarray(X_new, dtype=float))
    if X_new.shape[1] == d - 1 and posterior.attrs.get("intercept"):
        X_new = np.column_stack([np.ones(len(X_new)), X_new])
    if X_new.shape[1] != d:
        raise InputError("X_new", f"must have {d} columns (got {X_new.shape[1]})")
    mean = np.einsum("cdk,mk->cdm", theta, X_new)
    if not noise:
        return mean
    if "sigma2" in posterior.posterior:
        s2 = np.asarray(posterior.posterior["sigma2"])[..., None]
    elif posterior.attrs.get("sigma2_fixed") is not None:
        s2 = float(posterior.attrs["sigma2_fixed"])
    else:
        return mean
    rng = np.random.default_rng(rng)
    return mean + np.sqrt(s2) * rng.standard_normal(mean.shape)
