"""Discrete Laplace (two-sided geometric) mechanism: y = s + k, P(k) proportional to exp(-|k| eps / Delta).

Ghosh, Roughgarden & Sundararajan (STOC 2009) for counts; Canonne, Kamath & Steinke (NeurIPS 2020,
Sec. 2.2 and Algorithm 2) as an exact integer sampler.  With q = exp(-eps / Delta) the mass is
P(k) = (1 - q) / (1 + q) q^|k|.  For an integer statistic of L1 sensitivity Delta the release is pure
eps-DP: the mass ratio at any k of two releases shifted by d <= Delta is at most q^-d <= e^eps.
Pure eps-DP implies (eps^2/2)-zCDP (Bun & Steinke 2016, Prop. 1.4), which is how it composes with
discrete-Gaussian statistics.  OpenDP releases it as ``make_laplace`` over an integer domain.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import check_number, require
from .integer import IntegerNoise, two_sided_geometric
from .laplace import LaplaceShape


class DiscreteLaplace(LaplaceShape, IntegerNoise):
    """Discrete Laplace noise, P(k) proportional to exp(-|k| epsilon / sensitivity) on the integers."""

    name = "discrete-laplace"
    loss_kind = "discrete-laplace"

    def __init__(self, epsilon: float, sensitivity: float = 1.0):
        self.epsilon = check_number(epsilon, "epsilon", 1e-300, 1e300)
        self.sensitivity = check_number(sensitivity, "sensitivity", 1e-12, 1e15)
        require(self.sensitivity / self.epsilon <= 1e15, "epsilon", f"{self.epsilon:g} gives a noise scale "
                f"sensitivity/epsilon = {self.sensitivity / self.epsilon:g}, above 1e+15")
        #: the scale t of P(k) ~ exp(-|k| / t) (OpenDP's ``scale``)
        self.scale = self.sensitivity / self.epsilon

    def log_kernel(self, k):
        return -np.abs(np.asarray(k, float)) / self.scale

    @property
    def log_norm(self) -> float:
        # log sum_k q^|k| = log((1 + q) / (1 - q)), q = exp(-1/t), without cancellation for large t
        inv = 1.0 / self.scale
        return math.log1p(math.exp(-inv)) - math.log(-math.expm1(-inv))

    def tail_window(self, tail=1e-12):
        # P(|k| > W) = 2 q^(W+1) / (1 + q) <= 2 q^(W+1)
        inv = 1.0 / self.scale
        return max(0, int(math.ceil(math.log(2.0 / tail) / inv)) - 1)

    def cdf(self, k):
        """Closed form: F(k) = q^-k / (1 + q) for k < 0, 1 - q^(k+1) / (1 + q) for k >= 0."""
        k = np.floor(np.asarray(k, float))
        inv = 1.0 / self.scale
        log_q1 = math.log1p(math.exp(-inv))
        neg = np.exp(np.minimum(k, 0.0) * inv - log_q1)
        pos = 1.0 - np.exp(-(np.maximum(k, 0.0) + 1.0) * inv - log_q1)
        return np.where(k < 0, neg, pos)

    def draw(self, shape, rng):
        return two_sided_geometric(1.0 / self.scale, shape, rng)

    @property
    def noise_variance(self) -> float:
        q = math.exp(-1.0 / self.scale)
        return 2.0 * q / (1.0 - q) ** 2

    # ------------------------------------------------------------------ release-file side
    @classmethod
    def check_record(cls, record) -> None:
        if record.epsilon is None:
            raise ValueError("epsilon: is required by mechanism 'discrete-laplace'")
        for name in ("sigma", "delta", "rho"):
            if getattr(record, name) is not None:
                raise ValueError(f"{name}: not a field of mechanism 'discrete-laplace' (it is pure epsilon-DP)")
        cls.check_integer_values(record.value)

    @classmethod
    def _from_scale(cls, scale):
        return cls(1.0, float(scale))

    @classmethod
    def opendp_noise(cls, values, scale):
        import opendp.prelude as dp

        return opendp_integer_vector(values, lambda domain: dp.m.make_laplace(
            domain, dp.l1_distance(T=int), scale=float(scale)))

    # record, scale, pure-epsilon cost, log-mass shape and the audit side: LaplaceShape (as for Laplace)

    def __repr__(self):
        return f"DiscreteLaplace(epsilon={self.epsilon:g}, sensitivity={self.sensitivity:g})"


def opendp_integer_vector(values, make_measurement) -> np.ndarray:
    """Apply an OpenDP measurement over integer vectors to integer ``values`` (publication noise)."""
    import opendp.prelude as dp

    dp.enable_features("contrib")
    values = np.asarray(values, float)
    if not np.all(np.isfinite(values) & (values == np.round(values))):
        raise ValueError("values: integer noise needs integer statistics")
    meas = make_measurement(dp.vector_domain(dp.atom_domain(T=int)))
    flat = [int(v) for v in values.ravel()]
    return np.asarray(meas(flat), dtype=float).reshape(values.shape)
