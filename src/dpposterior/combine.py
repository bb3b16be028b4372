"""Combining an analysis repeated on m synthetic (or imputed) data sets: Rubin's rules.

A noise-aware synthetic-data release (NAPSU-MQ: Räisä, Jälkö, Kaski & Honkela, "Noise-aware statistical
inference with differentially private synthetic data", AISTATS 2023) gives the analyst m data sets drawn
from the posterior predictive of a model fitted to noisy marginals.  The analyst fits their own model
(a logistic regression, say) on each, keeps each fit's estimates ``q_i`` and their variances ``u_i``, and
:func:`combine` turns the m pairs into one estimate, one variance, degrees of freedom and an interval.

With ``q̄ = mean(q_i)``, ``B = sample variance of q_i (ddof 1)`` and ``Ū = mean(u_i)``, per coefficient:

``rule="synthetic"`` -- Raghunathan, Reiter & Rubin (2003), fully synthetic data, as NAPSU-MQ uses it::

    T  = (1 + 1/m) B - Ū
    ν  = (m - 1) (1 - Ū / ((1 + 1/m) B))²
    T ≤ 0:  T = (n_synthetic / n_original) Ū      (Reiter 2002's non-negative variance)

  exactly as ``conf_int_distribution(q, u, use_nonnegative_variance=True, n, n_orig)`` in
  ``twinify/napsu_mq/rubins_rules.py`` of GitHub ``DPBayes/twinify`` (commit c522a90) and in
  ``lib/rubin.py`` of GitHub ``DPBayes/NAPSU-MQ-experiments`` (commit db0eb9e, the paper's code; its
  ``workflow/scripts/adult-reduced-analysis.py`` and the reported "NA+MI" results use
  ``non_negative_conf_int``).  Like theirs, ν keeps the formula above even where T was replaced (B = 0 gives
  ν = ∞, a normal interval).  Without ``n_synthetic``/``n_original`` the fix cannot be made and, as their
  plain ``conf_int``, a coefficient with T ≤ 0 gets a NaN variance, df and interval (with a
  :class:`RuntimeWarning`).

``rule="imputation"`` -- Rubin (1987), multiple imputation of missing data::

    T  = Ū + (1 + 1/m) B
    ν  = (m - 1) (1 + 1/r)²,  r = (1 + 1/m) B / Ū                        (Rubin 1987, default)
    ν  = ν_m ν_obs / (ν_m + ν_obs),  ν_obs = (ν_com + 1)/(ν_com + 3) ν_com (1 - λ),
         λ = (1 + 1/m) B / T                                              (Barnard & Rubin 1999,
                                                                            with ``df_complete=ν_com``)

  It is the wrong rule for fully synthetic data: the synthetic sets vary around each other by the
  posterior predictive's own spread, so adding Ū to B counts the sampling variance twice and its
  intervals over-cover (tests/test_combine.py: 0.9265 where the synthetic rule gives 0.9075 at 0.90).

The interval is ``q̄ ± t_ν((1 + level)/2) √T`` (the normal quantile when ν = ∞).  Under the synthetic rule it
is for the population's value (the model's records are a sample of it), so it holds the sampling variance of
the original records as well: for the original data set's own value it is conservative (docs/combine.md).
Each coefficient is combined on its own (scalar rules): given covariance matrices, only their diagonals are
used -- the multivariate versions of these rules (Reiter 2005; Li, Raghunathan & Rubin 1991) are not
implemented.

Refused with a one-line :class:`~dpposterior.errors.InputError`: m < 2, shapes that disagree, non-finite
values, negative variances, a level outside (0, 1), an unknown rule.  Dropping fits that failed on some
synthetic set (NAPSU-MQ's experiments drop those with ``u ≥ 1000``) is the caller's decision, not made here.

References: Rubin, D. B. (1987), *Multiple Imputation for Nonresponse in Surveys*; Barnard, J. & Rubin,
D. B. (1999), Biometrika 86(4); Reiter, J. P. (2002), J. Official Statistics 18(4); Raghunathan, T. E.,
Reiter, J. P. & Rubin, D. B. (2003), J. Official Statistics 19(1).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from .errors import InputError, require, shown

RULES = ("synthetic", "imputation")


@dataclass(frozen=True)
class Combined:
    """The combination of m analyses, per coefficient.

    ``estimate`` (q̄), ``variance`` (T), ``df`` (ν), ``interval`` = ``(lower, upper)`` at ``level``,
    ``within`` (Ū), ``between`` (B), ``adjusted`` (True where rule "synthetic" replaced T ≤ 0 by
    (n_synthetic/n_original) Ū), ``m``, ``rule``, ``level`` and ``names`` (the coefficients' labels).
    Scalar input (estimates of shape (m,)) gives floats (``adjusted`` a bool); (m, d) input gives
    read-only arrays of shape (d,).
    """

    estimate: float | np.ndarray
    variance: float | np.ndarray
    df: float | np.ndarray
    interval: tuple
    within: float | np.ndarray
    between: float | np.ndarray
    adjusted: bool | np.ndarray
    m: int
    rule: str
    level: float
    names: tuple

    @property
    def std_error(self):
        """√T (NaN where T is)."""
        return np.sqrt(self.variance)

    def summary(self):
        """One row per coefficient: estimate, std_error, variance, df, lower, upper, within, between,
        adjusted; the index is ``names``; ``attrs`` holds m, rule and level."""
        import pandas as pd

        def column(value):
            return np.atleast_1d(np.asarray(value))

        lower, upper = self.interval
        frame = pd.DataFrame(
            {"estimate": column(self.estimate), "std_error": column(self.std_error),
             "variance": column(self.variance), "df": column(self.df), "lower": column(lower),
             "upper": column(upper), "within": column(self.within), "between": column(self.between),
             "adjusted": column(self.adjusted)},
            index=pd.Index(list(self.names), name="coefficient"))
        frame.attrs.update(m=self.m, rule=self.rule, level=self.level)
        return frame


def _array(value, field: str) -> np.ndarray:
    try:
        out = np.asarray(value, dtype=float)
    except (TypeError, ValueError) as exc:
        raise InputError(field, f"must be numbers ({exc})") from None
    return out


def _positive_size(value, field: str) -> float:
    ok = isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, bool)
    require(ok and math.isfinite(value) and value > 0, field, f"must be a positive finite number, got {shown(value)}")
    return float(value)


def combine(estimates, variances, *, rule: str = "synthetic", level: float = 0.9, n_synthetic=None,
            n_original=None, df_complete=None, names=None) -> Combined:
    """Combine m estimates and their variances by Rubin's rules (module docstring: formulas, references).

    ``estimates``: shape (m,) or (m, d).  ``variances``: the same shape, or (m, d, d) covariance matrices
    (their diagonals are used).  ``rule``: ``"synthetic"`` (Raghunathan, Reiter & Rubin 2003, as NAPSU-MQ)
    or ``"imputation"`` (Rubin 1987).  ``level``: the interval's coverage, in (0, 1).
    ``n_synthetic``, ``n_original`` (rule "synthetic", both or neither): the rows of each synthetic data
    set and of the original data, for the T ≤ 0 fix T = (n_synthetic/n_original) Ū.  ``df_complete``
    (rule "imputation"): the complete-data degrees of freedom, for Barnard & Rubin's (1999) df instead of
    Rubin's (1987).  ``names``: d labels for :meth:`Combined.summary` (default 0, 1, ...).
    """
    require(isinstance(rule, str) and rule in RULES, "rule",
            f"unknown rule {shown(rule)}; choose one of {', '.join(RULES)}")
    ok_level = isinstance(level, (int, float, np.integer, np.floating)) and not isinstance(level, bool)
    require(ok_level and 0 < level < 1, "level", f"must be in (0, 1), got {shown(level)}")

    q = _array(estimates, "estimates")
    u = _array(variances, "variances")
    require(q.ndim in (1, 2), "estimates", f"must have shape (m,) or (m, d), got {q.shape}")
    scalar = q.ndim == 1
    m = q.shape[0]
    require(m >= 2, "estimates", f"needs m >= 2 analyses to combine, got {m}")
    require(q.size > 0, "estimates", f"has no coefficients (shape {q.shape})")
    allowed = [q.shape] if scalar else [q.shape, (*q.shape, q.shape[1])]
    require(u.shape in allowed, "variances",
            f"shape {u.shape} does not match estimates {q.shape}; expected "
            + " or ".join(str(s) for s in allowed))
    require(bool(np.isfinite(q).all()), "estimates", "must be finite (drop the analyses that failed first)")
    require(bool(np.isfinite(u).all()), "variances", "must be finite (drop the analyses that failed first)")
    if u.ndim == 3:
        u = np.diagonal(u, axis1=1, axis2=2)
    require(bool((u >= 0).all()), "variances", f"must be >= 0, got {shown(float(u.min()))}")

    if rule == "synthetic":
        require(df_complete is None, "df_complete", "applies to rule 'imputation' only")
        require((n_synthetic is None) == (n_original is None), "n_synthetic",
                "give both n_synthetic and n_original (the T <= 0 fix needs their ratio) or neither")
        ratio = None
        if n_synthetic is not None:
            ratio = _positive_size(n_synthetic, "n_synthetic") / _positive_size(n_original, "n_original")
    else:
        require(n_synthetic is None and n_original is None, "n_synthetic",
                "n_synthetic and n_original apply to rule 'synthetic' only")
        if df_complete is not None:
            ok = isinstance(df_complete, (int, float, np.integer, np.floating)) and not isinstance(df_complete, bool)
            require(ok and df_complete > 0, "df_complete", f"must be a positive number, got {shown(df_complete)}")

    q2 = q.reshape(m, -1)
    u2 = u.reshape(m, -1)
    d = q2.shape[1]
    if names is None:
        names = tuple(range(d))
    else:
        names = tuple(names)
        require(len(names) == d, "names", f"has {len(names)} labels for {d} coefficients")

    qbar = q2.mean(axis=0)
    between = q2.var(axis=0, ddof=1)
    within = u2.mean(axis=0)
    inflated = (1 + 1 / m) * between
    adjusted = np.zeros(d, dtype=bool)

    with np.errstate(divide="ignore", invalid="ignore"):
        if rule == "synthetic":
            total = inflated - within
            df = (m - 1) * (1 - within / inflated) ** 2
            # B = Ū = 0: every analysis gave the same number with no uncertainty; twinify's 0/0 is NaN
            df = np.where((between == 0) & (within == 0), np.inf, df)
            bad = ~(total > 0)
            if ratio is not None:
                adjusted = bad
                total = np.where(bad, ratio * within, total)
            elif bad.any():
                total = np.where(bad, np.nan, total)
                df = np.where(bad, np.nan, df)
                warnings.warn(
                    f"rule 'synthetic': T = (1 + 1/m) B - Ū <= 0 for coefficient(s) "
                    f"{[names[i] for i in np.flatnonzero(bad)]}; their variance and interval are NaN -- "
                    "pass n_synthetic and n_original for the non-negative fix T = (n_synthetic/n_original) Ū",
                    RuntimeWarning, stacklevel=2)
        else:
            total = within + inflated
            lam = np.where(total > 0, inflated / total, 0.0)      # fraction of the variance due to m
            df = np.where(lam > 0, (m - 1) / lam ** 2, np.inf)    # = (m - 1)(1 + 1/r)^2, Rubin (1987)
            if df_complete is not None:
                nu = float(df_complete)
                obs = np.inf if math.isinf(nu) else (nu + 1) / (nu + 3) * nu * (1 - lam)
                df = np.where(np.isinf(df), obs, np.where(np.isinf(obs), df, df * obs / (df + obs)))

    tail = (1 + level) / 2
    quantile = np.where(np.isinf(df), stats.norm.ppf(tail), stats.t.ppf(tail, np.where(np.isinf(df), 1, df)))
    half = quantile * np.sqrt(total)
    lower, upper = qbar - half, qbar + half

    def out(value):
        value = np.asarray(value)
        if scalar:
            return value[0].item()
        value = value.copy()
        value.setflags(write=False)
        return value

    return Combined(estimate=out(qbar), variance=out(total), df=out(df), interval=(out(lower), out(upper)),
                    within=out(within), between=out(between), adjusted=out(adjusted), m=m, rule=rule,
                    level=float(level), names=names)
