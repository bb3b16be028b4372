"""The gaussian family's observation model: its variables are the engines' output, its measurements are the
release's two Laplace statistics, its latent statistic offers what it claims, and the engines ``gibbs``, ``grid``
and ``naive`` build their posterior through its ``pack``."""

import inspect
import math

import numpy as np
import pytest
from _observation import spy_on_pack
from scipy import stats

from dpposterior import infer
from dpposterior.errors import InputError, RefusedError
from dpposterior.families import get_family
from dpposterior.families.gaussian import GaussianRecords, make_release, observation_model, parse_prior
from dpposterior.inference import gaussian_gibbs as gg
from dpposterior.inference import gaussian_grid as gr
from dpposterior.observation import ENUMERATE, MOMENTS, RECORDS, SIMULATE
from dpposterior.posterior import Posterior

pytestmark = pytest.mark.filterwarnings("ignore::dpposterior.errors.PosteriorWarning")

NIG = {"kind": "normal-inverse-gamma", "mu0": 0.5, "sigma0_sq": 1.0, "kappa0": 2.0, "nu0": 3.0}
RELEASE = make_release(50, (-2.0, 3.0), 0.6, 1.1, 0.25, 0.75)
ENGINES = {"gibbs": dict(draws=40, warmup=40, chains=2), "grid": dict(draws=40, chains=2, grid_size=120),
           "naive": dict(draws=40, chains=2)}


def test_the_family_registers_its_observation_model():
    assert get_family("gaussian").hooks["observation_model"] is observation_model


def test_the_measurements_are_the_two_laplace_statistics():
    model = observation_model(RELEASE, NIG)
    assert model.family == "gaussian" and model.n == 50
    mean, var = model.measurements
    assert (mean.name, var.name) == ("statistics.mean", "statistics.variance")
    assert float(mean.values) == 0.6 and float(var.values) == 1.1
    # sensitivities (b - a)/n and (b - a)^2/n, each at its own share of epsilon
    assert mean.mechanism.name == var.mechanism.name == "laplace"
    assert mean.mechanism.scale == pytest.approx(5.0 / 50 / 0.25)
    assert var.mechanism.scale == pytest.approx(25.0 / 50 / 0.75)
    assert not mean.integer_noise
    # the queries give what the curator computes from the (clamped) records
    records = np.random.default_rng(0).uniform(-2.0, 3.0, 50)
    assert float(mean.query(records)) == pytest.approx(records.mean())
    assert float(var.query(records)) == pytest.approx(records.var(ddof=1))
    s = {"statistics.mean": 0.5, "statistics.variance": 1.0}
    expected = (stats.laplace.logpdf(0.6, 0.5, mean.mechanism.scale)
                + stats.laplace.logpdf(1.1, 1.0, var.mechanism.scale))
    assert model.log_likelihood(s) == pytest.approx(expected)


def test_the_latent_statistic_offers_what_it_claims():
    model = observation_model(RELEASE, NIG)
    assert model.latent.capabilities == {RECORDS, MOMENTS, SIMULATE}
    model.competent([RECORDS, MOMENTS, SIMULATE], "x")
    with pytest.raises(InputError, match="enumerate"):
        model.competent([ENUMERATE], "x")
    with pytest.raises(InputError, match="integer noise"):
        model.competent(["integer-noise"], "x")
    state = model.latent.state
    assert isinstance(state, GaussianRecords) and (state.n, state.lo, state.width) == (50, -2.0, 5.0)
    assert state.to_data(np.array([0.0, 1.0])).tolist() == [-2.0, 3.0]
    assert state.variance_to_data(1.0) == 25.0
    # the simulator of (Ybar, S^2) has the moments it advertises, and records give the statistics' law
    rng = np.random.default_rng(1)
    draws = np.array([state.simulate(0.3, 0.8, rng) for _ in range(20_000)])
    mean, var = state.moments(0.3, 0.8)
    assert np.allclose(draws.mean(axis=0), mean, atol=4 * np.sqrt(var / len(draws)))
    assert np.allclose(draws.var(axis=0), var, rtol=0.05)
    rec = state.records(0.3, 0.8, rng)
    assert rec.shape == (50,)


def test_the_prior_samples_and_evaluates_the_normal_inverse_gamma():
    model = observation_model(RELEASE, NIG)
    assert model.prior.parameters == NIG
    draws = [model.prior.sample(np.random.default_rng(s)) for s in range(2000)]
    assert {tuple(d) for d in draws} == {("mu", "sigma2")}
    s2 = np.array([d["sigma2"] for d in draws])
    assert np.median(s2) == pytest.approx(stats.invgamma.median(1.5, scale=1.5), rel=0.1)
    expected = stats.invgamma.logpdf(0.7, 1.5, scale=1.5) + stats.norm.logpdf(0.1, 0.5, math.sqrt(0.7 / 2.0))
    assert model.prior.log_density({"mu": 0.1, "sigma2": 0.7}) == pytest.approx(expected)
    flat = observation_model(RELEASE, None)
    assert flat.prior.parameters == {"kind": "flat"}
    assert flat.prior.log_density({"mu": 0.1, "sigma2": 0.7}) == 0.0
    with pytest.raises(RefusedError, match="improper"):
        flat.prior.sample(np.random.default_rng(0))
    # a parsed prior is taken as it is; a dict is read (and refused) as the family reads it
    assert observation_model(RELEASE, parse_prior(NIG)).prior.parameters == NIG
    with pytest.raises(RefusedError, match="Theorem 4"):
        observation_model(RELEASE, {"kind": "jeffreys"})


@pytest.mark.parametrize("method", sorted(ENGINES))
@pytest.mark.parametrize("prior", [NIG, None], ids=["nig", "flat"])
def test_the_engines_output_is_the_models_variables(method, prior):
    model = observation_model(RELEASE, prior)
    post = infer(RELEASE, prior, method, seed=3, **ENGINES[method])
    assert list(post.posterior) == [v.name for v in model.variables] == ["mu", "sigma2"]
    assert list(post.posterior_predictive) == [v.name for v in model.predictive] == ["y_new"]
    for v in model.variables + model.predictive:
        arr = post.posterior.get(v.name, post.posterior_predictive.get(v.name))
        assert arr.shape[2:] == () and len(v.dims) == 0
    assert post.dims == {} and post.coords == {}
    assert post.family == "gaussian" and post.method == method
    assert post.attrs["prior"] == model.attrs["prior"] == ("flat" if prior is None else "normal-inverse-gamma")
    assert next(iter(post.attrs)) == "prior"
    ds = post.dataset()
    assert set(ds.data_vars) == {"mu", "sigma2"} and ds["mu"].dims == ("chain", "draw")


@pytest.mark.parametrize("method", sorted(ENGINES))
def test_the_engines_pack_through_the_model(method, monkeypatch):
    calls = spy_on_pack(monkeypatch)
    infer(RELEASE, NIG, method, seed=4, **ENGINES[method])
    assert calls == [("gaussian", method, ["mu", "sigma2"], ["y_new"])]


def test_no_gaussian_engine_builds_a_posterior_itself():
    for module in (gg, gr):
        assert "Posterior(" not in inspect.getsource(module), module.__name__


def test_pack_checks_the_predictive_draws_against_the_model():
    model = observation_model(RELEASE, NIG)
    draws = {"mu": np.zeros((1, 3)), "sigma2": np.ones((1, 3))}
    # predictive draws are one group: none is a posterior without a predictive group, a partial set an error
    assert model.pack(draws, "x").posterior_predictive == {}
    with pytest.raises(ValueError, match="posterior_predictive do not match"):
        model.pack(draws, "x", posterior_predictive={"z": np.zeros((1, 3))})
    with pytest.raises(ValueError, match="extra"):
        model.pack(draws, "x", posterior_predictive={"y_new": np.zeros((1, 3)), "z": np.zeros((1, 3))})
    with pytest.raises(ValueError, match="event axes"):
        model.pack(draws, "x", posterior_predictive={"y_new": np.zeros((1, 3, 2))})
    post = model.pack(draws, "x", posterior_predictive={"y_new": np.zeros((1, 3))}, attrs={"a": 1}, iid=True)
    assert isinstance(post, Posterior) and post.attrs == {"prior": "normal-inverse-gamma", "a": 1} and post.iid


def test_a_models_marginal_keeps_the_named_variables_in_its_order_and_refuses_others():
    model = observation_model(RELEASE, NIG)
    assert [v.name for v in model.marginal(["sigma2", "mu"]).variables] == ["mu", "sigma2"]
    assert [v.name for v in model.marginal({"sigma2"}).variables] == ["sigma2"]
    assert model.marginal(["mu"]).predictive == model.predictive
    with pytest.raises(KeyError, match="not variables of the model: \\['tau'\\]"):
        model.marginal(["mu", "tau"])
