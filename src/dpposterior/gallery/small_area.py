"""``reproduce small-area`` a real county table released privately, then analysed.

Data: North Carolina SIDS deaths and live births in 100 counties, 1974-78 and 1979-84 (Symons, Grimson &
Yuan 1983; Cressie & Read 1985; shipped in ``data/nc_sids.csv`` with the county outlines, from libpysal's
``sids2`` example: ``data/NC_SIDS_README.md``).  Areas = counties, cells = the two periods, exposure =
live births per county and period (G x C), counts = SIDS deaths.

Release: the family's curator (``families.small_area.curate``: one record per death, ``--area-column``
county, ``--cell-column`` period) with the discrete Gaussian at rho = :data:`NC_RHO` per table (sigma =
1/sqrt(rho)), exact integer noise from a fixed seed.  Why rho = 0.05: it is the budget the 2020 Census
spent on its county-level "detailed" query (the full cross-tabulation, whose cells are small counts like
these) in the redistricting (PL 94-171) production run -- persons rho = (542/339)^2 = 2.556, county
geolevel share 447/4099, detailed-query share 755/4104 (the Census Bureau's DAS 2020 redistricting
production code, strategy ProductionCandidate20210527US_mult8): 2.556 x 447/4099 x 755/4104 = 0.0513,
rounded to 0.05.  The Census's neighbours are bounded (one record changes), as here, so rho = 1/sigma^2
in both: sigma = 4.47, against a median of 3 deaths per county and period.

Analyses: ``exact-da`` (noise-aware), ``naive`` (noisy counts taken as true), the direct estimator
(``diagnostics.small_area``), and -- the reference the curator could compute -- the same model on the
confidential counts ("non-private").  Coverage against a known truth needs known rates, which real data
do not have; so a semi-synthetic study keeps the real births and sets the true rates to the non-private
posterior medians, draws counts y ~ Poisson(E lambda), releases them the same way and scores every
method's 90% intervals for the 200 rates, over :attr:`Scale.replicates` replicates.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ._common import Context, Result, _plt, _run_cells, _seeds

#: zCDP budget of the released table (see the module docstring for where the number comes from)
NC_RHO = 0.05
PERIODS = ("1974-78", "1979-84")
PROB = 0.90
PER = 1000.0  # rates shown per 1,000 live births
METHODS = ("exact-da", "naive", "direct")
COLORS = {"exact-da": "#1f77b4", "naive": "#d62728", "direct": "0.45", "non-private": "k"}


@dataclass(frozen=True)
class Scale:
    replicates: int
    draws: int
    warmup: int
    chains: int


DEFAULT = Scale(replicates=20, draws=4000, warmup=1000, chains=4)
FULL = Scale(replicates=200, draws=5000, warmup=2000, chains=4)


def _data_dir() -> Path:
    return Path(__file__).resolve().parent.parent / "data"  # dpposterior/data


def nc_sids() -> dict:
    """The shipped table: county names and FIPS codes, births and SIDS deaths as G x 2 arrays (1974-78, 1979-84)."""
    import csv

    path = _data_dir() / "nc_sids.csv"
    if not path.exists():
        raise InputError("data", f"the North Carolina SIDS data ({path}) are not installed")
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return {"names": [r["name"] for r in rows], "fips": [r["fips"] for r in rows],
            "births": np.array([[int(r["bir74"]), int(r["bir79"])] for r in rows], float),
            "deaths": np.array([[int(r["sid74"]), int(r["sid79"])] for r in rows], np.int64)}


def nc_sids_rings() -> list:
    """The county outlines, in the order of :func:`nc_sids`: per county a list of [lon, lat] rings."""
    path = _data_dir() / "nc_sids_geometry.json"
    if not path.exists():
        raise InputError("data", f"the North Carolina county outlines ({path}) are not installed")
    return json.loads(path.read_text())["rings"]


def release_counts(names, births, counts, rho: float, seed: int, description: str | None = None) -> dict:
    """A small-area release of ``counts`` (G x 2) through the family's curator: one record per death
    (county, period), the discrete Gaussian at ``rho`` with exact integer noise from ``seed``, births per
    county and period as the public exposure."""
    import pandas as pd

    from ..families import small_area
    from ..families._curate import CurateOptions

    g, c = np.nonzero(counts)
    reps = counts[g, c]
    frame = pd.DataFrame({"county": np.repeat(np.asarray(names, object)[g], reps),
                          "period": np.repeat(np.asarray(PERIODS, object)[c], reps)})
    options = CurateOptions(family="small-area", rho=rho, mechanism="discrete-gaussian", seed=seed,
                            extra={"area_column": "county", "cell_column": "period", "areas": list(names),
                                   "cells": list(PERIODS)})
    release = small_area.curate(frame, options)
    release["exposure"] = np.asarray(births, float).tolist()
    if description:
        release["description"] = description
    return release


def _fit(rel, method: str, scale: Scale, seed):
    """``infer`` at ``scale``; its convergence flags stay on the posterior (and in the result), not printed."""
    import warnings

    from ..api import infer
    from ..errors import PosteriorWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PosteriorWarning)
        return infer(rel, method=method, draws=scale.draws, warmup=scale.warmup, chains=scale.chains, seed=seed,
                     quiet=True)


def _analyse(release: dict, scale: Scale, seed) -> dict:
    """Median and 90% interval of every rate (G x C, per birth) for exact-da, naive and direct."""
    from ..diagnostics.small_area import direct_estimate, equal_tailed, normal_interval, rate_draws
    from ..release import load_release

    rel = load_release(release)
    out = {}
    for method in ("exact-da", "naive"):
        post = _fit(rel, method, scale, seed)
        draws = rate_draws(post)
        lo, hi = equal_tailed(draws, PROB)
        out[method] = {"median": np.median(draws, axis=0), "lo": lo, "hi": hi, "flags": list(post.warnings)}
    point, sd = direct_estimate(rel)
    lo, hi = normal_interval(point, sd, PROB)
    out["direct"] = {"median": point, "lo": lo, "hi": hi, "flags": []}
    return out


def _replicate_unit(unit: dict) -> dict:
    """One semi-synthetic replicate: counts ~ Poisson(births x true rate), released and analysed."""
    from ..diagnostics.small_area import interval_scores

    rng = np.random.default_rng(unit["seed"])
    truth = np.asarray(unit["truth"])
    births = np.asarray(unit["births"])
    counts = rng.poisson(births * truth)
    release = release_counts(unit["names"], births, counts, unit["rho"], int(rng.integers(2 ** 31)))
    res = _analyse(release, Scale(**unit["scale"]), int(rng.integers(2 ** 31)))
    return {m: {**interval_scores(r["lo"] * PER, r["hi"] * PER, r["median"] * PER, truth * PER),
                "flagged": bool(r["flags"])} for m, r in res.items()}


def run_small_area(ctx: Context) -> Result:
    from ..diagnostics.small_area import interval_scores, rate_draws
    from ..release import load_release

    scale = FULL if ctx.full else DEFAULT
    data = nc_sids()
    names, births, deaths = data["names"], data["births"], data["deaths"]
    ctx.say(f"small-area: releasing the NC SIDS table (100 counties x 2 periods) at rho = {NC_RHO}")
    release = release_counts(names, births, deaths, NC_RHO, ctx.seed,
                             description=f"NC SIDS deaths by county and period, discrete Gaussian rho = {NC_RHO}")
    from ..checkpoint import atomic_write_json

    # the release as a file of its own, for `dpposterior infer` / `report` (docs/small-area.md)
    atomic_write_json(ctx.out / "release.json", release, indent=1, field="out")
    res = _analyse(release, scale, ctx.seed)
    # the reference only the curator can compute: the same model on the confidential counts
    confidential = {**release, "statistics": {"counts": {**release["statistics"]["counts"],
                                                         "value": deaths.tolist()}}}
    ref = rate_draws(_fit(load_release(confidential), "naive", scale, ctx.seed))
    ref_median = np.median(ref, axis=0)
    crude = deaths / births
    real = {m: {"vs_nonprivate": interval_scores(r["lo"] * PER, r["hi"] * PER, r["median"] * PER, ref_median * PER),
                "vs_crude": interval_scores(r["lo"] * PER, r["hi"] * PER, r["median"] * PER, crude * PER)}
            for m, r in res.items()}
    ctx.say(f"small-area: {scale.replicates} semi-synthetic replicates (true rates = non-private medians)")
    units = [{"names": names, "births": births.tolist(), "truth": ref_median.tolist(), "rho": NC_RHO,
              "scale": scale.__dict__, "seed": seed} for seed in _seeds(ctx, scale.replicates)]
    reps = _run_cells(ctx, _replicate_unit, units, "small-area", "small-area replicates")
    synthetic = {}
    for m in METHODS:
        cov = np.array([r[m]["coverage"] for r in reps])
        synthetic[m] = {"coverage": float(cov.mean()),
                        "coverage_se": float(cov.std(ddof=1) / math.sqrt(len(cov))) if len(cov) > 1 else float("nan"),
                        "width": float(np.mean([r[m]["width"] for r in reps])),
                        "rmse": float(np.mean([r[m]["rmse"] for r in reps])),
                        "flagged_replicates": int(sum(r[m]["flagged"] for r in reps))}
    rows = [[m, f"{real[m]['vs_nonprivate']['coverage']:.2f}", f"{real[m]['vs_crude']['coverage']:.2f}",
             f"{real[m]['vs_nonprivate']['width']:.2f}",
             f"{synthetic[m]['coverage']:.3f} +- {synthetic[m]['coverage_se']:.3f}", f"{synthetic[m]['width']:.2f}",
             f"{synthetic[m]['rmse']:.3f}"] for m in METHODS]
    header = ["method", "real table: 90% intervals holding the non-private median",
              "... holding the confidential crude rate", "mean width (per 1,000)",
              f"semi-synthetic: coverage of the true rate ({scale.replicates} replicates)", "mean width",
              "RMSE of the median (per 1,000)"]
    sigma = 1.0 / math.sqrt(NC_RHO)
    notes = [f"Release: discrete Gaussian, rho = {NC_RHO} for the table (sigma = {sigma:.2f}), the family's curator "
             f"with exact integer noise (seed {ctx.seed}); exposure = live births per county and period. "
             "Why this rho: the 2020 Census PL 94-171 budget of its county-level detailed query "
             "(2.556 x 447/4099 x 755/4104 = 0.051; docs/small-area.md).",
             f"Posteriors: {scale.chains} chains x {scale.draws} draws after {scale.warmup} warm-up, the family's "
             "default prior; 90% intervals equal-tailed. Direct: noisy count / births, variance (count + noise "
             "variance) / births^2, normal interval clipped at 0.",
             "'Non-private median': the same model fitted to the confidential counts (what the curator could "
             "compute); the crude rate (deaths / births) is noisier still in small counties, so no smoothing method "
             "should be expected to hold it 90% of the time.",
             "Semi-synthetic: real births, true rates = the non-private posterior medians, counts ~ Poisson, "
             "released and analysed as above; +- is one Monte Carlo standard error over replicates."]
    for m in METHODS[:2]:
        flags = res[m]["flags"] or ["none"]
        notes.append(f"Convergence checks, {m} on the real table: {'; '.join(flags)}. Semi-synthetic replicates "
                     f"flagged: {synthetic[m]['flagged_replicates']} of {scale.replicates} (kept in the scores).")
    fig = _figure(data, res, ref, ref_median, crude)
    payload = {"rho": NC_RHO, "sigma": sigma, "released": release["statistics"]["counts"]["value"],
               "scale": scale.__dict__, "real": real, "semi_synthetic": synthetic,
               "flags": {m: r["flags"] for m, r in res.items()},
               "per_county": {m: {k: (v * PER).round(4).tolist() for k, v in r.items() if k != "flags"}
                              for m, r in res.items()},
               "non_private_median": (ref_median * PER).round(4).tolist()}
    return Result(fig, header, rows, notes, payload)


def _figure(data, res, ref, ref_median, crude):
    plt = _plt()
    from matplotlib.collections import PolyCollection
    from matplotlib.gridspec import GridSpec

    fig = plt.figure(figsize=(14, 9.5), layout="constrained")
    grid = GridSpec(3, 4, figure=fig, height_ratios=[1.5, 0.75, 0.75])
    ref_lo, ref_hi = np.quantile(ref, [0.05, 0.95], axis=0)
    for c, period in enumerate(PERIODS):
        ax = fig.add_subplot(grid[0, 2 * c: 2 * c + 2])
        order = np.argsort(ref_median[:, c])
        x = np.arange(len(order))
        ax.fill_between(x, ref_lo[order, c] * PER, ref_hi[order, c] * PER, color="0.85", step="mid",
                        label="non-private 90%")
        for k, m in enumerate(METHODS):
            r = res[m]
            off = (k - 1) * 0.25
            ax.vlines(x + off, r["lo"][order, c] * PER, r["hi"][order, c] * PER, color=COLORS[m], lw=0.8,
                      alpha=0.8)
            ax.plot(x + off, r["median"][order, c] * PER, "o", ms=2.2, color=COLORS[m], label=f"{m} median, 90%")
        ax.plot(x, ref_median[order, c] * PER, "_", ms=6, color="k", label="non-private median")
        # the direct intervals of small counties run far above: the axis follows the model-based ones
        ax.set_ylim(0, 1.15 * float(max(np.quantile(res[m]["hi"][:, c], 0.98) for m in ("exact-da", "naive"))) * PER)
        ax.set_xlabel("county (sorted by the non-private median)")
        ax.set_ylabel("SIDS deaths per 1,000 births")
        ax.set_title(f"{period}: 90% intervals per county (direct intervals cut at the top)", fontsize=10)
        if c == 0:
            ax.legend(fontsize=7, ncol=2, loc="upper left")
    rings = nc_sids_rings()
    polys, owner = [], []
    for g, county in enumerate(rings):
        for ring in county:
            polys.append(np.asarray(ring))
            owner.append(g)
    owner = np.asarray(owner)
    panels = [("confidential crude rate", crude), ("non-private median", ref_median),
              ("exact-da median", res["exact-da"]["median"]), ("naive median", res["naive"]["median"])]
    vmax = float(np.quantile(ref_median * PER, 0.99)) * 1.3
    mappable = None
    for c, period in enumerate(PERIODS):
        for j, (title, values) in enumerate(panels):
            ax = fig.add_subplot(grid[1 + c, j])
            coll = PolyCollection(polys, array=values[owner, c] * PER, cmap="viridis", edgecolor="white",
                                  linewidth=0.2)
            coll.set_clim(0, vmax)
            ax.add_collection(coll)
            ax.autoscale_view()
            ax.set_aspect(1.0 / math.cos(math.radians(35.5)))  # degrees of longitude are shorter at 35.5 N
            ax.set_xticks([])
            ax.set_yticks([])
            ax.set_title(f"{title}, {period}", fontsize=9)
            mappable = coll
    fig.colorbar(mappable, ax=fig.axes[2:], orientation="vertical", fraction=0.03, pad=0.01,
                 label="SIDS deaths per 1,000 births (clipped at the top)")
    fig.suptitle(f"North Carolina SIDS, released with the discrete Gaussian at rho = {NC_RHO}: noise-aware "
                 "(exact-da) vs naive vs direct", fontsize=11)
    return fig


def nc_sids_geojson() -> dict:
    """The county outlines as a GeoJSON FeatureCollection (one MultiPolygon per county, properties ``name``
    and ``fips``, feature id the FIPS code): what ``dpposterior report --geometry`` reads."""
    data, rings = nc_sids(), nc_sids_rings()
    return {"type": "FeatureCollection",
            "features": [{"type": "Feature", "id": fips, "properties": {"name": name, "fips": fips},
                          "geometry": {"type": "MultiPolygon", "coordinates": [[ring] for ring in county]}}
                         for name, fips, county in zip(data["names"], data["fips"], rings)]}
