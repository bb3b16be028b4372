"""The linear-regression observation model: its measurements are each party's released blocks (the upper
triangle of X'X, X'y, y'y, adaSSP's lambda_min) with the mechanism instances the engines model, its variables
are the engines' output (``theta`` over the coefficients, ``sigma2``, ``sigma_x`` over the features), its prior
is eq. (4) of Alparslan et al., and every engine builds its posterior through its ``pack``."""

import inspect
import re

import numpy as np
import pytest
from _observation import spy_on_pack
from scipy import stats

from dpposterior import infer
from dpposterior.errors import InputError
from dpposterior.families import get_family
from dpposterior.families import linear_regression as lr
from dpposterior.families.linear_regression.observation import (CrossProduct, GramUpper, RegressionRecords,
                                                                 ResponseSquares, SmallestEigenvalue,
                                                                 observation_model)
from dpposterior.inference import (linreg_adassp, linreg_bs, linreg_common, linreg_fast, linreg_fixeds, linreg_naive,
                                   linreg_normalx)
from dpposterior.observation import ENUMERATE, MOMENTS, RECORDS, SIMULATE
from dpposterior.release import load_release

pytestmark = pytest.mark.filterwarnings("ignore::dpposterior.errors.PosteriorWarning")

RNG = np.random.default_rng(6)
X = RNG.uniform(-1, 1, (120, 2))
Y = np.clip(X @ [0.5, -0.3] + 0.1 * RNG.normal(size=120), -1, 1)
GAUSSIAN = load_release(lr.make_release([X[:60], X[60:]], [Y[:60], Y[60:]], features=["a", "b"], epsilon=2.0,
                                        delta=1e-5, x_norm=1.5, y_abs=1.0, intercept=True, mechanism="gaussian",
                                        split="xtx,xty,yty", rng=8))
LAPLACE = load_release(lr.make_release([X], [Y], features=["a", "b"], epsilon=2.0, delta=None, x_norm=1.5,
                                       y_abs=1.0, mechanism="laplace", split="xtx,xty,yty", rng=7))
ADASSP = load_release(lr.make_release([X], [Y], features=["a", "b"], epsilon=2.0, delta=1e-5, x_norm=1.5,
                                      y_abs=1.0, mechanism="gaussian", split="adassp", rng=9))


def test_the_family_registers_its_observation_model():
    hook = get_family("linear-regression").hooks["observation_model"]
    assert hook is observation_model and hook.__module__ == "dpposterior.families.linear_regression.observation"


def test_the_measurements_are_each_partys_released_blocks():
    model = observation_model(GAUSSIAN)
    assert model.family == "linear-regression" and model.n == 120 and model.attrs == {}
    assert [m.name for m in model.measurements] == [f"parties[{j}].statistics.{s}" for j in (0, 1)
                                                    for s in ("xtx", "xty", "yty")]
    data = GAUSSIAN.regression_data()
    for j, party in enumerate(GAUSSIAN.parties):
        xtx, xty, yty = model.measurements[3 * j: 3 * j + 3]
        assert xtx.values.tolist() == np.asarray(party.statistics.xtx.value)[np.triu_indices(3)].tolist()
        assert xty.values.tolist() == party.statistics.xty.value and float(yty.values) == party.statistics.yty.value
        for m, sigma in ((xtx, data.sigma_s[j]), (xty, data.sigma_z[j]), (yty, data.sigma_u[j])):
            assert m.mechanism.name == "gaussian" and m.mechanism.sigma == sigma
    # the queries read the parties' confidential rows (with the intercept's column)
    rows = {"x": [np.column_stack([np.ones(60), X[:60]]), np.column_stack([np.ones(60), X[60:]])],
            "y": [Y[:60], Y[60:]]}
    xtx, xty, yty = model.measurements[3:]
    assert isinstance(xtx.query, GramUpper) and xtx.query.shape == (6,)
    assert np.allclose(xtx.query(rows), (rows["x"][1].T @ rows["x"][1])[np.triu_indices(3)])
    assert isinstance(xty.query, CrossProduct) and np.allclose(xty.query(rows), rows["x"][1].T @ Y[60:])
    assert isinstance(yty.query, ResponseSquares) and float(yty.query(rows)) == pytest.approx(Y[60:] @ Y[60:])
    statistics = {m.name: m.query(rows) for m in model.measurements}
    expected = sum(stats.norm.logpdf(m.values, statistics[m.name], m.mechanism.sigma).sum()
                   for m in model.measurements)
    assert model.log_likelihood(statistics) == pytest.approx(expected)


def test_laplace_and_adassp_releases_are_measured_with_their_own_mechanisms():
    model = observation_model(LAPLACE)
    data = LAPLACE.regression_data()
    for k, m in enumerate(model.measurements):
        assert m.mechanism.name == "laplace" and m.mechanism.scale == pytest.approx(data.laplace_scale[0, k])
    adassp = observation_model(ADASSP)
    assert [m.name.split(".")[-1] for m in adassp.measurements] == ["xtx", "xty", "lambda_min"]
    lam = adassp.measurements[-1]
    assert isinstance(lam.query, SmallestEigenvalue)
    assert float(lam.values) == ADASSP.parties[0].statistics.lambda_min.value
    assert lam.mechanism.sigma == ADASSP.regression_data().sigma_lambda[0]
    assert float(lam.query({"x": [X], "y": [Y]})) == pytest.approx(np.linalg.eigvalsh(X.T @ X)[0])


def test_the_latent_statistic_offers_simulation_only():
    model = observation_model(GAUSSIAN)
    assert model.latent.capabilities == {SIMULATE}
    for missing in (RECORDS, ENUMERATE, MOMENTS):
        with pytest.raises(InputError, match=missing):
            model.competent([missing], "x")
    state = model.latent.state
    assert isinstance(state, RegressionRecords) and state.n == (60, 60) and state.d == 3 and state.intercept


def test_the_simulator_has_the_regression_moments():
    state = RegressionRecords((400,), 2, False)
    theta, sigma2, sigma_x = np.array([0.5, -1.0]), 0.3, np.array([[1.0, 0.4], [0.4, 2.0]])
    rng = np.random.default_rng(3)
    sims = [state.simulate(theta, sigma2, sigma_x, rng) for _ in range(300)]
    xtx = np.mean([s["x"][0].T @ s["x"][0] for s in sims], axis=0)
    xty = np.mean([s["x"][0].T @ s["y"][0] for s in sims], axis=0)
    yty = np.mean([s["y"][0] @ s["y"][0] for s in sims])
    # E X'X = n Sigma_x, E X'y = n Sigma_x theta, E y'y = n (theta' Sigma_x theta + sigma2)
    assert np.allclose(xtx / 400, sigma_x, atol=0.03)
    assert np.allclose(xty / 400, sigma_x @ theta, atol=0.03)
    assert yty / 400 == pytest.approx(theta @ sigma_x @ theta + sigma2, rel=0.02)
    with_intercept = RegressionRecords((5, 3), 3, True).simulate(np.ones(3), 1.0, np.eye(2), rng)
    assert [x.shape for x in with_intercept["x"]] == [(5, 3), (3, 3)] and np.all(with_intercept["x"][1][:, 0] == 1)


def test_the_prior_samples_and_evaluates_eq_4():
    given = {"theta_mean": [0.1, 0.2, 0.3], "theta_cov": 0.5, "a": 5.0, "b": 2.0, "iw_scale": [[2.0, 0.0], [0.0, 1.0]],
             "iw_df": 4.0}
    prior = observation_model(GAUSSIAN, given).prior
    parsed = lr.parse_prior(given, GAUSSIAN)
    assert prior.parameters == parsed.to_dict()
    draws = [prior.sample(np.random.default_rng(s)) for s in range(4000)]
    assert np.allclose(np.mean([d["theta"] for d in draws], axis=0), [0.1, 0.2, 0.3], atol=0.04)
    assert np.mean([d["sigma2"] for d in draws]) == pytest.approx(2.0 / 4.0, rel=0.05)
    # IW(Lambda, kappa) has mean Lambda / (kappa - p - 1)
    assert np.allclose(np.mean([d["sigma_x"] for d in draws], axis=0), np.diag([2.0, 1.0]), atol=0.15)
    values = {"theta": np.array([0.0, 0.5, -0.2]), "sigma2": 0.7, "sigma_x": np.array([[1.5, 0.2], [0.2, 0.8]])}
    expected = (stats.multivariate_normal.logpdf(values["theta"], [0.1, 0.2, 0.3], 0.5 * np.eye(3))
                + stats.invgamma.logpdf(0.7, 5.0, scale=2.0)
                + stats.invwishart.logpdf(values["sigma_x"], df=4.0, scale=np.diag([2.0, 1.0])))
    assert prior.log_density(values) == pytest.approx(expected)
    del values["sigma_x"]
    assert prior.log_density(values) == pytest.approx(expected - stats.invwishart.logpdf(
        np.array([[1.5, 0.2], [0.2, 0.8]]), df=4.0, scale=np.diag([2.0, 1.0])))


MC = dict(draws=20, warmup=20, chains=2)
IID = dict(draws=20, chains=2)
ENGINES = [(GAUSSIAN, "mcmc-normalx", MC, ["sigma2", "sigma_x", "theta"]),
           (GAUSSIAN, "mcmc-fixeds", MC, ["sigma2", "theta"]),
           (GAUSSIAN, "bayes-fixeds-fast", IID, ["theta"]),
           (GAUSSIAN, "mcmc-bs", MC, ["sigma2", "theta"]),
           (GAUSSIAN, "naive", IID, ["sigma2", "theta"]),
           (LAPLACE, "mcmc-bs", MC, ["sigma2", "theta"]),
           (ADASSP, "adassp", {}, ["theta"])]
IDS = [f"{r.parties[0].statistics.xtx.mechanism}-{m}" for r, m, _, _ in ENGINES]


@pytest.mark.parametrize("release, method, options, drawn", ENGINES, ids=IDS)
def test_the_engines_output_is_the_models_variables(release, method, options, drawn):
    model = observation_model(release)
    post = infer(release, method=method, seed=3, **options)
    assert sorted(post.posterior) == drawn
    assert list(post.posterior) == [v.name for v in model.variables if v.name in drawn]
    for name in drawn:
        v = model.variable(name)
        assert post.posterior[name].ndim == 2 + len(v.dims)
        assert post.dims.get(name, []) == list(v.dims)
        for d, labels in v.coords.items():
            assert post.coords[d] == list(labels)
    assert post.coords["coef"] == release.coef_names
    assert set(post.coords) == {d for name in drawn for d in model.variable(name).dims}
    assert post.family == "linear-regression" and post.method == method
    assert [v.support for v in model.variables] == ["real", "positive", "real"]


@pytest.mark.parametrize("release, method, options, drawn", ENGINES, ids=IDS)
def test_the_engines_pack_through_the_model(release, method, options, drawn, monkeypatch):
    calls = spy_on_pack(monkeypatch)
    infer(release, method=method, seed=4, **options)
    assert calls == [("linear-regression", method, drawn, [])]


def test_no_linear_regression_engine_builds_a_posterior_itself():
    for module in (linreg_common, linreg_normalx, linreg_fixeds, linreg_fast, linreg_bs, linreg_naive, linreg_adassp):
        assert not re.search(r"\bPosterior\(", inspect.getsource(module)), module.__name__


def test_each_block_is_measured_with_its_own_noise_scale():
    """Blocks of one party released at different sigma (here 1x, 2x and 3x the calibrated one, each still at least
    as private as stated): each measurement carries its own block's sigma, so a swap of two blocks' scales fails."""
    release = lr.make_release([X[:60], X[60:]], [Y[:60], Y[60:]], features=["a", "b"], epsilon=2.0, delta=1e-5,
                              x_norm=1.5, y_abs=1.0, intercept=True, mechanism="gaussian", split="xtx,xty,yty",
                              rng=8)
    blocks = release["parties"][0]["statistics"]
    base = blocks["xtx"]["sigma"]
    for factor, block in ((2.0, "xty"), (3.0, "yty")):
        blocks[block]["sigma"] = factor * base
    model = observation_model(load_release(release))
    assert [m.mechanism.sigma for m in model.measurements[:3]] == pytest.approx([base, 2 * base, 3 * base])
