"""The census ``da`` engine's partitions: the partitioned sweep on a Dask LocalCluster gives, bit for bit, the
draws of the same sweep in this process, for any number of partitions; the options are refused where unused.
(The partitioned sweep's law is checked against enumeration in tests/test_census.py.)"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("distributed")

import dpposterior as dp  # noqa: E402
from dpposterior.errors import InputError, RefusedError  # noqa: E402
from test_census import _small_release  # noqa: E402
from test_small_area_dask import _same, local_cluster  # noqa: E402,F401  (the LocalCluster fixture)

RUN = dict(draws=8, warmup=6, chains=2, seed=3, quiet=True)
# draws this few are flagged (R-hat, ESS): the tests compare draws, not posteriors
pytestmark = pytest.mark.filterwarnings("ignore::dpposterior.PosteriorWarning")


@pytest.mark.parametrize("level", ["county", "tract"])
def test_identical_draws_for_any_partitioning(local_cluster, level):
    release, x = _small_release()
    serial = dp.infer(release, partition=level, **RUN)
    assert serial.attrs["partition"] == level and serial.attrs["partitions"] == 1
    for parts in (1, 2, 3):
        post = dp.infer(release, scheduler=local_cluster, partition=level, partitions=parts, **RUN)
        assert post.attrs["partitions"] == min(parts, 2)  # two counties, one tract each
        _same(serial, post)
    assert np.all(serial.posterior["counts"].sum(axis=(2, 3)) == x.sum())
    # the one-pass sweep is another chain (other moves' order and streams), not these draws
    assert not np.array_equal(dp.infer(release, **RUN).posterior["counts"], serial.posterior["counts"])


def test_dask_defaults_to_county_partitions(local_cluster):
    release, _ = _small_release()
    post = dp.infer(release, scheduler=local_cluster, **RUN)
    assert post.attrs["partition"] == "county" and post.attrs["partitions"] == 2
    _same(post, dp.infer(release, partition="county", **RUN))


def test_partition_options_are_refused_where_unused():
    release, _ = _small_release()
    with pytest.raises(RefusedError, match="partitions"):
        dp.infer(release, partitions=2, **RUN)
    with pytest.raises(InputError, match="partition.*above the block"):
        dp.infer(release, partition="block", **RUN)
    with pytest.raises(InputError, match="partition.*above the block"):
        dp.infer(release, partition="district", **RUN)
