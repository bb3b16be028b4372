"""What the integer-noise mechanisms share: log-mass tables, the CDF, the inverse-CDF transform,
the tail window, and the exact two-sided-geometric sampler.

Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020; CKS):
noise on the integers is what a count should get -- a float draw leaks through its low-order bits
(Mironov 2012), and rounding a continuous draw is a different distribution (rounded Gaussian != the
discrete Gaussian).  A subclass gives the unnormalised log-mass ``log_kernel(k)`` (symmetric in k),
the log-normaliser ``log_norm`` and an exact sampler; everything else is here.

All noise values are integers k; a release y* = s + k of an integer statistic s is an integer.
``logpdf(y, s)`` is -inf where y - s is not an integer.
"""

from __future__ import annotations

import math

import numpy as np

from .base import Mechanism, as_rng

#: default tail mass left outside an enumeration window (the exact count engines check it)
DEFAULT_TAIL = 1e-12
#: the largest noise table (entries) built for the CDF / transform; beyond it the noise is so wide
#: that no count release uses it (a discrete Gaussian with sigma ~ 10^6)
MAX_TABLE = 20_000_001


def is_integral(values) -> np.ndarray:
    """Elementwise: finite and equal to an integer (11 and 11.0 are, 11.5 is not)."""
    v = np.asarray(values, float)
    return np.isfinite(v) & (v == np.round(v))


class IntegerNoise(Mechanism):
    """Additive noise on the integers, symmetric about 0, log-concave (both of ours are)."""

    integer_valued = True
    additive_symmetric = True

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

    @classmethod
    def numpy_noise(cls, scale, shape, rng):
        return cls._from_scale(scale).draw(shape, rng).astype(float)

    @classmethod
    def _from_scale(cls, scale):  # pragma: no cover - abstract
        raise NotImplementedError


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
