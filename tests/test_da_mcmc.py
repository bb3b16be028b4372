"""Data-augmentation MCMC (Ju et al. 2022): the compiled record sweep, linreg-ju against
the exact pseudo-marginal references (benchmarks/results/isref_*), simulation-based calibration
for a user model and a family (and the naive method failing the same check), the CLI.

Tolerances: 0.1 posterior sd in the means and 10% in the sds (the issue's), with enough draws
that the Monte Carlo error is a third of that or less: ESS >= 1,000 gives mcse 0.03 sd and a
relative error of the sd of ~2%.  The reference's own Monte Carlo error is sd/sqrt(8,000+).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.stats as st
from scipy.special import softmax

import dpposterior
from dpposterior.inference.da_mcmc import LAPLACE, record_sweep
from dpposterior.mechanisms import Laplace

ROOT = Path(__file__).resolve().parents[1]


def test_record_sweep_is_independent_mh_with_incremental_total():
    """Against a plain-Python transcription of the acceptance rule on random inputs."""
    rng = np.random.default_rng(3)
    C, n, r, sweeps = 3, 7, 2, 2
    t = rng.normal(size=(C, n, r))
    tp = rng.normal(size=(C, n * sweeps, r))
    obs = rng.normal(size=r)
    u = rng.random((C, n * sweeps))
    inv = np.array([2.0, 0.5])
    t_ref, tot_ref = t.copy(), t.sum(axis=1)
    acc_ref = np.zeros(C, int)
    for c in range(C):
        for j in range(n * sweeps):
            i = j % n
            new = tot_ref[c] - t_ref[c, i] + tp[c, j]
            log_ratio = -np.abs((obs - new) * inv).sum() + np.abs((obs - tot_ref[c]) * inv).sum()
            if np.log(u[c, j]) < log_ratio:
                t_ref[c, i], tot_ref[c] = tp[c, j], new
                acc_ref[c] += 1
    total = t.sum(axis=1)
    last = np.zeros((C, n), np.int64)
    nacc = np.zeros(C, np.int64)
    record_sweep(t, tp, total, u, obs, LAPLACE, inv, last, nacc)
    np.testing.assert_allclose(t, t_ref)
    np.testing.assert_allclose(total, t.sum(axis=1), atol=1e-12)
    np.testing.assert_array_equal(nacc, acc_ref)


# --------------------------------------------------------------------------- linreg-ju vs references
def reference(eps: str):
    z = np.load(ROOT / "benchmarks" / "results" / f"isref_linreg-ju-eps{eps}.npz")
    w = softmax(z["log_weight"])
    m = w @ z["theta"]
    return m, np.sqrt(w @ (z["theta"] - m) ** 2)


def check_linreg(eps: str, draws: int, chains: int, warmup: int = 1000):
    import arviz as az

    post = dpposterior.infer(ROOT / "examples" / "releases" / f"linreg-ju-eps{eps}.json", method="da-mcmc",
                             draws=draws, chains=chains, warmup=warmup, seed=11)
    beta = post.draws("beta")
    ess = az.ess(post.to_arviz(), var_names=["beta"])["beta"].values
    assert ess.min() >= 1000, f"too few effective draws ({ess}) for a 0.1 sd test"
    m, sd = reference(eps)
    dev = (beta.mean(axis=0) - m) / sd
    ratio = beta.std(axis=0) / sd
    assert np.all(np.abs(dev) < 0.1), (eps, dev)
    assert np.all(np.abs(ratio - 1) < 0.1), (eps, ratio)


def test_linreg_ju_eps01_matches_reference_reduced():
    # the non-centred step makes eps = 0.1 mix fast: ESS ~ 0.5 per draw
    check_linreg("0.1", draws=2000, chains=2, warmup=300)


@pytest.mark.slow
@pytest.mark.parametrize("eps, draws", [("10", 15_000), ("1", 3000), ("0.1", 3000)])
def test_linreg_ju_matches_reference(eps, draws):
    check_linreg(eps, draws=draws, chains=4)


# --------------------------------------------------------------------------- simulation-based calibration
def poisson_model(n=50):
    """A user model with a conjugate complete posterior (lam | x ~ Gamma(2 + sum x, rate 1/2 + n))."""
    return dpposterior.Model(
        params={"lam": st.gamma(2.0, scale=2.0)},
        records=lambda theta, size, rng: rng.poisson(theta["lam"], size=size),
        statistic=lambda rec: np.clip(rec, 0, 10), mechanism=Laplace(epsilon=0.5, sensitivity=10.0), n=n,
        complete_posterior=lambda rec, rng: {"lam": rng.gamma(2.0 + rec.sum(), 1.0 / (0.5 + len(rec)))})


def ks_pvalue(ranks):
    return st.kstest(ranks, "uniform").pvalue


def randomized_rank(truth, draws, rng):
    return (np.sum(draws < truth) + rng.random()) / (len(draws) + 1)


def test_sbc_user_model_da_mcmc_passes_and_naive_fails():
    """160 (lam, records, release) from the model; ranks of lam among 40 thinned DA-MCMC draws."""
    from dpposterior.inference.da_mcmc import run_da_mcmc

    model = poisson_model()
    rng = np.random.default_rng(2024)
    da, naive = [], []
    for trial in range(160):
        lam = rng.gamma(2.0, 2.0)
        s = np.clip(rng.poisson(lam, size=model.n), 0, 10).sum()
        sdp = s + rng.laplace(0.0, model.mechanism.scale)
        res = run_da_mcmc(model, [sdp], draws=40, warmup=60, chains=1, thin=5, seed=trial)
        da.append(randomized_rank(lam, res.values["lam"].ravel(), rng))
        # naive: the release taken as the exact (unclamped) sum, conjugate update
        nd = rng.gamma(2.0 + max(sdp, 0.0), 1.0 / (0.5 + model.n), size=40)
        naive.append(randomized_rank(lam, nd, rng))
    print("SBC user model: KS p-value da-mcmc", ks_pvalue(da), "naive", ks_pvalue(naive))
    assert ks_pvalue(da) > 0.01, ks_pvalue(da)
    assert ks_pvalue(naive) < 1e-4, ks_pvalue(naive)
    cover = np.mean(np.abs(np.array(da) - 0.5) <= 0.45)
    assert 0.83 < cover < 0.97          # nominal 0.90, 160 trials: sd 0.024


def test_sbc_binomial_family_da_mcmc_passes_and_naive_fails():
    """The family path: Family.simulate -> release -> infer(release, method=...)."""
    from dpposterior.families import get_family

    family = get_family("binomial")
    prior = family.parse_prior({"kind": "beta", "alpha": 2.0, "beta": 2.0}, None)
    rng = np.random.default_rng(7)
    ranks = {"da-mcmc": [], "naive": []}
    for trial in range(120):
        sim = family.simulate(prior, 30, 0.2, rng)
        for method, kw in (("da-mcmc", dict(warmup=60, thin=5)), ("naive", {})):
            post = dpposterior.infer(sim.release, prior={"kind": "beta", "alpha": 2.0, "beta": 2.0}, method=method,
                                     draws=40, chains=1, seed=trial, **kw)
            ranks[method].append(randomized_rank(sim.theta["p"], post.draws("p").ravel(), rng))
    print("SBC binomial: KS p-value da-mcmc", ks_pvalue(ranks["da-mcmc"]), "naive", ks_pvalue(ranks["naive"]))
    assert ks_pvalue(ranks["da-mcmc"]) > 0.01, ks_pvalue(ranks["da-mcmc"])
    assert ks_pvalue(ranks["naive"]) < 1e-3, ks_pvalue(ranks["naive"])


def test_binomial_da_mcmc_matches_gibbs_ss():
    rel = {"format": "dpposterior-release/1", "family": "binomial", "n": 100,
           "statistics": {"successes": {"value": 31.7, "mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1.0}}}
    da = dpposterior.infer(rel, method="da-mcmc", draws=1500, chains=2, warmup=300, seed=1).draws("p")
    gs = dpposterior.infer(rel, method="gibbs-ss", draws=5000, chains=2, seed=1).draws("p")
    assert abs(da.mean() - gs.mean()) < 0.1 * gs.std()
    assert abs(da.std() / gs.std() - 1) < 0.1


# --------------------------------------------------------------------------- CLI
def test_cli_infer_da_mcmc_on_a_family_release(tmp_path):
    from dpposterior.cli import main

    out = tmp_path / "P.nc"
    code = main(["infer", str(ROOT / "examples" / "releases" / "linreg-ju-eps10.json"), "--method", "da-mcmc",
                 "--out", str(out), "--draws", "200", "--warmup", "100", "--seed", "1"])
    assert code == 0
    import arviz as az

    idata = az.from_netcdf(out)
    assert idata.posterior["beta"].dims == ("chain", "draw", "coef")
    assert idata.posterior["beta"].sizes["coef"] == 3
    assert "record_acceptance" in idata.sample_stats


@pytest.mark.slow
def test_naive_bayes_da_mcmc_matches_exact_enumeration():
    """naive-bayes (Xiong et al. App. E.3 release): DA-MCMC vs the exact posterior by enumeration."""
    import arviz as az

    rel = ROOT / "examples" / "releases" / "naive-bayes-xiong-eps10.json"
    da = dpposterior.infer(rel, method="da-mcmc", draws=2000, chains=2, warmup=300, seed=1)
    ex = dpposterior.infer(rel, method="exact-enumeration", draws=5000, chains=2, seed=1)
    for var in ("class_prob", "feature_prob"):
        a, b = da.draws(var), ex.draws(var)
        keep = np.isfinite(b[0])
        a, b = a[:, keep], b[:, keep]
        ess = az.ess(da.to_arviz(), var_names=[var])[var].values
        assert np.nanmin(ess) > 800
        assert np.all(np.abs(a.mean(axis=0) - b.mean(axis=0)) < 0.1 * b.std(axis=0))
        assert np.all(np.abs(a.std(axis=0) / b.std(axis=0) - 1) < 0.1)


@pytest.mark.slow
def test_gaussian_da_mcmc_matches_grid_oracle():
    """gaussian (Kazan & Reiter Example 1 release, NIG prior): DA-MCMC vs the brute-force grid.

    The posterior of sigma^2 is heavy-tailed (sd twice its mean), so the comparison is on the
    mean of mu and the median of sigma^2 within 4 Monte Carlo standard errors (ArviZ mcse)."""
    import arviz as az

    rel = ROOT / "src" / "dpposterior" / "data" / "blood_lead_release.json"
    prior = {"kind": "normal-inverse-gamma", "mu0": 10, "sigma0_sq": 20, "kappa0": 1, "nu0": 2}
    da = dpposterior.infer(rel, prior=prior, method="da-mcmc", draws=6000, chains=2, warmup=1000, seed=3)
    grid = dpposterior.infer(rel, prior=prior, method="grid", chains=2, seed=3)
    idata = da.to_arviz()
    mcse_mu = float(az.mcse(idata, var_names=["mu"])["mu"])
    mcse_med = float(az.mcse(idata, var_names=["sigma2"], method="median")["sigma2"])
    assert abs(da.draws("mu").mean() - grid.draws("mu").mean()) < 4 * mcse_mu + 0.1
    assert abs(np.median(da.draws("sigma2")) - np.median(grid.draws("sigma2"))) < 4 * mcse_med + 1.0


def test_records_that_would_not_fit_are_refused_before_any_is_drawn(monkeypatch):
    """A binomial release of n = 2e9 records: each chain would hold them (16 GB each); a pilot of 64 records
    measures a record's bytes and the run is refused in one line before the n records are drawn."""
    from dpposterior import memory
    from dpposterior.api import infer
    from dpposterior.errors import RefusedError
    from dpposterior.families import get_family

    release = {"format": "dpposterior-release/1", "family": "binomial", "n": 2_000_000_000,
               "statistics": {"successes": {"value": 1e9, "mechanism": "laplace", "epsilon": 1.0, "sensitivity": 1}}}
    sizes = []
    real_hook = get_family("binomial").hooks["da_model"]

    def spying_hook(rel, prior):
        model, observed = real_hook(rel, prior)
        draw = model.draw_records

        def pilot_only(th, n, rng):  # the n records themselves would take 16 GB a chain: fail instead
            sizes.append(n)
            assert n <= 64, f"{n:,} records drawn before the refusal"
            return draw(th, n, rng)

        monkeypatch.setattr(model, "draw_records", pilot_only, raising=False)
        return model, observed

    monkeypatch.setitem(get_family("binomial").hooks, "da_model", spying_hook)
    monkeypatch.setattr(memory, "available_bytes", lambda: 8e9)
    with pytest.raises(RefusedError, match=r"method: da-mcmc: 4 chains x 2,000,000,000 records of about \d+ bytes "
                                           r"needs about .* more than the 7.5 GiB available; fewer --chains, or an "
                                           r"engine that does not hold the records"):
        infer(release, method="da-mcmc", draws=10, warmup=10, seed=1)
    assert sizes and max(sizes) <= 64


def test_a_user_models_check_refuses_records_that_would_not_fit(monkeypatch):
    """Model.check draws the n records once to validate the callables: refused before that, too."""
    from dpposterior import memory
    from dpposterior.errors import RefusedError

    model = dpposterior.Model(params={"p": st.beta(1, 1)}, n=3_000_000_000,
                              records=lambda th, n, rng: rng.random(min(n, 64)) < th["p"],  # (pilot only)
                              statistic=lambda x: x.astype(float), mechanism=Laplace(epsilon=1.0, sensitivity=1.0))
    monkeypatch.setattr(memory, "available_bytes", lambda: 1e9)
    with pytest.raises(RefusedError, match=r"model.n: checking the model: 3,000,000,000 records of about 1 bytes "
                                           r"needs about"):
        model.check([1.5e9])
