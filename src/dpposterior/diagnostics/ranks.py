"""Ranks of simulation-based calibration (Cook et al. 2006; Talts et al. 2018) and their summary.

Shared by the family study (:mod:`.calibration`), the user-model study (:mod:`.model_calibration`)
and the amortised SBI study (:mod:`.sbi_calibration`).  Ranks are randomised between ties,
U = (#{draws < theta} + V (1 + #{draws == theta})) / (S + 1) with V ~ Uniform(0, 1), exactly
Uniform(0, 1) when theta and the S draws are exchangeable.
"""

from __future__ import annotations

import numpy as np

#: central interval probabilities whose coverage is reported
COVERAGE_LEVELS = (0.5, 0.9, 0.95)


def randomized_ranks(truth: np.ndarray, draws: np.ndarray, rng) -> np.ndarray:
    """U per trial and coordinate: truth (T, D), draws (T, S, D) -> (T, D) in (0, 1)."""
    below = (draws < truth[:, None, :]).sum(axis=1)
    ties = (draws == truth[:, None, :]).sum(axis=1)
    S = draws.shape[1]
    return (below + rng.random(below.shape) * (1 + ties)) / (S + 1)


def summarise_ranks(u: np.ndarray) -> dict:
    """KS against Uniform(0,1) (+ p-value) and central-interval coverage of ranks u (T,)."""
    from scipy import stats  # here: a calibration worker ranks but never summarises

    ks = stats.kstest(u, "uniform")
    coverage = {str(level): float(np.mean(np.abs(u - 0.5) <= level / 2)) for level in COVERAGE_LEVELS}
    return {"ks": float(ks.statistic), "ks_pvalue": float(ks.pvalue), "coverage": coverage}


def one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
