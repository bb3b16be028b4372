"""Mechanisms: densities integrate to one, tau(u, s) has the mechanism's law, privacy costs,
and the analytic Gaussian calibration (Balle & Wang 2018, Algorithm 1).

KS tests use fixed seeds and 20,000 draws; a correct transform passes with p-value
~ Uniform(0, 1), so the threshold p > 1e-3 fails a correct implementation with
probability 1e-3 per test (and never with these seeds, which are fixed), while a wrong
law (a shifted or rescaled distribution) gives p ~ 0 at this sample size.
"""

import json
import math

import numpy as np
import pytest
from scipy import integrate, stats

from dpposterior.mechanisms import BinomialTrajectory, Gaussian, Laplace, analytic_sigma, classical_sigma
from dpposterior.mechanisms.gaussian import _delta_of_sigma

N_KS = 20_000


@pytest.mark.parametrize("mech, s", [(Laplace(0.5, 2.0), 1.3), (Laplace(3.0, 0.01), -2.0),
                                     (Gaussian(0.7), 0.4), (Gaussian.calibrated(1.0, 1e-5, 1.0), 10.0)])
def test_continuous_density_integrates_to_one(mech, s):
    scale = getattr(mech, "scale", None) or mech.sigma
    total, err = integrate.quad(lambda y: math.exp(mech.logpdf(y, s)), s - 60 * scale, s + 60 * scale,
                                points=[s], limit=200)
    assert total == pytest.approx(1.0, abs=1e-8)


@pytest.mark.parametrize("mech, s, ref", [
    (Laplace(0.5, 2.0), 1.3, stats.laplace(loc=1.3, scale=4.0)),
    (Gaussian(0.7), 0.4, stats.norm(loc=0.4, scale=0.7)),
])
def test_transform_and_sample_have_the_law(mech, s, ref):
    rng = np.random.default_rng(11)
    u = rng.random(N_KS)
    assert stats.kstest(mech.transform(u, s), ref.cdf).pvalue > 1e-3
    assert stats.kstest(mech.sample(np.full(N_KS, s), rng), ref.cdf).pvalue > 1e-3
    # a wrong law is detected at this sample size (the test can fail)
    assert stats.kstest(mech.transform(u, s) + 0.1 * ref.std(), ref.cdf).pvalue < 1e-3


def test_transform_is_monotone_inverse_cdf():
    mech = Laplace(1.0, 1.0)
    u = np.linspace(0.001, 0.999, 999)
    y = mech.transform(u, 0.0)
    assert np.all(np.diff(y) > 0)
    np.testing.assert_allclose(stats.laplace.cdf(y, scale=1.0), u, rtol=1e-12)


@pytest.mark.parametrize("eps, delta, sens", [(0.1, 1e-5, 1.0), (0.5, 1e-6, 2.0), (1.0, 1e-3, 0.3),
                                               (0.9, 1e-8, 5.0), (4.0, 1e-5, 1.0), (20.0, 1e-10, 1.0)])
def test_analytic_sigma_solves_delta_equation(eps, delta, sens):
    sigma = analytic_sigma(eps, delta, sens)
    assert abs(_delta_of_sigma(sigma, eps, sens) - delta) <= 1e-9
    # smallest sigma: a hair smaller breaks the guarantee (delta(sigma) decreases)
    assert _delta_of_sigma(sigma * (1 - 1e-6), eps, sens) > delta
    if eps < 1:  # the classical calibration is proved for eps < 1 and is never tighter
        assert sigma < classical_sigma(eps, delta, sens)


def test_gaussian_privacy_cost_and_errors():
    mech = Gaussian.calibrated(0.5, 1e-6, 1.0, "classical")
    assert mech.privacy_cost() == (0.5, 1e-6)
    assert mech.sigma == pytest.approx(math.sqrt(2 * math.log(1.25e6)) / 0.5)
    from dpposterior.errors import InputError
    with pytest.raises(InputError, match="delta"):
        analytic_sigma(1.0, 1.5, 1.0)
    with pytest.raises(InputError, match="epsilon"):
        Laplace(0.0, 1.0)
    assert Laplace(0.3, 2.0).privacy_cost() == (0.3, 0.0)


def test_binomial_trajectory_mass_transform_and_cost():
    mech = BinomialTrajectory(population=1000, trials=50, points=4, epsilon=2.0)
    assert mech.m == pytest.approx(50 * 4 / 2.0)
    assert mech.privacy_cost() == (pytest.approx(2.0), 0.0)
    s = np.array([10.0, 400.0])
    grid = np.arange(51) / 50
    for si in s:
        assert np.exp(mech.logpdf(grid, si)).sum() == pytest.approx(1.0, abs=1e-12)
    # tau(u, s) has the binomial law: chi-square goodness of fit on 20,000 draws
    rng = np.random.default_rng(5)
    u = rng.random(N_KS)
    y = mech.transform(u, 400.0)
    counts = np.bincount(np.rint(y * 50).astype(int), minlength=51)
    p = np.exp(mech.logpdf(grid, 400.0))
    keep = p * N_KS >= 5
    obs = np.append(counts[keep], counts[~keep].sum())
    exp = np.append(p[keep], p[~keep].sum()) * N_KS
    assert stats.chisquare(obs, exp).pvalue > 1e-3
    # sample() matches too, and a wrong success probability is detected
    ys = mech.sample(np.full(N_KS, 400.0), rng)
    cs = np.bincount(np.rint(ys * 50).astype(int), minlength=51)
    assert stats.chisquare(np.append(cs[keep], cs[~keep].sum()), exp).pvalue > 1e-3
    wrong = BinomialTrajectory(1000, 50, 4, m=1.0).transform(u, 400.0)
    cw = np.bincount(np.rint(wrong * 50).astype(int), minlength=51)
    assert stats.chisquare(np.append(cw[keep], cw[~keep].sum()), exp).pvalue < 1e-3


# ----------------------------------------------------------------------------- the registry
def _simulated_release_dict(family_name):
    from dpposterior.families import get_family

    family = get_family(family_name)
    sim = family.simulate(family.parse_prior(None, None), 60, 1.0, np.random.default_rng(3))
    release = sim.release
    return release if isinstance(release, dict) else release.to_dict()


def _records(node):
    """Every statistic record (a dict with a ``mechanism`` key) in a release dict."""
    if isinstance(node, dict):
        if "mechanism" in node and "epsilon" in node:
            yield node
        for value in node.values():
            yield from _records(value)
    elif isinstance(node, list):
        for value in node:
            yield from _records(value)


@pytest.mark.parametrize("family_name", ["gaussian", "binomial", "poisson", "naive-bayes", "linear-regression",
                                         "linreg-ju", "sir", "loglinear"])
def test_family_mechanisms_are_registered_and_others_refused(family_name):
    from dpposterior.errors import InputError
    from dpposterior.families import get_family
    from dpposterior.mechanisms import MECHANISMS
    from dpposterior.release import load_release

    family = get_family(family_name)
    assert family.mechanisms and set(family.mechanisms) <= set(MECHANISMS)
    data = _simulated_release_dict(family_name)
    load_release(data)  # as simulated, it loads
    assert list(_records(data)), "no statistic record found"
    for other in sorted(set(MECHANISMS) - set(family.mechanisms)):
        changed = json.loads(json.dumps(data))
        for record in _records(changed):
            record["mechanism"] = other
        with pytest.raises(InputError, match="mechanism"):
            load_release(changed)


def test_unknown_mechanism_is_one_line_error_listing_the_registry():
    from dpposterior.errors import InputError
    from dpposterior.mechanisms import from_record, get_mechanism

    with pytest.raises(InputError, match=r"mechanism: unknown mechanism 'exponential' \(one of: laplace, gaussian"):
        get_mechanism("exponential")

    class Record:
        mechanism, epsilon, sensitivity, sigma, delta = "laplace", 2.0, 1.0, None, None

    assert from_record(Record()).noise_scale == 0.5
