"""The posterior of the cross-version fixtures (tests/data/arviz_cross/, tests/test_arviz_cross.py) and their
generator.

ArviZ 0.x (Python 3.11) and 1.x (Python >= 3.12) are never installed together, so each writes its files here
once and the files are committed; every test run then reads all of them with whatever ArviZ it has.  The
posterior itself is rebuilt deterministically (:func:`expected`), so the test compares each file with it.

Run ``python tests/_arviz_cross.py`` once under each ArviZ: it writes the files of the installed version
(and, under ArviZ 0.x, the reference summary table of ArviZ 0.23's ``az.summary``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

DATA = Path(__file__).resolve().parent / "data" / "arviz_cross"
#: file -> how it was written: by which ArviZ series, through which writer
FILES = {
    "arviz0_ours.nc": "ArviZ 0.23, Posterior.to_netcdf (dpposterior.netcdf, h5netcdf)",
    "arviz0_arviz.nc": "ArviZ 0.23, to_arviz().to_netcdf(engine='h5netcdf') (ArviZ's own writer)",
    "arviz1_ours.nc": "ArviZ 1.3, Posterior.to_netcdf (dpposterior.netcdf, h5netcdf)",
    "arviz1_datatree.nc": "ArviZ 1.3, to_datatree().to_netcdf(engine='h5netcdf') (ArviZ 1's container, xarray's writer)",
}
#: ArviZ 0.23's az.summary(hdi_prob=0.95) of :func:`expected` (what Posterior.summary gives under both)
SUMMARY = "summary_arviz0.csv"


def expected():
    """Every kind of content an engine puts in a posterior file: named and unnamed event dims, string and
    integer coordinates, float64, float32 (``float32_variables``), int64 and boolean variables, a posterior
    predictive and sample stats, attributes of each netCDF type."""
    from dpposterior.posterior import Posterior

    rng = np.random.default_rng(20240511)
    chains, draws = 2, 40
    return Posterior(
        family="test", method="cross",
        posterior={"mu": rng.normal(size=(chains, draws)),
                   "p": rng.dirichlet([1.0, 2.0, 3.0], size=(chains, draws)),
                   "beta": rng.normal(size=(chains, draws, 2, 3)),
                   "rate": rng.gamma(2.0, size=(chains, draws, 4)),
                   "k": rng.integers(0, 5, size=(chains, draws))},
        dims={"p": ["category"], "rate": ["area"]},
        coords={"category": ["a", "b", "c"], "area": [10, 20, 30, 40]},
        posterior_predictive={"y_new": rng.normal(size=(chains, draws))},
        sample_stats={"accepted": rng.random((chains, draws)) < 0.5, "lp": rng.normal(size=(chains, draws))},
        attrs={"seed": 7, "n": 100, "release_sha256": "abc", "bounds": [0.0, 1.0], "rate_scale": 0.25},
        warnings=["R-hat 1.2 > 1.01 for mu"], float32_variables=("rate",))


def write(directory: Path = DATA) -> list[Path]:
    """Write the files of the installed ArviZ series into ``directory``."""
    from dpposterior.arviz_compat import arviz_major

    directory.mkdir(parents=True, exist_ok=True)
    post = expected()
    series = arviz_major()
    written = []
    ours = directory / f"arviz{series}_ours.nc"
    post.to_netcdf(ours)
    written.append(ours)
    if series >= 1:
        other = directory / "arviz1_datatree.nc"
        post.to_datatree().to_netcdf(other, engine="h5netcdf")
    else:
        import warnings

        import arviz as az

        other = directory / "arviz0_arviz.nc"
        post.to_arviz().to_netcdf(str(other), engine="h5netcdf")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            table = az.summary(post.to_arviz(), hdi_prob=0.95, kind="all")
        table.to_csv(directory / SUMMARY)
        written.append(directory / SUMMARY)
    written.append(other)
    return written


if __name__ == "__main__":
    for path in write(Path(sys.argv[1]) if len(sys.argv) > 1 else DATA):
        print(path)
