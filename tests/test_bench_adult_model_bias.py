"""benchmarks/adult_model_bias.py's rescoring of the combined intervals with a variance for the data set's own
regression, T - Ū, where Ū is recovered from the stored T and degrees of freedom."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import adult_model_bias as amb  # noqa: E402
import marginals_adult as ma  # noqa: E402

from dpposterior.combine import combine  # noqa: E402


def _row(q, u, sample_coef=None):
    """A results row as marginals_adult.py stores it, from m analyses' estimates ``q`` and variances ``u``."""
    c = combine(q, u, rule="synthetic", level=0.9, n_synthetic=100, n_original=100)
    coefs = [{"estimate": float(c.estimate[i]), "variance": float(c.variance[i]), "df": float(c.df[i]),
              "adjusted": bool(c.adjusted[i]), "m_used": q.shape[0],
              "0.9": [float(c.interval[0][i]), float(c.interval[1][i])]} for i in range(q.shape[1])]
    row = {"status": "ok", "epsilon": 0.3, "combined": {"50": coefs}}
    if sample_coef is not None:
        row["sample_coef"] = list(sample_coef)
    return row, c


def test_own_data_rule_recovers_the_within_variance_and_scores_t_minus_u():
    d = len(ma.COEFS)
    rng = np.random.default_rng(5)
    m = 50
    q = rng.normal(0.0, 1.0, size=(m, d))             # B about 1
    u = np.full((m, d), 0.25)                         # Ū = 0.25: T - Ū about 0.77
    u[:, 0] = 2.0                                     # coefficient 0: T <= 0, the non-negative fix replaces it
    row, c = _row(q, u)
    z = stats.norm.ppf(0.95)
    plain = (c.interval[1] - c.interval[0]) / 2       # t quantile times sqrt(T)
    narrowed = z * np.sqrt(np.maximum(c.variance - c.within, 0.0))
    real = np.asarray(c.estimate) + (plain + narrowed) / 2   # inside the plain interval, outside T - Ū's
    real[1] = c.estimate[1]                                  # coefficient 1: at the estimate, inside both
    sc = amb.own_data_rule([row], 50, 0.9, real)
    assert bool(c.adjusted[0]) and not c.adjusted[1:].any()
    # Ū / T recovered from (T, df) is combine's own within / variance where T was not replaced
    for i, k in enumerate(ma.COEFS[1:], start=1):
        assert math.isclose(sc["within_share_median"][k], c.within[i] / c.variance[i], rel_tol=1e-9)
    assert math.isnan(sc["within_share_median"][ma.COEFS[0]])
    assert sc["no_interval"] == 1 and sc["intervals"] == d
    assert math.isclose(sc["coverage_mean"], 1 / (d - 1))   # of the d - 1 intervals, only coefficient 1's holds it
    assert sc["coverage"][ma.COEFS[1]] == 1.0 and all(sc["coverage"][k] == 0.0 for k in ma.COEFS[2:])
    # the plain rule's intervals (t quantile, variance T) hold every target: the rescoring narrowed them
    assert all(c.interval[0][i] <= real[i] <= c.interval[1][i] for i in range(1, d))


def test_own_data_rule_scores_each_resampled_sets_own_fit():
    d = len(ma.COEFS)
    rng = np.random.default_rng(6)
    q = rng.normal(0.0, 1.0, size=(50, d))
    row, c = _row(q, np.full((50, d), 0.25), sample_coef=np.asarray(q.mean(0)))  # the own fit at the estimate
    sc = amb.own_data_rule([row], 50, 0.9, np.full(d, 100.0))  # the real fit far away: not the target here
    assert sc["coverage_mean"] == 1.0 and sc["no_interval"] == 0
