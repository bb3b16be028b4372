"""The naive-bayes observation model: its variables are the engines' output (names, dims, labels), its
measurements are the release's K noisy two-way tables with the release's mechanism, its latent statistic offers
what the family's engines do with it, its prior is the Dirichlet prior, and every engine (``vb``, ``naive``,
``non-private``, ``exact-enumeration``, ``exact``) builds its posterior through its ``pack``."""

import inspect
import re

import numpy as np
import pytest
from _observation import spy_on_pack
from scipy import stats

from dpposterior import infer
from dpposterior.errors import InputError
from dpposterior.families import get_family
from dpposterior.families.naive_bayes import NaiveBayesTables, TwoWayTable, observation_model
from dpposterior.inference import naive_bayes_exact, naive_bayes_vb
from dpposterior.observation import ENUMERATE, MOMENTS, RECORDS, SIMULATE
from dpposterior.release import FORMAT, load_release

pytestmark = pytest.mark.filterwarnings("ignore::dpposterior.errors.PosteriorWarning")

TABLES = [[[8.4, 6.1], [7.2, 9.3]], [[5.5, 4.0, 6.2], [3.1, 8.8, 4.4]]]
LAPLACE = load_release({"format": FORMAT, "family": "naive-bayes", "n": 30, "classes": 2, "levels": [2, 3],
                        "class_labels": ["no", "yes"], "feature_names": ["a", "b"],
                        "statistics": {"tables": {"value": TABLES, "mechanism": "laplace", "epsilon": 1.0,
                                                  "scale": "counts"}}})
PROPORTIONS = load_release({"format": FORMAT, "family": "naive-bayes", "n": 40, "classes": 2, "levels": [2, 2],
                            "statistics": {"tables": {"value": [[[0.3, 0.2], [0.25, 0.27]], [[0.1, 0.4], [0.3, 0.2]]],
                                                      "mechanism": "laplace", "epsilon": 2.0,
                                                      "scale": "proportions"}}})
DISCRETE = load_release({"format": FORMAT, "family": "naive-bayes", "n": 30, "classes": 2, "levels": [2, 3],
                         "statistics": {"tables": {"value": [[[8, 6], [7, 9]], [[5, 4, 6], [3, 8, 4]]],
                                                   "mechanism": "discrete-laplace", "epsilon": 1.0,
                                                   "scale": "counts"}}})
SMALL = load_release({"format": FORMAT, "family": "naive-bayes", "n": 20, "classes": 2, "levels": [2, 2],
                      "statistics": {"tables": {"value": [[[6.2, 4.1], [5.3, 4.9]], [[7.1, 3.3], [2.8, 6.6]]],
                                                "mechanism": "laplace", "epsilon": 1.0, "scale": "counts"}}})
STRUCTURED = {"kind": "dirichlet",
              "alpha": {"class": [1.0, 2.0],
                        "features": [[[1.0, 3.0], [2.0, 2.0]], [[1.0, 1.0, 2.0], [3.0, 1.0, 1.0]]]}}


def test_the_family_registers_its_observation_model():
    hook = get_family("naive-bayes").hooks["observation_model"]
    assert hook is observation_model and hook.__module__ == "dpposterior.families.naive_bayes"


def test_the_measurements_are_the_released_tables_with_the_releases_mechanism():
    model = observation_model(LAPLACE)
    assert model.family == "naive-bayes" and model.n == 30 and model.attrs == {}
    assert [m.name for m in model.measurements] == ["statistics.tables.value[0]", "statistics.tables.value[1]"]
    for k, m in enumerate(model.measurements):
        assert m.values.tolist() == TABLES[k]
        assert isinstance(m.query, TwoWayTable) and m.query.shape == (2, [2, 3][k])
        # L1 sensitivity 2 per table (one record moves between two cells), epsilon per table
        assert m.mechanism.name == "laplace" and m.mechanism.scale == pytest.approx(2.0) and not m.integer_noise
    latent = np.zeros((2, 2, 3))
    latent[0, :, :2] = [[8, 7], [6, 9]]
    latent[1] = [[5, 4, 6], [3, 8, 4]]
    assert model.measurements[0].query(latent).tolist() == [[8, 7], [6, 9]]
    assert model.measurements[1].query(latent).tolist() == [[5, 4, 6], [3, 8, 4]]
    statistics = {m.name: m.query(latent) for m in model.measurements}
    expected = sum(stats.laplace.logpdf(np.asarray(t), latent[k, :, :len(t[0])], 2.0).sum()
                   for k, t in enumerate(TABLES))
    assert model.log_likelihood(statistics) == pytest.approx(expected)


def test_proportions_are_measured_on_their_own_scale():
    model = observation_model(PROPORTIONS)
    m = model.measurements[1]
    assert m.values.tolist() == [[0.1, 0.4], [0.3, 0.2]]
    # the K tables together have sensitivity 2K/n: Laplace scale 2K/(n eps) on the proportions
    assert m.mechanism.scale == pytest.approx(2 * 2 / (40 * 2.0))
    latent = np.array([[[10, 10], [12, 8]], [[4, 16], [12, 8]]], float)
    assert np.allclose(m.query(latent), [[0.1, 0.4], [0.3, 0.2]])


def test_integer_noise_is_measured_with_its_mass_function():
    model = observation_model(DISCRETE)
    (m0, m1) = model.measurements
    assert m0.mechanism.name == "discrete-laplace" and m0.integer_noise and m1.values.tolist() == [[5, 4, 6],
                                                                                                   [3, 8, 4]]
    # discrete Laplace at epsilon / sensitivity 2: mass proportional to exp(-|k| / 2)
    assert m0.residual_log_mass(-2, 2) == pytest.approx(stats.dlaplace.logpmf(np.arange(-2, 3), 0.5))
    model.competent(["integer-noise"], "x")
    with pytest.raises(InputError, match="continuous noise"):
        observation_model(LAPLACE).competent(["integer-noise"], "x")


def test_the_latent_statistic_advertises_what_the_families_engines_do():
    model = observation_model(LAPLACE)
    assert model.latent.capabilities == {RECORDS, ENUMERATE, SIMULATE}
    family = get_family("naive-bayes")
    assert "da-mcmc" in family.methods and "exact" in family.methods
    with pytest.raises(InputError, match="moments"):
        model.competent([MOMENTS], "x")
    state = model.latent.state
    assert isinstance(state, NaiveBayesTables) and (state.n, state.classes, state.levels) == (30, 2, (2, 3))


def test_the_simulator_has_the_multinomial_moments():
    state = observation_model(LAPLACE).latent.state
    class_prob = np.array([0.3, 0.7])
    feature_prob = np.array([[[0.4, 0.6, np.nan], [0.1, 0.9, np.nan]], [[0.2, 0.3, 0.5], [0.6, 0.2, 0.2]]])
    rng = np.random.default_rng(2)
    draws = np.array([state.simulate(class_prob, feature_prob, rng) for _ in range(4000)])
    assert draws.shape == (4000, 2, 2, 3)
    assert np.all(draws.sum(axis=(2, 3)) == 30) and np.all(draws[:, 0, :, 2] == 0)
    # E n^k_ij = n p_i p^k_ij
    mean = 30 * class_prob[None, :, None] * np.nan_to_num(feature_prob)
    se = np.sqrt(30 * 0.25 / len(draws))
    assert np.allclose(draws.mean(axis=0), mean, atol=5 * se)


def test_the_prior_samples_and_evaluates_the_dirichlet_laws():
    prior = observation_model(LAPLACE, STRUCTURED).prior
    assert prior.parameters == STRUCTURED and prior.describe == "dirichlet(structured alpha)"
    draws = [prior.sample(np.random.default_rng(s)) for s in range(3000)]
    class_prob = np.array([d["class_prob"] for d in draws])
    feature_prob = np.array([d["feature_prob"] for d in draws])
    assert np.allclose(class_prob.mean(axis=0), [1 / 3, 2 / 3], atol=0.02)
    assert np.allclose(feature_prob[:, 1, 1].mean(axis=0), [0.6, 0.2, 0.2], atol=0.02)
    assert np.all(np.isnan(feature_prob[:, 0, :, 2]))
    values = {"class_prob": np.array([0.4, 0.6]),
              "feature_prob": np.array([[[0.3, 0.7, np.nan], [0.5, 0.5, np.nan]],
                                        [[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]]])}
    expected = (stats.dirichlet.logpdf([0.4, 0.6], [1.0, 2.0]) + stats.dirichlet.logpdf([0.3, 0.7], [1.0, 3.0])
                + stats.dirichlet.logpdf([0.5, 0.5], [2.0, 2.0]) + stats.dirichlet.logpdf([0.2, 0.3, 0.5], [1, 1, 2])
                + stats.dirichlet.logpdf([0.6, 0.3, 0.1], [3, 1, 1]))
    assert prior.log_density(values) == pytest.approx(expected)
    assert observation_model(LAPLACE).prior.parameters == {"kind": "dirichlet", "alpha": 1.0}


CONFIDENTIAL = {"tables": [[[8, 6], [7, 9]], [[5, 4, 6], [3, 8, 4]]]}
ENGINES = [(LAPLACE, "vb"), (LAPLACE, "naive"), (LAPLACE, "non-private"), (LAPLACE, "exact"),
           (PROPORTIONS, "vb"), (DISCRETE, "exact"), (SMALL, "exact-enumeration")]
IDS = [f"{r.statistics.tables.mechanism}-{r.scale}-{m}" for r, m in ENGINES]


def run(release, method, seed=3):
    extra = {"confidential": CONFIDENTIAL} if method == "non-private" else {}
    return infer(release, method=method, draws=40, chains=2, seed=seed, **extra)


@pytest.mark.parametrize("release, method", ENGINES, ids=IDS)
def test_the_engines_output_is_the_models_variables(release, method):
    model = observation_model(release)
    post = run(release, method)
    assert list(post.posterior) == [v.name for v in model.variables] == ["class_prob", "feature_prob"]
    for v in model.variables:
        assert post.posterior[v.name].ndim == 2 + len(v.dims)
        assert post.dims[v.name] == list(v.dims)
        for d, labels in v.coords.items():
            assert post.coords[d] == list(labels)
    assert post.coords == release.coords() and post.iid and post.method == method
    assert [v.support for v in model.variables] == ["simplex", "unit"]
    if method == "vb":
        assert post.dims["lower_bound"] == ["vb_iteration"]
    ds = post.dataset()
    assert ds["feature_prob"].dims == ("chain", "draw", "feature", "class", "level")


@pytest.mark.parametrize("release, method", ENGINES, ids=IDS)
def test_the_engines_pack_through_the_model(release, method, monkeypatch):
    calls = spy_on_pack(monkeypatch)
    run(release, method, seed=4)
    assert calls == [("naive-bayes", method, ["class_prob", "feature_prob"], [])]


def test_no_naive_bayes_engine_builds_a_posterior_itself():
    for module in (naive_bayes_vb, naive_bayes_exact):
        assert not re.search(r"\bPosterior\(", inspect.getsource(module)), module.__name__
