"""The integer mechanisms: discrete Laplace and discrete Gaussian -- masses, samplers, transform,
zCDP accounting and its conversions, the curators' audit (a halved sigma is caught)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

import dpposterior as dp
from dpposterior.errors import InputError
from dpposterior.mechanisms import DiscreteGaussian, DiscreteLaplace
from dpposterior.mechanisms.accounting import PrivacyCost, compose, zcdp_delta, zcdp_epsilon
from dpposterior.mechanisms.discrete_gaussian import exact_delta, log_normaliser

MECHS = [DiscreteGaussian(0.4), DiscreteGaussian(0.7), DiscreteGaussian(3.0, 2.0), DiscreteGaussian(40.0),
         DiscreteLaplace(1.0, 2.0), DiscreteLaplace(0.05), DiscreteLaplace(5.0)]


@pytest.mark.parametrize("sigma", [0.05, 0.3, 0.99, 1.0, 1.7, 12.0, 300.0])
def test_discrete_gaussian_normaliser_matches_brute_summation(sigma):
    k = np.arange(-int(60 * sigma) - 10, int(60 * sigma) + 11, dtype=float)
    brute = math.log(math.fsum(np.exp(-k * k / (2 * sigma * sigma))))
    assert log_normaliser(sigma) == pytest.approx(brute, rel=1e-14, abs=1e-14)


@pytest.mark.parametrize("mech", MECHS, ids=repr)
def test_mass_sums_to_one_and_sampler_and_transform_have_that_law(mech):
    w = mech.tail_window(1e-15)
    k = np.arange(-w, w + 1, dtype=float)
    pmf = np.exp(mech.logpmf(k))
    assert pmf.sum() == pytest.approx(1.0, abs=1e-12)
    assert mech.noise_variance == pytest.approx((k * k * pmf).sum(), rel=1e-9)
    rng = np.random.default_rng(5)
    draws = mech.draw((40000,), rng)
    assert draws.dtype.kind == "i"
    from_u = mech.transform(rng.random(40000), 0.0)
    assert np.all(from_u == np.round(from_u))
    # chi-square of both samples against the mass (cells with expected count >= 5, tails pooled)
    for x in (draws, from_u.astype(int)):
        keep = pmf * x.size >= 5
        lo, hi = k[keep].min(), k[keep].max()
        obs = np.array([np.sum(x < lo)] + [np.sum(x == v) for v in k[keep]] + [np.sum(x > hi)])
        exp = np.concatenate([[pmf[k < lo].sum()], pmf[keep], [pmf[k > hi].sum()]]) * x.size
        ok = exp > 0
        assert stats.chisquare(obs[ok], exp[ok] * obs[ok].sum() / exp[ok].sum()).pvalue > 1e-3


def test_sigma_is_the_parameter_not_the_noise_sd():
    dg = DiscreteGaussian(0.7)
    assert dg.noise_variance < 0.7 ** 2  # CKS Cor. 9: slightly smaller
    assert DiscreteGaussian(5.0).noise_variance == pytest.approx(25.0, rel=1e-9)


def test_logpdf_is_minus_infinity_off_the_integers():
    assert DiscreteGaussian(1.0).logpdf(3.5, 1.0) == -np.inf
    assert np.isfinite(DiscreteLaplace(1.0).logpdf(3.0, 1.0))


def test_discrete_laplace_cdf_closed_form_matches_summation():
    mech = DiscreteLaplace(0.3, 2.0)
    k = np.arange(-300, 301, dtype=float)
    assert np.allclose(mech.cdf(k), np.cumsum(np.exp(mech.logpmf(k))) + mech.cdf(-301), atol=1e-12)


# --------------------------------------------------------------------------- privacy
def test_rho_is_delta_squared_over_two_sigma_squared_and_agrees_with_opendp():
    import opendp.prelude as opdp

    opdp.enable_features("contrib")
    for sigma, sens in [(0.7, 1), (3.0, 10), (2.0, 1)]:
        meas = opdp.m.make_gaussian(opdp.atom_domain(T=int), opdp.absolute_distance(T=int), scale=sigma)
        assert DiscreteGaussian(sigma, sens).rho == pytest.approx(meas.map(sens), rel=1e-12)


def test_exact_profile_is_tighter_than_the_zcdp_conversion_and_holds_by_brute_force():
    sigma, sens, delta = 2.0, 1.0, 1e-6
    dg = DiscreteGaussian(sigma, sens)
    eps_exact, eps_conv = dg.epsilon_at(delta, 1), zcdp_epsilon(dg.rho, delta)
    assert eps_exact < eps_conv
    # the hockey-stick divergence at eps_exact, summed directly from the masses, is delta
    k = np.arange(-200, 201, dtype=float)
    p, q = np.exp(dg.logpmf(k)), np.exp(dg.logpmf(k - 1))
    assert np.maximum(p - math.exp(eps_exact) * q, 0).sum() == pytest.approx(delta, rel=1e-6)
    assert exact_delta(sigma, sens, eps_exact) == pytest.approx(delta, rel=1e-6)


def test_zcdp_conversion_inverts_and_beats_bun_steinke():
    for rho in (0.01, 0.5, 3.0):
        eps = zcdp_epsilon(rho, 1e-6)
        assert zcdp_delta(rho, eps) == pytest.approx(1e-6, rel=1e-6)
        assert eps <= rho + 2 * math.sqrt(rho * math.log(1e6))


def test_composition_mixes_pure_and_rho_correctly():
    pure = PrivacyCost(1.0, 0.0, None, "pure")
    z = PrivacyCost(9.9, 1e-6, 0.25, "zcdp")
    total = compose([pure, z, pure], 1e-6)
    assert total.rho == pytest.approx(0.25 + 2 * 0.5)
    assert total.epsilon == pytest.approx(zcdp_epsilon(1.25, 1e-6))
    assert "Prop. 1.4" in total.note
    assert compose([pure, pure], 1e-6).as_tuple() == (2.0, 0.0)


def test_release_reports_rho_and_epsilon_at_its_report_delta():
    base = {"format": "dpposterior-release/1", "family": "binomial", "n": 30,
            "statistics": {"successes": {"value": 11, "mechanism": "discrete-gaussian", "sigma": 0.7,
                                         "sensitivity": 1}}}
    rel = dp.load_release(base)
    assert rel.privacy().rho == pytest.approx(1 / (2 * 0.49))
    assert rel.total_privacy_cost()[1] == 1e-6
    rel2 = dp.load_release({**base, "report_delta": 1e-10})
    assert rel2.total_privacy_cost()[1] == 1e-10 and rel2.total_privacy_cost()[0] > rel.total_privacy_cost()[0]
    post = dp.infer(base, prior={"kind": "beta", "alpha": 2, "beta": 3}, seed=1, draws=100)
    assert post.attrs["release_rho"] == pytest.approx(rel.privacy().rho)
    assert "Thm 7" in post.attrs["release_privacy"]


# --------------------------------------------------------------------------- curators and audit
@pytest.mark.parametrize("family", ["binomial", "multinomial", "poisson", "naive-bayes"])
def test_audit_passes_for_discrete_curators(family):
    from dpposterior.privacy import audit

    results = audit(family, draws=1000, samplers=("numpy",), restarts=2,
                    variants=[f"{family} discrete-laplace", f"{family} discrete-gaussian"])
    assert len(results) == 2 and all(r.ok for r in results), [r.to_dict() for r in results]


def test_audit_catches_a_discrete_gaussian_curator_with_halved_sigma():
    from dpposterior.families import get_family
    from dpposterior.privacy import audit

    honest = get_family("binomial").curate

    def halved(frame, options):
        # draws noise at sigma / 2 (rho x 4) but records the sigma and rho it was asked for
        import dataclasses

        if options.mechanism != "discrete-gaussian":
            return honest(frame, options)
        out = honest(frame, dataclasses.replace(options, rho=4 * options.rho))
        rec = out["statistics"]["successes"]
        rec["sigma"], rec["rho"] = 2 * rec["sigma"], options.rho
        return out

    ok = audit("binomial", draws=4000, samplers=("numpy",), variants=["binomial discrete-gaussian"])
    bad = audit("binomial", draws=4000, samplers=("numpy",), variants=["binomial discrete-gaussian"], curate=halved)
    assert ok[0].ok
    assert not bad[0].ok and not bad[0].samplers[0].ok


def test_release_cli_refuses_mixed_budgets(tmp_path):
    from dpposterior.cli import main

    data = tmp_path / "d.csv"
    data.write_text("x\n1\n0\n1\n")
    out = tmp_path / "r.json"
    base = ["release", str(data), "--family", "binomial", "--column", "x", "--out", str(out)]
    assert main([*base, "--mechanism", "discrete-gaussian", "--epsilon", "1"]) == 2
    assert main([*base, "--mechanism", "discrete-laplace", "--rho", "1"]) == 2
    assert main([*base, "--mechanism", "discrete-gaussian", "--rho", "0.5", "--seed", "1"]) == 0
    rel = dp.load_release(out)
    assert rel.statistics.successes.sigma == 1.0 and float(rel.statistics.successes.value).is_integer()


# --------------------------------------------------------------------------- models and a registered toy mechanism
def _poisson_clip_model(mech):
    import scipy.stats as st

    return dp.Model(params={"lam": st.gamma(2.0, scale=2.0)}, n=60,
                    records=lambda theta, size, rng: rng.poisson(theta["lam"], size=size),
                    statistic=lambda x: np.clip(x, 0, 10), mechanism=mech,
                    record_logpdf=lambda x, th: st.poisson.logpmf(x, th["lam"]))


def _clip_reference(y, n, mech, lam):
    """Posterior of lam on a grid: sum_s p(s | lam) eta(y - s), s = sum of min(x_i, 10), by np.convolve."""
    out = np.empty_like(lam)
    for i, l in enumerate(lam):
        one = stats.poisson.pmf(np.arange(11), l)
        one[10] += stats.poisson.sf(10, l)
        dist = np.array([1.0])
        for _ in range(n):
            dist = np.convolve(dist, one)
        s = np.arange(dist.size)
        out[i] = (dist * np.exp(mech.logpdf(y, s))).sum() * stats.gamma.pdf(l, 2.0, scale=2.0)
    w = out / out.sum()
    mean = (w * lam).sum()
    return mean, math.sqrt((w * (lam - mean) ** 2).sum())


def test_model_with_discrete_gaussian_runs_da_mcmc_against_a_grid_reference_and_smc_abc():
    mech = DiscreteGaussian(sigma=3.0, sensitivity=10)
    model = _poisson_clip_model(mech)
    y = 301
    mean, sd = _clip_reference(y, 60, mech, np.linspace(2.5, 8.0, 500))
    post = dp.infer(model, observed=[y], method="da-mcmc", draws=2000, warmup=500, chains=4, seed=1)
    ess = float(post.to_arviz().posterior["lam"].size) / 10  # conservative: DA chains; checked below via R-hat flags
    assert not [w for w in post.warnings if "R-hat" in w]
    assert abs(post.draws("lam").mean() - mean) < 4.5 * sd / math.sqrt(ess)
    assert post.attrs.get("options_draws") == 2000
    abc = dp.infer(model, observed=[y], method="smc-abc", seed=1, simulations=20000)
    assert not abc.warnings
    # SMC-ABC targets an ABC posterior (tolerance > 0), not the exact one: its mean within 0.5 sd of the grid
    assert abs(abc.draws("lam").mean() - mean) < 0.5 * sd
    with pytest.raises(InputError, match="observed"):
        dp.infer(model, observed=[301.5], method="da-mcmc", draws=50, warmup=10, chains=1, seed=1)


class ToyGeometric(DiscreteLaplace):
    """A mechanism no count family or engine names: the registry and its own methods are all they see."""

    name = "toy-geometric"


def test_a_registered_toy_integer_mechanism_runs_every_count_family_and_da_mcmc(monkeypatch):
    from dpposterior.mechanisms import registry

    monkeypatch.setitem(registry.MECHANISMS, "toy-geometric", ToyGeometric)
    rec = {"mechanism": "toy-geometric", "epsilon": 1.0}
    releases = {
        "binomial": {"n": 30, "statistics": {"successes": {"value": 11, **rec}}},
        "multinomial": {"n": 40, "statistics": {"counts": {"value": [9, 21, 11], **rec}}},
        "poisson": {"n": 20, "bounds": [0, 8], "statistics": {"truncated_sum": {"value": 61, **rec}}},
    }
    for family, body in releases.items():
        release = {"format": "dpposterior-release/1", "family": family, **body}
        post = dp.infer(release, seed=1, draws=200)
        assert post.method == "exact"
        ref = dp.infer({**release, "statistics": {k: {**v, "mechanism": "discrete-laplace"}
                                                   for k, v in body["statistics"].items()}}, seed=1, draws=200)
        var = next(iter(post.posterior))
        assert np.array_equal(post.posterior[var], ref.posterior[var])  # same law, same seed: same draws
    post = dp.infer(_poisson_clip_model(ToyGeometric(0.5, 10)), observed=[301], method="da-mcmc", draws=200,
                    warmup=100, chains=2, seed=1)
    assert np.isfinite(post.draws("lam")).all()


def test_opendp_worked_example_in_the_docs_runs(tmp_path, monkeypatch):
    """docs/integer-releases.md's OpenDP example, executed as written in a folder laid out like the
    repository's root (its data ship in examples/data/)."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[1]
    text = (root / "docs" / "integer-releases.md").read_text()
    block = re.search(r"## From OpenDP to a posterior.*?python - <<'PY'\n(.*?)\nPY\n", text, re.S).group(1)
    (tmp_path / "examples").symlink_to(root / "examples")
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(block, "integer-releases.md", "exec"), namespace)
    post = namespace["post"]
    assert post.method == "exact"
    assert abs(post.draws("p").mean() - 500 / 17379) < 0.003
