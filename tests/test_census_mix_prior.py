"""The census tract mixes' scaled Dirichlet prior (families/census.py) against code no one here wrote: the engine's
conditional log-densities of a pair's share, the shape and a pair of log rates (inference/census_da.py, terms
free of the moved value left out) differ between two values exactly as the law's density does when it is
computed from its definition -- independent Gamma(a_c, rate b_c) amounts normalised to shares -- with scipy's
gamma density and quadrature over the amounts' total:

    f(pi) = int_0^inf prod_c Gamma(t pi_c; a_c, b_c) t^(C - 1) dt.

Deterministic (no random draws in the engine's functions; the inputs are fixed), so the same on every CPU up to
floating-point rounding, far below the tolerance."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpposterior.families.census import CensusPrior, draw_prior
from dpposterior.inference import census_da as cd
from test_census import geography, skeleton


def _log_density(pi, shape, rate) -> float:
    """log f(pi) of the scaled Dirichlet by its definition (scipy's gamma law, quadrature over the total t)."""
    C = len(pi)

    def log_integrand(t):
        return float(np.sum(stats.gamma.logpdf(t * pi, shape, scale=1.0 / rate)) + (C - 1) * math.log(t))

    # the integrand's peak, to scale it near 1 before integrating
    grid = np.exp(np.linspace(-8, 8, 801))
    logs = np.array([log_integrand(t) for t in grid])
    peak = grid[np.argmax(logs)]
    top = logs.max()
    # split at the peak: quad over [0, peak] and [peak, inf) converges on each side
    left, _ = integrate.quad(lambda t: math.exp(log_integrand(t) - top), 0.0, peak, limit=400, epsrel=1e-11)
    right, _ = integrate.quad(lambda t: math.exp(log_integrand(t) - top), peak, np.inf, limit=400, epsrel=1e-11)
    return top + math.log(left + right)


SHAPE = np.full(4, 1.7)  # the shape every cell shares
LOG_RATE = np.array([0.4, -0.9, 1.2, -0.7])  # sums to 0, as the engine keeps it
MIXES = np.array([[0.10, 0.45, 0.05, 0.40], [0.22, 0.30, 0.08, 0.40], [0.05, 0.60, 0.15, 0.20]])


def test_the_share_conditional_is_the_laws_density():
    """A pair's share u (pi_c1 = s u, pi_c2 = s (1 - u)) on the logit scale: the engine's log-density
    differences (no blocks: the prior's terms alone) equal log f + log u (1 - u) differences."""
    rate = np.exp(LOG_RATE)
    pi = MIXES[:1].copy()
    dsum = np.array([float(rate @ pi[0])])
    x = np.zeros((0, 4), dtype=np.int64)
    c1, c2 = 0, 3
    s = pi[0, c1] + pi[0, c2]
    zs = [-2.0, -0.5, 0.3, 1.7]
    engine, law = [], []
    for z in zs:
        u = 1.0 / (1.0 + math.exp(-z))
        engine.append(cd._share_logdens(z, x, 0, 0, c1, c2, 1.0, 0, pi, SHAPE, rate, dsum))
        moved = pi[0].copy()
        moved[c1], moved[c2] = s * u, s * (1.0 - u)
        law.append(_log_density(moved, SHAPE, rate) + math.log(u) + math.log1p(-u))
    np.testing.assert_allclose(np.diff(engine), np.diff(law), rtol=0, atol=1e-7)


def test_the_shape_and_rate_conditionals_are_the_laws_density():
    """Given three tract mixes: the log shape and a pair move of the log rates, the engine's log-density
    differences equal those of (the normal priors) + sum_t log f(pi_t)."""
    prior = CensusPrior()
    pvec = np.array([0, 0, 0, 0, 0, 0, 0, math.log(prior.mix_shape_median), prior.mix_shape_log_sd,
                     prior.mix_rate_log_sd])
    rate = np.exp(LOG_RATE)
    T = MIXES.shape[0]
    dsum = MIXES @ rate
    lsum = np.log(MIXES).sum(axis=0)
    ldsum = float(np.log(dsum).sum())
    engine, law = [], []
    for z in (-1.0, 0.2, 1.4):
        engine.append(cd._shape_logdens(z, T, SHAPE.size, rate, lsum, ldsum, pvec[7], pvec[8]))
        shape = np.full(SHAPE.size, math.exp(z))
        law.append(stats.norm.logpdf(z, pvec[7], pvec[8]) + sum(_log_density(p, shape, rate) for p in MIXES))
    np.testing.assert_allclose(np.diff(engine), np.diff(law), rtol=0, atol=1e-7)
    c1, c2 = 1, 2
    engine, law = [], []
    for d in (-0.8, 0.0, 0.9):
        engine.append(cd._rate_logdens(d, c1, c2, MIXES, SHAPE, rate, dsum, pvec[9]))
        lr = LOG_RATE.copy()
        lr[c1] += d
        lr[c2] -= d
        law.append(float(np.sum(stats.norm.logpdf(lr, 0.0, pvec[9])))
                   + sum(_log_density(p, SHAPE, np.exp(lr)) for p in MIXES))
    np.testing.assert_allclose(np.diff(engine), np.diff(law), rtol=0, atol=1e-7)


def test_prior_draws_have_the_laws_moments():
    """draw_prior's tract mixes, given their shapes and rates, against the law's moments by numpy's own gamma
    generator on another stream: E[log pi_c] agree within 5 Monte Carlo standard errors."""
    s = skeleton(geography(20, 10, 2, 1))
    theta = draw_prior(CensusPrior(), s, np.random.default_rng(3))
    mix, rate = theta["tract_mix"], theta["mix_rate"]
    shape = np.full(rate.size, theta["mix_shape"])
    assert mix.shape[0] == 200 and np.allclose(mix.sum(axis=1), 1.0)
    assert math.isclose(float(np.log(rate).sum()), 0.0, abs_tol=1e-9)
    g = np.random.default_rng(99).gamma(shape, size=(200_000, shape.size)) / rate
    ref = np.log(g / g.sum(axis=1, keepdims=True))
    got = np.log(np.maximum(mix, 1e-300))
    finite = np.all(np.isfinite(ref), axis=0) & np.all(mix > 0, axis=0)
    se = got[:, finite].std(axis=0) / math.sqrt(mix.shape[0])
    assert np.all(np.abs(got[:, finite].mean(axis=0) - ref[:, finite].mean(axis=0)) < 5 * se)


@pytest.mark.parametrize("bad", ["mix_shape_median", "mix_rate_log_sd"])
def test_the_new_settings_are_checked(bad):
    from dpposterior.errors import InputError
    from dpposterior.families.census import parse_prior

    with pytest.raises(InputError, match=f"prior.{bad}"):
        parse_prior({bad: -1.0})
    assert getattr(parse_prior({bad: 2.0}), bad) == 2.0
