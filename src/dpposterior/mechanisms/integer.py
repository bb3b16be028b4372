"""What the integer-noise mechanisms share: log-mass tables, the CDF, the inverse-CDF transform,
the tail window, and the exact two-sided-geometric sampler.

Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020; CKS):
noise on the integers is what a count should get -- a float draw leaks through its low-order bits
(Mironov 2012), and rounding a continuous draw is a different distribution (rounded Gaussian != the
discrete Gaussian).  A subclass gives the unnormalised log-mass ``log_kernel(k)`` (symmetric in k),
the log-normaliser ``log_norm``, its tail window and an exact sampler; everything else is here.

The third-party contract (docs/adding-a-mechanism.md): a subclass that sets ``name`` and ``record_fields`` (the
release record's keys passed as keyword arguments to its constructor) and defines those four members, registered
with :func:`dpposterior.mechanisms.register`, gets from this class its record parsing and checks, the CDF and
inverse-CDF transform, the exact engines' windows, the audit's log density and its privacy accounting: the
privacy loss distribution of its mass function shifted by the sensitivity (Google's dp-accounting, pessimistic
estimate), composed with the release's other statistics (``accounting.compose``).

All noise values are integers k; a release y* = s + k of an integer statistic s is an integer.
``logpdf(y, s)`` is -inf where y - s is not an integer.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Mechanism, as_rng

#: default tail mass left outside an enumeration window (the exact count engines check it)
DEFAULT_TAIL = 1e-12
#: the delta at which a statistic accounted at a delta reports its epsilon when the release states none
REPORT_DELTA = 1e-6
#: the largest noise table (entries) built for the CDF / transform; beyond it the noise is so wide
#: that no count release uses it (a discrete Gaussian with sigma ~ 10^6)
MAX_TABLE = 20_000_001


def is_integral(values) -> np.ndarray:
    """Elementwise: finite and equal to an integer (11 and 11.0 are, 11.5 is not)."""
    v = np.asarray(values, float)
    return np.isfinite(v) & (v == np.round(v))


#: the record keys any mechanism's record may carry besides its own ``record_fields`` (the family derives the
#: sensitivity; scale: naive-bayes's counts or proportions)
COMMON_RECORD_FIELDS = ("value", "mechanism", "sampler", "note", "scale", "sensitivity")
#: record keys a law may not take for its own parameters: they mean something else in every release record
RESERVED_RECORD_FIELDS = ("value", "mechanism", "sampler", "note", "scale")
#: the record fields of the schema that belong to particular mechanisms (refused for one that does not list them)
SCHEMA_RECORD_FIELDS = ("epsilon", "delta", "sigma", "rho", "trials", "m")


def _record_get(record, key):
    if isinstance(record, dict):
        return record.get(key)
    if key in type(record).model_fields:
        return getattr(record, key)
    return (record.model_extra or {}).get(key)


class IntegerNoise(Mechanism):
    """Additive noise on the integers, symmetric about 0 and unimodal (the tail window bounds the mass outside it)."""

    integer_valued = True
    additive_symmetric = True
    #: the release record's keys passed as keyword arguments to the constructor (the third-party contract)
    record_fields: tuple[str, ...] = ()
    #: a count vector's replace-one change is measured by its L1 norm: one record moved between two cells
    #: shifts two coordinates by one each (``accounting.unit_shifts``)
    sensitivity_norm = "L1"

    @staticmethod
    def norm(diff):
        return float(np.abs(diff).sum())

    # ------------------------------------------------------------------ what a subclass gives
    def log_kernel(self, k) -> np.ndarray:  # pragma: no cover - abstract
        """Unnormalised log-mass at integer ``k`` (0 at k = 0)."""
        raise NotImplementedError

    @property
    def log_norm(self) -> float:  # pragma: no cover - abstract
        """log sum_k exp(log_kernel(k))."""
        raise NotImplementedError

    def tail_window(self, tail: float = DEFAULT_TAIL) -> int:  # pragma: no cover - abstract
        """The smallest W with P(|noise| > W) <= tail."""
        raise NotImplementedError

    def draw(self, shape, rng: np.random.Generator) -> np.ndarray:  # pragma: no cover - abstract
        """Exact integer noise (seeded studies; publication noise comes from OpenDP)."""
        raise NotImplementedError

    # ------------------------------------------------------------------ derived
    def privacy_losses(self, shifts):
        """The privacy loss of each shifted coordinate, from the mass function (dp-accounting's
        ``from_two_probability_mass_functions``): no closed form is needed."""
        from .accounting import Loss

        return tuple(Loss("integer", 0.0, float(int(s + 1e-9)), mechanism=self) for s in shifts if s >= 1)

    def _worst_shifts(self, dim: int, shifts):
        """:meth:`worst_shifts`, a law built without a sensitivity moving by one."""
        return self.worst_shifts(dim, shifts, getattr(self, "sensitivity", None) or 1.0)

    def privacy_accounting(self, delta=None, dim=1, shifts=None):
        """A law with a closed-form accountant (``loss_kind``) states it; any other: epsilon at ``delta`` of the
        worst pair's privacy loss distributions, built from the mass function and composed by dp-accounting
        (pessimistic estimate: an upper bound on the tight value)."""
        if self.loss_kind is not None:
            return super().privacy_accounting(delta, dim, shifts)
        from .accounting import PrivacyCost, check_delta, pld_epsilon

        delta = REPORT_DELTA if delta is None else check_delta(delta, "delta")
        losses = self.privacy_losses(self._worst_shifts(dim, shifts))
        return PrivacyCost(pld_epsilon(losses, delta), delta, None, "pld",
                           f"(epsilon, delta): privacy loss distribution of {self.name}'s mass function at the worst "
                           "pair, composed by Google's dp-accounting (pessimistic estimate: an upper bound on the "
                           "tight value)", losses=losses)

    def privacy_cost(self):
        """(epsilon, delta) of one statistic at :data:`REPORT_DELTA` (its privacy loss distribution)."""
        return self.privacy_accounting(REPORT_DELTA).as_tuple()

    def logpmf(self, k) -> np.ndarray:
        """log P(noise = k); -inf off the integers."""
        k = np.asarray(k, float)
        out = self.log_kernel(np.where(is_integral(k), k, 0.0)) - self.log_norm
        return np.where(is_integral(k), out, -np.inf)

    def logpdf(self, y, s):
        return self.logpmf(np.asarray(y, float) - np.asarray(s, float))

    def sample(self, s, rng=None):
        s = np.asarray(s, float)
        return s + self.draw(s.shape, as_rng(rng)).astype(float)

    def _table(self):
        """(W, cdf over k = -W..W) with the tail beyond W below DEFAULT_TAIL / 100; cached."""
        cached = getattr(self, "_cdf_table", None)
        if cached is not None:
            return cached
        w = self.tail_window(DEFAULT_TAIL / 100.0)
        if 2 * w + 1 > MAX_TABLE:
            raise ValueError(f"{self.name}: noise too wide for a CDF table (window {w})")
        k = np.arange(-w, w + 1, dtype=float)
        pmf = np.exp(self.log_kernel(k) - self.log_norm)
        lower_tail = 0.5 * max(0.0, 1.0 - pmf.sum())
        cdf = lower_tail + np.cumsum(pmf)
        self._cdf_table = (w, cdf)
        return self._cdf_table

    def cdf(self, k) -> np.ndarray:
        """P(noise <= k) for real ``k`` (floor taken)."""
        w, cdf = self._table()
        k = np.floor(np.asarray(k, float))
        idx = np.clip(k + w, -1, 2 * w).astype(np.int64)
        out = np.where(idx < 0, 0.0, cdf[np.clip(idx, 0, 2 * w)])
        return np.where(k > w, 1.0, out)

    def transform(self, u, s):
        """Inverse-CDF transform: the smallest k with F(k) >= u, plus s (Xiong, Ju & Zhang eq. 11)."""
        w, cdf = self._table()
        u = np.asarray(u, float)
        k = np.searchsorted(cdf, u, side="left").astype(float) - w
        return np.asarray(s, float) + np.minimum(k, w)

    @property
    def noise_scale(self) -> float:
        """The noise's standard deviation (a law with a named scale parameter states that instead)."""
        return math.sqrt(self.noise_variance)

    @property
    def noise_variance(self) -> float:
        """Var(noise), by summation over the tail window."""
        w = self.tail_window(1e-17)
        k = np.arange(-w, w + 1, dtype=float)
        return float(np.sum(k * k * np.exp(self.log_kernel(k) - self.log_norm)))

    # ------------------------------------------------------------------ audit and release side
    @staticmethod
    def check_integer_values(value, field: str = "value") -> None:
        """A release of integer noise on a count is an integer: refuse 11.5 in one line."""
        def flat(v):  # ragged nested lists (naive-bayes tables of different widths) too
            return [x for item in v for x in flat(item)] if isinstance(v, list) else [v]

        arr = np.asarray(flat(value), float)
        bad = ~is_integral(arr)
        if bad.any():
            k = int(np.flatnonzero(bad.ravel())[0])
            raise ValueError(f"{field} must hold integers for an integer-noise mechanism (got {arr.ravel()[k]:g})")

    # ------------------------------------------------------------------ the release record (the contract)
    @classmethod
    def _record_kwargs(cls, record, sensitivity=None) -> dict:
        kwargs = {key: _record_get(record, key) for key in cls.record_fields}
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        if sensitivity is not None and "sensitivity" in cls.record_fields:
            kwargs["sensitivity"] = sensitivity
        return kwargs

    @classmethod
    def _required_fields(cls) -> tuple[str, ...]:
        import inspect

        params = inspect.signature(cls.__init__).parameters
        return tuple(k for k in cls.record_fields if k in params and params[k].default is inspect.Parameter.empty)

    @classmethod
    def check_record(cls, record) -> None:
        """The record holds the fields ``record_fields`` names (those the constructor requires among them), no
        other mechanism's fields, integer values, and parameters the constructor accepts."""
        if not cls.record_fields:
            return super().check_record(record)
        own = set(cls.record_fields)
        listed = ", ".join(cls.record_fields)
        for key in SCHEMA_RECORD_FIELDS:
            if key not in own and _record_get(record, key) is not None:
                raise ValueError(f"{key}: not a field of mechanism {cls.name!r} (its fields: {listed})")
        extra = record if isinstance(record, dict) else (record.model_extra or {})
        for key in extra:
            if key not in own and key not in COMMON_RECORD_FIELDS and key not in SCHEMA_RECORD_FIELDS:
                raise ValueError(f"{key}: not a field of mechanism {cls.name!r} (its fields: {listed})")
        for key in cls._required_fields():
            if _record_get(record, key) is None:
                raise ValueError(f"{key}: is required by mechanism {cls.name!r}")
        cls.check_integer_values(_record_get(record, "value"))
        cls._build(cls._record_kwargs(record))

    @classmethod
    def _build(cls, kwargs: dict, sensitivity=None) -> "IntegerNoise":
        from ..errors import InputError

        try:
            mech = cls(**kwargs)
        except InputError:  # already names its field: the family prefixes its path
            raise
        except (TypeError, ValueError, OverflowError) as exc:
            text = str(exc)
            head = text.partition(": ")[0]
            raise ValueError(text if head in cls.record_fields else f"mechanism: {cls.name}: {text}") from None
        if not hasattr(mech, "sensitivity"):  # a law whose constructor does not take it: the family's sensitivity
            mech.sensitivity = float(sensitivity if sensitivity is not None else kwargs.get("sensitivity") or 1.0)
        cls._check_law(mech)
        return mech

    @classmethod
    def _check_law(cls, mech) -> None:
        """What the contract promises and every derived method relies on: log_kernel 0 at k = 0 and symmetric, a
        finite log_norm, a whole-number tail window (checked on the law as built, in one line)."""
        k = np.arange(1.0, 6.0)
        at0 = float(np.asarray(mech.log_kernel(np.array([0.0])), float)[0])
        pos, neg = np.asarray(mech.log_kernel(k), float), np.asarray(mech.log_kernel(-k), float)
        if at0 != 0.0 or not np.array_equal(pos, neg) or not math.isfinite(float(mech.log_norm)):
            raise ValueError(f"mechanism: {cls.name}'s log_kernel must be 0 at k = 0 and symmetric in k, and its "
                             "log_norm finite (the IntegerNoise contract)")
        w = mech.tail_window(DEFAULT_TAIL)
        if isinstance(w, bool) or int(w) != w or w < 0:
            raise ValueError(f"mechanism: {cls.name}'s tail_window must return a whole number >= 0 (got {w!r})")

    @classmethod
    def from_record(cls, record, sensitivity=None):
        if not cls.record_fields:
            return super().from_record(record, sensitivity)
        if sensitivity is None:
            sensitivity = _record_get(record, "sensitivity")
        return cls._build(cls._record_kwargs(record, sensitivity), sensitivity)

    # ------------------------------------------------------------------ the audit's side, from the mass function
    #: the delta at which the audit's empirical test checks a law accounted at a delta (one a few thousand draws
    #: resolve)
    audit_test_delta = 1e-2

    @classmethod
    def audit_noise(cls, release, record):
        """(epsilon, delta, the mechanism, recorded sensitivity, dim) of a record as released."""
        if cls.loss_kind is not None or not cls.record_fields:
            return super().audit_noise(release, record)
        mech = cls.from_record(record)
        dim = 2 if isinstance(record["value"], list) else 1
        delta = float(release.get("report_delta") or REPORT_DELTA)
        cost = mech.privacy_accounting(delta, dim)
        return cost.epsilon, cost.delta, mech, float(mech.sensitivity), dim

    @classmethod
    def audit_epsilon(cls, noise, sensitivity):
        mech, dim = noise[2], noise[4]
        shifts = mech.worst_shifts(dim, sensitivity=max(float(sensitivity), 1.0))
        return mech.privacy_accounting(noise[1], dim, shifts).epsilon

    @classmethod
    def audit_claim_at(cls, noise, delta):
        return noise[2].privacy_accounting(delta, noise[4]).epsilon

    @classmethod
    def audit_log_density(cls, noise, out, s):
        return np.sum(noise[2].logpmf(np.asarray(out, float) - np.asarray(s, float)), axis=-1)

    @classmethod
    def audit_losses(cls, noise, diff):
        if cls.loss_kind is not None:
            return super().audit_losses(noise, diff)
        return noise[2].privacy_losses([abs(float(d)) for d in np.ravel(diff) if abs(d) > 0])

    @classmethod
    def numpy_noise(cls, scale, shape, rng):
        return cls._from_scale(scale).draw(shape, rng).astype(float)

    @classmethod
    def with_scale(cls, scale):
        return cls._from_scale(scale)

    @classmethod
    def _from_scale(cls, scale):
        """The law whose noise scale is ``scale`` (a law with one scale parameter states it; the curator draws
        through it)."""
        raise ValueError(f"mechanism: {cls.name!r} has no single scale parameter for the curator to set")


def two_sided_geometric(scale_inv: float, shape, rng: np.random.Generator) -> np.ndarray:
    """Exact draws with P(k) proportional to exp(-|k| * scale_inv) on the integers.

    The difference of two independent Geometric(1 - q) counts, q = exp(-scale_inv), has exactly this
    law (the two-sided geometric; Ghosh, Roughgarden & Sundararajan 2009): an integer sampler, no
    rounding of a continuous draw.
    """
    p = -math.expm1(-scale_inv)  # 1 - q without cancellation
    if p <= 0.0:
        raise ValueError("two-sided geometric: scale too large")
    a = rng.geometric(p, size=shape)
    b = rng.geometric(p, size=shape)
    return (a - b).astype(np.int64)
