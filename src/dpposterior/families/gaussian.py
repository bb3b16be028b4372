"""The bounded univariate Gaussian family (Kazan & Reiter, Sections 2-4).

Model: confidential Y_1..Y_n in a public interval [a, b], modelled as iid N(mu, sigma^2).
The curator releases the sample mean and the sample variance (denominator n - 1)
through the Laplace mechanism (Sec. 2.2):

    Ybar* ~ Lap(Ybar, (b-a)/(eps1 n)),     S2* ~ Lap(S^2, (b-a)^2/(eps2 n)),

so the sensitivities are (b - a)/n and (b - a)^2/n.  Everything the engines do
happens on the [0, 1] scale (Theorem 1) and is reported on the data scale.

Priors (``[prior]`` table of the analysis file, all on the data scale):

* ``normal-inverse-gamma`` (eq. 2): sigma^2 ~ IG(nu0/2, nu0 sigma0_sq/2),
  mu | sigma^2 ~ N(mu0, sigma^2/kappa0).
* ``flat`` (the default when no prior is given): p(mu, sigma^2) ∝ 1, a proper
  posterior only for n > 3 (Theorem 5).
* ``jeffreys``: p(mu, sigma^2) ∝ 1/sigma^2 is refused: the posterior is improper
  under the Laplace release (Theorem 4).

Methods: ``gibbs`` (auto; ``inference.gaussian_gibbs``), ``grid`` (brute-force
oracle; ``inference.gaussian_grid``) and ``naive`` (conjugate posterior that takes
the noisy statistics as exact; ``inference.gaussian_grid:naive``).
"""

from __future__ import annotations

from dataclasses import dataclass
import math
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from . import DA_MCMC, EngineSpec, Family, SimulatedRelease, prior_moments
from ..errors import InputError, RefusedError
from ..mechanisms import draw_noise, from_record
from ..observation import (MOMENTS, RECORDS, SIMULATE, LatentStatistic, Measurement, ObservationModel, Prior,
                           Variable)
from ..release import FORMAT, FiniteFloat, ReleaseBase, StatisticRecord, load_release, require_within_reach
from ._curate import curator, curator_options, numeric_values, require_column


#: the mechanism of the released mean and variance (Kazan & Reiter: Laplace noise)
GAUSSIAN_FAMILY_MECHANISMS = ("laplace",)
#: relative tolerance for a stated sensitivity to count as "matching" the derived one
SENSITIVITY_RTOL = 1e-9
#: the widest clamping interval: (b - a)^2 must be finite in double precision
MAX_WIDTH = 1e150
#: the narrowest bounds: (b - a)^2 must not underflow to 0 (the variance is released on that scale); 1e-150^2
#: = 1e-300 is still a normal double
MIN_WIDTH = 1e-150
#: the smallest noise scale of the released mean, as a fraction of the bounds' width (n * epsilon <= 1e9):
#: measured, the Gibbs sampler's truncated-normal pieces overflow beyond it (at n = 43: n * epsilon = 1.3e9
#: gave the right posterior, 4.3e9 an sd twice too large with overflow warnings)
MIN_RELATIVE_NOISE = 1e-9


class GaussianStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")

    mean: StatisticRecord
    variance: StatisticRecord


class GaussianRelease(ReleaseBase):
    """Release of a bounded univariate Gaussian sample: noisy mean and variance."""

    family: Literal["gaussian"]
    n: Annotated[int, Field(strict=True, ge=2)]
    bounds: tuple[FiniteFloat, FiniteFloat]
    statistics: GaussianStatistics

    @classmethod
    def model_validate(cls, obj, *args, **kwargs):
        release = super().model_validate(obj, *args, **kwargs)
        release.check()
        return release

    def check(self) -> "GaussianRelease":
        """Cross-field checks; derives omitted sensitivities.  Raises InputError."""
        lo, hi = self.bounds
        if not lo < hi:
            raise InputError("release.bounds", f"lower bound must be below upper bound (got [{lo:g}, {hi:g}])")
        width = hi - lo
        if not (math.isfinite(width) and width <= MAX_WIDTH):
            raise InputError("release.bounds", f"width b - a = {width:g} is too large: (b - a)^2 must stay finite in "
                             f"double precision (at most {MAX_WIDTH:g})")
        if width < MIN_WIDTH:
            raise InputError("release.bounds", f"width b - a = {width:g} is too small: (b - a)^2 must stay a normal "
                             f"double (at least {MIN_WIDTH:g})")
        expected = {"mean": width / self.n, "variance": width**2 / self.n}
        for name in ("mean", "variance"):
            rec: StatisticRecord = getattr(self.statistics, name)
            field = f"release.statistics.{name}"
            if isinstance(rec.value, bool) or not isinstance(rec.value, (int, float)):
                raise InputError(f"{field}.value", "must be a single number")
            if rec.mechanism not in GAUSSIAN_FAMILY_MECHANISMS:
                raise InputError(f"{field}.mechanism",
                                 f"the gaussian engines support only 'laplace' (got {rec.mechanism!r})")
            if rec.delta is not None or rec.sigma is not None:
                raise InputError(f"{field}.delta" if rec.delta is not None else f"{field}.sigma",
                                 "not used by the Laplace mechanism")
            if rec.sensitivity is None:
                rec.sensitivity = expected[name]
            elif not math.isclose(rec.sensitivity, expected[name], rel_tol=SENSITIVITY_RTOL):
                formula = "(b - a)/n" if name == "mean" else "(b - a)^2/n"
                smaller = rec.sensitivity < expected[name]
                raise InputError(f"{field}.sensitivity",
                                 f"{rec.sensitivity!r} " + ("is smaller than the replace-one sensitivity "
                                                            if smaller else "does not match ")
                                 + f"{formula} = {expected[name]!r}")
        # a released value further than INCONSISTENCY_SCALES Laplace scales from what clamped data can
        # give has probability < exp(-50): the file is inconsistent with its bounds and n
        n = self.n
        feasible = {"mean": (lo, hi), "variance": (0.0, width ** 2 * n / (4.0 * (n - 1)))}
        for name in ("mean", "variance"):
            rec = getattr(self.statistics, name)
            b = rec.sensitivity / rec.epsilon
            a_, b_ = feasible[name]
            v = float(rec.value)
            if name == "mean" and b < MIN_RELATIVE_NOISE * width:
                raise InputError("release.statistics.mean.epsilon",
                                 f"{rec.epsilon:g} makes the noise scale {b:g} smaller than {MIN_RELATIVE_NOISE:g} of "
                                 f"the bounds' width (n * epsilon > {1 / MIN_RELATIVE_NOISE:g}): the samplers' "
                                 "truncated-normal arithmetic overflows there; for a noise-free mean use a "
                                 "smaller epsilon")
            require_within_reach(f"release.statistics.{name}.value", v, a_, b_, b,
                                 f"the {name} of {n} records clamped to [{lo:g}, {hi:g}]")
        return self

    # convenient accessors -------------------------------------------------------------
    @property
    def width(self) -> float:
        return self.bounds[1] - self.bounds[0]

    @property
    def epsilon_mean(self) -> float:
        return self.statistics.mean.epsilon

    @property
    def epsilon_variance(self) -> float:
        return self.statistics.variance.epsilon


# ---------------------------------------------------------------------------------------
# priors
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GaussianPrior:
    """Prior on (mu, sigma^2), hyperparameters on the data scale."""

    kind: Literal["normal-inverse-gamma", "flat"]
    mu0: float = 0.0
    sigma0_sq: float = 1.0
    kappa0: float = 1.0
    nu0: float = 1.0

    def scaled(self, lo: float, width: float) -> "GaussianPrior":
        """The same prior on the [0, 1] scale (Theorem 1: mu -> (mu - a)/w, sigma^2 -> sigma^2/w^2)."""
        if self.kind == "flat":
            return self
        return GaussianPrior(self.kind, (self.mu0 - lo) / width, self.sigma0_sq / width**2, self.kappa0, self.nu0)


NIG_KEYS = ("mu0", "sigma0_sq", "kappa0", "nu0")


def _number(value, field: str, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(field, f"must be a number (got {value!r})")
    value = float(value)
    if not math.isfinite(value):
        raise InputError(field, f"must be finite (got {value})")
    if positive and value <= 0:
        raise InputError(field, f"must be > 0 (got {value:g})")
    return value


def parse_prior(prior, release: GaussianRelease | None = None) -> GaussianPrior:
    """Prior from None (flat), a ``[prior]`` dict, or a :class:`GaussianPrior`."""
    if prior is None:
        prior = {"kind": "flat"}
    if isinstance(prior, GaussianPrior):
        prior = {"kind": prior.kind, **({k: getattr(prior, k) for k in NIG_KEYS}
                                        if prior.kind == "normal-inverse-gamma" else {})}
    if not isinstance(prior, dict):
        raise InputError("prior", "must be a table (dict) with a 'kind'")
    kind = prior.get("kind")
    if kind is None:
        raise InputError("prior.kind", "missing (normal-inverse-gamma or flat)")
    if kind == "jeffreys":
        raise RefusedError("prior.kind", "the Jeffreys prior 1/sigma^2 gives an improper posterior under the "
                                         "Laplace release (Kazan & Reiter, Theorem 4); use 'flat'")
    if kind == "flat":
        extra = sorted(set(prior) - {"kind"})
        if extra:
            raise InputError(f"prior.{extra[0]}", "unknown key for the flat prior")
        if release is not None and release.n <= 3:
            raise RefusedError("prior.kind", f"the flat prior gives a proper posterior only for n > 3 "
                                             f"(Kazan & Reiter, Theorem 5); this release has n = {release.n}")
        return GaussianPrior("flat")
    if kind == "normal-inverse-gamma":
        extra = sorted(set(prior) - {"kind", *NIG_KEYS})
        if extra:
            raise InputError(f"prior.{extra[0]}", "unknown key (mu0, sigma0_sq, kappa0, nu0)")
        values = {}
        for key in NIG_KEYS:
            if key not in prior:
                raise InputError(f"prior.{key}", "missing (the normal-inverse-gamma prior needs mu0, sigma0_sq, "
                                                 "kappa0, nu0)")
            values[key] = _number(prior[key], f"prior.{key}", positive=key != "mu0")
        return GaussianPrior("normal-inverse-gamma", **values)
    raise InputError("prior.kind", f"unknown prior kind {kind!r} (normal-inverse-gamma, flat)")


# ---------------------------------------------------------------------------------------
# curator
# ---------------------------------------------------------------------------------------
def parse_epsilon_split(split: str | None, field: str = "epsilon-split") -> tuple[float, float]:
    """Fractions (mean, variance) of the total epsilon.

    ``None`` -> (0.5, 0.5); ``"F"`` -> (F, 1 - F) with 0 < F < 1; ``"F1,F2"`` -> (F1, F2),
    both > 0 and summing to 1 (within 1e-9).
    """
    if split is None:
        return 0.5, 0.5
    parts = [p.strip() for p in str(split).split(",")]
    try:
        fractions = [float(p) for p in parts]
    except ValueError:
        raise InputError(field, f"must be a fraction F or two fractions 'F1,F2' (got {split!r})") from None
    if not all(math.isfinite(f) for f in fractions):
        raise InputError(field, f"fractions must be finite (got {split!r})")
    if len(fractions) == 1:
        f = fractions[0]
        if not 0 < f < 1:
            raise InputError(field, f"the mean's fraction must lie in (0, 1) (got {f:g})")
        return f, 1.0 - f
    if len(fractions) == 2:
        if min(fractions) <= 0:
            raise InputError(field, f"each fraction must be > 0 (got {split!r})")
        if abs(sum(fractions) - 1.0) > 1e-9:
            raise InputError(field, f"fractions must add up to 1 (got {split!r}, sum {sum(fractions):g})")
        return fractions[0], fractions[1]
    raise InputError(field, f"gaussian releases two statistics: give F or 'F1,F2' (got {split!r})")


#: the gaussian curator's typed options (docs/cli.md, "Curator options")
GaussianCuratorOptions = curator_options("gaussian", "column", "bounds", "epsilon_split", "mechanism", module=__name__)


@curator(GaussianCuratorOptions)
def curate(frame, options) -> dict:
    """Clamp the column to ``--bounds``, compute Ybar and S^2, add Laplace noise."""

    column = require_column(frame, options.column, "column")
    if options.bounds is None:
        raise InputError("bounds", "is required for the gaussian family (--bounds LO HI)")
    lo, hi = (float(v) for v in options.bounds)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise InputError("bounds", "must be finite")
    if not lo < hi:
        raise InputError("bounds", f"lower bound must be below upper bound (got {lo:g} {hi:g})")
    if not hi - lo <= MAX_WIDTH:
        raise InputError("bounds", f"width {hi - lo:g} is too large: (HI - LO)^2 must stay finite in double "
                         f"precision (at most {MAX_WIDTH:g})")
    if hi - lo < MIN_WIDTH:
        raise InputError("bounds", f"width {hi - lo:g} is too small: (HI - LO)^2 must stay a normal double (at least "
                         f"{MIN_WIDTH:g})")
    if options.mechanism not in (None, *GAUSSIAN_FAMILY_MECHANISMS):
        raise InputError("mechanism", f"the gaussian family releases through 'laplace' only (got {options.mechanism!r})")
    # the first bad cell is named by row: an infinite record is refused (clamping it would hide a data error)
    values = numeric_values(column, options.column)
    n = values.size
    if n < 2:
        raise InputError("column", f"needs at least 2 records (got {n})")
    frac_mean, frac_var = parse_epsilon_split(options.epsilon_split)
    eps_mean, eps_var = options.epsilon * frac_mean, options.epsilon * frac_var
    clamped = np.clip(values, lo, hi)
    width = hi - lo
    sens_mean, sens_var = width / n, width**2 / n
    ybar = float(clamped.mean())
    s2 = float(clamped.var(ddof=1))
    if options.seed is None:
        seeds = [None, None]
    else:
        seeds = [int(s.generate_state(1)[0]) for s in np.random.SeedSequence(options.seed).spawn(2)]
    noisy_mean, sampler_mean = draw_noise("laplace", ybar, sens_mean / eps_mean, seeds[0])
    noisy_var, sampler_var = draw_noise("laplace", s2, sens_var / eps_var, seeds[1])
    return {
        "format": FORMAT,
        "family": "gaussian",
        "n": int(n),
        "bounds": [lo, hi],
        "statistics": {
            "mean": {"value": float(noisy_mean), "mechanism": "laplace", "epsilon": eps_mean,
                     "sensitivity": sens_mean, "sampler": sampler_mean},
            "variance": {"value": float(noisy_var), "mechanism": "laplace", "epsilon": eps_var,
                         "sensitivity": sens_var, "sampler": sampler_var},
        },
    }


def make_release(n: int, bounds, mean: float, variance: float, eps_mean: float, eps_variance: float,
                 description: str | None = None) -> GaussianRelease:
    """Build a validated release from released numbers (tests, simulations, Python users)."""

    data = {"format": FORMAT, "family": "gaussian", "n": int(n), "bounds": [float(bounds[0]), float(bounds[1])],
            "statistics": {"mean": {"value": float(mean), "mechanism": "laplace", "epsilon": float(eps_mean)},
                           "variance": {"value": float(variance), "mechanism": "laplace",
                                        "epsilon": float(eps_variance)}}}
    if description:
        data["description"] = description
    return load_release(data)


# ---------------------------------------------------------------------------------------
# simulation (calibration studies)
# ---------------------------------------------------------------------------------------
def draw_theta(prior: GaussianPrior, rng: np.random.Generator, size: int | None = None,
               sigma2_max: float = np.inf):
    """(mu, sigma^2) on [0, 1] from the prior.

    NIG (hyperparameters on the [0, 1] scale): drawn as is, with sigma^2 < ``sigma2_max``
    (the engines' eq. 47 truncation), so the draw matches the unconstrained analysis model.
    Flat: the improper prior cannot be drawn from; we draw from it restricted to the
    feasible region sigma^2 <= mu(1 - mu) (proper, mu ~ Beta(2, 2)), which matches no
    analysis exactly -- calibrate the gaussian family with a NIG prior.
    """
    m = 1 if size is None else int(size)
    mu = np.empty(m)
    s2 = np.empty(m)
    todo = np.arange(m)
    for _ in range(10_000):
        k = todo.size
        if prior.kind == "flat":
            mu_c = rng.uniform(0.0, 1.0, k)
            s2_c = rng.uniform(0.0, 0.25, k)
            ok = s2_c < mu_c * (1 - mu_c)
        else:
            s2_c = prior.nu0 * prior.sigma0_sq / 2.0 / rng.gamma(prior.nu0 / 2.0, 1.0, k)
            mu_c = rng.normal(prior.mu0, np.sqrt(s2_c / prior.kappa0))
            ok = s2_c < sigma2_max
        mu[todo[ok]] = mu_c[ok]
        s2[todo[ok]] = s2_c[ok]
        todo = todo[~ok]
        if todo.size == 0:
            break
    else:
        raise RefusedError("prior", "the prior puts almost no mass below the sampler's sigma^2 bound (eq. 47)")
    return (mu[0], s2[0]) if size is None else (mu, s2)


def simulate(prior, n: int, epsilon: float, rng: np.random.Generator) -> SimulatedRelease:
    """theta from the prior, statistics from the model, a Laplace release on bounds [0, 1].

    The statistics are drawn from the analysis model itself (Ybar ~ N(mu, sigma^2/n),
    (n-1) S^2/sigma^2 ~ chi^2_{n-1}); epsilon is split evenly between mean and variance.
    With a NIG prior this is exactly the model of the unconstrained analysis (the default
    of ``dpposterior calibrate``), so posterior ranks are Uniform(0, 1) for an exact engine.
    """
    prior = parse_prior(prior) if not isinstance(prior, GaussianPrior) else prior
    if n < 2:
        raise InputError("n", "must be >= 2")
    eps = epsilon / 2.0
    mu, sigma2 = draw_theta(prior, rng, sigma2_max=(n - 1) / (2.0 * n * eps))
    ybar, s2 = GaussianRecords(n, 0.0, 1.0).simulate(mu, sigma2, rng)
    noisy_mean = ybar + rng.laplace(0.0, 1.0 / (eps * n))
    noisy_var = s2 + rng.laplace(0.0, 1.0 / (eps * n))
    release = make_release(n, (0.0, 1.0), noisy_mean, noisy_var, eps, eps)
    return SimulatedRelease(theta={"mu": float(mu), "sigma2": float(sigma2)}, release=release,
                            confidential={"mean": float(ybar), "variance": float(s2)})


# ------------------------------------------------------------------ record model (da-mcmc)
class _GaussianJointPrior:
    """(mu, sigma^2) jointly: normal-inverse-gamma (Kazan & Reiter eq. 2), or flat (improper).

    The flat prior cannot be sampled; its ``rvs`` gives starting points near the released values
    (used only to start the chains and to check the model), and ``logpdf`` is 0 on sigma^2 > 0.
    """

    def __init__(self, prior, start_mean, start_var):
        self.prior = prior
        self.start_mean, self.start_var = float(start_mean), max(float(start_var), 1e-12)

    def rvs(self, size=None, random_state=None):
        rng = np.random.default_rng(random_state)
        size = 1 if size is None else int(np.prod(size))
        p = self.prior
        if p.kind == "flat":
            s2 = self.start_var * rng.gamma(20.0, 1 / 20.0, size)
            return np.column_stack([self.start_mean + np.sqrt(s2 / 10) * rng.standard_normal(size), s2])
        s2 = 1.0 / rng.gamma(p.nu0 / 2.0, 2.0 / (p.nu0 * p.sigma0_sq), size)
        return np.column_stack([rng.normal(p.mu0, np.sqrt(s2 / p.kappa0)), s2])

    def logpdf(self, v):
        from scipy import stats

        v = np.atleast_2d(np.asarray(v, float))
        mu, s2 = v[:, 0], v[:, 1]
        p = self.prior
        with np.errstate(all="ignore"):
            if p.kind == "flat":
                out = np.zeros(len(v))
            else:
                out = (stats.invgamma.logpdf(s2, p.nu0 / 2.0, scale=p.nu0 * p.sigma0_sq / 2.0)
                       + stats.norm.logpdf(mu, p.mu0, np.sqrt(np.abs(s2) / p.kappa0)))
        return np.where(s2 > 0, out, -np.inf)


def feasible_sigma2_max(mu, bounds) -> np.ndarray:
    """Kazan & Reiter Theorem 2 on the data scale: sigma^2 <= (mu - a)(b - mu) for data in [a, b]
    (and mu must lie in [a, b]); NaN outside [a, b].  ``report`` draws it as the feasible region."""
    a, b = float(bounds[0]), float(bounds[1])
    mu = np.asarray(mu, dtype=float)
    return np.where((mu >= a) & (mu <= b), (mu - a) * (b - mu), np.nan)


def da_model(release, prior):
    """The record model of data-augmentation MCMC (``da-mcmc``; Ju, Awan, Gong & Rao 2022): ``(Model, observed)``.

    Records y_i ~ N(mu, sigma^2) (the unconstrained analysis model of Kazan & Reiter); t(y) =
    (y, y^2); the release is the sample mean and variance (a non-linear map of the sums,
    ``release_transform = MEAN_VARIANCE``) with their own Laplace scales (``noise_scales``)."""
    from ..mechanisms import Laplace
    from ..model import MEAN_VARIANCE, Model

    prior = parse_prior(prior, release)
    n = release.n
    sm, sv = release.statistics.mean, release.statistics.variance
    joint = _GaussianJointPrior(prior, sm.value, sv.value)

    def records(theta, size, rng):
        mu, s2 = theta["theta"]
        return rng.normal(mu, np.sqrt(s2), size)

    def complete_posterior(y, rng):
        ybar, ss = y.mean(), ((y - y.mean()) ** 2).sum()
        if prior.kind == "flat":
            # p(mu, s2 | y) propto s2^(-n/2) exp(-(ss + n (ybar - mu)^2) / (2 s2)): s2 ~ IG((n-3)/2, ss/2)
            s2 = 0.5 * ss / rng.gamma((n - 3) / 2.0)
            return {"theta": np.array([rng.normal(ybar, np.sqrt(s2 / n)), s2])}
        kn = prior.kappa0 + n
        mun = (prior.kappa0 * prior.mu0 + n * ybar) / kn
        rate = 0.5 * (prior.nu0 * prior.sigma0_sq + ss + prior.kappa0 * n * (ybar - prior.mu0) ** 2 / kn)
        s2 = rate / rng.gamma((prior.nu0 + n) / 2.0)
        return {"theta": np.array([rng.normal(mun, np.sqrt(s2 / kn)), s2])}

    def noncentred(y, theta, theta_new):
        # y = mu + sigma e with e held fixed
        (mu, s2), (mu2, s22) = theta["theta"], theta_new["theta"]
        return mu2 + np.sqrt(s22 / s2) * (y - mu)

    class _GaussianModel(Model):
        derived_support = {"sigma2": "positive"}

        def posterior_variables(self, values):
            v = np.asarray(values["theta"])
            return {"mu": v[..., 0], "sigma2": v[..., 1]}, {}, {}

    model = _GaussianModel(params={"theta": joint}, records=records, statistic=lambda y: np.column_stack([y, y * y]),
                           mechanism=Laplace(sm.epsilon, sm.sensitivity), n=n, complete_posterior=complete_posterior,
                           noncentred=noncentred, name="gaussian", release_transform=MEAN_VARIANCE,
                           noise_scales=np.array([sm.sensitivity / sm.epsilon, sv.sensitivity / sv.epsilon]))
    return model, np.array([float(sm.value), float(sv.value)])


# ------------------------------------------------------------------ observation model
class SampleMean:
    """Query: the sample mean Ybar of the records (the released mean's exact value)."""

    shape = ()

    def __call__(self, records) -> np.ndarray:
        return np.asarray(np.mean(np.asarray(records, float)))


class SampleVariance:
    """Query: the sample variance S^2 of the records, denominator n - 1 (the released variance's exact value)."""

    shape = ()

    def __call__(self, records) -> np.ndarray:
        return np.asarray(np.var(np.asarray(records, float), ddof=1))


@dataclass(frozen=True)
class GaussianRecords:
    """The latent statistic's state: n records y_i ~ N(mu, sigma^2) in the public bounds [lo, lo + width].

    The engines work on the [0, 1] scale (Kazan & Reiter, Theorem 1) and report on the data scale through
    :meth:`to_data` (a location: mu, a record) and :meth:`variance_to_data` (sigma^2)."""

    n: int
    lo: float
    width: float

    def to_data(self, u):
        """A location on [0, 1] (mu, a record) on the data scale: a + w u."""
        return self.lo + self.width * u

    def variance_to_data(self, v):
        """A variance on [0, 1] on the data scale: w^2 v."""
        return self.width**2 * v

    def moments(self, mu, sigma2) -> tuple[np.ndarray, np.ndarray]:
        """Mean and variance of (Ybar, S^2) given (mu, sigma^2) under the unconstrained model (Ybar ~ N(mu,
        sigma^2/n), (n-1) S^2/sigma^2 ~ chi^2_{n-1}; the two are independent): arrays (..., 2)."""
        mu, sigma2 = np.asarray(mu, float), np.asarray(sigma2, float)
        mean = np.stack(np.broadcast_arrays(mu, sigma2), axis=-1)
        var = np.stack(np.broadcast_arrays(sigma2 / self.n, 2.0 * sigma2**2 / (self.n - 1)), axis=-1)
        return mean, var

    def simulate(self, mu, sigma2, rng: np.random.Generator) -> tuple[float, float]:
        """One draw of (Ybar, S^2) given (mu, sigma^2), from their laws under the unconstrained model."""
        ybar = rng.normal(mu, math.sqrt(sigma2 / self.n))
        return float(ybar), float(sigma2 * rng.chisquare(self.n - 1) / (self.n - 1))

    def records(self, mu, sigma2, rng: np.random.Generator) -> np.ndarray:
        """n records given (mu, sigma^2) (the record model of ``da-mcmc``)."""
        return rng.normal(mu, math.sqrt(sigma2), self.n)


def observation_model(release: GaussianRelease, prior=None) -> ObservationModel:
    """The release as two Laplace measurements (sample mean and variance) of n Gaussian records.

    Variables ``mu`` and ``sigma2`` (scalars, data scale) and the predictive ``y_new`` (a new record);
    ``prior``: a :class:`GaussianPrior` as given, or anything :func:`parse_prior` reads."""
    prior = prior if isinstance(prior, GaussianPrior) else parse_prior(prior, release)
    sm, sv = release.statistics.mean, release.statistics.variance
    measurements = (Measurement("statistics.mean", np.asarray(float(sm.value)), SampleMean(),
                                from_record(sm, sm.sensitivity)),
                    Measurement("statistics.variance", np.asarray(float(sv.value)), SampleVariance(),
                                from_record(sv, sv.sensitivity)))
    lo, hi = release.bounds
    state = GaussianRecords(release.n, lo, release.width)
    latent = LatentStatistic(f"the {release.n} records of a Gaussian sample in [{lo:g}, {hi:g}]",
                             frozenset({RECORDS, MOMENTS, SIMULATE}), state)
    parameters = {"kind": prior.kind, **({k: getattr(prior, k) for k in NIG_KEYS}
                                         if prior.kind == "normal-inverse-gamma" else {})}

    def sample(rng):
        if prior.kind == "flat":
            raise RefusedError("prior.kind", "the flat prior is improper: it has no draws")
        s2 = prior.nu0 * prior.sigma0_sq / 2.0 / rng.gamma(prior.nu0 / 2.0)
        return {"mu": float(rng.normal(prior.mu0, math.sqrt(s2 / prior.kappa0))), "sigma2": float(s2)}

    def log_density(values):
        theta = [[float(values["mu"]), float(values["sigma2"])]]
        return float(_GaussianJointPrior(prior, 0.0, 1.0).logpdf(theta)[0])

    describe = "flat on (mu, sigma2)" if prior.kind == "flat" else "normal-inverse-gamma"
    variables = (Variable("mu", (), {}, "real"), Variable("sigma2", (), {}, "positive"))
    return ObservationModel("gaussian", variables, Prior(sample, parameters, log_density, describe), latent,
                            measurements, release.n, {"prior": prior.kind},
                            predictive=(Variable("y_new", (), {}, "real"),))


FAMILY = Family(
    name="gaussian",
    release_model=GaussianRelease,
    methods={
        "gibbs": EngineSpec.of("dpposterior.inference.gaussian_gibbs", "gibbs", "GibbsOptions",
                               batch="dpposterior.inference.gaussian_gibbs:run_batch"),
        "grid": EngineSpec.of("dpposterior.inference.gaussian_grid", "grid", "GridOptions"),
        "naive": EngineSpec.of("dpposterior.inference.gaussian_grid", "naive", "NaiveOptions"),
        "da-mcmc": DA_MCMC,
    },
    auto_method="gibbs",
    parse_prior=parse_prior,
    curate=curate,
    naive_method="naive",
    description="bounded univariate Gaussian, Laplace-noised mean and variance (Kazan & Reiter)",
    mechanisms=GAUSSIAN_FAMILY_MECHANISMS,
    constrainable=True,
    simulate=simulate,
    hooks={"da_model": da_model, "feasible_sigma2_max": feasible_sigma2_max,
           "observation_model": observation_model},
)

# the prior's moments in the posterior's variables, for the prior-equals-posterior check
FAMILY.hooks["prior_moments"] = prior_moments.gaussian
