"""benchmarks/_logistic.py: Newton/IRLS logistic regression against scikit-learn and a finite-difference
Hessian, and its use with dpposterior.combine."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
from _logistic import fit_logistic, log_likelihood  # noqa: E402


def _data(seed=1, n=400):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    eta = -0.5 + X @ np.array([1.0, -0.7, 0.2])
    y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    return X, y


def _sklearn_unpenalised(fit_intercept):
    sklearn = pytest.importorskip("sklearn")
    from sklearn.linear_model import LogisticRegression

    major, minor = (int(part) for part in sklearn.__version__.split(".")[:2])
    # penalty=None is deprecated from 1.8 on in favour of C=inf (the same unpenalised fit)
    no_penalty = {"C": np.inf} if (major, minor) >= (1, 8) else {"penalty": None}
    return LogisticRegression(**no_penalty, fit_intercept=fit_intercept, tol=1e-12, max_iter=10_000)


@pytest.mark.parametrize("intercept", [True, False])
def test_matches_sklearn_unpenalised(intercept):
    X, y = _data()
    coef, cov = fit_logistic(X, y, intercept=intercept)
    model = _sklearn_unpenalised(intercept)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        model.fit(X, y)
    reference = np.r_[model.intercept_, model.coef_[0]] if intercept else model.coef_[0]
    np.testing.assert_allclose(coef, reference, atol=1e-6, rtol=0)
    assert cov.shape == (coef.size, coef.size)


def test_covariance_is_the_inverse_finite_difference_hessian():
    X, y = _data(seed=2, n=300)
    coef, cov = fit_logistic(X, y)
    design = np.column_stack([np.ones(len(y)), X])
    p, h = coef.size, 1e-4
    hessian = np.empty((p, p))
    for i in range(p):
        for j in range(p):
            ei, ej = np.eye(p)[i] * h, np.eye(p)[j] * h
            hessian[i, j] = (log_likelihood(coef + ei + ej, design, y) - log_likelihood(coef + ei - ej, design, y)
                             - log_likelihood(coef - ei + ej, design, y)
                             + log_likelihood(coef - ei - ej, design, y)) / (4 * h * h)
    np.testing.assert_allclose(cov, np.linalg.inv(-hessian), rtol=1e-5)
    # and the score vanishes at the estimate
    score = [(log_likelihood(coef + e, design, y) - log_likelihood(coef - e, design, y)) / (2 * h)
             for e in np.eye(p) * h]
    np.testing.assert_allclose(score, 0, atol=1e-6)


def test_refuses_separable_data_and_bad_labels():
    X = np.array([[-2.0], [-1.0], [1.0], [2.0]])
    with pytest.raises(ValueError, match="separable"):
        fit_logistic(X, np.array([0.0, 0.0, 1.0, 1.0]))
    with pytest.raises(ValueError, match="0 or 1"):
        fit_logistic(X, np.array([0.0, 2.0, 1.0, 1.0]))


def test_feeds_combine():
    from dpposterior.combine import combine

    fits = [fit_logistic(*_data(seed=s, n=200)) for s in range(5)]
    coefs = np.array([c for c, _ in fits])
    covs = np.array([v for _, v in fits])
    combined = combine(coefs, covs, rule="imputation", names=["intercept", "x1", "x2", "x3"])
    assert combined.summary().shape == (4, 9)
