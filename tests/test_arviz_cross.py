"""A posterior file written under either ArviZ series reads back under the other: the committed files of
tests/data/arviz_cross/ (written once under ArviZ 0.23 on Python 3.11 and once under ArviZ 1.3 on Python 3.12,
by our writer and by ArviZ's: tests/_arviz_cross.py) are read with the installed ArviZ, through
``Posterior.read`` and through ArviZ itself, and compared with the posterior rebuilt deterministically: the
same groups, variables (in order), dtypes, dims, coords, values and attributes.  CI runs this under both
series (.ci/run).  Also: ``to_datatree()`` holds what ``to_arviz()`` holds, and ``Posterior.summary()`` is
ArviZ 0.23's table under either series."""

from __future__ import annotations

import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

pytest.importorskip("arviz")
xr = pytest.importorskip("xarray")

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _arviz_cross import DATA, FILES, SUMMARY, expected  # noqa: E402

from dpposterior import arviz_compat  # noqa: E402
from dpposterior.posterior import Posterior  # noqa: E402

#: attributes that say when and by which versions a file was written, not what it holds
WRITE_ATTRS = {"created_at", "arviz_version", "dpposterior_version"}


def _attrs(attrs) -> dict:
    return {k: v for k, v in dict(attrs).items() if k not in WRITE_ATTRS}


def _assert_same_attrs(got: dict, want: dict, where: str):
    got, want = _attrs(got), _attrs(want)
    assert sorted(got) == sorted(want), where
    for key, value in want.items():
        assert np.array_equal(np.asarray(got[key]), np.asarray(value)), (where, key, got[key], value)


def _expected_groups() -> dict:
    """group -> xarray.Dataset of the expected posterior (to_datatree, checked against to_arviz below)."""
    tree = expected().to_datatree()
    return {name: tree[name].to_dataset() for name in tree.children}


def test_the_fixtures_are_all_there():
    missing = [name for name in [*FILES, SUMMARY] if not (DATA / name).is_file()]
    assert not missing, f"regenerate with tests/_arviz_cross.py under each ArviZ: {missing}"


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_file_of_either_arviz_reads_back_through_posterior_read(name):
    want = expected()
    got = Posterior.read(DATA / name)
    assert (got.family, got.method, got.iid) == (want.family, want.method, want.iid)
    assert list(got.posterior) == list(want.posterior), name
    stored = want.stored()
    for var, values in stored.items():
        assert got.posterior[var].dtype == values.dtype, (name, var)
        np.testing.assert_array_equal(got.posterior[var], values, err_msg=f"{name}: {var}")
    assert got.dims == {**want.dims, "beta": ["beta_dim_0", "beta_dim_1"]}  # (unnamed dims as ArviZ names them)
    assert got.coords == {**want.coords, "beta_dim_0": [0, 1], "beta_dim_1": [0, 1, 2]}
    for group in ("posterior_predictive", "sample_stats"):
        mine, theirs = getattr(got, group), getattr(want, group)
        assert list(mine) == list(theirs), (name, group)
        for var, values in theirs.items():
            assert mine[var].dtype == values.dtype, (name, group, var)
            np.testing.assert_array_equal(mine[var], values)
    _assert_same_attrs(got.attrs, {k: v for k, v in want.netcdf_attrs().items() if k not in ("family", "method")},
                       name)
    # the seal report checks: the stored draws are bit for bit the expected ones
    assert got.attrs["draws_sha256"] == want.netcdf_attrs()["draws_sha256"]


@pytest.mark.parametrize("name", sorted(FILES))
def test_a_file_of_either_arviz_reads_with_the_installed_arviz(name):
    data = arviz_compat.read_netcdf(DATA / name)
    want = _expected_groups()
    assert arviz_compat.group_names(data) == list(want), name
    for group, ds in want.items():
        got = arviz_compat.group(data, group).load()
        assert list(got.data_vars) == list(ds.data_vars), (name, group)
        for var in ds.variables:
            assert got[var].dims == ds[var].dims, (name, group, var)
            assert got[var].dtype == ds[var].dtype or (got[var].dtype.kind in "OU" and ds[var].dtype.kind in "OU"), \
                (name, group, var, got[var].dtype, ds[var].dtype)
            np.testing.assert_array_equal(got[var].values, ds[var].values, err_msg=f"{name}: {group}/{var}")
        _assert_same_attrs(got.attrs, ds.attrs, f"{name}: {group}")
    _assert_same_attrs(arviz_compat.root_attrs(data), expected().netcdf_attrs(), f"{name}: root")


def test_to_datatree_holds_what_to_arviz_holds():
    post = expected()
    tree, data = post.to_datatree(), post.to_arviz()
    assert isinstance(tree, xr.DataTree)
    assert list(tree.children) == arviz_compat.group_names(data)
    for group in tree.children:
        mine, theirs = tree[group].to_dataset(), arviz_compat.group(data, group)
        _assert_same_attrs(mine.attrs, theirs.attrs, group)
        assert set(mine.attrs) == set(theirs.attrs), group  # created_at and arviz_version included
        mine, theirs = mine.copy(), theirs.copy()
        mine.attrs, theirs.attrs = {}, {}
        xr.testing.assert_identical(mine, theirs)
        assert list(mine.data_vars) == list(theirs.data_vars)
        for var in theirs.variables:
            assert mine[var].dtype == theirs[var].dtype, (group, var)
    _assert_same_attrs(tree.attrs, arviz_compat.root_attrs(data), "root")
    assert list(tree.attrs) == list(arviz_compat.root_attrs(data))
    back = Posterior.from_arviz(tree)
    assert list(back.posterior) == list(post.posterior)
    for var, values in post.stored().items():
        np.testing.assert_array_equal(back.posterior[var], values)


def test_to_datatree_matches_arviz1_from_dict():
    """Under ArviZ 1, the DataTree is what ArviZ 1's own ``from_dict`` builds of the same draws."""
    if arviz_compat.arviz_major() < 1:
        pytest.skip("ArviZ 1 only")
    from arviz_base import from_dict

    post = expected()
    stored = post.stored()
    theirs = from_dict({"posterior": stored, "posterior_predictive": post.posterior_predictive,
                        "sample_stats": post.sample_stats}, dims=post.dims, coords=post.coords)
    mine = post.to_datatree()
    for group in ("posterior", "posterior_predictive", "sample_stats"):
        a, b = mine[group].to_dataset(), theirs[group].to_dataset()
        a.attrs, b.attrs = {}, {}
        xr.testing.assert_equal(a, b)


def test_to_datatree_written_by_xarray_reads_back(tmp_path):
    post = expected()
    post.to_datatree().to_netcdf(tmp_path / "p.nc", engine="h5netcdf")
    back = Posterior.read(tmp_path / "p.nc")
    for var, values in post.stored().items():
        np.testing.assert_array_equal(back.posterior[var], values)
    assert back.attrs["draws_sha256"] == post.netcdf_attrs()["draws_sha256"]


def test_release_text_is_a_file_attribute_read_back(tmp_path):
    """``release_json`` is on the file's root only (netcdf.FILE_ONLY_ATTRS), in the file infer writes and in the
    DataTree of to_datatree, and Posterior.read gives it back among the posterior's attrs."""
    post = expected()
    post.attrs["release_json"] = '{"family": "t", "n": 3}'
    post.to_netcdf(tmp_path / "p.nc")
    tree = post.to_datatree()
    assert tree.attrs["release_json"] == post.attrs["release_json"] and "release_json" not in tree["posterior"].attrs
    with h5py.File(tmp_path / "p.nc", "r") as fh:
        assert "release_json" in fh.attrs and "release_json" not in fh["posterior"].attrs
    assert Posterior.read(tmp_path / "p.nc").attrs["release_json"] == post.attrs["release_json"]


def test_summary_is_arviz0_summary_under_either_arviz():
    """``Posterior.summary()``: 95% HDI, ArviZ 0.23's columns and rounding -- the stored ArviZ 0.23 table,
    whichever ArviZ is installed (ArviZ 1's own summary would give an 89% equal-tailed interval)."""
    import pandas as pd

    ref = pd.read_csv(DATA / SUMMARY, index_col=0)
    got = expected().summary()
    assert list(got.columns) == list(ref.columns)
    assert list(got.index) == list(ref.index)
    np.testing.assert_allclose(got.to_numpy(float), ref.to_numpy(float), rtol=0, atol=1e-12)


def test_psis_under_either_arviz():
    """``arviz_compat.psislw`` (the SBI engines' importance correction): normalised smoothed log weights and a
    k-hat within 0.01 of ArviZ 0.23's on the same weights (ArviZ 1 fits the Pareto tail with its own estimator:
    0.2460 against 0.2458 here)."""
    from scipy.special import logsumexp

    lw = np.random.default_rng(1).normal(size=2000)
    smoothed, khat = arviz_compat.psislw(lw - lw.max())
    assert smoothed.shape == lw.shape and abs(logsumexp(smoothed)) < 1e-12
    assert abs(khat - 0.2457677070813161) < 0.01
    if arviz_compat.arviz_major() < 1:
        assert khat == pytest.approx(0.2457677070813161, abs=1e-12)


def test_reading_leaves_the_file_closed(tmp_path):
    """After ``Posterior.read`` the file can be opened for writing again at once (under ArviZ 1 a DataTree's
    reference cycle kept the lazily read file open until the garbage collector ran)."""
    import h5py

    path = tmp_path / "p.nc"
    expected().to_netcdf(path)
    before = Posterior.read(path)
    with h5py.File(path, "r+") as fh:
        fh["posterior/mu"][0, 0] = 1.0
    assert Posterior.read(path).posterior["mu"][0, 0] == 1.0 != before.posterior["mu"][0, 0]
