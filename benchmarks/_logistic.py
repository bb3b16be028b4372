"""Unpenalised logistic regression by Newton's method (IRLS), for analyses of synthetic data sets.

``fit_logistic(X, y)`` returns the maximum-likelihood coefficients and their inverse-Fisher covariance,
``(X' W X)^-1`` with ``W = diag(p (1 - p))`` at the estimate -- the ``(q_i, u_i)`` that
``dpposterior.combine.combine`` takes from each of m synthetic data sets (``np.diag(cov)`` or ``cov``).
Checked against scikit-learn's ``LogisticRegression(penalty=None)`` and a finite-difference Hessian
(tests/test_bench_logistic.py).
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, log_expit


def log_likelihood(beta, X, y) -> float:
    """The Bernoulli log-likelihood of ``beta`` for design ``X`` (with its intercept column, if any)."""
    eta = X @ beta
    return float(np.sum(y * log_expit(eta) + (1 - y) * log_expit(-eta)))


def fit_logistic(X, y, *, intercept: bool = True, tol: float = 1e-10, max_iter: int = 100):
    """Maximum-likelihood logistic regression of binary ``y`` (n,) on ``X`` (n, p).

    ``intercept=True`` prepends a column of ones: ``coef[0]`` is the intercept, ``coef[1:]`` the slopes.
    Newton steps, halved while the log-likelihood would fall, until the largest step is below ``tol``
    (relative to ``1 + |coef|``).  Returns ``(coef, cov)`` with ``cov = (X' W X)^-1`` at ``coef``.
    Raises ``ValueError`` when the data are separable or the columns collinear (no finite estimate) or
    Newton does not converge.
    """
    X = np.asarray(X, dtype=float)
    y = np.asarray(y, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X must be (n, p) and y (n,), got {X.shape} and {y.shape}")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("y must be 0 or 1")
    if intercept:
        X = np.column_stack([np.ones(X.shape[0]), X])
    beta = np.zeros(X.shape[1])
    current = log_likelihood(beta, X, y)
    for _ in range(max_iter):
        p = expit(X @ beta)
        weights = p * (1 - p)
        info = X.T @ (weights[:, None] * X)
        try:
            step = np.linalg.solve(info, X.T @ (y - p))
        except np.linalg.LinAlgError:
            raise ValueError("singular information: the data look separable or the columns collinear "
                             "(no finite MLE)") from None
        scale = 1.0
        while True:
            proposal = beta + scale * step
            value = log_likelihood(proposal, X, y)
            if value >= current - 1e-12 * abs(current) or scale < 1e-10:
                break
            scale /= 2
        beta, current = proposal, value
        if np.max(np.abs(scale * step) / (1 + np.abs(beta))) < tol:
            break
        if np.max(np.abs(beta)) > 1e3:
            raise ValueError("the data look separable: the coefficients diverge (no finite MLE)")
    else:
        raise ValueError(f"Newton did not converge in {max_iter} iterations")
    p = expit(X @ beta)
    info = X.T @ ((p * (1 - p))[:, None] * X)
    cov = np.linalg.inv(info)
    return beta, (cov + cov.T) / 2
