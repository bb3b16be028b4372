"""The observation model of a linear-regression release: per data holder, measurements of the upper triangle of
X_j'X_j, of X_j'y_j (and y_j'y_j, and adaSSP's smallest eigenvalue of X_j'X_j where released) of its confidential
rows; the variables the engines draw (``theta``, ``sigma2``, ``sigma_x``) and the prior of eq. (4) of
Alparslan et al."""

from __future__ import annotations

from dataclasses import dataclass
import math

import numpy as np

from ...mechanisms import Gaussian, Laplace
from ...mechanisms.base import NoiseShape
from ...observation import SIMULATE, LatentStatistic, Measurement, ObservationModel, Prior, Variable
from .prior import LinRegPrior, parse_prior
from .release import FAMILY_NAME, LinearRegressionRelease, RegressionData


@dataclass(frozen=True)
class PartyRows:
    """The latent statistic as the queries read it: party ``party``'s design (with the intercept's column of
    ones where the release has one) and responses, ``{"x": [(n_j, d) per party], "y": [(n_j,) per party]}``."""

    party: int
    d: int

    def rows(self, latent) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(latent["x"][self.party], float), np.asarray(latent["y"][self.party], float)


@dataclass(frozen=True)
class GramUpper(PartyRows):
    """Upper triangle (row-major, ``np.triu_indices``) of X_j'X_j: the entries that carry independent noise."""

    @property
    def shape(self) -> tuple[int]:
        return (self.d * (self.d + 1) // 2,)

    def __call__(self, latent) -> np.ndarray:
        x, _ = self.rows(latent)
        return (x.T @ x)[np.triu_indices(self.d)]


@dataclass(frozen=True)
class CrossProduct(PartyRows):
    """X_j'y_j."""

    @property
    def shape(self) -> tuple[int]:
        return (self.d,)

    def __call__(self, latent) -> np.ndarray:
        x, y = self.rows(latent)
        return x.T @ y


@dataclass(frozen=True)
class ResponseSquares(PartyRows):
    """y_j'y_j."""

    shape: tuple = ()

    def __call__(self, latent) -> np.ndarray:
        _, y = self.rows(latent)
        return np.asarray(float(y @ y))


@dataclass(frozen=True)
class SmallestEigenvalue(PartyRows):
    """lambda_min(X_j'X_j) (adaSSP, Wang 2018)."""

    shape: tuple = ()

    def __call__(self, latent) -> np.ndarray:
        x, _ = self.rows(latent)
        return np.asarray(float(np.linalg.eigvalsh(x.T @ x)[0]))


@dataclass(frozen=True)
class RegressionRecords:
    """The confidential rows of the J parties: ``n`` (J,) rows each, ``d`` coefficients (the first the
    intercept when ``intercept``)."""

    n: tuple[int, ...]
    d: int
    intercept: bool

    def simulate(self, theta, sigma2, sigma_x, rng) -> dict:
        """Rows given the parameters, as the family's simulator draws them: features x ~ N(0, Sigma_x) (then
        the intercept's 1), y = x'theta + N(0, sigma2).  ``{"x": [...], "y": [...]}``, one entry per party."""
        theta, sigma_x = np.asarray(theta, float), np.atleast_2d(np.asarray(sigma_x, float))
        xs, ys = [], []
        for nj in self.n:
            x = rng.multivariate_normal(np.zeros(sigma_x.shape[0]), sigma_x, size=nj)
            if self.intercept:
                x = np.column_stack([np.ones(nj), x])
            xs.append(x)
            ys.append(x @ theta + rng.normal(0.0, math.sqrt(float(sigma2)), size=nj))
        return {"x": xs, "y": ys}


def _mechanisms(data: RegressionData, j: int) -> dict:
    """The mechanism instance of each of party j's released blocks, with the noise the engines model."""
    if data.noise_shape is NoiseShape.GAUSSIAN:
        delta = None if data.delta is None else float(data.delta[j])
        out = {"xtx": Gaussian(float(data.sigma_s[j]), float(data.epsilon[j]), delta),
               "xty": Gaussian(float(data.sigma_z[j]), float(data.epsilon[j]), delta)}
        if data.sigma_u is not None:
            out["yty"] = Gaussian(float(data.sigma_u[j]), float(data.epsilon[j]), delta)
    else:
        eps = float(data.epsilon[j])
        # Laplace(epsilon, sensitivity): the scale sensitivity / epsilon is the per-entry scale of the release
        out = {name: Laplace(eps, float(data.laplace_scale[j, k]) * eps)
               for k, name in enumerate(("xtx", "xty", "yty")) if np.isfinite(data.laplace_scale[j, k])}
    if data.lambda_min is not None:
        out["lambda_min"] = Gaussian(float(data.sigma_lambda[j]), float(data.lambda_epsilon[j]),
                                     float(data.lambda_delta[j]))
    return out


def observation_model(release: LinearRegressionRelease, prior=None, data: RegressionData | None = None
                      ) -> ObservationModel:
    """The release as, per party j, measurements of its X_j'X_j (upper triangle), X_j'y_j, y_j'y_j and
    lambda_min(X_j'X_j) where released, of the parties' confidential rows.

    Variables ``theta`` (coef, labelled by the coefficient names), ``sigma2`` and ``sigma_x`` (feature,
    feature_col: the features' covariance, drawn by ``mcmc-normalx`` only); ``prior``: a :class:`LinRegPrior`
    or anything :func:`parse_prior` reads; ``data``: the release's :class:`RegressionData` when already
    resolved."""
    prior = prior if isinstance(prior, LinRegPrior) else parse_prior(prior, release)
    data = data if data is not None else release.regression_data()
    d = data.d
    measurements = []
    for j, party in enumerate(release.parties):
        st = party.statistics
        mechanisms = _mechanisms(data, j)
        released = {"xtx": (np.asarray(st.xtx.value, float)[np.triu_indices(d)], GramUpper(j, d)),
                    "xty": (np.asarray(st.xty.value, float), CrossProduct(j, d))}
        if st.yty is not None:
            released["yty"] = (np.asarray(float(st.yty.value)), ResponseSquares(j, d))
        if st.lambda_min is not None:
            released["lambda_min"] = (np.asarray(float(st.lambda_min.value)), SmallestEigenvalue(j, d))
        for name, (values, query) in released.items():
            measurements.append(Measurement(f"parties[{j}].statistics.{name}", values, query, mechanisms[name]))
    n = tuple(int(p.n) for p in release.parties)
    # simulate: RegressionRecords.simulate.  No records to resample (no da-mcmc), no enumeration; mcmc-bs's
    # normal approximation of the statistics is its own (linreg_bs.row_moments), not offered here
    latent = LatentStatistic(f"the confidential rows of {len(n)} data holder(s), n = {', '.join(map(str, n))}",
                             frozenset({SIMULATE}), RegressionRecords(n, d, bool(release.intercept)))
    features = list(data.features)
    # sigma_x is symmetric positive definite, which no support name says
    variables = (Variable("theta", ("coef",), {"coef": list(data.names)}, "real"),
                 Variable("sigma2", (), {}, "positive"),
                 Variable("sigma_x", ("feature", "feature_col"), {"feature": features, "feature_col": features},
                          "real"))
    dx = len(features)
    iw_scale, iw_df = prior.wishart(dx)

    def sample(rng):
        theta, sigma2, sigma_x = prior.draw(rng, dx)
        return {"theta": theta, "sigma2": float(sigma2), "sigma_x": sigma_x}

    def log_density(values):
        """theta ~ N(m, C), sigma2 ~ IG(a, b), Sigma_x ~ IW(Lambda, kappa), independent (eq. 4); a value
        without ``sigma_x`` is scored on (theta, sigma2)."""
        from scipy import stats

        total = float(stats.multivariate_normal.logpdf(np.asarray(values["theta"], float), prior.theta_mean,
                                                       prior.theta_cov))
        total += float(stats.invgamma.logpdf(float(values["sigma2"]), prior.a, scale=prior.b))
        if "sigma_x" in values:
            total += float(stats.invwishart.logpdf(np.atleast_2d(values["sigma_x"]), df=iw_df, scale=iw_scale))
        return total

    return ObservationModel(FAMILY_NAME, variables,
                            Prior(sample, prior.to_dict(), log_density,
                                  "theta ~ normal, sigma2 ~ inverse-gamma, sigma_x ~ inverse-Wishart"),
                            latent, tuple(measurements), int(sum(n)))
