"""Posterior.to_netcdf writes with h5netcdf alone: the file reads back through ArviZ (0.x or 1.x) identical to
the file ArviZ itself writes (``to_arviz().to_netcdf``) -- groups, variables, dtypes, dims, coords, values,
attributes (all but the write time)."""

from __future__ import annotations

import numpy as np
import pytest

az = pytest.importorskip("arviz")

from dpposterior.arviz_compat import arviz_major, group, group_names, read_netcdf, root_attrs  # noqa: E402
from dpposterior.posterior import Posterior  # noqa: E402


def posteriors():
    rng = np.random.default_rng(0)
    yield Posterior(  # every kind of content a dpposterior engine puts in a posterior
        family="test", method="m",
        posterior={"mu": rng.normal(size=(2, 50)), "p": rng.dirichlet([1, 1, 1], size=(2, 50)),
                   "beta": rng.normal(size=(2, 50, 2, 3)), "k": rng.integers(0, 5, size=(2, 50)),
                   "coef": rng.normal(size=(2, 50, 3))},
        dims={"p": ["category"], "coef": ["coef_dim"]},
        coords={"category": ["a", "b", "c"], "coef_dim": [0, 1, 2], "unused": ["x"]},
        posterior_predictive={"y_new": rng.normal(size=(2, 50))},
        sample_stats={"accepted": rng.random((2, 50)) < 0.5},
        attrs={"seed": 3, "constrained": True, "release_sha256": "abc", "bound": [0.0, 1.0], "obj": {"x": 1},
               "none": None, "rate": 0.25, "ks": np.array([1, 2]), "release_json": '{"family": "t"}'},
        warnings=["R-hat 1.2 > 1.01 for mu: ...", "second"], iid=False)
    padded = rng.dirichlet([1, 1, 1], size=(4, 20, 2))
    padded[..., 1, 2] = np.nan  # a ragged variable (naive Bayes feature_prob)
    yield Posterior(family="naive-bayes", method="vb", posterior={"feature_prob": padded},
                    dims={"feature_prob": ["feature", "level"]},
                    coords={"feature": ["f0", "f1"], "level": ["l0", "l1", "l2"]}, iid=True,
                    sample_stats={"lower_bound": rng.normal(size=(1, 1, 7))})  # VB's trace: its own chain/draw
    yield Posterior(family="gaussian", method="naive", posterior={"mu": rng.normal(size=(1, 3)).astype(np.float32)})


@pytest.mark.parametrize("post", list(posteriors()), ids=lambda p: p.family)
def test_file_reads_back_as_arviz_wrote_it(post, tmp_path):
    ours, theirs = tmp_path / "ours.nc", tmp_path / "theirs.nc"
    post.to_netcdf(ours)
    post.to_arviz().to_netcdf(str(theirs), engine="h5netcdf")
    a, b = read_netcdf(ours), read_netcdf(theirs)
    assert group_names(a) == group_names(b)
    for name in group_names(b):
        x, y = group(a, name), group(b, name)
        for ds in (x, y):
            ds.attrs.pop("created_at")
        assert x.identical(y), name
        for var in y.variables:
            assert x[var].dtype == y[var].dtype, (name, var)
            if arviz_major() < 1:  # ArviZ 0.x's writer compresses as ours; ArviZ 1's DataTree is xarray's (no gzip)
                assert x[var].encoding.get("zlib", False) == y[var].encoding.get("zlib", False), (name, var)
    a_attrs, b_attrs = root_attrs(a), root_attrs(b)
    assert list(a_attrs) == list(b_attrs)  # the file's root attributes
    for key, value in b_attrs.items():
        assert np.array_equal(a_attrs[key], value) and type(a_attrs[key]) is type(value), key
    assert not list(tmp_path.glob("*.tmp"))


def test_writing_needs_neither_arviz_nor_xarray(tmp_path):
    import subprocess
    import sys

    code = ("import sys, numpy as np; from dpposterior.posterior import Posterior; "
            "Posterior('t', 'm', {'mu': np.zeros((2, 5))}).to_netcdf(sys.argv[1]); "
            "print(sorted(m for m in ('arviz', 'xarray', 'pandas') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "p.nc")], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_float32_variables_are_stored_as_float32_and_sealed(tmp_path):
    """A large per-area variable named in ``float32_variables`` is written (and given to ArviZ) as float32,
    the file says so, the in-memory draws stay float64, and report's seal check accepts the file."""
    from dpposterior.report import load_posterior

    rng = np.random.default_rng(4)
    u = rng.normal(size=(2, 30, 50))
    post = Posterior("small-area", "exact-da", {"alpha": rng.normal(size=(2, 30, 3)), "u": u},
                     dims={"u": ["area"], "alpha": ["cell"]}, float32_variables=("u", "rate"))
    post.to_netcdf(tmp_path / "p.nc")
    idata = load_posterior(tmp_path / "p.nc")  # raises if draws_sha256 does not match the stored values
    assert idata.posterior["u"].dtype == np.float32 and idata.posterior["alpha"].dtype == np.float64
    np.testing.assert_array_equal(idata.posterior["u"].values, u.astype(np.float32))
    assert idata.attrs["float32_variables"] == "u"
    assert post.posterior["u"].dtype == np.float64 and post.posterior["u"] is u
    assert group(post.to_arviz(), "posterior")["u"].dtype == np.float32
    assert Posterior("t", "m", {"a": u}).netcdf_attrs()["float32_variables"] == "none"


def test_string_attributes_are_the_ones_h5py_writes_for_a_str(tmp_path):
    """Strings reach h5py as 0-d arrays of its variable-length UTF-8 type (no fixed-width copy of a release's JSON):
    the file holds the attribute h5py writes for the ``str`` itself, type and value."""
    import h5py

    from dpposterior.netcdf import _string_attrs

    attrs = {"short": "abc", "unicode": "é∂ x", "empty": "", "long": "[1, 2]" * 200_000, "n": 3, "x": 0.5}
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f.attrs.update(attrs)
    with h5py.File(tmp_path / "ours.h5", "w") as f:
        f.attrs.update(_string_attrs(attrs))
    with h5py.File(tmp_path / "plain.h5", "r") as plain, h5py.File(tmp_path / "ours.h5", "r") as ours:
        for key, value in attrs.items():
            a, b = plain.attrs.get_id(key), ours.attrs.get_id(key)
            assert a.get_type().equal(b.get_type()) and a.shape == b.shape, key
            assert ours.attrs[key] == plain.attrs[key] == value, key
