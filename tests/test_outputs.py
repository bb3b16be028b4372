"""Outputs a demographer can read: rates in per-1,000 units, rho in the report, warnings by coordinate label,
named areas on the caterpillar, maps from GeoJSON (``report --geometry``), reproduce's flags printed, and
``Posterior.dataset()``."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

import dpposterior
from dpposterior.cli import main
from dpposterior.posterior import Posterior
from dpposterior.units import rate_unit, significant

SMALL_AREA = {"format": "dpposterior-release/1", "family": "small-area", "areas": ["A", "B", "C"],
              "exposure": [12000, 48000, 3500], "cells": ["under 18", "18 and over"],
              "statistics": {"counts": {"value": [[14, 95], [61, 402], [0, 31]], "mechanism": "discrete-gaussian",
                                        "sigma": 2.0}},
              "postprocessing": "nonnegative"}


def test_rate_unit_from_the_medians():
    assert rate_unit([14.0, 3.0]) == (1.0, "")
    assert rate_unit([0.02, 0.05]) == (1.0, "")
    assert rate_unit([0.002, 0.0021, 0.0019]) == (1000.0, "per 1,000")
    assert rate_unit([0.00002, 0.00003]) == (100000.0, "per 100,000")
    assert rate_unit([0.0, 0.0]) == (1.0, "")


def test_significant_digits_never_print_zero_for_nonzero():
    assert significant(0.00213) == "0.00213"
    assert significant(2.134) == "2.13"
    assert significant(0.0004) == "0.000400"
    assert significant(0.9996) == "1.00"
    assert significant(0.0) == "0"
    assert float(significant(3e-9)) == pytest.approx(3e-9)


def _rendered(table) -> str:
    buf = io.StringIO()
    Console(file=buf, width=200, highlight=False).print(table)
    return buf.getvalue()


def _small_rates(seed=0, G=3, rate=0.002, sd=0.0004):
    rng = np.random.default_rng(seed)
    rates = rng.normal(rate, sd, size=(2, 200, G, 2))
    return Posterior("small-area", "exact-da",
                     {"alpha": rng.normal(-6.2, 0.05, size=(2, 200, 2)), "tau": rng.gamma(5, 0.1, size=(2, 200)),
                      "rate": rates},
                     dims={"alpha": ["cell"], "rate": ["area", "cell"]},
                     coords={"cell": ["under 18", "18+"], "area": [f"area-{k}" for k in range(G)]})


def test_terminal_summary_shows_small_rates_per_1000():
    from dpposterior.console import summary_table

    post = _small_rates()
    text = _rendered(summary_table(post, "posterior"))
    assert "per 1,000" in text
    row = next(line for line in text.splitlines() if "rate[area-0, under 18]" in line)
    cells = [c.strip() for c in row.split("│") if c.strip()]
    mean, sd = float(cells[1]), float(cells[2])
    expected = post.posterior["rate"][:, :, 0, 0]
    assert mean == pytest.approx(expected.mean() * 1000, rel=5e-3)
    assert sd == pytest.approx(expected.std(ddof=1) * 1000, rel=5e-3) and sd > 0
    # the stored values stay raw rates
    assert post.posterior["rate"].mean() == pytest.approx(0.002, rel=0.05)


def test_terminal_summary_never_prints_sd_0_for_a_small_sd():
    from dpposterior.console import summary_table

    rng = np.random.default_rng(1)
    post = Posterior("gaussian", "m", {"mu": rng.normal(5.0, 0.0004, size=(2, 300))})
    row = next(line for line in _rendered(summary_table(post, "p")).splitlines() if "mu" in line)
    sd = [c.strip() for c in row.split("│") if c.strip()][2]
    assert float(sd) != 0 and float(sd) == pytest.approx(0.0004, rel=0.15)


def test_warnings_name_components_by_coordinate_label():
    from dpposterior.checks import mcmc_warnings

    rng = np.random.default_rng(2)
    alpha = rng.normal(size=(4, 200, 2))
    alpha[:, :, 1] += np.arange(4)[:, None]  # chains disagree on the second cell
    v = rng.normal(size=(4, 200, 2))
    v[:, :, 0] = np.cumsum(rng.normal(size=(4, 200)), axis=1) * 0.01  # a slow random walk
    post = Posterior("small-area", "exact-da", {"alpha": alpha}, dims={"alpha": ["cell"]},
                     coords={"cell": ["0-17", "18+"]})
    warned = mcmc_warnings(post)
    assert warned and " for alpha[18+]:" in warned[0], warned
    post = Posterior("small-area", "exact-da", {"v": v}, dims={"v": ["parent"]}, coords={"parent": ["X", "Y"]})
    assert all(" for v[X]:" in w for w in mcmc_warnings(post))
    # no coords: positions, as before
    bare = Posterior("t", "m", {"alpha": alpha})
    assert any(" for alpha[1]:" in w for w in mcmc_warnings(bare))


def test_dataset_view_carries_labels_and_keeps_the_dict():
    post = _small_rates()
    ds = post.dataset()
    assert ds["rate"].dims == ("chain", "draw", "area", "cell")
    assert list(ds.coords["area"].values) == ["area-0", "area-1", "area-2"]
    assert float(ds["rate"].sel(area="area-1", cell="18+").mean()) == pytest.approx(
        post.posterior["rate"][:, :, 1, 1].mean())
    assert np.shares_memory(ds["rate"].values, post.posterior["rate"])  # a view, no copy
    assert isinstance(post.posterior["rate"], np.ndarray)  # the dict's contract is unchanged
    assert ds["tau"].dims == ("chain", "draw")


def test_dataset_does_not_make_import_heavy():
    code = ("import sys, dpposterior\nfrom dpposterior.posterior import Posterior\n"
            "assert 'xarray' not in sys.modules")
    env = dict(os.environ, PYTHONPATH=str(Path(dpposterior.__file__).resolve().parents[1]))
    assert subprocess.run([sys.executable, "-c", code], env=env).returncode == 0


def test_reproduce_prints_its_flags(monkeypatch, capsys, tmp_path):
    import dpposterior.gallery as gallery

    payload = {"header": ["a"], "rows": [["1"]], "seconds": 1.0,
               "data": {"flags": {"exact-da": ["bulk ESS 281 < 400 for tau: too few"], "naive": [], "direct": []},
                        "scale": {"replicates": 20},
                        "semi_synthetic": {"exact-da": {"flagged_replicates": 6}, "naive": {"flagged_replicates": 0}}}}
    monkeypatch.setattr(gallery, "run_entry", lambda *a, **k: payload)
    gallery.reproduce_command(name="small-area", out=tmp_path, quiet=True)
    lines = capsys.readouterr().out.splitlines()
    assert lines[-2] == "flag: exact-da on the real data: bulk ESS 281 < 400 for tau: too few"
    assert lines[-1].startswith("flag: exact-da: 6 of 20 semi-synthetic replicates flagged")
    payload["data"] = {"flags": {"exact-da": [], "naive": []}}
    gallery.reproduce_command(name="small-area", out=tmp_path, quiet=True)
    assert capsys.readouterr().out.splitlines()[-1] == "no flags"
    payload["data"] = {}  # an entry that records no convergence checks: nothing said
    gallery.reproduce_command(name="small-area", out=tmp_path, quiet=True)
    assert capsys.readouterr().out.splitlines()[-1].startswith("wrote ")


@pytest.fixture(scope="module")
def small_area_file(tmp_path_factory):
    d = tmp_path_factory.mktemp("outputs")
    (d / "release.json").write_text(json.dumps(SMALL_AREA))
    assert main(["infer", str(d / "release.json"), "--draws", "150", "--warmup", "100", "--chains", "2", "--seed", "3",
                 "--out", str(d / "post.nc"), "--quiet"]) == 0
    return d


def _square(x, y):
    return [[x, y], [x + 1, y], [x + 1, y + 1], [x, y + 1], [x, y]]


def test_report_shows_rho_and_maps_from_geojson(small_area_file, capsys):
    d = small_area_file
    geo = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"GEOID": "A"},
         "geometry": {"type": "Polygon", "coordinates": [_square(0, 0)]}},
        {"type": "Feature", "properties": {"GEOID": "B"},
         "geometry": {"type": "MultiPolygon", "coordinates": [[_square(1, 0)], [_square(3, 0)]]}},
        {"type": "Feature", "properties": {"GEOID": "Z"},
         "geometry": {"type": "Polygon", "coordinates": [_square(0, 1)]}}]}
    (d / "areas.geojson").write_text(json.dumps(geo))
    out = d / "report"
    assert main(["report", str(d / "post.nc"), "--geometry", str(d / "areas.geojson"), "--out", str(out),
                 "--quiet"]) == 0
    page = (out / "report.html").read_text()
    assert "release: total rho (zCDP" in page and "<td>0.25</td>" in page
    assert "dp-accounting" in page or "accountant" in page
    assert (out / "map.png").is_file() and (out / "caterpillar.png").is_file()
    assert "matched by property &#x27;GEOID&#x27;" in page or "matched by property 'GEOID'" in page
    assert "2 of 3 areas drawn; 1 area has no shape in the file; 1 outline of no area in grey" in page
    assert "rate per 1,000" in page  # the caterpillar's and the maps' unit


def test_geometry_refusals_are_one_line(small_area_file, capsys):
    d = small_area_file
    geo = {"type": "FeatureCollection", "features": [
        {"type": "Feature", "properties": {"GEOID": "Q"},
         "geometry": {"type": "Polygon", "coordinates": [_square(0, 0)]}}]}
    (d / "none.geojson").write_text(json.dumps(geo))
    (d / "bad.geojson").write_text("{not json")
    cases = [(["--geometry", str(d / "none.geojson")], "error: geometry: no area of the posterior matches a feature"),
             (["--geometry", str(d / "bad.geojson")], "error: geometry: cannot read"),
             (["--geometry", str(d / "missing.geojson")], "error: geometry: file not found"),
             (["--geometry", str(d / "none.geojson"), "--geometry-key", "COUNTY"],
              "error: geometry-key: no feature has a property 'COUNTY'"),
             (["--geometry-key", "GEOID"], "error: geometry-key: ")]
    for extra, start in cases:
        assert main(["report", str(d / "post.nc"), "--out", str(d / "r2"), "--quiet", *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith(start) and "\n" not in err, err


def test_caterpillar_names_areas_and_says_when_only_some(tmp_path):
    from dpposterior.report import Loaded, _caterpillar_figure

    post = _small_rates(G=250)
    few = _small_rates(G=5)
    many = _caterpillar_figure(Loaded("exact-da", post.to_arviz(), {}, {}), [])
    assert "every 3rd area shown is named" in many.caption and "per 1,000" in many.caption
    five = _caterpillar_figure(Loaded("exact-da", few.to_arviz(), {}, {}), [])
    assert "named" not in five.caption


def test_nc_sids_geojson_matches_the_table():
    from dpposterior.geometry import match_areas, read_geojson
    from dpposterior.gallery import nc_sids, nc_sids_geojson

    names = nc_sids()["names"]
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"nc-{os.getpid()}.geojson"
    path.write_text(json.dumps(nc_sids_geojson()))
    try:
        rings, key, others = match_areas(names, read_geojson(path))
    finally:
        path.unlink()
    assert key == "name" and len(rings) == 100 and others == []


def test_prior_warning_names_the_component_by_label():
    from dpposterior.checks import prior_warnings

    class Moments:  # a user model's prior moments: alpha ~ N(0, 1) in each cell
        def prior_moments(self):
            return {"alpha": (np.zeros(2), np.ones(2))}

    rng = np.random.default_rng(4)
    alpha = np.stack([rng.normal(3.0, 0.1, size=(2, 2000)), rng.normal(0.0, 1.0, size=(2, 2000))], axis=-1)
    post = Posterior("t", "m", {"alpha": alpha}, dims={"alpha": ["cell"]}, coords={"cell": ["0-17", "18+"]},
                     extras={"user_model": Moments()})
    warned = prior_warnings(post)
    assert len(warned) == 1 and warned[0].startswith("alpha[18+]: the posterior is its prior"), warned
