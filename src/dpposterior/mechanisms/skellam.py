"""Skellam mechanism: y = s + k, k = P1 - P2 with P1, P2 independent Poisson(mu).

Agarwal, Kairouz & Liu, "The Skellam Mechanism for Differentially Private Federated Learning" (NeurIPS 2021).
The difference of two Poisson counts is integer noise that is closed under summation (a sum of independent
Skellam(mu_i) is Skellam(sum mu_i)), which is why secure aggregation uses it.

* Mass: P(k) = exp(-2 mu) I_|k|(2 mu) = ``scipy.special.ive(|k|, 2 mu)`` (I the modified Bessel function of
  the first kind); it sums to one (the generating function of I_k at t = 1), so log P(k) needs no numerical
  normaliser.  Where ``ive`` underflows (|k| far in the tail, below 1e-280) the log-mass comes from the
  uniform asymptotic expansion of I_v (Debye; DLMF 10.41.3, five terms: below 1e-10 absolute in the log
  from v = 30 on, and ``ive`` only underflows at larger orders), so the log-mass is finite at every integer.
  Variance 2 mu; symmetric, unimodal and log-concave (a convolution of log-concave sequences).
* Privacy.  rho-zCDP with rho = Delta2^2/(4 mu) + min((2 Delta2^2 + 6 Delta1)/(16 mu^2), 3 Delta1/(4 mu)): the
  paper's Renyi-DP bound eps(alpha) <= alpha Delta2^2/(4 mu) + min(((2 alpha - 1) Delta2^2 + 6 Delta1)/(16 mu^2),
  3 Delta1/(4 mu)) divided by alpha, using alpha >= 1 ((2 alpha - 1) <= 2 alpha and 6 Delta1 <= 6 alpha Delta1).
  ``tests/test_skellam.py`` checks that bound against the Renyi divergence summed from the mass function.  The
  ``sensitivity`` is measured in L2, as for the discrete Gaussian: for an integer-valued change d with
  ||d||_2 <= Delta, |d_i| <= d_i^2 gives Delta1 <= floor(Delta^2) and Delta2^2 <= floor(Delta^2), and the bound
  per unit of Delta2^2 is largest at unit moves, so ``Skellam(mu, Delta).rho`` (Delta1 = Delta2^2 =
  floor(Delta^2)) holds for every statistic of that sensitivity: exact for a count (Delta = 1) and for a count
  vector whose record moves between two cells (Delta = sqrt 2).  The reported (epsilon, delta) is that of the
  worst pair's privacy loss distribution built from the mass function (Google's dp-accounting, pessimistic),
  tighter than converting rho.
* Sampling.  Seeded studies: ``rng.poisson(mu) - rng.poisson(mu)`` on numpy's generator.  Publication noise
  (OpenDP has no Skellam sampler): an exact sampler on the integer randomness of the OS's CSPRNG
  (:mod:`secrets`); Poisson(mu) with mu the exact rational value of the float is a sum of floor(mu) Poisson(1)
  draws by Duchon & Duvignau's algorithm (2016; uniform integers only) plus Poisson(mu - floor(mu)) as a
  binomial thinning of one Poisson(1) draw by exact Bernoulli draws (Devroye 1986, p. 487).  Its cost is
  O(mu) per value; :data:`MAX_PUBLICATION_DRAWS` bounds one call.
"""

from __future__ import annotations

import math
import secrets
from fractions import Fraction

import numpy as np

from ..errors import InputError, check_number, require, shown
from .accounting import PrivacyCost, check_delta, pld_epsilon, zcdp_epsilon
from .integer import DEFAULT_TAIL, REPORT_DELTA, IntegerNoise

#: the mu a Skellam mechanism may have: below, rho exceeds 1e5 (no privacy); above, the worst pair's loss
#: distribution (built from ~2 x 11 sqrt(2 mu) masses) stops being cheap
MU_RANGE = (1e-6, 1e8)
#: relative slack when a stated rho is compared with the bound
RHO_RTOL = 1e-9
#: the largest expected number of Poisson(1) draws one publication call may take (2 ceil(mu) per value;
#: about 6 microseconds each from :mod:`secrets` on one core, so about a minute)
MAX_PUBLICATION_DRAWS = 10_000_000
#: ``ive`` values below this are recomputed by the asymptotic expansion (its relative accuracy degrades in
#: the subnormal range and it underflows to 0 below that)
_IVE_FLOOR = 1e-280


# --------------------------------------------------------------------------- the law
def _log_ive_asymptotic(v: np.ndarray, x: float) -> np.ndarray:
    """log(exp(-x) I_v(x)) for v > 0 by the uniform asymptotic expansion (DLMF 10.41.3) with the
    coefficients u_1..u_4 (DLMF 10.41.10), written without cancellation: v eta - x = v / (s + z) +
    v log(z / (1 + s)) with z = x / v, s = sqrt(1 + z^2)."""
    z = x / v
    s = np.sqrt(1.0 + z * z)
    p = 1.0 / s
    p2 = p * p
    u1 = p * (3.0 - 5.0 * p2) / 24.0
    u2 = p2 * (81.0 + p2 * (-462.0 + 385.0 * p2)) / 1152.0
    u3 = p * p2 * (30375.0 + p2 * (-369603.0 + p2 * (765765.0 - 425425.0 * p2))) / 414720.0
    u4 = p2 * p2 * (4465125.0 + p2 * (-94121676.0 + p2 * (349922430.0 + p2 * (-446185740.0
                                                                               + 185910725.0 * p2)))) / 39813120.0
    series = 1.0 + (u1 + (u2 + (u3 + u4 / v) / v) / v) / v
    return (v / (s + z) + v * np.log(z / (1.0 + s)) - 0.5 * np.log(2.0 * math.pi * v) - 0.5 * np.log(s)
            + np.log(series))


def log_mass(k, mu: float) -> np.ndarray:
    """log P(k) of Skellam(mu, mu) at integer ``k``: log ive(|k|, 2 mu), finite at every integer."""
    from scipy import special  # on first use: importing the mechanisms stays light

    v = np.abs(np.asarray(k, float))
    x = 2.0 * mu
    with np.errstate(divide="ignore"):
        direct = np.log(special.ive(v, x))
    low = ~(direct >= math.log(_IVE_FLOOR))
    if np.any(low):
        direct = np.array(direct, float, copy=True)
        direct[low] = _log_ive_asymptotic(np.maximum(v[low], 1.0), x)
    return direct


def _log_chernoff(a: float, mu: float) -> float:
    """log of the Chernoff bound on P(k >= a) (a > 0): min_t E[e^(t k)] e^(-t a), E[e^(t k)] =
    exp(2 mu (cosh t - 1)), at t = asinh(a / (2 mu))."""
    u = a / (2.0 * mu)
    return 2.0 * mu * u * u / (math.sqrt(1.0 + u * u) + 1.0) - a * math.asinh(u)


def _chernoff_window(log_tail: float, mu: float) -> int:
    """The smallest W >= 0 with 2 P(k >= W + 1) <= exp(log_tail) by the Chernoff bound."""
    target = log_tail - math.log(2.0)
    if target >= 0.0:
        return 0
    hi = 1
    while _log_chernoff(hi, mu) > target:
        hi *= 2
    lo = hi // 2  # the bound holds at hi; find the smallest such a in (lo, hi]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _log_chernoff(mid, mu) > target:
            lo = mid
        else:
            hi = mid
    return max(hi - 1, 0)


# --------------------------------------------------------------------------- privacy
def rdp_bound(alpha: float, mu: float, l1: float, l2sq: float) -> float:
    """Agarwal, Kairouz & Liu's Renyi-DP bound of order ``alpha`` for a change with L1 norm ``l1`` and squared
    L2 norm ``l2sq``: alpha Delta2^2/(4 mu) + min(((2 alpha - 1) Delta2^2 + 6 Delta1)/(16 mu^2), 3 Delta1/(4 mu))."""
    return (alpha * l2sq / (4.0 * mu)
            + min(((2.0 * alpha - 1.0) * l2sq + 6.0 * l1) / (16.0 * mu * mu), 3.0 * l1 / (4.0 * mu)))


def zcdp_rho(mu: float, l1: float, l2sq: float) -> float:
    """rho with rdp_bound(alpha) <= alpha rho for every alpha >= 1."""
    return l2sq / (4.0 * mu) + min((2.0 * l2sq + 6.0 * l1) / (16.0 * mu * mu), 3.0 * l1 / (4.0 * mu))


def _moves(sensitivity: float) -> int:
    """floor(Delta^2): the most unit moves (and the largest Delta1 and Delta2^2) of an integer-valued change of
    L2 norm <= Delta (the slack absorbs sqrt(2)^2 = 2.0000000000000004)."""
    return int(math.floor(sensitivity * sensitivity + 1e-9))


def _shift_norms(shifts) -> tuple[int, int]:
    """(Delta1, Delta2^2) of a worst pair's integer coordinate moves."""
    moves = [int(math.floor(abs(float(s)) + 1e-9)) for s in shifts]
    return sum(moves), sum(m * m for m in moves)


# --------------------------------------------------------------------------- exact publication sampler
def poisson_one(randbelow=secrets.randbelow) -> int:
    """One exact Poisson(1) draw from uniform integers (Duchon & Duvignau 2016, Algorithm 1: the number of
    fixed points of a uniform permutation grown one element at a time, tracked lazily).  ``randbelow(m)`` is a
    uniform integer in [0, m); about 3.19 of them per draw on average."""
    n, g, k = 1, 0, 1
    while True:
        i = randbelow(n + 1) + 1
        if i == n + 1:
            k += 1
        elif i > g:
            k -= 1
            g = n + 1
        else:
            return k
        n += 1


def poisson_exact(mu: Fraction, randbelow=secrets.randbelow) -> int:
    """An exact Poisson(mu) draw for rational ``mu`` >= 0: floor(mu) Poisson(1) draws plus a Poisson(1) draw
    thinned by exact Bernoulli(mu - floor(mu)) draws (Binomial(Poisson(1), p) is Poisson(p))."""
    whole, rest = divmod(mu.numerator, mu.denominator)
    total = sum(poisson_one(randbelow) for _ in range(whole))
    if rest:
        total += sum(randbelow(mu.denominator) < rest for _ in range(poisson_one(randbelow)))
    return total


# --------------------------------------------------------------------------- the mechanism
class Skellam(IntegerNoise):
    """Skellam noise P1 - P2, P1, P2 iid Poisson(``mu``), on an integer statistic of L2 sensitivity
    ``sensitivity``; rho-zCDP with rho = :func:`zcdp_rho` (Agarwal, Kairouz & Liu 2021).

    ``rho``: a stated budget, refused unless it equals the bound for ``sensitivity`` (checked once the
    sensitivity is known: given here, or the family's for a release record that omits it).
    """

    name = "skellam"
    record_fields = ("mu", "sensitivity", "rho")
    accounts_rho = True
    sensitivity_norm = "L2"

    @staticmethod
    def norm(diff):
        return float(np.sqrt((np.asarray(diff, float) ** 2).sum()))

    def __init__(self, mu: float, sensitivity: float | None = None, rho: float | None = None):
        self.mu = check_number(mu, "mu", MU_RANGE[0], MU_RANGE[1],
                               " (below, rho exceeds 1e5; above, the loss distribution is not cheap)")
        self.sensitivity = 1.0 if sensitivity is None else check_number(
            sensitivity, "sensitivity", 1.0, 1e6, " (an integer statistic changes by at least 1)")
        moves = _moves(self.sensitivity)
        #: the zCDP bound for any integer statistic of this L2 sensitivity (Delta1 = Delta2^2 = floor(Delta^2))
        self.rho = zcdp_rho(self.mu, moves, moves)
        if rho is not None:
            check_number(rho, "rho", 1e-300, 1e300)
            if sensitivity is not None:
                require(math.isclose(rho, self.rho, rel_tol=RHO_RTOL), "rho",
                        f"{shown(rho)} disagrees with the Skellam bound {shown(self.rho)} for mu = {shown(self.mu)} "
                        f"and sensitivity {shown(self.sensitivity)}")
        self._log_norm = -float(log_mass(0.0, self.mu))
        self._windows: dict = {}

    @classmethod
    def from_rho(cls, rho: float, sensitivity: float = 1.0) -> "Skellam":
        """The smallest-variance Skellam mechanism whose bound meets ``rho`` for L2 sensitivity ``sensitivity``:
        rho / floor(Delta^2) = 1/(4 mu) + min(1/(2 mu^2), 3/(4 mu)) solved in closed form (the bound decreases in
        mu; the 1/(2 mu^2) branch holds from mu = 2/3 on), then moved by ulps to the smallest float mu whose bound
        is met in floating point."""
        check_number(rho, "rho", 1e-300, 1e300)
        sens = check_number(sensitivity, "sensitivity", 1.0, 1e6)
        moves = _moves(sens)
        r = rho / moves
        mu = (0.25 + math.sqrt(0.0625 + 2.0 * r)) / (2.0 * r) if r <= 1.5 else 1.0 / r
        while zcdp_rho(mu, moves, moves) > rho:
            mu = math.nextafter(mu, math.inf)
        while zcdp_rho(math.nextafter(mu, 0.0), moves, moves) <= rho:
            mu = math.nextafter(mu, 0.0)
        require(MU_RANGE[0] <= mu <= MU_RANGE[1], "rho", f"{rho:g} needs mu = {mu:g}, outside "
                f"[{MU_RANGE[0]:g}, {MU_RANGE[1]:g}]")
        return cls(mu, sens)

    @classmethod
    def noise_for_budget(cls, sensitivity, epsilon=None, rho=None):
        """(noise scale sqrt(2 mu), record fields) of the Skellam mechanism meeting ``rho`` (:meth:`from_rho`)."""
        if rho is None:
            raise InputError("rho", f"is the budget of mechanism {cls.name!r} (zCDP; got only epsilon)")
        mech = cls.from_rho(rho, sensitivity)
        return mech.noise_scale, {"mu": mech.mu, "rho": float(rho)}

    # ------------------------------------------------------------------ the law
    def log_kernel(self, k):
        return log_mass(k, self.mu) + self._log_norm

    @property
    def log_norm(self) -> float:
        return self._log_norm

    def tail_window(self, tail: float = DEFAULT_TAIL) -> int:
        """The smallest W with P(|k| > W) <= ``tail``: the mass summed out to the Chernoff window of tail * 1e-6,
        beyond which the Chernoff bound is added (so the result is a valid window, and the smallest one unless
        the true tail lies within a millionth of ``tail``)."""
        tail = float(tail)
        if tail in self._windows:
            return self._windows[tail]
        if not tail > 0:
            raise ValueError(f"tail: must be > 0 (got {tail!r})")
        log_tail = math.log(tail)
        far = _chernoff_window(log_tail - math.log(1e6), self.mu)
        # log P(k > W) for W = 0..far-1: the masses at W+1..far summed from the far end, plus the bound beyond
        logp = log_mass(np.arange(1, far + 1, dtype=float), self.mu)
        beyond = _log_chernoff(far + 1, self.mu)
        upper = np.logaddexp(np.logaddexp.accumulate(logp[::-1])[::-1], beyond)
        ok = np.flatnonzero(math.log(2.0) + upper <= log_tail)
        w = int(ok[0]) if ok.size else far
        self._windows[tail] = w
        return w

    @property
    def noise_variance(self) -> float:
        return 2.0 * self.mu

    def draw(self, shape, rng):
        """Poisson(mu) - Poisson(mu) on numpy's generator (seeded studies, not for publication)."""
        return (rng.poisson(self.mu, size=shape) - rng.poisson(self.mu, size=shape)).astype(np.int64)

    @classmethod
    def _from_scale(cls, scale):
        """The mechanism whose ``noise_scale`` (the standard deviation sqrt(2 mu)) is ``scale``: the largest float
        mu with fl(sqrt(2 mu)) <= scale, which is at least the mu of any mechanism reporting that scale, so a draw
        through the scale never has less noise than the record states (a few ulps more at most)."""
        scale = float(scale)
        mu = scale * scale / 2.0
        while math.sqrt(2.0 * mu) > scale:
            mu = math.nextafter(mu, 0.0)
        while math.sqrt(2.0 * math.nextafter(mu, math.inf)) <= scale:
            mu = math.nextafter(mu, math.inf)
        return cls(mu)

    @classmethod
    def publication_sampler(cls) -> str:
        return ("exact Skellam sampler: Poisson(mu) - Poisson(mu), Duchon & Duvignau's Poisson(1) on the OS's "
                "CSPRNG (secrets); OpenDP has no Skellam sampler")

    @classmethod
    def opendp_noise(cls, values, scale):
        """``values`` plus exact Skellam noise from the OS's CSPRNG (:func:`poisson_exact`; OpenDP has none).

        Cost O(mu) per value: 2 ceil(mu) Poisson(1) draws of about 3.2 uniform integers each; a call whose
        expected draws exceed :data:`MAX_PUBLICATION_DRAWS` is refused before any is made."""
        mech = cls._from_scale(scale)
        values = np.asarray(values, float)
        if not np.all(np.isfinite(values) & (values == np.round(values))):
            raise ValueError("values: integer noise needs integer statistics")
        work = 2 * math.ceil(mech.mu) * values.size
        if work > MAX_PUBLICATION_DRAWS:
            raise InputError("mu", f"{mech.mu:g} needs {work:.3g} exact Poisson(1) draws for {values.size} "
                             f"value(s), above the limit {MAX_PUBLICATION_DRAWS:.3g} of the CSPRNG sampler")
        mu = Fraction(mech.mu)
        noise = [poisson_exact(mu) - poisson_exact(mu) for _ in range(values.size)]
        return values + np.asarray(noise, float).reshape(values.shape)

    # ------------------------------------------------------------------ privacy
    def privacy_accounting(self, delta=None, dim=1, shifts=None) -> PrivacyCost:
        """rho: the bound for the worst pair's moves (Delta1, Delta2^2); epsilon at ``delta``: the worst pair's
        privacy loss distributions from the mass function, composed by dp-accounting (pessimistic)."""
        delta = REPORT_DELTA if delta is None else check_delta(delta, "delta")
        shifts = self._worst_shifts(dim, shifts)
        l1, l2sq = _shift_norms(shifts)
        rho = zcdp_rho(self.mu, l1, l2sq)
        losses = self.privacy_losses(shifts)
        # the discretisation is sized from a valid upper bound on epsilon: the zCDP conversion of rho
        eps = pld_epsilon(losses, delta, upper=zcdp_epsilon(rho, delta) if rho > 0 else 0.0)
        return PrivacyCost(eps, delta, rho, "zcdp",
                           "(epsilon, delta): privacy loss distribution of the Skellam mass function at the worst "
                           "pair, composed by Google's dp-accounting (pessimistic estimate); rho: Agarwal, Kairouz "
                           "& Liu 2021's Renyi bound", losses=losses)

    def __repr__(self):
        return f"Skellam(mu={self.mu:g}, sensitivity={self.sensitivity:g}, rho={self.rho:g})"
