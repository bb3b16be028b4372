"""Gaussian mechanism: y = s + N(0, sigma^2), (epsilon, delta)-DP.

Two calibrations of sigma for L2 sensitivity Delta:

* classical (Dwork & Roth 2014, Thm A.1): sigma = Delta * sqrt(2 log(1.25/delta)) / epsilon,
  proved for epsilon < 1;
* analytic (Balle & Wang 2018, Algorithm 1 / Thm 8): the smallest sigma with
  Phi(Delta/(2 sigma) - epsilon sigma/Delta) - e^epsilon Phi(-Delta/(2 sigma) - epsilon sigma/Delta) <= delta.
  The left side decreases in sigma, so the smallest sigma solves it with equality;
  we solve in log-space (``log_ndtr``) so large epsilon does not overflow.

Alparslan, Yildirim & Birbil (Sec. 3) use the analytic calibration for XtX and Xty.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import require
from .base import Mechanism, NoiseShape, as_rng, opendp_vector


def _delta_of_sigma(sigma: float, epsilon: float, sensitivity: float) -> float:
    """delta achieved by N(0, sigma^2) noise (Balle & Wang 2018, Thm 8)."""
    from scipy import special  # scipy is imported where used: docs/architecture.md, "Imports stay light"

    a = sensitivity / (2.0 * sigma)
    b = epsilon * sigma / sensitivity
    return float(special.ndtr(a - b) - math.exp(epsilon + special.log_ndtr(-a - b)))


def analytic_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    """Smallest sigma giving (epsilon, delta)-DP for L2 sensitivity ``sensitivity``."""
    from scipy import optimize

    _check(epsilon, delta, sensitivity)
    # delta(sigma) runs from ~1 (sigma -> 0) down to 0 (sigma -> inf); bracket the root.
    lo, hi = sensitivity * 1e-3, sensitivity
    while _delta_of_sigma(lo, epsilon, sensitivity) < delta:
        lo /= 2.0
    while _delta_of_sigma(hi, epsilon, sensitivity) > delta:
        hi *= 2.0
    root = optimize.brentq(
        lambda log_s: _delta_of_sigma(math.exp(log_s), epsilon, sensitivity) - delta,
        math.log(lo), math.log(hi), xtol=1e-15, rtol=4 * np.finfo(float).eps, maxiter=500,
    )
    sigma = math.exp(root)
    # brentq may land a hair on the wrong side; step up until the constraint holds.
    while _delta_of_sigma(sigma, epsilon, sensitivity) > delta:
        sigma = np.nextafter(sigma, np.inf)
    return sigma


def classical_sigma(epsilon: float, delta: float, sensitivity: float = 1.0) -> float:
    _check(epsilon, delta, sensitivity)
    return sensitivity * math.sqrt(2.0 * math.log(1.25 / delta)) / epsilon


def epsilon_of_sigma(sigma, delta, sensitivity):
    """Smallest epsilon with delta(sigma, epsilon, Delta) <= delta (Balle & Wang Thm 8)."""
    from scipy import optimize

    if sensitivity <= 0:
        return 0.0

    def excess(e):
        return _delta_of_sigma(sigma, e, sensitivity) - delta

    if excess(0.0) <= 0:
        return 0.0
    hi = 1.0
    while excess(hi) > 0:
        hi *= 2.0
    return float(optimize.brentq(excess, 0.0, hi, xtol=1e-12))


def _check(epsilon, delta, sensitivity):
    require(np.isfinite(epsilon) and epsilon > 0, "epsilon", "must be a finite number > 0")
    require(np.isfinite(delta) and 0 < delta < 1, "delta", "must lie in (0, 1)")
    require(np.isfinite(sensitivity) and sensitivity > 0, "sensitivity", "must be a finite number > 0")


class Gaussian(Mechanism):
    """Gaussian noise with standard deviation ``sigma``.

    Build it from a budget with :meth:`calibrated` (``calibration="analytic"`` or
    ``"classical"``) or directly from a published ``sigma``.
    """

    name = "gaussian"
    loss_kind = "gaussian"
    additive_symmetric = True

    def __init__(self, sigma: float, epsilon: float | None = None, delta: float | None = None,
                 sensitivity: float | None = None, calibration: str | None = None):
        require(np.isfinite(sigma) and sigma > 0, "sigma", "must be a finite number > 0")
        self.sigma = float(sigma)
        self.epsilon = epsilon
        self.delta = delta
        self.sensitivity = sensitivity
        self.calibration = calibration

    @classmethod
    def calibrated(cls, epsilon: float, delta: float, sensitivity: float, calibration: str = "analytic"):
        if calibration == "analytic":
            sigma = analytic_sigma(epsilon, delta, sensitivity)
        elif calibration == "classical":
            sigma = classical_sigma(epsilon, delta, sensitivity)
        else:
            raise ValueError(f"calibration: unknown calibration {calibration!r} (analytic, classical)")
        return cls(sigma, epsilon, delta, sensitivity, calibration)

    def sample(self, s, rng=None):
        s = np.asarray(s, dtype=float)
        return s + as_rng(rng).normal(0.0, self.sigma, size=s.shape)

    def logpdf(self, y, s):
        from scipy import stats

        return stats.norm.logpdf(np.asarray(y, float), loc=np.asarray(s, float), scale=self.sigma)

    def transform(self, u, s):
        from scipy import special

        return np.asarray(s, float) + self.sigma * special.ndtri(np.asarray(u, float))

    def privacy_cost(self):
        if self.epsilon is None or self.delta is None:
            if self.sensitivity is None:
                raise ValueError("privacy_cost: unknown without epsilon/delta or sensitivity")
        return (float(self.epsilon), float(self.delta))

    def privacy_losses(self, shifts):
        from .accounting import Loss

        return tuple(Loss(self.loss_kind, self.sigma, float(s)) for s in shifts if s > 0)

    def tail_window(self, tail=1e-12):
        return self.sigma * math.sqrt(2.0 * math.log(2.0 / tail))

    noise_shape = NoiseShape.GAUSSIAN

    @classmethod
    def check_record(cls, record) -> None:
        """The stated (epsilon, delta) must not be more than the stated sigma gives (analytic Gaussian, Balle &
        Wang 2018, Thm 8) for the stated sensitivity; a family that derives the sensitivity checks it there."""
        super().check_record(record)
        if record.sigma is not None and record.sensitivity is not None and record.delta is not None \
                and not isinstance(record.sigma, list):
            true_delta = _delta_of_sigma(float(record.sigma), float(record.epsilon), float(record.sensitivity))
            if true_delta > record.delta * (1.0 + 1e-9):
                need = analytic_sigma(float(record.epsilon), float(record.delta), float(record.sensitivity))
                raise ValueError(f"sigma: {record.sigma:.6g} is smaller than the replace-one sigma {need:.6g} that "
                                 f"the stated epsilon {record.epsilon:g}, delta {record.delta:g} and sensitivity "
                                 f"{record.sensitivity:g} need (analytic Gaussian; at this sigma delta is "
                                 f"{true_delta:.3g}): the stated privacy is more than the noise gives")

    @classmethod
    def from_record(cls, record, sensitivity=None):
        if record.sigma is not None:
            return cls(record.sigma, record.epsilon, record.delta, record.sensitivity)
        return cls.calibrated(record.epsilon, record.delta,
                              sensitivity if sensitivity is not None else record.sensitivity)

    @property
    def noise_scale(self) -> float:
        return self.sigma

    @property
    def noise_variance(self) -> float:
        return self.sigma ** 2

    @classmethod
    def with_scale(cls, scale):
        return cls(float(scale))

    @classmethod
    def calibrated_scale(cls, epsilon, delta, sensitivity) -> float:
        """The analytic sigma that spends (``epsilon``, ``delta``) on a statistic of L2 ``sensitivity``."""
        return analytic_sigma(epsilon, delta, sensitivity)

    sensitivity_norm = "L2"

    @staticmethod
    def norm(diff):
        return float(np.sqrt((diff * diff).sum()))

    @classmethod
    def audit_noise(cls, release, record):
        eps = float(record["epsilon"])
        delta = float(record["delta"])
        sigma = (float(record["sigma"]) if record.get("sigma") is not None
                 else analytic_sigma(eps, delta, float(record["sensitivity"])))
        # analytic sigma is linear in the sensitivity: the sensitivity this sigma supports
        return eps, delta, sigma, sigma / analytic_sigma(eps, delta, 1.0)

    @classmethod
    def audit_epsilon(cls, noise, sensitivity):
        return epsilon_of_sigma(noise[2], noise[1], sensitivity)

    @classmethod
    def audit_log_density(cls, noise, out, s):
        return -((out - s) ** 2).sum(-1) / (2.0 * noise[2] ** 2)

    @classmethod
    def numpy_noise(cls, scale, shape, rng):
        return rng.normal(0.0, scale, size=shape)

    @classmethod
    def opendp_noise(cls, values, scale):
        import opendp.prelude as dp

        return opendp_vector(values, lambda domain: dp.m.make_gaussian(domain, dp.l2_distance(T=float),
                                                                        scale=float(scale)))

    def __repr__(self):
        return f"Gaussian(sigma={self.sigma:g}, epsilon={self.epsilon}, delta={self.delta})"
