"""``dpposterior.Model`` as a view of an observation model: its variables (names, dims, coords, support), prior
and measurement; da-mcmc names its draws through the view's ``pack`` (the variables it draws are the view's);
the families with a record model describe the same variables through their ``observation_model`` hook; and
``pack`` takes the predictive draws as one group, all or none."""

import numpy as np
from pathlib import Path

import pytest
import scipy.stats as st

import dpposterior
from dpposterior.families import get_family
from dpposterior.families.gaussian import make_release
from dpposterior.mechanisms import Laplace
from dpposterior.model import SummedStatistic
from dpposterior.observation import RECORDS, SIMULATE, ObservationModel

pytestmark = pytest.mark.filterwarnings("ignore::dpposterior.errors.PosteriorWarning")


def vector_model(**kw):
    args = dict(params={"lam": st.gamma(2.0, scale=2.0), "p": st.beta(2.0, 5.0),
                        "w": st.dirichlet([1.0, 2.0, 3.0]), "c": st.norm(1.0, 2.0)},
                records=lambda th, size, rng: rng.poisson(th["lam"], size=size),
                statistic=lambda x: np.clip(x, 0, 10), mechanism=Laplace(0.5, 10.0), n=50,
                record_logpdf=lambda x, th: st.poisson.logpmf(x, th["lam"]),
                dims={"w": ["part"]}, coords={"part": ["a", "b", "c"]}, name="counts")
    args.update(kw)
    return dpposterior.Model(**args)


def test_the_view_holds_the_models_variables_prior_and_measurement():
    model = vector_model()
    view = model.observation_model([120.5])
    assert isinstance(view, ObservationModel) and view.family == "counts" and view.n == 50
    assert [(v.name, v.dims, v.coords, v.support) for v in view.variables] == [
        ("lam", (), {}, "positive"), ("p", (), {}, "unit"), ("w", ("part",), {"part": ["a", "b", "c"]}, "simplex"),
        ("c", (), {}, "real")]
    assert view.latent.capabilities == {RECORDS, SIMULATE} and view.latent.state is model
    (m,) = view.measurements
    np.testing.assert_array_equal(m.values, [120.5])
    assert m.mechanism is model.mechanism and isinstance(m.query, SummedStatistic)
    records = np.array([1, 4, 12, 3])
    np.testing.assert_array_equal(m.query(records), [1 + 4 + 10 + 3])
    # the prior: a draw in the variables' shapes, and its log density is the product of the scipy priors
    draw = view.prior.sample(np.random.default_rng(0))
    assert set(draw) == {"lam", "p", "w", "c"} and np.shape(draw["w"]) == (3,) and np.shape(draw["lam"]) == ()
    expected = (st.gamma(2.0, scale=2.0).logpdf(draw["lam"]) + st.beta(2.0, 5.0).logpdf(draw["p"])
                + st.dirichlet([1.0, 2.0, 3.0]).logpdf(draw["w"]) + st.norm(1.0, 2.0).logpdf(draw["c"]))
    assert view.prior.log_density(draw) == pytest.approx(expected, rel=1e-12)
    assert view.prior.parameters["lam"] == "gamma(2, scale=2)"
    assert view.attrs == {}      # the engine writes the posterior's attrs, the view none


def test_a_model_without_a_record_likelihood_offers_simulation_only():
    view = vector_model(record_logpdf=None).observation_model([3.0])
    assert view.latent.capabilities == {SIMULATE}
    assert not view.is_competent({RECORDS})


def test_da_mcmc_draws_are_the_views_variables():
    model = vector_model(params={"lam": st.gamma(2.0, scale=2.0), "w": st.dirichlet([1.0, 2.0, 3.0])})
    post = dpposterior.infer(model, observed=[120.5], method="da-mcmc", draws=20, warmup=10, chains=2, seed=0)
    view = model.observation_model([120.5])
    assert list(post.posterior) == [v.name for v in view.variables]
    for v in view.variables:
        assert post.posterior[v.name].shape[2:] == tuple(len(v.coords[d]) for d in v.dims)
        assert post.dims.get(v.name, []) == list(v.dims)
    assert post.coords == {"part": ["a", "b", "c"]} and post.family == "counts"


@pytest.mark.parametrize("release, prior", [
    ({"format": "dpposterior-release/1", "family": "binomial", "n": 100,
      "statistics": {"successes": {"value": 31.7, "mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1.0}}},
     None),
    ({"format": "dpposterior-release/1", "family": "multinomial", "n": 40, "categories": ["x", "y", "z"],
      "statistics": {"counts": {"value": [10.3, 12.1, 18.7], "mechanism": "laplace", "epsilon": 1.0,
                                "sensitivity": 2.0}}}, None),
    (make_release(50, (-2.0, 3.0), 0.6, 1.1, 0.25, 0.75),
     {"kind": "normal-inverse-gamma", "mu0": 0.5, "sigma0_sq": 1.0, "kappa0": 2.0, "nu0": 3.0}),
    (str(Path(__file__).resolve().parents[1] / "examples" / "releases" / "naive-bayes-xiong-eps10.json"), None),
])
def test_the_family_hook_and_its_record_models_view_agree(release, prior):
    from dpposterior.release import load_release

    release = load_release(release) if isinstance(release, (dict, str)) else release
    family = get_family(release.family)
    model, observed = family.hooks["da_model"](release, prior)
    view = model.observation_model(observed, family=release.family)
    hook = family.hooks["observation_model"](release, prior)
    assert [(v.name, v.dims, v.coords, v.support) for v in view.variables] == \
        [(v.name, v.dims, v.coords, v.support) for v in hook.variables]
    assert view.family == hook.family and view.n == hook.n


def test_pack_takes_the_predictive_draws_all_or_none():
    release = make_release(50, (-2.0, 3.0), 0.6, 1.1, 0.25, 0.75)
    view = get_family("gaussian").hooks["observation_model"](release, None)
    assert [v.name for v in view.predictive] == ["y_new"]
    draws = {"mu": np.zeros((2, 5)), "sigma2": np.ones((2, 5))}
    without = view.pack(draws, "test")
    assert without.posterior_predictive == {}
    with_ = view.pack(draws, "test", posterior_predictive={"y_new": np.zeros((2, 5))})
    assert list(with_.posterior_predictive) == ["y_new"]
    with pytest.raises(ValueError, match="posterior_predictive do not match"):
        view.pack(draws, "test", posterior_predictive={"y_other": np.zeros((2, 5))})
    with pytest.raises(ValueError, match="draws do not match"):
        view.pack({"mu": np.zeros((2, 5))}, "test")


def test_the_simulator_view_of_a_model_has_the_models_variables():
    """The SBI engines' view (``Model.simulator_model``) and the Model's own describe the same variables, and an
    SBI engine's draws are those variables."""
    model = vector_model(params={"lam": st.gamma(2.0, scale=2.0), "w": st.dirichlet([1.0, 2.0, 3.0])})
    sim_view = model.simulator_model([120.5]).observation_model()
    view = model.observation_model([120.5])
    assert [(v.name, v.dims, v.coords) for v in sim_view.variables] == \
        [(v.name, v.dims, v.coords) for v in view.variables]
    assert sim_view.latent.capabilities == {SIMULATE} and sim_view.family == "counts"
    np.testing.assert_array_equal(sim_view.measurements[0].values, [120.5])
    draw = sim_view.prior.sample(np.random.default_rng(0))
    assert np.shape(draw["w"]) == (3,) and draw["w"].sum() == pytest.approx(1.0)
    post = dpposterior.infer(model, observed=[120.5], method="smc-abc", simulations=400, particles=40, seed=0)
    assert list(post.posterior) == ["lam", "w"] and post.dims == {"w": ["part"]} and post.iid
    assert post.coords == {"part": ["a", "b", "c"]}
