"""The small-area family's observation model: its variables are what ``exact-da`` and ``naive`` store (dims,
coords, float32), its one measurement is the release's noisy table under each cell's own law, its prior is the
hierarchical model's, and both engines name their draws through its ``pack``, once."""

import math

import numpy as np
import pytest
from _observation import spy_on_pack
from scipy import stats

import dpposterior as dp
from dpposterior.families import get_family
from dpposterior.families.small_area import SmallAreaPrior, observation_model, simulate
from dpposterior.inference import small_area as engine
from dpposterior.observation import ENUMERATE, SIMULATE
from dpposterior.release import load_release

pytestmark = pytest.mark.filterwarnings("ignore::dpposterior.errors.PosteriorWarning")

PRIOR = SmallAreaPrior(alpha_mean=0.5, alpha_sd=2.0, tau_scale=0.7, tau_parent_scale=0.4)
PARENTS = [0, 0, 0, 1, 1, 1, 2, 2]
_, PLAIN = simulate(PRIOR, 8, 3, 2.0, np.random.default_rng(1), exposure=np.arange(10, 18))
_, WITH_PARENTS = simulate(PRIOR, 8, 3, 2.0, np.random.default_rng(2), exposure=np.arange(10, 18), parents=PARENTS,
                           likelihood="binomial")
FAST = dict(draws=6, warmup=6, chains=2, seed=1, prior=PRIOR.model_dump(exclude={"kind"}))


def test_the_family_registers_its_observation_model():
    assert get_family("small-area").hooks["observation_model"] is observation_model


def test_the_variables_are_the_engines_outputs():
    rel = load_release(WITH_PARENTS)
    model = observation_model(rel, PRIOR, "binomial")
    assert [v.name for v in model.variables] == ["alpha", "tau", "u", "tau_parent", "v", "rate"]
    assert model.variable("alpha").coords == {"cell": ["c0", "c1", "c2"]}
    assert model.variable("u").coords == {"area": [f"a{g}" for g in range(8)]}
    assert model.variable("v").coords == {"parent": ["p0", "p1", "p2"]}
    assert model.variable("rate").dims == ("area", "cell") and model.variable("rate").support == "unit"
    assert observation_model(load_release(PLAIN), PRIOR).variable("rate").support == "positive"
    assert [v.name for v in observation_model(load_release(PLAIN), PRIOR).variables] == ["alpha", "tau", "u", "rate"]
    for method in ("exact-da", "naive"):
        post = dp.infer(WITH_PARENTS, method=method, likelihood="binomial", **FAST)
        assert list(post.posterior) == [v.name for v in model.variables]
        assert post.dims == {v.name: list(v.dims) for v in model.variables if v.dims}
        assert post.coords == {"cell": ["c0", "c1", "c2"], "area": [f"a{g}" for g in range(8)],
                               "parent": ["p0", "p1", "p2"]}
        assert post.float32_variables == ("u", "rate")


def test_the_measurement_is_the_noisy_table_under_each_cells_law():
    rel = load_release(PLAIN)
    (m,) = observation_model(rel, PRIOR).measurements
    assert m.name == "statistics.counts" and m.values.shape == (8, 3) == m.query.shape
    np.testing.assert_array_equal(m.values, np.asarray(PLAIN["statistics"]["counts"]["value"], float))
    assert m.integer_noise and m.mechanism.name == "discrete-gaussian"
    # a reference to the release's own description of the cells' laws: no per-cell objects
    laws, index = m.mechanism.laws()
    assert laws is rel.cell_mechanisms()[2] and index is rel.cell_mechanisms()[1]
    s = np.maximum(m.values, 0)
    _, index, mechs = rel.cell_mechanisms()
    expect = sum(float(np.sum(mechs[k].logpdf(m.values[index == k], s[index == k]))) for k in range(len(mechs)))
    assert m.log_likelihood(s) == pytest.approx(expect)
    np.testing.assert_allclose(m.residual_log_mass(-2, 2), mechs[0].logpmf(np.arange(-2, 3.0)))


def test_the_latent_statistic_and_the_prior():
    rel = load_release(WITH_PARENTS)
    model = observation_model(rel, PRIOR, "binomial")
    assert model.latent.capabilities == frozenset({ENUMERATE, SIMULATE})
    assert model.latent.state.likelihood == "binomial"
    np.testing.assert_array_equal(model.latent.state.parent_index, PARENTS)
    np.testing.assert_array_equal(model.latent.state.exposures(), rel.exposures())
    draw = model.prior.sample(np.random.default_rng(0))
    assert draw["alpha"].shape == (3,) and draw["u"].shape == (8,) and draw["v"].shape == (3,)
    assert np.all((draw["rate"] > 0) & (draw["rate"] < 1))
    expect = (stats.norm(0.5, 2.0).logpdf(draw["alpha"]).sum() + stats.halfnorm(scale=0.7).logpdf(draw["tau"])
              + stats.norm(0, draw["tau"]).logpdf(draw["u"]).sum()
              + stats.halfnorm(scale=0.4).logpdf(draw["tau_parent"])
              + stats.norm(0, draw["tau_parent"]).logpdf(draw["v"]).sum())
    assert model.prior.log_density(draw) == pytest.approx(expect, rel=1e-12)
    assert model.prior.log_density({**draw, "tau": -1.0}) == -math.inf
    assert model.prior.parameters == PRIOR.to_dict()


@pytest.mark.parametrize("method", ["exact-da", "naive"])
@pytest.mark.parametrize("omit_rate", [False, True])
def test_the_engines_pack_through_the_model_once(method, omit_rate, monkeypatch):
    calls = spy_on_pack(monkeypatch, variables=True)
    if omit_rate:
        monkeypatch.setattr(engine, "MAX_RATE_VALUES", 1)
    post = dp.infer(PLAIN, method=method, **FAST)
    names = ("alpha", "tau", "u") if omit_rate else ("alpha", "tau", "u", "rate")
    assert calls == [("small-area", method, names)]
    assert tuple(post.posterior) == names and ("rate_omitted" in post.attrs) == omit_rate
