"""The census family's observation model: its variables are what ``da`` stores (and ``naive``'s ``counts``), its
one measurement is the release's noisy rows under each row's discrete Gaussian, its prior draws what the model
says, and both engines name their draws through its ``pack``, once."""

import numpy as np
import pytest
from _observation import spy_on_pack

from dpposterior.families import get_family
from dpposterior.families.census import CensusPrior, observation_model
from dpposterior.inference import census_da as cd
from dpposterior.mechanisms.discrete_gaussian import DiscreteGaussian
from dpposterior.observation import ENUMERATE, RECORDS, SIMULATE

from test_census import _small_release

RELEASE, TRUTH = _small_release()


def test_the_family_registers_its_observation_model():
    assert get_family("census").hooks["observation_model"] is observation_model


def test_the_variables_are_the_engines_outputs():
    model = observation_model(RELEASE, None)
    s = RELEASE.structure
    assert [v.name for v in model.variables] == ["alpha", "beta", "tau", "block_group_mean", "tract_mix",
                                                 "mix_shape", "mix_rate", "counts"]
    assert model.variable("counts").coords == {"block": s.blocks, "cell": s.cell_labels()}
    post = cd.census_da(RELEASE.observation_model(None),
                        cd.CensusDAOptions(draws=4, warmup=2, chains=1, seed=1, quiet=True))
    assert list(post.posterior) == [v.name for v in model.variables]
    assert post.dims == {v.name: list(v.dims) for v in model.variables if v.dims}
    assert post.coords["block"] == list(s.blocks) and post.coords["cell"] == s.cell_labels()
    assert post.float32_variables == ("tract_mix", "block_group_mean")
    # the rates are pinned by their log sum, 0 in every draw
    np.testing.assert_allclose(np.sum(np.log(post.posterior["mix_rate"]), axis=-1), 0.0, atol=1e-9)
    np.testing.assert_allclose(np.sum(post.posterior["tract_mix"], axis=-1), 1.0, rtol=1e-6)
    naive = cd.census_naive(RELEASE.observation_model(None), cd.CensusNaiveOptions(draws=4, chains=1, seed=1))
    assert list(naive.posterior) == ["counts"] and naive.dims == {"counts": ["block", "cell"]} and naive.iid


def test_the_measurement_is_the_noisy_rows_of_the_true_histogram():
    s = RELEASE.structure
    (m,) = observation_model(RELEASE, None).measurements
    np.testing.assert_array_equal(m.values, s.noisy)
    assert m.query.shape == (s.M,) and m.integer_noise
    # the query aggregates the histogram to every measured row: the noise is what is left
    exact = m.query(TRUTH)
    for r in range(0, s.M, 7):
        assert exact[r] == s.aggregate(TRUTH, int(s.level[r]), int(s.query[r]))[s.unit[r], s.cell[r]]
    expect = sum(float(DiscreteGaussian(float(s.sigma[r])).logpdf(s.noisy[r], exact[r])) for r in range(s.M))
    assert m.log_likelihood(exact) == pytest.approx(expect, rel=1e-10)


def test_the_latent_statistic_and_the_prior():
    model = observation_model(RELEASE, {"size_mean": 10.0})
    s = RELEASE.structure
    assert model.latent.capabilities == frozenset({RECORDS, ENUMERATE, SIMULATE})
    assert model.prior.parameters == CensusPrior(size_mean=10.0).as_dict()
    draw = model.prior.sample(np.random.default_rng(0))
    assert set(draw) == {v.name for v in model.variables}
    assert draw["counts"].shape == (s.B, s.C) and np.all(draw["counts"] >= 0)
    np.testing.assert_allclose(draw["tract_mix"].sum(axis=1), 1.0)
    assert np.ndim(draw["mix_shape"]) == 0 and draw["mix_shape"] > 0
    assert np.sum(np.log(draw["mix_rate"])) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("method", ["da", "naive"])
def test_the_engines_pack_through_the_model_once(method, monkeypatch):
    calls = spy_on_pack(monkeypatch, variables=True)
    if method == "da":
        cd.census_da(RELEASE.observation_model(None),
                     cd.CensusDAOptions(draws=3, warmup=2, chains=1, seed=1, quiet=True))
        names = ("alpha", "beta", "tau", "block_group_mean", "tract_mix", "mix_shape", "mix_rate", "counts")
    else:
        cd.census_naive(RELEASE.observation_model(None), cd.CensusNaiveOptions(draws=3, chains=1, seed=1))
        names = ("counts",)
    assert calls == [("census", method, names)]


def test_the_rows_laws_are_found_once_and_a_table_of_several_has_no_single_residual_table():
    """The measurement's mechanism: one discrete Gaussian per distinct published sigma, kept after first use; its
    log density is each row's own law's; a single residual table exists only where one sigma covers every row
    (the one-law case: tests/test_observation_small_area.py)."""
    from dpposterior.errors import InputError

    (m,) = observation_model(RELEASE).measurements
    laws, index = m.mechanism.laws()
    assert m.mechanism.laws()[0] is laws and m.integer_noise
    sigma = RELEASE.structure.sigma
    assert [law.sigma for law in laws] == sorted(set(sigma.tolist()))
    s = np.maximum(m.values, 0)
    expect = sum(float(DiscreteGaussian(float(sd)).logpdf(y, x)) for y, x, sd in zip(m.values, s, sigma))
    assert float(np.sum(m.mechanism.logpdf(m.values, s))) == pytest.approx(expect)
    assert len(laws) == 5  # the small release's five sigmas: no one residual table
    with pytest.raises(InputError, match="measurements: the rows have different noise laws"):
        m.mechanism.logpmf(np.arange(-2, 3))
