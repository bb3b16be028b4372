"""Shared pieces of the exponential families of Bernstein & Sheldon (NeurIPS 2018).

Paper: ``001_da4217b89717099b.txt``.  Families ``binomial``, ``multinomial`` (bounded
sufficient statistics, Sec. 3.1-3.2) and ``exponential``, ``poisson`` (unbounded
statistic t(x) = x released over the truncation bounds [a, b], Sec. 3.3).

This module holds what the four family modules share:

* release models (pydantic) with derived / checked sensitivities
  (Sec. 3.1: Delta_s = max ||t(x) - t(x')||_1; App. C for truncated families:
  Delta <= sum_j max{max_{x in [a,b]} |t_j(x)|, max_{x,y in [a,b]} |t_j(x) - t_j(y)|}),
* conjugate priors (beta, dirichlet, gamma) parsed from the analysis ``[prior]`` table,
* curators (CSV column -> release dict),
* the model the engines ask for (:class:`ExpFamModel`, carried by each release class as ``expfam``: the record
  law, the conjugate update, the statistic's range), so that no engine compares a family's name,
* the observation model (:func:`expfam_observation_model`) that each family module registers as its
  ``observation_model`` hook and through which the engines name their draws, and
* ``simulate`` hooks for ``dpposterior calibrate`` (theta ~ prior, data ~ model,
  release through the Laplace mechanism, or for the count families an integer mechanism).
"""

from __future__ import annotations

from dataclasses import dataclass
import enum
import math
from typing import Annotated, ClassVar, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import DA_MCMC, EngineSpec
from ..errors import InputError, RefusedError, shown
from ..mechanisms.noise import draw_noise
from ..mechanisms.registry import accounts_rho, get_mechanism, is_continuous_laplace, is_integer_noise, rho_mechanisms
from ..observation import LatentStatistic, Measurement, ObservationModel, Prior, Variable
from ..release import FORMAT, INCONSISTENCY_SCALES, ReleaseBase, StatisticRecord
from ._curate import curator, curator_options, numeric_values, require_column


PositiveInt = Annotated[int, Field(strict=True, ge=1)]


# --------------------------------------------------------------------------- releases
#: the mechanisms of the count families (binomial, multinomial, poisson): their statistics are integer
#: counts, so integer noise applies; exponential data are real, so Laplace only
COUNT_MECHANISMS = ("laplace", "discrete-laplace", "discrete-gaussian")


def _check_mechanism(record: StatisticRecord, name: str, derived: dict | float,
                     allowed: tuple[str, ...] = ("laplace",)) -> None:
    """The record's mechanism is one the family takes; its sensitivity is derived in the mechanism's norm
    (``derived``: a number, or {"L1": .., "L2": ..}) when omitted, refused when given and different."""
    if record.mechanism not in allowed and not (allowed is COUNT_MECHANISMS and is_integer_noise(record.mechanism)):
        raise ValueError(f"statistics.{name}.mechanism: must be one of {', '.join(allowed)} for this family "
                         f"(got {shown(record.mechanism)})")
    from ..mechanisms.registry import from_record

    if isinstance(derived, dict):
        derived = derived[get_mechanism(record.mechanism).sensitivity_norm]
    if record.sensitivity is None:
        record.sensitivity = float(derived)
    elif not math.isclose(record.sensitivity, derived, rel_tol=1e-9, abs_tol=1e-12):
        if record.sensitivity < derived:
            # every digit: 1.41421 is smaller than sqrt(2) = 1.4142135623730951, which :g printed as 1.41421
            raise ValueError(f"statistics.{name}.sensitivity: {shown(float(record.sensitivity))} is smaller than the "
                             f"replace-one sensitivity {shown(float(derived))} of this release")
        raise ValueError(f"statistics.{name}.sensitivity: must be {shown(float(derived))} for this release "
                         f"(got {shown(float(record.sensitivity))})")
    if record.rho is not None:  # a stated rho must agree with the (now known) sensitivity and sigma
        try:
            from_record(record)
        except InputError as exc:
            raise ValueError(f"statistics.{name}.{exc.field}: {exc.reason}") from None
    if is_continuous_laplace(record.mechanism) and (record.sigma is not None or record.delta is not None):
        raise ValueError(f"statistics.{name}: sigma/delta are not fields of a Laplace release")


class _NoisyStatistic:
    """What a count release says about its one noisy statistic (``noisy_record``, the field of ``statistics`` that
    the release class names as ``released_statistic``): the mechanism and its scale."""

    @property
    def noisy_record(self) -> StatisticRecord:
        return getattr(self.statistics, self.released_statistic)

    @property
    def mechanism(self):
        """The :class:`~dpposterior.mechanisms.base.Mechanism` that released the statistic."""
        from ..mechanisms.registry import from_record

        return from_record(self.noisy_record)

    @property
    def noise_scale(self) -> float:
        """Laplace / discrete-Laplace scale, or the (discrete) Gaussian sigma."""
        return self.mechanism.noise_scale

    @property
    def laplace_scale(self) -> float:
        """The continuous-Laplace scale b (Bernstein & Sheldon's engines need Laplace noise)."""
        rec = self.noisy_record
        if not is_continuous_laplace(rec.mechanism):
            raise RefusedError("release.mechanism", f"this engine assumes continuous Laplace noise (Bernstein & "
                               f"Sheldon 2018); the release uses {rec.mechanism!r}: use method 'exact' (auto)")
        return rec.sensitivity / rec.epsilon


def _scalar(record: StatisticRecord, name: str) -> float:
    if isinstance(record.value, list):
        raise ValueError(f"statistics.{name}.value: must be a single number")
    return float(record.value)


class BinomialStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")
    successes: StatisticRecord


class BinomialRelease(_NoisyStatistic, ReleaseBase):
    """Bernoulli records; released statistic ``successes`` = sum of the 0/1 records + noise (Laplace(1/eps),
    discrete Laplace or discrete Gaussian; sensitivity 1 in every norm)."""

    family: Literal["binomial"]
    n: PositiveInt
    statistics: BinomialStatistics
    #: the model the engines ask for (:class:`ExpFamModel`, set with the models below)
    expfam: ClassVar["ExpFamModel"]
    #: the field of ``statistics`` that holds the noisy statistic
    released_statistic: ClassVar[str] = "successes"

    @model_validator(mode="after")
    def _check(self):
        rec = self.statistics.successes
        _check_mechanism(rec, "successes", 1.0, COUNT_MECHANISMS)
        y = _scalar(rec, "successes")
        b = self.noise_scale
        if y < -INCONSISTENCY_SCALES * b or y > self.n + INCONSISTENCY_SCALES * b:
            raise ValueError(f"statistics.successes.value: {y:g} is impossible for n = {self.n} with noise "
                             f"scale {b:g} (more than {INCONSISTENCY_SCALES:g} scales outside [0, n])")
        return self

    @property
    def released(self) -> np.ndarray:
        return np.array([_scalar(self.statistics.successes, "successes")])


class MultinomialStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")
    counts: StatisticRecord


class MultinomialRelease(_NoisyStatistic, ReleaseBase):
    """Categorical records; released ``counts`` (one per category) + noise on each (replace-one moves one
    record between two categories: L1 sensitivity 2, L2 sensitivity sqrt(2))."""

    family: Literal["multinomial"]
    n: PositiveInt
    #: optional public category labels (one per count)
    categories: list[str] | None = None
    statistics: MultinomialStatistics
    #: the model the engines ask for (:class:`ExpFamModel`, set with the models below)
    expfam: ClassVar["ExpFamModel"]
    #: the field of ``statistics`` that holds the noisy statistic
    released_statistic: ClassVar[str] = "counts"

    @model_validator(mode="after")
    def _check(self):
        rec = self.statistics.counts
        _check_mechanism(rec, "counts", {"L1": 2.0, "L2": math.sqrt(2.0)}, COUNT_MECHANISMS)
        value = rec.value
        if not isinstance(value, list) or any(isinstance(v, list) for v in value):
            raise ValueError("statistics.counts.value: must be a flat list with one count per category")
        if len(value) < 2:
            raise ValueError("statistics.counts.value: needs at least 2 categories")
        if self.categories is not None:
            if len(self.categories) != len(value):
                raise ValueError(f"categories: has {len(self.categories)} labels but counts has {len(value)} values")
            if len(set(self.categories)) != len(self.categories):
                raise ValueError("categories: must be distinct")
        y = np.asarray(value, float)
        b = self.noise_scale
        k = len(y)
        # the sum of K Laplace(b) noises exceeds K*50*b with probability < K*exp(-50)
        if abs(y.sum() - self.n) > INCONSISTENCY_SCALES * k * b:
            raise ValueError(f"statistics.counts.value: sums to {y.sum():g}, impossible for n = {self.n} with "
                             f"noise scale {b:g} per count")
        if np.any(y < -INCONSISTENCY_SCALES * b) or np.any(y > self.n + INCONSISTENCY_SCALES * b):
            raise ValueError(f"statistics.counts.value: has a count more than {INCONSISTENCY_SCALES:g} noise "
                             f"scales outside [0, n]")
        return self

    @property
    def released(self) -> np.ndarray:
        return np.asarray(self.statistics.counts.value, float)

    @property
    def category_labels(self) -> list:
        return list(self.categories) if self.categories is not None else list(range(len(self.released)))


class TruncatedStatistics(BaseModel):
    model_config = ConfigDict(extra="forbid")
    truncated_sum: StatisticRecord


def truncated_sensitivity(lo: float, hi: float) -> float:
    """App. C bound for t(x) = x on [lo, hi]: max{max |x|, max |x - x'|} = max(|lo|, |hi|, hi - lo)."""
    return float(max(abs(lo), abs(hi), hi - lo))


class _TruncatedRelease(_NoisyStatistic, ReleaseBase):
    n: PositiveInt
    bounds: tuple[Annotated[float, Field(strict=True, allow_inf_nan=False)],
                  Annotated[float, Field(strict=True, allow_inf_nan=False)]]
    statistics: TruncatedStatistics
    #: the model the engines ask for (:class:`ExpFamModel`, set with the models below)
    expfam: ClassVar["ExpFamModel"]
    #: the field of ``statistics`` that holds the noisy statistic
    released_statistic: ClassVar[str] = "truncated_sum"

    def _check_common(self, allowed=("laplace",)):
        lo, hi = self.bounds
        if lo < 0:
            raise ValueError(f"bounds: lower bound must be >= 0, {self.family} data are non-negative (got {lo:g})")
        if not lo < hi:
            raise ValueError(f"bounds: must be increasing [a, b] with a < b (got [{lo:g}, {hi:g}])")
        rec = self.statistics.truncated_sum
        _check_mechanism(rec, "truncated_sum", truncated_sensitivity(lo, hi), allowed)
        y = _scalar(rec, "truncated_sum")
        b = self.noise_scale
        if y < -INCONSISTENCY_SCALES * b or y > self.n * hi + INCONSISTENCY_SCALES * b:
            raise ValueError(f"statistics.truncated_sum.value: {y:g} is impossible for n = {self.n}, bounds "
                             f"[{lo:g}, {hi:g}] with noise scale {b:g}")
        return self

    @property
    def released(self) -> np.ndarray:
        return np.array([_scalar(self.statistics.truncated_sum, "truncated_sum")])


class ExponentialRelease(_TruncatedRelease):
    """Exponential records; ``truncated_sum`` = sum of the records inside ``bounds`` + Laplace(b/eps)."""

    family: Literal["exponential"]

    @model_validator(mode="after")
    def _check(self):
        return self._check_common()


class PoissonRelease(_TruncatedRelease):
    """Poisson counts; ``truncated_sum`` = sum of the counts inside ``bounds`` + Laplace(b/eps)."""

    family: Literal["poisson"]

    @model_validator(mode="after")
    def _check(self):
        lo, hi = self.bounds
        if math.ceil(lo) > math.floor(hi) or hi < 1:
            raise ValueError(f"bounds: [{lo:g}, {hi:g}] excludes every positive count")
        return self._check_common(COUNT_MECHANISMS)


# --------------------------------------------------------------------------- priors
def _positive(value, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(field, f"must be a number > 0 (got {shown(value)})")
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise InputError(field, f"must be a finite number > 0 (got {shown(value)})")
    return value


def _check_keys(prior: dict, allowed: set[str]) -> None:
    for key in prior:
        if key not in allowed | {"kind"}:
            raise InputError(f"prior.{key}", f"unknown key (allowed: kind, {', '.join(sorted(allowed))})")


def _check_kind(prior: dict, kind: str) -> None:
    got = prior.get("kind", kind)
    if got != kind:
        raise InputError("prior.kind", f"must be {kind!r} for this family (got {shown(got)})")


@dataclass(frozen=True)
class BetaPrior:
    alpha: float = 1.0
    beta: float = 1.0
    kind: str = "beta"

    def to_dict(self) -> dict:
        return {"kind": "beta", "alpha": self.alpha, "beta": self.beta}


@dataclass(frozen=True)
class DirichletPrior:
    #: concentration; a 1-element tuple means symmetric with the release's number of categories
    alpha: tuple[float, ...] = (1.0,)
    symmetric: bool = True
    kind: str = "dirichlet"

    def vector(self, k: int) -> np.ndarray:
        if self.symmetric:
            return np.full(k, self.alpha[0])
        if len(self.alpha) != k:
            raise InputError("prior.alpha", f"has {len(self.alpha)} values but the release has {k} categories")
        return np.asarray(self.alpha, float)

    def to_dict(self) -> dict:
        return {"kind": "dirichlet", "alpha": self.alpha[0] if self.symmetric else list(self.alpha)}


@dataclass(frozen=True)
class GammaPrior:
    shape: float = 1.0
    rate: float = 1.0
    kind: str = "gamma"

    def to_dict(self) -> dict:
        return {"kind": "gamma", "shape": self.shape, "rate": self.rate}


def _as_dict(prior, cls) -> dict | None:
    if prior is None:
        return None
    if isinstance(prior, cls):
        return prior.to_dict()
    if not isinstance(prior, dict):
        raise InputError("prior", f"must be a table with kind = {cls.kind!r} (got {type(prior).__name__})")
    return prior


def parse_beta_prior(prior, release=None) -> BetaPrior:
    if isinstance(prior, BetaPrior):
        return prior
    prior = _as_dict(prior, BetaPrior)
    if prior is None:
        return BetaPrior()
    _check_kind(prior, "beta")
    _check_keys(prior, {"alpha", "beta"})
    return BetaPrior(_positive(prior.get("alpha", 1.0), "prior.alpha"), _positive(prior.get("beta", 1.0), "prior.beta"))


def parse_dirichlet_prior(prior, release=None) -> DirichletPrior:
    if isinstance(prior, DirichletPrior):
        out = prior
    else:
        prior = _as_dict(prior, DirichletPrior)
        if prior is None:
            out = DirichletPrior()
        else:
            _check_kind(prior, "dirichlet")
            _check_keys(prior, {"alpha"})
            alpha = prior.get("alpha", 1.0)
            if isinstance(alpha, (list, tuple, np.ndarray)):
                if len(alpha) < 2:
                    raise InputError("prior.alpha", "a list needs one value per category (at least 2)")
                out = DirichletPrior(tuple(_positive(a, f"prior.alpha[{i}]") for i, a in enumerate(alpha)), False)
            else:
                out = DirichletPrior((_positive(alpha, "prior.alpha"),), True)
    if release is not None:
        out.vector(len(release.released))  # raises on a length mismatch
    return out


def parse_gamma_prior(prior, release=None) -> GammaPrior:
    if isinstance(prior, GammaPrior):
        return prior
    prior = _as_dict(prior, GammaPrior)
    if prior is None:
        return GammaPrior()
    _check_kind(prior, "gamma")
    _check_keys(prior, {"shape", "rate"})
    return GammaPrior(_positive(prior.get("shape", 1.0), "prior.shape"), _positive(prior.get("rate", 1.0), "prior.rate"))


# --------------------------------------------------------------------------- curators
#: the typed options of the four curators here (docs/cli.md, "Curator options")
BinomialCuratorOptions = curator_options("binomial", "column", "rho", "mechanism", module=__name__)
MultinomialCuratorOptions = curator_options("multinomial", "column", "rho", "mechanism", "categories", module=__name__)
ExponentialCuratorOptions = curator_options("exponential", "column", "bounds", module=__name__)
PoissonCuratorOptions = curator_options("poisson", "column", "rho", "mechanism", "bounds", module=__name__)


def noisy_record(options, values, sensitivity: dict | float, scalar: bool) -> dict:
    """The statistic record of ``values`` released through ``options.mechanism`` (default laplace) at the
    budget the options give: epsilon (laplace, discrete-laplace) or rho (discrete-gaussian, zCDP).

    ``sensitivity``: the replace-one sensitivity, a number or {"L1": .., "L2": ..} by the mechanism's norm.
    """
    name = getattr(options, "mechanism", None) or "laplace"  # the exponential curator takes none
    if name not in COUNT_MECHANISMS and not is_integer_noise(name):
        raise InputError("mechanism", f"must be one of {', '.join(COUNT_MECHANISMS)} for the {options.family} "
                         f"curator (got {shown(name)})")
    kind = get_mechanism(name)
    sens = sensitivity[kind.sensitivity_norm] if isinstance(sensitivity, dict) else float(sensitivity)
    scale, budget = kind.noise_for_budget(sens, epsilon=options.epsilon, rho=getattr(options, "rho", None))
    noisy, sampler = draw_noise(name, np.asarray(values, float), scale, options.seed)
    if kind.integer_valued:
        vals = [int(v) for v in np.round(noisy)]  # already integers: exact integer noise on integer counts
    else:
        vals = [float(v) for v in noisy]
    return {"value": vals[0] if scalar else vals, "mechanism": name, **budget, "sensitivity": sens,
            "sampler": sampler}


def _column(frame, options):
    col = require_column(frame, options.column, "column")
    if col.isna().any():
        row = int(np.flatnonzero(col.isna().to_numpy())[0])
        raise InputError(f"data.{options.column}", f"row {row + 1} is empty (column {options.column!r})")
    if len(col) == 0:
        raise InputError("data", "has no rows")
    return col


def _numeric(col, name: str) -> np.ndarray:
    return numeric_values(col, name)


@curator(BinomialCuratorOptions)
def curate_binomial(frame, options) -> dict:
    col = _column(frame, options)
    if col.dtype == bool:
        x = col.to_numpy(dtype=float)
    else:
        x = _numeric(col, options.column)
    if not np.all((x == 0) | (x == 1)):
        raise InputError("column", f"column {options.column!r} must hold only 0/1 values for the binomial family")
    return {"format": FORMAT, "family": "binomial", "n": int(len(x)),
            "statistics": {"successes": noisy_record(options, [x.sum()], 1.0, scalar=True)}}


@curator(MultinomialCuratorOptions)
def curate_multinomial(frame, options) -> dict:
    col = _column(frame, options).astype(str)
    categories = options.categories
    note = None
    if categories is None:
        # the category set should be public; taking it from the data reveals which labels occur
        categories = sorted(col.unique())
        note = "category labels were read from the data; declare them publicly (Python API: extra['categories'])"
    else:
        categories = [str(c) for c in categories]
        unknown = set(col.unique()) - set(categories)
        if unknown:
            raise InputError("column", f"label {sorted(unknown)[0]!r} is not among the declared categories")
    if len(categories) < 2:
        raise InputError("column", "the multinomial family needs at least 2 categories")
    counts = np.array([(col == c).sum() for c in categories], dtype=float)
    # one record moves between two categories: L1 2, L2 sqrt(2)
    record = noisy_record(options, counts, {"L1": 2.0, "L2": math.sqrt(2.0)}, scalar=False)
    if note:
        record["note"] = note
    return {"format": FORMAT, "family": "multinomial", "n": int(len(col)), "categories": list(categories),
            "statistics": {"counts": record}}


def _curate_truncated(frame, options) -> dict:
    model = _model_of(options.family)
    col = _column(frame, options)
    x = _numeric(col, options.column)
    if options.bounds is None:
        raise InputError("bounds", f"the {options.family} family needs public truncation bounds (--bounds A B)")
    lo, hi = (float(v) for v in options.bounds)
    model.check_records(x, options.column, options.family)
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo < hi):
        raise InputError("bounds", f"must be finite with 0 <= a < b (got [{lo:g}, {hi:g}])")
    inside = (x >= lo) & (x <= hi)
    sens = truncated_sensitivity(lo, hi)
    if model.integer_records and is_integer_noise(getattr(options, "mechanism", None)):
        # integer records inside integer-valued public bounds: the truncated sum is an integer
        lo, hi = float(math.ceil(lo)), float(math.floor(hi))
        sens = truncated_sensitivity(lo, hi)
    return {"format": FORMAT, "family": options.family, "n": int(len(x)), "bounds": [lo, hi],
            "statistics": {"truncated_sum": noisy_record(options, [x[inside].sum()], sens, scalar=True)}}


@curator(ExponentialCuratorOptions)
def curate_exponential(frame, options) -> dict:
    return _curate_truncated(frame, options)


@curator(PoissonCuratorOptions)
def curate_poisson(frame, options) -> dict:
    return _curate_truncated(frame, options)


# --------------------------------------------------------------------------- the model the engines ask for
class RecordLaw(enum.Enum):
    """The law of one record: it fixes the family's sufficient statistic, its conjugate update and which Gibbs-SS
    kernel runs (Algorithm 1 for the bounded counts, Algorithm 2 with Lemma 1's region moments of the record law
    for a truncated sum).  An engine asks a release's ``expfam.record_law``, never its family's name, as it asks
    a mechanism its ``noise_shape``."""

    #: 0/1 records, one released count of successes, Beta prior
    BERNOULLI = "bernoulli"
    #: one of K categories per record, one released count per category, Dirichlet prior
    CATEGORICAL = "categorical"
    #: positive real records, a released sum over public bounds, Gamma prior on the rate
    EXPONENTIAL = "exponential"
    #: non-negative integer records, a released sum over public bounds, Gamma prior on the rate
    POISSON = "poisson"


@dataclass(frozen=True)
class ExpFamModel:
    """What the exponential families' engines (Gibbs-SS, naive, non-private, OPS, exact) and simulators ask of a
    family's model.  Each release class carries its own (``BinomialRelease.expfam``, ...), so an engine reads
    ``release.expfam`` instead of comparing the release's family name."""

    record_law: RecordLaw
    #: the posterior's variable
    variable: str
    #: the confidential statistic's key in a simulation (``non-private`` and ``ops`` condition on it)
    statistic: str

    #: one released count per category: the statistic is a vector and the posterior has a ``category`` dim
    vector: ClassVar[bool] = False
    #: the statistic is a sum over public truncation bounds (Algorithm 2; the release has ``bounds``)
    truncated: ClassVar[bool] = False

    def prior_parameters(self, prior, k: int) -> list[float]:
        """The prior's parameters (each must be finite and > 0); ``k``: the number of released counts."""
        raise NotImplementedError

    def conjugate_draws(self, s, n, prior, size: tuple, rng) -> np.ndarray:
        """Conjugate posterior draws given statistics ``s`` (T,) or (T, K) of ``n`` records: (T, *size[, K])."""
        raise NotImplementedError

    def clip_statistic(self, y, n, bounds=None) -> np.ndarray:
        """Noisy statistics clipped to the range a true statistic can take."""
        raise NotImplementedError

    # what the observation model (:func:`expfam_observation_model`) asks of the record law
    #: the support of the posterior's variable (:class:`~dpposterior.observation.Variable`)
    support: ClassVar[str] = "real"

    def query(self, release):
        """The query of the release's measurement: records -> the exact statistic that the mechanism perturbed."""
        raise NotImplementedError

    def draw_records(self, theta, n: int, rng) -> np.ndarray:
        """``n`` records of the model at parameter ``theta``."""
        raise NotImplementedError

    def statistic_moments(self, theta, n: int, bounds=None):
        """Mean and variance (a covariance matrix for a vector of counts) of the exact statistic of ``n`` records
        at parameter ``theta``."""
        raise NotImplementedError

    def prior_draw(self, prior, k: int, rng):
        """One draw of the parameter from ``prior`` (``k``: the number of released counts)."""
        raise NotImplementedError

    def prior_log_density(self, prior, theta, k: int) -> float:
        """The prior's log density at ``theta`` (-inf outside the parameter's support)."""
        raise NotImplementedError

    def describe_statistic(self, n: int, k: int, bounds=None) -> str:
        """One line naming the latent statistic (for messages)."""
        raise NotImplementedError


def _conjugate_arrays(s, n, size: tuple):
    """``s`` and ``n`` as float arrays over the T releases, and the index that adds ``size``'s axes."""
    s = np.asarray(s, float)
    n = np.broadcast_to(np.asarray(n, float), (s.shape[0],))
    return s, n, (slice(None),) + (None,) * len(size)


@dataclass(frozen=True)
class _BoundedCounts(ExpFamModel):
    """Counts of n records (Algorithm 1): every count lies in [0, n]."""

    def clip_statistic(self, y, n, bounds=None) -> np.ndarray:
        y = np.asarray(y, float)
        n = np.asarray(n, float)
        nn = n.reshape(n.shape + (1,) * (y.ndim - n.ndim)) if n.ndim else n
        return np.clip(y, 0.0, nn)


@dataclass(frozen=True)
class BetaBernoulli(_BoundedCounts):
    def prior_parameters(self, prior, k: int) -> list[float]:
        return [prior.alpha, prior.beta]

    def conjugate_draws(self, s, n, prior, size: tuple, rng) -> np.ndarray:
        s, n, expand = _conjugate_arrays(s, n, size)
        return rng.beta((prior.alpha + s)[expand], (prior.beta + n - s)[expand], size=(s.shape[0], *size))

    support: ClassVar[str] = "unit"

    def query(self, release):
        return SuccessCount()

    def draw_records(self, p, n, rng) -> np.ndarray:
        return (rng.random(n) < p).astype(float)

    def statistic_moments(self, p, n, bounds=None):
        p = float(p)
        return n * p, n * p * (1.0 - p)

    def prior_draw(self, prior, k, rng):
        return float(rng.beta(prior.alpha, prior.beta))

    def prior_log_density(self, prior, p, k) -> float:
        from scipy import special

        p = float(p)
        if not 0.0 <= p <= 1.0:
            return -math.inf
        return float(special.xlogy(prior.alpha - 1.0, p) + special.xlog1py(prior.beta - 1.0, -p)
                     - special.betaln(prior.alpha, prior.beta))

    def describe_statistic(self, n, k, bounds=None) -> str:
        return f"the number of successes among {n} Bernoulli records"


@dataclass(frozen=True)
class DirichletCategorical(_BoundedCounts):
    vector: ClassVar[bool] = True

    def prior_parameters(self, prior, k: int) -> list[float]:
        return list(np.ravel(prior.vector(k)))

    def conjugate_draws(self, s, n, prior, size: tuple, rng) -> np.ndarray:
        s = np.asarray(s, float)
        T, K = s.shape
        conc = prior.vector(K)[None, :] + s  # (T, K)
        g = rng.gamma(conc[(slice(None),) + (None,) * len(size) + (slice(None),)], size=(T, *size, K))
        return g / g.sum(axis=-1, keepdims=True)

    support: ClassVar[str] = "simplex"

    def query(self, release):
        return CategoryCounts(len(release.released))

    def draw_records(self, p, n, rng) -> np.ndarray:
        p = np.asarray(p, float)
        return rng.choice(p.size, size=n, p=p)

    def statistic_moments(self, p, n, bounds=None):
        p = np.asarray(p, float)
        return n * p, n * (np.diag(p) - np.outer(p, p))

    def prior_draw(self, prior, k, rng):
        return rng.dirichlet(prior.vector(k))

    def prior_log_density(self, prior, p, k) -> float:
        from scipy import special

        p = np.asarray(p, float)
        alpha = prior.vector(k)
        if p.shape != (k,) or np.any(p < 0.0) or not math.isclose(float(p.sum()), 1.0, abs_tol=1e-9):
            return -math.inf
        return float(np.sum(special.xlogy(alpha - 1.0, p)) + special.gammaln(alpha.sum())
                     - np.sum(special.gammaln(alpha)))

    def describe_statistic(self, n, k, bounds=None) -> str:
        return f"the counts of {n} categorical records in {k} categories"


@dataclass(frozen=True)
class _GammaTruncated(ExpFamModel):
    """A rate with a Gamma prior, records released as their sum over public bounds [a, b] (Algorithm 2)."""

    truncated: ClassVar[bool] = True
    #: whether the records are integers (then an integer mechanism may release their truncated sum)
    integer_records: ClassVar[bool] = False

    def prior_parameters(self, prior, k: int) -> list[float]:
        return [prior.shape, prior.rate]

    def clip_statistic(self, y, n, bounds=None) -> np.ndarray:
        y = np.asarray(y, float)
        hi = np.inf if bounds is None else np.asarray(n, float) * np.asarray(bounds, float)[..., 1]
        return np.clip(y, 0.0, hi)

    def check_records(self, x: np.ndarray, column: str, family: str) -> None:
        """Refuse, naming ``column``, records the model cannot have produced."""
        raise NotImplementedError

    def draw_records(self, rate: float, n: int, rng) -> np.ndarray:
        """``n`` records of the model at ``rate``."""
        raise NotImplementedError

    def simulation_bounds(self, prior: GammaPrior) -> tuple[float, float]:
        """Public truncation bounds for simulations: the central 95% of the prior predictive.

        The paper keeps "the middle 95% of individuals"; choosing the bounds from the true theta would make
        them informative about theta, so simulations use the prior predictive."""
        raise NotImplementedError

    support: ClassVar[str] = "positive"

    def query(self, release):
        lo, hi = release.bounds
        return TruncatedSum(float(lo), float(hi))

    def truncated_record_moments(self, rate: float, lo: float, hi: float) -> tuple[float, float]:
        """E[c] and E[c^2] of one record's contribution c = x 1{lo <= x <= hi} to the truncated sum."""
        raise NotImplementedError

    def statistic_moments(self, rate, n, bounds=None):
        # the n contributions are independent: the sum's mean and variance are n times one contribution's
        m1, m2 = self.truncated_record_moments(float(rate), float(bounds[0]), float(bounds[1]))
        return n * m1, n * (m2 - m1 * m1)

    def prior_draw(self, prior, k, rng):
        return float(rng.gamma(prior.shape, 1.0 / prior.rate))

    def prior_log_density(self, prior, rate, k) -> float:
        from scipy import special

        rate = float(rate)
        if not rate > 0.0:
            return -math.inf
        return float(prior.shape * math.log(prior.rate) - special.gammaln(prior.shape)
                     + special.xlogy(prior.shape - 1.0, rate) - prior.rate * rate)


@dataclass(frozen=True)
class GammaExponential(_GammaTruncated):
    def conjugate_draws(self, s, n, prior, size: tuple, rng) -> np.ndarray:
        s, n, expand = _conjugate_arrays(s, n, size)
        return rng.gamma((prior.shape + n)[expand], 1.0 / (prior.rate + s)[expand], size=(s.shape[0], *size))

    def check_records(self, x, column, family) -> None:
        if np.any(x <= 0):
            raise InputError("column", f"column {column!r} must hold positive values for the {family} family")

    def draw_records(self, rate, n, rng) -> np.ndarray:
        return rng.exponential(1.0 / rate, size=n)

    def simulation_bounds(self, prior):
        # Lomax prior predictive: P(X > x) = (rate / (rate + x))^shape  ->  x_p = rate * ((1 - p)^(-1/shape) - 1)
        def q(p):
            return prior.rate * ((1.0 - p) ** (-1.0 / prior.shape) - 1.0)

        return float(q(0.025)), float(q(0.975))

    def truncated_record_moments(self, rate, lo, hi):
        # integrals of x and x^2 times rate e^{-rate x} over [lo, hi] (antiderivatives -(x + 1/r) e^{-rx} and
        # -(x^2 + 2x/r + 2/r^2) e^{-rx})
        def tail(x, power):
            e = math.exp(-rate * x)
            return e * (x + 1.0 / rate) if power == 1 else e * (x * x + 2.0 * x / rate + 2.0 / rate**2)

        return tail(lo, 1) - tail(hi, 1), tail(lo, 2) - tail(hi, 2)

    def describe_statistic(self, n, k, bounds=None) -> str:
        return f"the sum of the {n} exponential records inside [{bounds[0]:g}, {bounds[1]:g}]"


@dataclass(frozen=True)
class GammaPoisson(_GammaTruncated):
    integer_records: ClassVar[bool] = True

    def conjugate_draws(self, s, n, prior, size: tuple, rng) -> np.ndarray:
        s, n, expand = _conjugate_arrays(s, n, size)
        return rng.gamma((prior.shape + s)[expand], 1.0 / (prior.rate + n)[expand], size=(s.shape[0], *size))

    def check_records(self, x, column, family) -> None:
        if np.any(x < 0) or np.any(x != np.round(x)):
            raise InputError("column", f"column {column!r} must hold non-negative integers for the {family} family")

    def draw_records(self, rate, n, rng) -> np.ndarray:
        return rng.poisson(rate, size=n).astype(float)

    def simulation_bounds(self, prior):
        # negative binomial prior predictive; whole numbers, so the truncated sum of integer records is one too
        from scipy import stats

        nb = stats.nbinom(prior.shape, prior.rate / (1.0 + prior.rate))
        lo, hi = float(nb.ppf(0.025)), float(nb.ppf(0.975))
        hi = max(hi, lo + 1.0, 1.0)
        return lo, hi

    def truncated_record_moments(self, rate, lo, hi):
        from scipy import stats

        x = np.arange(max(math.ceil(lo), 0), math.floor(hi) + 1, dtype=float)
        pmf = stats.poisson.pmf(x, rate)
        return float(np.sum(x * pmf)), float(np.sum(x * x * pmf))

    def describe_statistic(self, n, k, bounds=None) -> str:
        return f"the sum of the {n} Poisson counts inside [{bounds[0]:g}, {bounds[1]:g}]"


BinomialRelease.expfam = BetaBernoulli(RecordLaw.BERNOULLI, "p", "successes")
MultinomialRelease.expfam = DirichletCategorical(RecordLaw.CATEGORICAL, "p", "counts")
ExponentialRelease.expfam = GammaExponential(RecordLaw.EXPONENTIAL, "rate", "sum")
PoissonRelease.expfam = GammaPoisson(RecordLaw.POISSON, "rate", "sum")


# --------------------------------------------------------------------------- observation model
#: the event dim of a vector of counts and of its parameter
CATEGORY_DIM = "category"


class SuccessCount:
    """Query: the number of 1s among 0/1 records (the released count of successes' exact value)."""

    shape = ()

    def __call__(self, records) -> np.ndarray:
        return np.asarray(np.sum(np.asarray(records, float)))


@dataclass(frozen=True)
class CategoryCounts:
    """Query: the number of records in each of ``categories`` categories (records are category indices)."""

    categories: int

    @property
    def shape(self) -> tuple[int]:
        return (self.categories,)

    def __call__(self, records) -> np.ndarray:
        return np.bincount(np.asarray(records, np.int64), minlength=self.categories).astype(float)


@dataclass(frozen=True)
class TruncatedSum:
    """Query: the sum of the records inside the public bounds [lo, hi] (those outside contribute 0)."""

    lo: float
    hi: float
    shape = ()

    def __call__(self, records) -> np.ndarray:
        x = np.asarray(records, float)
        return np.asarray(np.sum(x[(x >= self.lo) & (x <= self.hi)]))


@dataclass(frozen=True)
class SufficientStatistic:
    """The latent statistic's state: the exact statistic (``query`` of the records) of ``n`` records of the
    family's model, given its parameter theta (``bounds``: the public truncation bounds of a truncated sum)."""

    model: ExpFamModel
    n: int
    query: object
    bounds: tuple[float, float] | None = None

    def records(self, theta, rng: np.random.Generator) -> np.ndarray:
        """n records given theta."""
        return self.model.draw_records(theta, self.n, rng)

    def simulate(self, theta, rng: np.random.Generator) -> np.ndarray:
        """One draw of the statistic given theta (the query of n records)."""
        return self.query(self.records(theta, rng))

    def moments(self, theta):
        """The statistic's mean and variance (covariance matrix for a vector of counts) given theta."""
        return self.model.statistic_moments(theta, self.n, self.bounds)


def expfam_observation_model(release, prior, capabilities) -> ObservationModel:
    """The release as one measurement (its noisy statistic) of the exact statistic of n records of the family's
    model, with one variable, the model's parameter (a vector over the categories of a multinomial release).

    ``prior``: the family's parsed prior; ``capabilities``: what the family's engines can do with the latent
    statistic (:data:`~dpposterior.observation.CAPABILITIES`), given by the family."""
    model = release.expfam
    query = model.query(release)
    k = int(release.released.size)
    bounds = (float(release.bounds[0]), float(release.bounds[1])) if model.truncated else None
    measurement = Measurement(f"statistics.{release.released_statistic}", release.released.reshape(query.shape),
                              query, release.mechanism)
    latent = LatentStatistic(model.describe_statistic(release.n, k, bounds), frozenset(capabilities),
                             SufficientStatistic(model, release.n, query, bounds))
    if model.vector:
        variable = Variable(model.variable, (CATEGORY_DIM,), {CATEGORY_DIM: release.category_labels}, model.support)
    else:
        variable = Variable(model.variable, (), {}, model.support)
    parameters = model.prior_parameters(prior, k)
    describe = f"{prior.kind}({', '.join(f'{float(v):g}' for v in parameters)})"
    prior_of_model = Prior(sample=lambda rng: {model.variable: model.prior_draw(prior, k, rng)},
                           parameters=prior.to_dict(),
                           log_density=lambda values: model.prior_log_density(prior, values[model.variable], k),
                           describe=describe)
    return ObservationModel(release.family, (variable,), prior_of_model, latent, (measurement,), release.n)


def _model_of(family: str) -> ExpFamModel:
    """The model of a registered family (by the registry, as ``infer`` finds it)."""
    from . import get_family

    return get_family(family).release_model.expfam


# --------------------------------------------------------------------------- simulation
def _check_sim_args(n, epsilon, mechanism=None, rho=None):
    """``n`` and the budget of a simulated release: ``epsilon`` (Laplace, the default, and discrete-laplace)
    or ``rho`` (a mechanism accounted in zCDP: discrete-gaussian), exactly one."""
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise InputError("n", f"must be an integer >= 1 (got {shown(n)})")
    if mechanism not in (None, *COUNT_MECHANISMS) and not is_integer_noise(mechanism):
        raise InputError("mechanism", f"must be one of {', '.join(COUNT_MECHANISMS)} or a registered integer noise "
                         f"law (got {shown(mechanism)})")
    if accounts_rho(mechanism):
        if epsilon is not None:
            raise InputError("epsilon", f"not a budget of mechanism {mechanism} (give its zCDP budget rho)")
        if isinstance(rho, bool) or not (isinstance(rho, (int, float)) and math.isfinite(rho) and rho > 0):
            raise InputError("rho", f"must be a finite number > 0 with mechanism {mechanism} (got {shown(rho)})")
        return
    if rho is not None:
        raise InputError("rho", f"is the budget of mechanism {' or '.join(rho_mechanisms())} only (give epsilon)")
    if not (isinstance(epsilon, (int, float)) and math.isfinite(epsilon) and epsilon > 0):
        raise InputError("epsilon", f"must be a finite number > 0 (got {shown(epsilon)})")


def _simulated_record(mechanism: str, epsilon, rho, values, sensitivity: dict | float, rng, scalar: bool) -> dict:
    """The statistic record of integer ``values`` released through the integer mechanism ``mechanism``
    (discrete-laplace at ``epsilon``, discrete-gaussian at ``rho``), with exact integer noise from the
    mechanism's own sampler on ``rng`` -- the noise the curator draws with a seed (``noisy_record``)."""
    kind = get_mechanism(mechanism)
    sens = sensitivity[kind.sensitivity_norm] if isinstance(sensitivity, dict) else float(sensitivity)
    scale, budget = kind.noise_for_budget(sens, epsilon=epsilon, rho=rho)
    values = np.asarray(values, float)
    noisy = values + kind.numpy_noise(scale, values.shape, rng)
    vals = [int(v) for v in np.round(noisy)]
    return {"value": vals[0] if scalar else vals, "mechanism": mechanism, **budget, "sensitivity": sens,
            "sampler": "simulation"}


def simulate_binomial(prior: BetaPrior, n: int, epsilon: float | None, rng, mechanism: str | None = None,
                      rho: float | None = None):
    """theta ~ prior, records ~ model, the count released through ``mechanism`` (default: Laplace at
    ``epsilon``; discrete-laplace at ``epsilon``, discrete-gaussian at ``rho``)."""
    from . import SimulatedRelease

    _check_sim_args(n, epsilon, mechanism, rho)
    p = float(rng.beta(prior.alpha, prior.beta))
    s = int(rng.binomial(n, p))
    if is_integer_noise(mechanism):
        record = _simulated_record(mechanism, epsilon, rho, [s], 1.0, rng, scalar=True)
    else:
        y = s + rng.laplace(0.0, 1.0 / epsilon)
        record = {"value": float(y), "mechanism": "laplace", "epsilon": float(epsilon), "sensitivity": 1.0,
                  "sampler": "simulation"}
    release = BinomialRelease.model_validate(
        {"format": FORMAT, "family": "binomial", "n": int(n), "statistics": {"successes": record}})
    return SimulatedRelease(theta={"p": p}, release=release, confidential={"successes": s})


#: number of categories simulated when the Dirichlet prior is symmetric (no list of alphas)
DEFAULT_SIM_CATEGORIES = 4


def simulate_multinomial(prior: DirichletPrior, n: int, epsilon: float | None, rng, mechanism: str | None = None,
                         rho: float | None = None):
    """As :func:`simulate_binomial`, for the counts of every category (L1 sensitivity 2, L2 sqrt(2))."""
    from . import SimulatedRelease

    _check_sim_args(n, epsilon, mechanism, rho)
    alpha = prior.vector(DEFAULT_SIM_CATEGORIES if prior.symmetric else len(prior.alpha))
    p = rng.dirichlet(alpha)
    counts = rng.multinomial(n, p)
    if is_integer_noise(mechanism):
        record = _simulated_record(mechanism, epsilon, rho, counts, {"L1": 2.0, "L2": math.sqrt(2.0)}, rng,
                                   scalar=False)
    else:
        y = counts + rng.laplace(0.0, 2.0 / epsilon, size=len(counts))
        record = {"value": [float(v) for v in y], "mechanism": "laplace", "epsilon": float(epsilon),
                  "sensitivity": 2.0, "sampler": "simulation"}
    release = MultinomialRelease.model_validate(
        {"format": FORMAT, "family": "multinomial", "n": int(n), "statistics": {"counts": record}})
    return SimulatedRelease(theta={"p": p}, release=release, confidential={"counts": counts.tolist()})


def simulate_truncated(family: str, prior: GammaPrior, n: int, epsilon: float | None, rng,
                       mechanism: str | None = None, rho: float | None = None):
    """theta ~ prior, records ~ model, the truncated sum released through ``mechanism`` (default Laplace at
    ``epsilon``; for integer records (poisson) also discrete-laplace at ``epsilon`` or discrete-gaussian at
    ``rho``: the bounds of the prior predictive are whole numbers, so the truncated sum is an integer)."""
    from . import SimulatedRelease, get_family

    release_cls = get_family(family).release_model
    model = release_cls.expfam
    if is_integer_noise(mechanism) and not model.integer_records:
        raise InputError("mechanism", f"the {family} family's records are real numbers: laplace only "
                         f"(got {shown(mechanism)})")
    _check_sim_args(n, epsilon, mechanism, rho)
    lo, hi = model.simulation_bounds(prior)
    rate = float(rng.gamma(prior.shape, 1.0 / prior.rate))
    x = model.draw_records(rate, n, rng)
    inside = (x >= lo) & (x <= hi)
    sens = truncated_sensitivity(lo, hi)
    truncated_sum = float(x[inside].sum())
    full_sum = float(x.sum())
    if is_integer_noise(mechanism):
        record = _simulated_record(mechanism, epsilon, rho, [truncated_sum], sens, rng, scalar=True)
        # the "cheating" naive baseline sees the untruncated sum with the same noise (same mechanism, scale)
        noisy_full = float(_simulated_record(mechanism, epsilon, rho, [full_sum], sens, rng, scalar=True)["value"])
    else:
        scale = sens / epsilon
        y = truncated_sum + rng.laplace(0.0, scale)
        record = {"value": float(y), "mechanism": "laplace", "epsilon": float(epsilon), "sensitivity": sens,
                  "sampler": "simulation"}
        noisy_full = None
    release = release_cls.model_validate(
        {"format": FORMAT, "family": family, "n": int(n), "bounds": [lo, hi],
         "statistics": {"truncated_sum": record}})
    if noisy_full is None:
        # the "cheating" naive baseline of the paper sees the untruncated sum with the same noise magnitude
        noisy_full = full_sum + float(rng.laplace(0.0, scale))
    confidential = {"sum": full_sum, "truncated_sum": truncated_sum, "noisy_full_sum": noisy_full}
    return SimulatedRelease(theta={"rate": rate}, release=release, confidential=confidential)


def require_confidential(options, method: str) -> dict:
    """The ``confidential`` option of a baseline engine's options (simulations only), checked."""
    conf = options.confidential
    if conf is None:
        raise RefusedError("method", f"{method!r} needs the confidential statistics (engine option "
                                     f"'confidential'), which exist only inside simulations (dpposterior calibrate)")
    if not isinstance(conf, dict):
        raise InputError("confidential", "must be a dict of confidential statistics")
    return conf


#: the batched calibration path of every exponential-family engine
_BATCH = "dpposterior.inference.expfam_baselines:run_batch"


#: what ``auto`` tries first on a count release: the exact enumeration where it is competent and affordable
#: (``exact_counts.competence``), else ``auto_for_noise``
AUTO_ORDER = ("exact",)


def auto_for_noise(release) -> str:
    """``auto`` of the count families where ``exact`` is not affordable: Gibbs-SS (Bernstein & Sheldon) for
    continuous Laplace noise, the exact enumeration engine for every other mechanism (integer noise: there is no
    Laplace scale mixture; ``exact`` then refuses in one line what it cannot hold)."""
    return "gibbs-ss" if is_continuous_laplace(release.noisy_record.mechanism) else "exact"


def family_methods(ops: bool = False, exact: bool = False, da_mcmc: bool = False) -> dict[str, EngineSpec]:
    """The method table of an exponential family: Gibbs-SS and the baselines, optionally the exact count
    engine, OPS and data-augmentation MCMC on the family's record model (its ``da_model`` hook)."""
    baselines = "dpposterior.inference.expfam_baselines"
    methods = {
        "gibbs-ss": EngineSpec.of("dpposterior.inference.gibbs_ss", "gibbs_ss", "GibbsSSOptions", batch=_BATCH),
        "naive": EngineSpec.of(baselines, "naive", "NaiveOptions", batch=_BATCH),
        "non-private": EngineSpec.of(baselines, "non_private", "NonPrivateOptions", batch=_BATCH),
    }
    if exact:
        methods["exact"] = EngineSpec.of("dpposterior.inference.exact_counts", "exact", "ExactOptions",
                                         competence="competence")
    if ops:
        methods["ops"] = EngineSpec.of(baselines, "ops", "OpsOptions", batch=_BATCH)
    if da_mcmc:
        methods["da-mcmc"] = DA_MCMC
    return methods
