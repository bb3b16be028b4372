"""Laplace mechanism: y = s + Laplace(0, b) with b = Delta_1 / epsilon (Dwork et al. 2006).

Used for every Laplace release in the five papers (Kazan & Reiter Sec. 2,
Bernstein & Sheldon Sec. 2, Karwa et al. Sec. 3, Xiong et al. App. E).
"""

from __future__ import annotations

import numpy as np

from ..errors import require
from .base import Mechanism, NoiseShape, as_rng, opendp_vector


class LaplaceShape:
    """What a mechanism with mass or density proportional to exp(-|y - s| / b), b = sensitivity / epsilon, states
    the same way whether it is continuous (Laplace) or on the integers (discrete Laplace): its record, scale,
    pure-epsilon cost and log-mass shape, and its audit side (L1 sensitivity, epsilon = sensitivity / b, the
    log-ratio score).  The class sets ``epsilon``, ``sensitivity`` and ``scale``."""

    @classmethod
    def from_record(cls, record, sensitivity=None):
        return cls(record.epsilon, sensitivity if sensitivity is not None else record.sensitivity)

    @property
    def noise_scale(self) -> float:
        return self.scale

    @property
    def noise_variance(self) -> float:
        return 2.0 * self.scale ** 2

    @classmethod
    def with_scale(cls, scale):
        return cls(1.0, float(scale))

    @classmethod
    def calibrated_scale(cls, epsilon, delta, sensitivity) -> float:
        """The scale b that spends ``epsilon`` on a statistic of L1 ``sensitivity`` (pure: ``delta`` unused)."""
        return sensitivity / epsilon

    def privacy_cost(self):
        return (self.epsilon, 0.0)

    loss_kind = "laplace"

    def privacy_losses(self, shifts):
        from .accounting import Loss

        if self.loss_kind == "discrete-laplace":
            shifts = [float(int(s + 1e-9)) for s in shifts]  # an integer statistic moves by whole units
        return tuple(Loss(self.loss_kind, float(self.scale), float(s)) for s in shifts if s > 0)

    noise_shape = NoiseShape.LAPLACE

    sensitivity_norm = "L1"
    #: pure epsilon: the audit's empirical test checks epsilon itself (no delta to choose)
    audit_test_delta = None

    @staticmethod
    def norm(diff):
        return float(np.abs(diff).sum())

    @classmethod
    def audit_noise(cls, release, record):
        eps = float(record["epsilon"])
        b = float(record["sensitivity"]) / eps
        return eps, 0.0, b, b * eps

    @classmethod
    def audit_epsilon(cls, noise, sensitivity):
        return sensitivity / noise[2]

    @classmethod
    def audit_log_density(cls, noise, out, s):
        return -np.abs(out - s).sum(-1) / noise[2]


class Laplace(LaplaceShape, Mechanism):
    """Laplace noise of scale ``scale`` = sensitivity / epsilon (pure epsilon-DP)."""

    name = "laplace"
    additive_symmetric = True

    def __init__(self, epsilon: float, sensitivity: float):
        require(np.isfinite(epsilon) and epsilon > 0, "epsilon", "must be a finite number > 0")
        require(np.isfinite(sensitivity) and sensitivity > 0, "sensitivity", "must be a finite number > 0")
        self.epsilon = float(epsilon)
        self.sensitivity = float(sensitivity)
        self.scale = self.sensitivity / self.epsilon

    def sample(self, s, rng=None):
        s = np.asarray(s, dtype=float)
        return s + as_rng(rng).laplace(0.0, self.scale, size=s.shape)

    def logpdf(self, y, s):
        from scipy import stats  # here, not at import: scipy.stats costs ~1 s (docs/architecture.md)

        return stats.laplace.logpdf(np.asarray(y, float) - np.asarray(s, float), scale=self.scale)

    def transform(self, u, s):
        from scipy import stats

        return np.asarray(s, float) + stats.laplace.ppf(np.asarray(u, float), scale=self.scale)

    def tail_window(self, tail=1e-12):
        return self.scale * float(np.log(1.0 / tail))


    @classmethod
    def numpy_noise(cls, scale, shape, rng):
        return rng.laplace(0.0, scale, size=shape)

    @classmethod
    def opendp_noise(cls, values, scale):
        import opendp.prelude as dp

        return opendp_vector(values, lambda domain: dp.m.make_laplace(domain, dp.l1_distance(T=float),
                                                                       scale=float(scale)))

    def __repr__(self):
        return f"Laplace(epsilon={self.epsilon:g}, sensitivity={self.sensitivity:g}, scale={self.scale:g})"
