"""Privacy accounting: the tight (epsilon, delta) of a release's worst neighbouring pair, composed across
all its statistics, beside the pure-epsilon and rho-zCDP bounds where they hold.

* **Privacy loss distributions** (Meiser & Mohammadi, CCS 2018; Sommer, Meiser & Mohammadi, PoPETs 2019;
  Koskela, Jalko & Honkela, AISTATS 2020).  A statistic's worst neighbouring pair is a list of *loss
  components*: each coordinate the replaced record can move, with its noise law and its shift (a
  multinomial count vector under the discrete Gaussian: two coordinates shifted by 1; a small-area table:
  the two cells with the smallest noise).  Independent coordinates compose, so the whole release is the
  composition of all components, and delta(epsilon) = E_P[(1 - e^(epsilon - L))_+] of the composed privacy
  loss L.  We build and compose the distributions with Google's ``dp-accounting``
  (``dp_accounting.pld``: discrete Gaussian, discrete Laplace, Laplace, Gaussian, and the worst-case
  distribution of an (epsilon, delta)-DP statistic) with ``pessimistic_estimate=True``, so the reported
  epsilon is an upper bound on the tight one (never optimistic); its discretisation is chosen so that it
  is within 1% of it.  One discrete-Gaussian count is reported from its exact profile (CKS Thm 7) instead, and
  so is a worst pair of discrete-Gaussian coordinates of one sigma alone (:func:`exact_pair_epsilon`:
  the privacy loss of the product law depends on sum_i mu_i k_i only, whose law is a convolution).
* **pure epsilon-DP**: a release whose statistics are all pure composes by addition (Dwork & Roth 2014,
  Thm 3.16); at delta = 0 that is the tight value.
* **zCDP** (Bun & Steinke, TCC 2016): rho adds (Lemma 2.3); pure epsilon is epsilon^2/2-zCDP (Prop. 1.4).
  rho is reported beside (epsilon, delta) when every statistic is zCDP or pure.  The conversion
  rho -> (epsilon, delta) of Canonne, Kamath & Steinke (NeurIPS 2020), Corollary 13,
      delta = inf_{alpha > 1} exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1) * (1 - 1/alpha)^alpha,
  is evaluated in log space (any rho > 0 gives a finite epsilon); it is the fallback bound where a
  discrete Gaussian is too wide for a distribution table (sigma > PLD_MAX_SIGMA).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

#: discrete-Gaussian components with sigma above this are accounted by the zCDP conversion: the table of
#: their privacy loss distribution would hold ~23 sigma points (sigma 1e4: 0.4 s to build)
PLD_MAX_SIGMA = 1e4
#: relative accuracy asked of the pessimistic PLD epsilon (its discretisation is sized from it)
PLD_RTOL = 1e-3


@dataclass(frozen=True)
class Loss:
    """One coordinate of a worst neighbouring pair: noise law ``kind`` with parameter ``scale`` and the
    coordinate's shift.

    kind: "discrete-gaussian" (scale = sigma), "discrete-laplace" (scale = b, mass ~ exp(-|k|/b)),
    "laplace" (b), "gaussian" (sigma), "approximate" (scale = epsilon, shift = delta: any statistic that is
    (epsilon, delta)-DP and nothing more is known), "integer" (``mechanism``: an integer-noise mechanism
    whose privacy loss comes from its mass function).
    """

    kind: str
    scale: float
    shift: float = 1.0
    mechanism: object = field(default=None, compare=False, hash=False)

    def rho(self) -> float | None:
        """This component's zCDP cost, where it is zCDP (Gaussian noise: shift^2 / (2 sigma^2))."""
        if self.kind in ("discrete-gaussian", "gaussian"):
            return self.shift ** 2 / (2.0 * self.scale ** 2)
        return None

    def pure_epsilon(self) -> float | None:
        """Its pure-epsilon cost, where it has one (Laplace noise: shift / b)."""
        if self.kind in ("laplace", "discrete-laplace"):
            return self.shift / self.scale
        if self.kind == "approximate" and self.shift == 0.0:
            return self.scale
        return None


@dataclass(frozen=True)
class PrivacyCost:
    """What a release (or one statistic of it) spends.

    ``epsilon``/``delta``: the (epsilon, delta)-DP guarantee; ``rho``: the zCDP guarantee where one holds
    (None where a statistic is only (epsilon, delta)-DP); ``accounting``: "pure", "approximate", "zcdp" or "pld"
    (reported at the release's delta from its privacy loss distribution, no closed form);
    ``note``: which accountant gave the numbers and which bound each is; ``losses``: the worst
    neighbouring pair as :class:`Loss` components (what :func:`compose` composes).
    """

    epsilon: float
    delta: float
    rho: float | None = None
    accounting: str = "pure"
    note: str = ""
    parts: tuple = field(default=(), compare=False)
    losses: tuple = field(default=(), compare=False)

    def as_tuple(self) -> tuple[float, float]:
        return float(self.epsilon), float(self.delta)

    def describe(self) -> str:
        """One line for a summary header: 'rho 0.5 (zCDP); epsilon 4.2 at delta 1e-06'."""
        if self.rho is not None and self.accounting == "zcdp":
            return f"rho {self.rho:.6g} (zCDP); epsilon {self.epsilon:.6g} at delta {self.delta:.3g}"
        if self.delta > 0:
            return f"epsilon {self.epsilon:.6g}, delta {self.delta:.3g}"
        return f"epsilon {self.epsilon:.6g}"


def check_delta(delta, field: str = "delta", n: int | None = None) -> float:
    """A reporting delta: a number in (0, 1), and below 1/n where n is known (at delta >= 1/n a mechanism
    may publish a whole record and still be "(epsilon, delta)-DP": Dwork & Roth 2014, Sec. 2.3)."""
    from ..errors import InputError

    try:
        d = float(delta)
    except (TypeError, ValueError):
        raise InputError(field, f"must be a number in (0, 1) (got {delta!r})") from None
    if not (0.0 < d < 1.0) or not math.isfinite(d):
        raise InputError(field, f"must lie in (0, 1) (got {d:g})")
    if n is not None and n > 0 and d >= 1.0 / n:
        raise InputError(field, f"{d:g} is not below 1/n = {1.0 / n:.3g}: at delta >= 1/n a mechanism may publish "
                         "a whole record and still meet (epsilon, delta)")
    return d


def unit_shifts(sensitivity: float, norm: str) -> tuple[float, ...]:
    """The worst neighbouring pair of an integer count vector whose replace-one change has the given norm:
    that many coordinates moved by one (a record moved between cells: (+1, -1) has L1 2 and L2 sqrt 2)."""
    k = sensitivity ** 2 if norm == "L2" else sensitivity
    return (1.0,) * max(1, int(round(k)))


# --------------------------------------------------------------------------- zCDP -> (epsilon, delta)
def _log_delta(rho: float, epsilon: float, alpha: float) -> float:
    """log of CKS Corollary 13's delta at order alpha."""
    return ((alpha - 1.0) * (alpha * rho - epsilon) - math.log(alpha - 1.0)
            + alpha * math.log1p(-1.0 / alpha))


def zcdp_log_delta(rho: float, epsilon: float) -> float:
    """log of the smallest delta CKS Corollary 13 gives for rho-zCDP at ``epsilon`` (-inf for rho = 0)."""
    if rho <= 0:
        return -math.inf
    from scipy.optimize import minimize_scalar

    # the minimising alpha is near (epsilon + rho) / (2 rho) + 1; search t = log(alpha - 1) around it
    guess = math.log(max((epsilon + rho) / (2.0 * rho), 1e-300))
    lo, hi = min(-30.0, guess - 5.0), max(30.0, guess + 5.0)
    res = minimize_scalar(lambda t: _log_delta(rho, epsilon, 1.0 + math.exp(t)), bounds=(lo, hi),
                          method="bounded", options={"xatol": 1e-10})
    best = min(res.fun, _log_delta(rho, epsilon, 1.0 + math.exp(min(max(guess, lo), hi))))
    return float(min(best, 0.0))


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The smallest delta CKS Corollary 13 gives for rho-zCDP at ``epsilon`` (may underflow to 0)."""
    return float(math.exp(zcdp_log_delta(rho, epsilon)))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest epsilon with rho-zCDP => (epsilon, delta)-DP by CKS Corollary 13 (solved in log space)."""
    if not (0 < delta < 1):
        raise ValueError(f"delta: must lie in (0, 1) (got {delta!r})")
    if rho <= 0:
        return 0.0
    from scipy.optimize import brentq

    target = math.log(delta)
    if zcdp_log_delta(rho, 0.0) <= target:
        return 0.0
    hi = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)) + 1.0  # Bun & Steinke's bound, plus slack
    while zcdp_log_delta(rho, hi) > target:
        hi *= 2.0
    return float(brentq(lambda e: zcdp_log_delta(rho, e) - target, 0.0, hi, xtol=1e-14, rtol=1e-12))


# --------------------------------------------------------------------------- privacy loss distributions
def _pld_of(loss: Loss, pessimistic: bool, interval: float):
    from dp_accounting.pld import common
    from dp_accounting.pld import privacy_loss_distribution as pld

    if loss.kind == "discrete-gaussian":
        return pld.from_discrete_gaussian_mechanism(loss.scale, sensitivity=int(round(loss.shift)),
                                                    pessimistic_estimate=pessimistic,
                                                    value_discretization_interval=interval)
    if loss.kind == "discrete-laplace":
        return pld.from_discrete_laplace_mechanism(1.0 / loss.scale, sensitivity=int(round(loss.shift)),
                                                   pessimistic_estimate=pessimistic,
                                                   value_discretization_interval=interval)
    if loss.kind == "laplace":
        return pld.from_laplace_mechanism(loss.scale, sensitivity=loss.shift, pessimistic_estimate=pessimistic,
                                          value_discretization_interval=interval, use_connect_dots=pessimistic)
    if loss.kind == "gaussian":
        return pld.from_gaussian_mechanism(loss.scale, sensitivity=loss.shift, pessimistic_estimate=pessimistic,
                                           value_discretization_interval=interval, use_connect_dots=pessimistic)
    if loss.kind == "approximate":
        return pld.from_privacy_parameters(common.DifferentialPrivacyParameters(loss.scale, loss.shift),
                                           value_discretization_interval=interval)
    if loss.kind == "integer":
        return _integer_pld(loss, pessimistic, interval)
    raise ValueError(f"accounting: unknown loss component {loss.kind!r}")


def _integer_pld(loss: Loss, pessimistic: bool, interval: float):
    """The privacy loss distribution of an integer noise law shifted by ``loss.shift``, from its mass function."""
    import numpy as np
    from dp_accounting.pld import privacy_loss_distribution as pld

    mech = loss.mechanism
    shift = int(round(loss.shift))
    w = int(mech.tail_window(1e-30)) + shift
    k = np.arange(-w, w + 1)
    logp = np.asarray(mech.logpmf(k), float)
    lower = {int(x): float(v) for x, v in zip(k, logp) if np.isfinite(v)}
    upper = {int(x) + shift: float(v) for x, v in zip(k, logp) if np.isfinite(v)}
    return pld.from_two_probability_mass_functions(lower, upper, pessimistic_estimate=pessimistic,
                                                   value_discretization_interval=interval)


def _grouped(losses) -> list[tuple[Loss, int]]:
    counts: dict = {}
    order: list = []
    for loss in losses:
        key = (loss.kind, loss.scale, loss.shift, id(loss.mechanism) if loss.mechanism is not None else None)
        if key not in counts:
            counts[key] = [loss, 0]
            order.append(key)
        counts[key][1] += 1
    return [(counts[k][0], counts[k][1]) for k in order]


#: the discretisation of the coarse loss distribution that bounds an integer law's epsilon (sizing only)
COARSE_INTERVAL = 1e-2


def _upper_bound(losses, delta: float) -> float:
    """A quick valid upper bound on the composed epsilon at ``delta`` (sizes the discretisation).  An integer law
    with no closed form counts its own epsilon at delta / (2 k) from a coarse pessimistic loss distribution
    (basic composition over the k components: valid, cheap)."""
    rho = sum(loss.rho() or 0.0 for loss in losses)
    pure = sum(loss.pure_epsilon() or 0.0 for loss in losses)
    approx = sum(loss.scale for loss in losses if loss.kind == "approximate" and loss.pure_epsilon() is None)
    integer = [loss for loss in losses if loss.kind == "integer"]
    tabulated = 0.0
    for loss, count in _grouped(integer):
        coarse = _pld_of(loss, True, COARSE_INTERVAL)
        tabulated += count * float(coarse.get_epsilon_for_delta(delta / (2.0 * len(losses))))
    return max(pure + approx + tabulated + (zcdp_epsilon(rho, delta / 2.0) if rho > 0 else 0.0), 1e-6)


def pld_epsilon(losses, delta: float, pessimistic: bool = True, interval: float | None = None,
                upper: float | None = None) -> float:
    """epsilon at ``delta`` of the composition of ``losses`` by Google's dp-accounting PLDs.

    ``pessimistic``: an upper bound on the tight epsilon (the reported value); False gives dp-accounting's
    optimistic estimate (a lower bound).  ``interval``: the discretisation of the privacy loss (default
    sized from an upper bound on epsilon -- ``upper`` where the caller knows one, else a quick one -- so the
    pessimistic value is within ~PLD_RTOL of the tight one).
    """
    groups = _grouped(losses)
    if not groups:
        return 0.0
    if interval is None:
        k = sum(c for _, c in groups)
        bound = _upper_bound(losses, delta) if upper is None else upper
        interval = min(1e-4, max(1e-9, PLD_RTOL * bound / (2.0 * k)))  # an infinite bound: 1e-4
    total = None
    for loss, count in groups:
        one = _pld_of(loss, pessimistic, interval)
        if count > 1:
            one = one.self_compose(count)
        total = one if total is None else total.compose(one)
    return float(max(0.0, total.get_epsilon_for_delta(delta)))


# --------------------------------------------------------------------------- composition
def _pld_usable(losses) -> bool:
    return bool(losses) and all(
        loss.kind != "discrete-gaussian" or loss.scale <= PLD_MAX_SIGMA for loss in losses)


# --------------------------------------------------------------------------- exact profile of a worst pair
#: the most multiply-adds the exact profile of a vector's worst pair may take (its convolutions); beyond it the
#: pair's privacy loss distributions are composed by dp-accounting
EXACT_PAIR_MAX_WORK = 5e7


def gaussian_tail_window(sigma: float, tail: float) -> int:
    """Half-width of N_Z(0, sigma^2) beyond which the two tails together hold below ``tail``: the discrete
    Gaussian is sub-Gaussian with variance proxy sigma^2 (Canonne, Kamath & Steinke 2020), so
    P(|k| >= t) <= 2 exp(-t^2 / (2 sigma^2)); plus one."""
    return int(math.ceil(sigma * math.sqrt(2.0 * math.log(2.0 / tail)))) + 1


def _pair_window(sigma: float) -> int:
    return gaussian_tail_window(sigma, 1e-18)


def _pair_sum_pmf(sigma: float, shifts) -> "np.ndarray":
    """The law of T = sum_i mu_i k_i on consecutive integers (from -w sum_i mu_i), with k_i iid N_Z(0, sigma^2)
    truncated at +-w where each tail holds below 1e-18 and mu_i the integer ``shifts``: the coordinates' laws placed
    on the lattices mu_i Z and convolved."""
    import numpy as np

    w = _pair_window(sigma)
    k = np.arange(-w, w + 1, dtype=float)
    base = np.exp(-k * k / (2.0 * sigma * sigma))
    base /= base.sum()  # (the window holds all but 2e-18 of the mass)
    pmf = np.ones(1)
    for mu in shifts:
        spread = np.zeros(2 * w * mu + 1)
        spread[::mu] = base
        pmf = np.convolve(pmf, spread)
    return pmf


def pair_exact_work(sigma: float, shifts) -> float:
    """Multiply-adds :func:`exact_pair_epsilon` takes for a worst pair with these integer ``shifts``."""
    w = _pair_window(sigma)
    width, work = 1.0, 0.0
    for mu in shifts:
        work += width * (2.0 * w * mu + 1.0)
        width += 2.0 * w * mu
    return work


def exact_pair_delta(pmf: "np.ndarray", shifts, epsilon: float) -> float:
    """delta(epsilon) of independent N_Z(0, sigma^2) noise on coordinates a neighbour moves by the integers
    ``shifts`` (CKS Thm 7 for a vector): the hockey-stick divergence of the product laws P (y = k) and Q (y = k + mu).
    Their privacy loss at y is (M - 2 T) / (2 sigma^2) with T = sum_i mu_i k_i and M = sum_i mu_i^2, so
    delta(epsilon) = sum_t max(0, P_T(t) - e^epsilon Q_T(t)), where Q_T(t) = P_T(t - M) (``pmf``: the law P_T of
    :func:`_pair_sum_pmf`).  The noise is symmetric, so the reverse pair has the same profile."""
    import numpy as np

    M = int(sum(mu * mu for mu in shifts))
    q = np.zeros_like(pmf)
    q[M:] = pmf[:pmf.size - M] if M else pmf
    with np.errstate(divide="ignore", invalid="ignore"):  # (in logs: e^epsilon overflows where sigma is small)
        log_p, log_q = np.log(pmf), np.log(q)
        above = log_p - log_q > epsilon  # the terms where P_T > e^epsilon Q_T (Q_T = 0 included; both 0: not)
    return float((pmf[above] - np.exp(epsilon + log_q[above])).sum())


def exact_pair_epsilon(sigma: float, shifts, delta: float) -> float:
    """The smallest epsilon whose :func:`exact_pair_delta` is at most ``delta``, rounded up past the root finder's
    tolerance so that it is never below the tight value."""
    from scipy.optimize import brentq

    shifts = [int(mu) for mu in shifts]
    pmf = _pair_sum_pmf(sigma, shifts)
    profile = lambda e: exact_pair_delta(pmf, shifts, e)  # noqa: E731
    if profile(0.0) <= delta:
        return 0.0
    rho = sum(mu * mu for mu in shifts) / (2.0 * sigma ** 2)
    hi = max(1.0, zcdp_epsilon(rho, delta) * 1.5 + 1.0)
    while profile(hi) > delta:
        hi *= 2.0
    eps = float(brentq(lambda e: profile(e) - delta, 0.0, hi, xtol=1e-13, rtol=1e-12))
    step = 1e-13 + 1e-12 * eps
    eps += step
    while profile(eps) > delta:  # (the profile decreases in epsilon: past the root, delta is met)
        eps += step
    return eps


#: how an exactly computed worst pair of discrete-Gaussian coordinates is reported
EXACT_PAIR_NOTE = ("exact privacy profile of the worst pair: its discrete-Gaussian coordinates composed exactly "
                   "(the hockey-stick divergence of their product laws; Canonne, Kamath & Steinke 2020, Thm 7)")


def _exact_pair(losses):
    """(sigma, integer shifts) when every component is a discrete Gaussian of one sigma with an integer shift and
    the exact profile is affordable (:data:`EXACT_PAIR_MAX_WORK`), else None."""
    if not losses or any(loss.kind != "discrete-gaussian" for loss in losses):
        return None
    sigma = losses[0].scale
    shifts = [loss.shift for loss in losses]
    if any(loss.scale != sigma for loss in losses) or any(s != int(s) or s < 1 for s in shifts):
        return None
    if pair_exact_work(sigma, [int(s) for s in shifts]) > EXACT_PAIR_MAX_WORK:
        return None
    return sigma, [int(s) for s in shifts]


def zcdp_pair_epsilon(losses, delta: float) -> tuple[float, str]:
    """(epsilon at ``delta``, how) of zCDP loss components: discrete-Gaussian coordinates of one sigma by their
    exact profile where it is affordable, else their composed privacy loss distributions, or the CKS Cor. 13
    conversion of their rho where a discrete Gaussian is too wide for a loss table."""
    exact = _exact_pair(losses)
    if exact is not None:
        return exact_pair_epsilon(exact[0], exact[1], delta), EXACT_PAIR_NOTE
    if _pld_usable(losses):
        return pld_epsilon(losses, delta), ("privacy loss distribution of the worst pair, composed by Google's "
                                            "dp-accounting (pessimistic estimate: an upper bound on the tight value)")
    rho = sum(loss.rho() for loss in losses)
    return zcdp_epsilon(rho, delta), "rho converted by Canonne, Kamath & Steinke 2020, Cor. 13 (an upper bound)"


def compose(parts: list[PrivacyCost], delta: float) -> PrivacyCost:
    """The whole release's cost; ``delta`` is where a release that is not pure reports its epsilon
    (its approximate-DP statistics' own deltas are added to it).

    The reported epsilon is the smallest of the valid upper bounds that apply: the composed privacy loss
    distributions of the worst neighbouring pair (when every statistic states its pair), basic composition
    (no zCDP statistic), and rho-zCDP converted by CKS Cor. 13 (approximate statistics added by basic
    composition).
    """
    if not parts:
        return PrivacyCost(0.0, 0.0)
    kinds = {p.accounting for p in parts}
    losses = tuple(loss for p in parts for loss in (p.losses or _stated_losses(p)))
    if kinds == {"pure"}:
        eps = sum(p.epsilon for p in parts)
        return PrivacyCost(eps, 0.0, None, "pure", "pure epsilon-DP; epsilons add (tight at delta = 0)",
                           tuple(parts), losses)
    has_zcdp = "zcdp" in kinds
    if "pld" in kinds:
        return _compose_by_pld(parts, losses, delta)
    approx = [p for p in parts if p.accounting == "approximate"]
    total_delta = (float(delta) if has_zcdp else 0.0) + sum(p.delta for p in approx)
    zparts = [p for p in parts if p.accounting != "approximate"]
    rho_z = sum(p.rho if p.accounting == "zcdp" else 0.5 * p.epsilon ** 2 for p in zparts)
    rho = None if approx else rho_z
    if len(parts) == 1 and parts[0].accounting == "zcdp":
        only = parts[0]  # one statistic: its own accounting (an exact profile where one exists)
        if math.isclose(only.delta, total_delta, rel_tol=1e-12):
            return PrivacyCost(only.epsilon, only.delta, only.rho, "zcdp", only.note, tuple(parts), losses)
    bounds: list[tuple[float, str]] = []
    complete = all(p.losses or p.accounting != "zcdp" for p in parts)
    if complete and _pld_usable(losses):
        bounds.append((pld_epsilon(losses, total_delta),
                       "(epsilon, delta) of the worst neighbouring pair: privacy loss distributions composed by "
                       "Google's dp-accounting (pessimistic estimate: an upper bound on the tight value)"))
    if not has_zcdp:
        bounds.append((sum(p.epsilon for p in parts), "basic composition (epsilon and delta add)"))
    else:
        z = zcdp_epsilon(rho_z, float(delta)) + sum(p.epsilon for p in approx)
        how = f"rho-zCDP converted by Canonne, Kamath & Steinke 2020, Cor. 13 at delta {float(delta):g}"
        if approx:
            how += "; approximate-DP statistics added by basic composition"
        bounds.append((z, how))
    eps, note = min(bounds, key=lambda b: b[0])
    if rho is not None:
        note += ("; rho adds (Bun & Steinke 2016, Lemma 2.3; pure epsilon counts as epsilon^2/2, Prop. 1.4): "
                 "a zCDP bound")
    return PrivacyCost(float(eps), float(total_delta), rho, "zcdp" if rho is not None else "approximate", note,
                       tuple(parts), losses)


def _compose_by_pld(parts: list[PrivacyCost], losses: tuple, delta: float) -> PrivacyCost:
    """A release with a statistic accounted only by its privacy loss distribution ("pld": an integer law with no
    closed-form accountant): every statistic's worst pair composed by dp-accounting at ``delta`` plus the stated
    deltas of (epsilon, delta) statistics; where a discrete Gaussian is too wide for a loss table, basic
    composition of each statistic's own (epsilon, delta) (a valid, looser bound)."""
    total_delta = float(delta) + sum(p.delta for p in parts if p.accounting == "approximate")
    if len(parts) == 1 and math.isclose(parts[0].delta, total_delta, rel_tol=1e-12):
        only = parts[0]
        return PrivacyCost(only.epsilon, only.delta, None, "pld", only.note, tuple(parts), losses)
    if _pld_usable(losses):
        return PrivacyCost(pld_epsilon(losses, total_delta), total_delta, None, "pld",
                           "(epsilon, delta) of the worst neighbouring pair: privacy loss distributions composed by "
                           "Google's dp-accounting (pessimistic estimate: an upper bound on the tight value)",
                           tuple(parts), losses)
    return PrivacyCost(sum(p.epsilon for p in parts), sum(p.delta for p in parts), None, "pld",
                       "basic composition of each statistic's (epsilon, delta) (epsilon and delta add)",
                       tuple(parts), losses)


def _stated_losses(part: PrivacyCost) -> tuple:
    """A part with no worst pair attached: the worst case of any mechanism with its stated (epsilon, delta)
    (a zCDP part without a pair has none: ``compose`` then uses the zCDP conversion)."""
    return (Loss("approximate", float(part.epsilon), float(part.delta)),)
