"""Privacy accounting: pure epsilon-DP, approximate (epsilon, delta)-DP and rho-zCDP, composed.

* zCDP (Bun & Steinke, TCC 2016): rho-zCDP composes by addition of rho (their Lemma 2.3); pure
  epsilon-DP implies (epsilon^2 / 2)-zCDP (their Proposition 1.4), so a release mixing pure-epsilon
  and rho statistics is rho-zCDP with rho = sum rho_i + sum epsilon_j^2 / 2.
* rho-zCDP -> (epsilon, delta)-DP: Canonne, Kamath & Steinke (NeurIPS 2020), Corollary 13:
      delta = inf_{alpha > 1} exp((alpha - 1)(alpha rho - epsilon)) / (alpha - 1) * (1 - 1/alpha)^alpha,
  tighter than Bun & Steinke's epsilon = rho + 2 sqrt(rho log(1/delta)).  We solve it for epsilon at
  the stated delta (the infimum over alpha by bounded scalar minimisation in log space).
* A statistic with approximate (epsilon, delta)-DP only (the classical / analytic Gaussian
  mechanism) is not converted to zCDP; it composes with the rest by basic composition
  (epsilon and delta add; Dwork & Roth 2014, Thm 3.16), and the note says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class PrivacyCost:
    """What a release (or one statistic of it) spends.

    ``epsilon``/``delta``: the (epsilon, delta)-DP guarantee; ``rho``: the zCDP guarantee where one
    holds (None for approximate-DP-only statistics); ``accounting``: "pure", "approximate" or "zcdp";
    ``note``: how the numbers were composed and converted.
    """

    epsilon: float
    delta: float
    rho: float | None = None
    accounting: str = "pure"
    note: str = ""
    parts: tuple = field(default=(), compare=False)

    def as_tuple(self) -> tuple[float, float]:
        return float(self.epsilon), float(self.delta)

    def describe(self) -> str:
        """One line for a summary header: 'rho 0.5 (zCDP); epsilon 4.2 at delta 1e-06'."""
        if self.accounting == "zcdp":
            return f"rho {self.rho:.6g} (zCDP); epsilon {self.epsilon:.6g} at delta {self.delta:.3g}"
        if self.delta > 0:
            return f"epsilon {self.epsilon:.6g}, delta {self.delta:.3g}"
        return f"epsilon {self.epsilon:.6g}"


def _log_delta(rho: float, epsilon: float, alpha: float) -> float:
    """log of CKS Corollary 13's delta at order alpha."""
    return ((alpha - 1.0) * (alpha * rho - epsilon) - math.log(alpha - 1.0)
            + alpha * math.log1p(-1.0 / alpha))


def zcdp_delta(rho: float, epsilon: float) -> float:
    """The smallest delta CKS Corollary 13 gives for rho-zCDP at ``epsilon``."""
    if rho <= 0:
        return 0.0
    from scipy.optimize import minimize_scalar

    # the minimising alpha is near (epsilon + rho) / (2 rho) + 1; search log(alpha - 1)
    res = minimize_scalar(lambda t: _log_delta(rho, epsilon, 1.0 + math.exp(t)), bounds=(-30.0, 30.0),
                          method="bounded", options={"xatol": 1e-10})
    return float(min(1.0, math.exp(min(res.fun, 0.0))))


def zcdp_epsilon(rho: float, delta: float) -> float:
    """The smallest epsilon with rho-zCDP => (epsilon, delta)-DP by CKS Corollary 13."""
    if not (0 < delta < 1):
        raise ValueError(f"delta: must lie in (0, 1) (got {delta!r})")
    if rho <= 0:
        return 0.0
    from scipy.optimize import brentq

    hi = rho + 2.0 * math.sqrt(rho * math.log(1.0 / delta)) + 1.0  # Bun & Steinke's bound, plus slack
    if zcdp_delta(rho, 0.0) <= delta:
        return 0.0
    return float(brentq(lambda e: math.log(zcdp_delta(rho, e)) - math.log(delta), 0.0, hi, xtol=1e-12))


def compose(parts: list[PrivacyCost], delta: float) -> PrivacyCost:
    """The whole release's cost; ``delta`` is where a zCDP total is reported as (epsilon, delta)."""
    if not parts:
        return PrivacyCost(0.0, 0.0)
    kinds = {p.accounting for p in parts}
    if "zcdp" not in kinds:
        eps = sum(p.epsilon for p in parts)
        dlt = sum(p.delta for p in parts)
        return PrivacyCost(eps, dlt, None, "approximate" if dlt > 0 else "pure",
                           "basic composition (epsilon and delta add)", tuple(parts))
    zparts = [p for p in parts if p.accounting in ("zcdp", "pure")]
    approx = [p for p in parts if p.accounting == "approximate"]
    rho = sum(p.rho if p.accounting == "zcdp" else 0.5 * p.epsilon ** 2 for p in zparts)
    note = "rho adds (Bun & Steinke 2016, Lemma 2.3)"
    if any(p.accounting == "pure" for p in zparts):
        note += "; pure epsilon counts as epsilon^2/2-zCDP (Bun & Steinke 2016, Prop. 1.4)"
    eps = zcdp_epsilon(rho, delta)
    note += f"; (epsilon, delta) by Canonne, Kamath & Steinke 2020, Cor. 13 at delta {delta:g}"
    if len(zparts) == 1 and zparts[0].accounting == "zcdp" and zparts[0].epsilon <= eps:
        # one discrete-Gaussian statistic: its exact privacy profile is tighter than the conversion
        eps = zparts[0].epsilon
        note = zparts[0].note
    dlt = delta
    if approx:
        eps += sum(p.epsilon for p in approx)
        dlt += sum(p.delta for p in approx)
        note += "; approximate-DP statistics added by basic composition"
    return PrivacyCost(eps, dlt, rho, "zcdp", note, tuple(parts))
