"""Priors (Alparslan et al. eq. 4, Sec. 4.1): theta ~ N(m, C), sigma_y^2 ~ IG(a, b), Sigma_x ~ IW(Lambda, kappa)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import InputError


# ----------------------------------------------------------------------------- prior

PRIOR_KEYS = ("theta_mean", "theta_cov", "a", "b", "iw_scale", "iw_df", "mu_kappa")


@dataclass
class LinRegPrior:
    """theta ~ N(theta_mean, theta_cov), sigma_y^2 ~ IG(a, b), Sigma_x ~ IW(iw_scale, iw_df).

    ``mu_kappa`` (k0) is used only by ``mcmc-bs`` and ``mcmc-normalx`` with an intercept, where the feature
    mean mu is unknown: mu | Sigma_x ~ N(0, Sigma_x / k0) (a choice of ours; App. B.2
    leaves the prior of mu open).  ``mcmc-bs`` uses the conjugate form
    theta | sigma^2 ~ N(theta_mean, sigma^2 theta_cov) of App. C.1.
    """

    theta_mean: np.ndarray
    theta_cov: np.ndarray
    a: float = 20.0
    b: float = 0.5
    iw_scale: np.ndarray | None = None
    iw_df: float | None = None
    mu_kappa: float = 1.0

    @property
    def d(self) -> int:
        return self.theta_mean.shape[0]

    def wishart(self, features: int) -> tuple[np.ndarray, float]:
        """The inverse-Wishart's scale and degrees of freedom over ``features`` features (default I and
        features + 1)."""
        return (self.iw_scale if self.iw_scale is not None else np.eye(features),
                self.iw_df if self.iw_df is not None else features + 1.0)

    def draw(self, rng, features: int) -> tuple[np.ndarray, float, np.ndarray]:
        """(theta, sigma2, Sigma_x) from the prior, drawn from ``rng`` in that order (eq. 4: independent)."""
        from scipy import stats

        scale, df = self.wishart(features)
        theta = rng.multivariate_normal(self.theta_mean, self.theta_cov)
        sigma2 = self.b / rng.gamma(self.a)
        return theta, sigma2, np.atleast_2d(stats.invwishart.rvs(df=df, scale=scale, random_state=rng))

    def to_dict(self) -> dict:
        return {"theta_mean": self.theta_mean.tolist(), "theta_cov": self.theta_cov.tolist(), "a": self.a,
                "b": self.b, "iw_scale": None if self.iw_scale is None else self.iw_scale.tolist(),
                "iw_df": self.iw_df, "mu_kappa": self.mu_kappa}


def default_prior(d: int, n_features: int | None = None) -> LinRegPrior:
    """The paper's Sec. 5.1 hyperparameters: a = 20, b = 0.5, m = 0, C = b/(a-1) I, kappa = d_x + 1."""
    dx = d if n_features is None else n_features
    a, b = 20.0, 0.5
    return LinRegPrior(theta_mean=np.zeros(d), theta_cov=b / (a - 1.0) * np.eye(d), a=a, b=b,
                       iw_scale=np.eye(dx), iw_df=float(dx + 1))


def _number(value, field, positive=True):
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(field, "must be a number")
    value = float(value)
    if not math.isfinite(value) or (positive and value <= 0):
        raise InputError(field, "must be a finite number > 0")
    return value


def _matrix(value, size, field):
    """A size x size symmetric positive-definite matrix (a scalar c means c I)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = _number(value, field) * np.eye(size)
    try:
        arr = np.asarray(value, dtype=float)
    except (ValueError, TypeError):
        raise InputError(field, f"must be a {size} x {size} matrix of numbers") from None
    if arr.shape != (size, size):
        raise InputError(field, f"must be a {size} x {size} matrix (got shape {arr.shape})")
    if not np.all(np.isfinite(arr)):
        raise InputError(field, "must be finite")
    if np.max(np.abs(arr - arr.T)) > 1e-9 * max(1.0, np.max(np.abs(arr))):
        raise InputError(field, "must be symmetric")
    try:
        np.linalg.cholesky(arr)
    except np.linalg.LinAlgError:
        raise InputError(field, "must be positive definite") from None
    return 0.5 * (arr + arr.T)


def prior_moments(prior: LinRegPrior, release=None) -> dict[str, tuple[float, float]]:
    """Prior mean and sd of the scalar sigma2 ~ IG(a, b), for the prior-dominance check (dpposterior.checks).

    A release without y'y informs sigma2 only through the noisy x'y (barely): its posterior is then its
    prior, which the check flags instead of presenting the prior's interval as an estimate.
    """
    a, b = float(prior.a), float(prior.b)
    if not a > 2:
        return {}
    mean = b / (a - 1.0)
    return {"sigma2": (mean, mean / math.sqrt(a - 2.0))}


def parse_prior(prior, release=None) -> LinRegPrior:
    """Prior from None (the paper's defaults), a ``[prior]`` dict, or a :class:`LinRegPrior`."""
    if release is not None:
        d, dx = release.d, len(release.features)
    elif isinstance(prior, LinRegPrior):
        d, dx = prior.d, (prior.iw_scale.shape[0] if prior.iw_scale is not None else prior.d)
    elif isinstance(prior, dict) and "theta_mean" in prior and isinstance(prior["theta_mean"], list):
        d = len(prior["theta_mean"])
        dx = d
    else:
        d = dx = 2
    if prior is None:
        return default_prior(d, dx)
    if isinstance(prior, LinRegPrior):
        prior = prior.to_dict()
    if not isinstance(prior, dict):
        raise InputError("prior", "must be a table (dict) with keys " + ", ".join(PRIOR_KEYS))
    for key in prior:
        if key not in PRIOR_KEYS and key != "kind":
            raise InputError(f"prior.{key}", "unknown key (" + ", ".join(PRIOR_KEYS) + ")")
    if prior.get("kind", "normal") not in ("normal", "default"):
        raise InputError("prior.kind", "linear-regression priors have kind 'normal' (or omit it)")
    out = default_prior(d, dx)
    if prior.get("a") is not None:
        out.a = _number(prior["a"], "prior.a")
    if prior.get("b") is not None:
        out.b = _number(prior["b"], "prior.b")
    if prior.get("theta_mean") is not None:
        value = prior["theta_mean"]
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value] * d
        try:
            arr = np.asarray(value, dtype=float)
        except (ValueError, TypeError):
            raise InputError("prior.theta_mean", f"must be a list of {d} numbers") from None
        if arr.shape != (d,) or not np.all(np.isfinite(arr)):
            raise InputError("prior.theta_mean", f"must be a list of {d} finite numbers (got shape {arr.shape})")
        out.theta_mean = arr
    if prior.get("theta_cov") is not None:
        out.theta_cov = _matrix(prior["theta_cov"], d, "prior.theta_cov")
    else:
        out.theta_cov = out.b / (out.a - 1.0) * np.eye(d) if out.a > 1 else np.eye(d)
    if prior.get("iw_scale") is not None:
        out.iw_scale = _matrix(prior["iw_scale"], dx, "prior.iw_scale")
    if prior.get("iw_df") is not None:
        out.iw_df = _number(prior["iw_df"], "prior.iw_df")
        if out.iw_df <= dx - 1:
            raise InputError("prior.iw_df", f"must exceed (number of features) - 1 = {dx - 1}")
    if prior.get("mu_kappa") is not None:
        out.mu_kappa = _number(prior["mu_kappa"], "prior.mu_kappa")
    return out
