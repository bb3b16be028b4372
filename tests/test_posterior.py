"""Posterior container -> ArviZ InferenceData / netCDF round trip."""

import arviz as az
import numpy as np
import pytest

from dpposterior import __version__
from dpposterior.posterior import Posterior


def make_post():
    rng = np.random.default_rng(0)
    return Posterior(
        family="test", method="m",
        posterior={"mu": rng.normal(size=(2, 50)), "p": rng.dirichlet([1, 1, 1], size=(2, 50))},
        dims={"p": ["category"]}, coords={"category": ["a", "b", "c"]},
        posterior_predictive={"y_new": rng.normal(size=(2, 50))},
        sample_stats={"accept": np.ones((2, 50))},
        attrs={"seed": 3, "constrained": True, "release_sha256": "abc", "bound": [0.0, 1.0], "obj": {"x": 1}},
    )


def test_to_arviz_groups_dims_attrs():
    from dpposterior.arviz_compat import group_names

    idata = make_post().to_arviz()  # an InferenceData under ArviZ 0.x, a DataTree under ArviZ 1.x
    assert set(group_names(idata)) >= {"posterior", "posterior_predictive", "sample_stats"}
    assert idata.posterior["p"].dims == ("chain", "draw", "category")
    assert list(idata.posterior["category"].values) == ["a", "b", "c"]
    attrs = idata.posterior.attrs
    assert attrs["method"] == "m" and attrs["family"] == "test"
    assert attrs["dpposterior_version"] == __version__
    assert attrs["seed"] == 3 and attrs["constrained"] == 1


def test_netcdf_round_trip(tmp_path):
    post = make_post()
    path = tmp_path / "post.nc"
    post.to_netcdf(path)
    idata = az.from_netcdf(path, engine="h5netcdf")
    np.testing.assert_array_equal(idata.posterior["mu"].values, post.posterior["mu"])
    assert idata.posterior.attrs["release_sha256"] == "abc"
    assert not list(tmp_path.glob("*.tmp"))


def test_summary_has_hpd_columns():
    df = make_post().summary(hdi_prob=0.95)
    assert "hdi_2.5%" in df.columns and "hdi_97.5%" in df.columns
    assert "mu" in df.index


def test_posterior_requires_chain_draw_axes():
    with pytest.raises(ValueError, match="chain, draw"):
        Posterior(family="t", method="m", posterior={"mu": np.zeros(10)})


def test_engines_say_whether_their_draws_are_iid_and_the_file_keeps_it(tmp_path):
    """Whether draws are independent is stored on the posterior by the engine, not looked up
    by method name: 'naive' is an exact conjugate sampler for the Gaussian family but a Gibbs chain
    (checked with R-hat/ESS) for linear regression."""
    import arviz as az
    import numpy as np

    from dpposterior import infer
    from dpposterior.families import get_family

    rng = np.random.default_rng(5)
    gaussian = get_family("gaussian")
    g_release = gaussian.simulate(gaussian.parse_prior(None, None), 50, 1.0, rng).release
    lr = get_family("linear-regression")
    lr_release = lr.simulate(lr.parse_prior(None, None), 200, 1.0, rng).release
    assert infer(g_release, method="naive", draws=50, chains=2, seed=1).iid
    assert not infer(g_release, method="gibbs", draws=50, warmup=50, chains=2, seed=1).iid
    naive_lr = infer(lr_release, method="naive", draws=50, warmup=50, chains=2, seed=1)
    assert not naive_lr.iid and naive_lr.method == "naive"
    assert infer(lr_release, method="bayes-fixeds-fast", draws=50, chains=2, seed=1).iid
    path = tmp_path / "post.nc"
    naive_lr.to_netcdf(path)
    assert int(az.from_netcdf(path).posterior.attrs["iid_draws"]) == 0


@pytest.mark.parametrize("text, said, hint", [
    ('{"format": "dpposterior-release/1", "family": "marginals"}',
     "is a release (dpposterior-release/1), not a posterior (netCDF); a release is analysed first: dpposterior infer",
     True),
    ('{"methods": {"naive": {}}}', "is a JSON file, not a posterior (netCDF)", False),
    ('{"format": "other/2"}', "is a JSON file (other/2), not a posterior (netCDF)", False),
    ("not a netCDF file", "cannot read a posterior file (OSError", False),
])
def test_a_file_that_is_not_a_posterior_is_named_in_one_line(tmp_path, text, said, hint):
    from dpposterior.errors import InputError

    path = tmp_path / "rel.json"
    path.write_text(text)
    with pytest.raises(InputError) as info:
        Posterior.read(path)
    message = str(info.value)
    assert message.startswith("posterior: ") and said in message, message
    assert ("dpposterior infer" in message) == hint, message  # the infer hint only for a release
    assert "\n" not in message


def test_the_release_format_check_knows_the_release_layers_format():
    from dpposterior.marginals_io import FORMAT as MARGINALS_FORMAT
    from dpposterior.posterior import is_release_format
    from dpposterior.release import FORMAT

    assert is_release_format(FORMAT) and is_release_format(MARGINALS_FORMAT)
    assert not is_release_format("dpposterior-posterior/1") and not is_release_format(None)
