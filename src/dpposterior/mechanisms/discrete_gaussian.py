"""Discrete Gaussian mechanism: y = s + k, P(k) proportional to exp(-k^2 / (2 sigma^2)) on the integers.

Canonne, Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020; CKS).

* ``sigma`` is the *parameter* of the distribution, not the standard deviation of the noise: the
  variance of N_Z(0, sigma^2) is slightly smaller than sigma^2 (CKS Corollary 9; below 1e-8 relative
  for sigma >= 1.5), and :attr:`noise_variance` gives it exactly.
* Privacy (CKS Theorem 4): for an integer statistic whose replace-one change has L2 norm at most
  Delta, independent N_Z(0, sigma^2) noise per coordinate is rho-zCDP with rho = Delta^2 / (2 sigma^2)
  (the Renyi divergence of a product is the sum over coordinates, each at most alpha mu_j^2/(2 sigma^2)).
* (epsilon, delta): for a single count (one coordinate) we use the exact privacy profile, CKS
  Theorem 7: delta(epsilon) = P[Y > epsilon sigma^2/Delta - Delta/2] - e^epsilon P[Y > epsilon sigma^2/Delta
  + Delta/2], Y ~ N_Z(0, sigma^2), computed as the hockey-stick divergence sum_k max(0, P(k) - e^eps P(k - mu))
  over the integer shifts mu <= Delta.  A vector's worst pair (coordinates of one sigma moved by the integers
  mu_i) has privacy loss (sum mu_i^2 - 2 sum mu_i k_i) / (2 sigma^2), a function of T = sum mu_i k_i alone, so
  its exact profile is the same hockey-stick divergence over the law of T, the coordinates' laws convolved
  (``accounting.exact_pair_epsilon``); wider pairs go to ``accounting`` (dp-accounting's loss distributions, or the
  zCDP conversion of CKS Corollary 13).
* Normaliser: direct summation for sigma < 1; for sigma >= 1 the Poisson summation formula
  Z = sqrt(2 pi) sigma (1 + 2 sum_m exp(-2 pi^2 sigma^2 m^2)), whose correction is below 3e-9 and
  vanishes geometrically (three terms reach double precision).
* Sampling: publication noise from OpenDP (``make_gaussian`` over an integer domain: CKS Algorithm 3
  with exact rational arithmetic); seeded studies use CKS Algorithm 3 on numpy's generator (discrete
  Laplace proposal with t = floor(sigma) + 1, accepted with probability
  exp(-(|Y| - sigma^2/t)^2 / (2 sigma^2))): an exact integer sampler, no rounding of a float draw.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import check_number, require
from .base import NoiseShape
from .accounting import PLD_MAX_SIGMA, Loss, PrivacyCost, check_delta, gaussian_tail_window, zcdp_epsilon
from .discrete_laplace import opendp_integer_vector
from .integer import REPORT_DELTA, IntegerNoise, two_sided_geometric

#: the sigma a discrete Gaussian may have: sigma^2 and rho = Delta^2 / (2 sigma^2) finite for sensitivities
#: up to 1e15 (at sigma = 1e308 sigma^2 overflowed; at 1e-300 rho did)
SIGMA_RANGE = (1e-6, 1e15)
#: relative slack when a stated rho is compared with Delta^2 / (2 sigma^2)
RHO_RTOL = 1e-9


def log_normaliser(sigma: float) -> float:
    """log sum_k exp(-k^2 / (2 sigma^2)), accurate to double precision for every sigma > 0."""
    if sigma < 1.0:
        w = int(math.ceil(sigma * 9.0)) + 2
        k = np.arange(-w, w + 1, dtype=float)
        return float(math.log(np.exp(-k * k / (2.0 * sigma * sigma)).sum()))
    corr = sum(math.exp(-2.0 * math.pi ** 2 * sigma ** 2 * m * m) for m in (1, 2, 3))
    return 0.5 * math.log(2.0 * math.pi) + math.log(sigma) + math.log1p(2.0 * corr)


def exact_delta(sigma: float, sensitivity: float, epsilon: float) -> float:
    """delta(epsilon) of one discrete-Gaussian count with sensitivity Delta (CKS Theorem 7), as the
    hockey-stick divergence maximised over the integer shifts 1..floor(Delta)."""
    dg = DiscreteGaussian(sigma, 1.0)
    w = dg.tail_window(1e-18)
    shifts = range(1, max(1, int(math.floor(sensitivity + 1e-9))) + 1)
    k = np.arange(-w - max(shifts), w + max(shifts) + 1, dtype=float)
    logp = dg.logpmf(k)
    best = 0.0
    for mu in shifts:
        logq = dg.logpmf(k - mu)
        diff = np.exp(logp) - np.exp(epsilon + logq)
        best = max(best, float(diff[diff > 0].sum()))
    return best


def exact_epsilon(sigma: float, sensitivity: float, delta: float) -> float:
    """The smallest epsilon with exact_delta <= delta (CKS Theorem 7), by bisection in epsilon."""
    from scipy.optimize import brentq

    if exact_delta(sigma, sensitivity, 0.0) <= delta:
        return 0.0
    rho = sensitivity ** 2 / (2.0 * sigma ** 2)
    hi = max(1.0, zcdp_epsilon(rho, delta) * 1.5 + 1.0)
    while exact_delta(sigma, sensitivity, hi) > delta:
        hi *= 2.0
    return float(brentq(lambda e: exact_delta(sigma, sensitivity, e) - delta, 0.0, hi, xtol=1e-13, rtol=1e-12))


class DiscreteGaussian(IntegerNoise):
    """Discrete Gaussian noise N_Z(0, sigma^2) on the integers; rho-zCDP with rho = sensitivity^2/(2 sigma^2).

    ``delta``: where :meth:`privacy_cost` reports the (epsilon, delta) equivalent (default 1e-6).
    """

    name = "discrete-gaussian"
    loss_kind = "discrete-gaussian"

    def __init__(self, sigma: float, sensitivity: float = 1.0, rho: float | None = None,
                 delta: float | None = None):
        # sigma, sensitivity and rho as numbers in ranges where rho, sigma^2 and the normaliser stay finite
        self.sigma = check_number(sigma, "sigma", SIGMA_RANGE[0], SIGMA_RANGE[1], ", where sigma^2 and "
                                  "rho = sensitivity^2 / (2 sigma^2) stay finite")
        self.sensitivity = check_number(sensitivity, "sensitivity", 1e-12, 1e15)
        self.rho = self.sensitivity ** 2 / (2.0 * self.sigma ** 2)
        if rho is not None:
            check_number(rho, "rho", 1e-300, 1e300)
            require(math.isclose(rho, self.rho, rel_tol=RHO_RTOL), "rho",
                    f"{rho:g} disagrees with sensitivity^2 / (2 sigma^2) = {self.rho:g}")
        if delta is not None:
            check_delta(delta, "delta")
        self.delta = float(delta) if delta is not None else REPORT_DELTA
        self._log_norm = log_normaliser(self.sigma)

    @classmethod
    def from_rho(cls, rho: float, sensitivity: float = 1.0, delta: float | None = None) -> "DiscreteGaussian":
        """The discrete Gaussian that spends ``rho`` on a statistic of L2 sensitivity ``sensitivity``."""
        require(np.isfinite(rho) and rho > 0, "rho", "must be a finite number > 0")
        return cls(sensitivity / math.sqrt(2.0 * rho), sensitivity, delta=delta)

    def log_kernel(self, k):
        k = np.asarray(k, float)
        return -k * k / (2.0 * self.sigma * self.sigma)

    @property
    def log_norm(self) -> float:
        return self._log_norm

    def tail_window(self, tail=1e-12):
        return gaussian_tail_window(self.sigma, tail)

    def draw(self, shape, rng):
        """CKS Algorithm 3, vectorised: discrete-Laplace proposals, Bernoulli acceptance."""
        size = int(np.prod(shape)) if shape != () else 1
        out = np.empty(size, dtype=np.int64)
        t = math.floor(self.sigma) + 1.0
        filled = 0
        while filled < size:
            m = max(16, int(1.5 * (size - filled)) + 8)
            y = two_sided_geometric(1.0 / t, m, rng)
            accept = rng.random(m) < np.exp(-((np.abs(y) - self.sigma ** 2 / t) ** 2) / (2.0 * self.sigma ** 2))
            take = y[accept][: size - filled]
            out[filled:filled + take.size] = take
            filled += take.size
        return out.reshape(shape)

    noise_shape = NoiseShape.GAUSSIAN
    accounts_rho = True

    def privacy_losses(self, shifts) -> tuple:
        """The worst neighbouring pair as loss components: one per coordinate, shifted by ``shifts``."""
        return tuple(Loss(self.loss_kind, self.sigma, float(math.floor(s + 1e-9))) for s in shifts)

    def _epsilon(self, delta: float, shifts) -> tuple[float, str]:
        """(epsilon at ``delta``, how): the exact profile (CKS Thm 7) of one count; of a vector, its worst pair's
        exact profile where affordable, else its composed loss distributions, or the zCDP conversion beyond
        PLD_MAX_SIGMA (``accounting.zcdp_pair_epsilon``)."""
        if len(shifts) == 1 and self.sigma <= PLD_MAX_SIGMA:
            return (exact_epsilon(self.sigma, shifts[0], delta),
                    "exact privacy profile of the discrete Gaussian (Canonne, Kamath & Steinke 2020, Thm 7)")
        from .accounting import zcdp_pair_epsilon

        return zcdp_pair_epsilon(self.privacy_losses(shifts), delta)

    def epsilon_at(self, delta: float, dim: int = 1, shifts=None) -> float:
        """epsilon at ``delta``: the exact profile (CKS Thm 7) of one count, and of a vector's worst pair where
        affordable (``accounting.exact_pair_epsilon``); else the composed privacy loss distributions of the worst pair
        (dp-accounting, pessimistic); the zCDP conversion (CKS Cor. 13) beyond PLD_MAX_SIGMA."""
        return self._epsilon(check_delta(delta, "delta"), self.worst_shifts(dim, shifts))[0]

    def privacy_cost(self):
        return (self.epsilon_at(self.delta), self.delta)

    def privacy_accounting(self, delta=None, dim=1, shifts=None) -> PrivacyCost:
        delta = self.delta if delta is None else check_delta(delta, "delta")
        shifts = self.worst_shifts(dim, shifts)
        eps, how = self._epsilon(delta, shifts)
        rho = sum(s * s for s in shifts) / (2.0 * self.sigma ** 2)
        return PrivacyCost(eps, delta, rho, "zcdp", f"(epsilon, delta): {how}", losses=self.privacy_losses(shifts))

    # ------------------------------------------------------------------ release-file side
    @classmethod
    def check_record(cls, record) -> None:
        if record.sigma is None:
            raise ValueError("sigma: is required by mechanism 'discrete-gaussian' (the parameter sigma of "
                             "N_Z(0, sigma^2), not the noise's standard deviation)")
        if record.epsilon is not None:
            raise ValueError("epsilon: not a field of mechanism 'discrete-gaussian' (it spends rho = "
                             "sensitivity^2 / (2 sigma^2); its (epsilon, delta) is derived)")
        if record.delta is not None:
            raise ValueError("delta: not a field of mechanism 'discrete-gaussian' (set the release's "
                             "report_delta for its (epsilon, delta))")
        cls.check_integer_values(record.value)
        if record.rho is not None and record.sensitivity is not None:
            rho = record.sensitivity ** 2 / (2.0 * record.sigma ** 2)
            if not math.isclose(record.rho, rho, rel_tol=RHO_RTOL):
                raise ValueError(f"rho: {record.rho:g} disagrees with sensitivity^2 / (2 sigma^2) = {rho:g}")

    @classmethod
    def from_record(cls, record, sensitivity=None):
        sens = sensitivity if sensitivity is not None else record.sensitivity
        return cls(record.sigma, sens if sens is not None else 1.0, rho=record.rho)

    @property
    def noise_scale(self) -> float:
        return self.sigma

    @classmethod
    def noise_for_budget(cls, sensitivity, epsilon=None, rho=None):
        require(rho is not None, "rho", f"is the budget of mechanism {cls.name!r} (zCDP)")
        sigma = float(sensitivity) / math.sqrt(2.0 * float(rho))
        return sigma, {"sigma": sigma, "rho": float(rho)}

    @classmethod
    def _from_scale(cls, scale):
        return cls(float(scale))

    @classmethod
    def opendp_noise(cls, values, scale):
        import opendp.prelude as dp

        return opendp_integer_vector(values, lambda domain: dp.m.make_gaussian(
            domain, dp.l2_distance(T=int), scale=float(scale)))

    # ------------------------------------------------------------------ audit side
    sensitivity_norm = "L2"

    @staticmethod
    def norm(diff):
        return float(np.sqrt((diff * diff).sum()))

    #: the delta at which the audit's empirical test checks the claimed privacy profile: any delta of the
    #: profile is claimed, and 1e-2 is one that a few thousand draws resolve (1e-6 is not)
    audit_test_delta = 1e-2

    @classmethod
    def audit_noise(cls, release, record):
        sigma = float(record["sigma"])
        sens = float(record.get("sensitivity") or 1.0)
        dim = 2 if isinstance(record["value"], list) else 1  # a vector (ragged tables too) or one count
        delta = float(release.get("report_delta") or REPORT_DELTA)
        eps = DiscreteGaussian(sigma, sens).epsilon_at(delta, dim)
        return eps, delta, sigma, sens, dim

    @classmethod
    def audit_epsilon(cls, noise, sensitivity):
        return DiscreteGaussian(noise[2], max(sensitivity, 1e-12)).epsilon_at(noise[1], noise[4])

    @classmethod
    def audit_claim_at(cls, noise, delta):
        """The claimed epsilon at another point ``delta`` of the recorded noise's privacy profile."""
        return DiscreteGaussian(noise[2], noise[3]).epsilon_at(delta, noise[4])

    @classmethod
    def audit_log_density(cls, noise, out, s):
        return -((out - s) ** 2).sum(-1) / (2.0 * noise[2] ** 2)

    def __repr__(self):
        return f"DiscreteGaussian(sigma={self.sigma:g}, sensitivity={self.sensitivity:g}, rho={self.rho:g})"
