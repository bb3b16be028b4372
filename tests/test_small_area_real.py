"""Small-area: the shipped NC SIDS data, their private release, the direct estimator,
``reproduce small-area`` (reduced) and the report's caterpillar plot."""

from __future__ import annotations

import json
import math
import tomllib
from pathlib import Path

import numpy as np
import pytest

from dpposterior.cli import main
from dpposterior.diagnostics.small_area import direct_estimate, interval_scores, noise_variance, normal_interval
from dpposterior.gallery import small_area as entry
from dpposterior.mechanisms.discrete_gaussian import DiscreteGaussian
from dpposterior.posterior import Posterior
from dpposterior.release import load_release
from dpposterior.report import write_report

ROOT = Path(__file__).resolve().parent.parent


def _table(values, exposure, sigma=3.0):
    G, C = np.shape(values)
    return load_release({"format": "dpposterior-release/1", "family": "small-area", "areas": [f"a{g}" for g in range(G)],
                         "cells": [f"c{c}" for c in range(C)], "exposure": exposure,
                         "statistics": {"counts": {"value": values, "mechanism": "discrete-gaussian", "sigma": sigma}}})


# --------------------------------------------------------------------------- the direct estimator
def test_direct_estimator_by_hand():
    rel = _table([[10, -2]], [[100.0, 50.0]])
    v = DiscreteGaussian(3.0).noise_variance
    assert v == pytest.approx(9.0, rel=1e-6)  # sigma = 3: the discrete Gaussian's variance is sigma^2 to < 1e-6
    point, sd = direct_estimate(rel)
    assert point.tolist() == [[0.1, -0.04]]
    assert sd[0, 0] == pytest.approx(math.sqrt(10 + v) / 100) and sd[0, 1] == pytest.approx(math.sqrt(v) / 50)
    lo, hi = normal_interval(point, sd, 0.9)
    z = 1.6448536269514722
    assert lo[0, 0] == pytest.approx(0.1 - z * sd[0, 0]) and hi[0, 0] == pytest.approx(0.1 + z * sd[0, 0])
    assert lo[0, 1] == 0.0 and hi[0, 1] == pytest.approx(-0.04 + z * sd[0, 1])  # clipped at 0
    assert noise_variance(rel).shape == (1, 2)


def test_direct_interval_covers_when_the_normal_approximation_holds():
    # 4,000 cells with 400 expected events and sigma = 3 noise: y* is close to normal with variance
    # 400 + 9, so the 90% interval covers 0.90 up to Monte Carlo error sqrt(0.09 / 4000) = 0.0047
    rng = np.random.default_rng(7)
    G, rate, E = 4000, 4.0, 100.0
    y = rng.poisson(rate * E, size=(G, 1)) + DiscreteGaussian(3.0).draw((G, 1), rng)
    rel = _table(y.tolist(), [E] * G)
    point, sd = direct_estimate(rel)
    lo, hi = normal_interval(point, sd, 0.9)
    scores = interval_scores(lo, hi, point, np.full((G, 1), rate))
    assert abs(scores["coverage"] - 0.90) < 4 * math.sqrt(0.09 / G)
    assert scores["width"] == pytest.approx(2 * 1.6449 * math.sqrt(409) / E, rel=0.02)


# --------------------------------------------------------------------------- the shipped data and its release
def test_nc_sids_data_are_shipped_whole():
    data = entry.nc_sids()
    assert len(data["names"]) == 100 == len(set(data["names"])) == len(set(data["fips"]))
    # the published totals (Cressie 1993): 667 deaths in 329,962 births (1974-78), 836 in 422,392 (1979-84)
    assert data["deaths"].sum(axis=0).tolist() == [667, 836]
    assert data["births"].sum(axis=0).tolist() == [329962, 422392]
    geometry = json.loads((ROOT / "src/dpposterior/data/nc_sids_geometry.json").read_text())
    assert geometry["fips"] == data["fips"] and len(entry.nc_sids_rings()) == 100
    lon = np.concatenate([np.asarray(r)[:, 0] for county in geometry["rings"] for r in county])
    assert -84.4 < lon.min() < lon.max() < -75.4  # North Carolina
    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["dpposterior"]
    for name in ("nc_sids.csv", "nc_sids_geometry.json", "NC_SIDS_README.md"):
        assert any(Path("data", name).match(p) for p in patterns), name


def test_the_release_goes_through_the_curator_with_exact_noise():
    data = entry.nc_sids()
    release = entry.release_counts(data["names"], data["births"], data["deaths"], entry.NC_RHO, seed=5)
    rel = load_release(release)
    counts = rel.statistics.counts
    assert counts.mechanism == "discrete-gaussian" and counts.sigma == pytest.approx(1 / math.sqrt(0.05))
    assert rel.privacy().rho == pytest.approx(0.05)
    assert rel.exposures().tolist() == data["births"].tolist()  # births per county and period
    noise = rel.released() - data["deaths"]
    assert np.all(noise == np.round(noise))  # integer noise
    assert abs(noise.std() - 1 / math.sqrt(0.05)) < 4 * 4.47 / math.sqrt(2 * 200)
    again = entry.release_counts(data["names"], data["births"], data["deaths"], entry.NC_RHO, seed=5)
    assert again["statistics"]["counts"]["value"] == release["statistics"]["counts"]["value"]  # fixed seed


def test_reproduce_small_area_runs_reduced(tmp_path, monkeypatch):
    monkeypatch.setattr(entry, "DEFAULT", entry.Scale(replicates=2, draws=200, warmup=100, chains=1))
    assert main(["reproduce", "small-area", "--out", str(tmp_path), "--quiet", "--scheduler", "serial"]) == 0
    folder = tmp_path / "small-area"
    assert (folder / "figure.png").stat().st_size > 10_000
    result = json.loads((folder / "result.json").read_text())
    assert [row[0] for row in result["rows"]] == ["exact-da", "naive", "direct"]
    assert result["data"]["rho"] == 0.05 and len(result["data"]["non_private_median"]) == 100
    released = load_release(folder / "release.json")  # the release itself, for infer and report
    assert released.released().tolist() == result["data"]["released"]
    for method in ("exact-da", "naive", "direct"):
        assert 0.0 <= result["data"]["semi_synthetic"][method]["coverage"] <= 1.0


# --------------------------------------------------------------------------- the report
def _small_area_posterior(method, G=30, C=2, seed=0, chains=2, draws=200):
    rng = np.random.default_rng(seed)
    alpha = rng.normal([1.0, 0.0][:C], 0.1, size=(chains, draws, C))
    u = rng.normal(np.linspace(-1, 1, G), 0.2, size=(chains, draws, G))
    return Posterior("small-area", method, {"alpha": alpha, "tau": rng.gamma(20, 0.03, size=(chains, draws)), "u": u,
                                            "rate": np.exp(alpha[:, :, None, :] + u[:, :, :, None])},
                     dims={"alpha": ["cell"], "u": ["area"], "rate": ["area", "cell"]},
                     coords={"cell": ["young", "old"][:C], "area": [f"county {g}" for g in range(G)]})


def test_report_draws_the_area_rates_as_a_caterpillar(tmp_path):
    _small_area_posterior("exact-da").to_netcdf(tmp_path / "post.nc")
    _small_area_posterior("naive", seed=1).to_netcdf(tmp_path / "naive.nc")
    html = write_report(tmp_path / "post.nc", tmp_path / "rep", compare=[tmp_path / "naive.nc"]).read_text()
    assert (tmp_path / "rep" / "caterpillar.png").stat().st_size > 10_000
    assert "Area rates" in html and "every area" in html
    # the per-variable table keeps the shared parameters: no row per area
    assert "<td>alpha[young]</td>" in html and "<td>tau</td>" in html
    assert "rate[county" not in html and "<td>u[" not in html


# --------------------------------------------------------------------------- the simulation study, reduced
def test_small_area_study_runs_reduced(tmp_path):
    import importlib.util

    spec = importlib.util.spec_from_file_location("small_area_study", ROOT / "benchmarks" / "small_area_study.py")
    study = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(study)
    out = tmp_path / "study.json"
    assert study.main(["--trials", "3", "--G", "8", "--thin", "2", "--warmup", "50", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert set(result["summary"]) == {"exact-da", "naive", "direct"} and len(result["trials"]) == 3
    assert set(result["summary"]["exact-da"]["sbc_pvalue"]) == {"alpha[0]", "alpha[1]", "tau"}
    assert "sbc_pvalue" not in result["summary"]["direct"]
    assert study.table(result).count("\n| ") == 4  # header and three methods
