"""The count families' observation models (binomial, multinomial, poisson; exponential shares their engines):
their variables are the engines' output, their one measurement is the release's noisy statistic, their latent
statistic offers what it claims, their prior is the conjugate prior, and the engines ``gibbs-ss``, ``naive``,
``non-private``, ``ops`` and ``exact`` build their posterior through its ``pack``."""

import inspect

import numpy as np
import pytest
from _observation import spy_on_pack
from scipy import stats

from dpposterior import infer
from dpposterior.errors import InputError
from dpposterior.families import get_family
from dpposterior.families._expfam import CategoryCounts, SufficientStatistic, SuccessCount, TruncatedSum
from dpposterior.inference import exact_counts, expfam_baselines, gibbs_ss
from dpposterior.observation import ENUMERATE, MOMENTS, RECORDS, SIMULATE
from dpposterior.release import FORMAT, load_release

pytestmark = pytest.mark.filterwarnings("ignore::dpposterior.errors.PosteriorWarning")

BINOMIAL = load_release({"format": FORMAT, "family": "binomial", "n": 40,
                         "statistics": {"successes": {"value": 17.3, "mechanism": "laplace", "epsilon": 0.5}}})
BINOMIAL_DG = load_release({"format": FORMAT, "family": "binomial", "n": 40,
                            "statistics": {"successes": {"value": 15, "mechanism": "discrete-gaussian",
                                                         "sigma": 2.0}}})
MULTINOMIAL = load_release({"format": FORMAT, "family": "multinomial", "n": 30, "categories": ["red", "green", "blue"],
                            "statistics": {"counts": {"value": [11.3, 9.1, 10.4], "mechanism": "laplace",
                                                      "epsilon": 1.0}}})
POISSON = load_release({"format": FORMAT, "family": "poisson", "n": 30, "bounds": [0, 6],
                        "statistics": {"truncated_sum": {"value": 70, "mechanism": "discrete-laplace",
                                                         "epsilon": 1.0}}})
POISSON_LAPLACE = load_release({"format": FORMAT, "family": "poisson", "n": 30, "bounds": [1, 6],
                                "statistics": {"truncated_sum": {"value": 64.2, "mechanism": "laplace",
                                                                 "epsilon": 1.0}}})
EXPONENTIAL = load_release({"format": FORMAT, "family": "exponential", "n": 25, "bounds": [0.5, 4.0],
                            "statistics": {"truncated_sum": {"value": 30.5, "mechanism": "laplace", "epsilon": 1.0}}})
BETA = {"kind": "beta", "alpha": 2.0, "beta": 3.0}
DIRICHLET = {"kind": "dirichlet", "alpha": [1.0, 2.0, 3.0]}
GAMMA = {"kind": "gamma", "shape": 2.0, "rate": 0.5}
PRIORS = {"binomial": BETA, "multinomial": DIRICHLET, "poisson": GAMMA, "exponential": GAMMA}


def model_of(release, prior=None):
    return get_family(release.family).hooks["observation_model"](release, prior)


@pytest.mark.parametrize("family", ["binomial", "multinomial", "poisson", "exponential"])
def test_each_family_registers_its_observation_model(family):
    hook = get_family(family).hooks["observation_model"]
    assert hook.__module__ == f"dpposterior.families.{family}" and hook.__name__ == "observation_model"


def test_the_binomial_measurement_is_the_noisy_count_of_successes():
    model = model_of(BINOMIAL, BETA)
    assert model.family == "binomial" and model.n == 40 and model.attrs == {}
    (m,) = model.measurements
    assert m.name == "statistics.successes" and m.values.shape == () and float(m.values) == 17.3
    assert m.mechanism.name == "laplace" and m.mechanism.scale == pytest.approx(1.0 / 0.5) and not m.integer_noise
    records = np.array([1, 0, 1, 1, 0], float)
    assert isinstance(m.query, SuccessCount) and float(m.query(records)) == 3.0
    assert model.log_likelihood({"statistics.successes": 16.0}) == pytest.approx(
        stats.laplace.logpdf(17.3, 16.0, 2.0))
    (dg,) = model_of(BINOMIAL_DG).measurements
    assert dg.mechanism.name == "discrete-gaussian" and dg.integer_noise and float(dg.values) == 15.0
    # the discrete Gaussian N_Z(0, sigma^2): mass proportional to exp(-k^2 / (2 sigma^2)) on the integers
    k = np.arange(-60, 61)
    log_mass = -k**2 / 8.0 - np.log(np.exp(-k**2 / 8.0).sum())
    assert dg.residual_log_mass(-3, 3) == pytest.approx(log_mass[57:64])


def test_the_multinomial_measurement_is_the_noisy_counts_per_category():
    model = model_of(MULTINOMIAL, DIRICHLET)
    (m,) = model.measurements
    assert m.name == "statistics.counts" and m.values.tolist() == [11.3, 9.1, 10.4]
    # one record moves between two categories: L1 sensitivity 2
    assert m.mechanism.name == "laplace" and m.mechanism.scale == pytest.approx(2.0)
    assert isinstance(m.query, CategoryCounts) and m.query.shape == (3,)
    assert m.query(np.array([0, 2, 2, 1, 2])).tolist() == [1.0, 1.0, 3.0]
    s = np.array([11.0, 9.0, 10.0])
    assert model.log_likelihood({"statistics.counts": s}) == pytest.approx(
        stats.laplace.logpdf([11.3, 9.1, 10.4], s, 2.0).sum())


def test_the_truncated_sum_measurements_sum_the_records_inside_the_bounds():
    model = model_of(POISSON, GAMMA)
    (m,) = model.measurements
    assert m.name == "statistics.truncated_sum" and float(m.values) == 70.0
    # replace-one sensitivity max(|a|, |b|, b - a) = 6; discrete Laplace with mass proportional to exp(-|k| / 6)
    assert m.mechanism.name == "discrete-laplace" and m.integer_noise
    assert model.log_likelihood({"statistics.truncated_sum": 64.0}) == pytest.approx(
        stats.dlaplace.logpmf(6, 1.0 / 6.0))
    assert isinstance(m.query, TruncatedSum) and (m.query.lo, m.query.hi) == (0.0, 6.0)
    assert float(m.query(np.array([0, 3, 7, 6, 2]))) == 11.0
    (e,) = model_of(EXPONENTIAL).measurements
    assert float(e.query(np.array([0.2, 0.5, 1.5, 4.0, 4.5]))) == 6.0
    assert e.mechanism.scale == pytest.approx(4.0)


@pytest.mark.parametrize("release, capabilities", [
    (BINOMIAL, {RECORDS, ENUMERATE, MOMENTS, SIMULATE}), (MULTINOMIAL, {RECORDS, ENUMERATE, MOMENTS, SIMULATE}),
    (POISSON, {ENUMERATE, MOMENTS, SIMULATE}), (EXPONENTIAL, {MOMENTS, SIMULATE})],
    ids=["binomial", "multinomial", "poisson", "exponential"])
def test_the_latent_statistic_advertises_what_the_families_engines_do(release, capabilities):
    model = model_of(release)
    assert model.latent.capabilities == capabilities
    model.competent(capabilities, "x")
    for missing in {RECORDS, ENUMERATE} - capabilities:
        with pytest.raises(InputError, match=missing):
            model.competent([missing], "x")
    # where it offers records, the family has a record model for da-mcmc; where it enumerates, an exact engine
    family = get_family(release.family)
    assert (RECORDS in capabilities) == ("da-mcmc" in family.methods)
    assert (ENUMERATE in capabilities) == ("exact" in family.methods)
    state = model.latent.state
    assert isinstance(state, SufficientStatistic) and state.n == release.n
    assert state.query is model.measurements[0].query


@pytest.mark.parametrize("release, theta", [
    (BINOMIAL, 0.3), (MULTINOMIAL, np.array([0.2, 0.5, 0.3])), (POISSON, 2.5), (POISSON_LAPLACE, 4.0),
    (EXPONENTIAL, 0.7)], ids=["binomial", "multinomial", "poisson", "poisson-lower-bound", "exponential"])
def test_the_simulator_has_the_moments_it_advertises(release, theta):
    state = model_of(release).latent.state
    rng = np.random.default_rng(5)
    draws = np.array([state.simulate(theta, rng) for _ in range(20_000)])
    mean, var = state.moments(theta)
    mean, var = np.asarray(mean), np.asarray(var)
    if draws.ndim == 1:
        assert draws.mean() == pytest.approx(float(mean), abs=4 * np.sqrt(float(var) / len(draws)))
        assert draws.var() == pytest.approx(float(var), rel=0.05)
    else:
        assert np.allclose(draws.mean(axis=0), mean, atol=4 * np.sqrt(np.diag(var) / len(draws)))
        assert np.allclose(np.cov(draws.T), var, rtol=0.05, atol=0.05 * np.abs(var).max())
    records = state.records(theta, rng)
    assert len(records) == release.n


def test_the_priors_sample_and_evaluate_the_conjugate_laws():
    beta = model_of(BINOMIAL, BETA).prior
    assert beta.parameters == BETA and beta.describe == "beta(2, 3)"
    p = np.array([beta.sample(np.random.default_rng(s))["p"] for s in range(4000)])
    assert p.mean() == pytest.approx(0.4, abs=0.01)
    assert beta.log_density({"p": 0.3}) == pytest.approx(stats.beta.logpdf(0.3, 2.0, 3.0))
    assert beta.log_density({"p": 1.2}) == -np.inf

    dirichlet = model_of(MULTINOMIAL, DIRICHLET).prior
    assert dirichlet.parameters == {"kind": "dirichlet", "alpha": [1.0, 2.0, 3.0]}
    draws = np.array([dirichlet.sample(np.random.default_rng(s))["p"] for s in range(4000)])
    assert draws.shape == (4000, 3) and np.allclose(draws.mean(axis=0), [1 / 6, 2 / 6, 3 / 6], atol=0.01)
    q = np.array([0.2, 0.3, 0.5])
    assert dirichlet.log_density({"p": q}) == pytest.approx(stats.dirichlet.logpdf(q, [1.0, 2.0, 3.0]))
    assert dirichlet.log_density({"p": np.array([0.2, 0.3, 0.6])}) == -np.inf
    symmetric = model_of(MULTINOMIAL, {"kind": "dirichlet", "alpha": 1.5}).prior
    assert symmetric.log_density({"p": q}) == pytest.approx(stats.dirichlet.logpdf(q, [1.5] * 3))

    for release in (POISSON, EXPONENTIAL):
        gamma = model_of(release, GAMMA).prior
        assert gamma.parameters == GAMMA
        rate = np.array([gamma.sample(np.random.default_rng(s))["rate"] for s in range(4000)])
        assert rate.mean() == pytest.approx(4.0, rel=0.05)
        assert gamma.log_density({"rate": 1.7}) == pytest.approx(stats.gamma.logpdf(1.7, 2.0, scale=2.0))
        assert gamma.log_density({"rate": -1.0}) == -np.inf
    # the family's default prior when none is given
    assert model_of(BINOMIAL).prior.parameters == {"kind": "beta", "alpha": 1.0, "beta": 1.0}


MC = dict(draws=30, warmup=30, chains=2)
IID = dict(draws=30, chains=2)
CONFIDENTIAL = {"binomial": {"successes": 17}, "multinomial": {"counts": [11, 9, 10]},
                "poisson": {"sum": 66.0}, "exponential": {"sum": 31.0}}
ENGINES = [(BINOMIAL, "gibbs-ss", MC), (BINOMIAL, "naive", IID), (BINOMIAL, "non-private", IID),
           (BINOMIAL, "ops", {}), (BINOMIAL, "exact", IID), (BINOMIAL_DG, "exact", IID),
           (MULTINOMIAL, "gibbs-ss", MC), (MULTINOMIAL, "naive", IID), (MULTINOMIAL, "non-private", IID),
           (MULTINOMIAL, "exact", IID),
           (POISSON_LAPLACE, "gibbs-ss", MC), (POISSON_LAPLACE, "naive", IID), (POISSON, "non-private", IID),
           (POISSON, "exact", IID),
           (EXPONENTIAL, "gibbs-ss", MC), (EXPONENTIAL, "naive", IID), (EXPONENTIAL, "non-private", IID)]
IDS = [f"{r.family}-{r.noisy_record.mechanism}-{m}" for r, m, _ in ENGINES]


def run(release, method, options, seed=3):
    extra = {"confidential": CONFIDENTIAL[release.family]} if method in ("non-private", "ops") else {}
    return infer(release, PRIORS[release.family], method, seed=seed, **options, **extra)


@pytest.mark.parametrize("release, method, options", ENGINES, ids=IDS)
def test_the_engines_output_is_the_models_variables(release, method, options):
    model = model_of(release, PRIORS[release.family])
    post = run(release, method, options)
    (variable,) = model.variables
    assert list(post.posterior) == [variable.name]
    assert post.posterior[variable.name].ndim == 2 + len(variable.dims)
    assert post.family == release.family and post.method == method and post.posterior_predictive == {}
    if variable.dims:
        assert post.dims[variable.name] == list(variable.dims) == ["category"]
        assert post.coords == {"category": ["red", "green", "blue"]} == {
            d: list(labels) for d, labels in variable.coords.items()}
        if "statistic" in post.sample_stats:  # the imputed counts are labelled as the probabilities
            assert post.dims["statistic"] == ["category"]
            assert post.sample_stats["statistic"].shape == post.posterior["p"].shape
        ds = post.dataset()
        assert ds["p"].dims == ("chain", "draw", "category") and list(ds["category"].values) == variable.coords[
            "category"]
    else:
        assert post.dims == {} and post.coords == {}
    assert variable.support == {"p": "simplex" if variable.dims else "unit", "rate": "positive"}[variable.name]
    assert post.attrs["prior"] == str(get_family(release.family).parse_prior(PRIORS[release.family]).to_dict())


@pytest.mark.parametrize("release, method, options", ENGINES, ids=IDS)
def test_the_engines_pack_through_the_model(release, method, options, monkeypatch):
    calls = spy_on_pack(monkeypatch)
    run(release, method, options, seed=4)
    assert calls == [(release.family, method, [release.expfam.variable], [])]


def test_no_count_family_engine_builds_a_posterior_itself():
    for module in (gibbs_ss, expfam_baselines, exact_counts):
        assert "Posterior(" not in inspect.getsource(module), module.__name__


def test_pack_checks_the_sample_statistics_dims():
    model = model_of(MULTINOMIAL)
    draws = {"p": np.full((1, 2, 3), 1 / 3)}
    post = model.pack(draws, "x", sample_stats={"statistic": np.zeros((1, 2, 3))},
                      sample_stats_dims={"statistic": ("category",)})
    assert post.dims == {"p": ["category"], "statistic": ["category"]}
    with pytest.raises(ValueError, match="not a sample statistic"):
        model.pack(draws, "x", sample_stats_dims={"statistic": ("category",)})
    with pytest.raises(ValueError, match="event axes"):
        model.pack(draws, "x", sample_stats={"statistic": np.zeros((1, 2))},
                   sample_stats_dims={"statistic": ("category",)})
    with pytest.raises(ValueError, match="event axes"):
        model.pack({"p": np.zeros((1, 2))}, "x")
