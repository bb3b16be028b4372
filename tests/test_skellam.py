"""The Skellam mechanism (Agarwal, Kairouz & Liu 2021): its law against scipy and against the convolution of two
Poisson masses, its tail window, both samplers (the seeded one and the exact CSPRNG one, whose Poisson(1) step's
output law is computed exactly), the Renyi bound against the exact Renyi divergence, the epsilon from the mass
function against an independent hockey-stick computation, and its releases end to end."""

from __future__ import annotations

import itertools
import math
import random
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats
from scipy.optimize import brentq
from scipy.special import gammaln, logsumexp

import dpposterior as dp
from dpposterior.errors import InputError
from dpposterior.mechanisms import MECHANISMS
from dpposterior.mechanisms.accounting import zcdp_epsilon
from dpposterior.mechanisms.skellam import (MAX_PUBLICATION_DRAWS, Skellam, log_mass, poisson_exact, poisson_one,
                                            rdp_bound, zcdp_rho)

MUS = [1e-3, 0.05, 0.7, 2.5, 40.0, 1e3, 1e5]


def series_log_mass(k, mu):
    """log P(k) = -2 mu + log sum_j mu^(2j+|k|) / (j! (j+|k|)!), summed in log space (independent of ive)."""
    k = np.abs(np.atleast_1d(np.asarray(k, float)))
    j = np.arange(int(mu + 40 * math.sqrt(mu) + 200), dtype=float)[:, None]
    return logsumexp((2 * j + k) * math.log(mu) - gammaln(j + 1) - gammaln(j + k + 1), axis=0) - 2 * mu


def chi_square_pvalue(x, k, pmf):
    """Chi-square of integer draws ``x`` against ``pmf`` on ``k`` (cells expecting >= 5, tails pooled)."""
    x = np.asarray(x)
    keep = pmf * x.size >= 5
    lo, hi = k[keep].min(), k[keep].max()
    obs = np.array([np.sum(x < lo)] + [np.sum(x == v) for v in k[keep]] + [np.sum(x > hi)])
    exp = np.concatenate([[pmf[k < lo].sum()], pmf[keep], [pmf[k > hi].sum()]]) * x.size
    ok = exp > 0
    return stats.chisquare(obs[ok], exp[ok] * obs[ok].sum() / exp[ok].sum()).pvalue


# --------------------------------------------------------------------------- the law
@pytest.mark.parametrize("mu", MUS)
def test_mass_and_cdf_match_scipy_skellam(mu):
    mech = Skellam(mu)
    w = mech.tail_window(1e-15)
    k = np.arange(-w - 3, w + 4, dtype=float)
    pmf = np.exp(mech.logpmf(k))
    ref = stats.skellam.pmf(k, mu, mu)
    assert np.allclose(pmf, ref, rtol=1e-9, atol=1e-300)
    assert pmf.sum() == pytest.approx(1.0, abs=1e-13)
    assert mech.noise_variance == 2 * mu == pytest.approx((k * k * pmf).sum(), rel=1e-9)
    assert np.allclose(mech.cdf(k), stats.skellam.cdf(k, mu, mu), rtol=1e-9, atol=1e-13)
    assert mech.noise_scale == pytest.approx(math.sqrt(2 * mu), rel=1e-15)


@pytest.mark.parametrize("mu", [0.05, 2.5, 40.0])
def test_mass_is_the_convolution_of_two_poisson_masses(mu):
    n = int(mu + 40 * math.sqrt(mu) + 60)
    pois = stats.poisson.pmf(np.arange(n), mu)
    conv = np.convolve(pois, pois[::-1])  # P(P1 - P2 = k), k = -(n-1)..n-1
    k = np.arange(-(n - 1), n, dtype=float)
    big = (conv > 1e-280) & (np.abs(k) <= n // 2)  # the convolution of the truncated masses is whole there
    assert np.allclose(np.exp(Skellam(mu).logpmf(k[big])), conv[big], rtol=1e-12, atol=0)


@pytest.mark.parametrize("mu", [1e-6, 1e-3, 0.7, 40.0, 1e3, 1e7, 1e8])
def test_log_mass_is_finite_and_log_concave_far_beyond_the_window(mu):
    mech = Skellam(mu)
    w = mech.tail_window(1e-300)
    k = np.arange(0, 4 * w + 2000, dtype=float)
    lp = mech.logpmf(k)
    assert np.isfinite(lp).all()
    assert np.all(np.diff(lp) < 0)  # unimodal, strictly decreasing in |k|
    assert np.all(np.diff(lp, 2) <= 1e-9 * np.abs(lp[1:-1]) + 1e-12)  # log-concave
    assert np.array_equal(mech.logpmf(-k), lp)
    if mu <= 1e3:  # beyond ive's underflow the asymptotic branch agrees with the series too
        far = k[:: max(1, k.size // 400)]
        assert np.allclose(mech.logpmf(far), series_log_mass(far, mu), rtol=1e-10, atol=1e-10)
    assert mech.logpmf(2.5) == -np.inf


@pytest.mark.parametrize("mu", [1e-3, 0.7, 2.5, 40.0, 1e3, 1e5])
@pytest.mark.parametrize("tail", [1e-3, 1e-12, 1e-30])
def test_tail_window_is_the_smallest_that_holds(mu, tail):
    mech = Skellam(mu)
    w = mech.tail_window(tail)
    k = np.arange(0, 3 * w + 200, dtype=float)
    pmf = np.exp(mech.logpmf(k))

    def outside(W):  # P(|k| > W), summed from the far end
        return 2 * pmf[int(W) + 1:][::-1].sum()

    assert outside(w) <= tail
    assert w == 0 or outside(w - 1) > tail


def test_tail_window_at_large_mu_is_quick_and_sized_like_the_normal():
    mech = Skellam(1e7)
    w = mech.tail_window(1e-12)
    z = stats.norm.isf(0.5e-12)
    assert abs(w / (z * math.sqrt(2e7)) - 1) < 0.02


def test_mu_and_sensitivity_are_checked_in_one_line():
    for kwargs, field in [({"mu": 0.0}, "mu"), ({"mu": float("nan")}, "mu"), ({"mu": 1e9}, "mu"),
                          ({"mu": "3"}, "mu"), ({"mu": 3.0, "sensitivity": 0.5}, "sensitivity")]:
        with pytest.raises(InputError) as exc:
            Skellam(**kwargs)
        assert exc.value.field == field and "\n" not in str(exc.value)


# --------------------------------------------------------------------------- samplers
def test_seeded_draw_has_the_skellam_law():
    mech = Skellam(3.7)
    k = np.arange(-40, 41, dtype=float)
    pmf = np.exp(mech.logpmf(k))
    draws = mech.draw((200_000,), np.random.default_rng(3))
    assert draws.dtype.kind == "i"
    assert chi_square_pvalue(draws, k, pmf) > 1e-3
    again = mech.draw((5,), np.random.default_rng(3))
    assert np.array_equal(again, mech.draw((5,), np.random.default_rng(3)))


def test_poisson_one_output_law_is_exactly_poisson_one():
    """Dynamic programming over the sampler's states (g, k) at step n with exact rationals: after N steps the
    law of the returned values differs from e^-1 / k! by no more than the mass still running, which vanishes."""
    import mpmath

    mpmath.mp.dps = 60
    states = {(0, 1): Fraction(1)}
    out: dict[int, Fraction] = {}
    for n in range(1, 31):
        new: dict = {}
        q = Fraction(1, n + 1)
        for (g, k), p in states.items():
            new[(g, k + 1)] = new.get((g, k + 1), 0) + p * q  # i = n + 1: a new fixed point
            if n > g:
                new[(n + 1, k - 1)] = new.get((n + 1, k - 1), 0) + p * q * (n - g)  # g < i <= n
            if g:
                out[k] = out.get(k, 0) + p * q * g  # i <= g: return k
        states = new
    running = sum(states.values())
    assert running < Fraction(1, 10 ** 24)
    assert sum(out.values()) + running == 1
    for k in range(0, 40):
        exact = mpmath.e ** -1 / mpmath.factorial(k)
        got = out.get(k, Fraction(0))
        assert abs(mpmath.mpf(got.numerator) / got.denominator - exact) <= mpmath.mpf(running.numerator) / running.denominator


def test_poisson_one_and_poisson_exact_draws_pass_chi_square():
    rng = random.Random(11)
    k = np.arange(0, 30, dtype=float)
    ones = np.array([poisson_one(rng.randrange) for _ in range(200_000)])
    assert chi_square_pvalue(ones, k, stats.poisson.pmf(k, 1.0)) > 1e-3
    mu = Fraction(2.3)  # the float's exact value: floor 2 plus a thinned Poisson(1)
    assert mu != Fraction(23, 10)
    draws = np.array([poisson_exact(mu, rng.randrange) for _ in range(200_000)])
    assert chi_square_pvalue(draws, k, stats.poisson.pmf(k, float(mu))) > 1e-3
    assert poisson_exact(Fraction(0), rng.randrange) == 0


def test_publication_sampler_draws_skellam_from_the_csprng():
    """opendp_noise: exact Skellam noise from :mod:`secrets` (not reproducible: a loose floor on the p-value)."""
    mech = Skellam(3.0)
    values = np.full(40_000, 7.0)
    out = Skellam.opendp_noise(values, mech.noise_scale)
    noise = (out - 7.0).astype(int)
    assert np.array_equal(out, np.round(out))
    k = np.arange(-40, 41, dtype=float)
    assert chi_square_pvalue(noise, k, np.exp(mech.logpmf(k))) > 1e-6


def test_publication_sampler_refuses_in_one_line_before_drawing():
    mech = Skellam(MAX_PUBLICATION_DRAWS / 2)  # one value needs 2 ceil(mu) Poisson(1) draws
    with pytest.raises(InputError) as exc:
        Skellam.opendp_noise(np.zeros(2), mech.noise_scale)
    assert exc.value.field == "mu" and "\n" not in str(exc.value)
    with pytest.raises(ValueError, match="^values: "):
        Skellam.opendp_noise(np.array([1.5]), 1.0)


@pytest.mark.parametrize("mu", [1e-6, 0.1, 0.7, 2.5, 3.0, 1e3, 123456.789, 1e8])
def test_a_draw_through_the_noise_scale_never_has_less_noise(mu):
    back = Skellam._from_scale(Skellam(mu).noise_scale).mu
    assert mu <= back <= mu * (1 + 1e-15)


def test_registered_and_accounted_in_rho():
    assert MECHANISMS["skellam"] is Skellam
    assert Skellam.accounts_rho and Skellam.integer_valued and Skellam.additive_symmetric
    assert Skellam.sensitivity_norm == "L2"


# --------------------------------------------------------------------------- privacy
def renyi_divergence(mu, shift, alpha):
    """D_alpha(P || P shifted by ``shift``), summed from the mass function out to where the terms vanish."""
    w = 3 * Skellam(mu).tail_window(1e-300) + 60 * shift + int(10 * alpha) + 100
    k = np.arange(-w, w + 1, dtype=float)
    return float(logsumexp(alpha * log_mass(k, mu) + (1 - alpha) * log_mass(k - shift, mu))) / (alpha - 1)


@pytest.mark.parametrize("mu", [0.05, 0.3, 1.0, 3.0, 10.0, 100.0, 1000.0])
def test_renyi_bound_holds_against_the_exact_divergence(mu):
    for shift in (1, 2, 3, 5):
        rho = zcdp_rho(mu, shift, shift * shift)
        for alpha in (1.01, 1.5, 2.0, 3.0, 5.0, 10.0, 32.0, 100.0, 1000.0):
            exact = renyi_divergence(mu, shift, alpha)
            assert 0 < exact <= rdp_bound(alpha, mu, shift, shift * shift)
            assert exact <= alpha * rho
    # a count vector's unit moves (1, 1): the divergence of independent coordinates adds
    for alpha in (2.0, 10.0):
        assert 2 * renyi_divergence(mu, 1, alpha) <= rdp_bound(alpha, mu, 2, 2)


def test_the_bound_is_tight_for_large_mu():
    exact = renyi_divergence(1000.0, 1, 2.0)
    assert rdp_bound(2.0, 1000.0, 1, 1) / exact < 1.002


def hockey_stick(mu, shift, eps):
    """delta(eps) = sum_k max(0, P(k) - e^eps P(k - shift))."""
    w = Skellam(mu).tail_window(1e-25) + shift + 10
    k = np.arange(-w, w + 1, dtype=float)
    d = np.exp(log_mass(k, mu)) - math.exp(eps) * np.exp(log_mass(k - shift, mu))
    return float(d[d > 0].sum())


@pytest.mark.parametrize("mu, sens, delta", [(0.5, 1, 1e-6), (3.0, 1, 1e-6), (10.0, 1, 1e-5), (50.0, 2, 1e-6),
                                             (400.0, 1, 1e-8), (1e4, 1, 1e-6)])
def test_epsilon_from_the_mass_function_against_the_hockey_stick(mu, sens, delta):
    cost = Skellam(mu, sens).privacy_accounting(delta)
    hi = 1.0
    while hockey_stick(mu, sens, hi) > delta:
        hi *= 2
    exact = brentq(lambda e: hockey_stick(mu, sens, e) - delta, 0.0, hi, xtol=1e-14, rtol=1e-13)
    assert hockey_stick(mu, sens, exact) == pytest.approx(delta, rel=1e-6)
    assert exact <= cost.epsilon <= exact * 1.01  # dp-accounting's pessimistic value: never below the tight one
    assert hockey_stick(mu, sens, cost.epsilon) <= delta
    assert cost.accounting == "zcdp" and cost.delta == delta
    assert cost.rho == zcdp_rho(mu, sens, sens * sens)
    assert cost.epsilon < zcdp_epsilon(cost.rho, delta)


def test_vector_epsilon_against_the_two_coordinate_hockey_stick():
    """A count vector's worst pair (L2 sensitivity sqrt 2): two coordinates moved by one; delta(eps) of the
    product law summed over the grid."""
    mu, delta = 3.0, 1e-6
    cost = Skellam(mu, math.sqrt(2)).privacy_accounting(delta, dim=2)
    assert len(cost.losses) == 2 and cost.rho == zcdp_rho(mu, 2, 2) == Skellam(mu, math.sqrt(2)).rho
    w = Skellam(mu).tail_window(1e-22) + 2
    k = np.arange(-w, w + 1, dtype=float)
    p, q = np.exp(log_mass(k, mu)), np.exp(log_mass(k - 1, mu))
    pp, qq = np.outer(p, p), np.outer(q, q)

    def hs(eps):
        d = pp - math.exp(eps) * qq
        return float(d[d > 0].sum())

    exact = brentq(lambda e: hs(e) - delta, 0.0, 20.0, xtol=1e-14, rtol=1e-13)
    assert exact <= cost.epsilon <= exact * 1.01
    assert cost.epsilon < zcdp_epsilon(cost.rho, delta)


@pytest.mark.parametrize("sens", [1.0, math.sqrt(2), 3.0])
@pytest.mark.parametrize("rho", [1e-7, 1e-4, 0.01, 0.5, 1.5, 2.0, 10.0, 1e3])
def test_from_rho_gives_the_smallest_mu_meeting_the_bound(rho, sens):
    mech = Skellam.from_rho(rho, sens)
    m = int(math.floor(sens * sens + 1e-9))
    assert mech.rho == zcdp_rho(mech.mu, m, m) <= rho
    assert mech.rho == pytest.approx(rho, rel=1e-12)
    assert zcdp_rho(math.nextafter(mech.mu, 0), m, m) > rho or zcdp_rho(math.nextafter(mech.mu, 0), m, m) == rho
    scale, fields = Skellam.noise_for_budget(sens, rho=rho)
    assert scale == mech.noise_scale and fields == {"mu": mech.mu, "rho": rho}
    Skellam(fields["mu"], sens, rho=fields["rho"])  # the record it writes is accepted


def test_from_rho_refuses_a_budget_out_of_reach_in_one_line():
    with pytest.raises(InputError) as exc:
        Skellam.from_rho(1e-12)
    assert exc.value.field == "rho" and "\n" not in str(exc.value)
    with pytest.raises(InputError, match="^rho: "):
        Skellam.noise_for_budget(1.0, epsilon=1.0)


def test_stated_rho_must_agree_with_the_bound():
    mech = Skellam(2.5, 1.0)
    assert mech.rho == 1 / 10 + min(8 / 100, 3 / 10)
    Skellam(2.5, 1.0, rho=mech.rho * (1 + 1e-12))
    with pytest.raises(InputError) as exc:
        Skellam(2.5, 1.0, rho=0.1)
    assert exc.value.field == "rho" and "\n" not in str(exc.value)


# --------------------------------------------------------------------------- releases
BINOMIAL = {"format": "dpposterior-release/1", "family": "binomial", "n": 30,
            "statistics": {"successes": {"value": 11, "mechanism": "skellam", "mu": 2.5}}}
MULTINOMIAL = {"format": "dpposterior-release/1", "family": "multinomial", "n": 24,
               "statistics": {"counts": {"value": [5, 13, 7], "mechanism": "skellam", "mu": 4.0}}}


def test_releases_load_and_report_rho_and_epsilon():
    r = dp.load_release(BINOMIAL)
    cost = r.privacy()
    assert cost.rho == pytest.approx(Skellam(2.5).rho, rel=1e-15) and cost.accounting == "zcdp"
    assert cost.epsilon == pytest.approx(Skellam(2.5).privacy_accounting(cost.delta).epsilon, rel=1e-12)
    m = dp.load_release(MULTINOMIAL)
    assert m.statistics.counts.sensitivity == pytest.approx(math.sqrt(2))
    cost = m.privacy()
    assert cost.rho == pytest.approx(zcdp_rho(4.0, 2, 2), rel=1e-15)
    assert cost.epsilon < zcdp_epsilon(cost.rho, cost.delta)
    assert "rho" in cost.describe()


@pytest.mark.parametrize("change, field", [
    ({"mu": -1}, "mu"), ({"mu": None}, "mu"), ({"value": 11.5}, ""), ({"sigma": 1.0}, "sigma"),
    ({"rho": 0.1, "sensitivity": 1}, "rho"), ({"epsilon": 1.0}, "epsilon")])
def test_bad_records_are_refused_in_one_line(change, field):
    rec = {**BINOMIAL["statistics"]["successes"], **change}
    rec = {k: v for k, v in rec.items() if v is not None}
    with pytest.raises(InputError) as exc:
        dp.load_release({**BINOMIAL, "statistics": {"successes": rec}})
    assert "\n" not in str(exc.value)
    assert exc.value.field.startswith("release.statistics.successes")
    assert exc.value.field.endswith(field)


def skellam_logmass(k, mu):
    return stats.skellam.logpmf(np.asarray(k, float), mu, mu)


def test_binomial_posterior_matches_enumeration():
    a, b, n, y, mu = 2.0, 3.0, 30, 11, 2.5
    post = dp.infer(BINOMIAL, prior={"kind": "beta", "alpha": a, "beta": b}, seed=1)
    assert post.method == "exact"
    s = np.arange(n + 1)
    logw = stats.betabinom.logpmf(s, n, a, b) + skellam_logmass(y - s, mu)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = float((w * (a + s) / (a + b + n)).sum())
    x = post.draws("p").ravel()
    assert abs(x.mean() - mean) < 4.5 * x.std() / math.sqrt(x.size)


def test_multinomial_posterior_matches_enumeration():
    alpha, n, mu = np.array([1.0, 2.0, 1.5]), 24, 4.0
    y = np.array(MULTINOMIAL["statistics"]["counts"]["value"], float)
    post = dp.infer(MULTINOMIAL, prior={"kind": "dirichlet", "alpha": list(alpha)}, seed=2)
    assert post.method == "exact"
    tables = np.array([c + (n - sum(c),) for c in itertools.product(range(n + 1), repeat=2) if sum(c) <= n], float)
    A = alpha.sum()
    log_dm = (gammaln(n + 1) + gammaln(A) - gammaln(n + A)
              + (gammaln(tables + alpha) - gammaln(tables + 1) - gammaln(alpha)).sum(1))
    logw = log_dm + skellam_logmass(y[None, :] - tables, mu).sum(1)
    w = np.exp(logw - logw.max())
    w /= w.sum()
    mean = (w[:, None] * (alpha + tables) / (A + n)).sum(0)
    x = post.draws("p").reshape(-1, 3)
    assert np.all(np.abs(x.mean(0) - mean) < 4.5 * x.std(0) / math.sqrt(x.shape[0]))


def test_curator_releases_through_skellam_at_a_rho():
    """--mechanism skellam --rho: mu from from_rho at the family's sensitivity; the release reports that rho."""
    import pandas as pd

    frame = pd.DataFrame({"x": [1, 0, 1, 1, 0, 0, 1, 0, 1, 1], "c": list("abbcabbcab")})
    rel = dp.release_from_csv(frame, "binomial", column="x", mechanism="skellam", rho=0.5, seed=4)
    rec = rel.statistics.successes
    assert rec.model_extra["mu"] == Skellam.from_rho(0.5).mu and rec.rho == 0.5
    assert rel.privacy().rho == pytest.approx(0.5, rel=1e-12)
    rel = dp.release_from_csv(frame, "multinomial", column="c", mechanism="skellam", rho=0.5, seed=4)
    assert rel.statistics.counts.model_extra["mu"] == Skellam.from_rho(0.5, math.sqrt(2)).mu == 2.0
    assert rel.privacy().rho == pytest.approx(0.5, rel=1e-12)


def test_curator_meets_a_target_epsilon_from_the_mass_function(tmp_path):
    """--target-epsilon: the largest rho (least noise) whose release's epsilon, from the mass function, meets it."""
    from dpposterior.cli import main

    data = tmp_path / "d.csv"
    data.write_text("x\n" + "\n".join("1" if i % 3 else "0" for i in range(40)) + "\n")
    out = tmp_path / "r.json"
    assert main(["release", str(data), "--family", "binomial", "--column", "x", "--mechanism", "skellam",
                 "--target-epsilon", "1.0", "--seed", "2", "--out", str(out)]) == 0
    rel = dp.load_release(out)
    eps = rel.privacy().epsilon
    assert eps <= 1.0 and eps > 0.99  # met, and not by much more noise than it needs
    assert rel.accounting["target"]["epsilon"] == 1.0


@pytest.mark.parametrize("family", ["binomial", "multinomial", "poisson", "naive-bayes"])
def test_audit_passes_for_skellam_curators(family):
    from dpposterior.privacy import audit

    results = audit(family, draws=1000, samplers=("numpy",), restarts=2, variants=[f"{family} skellam"])
    assert len(results) == 1 and results[0].ok, [r.to_dict() for r in results]


def test_audit_catches_a_skellam_curator_that_draws_less_noise_than_it_records():
    """A curator that draws at mu / 4 but records mu: the audit's empirical test rejects the claim."""
    import dataclasses

    from dpposterior.families import get_family
    from dpposterior.privacy import audit

    honest = get_family("binomial").curate

    def cheat(frame, options):
        if options.mechanism != "skellam":
            return honest(frame, options)
        out = honest(frame, dataclasses.replace(options, rho=4 * options.rho))  # mu / 4: a quarter of the noise
        rec = out["statistics"]["successes"]
        rec["mu"], rec["rho"] = Skellam.from_rho(options.rho).mu, options.rho
        return out

    ok = audit("binomial", draws=4000, samplers=("numpy",), variants=["binomial skellam"])
    bad = audit("binomial", draws=4000, samplers=("numpy",), variants=["binomial skellam"], curate=cheat)
    assert ok[0].ok
    assert not bad[0].ok and not bad[0].samplers[0].ok


@pytest.mark.parametrize("family, trials, prior", [("binomial", 200, "kind=beta,alpha=2,beta=3"),
                                                   ("multinomial", 100, "kind=dirichlet,alpha=[1,1,1]")])
def test_calibrate_skellam_exact_passes_and_naive_fails(family, trials, prior, tmp_path, capsys):
    """Simulation-based calibration under Skellam noise (rho = 0.02 at n = 30: mu = 12.5 for a count), through
    the CLI: exact (what auto picks) passes in every coordinate, naive (noise ignored) fails at the same settings
    (the check of tests/test_calibrate_mechanisms.py: KS p-value > 1e-3, 90% coverage within 4 standard errors)."""
    import json

    from dpposterior.cli import main
    from test_calibrate_mechanisms import _calibrated, _failures

    out = tmp_path / "sbc.json"
    code = main(["calibrate", "--family", family, "--n", "30", "--mechanism", "skellam", "--rho", "0.02",
                 "--methods", "auto,naive", "--prior", prior, "--trials", str(trials), "--draws", "99", "--seed", "3",
                 "--scheduler", "serial", "--quiet", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["mechanism"] == {"name": "skellam", "rho": 0.02}
    assert list(result["methods"]) == ["exact", "naive"]
    _calibrated(result["methods"]["exact"], trials)
    assert _failures(result["methods"]["naive"], trials)
