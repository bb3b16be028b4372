"""dpposterior.Model: the contract model against a brute-force posterior, every engine on
the same object, parameter transforms, and one-line errors for bad models.

Brute force: p(s_dp | lam) = sum_s P(S = s | lam) Laplace(s_dp - s; b) with S = sum of n clamped
Poisson counts, whose distribution is the n-fold convolution of the clamped pmf (by FFT), on a
lam grid.  Tolerances are Monte Carlo errors: ArviZ's mcse of the posterior mean for DA-MCMC, and
sd / sqrt(ESS of the weighted population) for SMC-ABC.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.stats as st

import dpposterior
from dpposterior.errors import InputError
from dpposterior.mechanisms import Laplace

OBSERVED = 1137.5


def contract_model(**kw):
    args = dict(params={"lam": st.gamma(2.0, scale=2.0)},
                records=lambda theta, size, rng: rng.poisson(theta["lam"], size=size),
                statistic=lambda rec: np.clip(rec, 0, 10),
                mechanism=Laplace(epsilon=0.5, sensitivity=10.0), n=200,
                record_logpdf=lambda rec, theta: st.poisson.logpmf(rec, theta["lam"]))
    args.update(kw)
    return dpposterior.Model(**args)


def brute_force(observed=OBSERVED, n=200, clamp=10, scale=20.0, grid=np.linspace(2.5, 9.5, 701)):
    """(mean, sd) of lam | s_dp on a grid; the clamped sum's pmf by FFT convolution."""
    size = 4096
    s = np.arange(n * clamp + 1)
    kernel = np.exp(-np.abs(observed - s) / scale)
    post = np.empty(grid.size)
    for j, lam in enumerate(grid):
        p = st.poisson.pmf(np.arange(clamp + 1), lam)
        p[clamp] = st.poisson.sf(clamp - 1, lam)          # clamping piles the tail on 10
        pmf = np.fft.irfft(np.fft.rfft(p, size) ** n, size)[: s.size]
        post[j] = np.clip(pmf, 0, None) @ kernel * st.gamma.pdf(lam, 2.0, scale=2.0)
    post /= post.sum()
    mean = post @ grid
    return mean, np.sqrt(post @ (grid - mean) ** 2)


@pytest.fixture(scope="module")
def exact():
    return brute_force()


def test_contract_da_mcmc_matches_brute_force(exact):
    import arviz as az

    post = dpposterior.infer(contract_model(), observed=[OBSERVED], method="da-mcmc", draws=1000, chains=2,
                             warmup=300, seed=1)
    lam = post.to_arviz().posterior["lam"]
    assert lam.dims == ("chain", "draw") and lam.shape == (2, 1000)
    mcse = float(az.mcse(post.to_arviz(), var_names=["lam"])["lam"])
    mean, sd = exact
    assert abs(float(lam.mean()) - mean) < 4 * mcse, (float(lam.mean()), mean, mcse)
    assert abs(float(lam.std()) / sd - 1) < 0.1
    acc = post.to_arviz().sample_stats["record_acceptance"]
    assert acc.shape == (2, 1000) and 0.5 < float(acc.mean()) <= 1.0


def test_contract_smc_abc_matches_brute_force(exact):
    post = dpposterior.infer(contract_model(), observed=[OBSERVED], method="smc-abc", draws=1000, chains=2,
                             seed=1, simulations=30_000, particles=1000)
    lam = post.posterior["lam"]
    assert lam.shape == (2, 1000)
    w = post.extras["weights"]
    ess = 1.0 / np.sum(w ** 2)
    mean, sd = exact
    assert abs(lam.mean() - mean) < 4 * sd / np.sqrt(ess), (lam.mean(), mean, ess)


def test_sppe_runs_on_the_same_model():
    post = dpposterior.infer(contract_model(), observed=[OBSERVED], method="sppe", draws=100, chains=2, seed=1,
                             simulations=100, rounds=1, max_epochs=5)
    assert post.posterior["lam"].shape == (2, 100) and np.all(post.posterior["lam"] > 0)


@pytest.mark.slow
def test_sple_runs_on_the_same_model():
    post = dpposterior.infer(contract_model(), observed=[OBSERVED], method="sple", draws=100, chains=2, seed=1,
                             simulations=100, rounds=1, max_epochs=5)
    assert post.posterior["lam"].shape == (2, 100) and np.all(post.posterior["lam"] > 0)


def test_auto_picks_da_mcmc_with_a_likelihood_and_sppe_without():
    from dpposterior.inference.user_model import resolve_method

    assert resolve_method(contract_model(), "auto") == "da-mcmc"
    assert resolve_method(contract_model(record_logpdf=None), "auto") == "sppe"
    with pytest.raises(InputError, match="unknown method 'gibbs'"):
        resolve_method(contract_model(), "gibbs")


def test_transforms_round_trip_with_jacobian():
    model = dpposterior.Model(params={"a": st.gamma(3.0), "b": st.beta(2.0, 5.0), "c": st.norm(1, 2),
                                      "p": st.dirichlet([1.0, 2.0, 3.0])},
                              records=lambda th, size, rng: rng.normal(size=size), statistic=lambda x: x,
                              mechanism=Laplace(1.0, 1.0), n=5)
    assert model.udim == 1 + 1 + 1 + 2
    rng = np.random.default_rng(0)
    values = model.sample_prior(50, rng)
    z = model.to_unconstrained(values)
    back, _ = model.from_unconstrained(z)
    for k in values:
        np.testing.assert_allclose(back[k], values[k], rtol=1e-9)
    # the unconstrained density integrates to one along a coordinate (Jacobian included): gamma -> log
    grid = np.linspace(-12, 6, 4001)
    zz = np.tile(z[0], (grid.size, 1))
    zz[:, 0] = grid
    dens = np.exp(model.log_prior_unconstrained(zz) - model.log_prior_unconstrained(z[:1])[0])
    ratio = np.trapezoid(dens, grid) if hasattr(np, "trapezoid") else np.trapz(dens, grid)
    expected = 1.0 / (st.gamma(3.0).pdf(values["a"][0]) * values["a"][0])   # 1 / density of log a at z_0
    assert abs(ratio / expected - 1) < 1e-3


def test_theta_is_a_dict_of_floats_and_vectors():
    seen = {}

    def records(theta, size, rng):
        seen.update(theta)
        return rng.normal(theta["mu"] + theta["v"].sum(), 1.0, size=size)

    model = dpposterior.Model(params={"mu": st.norm(0, 1), "v": st.multivariate_normal([0, 0], np.eye(2))},
                              records=records, statistic=lambda x: np.clip(x, -3, 3), mechanism=Laplace(1.0, 6.0),
                              n=20, record_logpdf=lambda x, th: st.norm.logpdf(x, th["mu"] + th["v"].sum()))
    post = dpposterior.infer(model, observed=[4.0], method="da-mcmc", draws=50, warmup=20, chains=2, seed=0)
    assert isinstance(seen["mu"], float) and seen["v"].shape == (2,)
    assert post.posterior["v"].shape == (2, 50, 2) and post.dims["v"] == ["v_dim_0"]


# --------------------------------------------------------------------------- one-line errors
@pytest.mark.parametrize("kwargs, observed, field, text", [
    # found by the memory check's pilot of 64 records, before the model's n = 200 are drawn
    (dict(records=lambda th, size, rng: rng.poisson(th["lam"], size=size + 1)), [1.0], "model.records",
     "records(theta, size=64, rng) returned an array of shape (65,)"),
    (dict(statistic=lambda rec: np.full(len(rec), np.nan)), [1.0], "model.statistic", "non-finite"),
    (dict(statistic=lambda rec: np.stack([rec, rec], axis=1)), [1.0], "model.statistic",
     "gives 2 number(s) per record; the observed release has 1"),
    (dict(), [1.0, 2.0], "model.statistic", "the observed release has 2"),
    (dict(record_logpdf=lambda rec, th: np.full(3, np.nan)), [1.0], "model.record_logpdf", "returned an array"),
    (dict(record_logpdf=lambda rec, th: np.full(len(rec), np.nan)), [1.0], "model.record_logpdf", "NaN"),
    (dict(complete_posterior=lambda rec, rng: {"mu": 1.0}), [1.0], "model.complete_posterior", "keys ['lam']"),
    (dict(), [float("nan")], "observed", "finite"),
])
def test_bad_models_get_one_line_errors(kwargs, observed, field, text):
    with pytest.raises(InputError) as err:
        dpposterior.infer(contract_model(**kwargs), observed=observed, method="da-mcmc", draws=10, warmup=0,
                          chains=1, seed=0)
    assert err.value.field == field and text in err.value.reason, str(err.value)
    assert "\n" not in str(err.value)


def test_bad_priors_and_fields():
    class NoLogpdf:
        def rvs(self, size=None, random_state=None):
            return np.ones(size)

    with pytest.raises(InputError, match=r"params.lam: the prior has no logpdf\(\)"):
        contract_model(params={"lam": NoLogpdf()})
    with pytest.raises(InputError, match="model.n"):
        contract_model(n=0)
    with pytest.raises(InputError, match="model.mechanism"):
        contract_model(mechanism="laplace")
    with pytest.raises(InputError, match="model.records"):
        contract_model(records=None)
    with pytest.raises(InputError, match="prior"):
        dpposterior.infer(contract_model(), observed=[1.0], prior={"kind": "flat"})
    with pytest.raises(InputError, match="observed"):
        dpposterior.infer(contract_model(), method="da-mcmc")
    with pytest.raises(InputError, match="da-mcmc needs"):
        dpposterior.infer(contract_model(record_logpdf=None), observed=[1.0], method="da-mcmc")
