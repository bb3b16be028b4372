"""``dpposterior report``: figures, a self-contained report.html, one-line errors, and
(marked ``browser``) a headless-Chromium rendering check of the HTML."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dpposterior.cli import main
from dpposterior.errors import InputError
from dpposterior.families.gaussian import feasible_sigma2_max
from dpposterior.posterior import Posterior
from dpposterior.report import calibration_ranks, components, rank_ecdf_band, write_report

RELEASE = {"format": "dpposterior-release/1", "family": "gaussian", "n": 43, "bounds": [0.0, 100.0],
           "statistics": {"mean": {"value": 34.30, "mechanism": "laplace", "epsilon": 0.25},
                          "variance": {"value": 2224.07, "mechanism": "laplace", "epsilon": 0.25}}}
CHROMIUM = Path("/usr/bin/chromium")


def _posterior(method, shift, seed, chains=2, draws=300):
    rng = np.random.default_rng(seed)
    mu = rng.normal(20 + shift, 8, size=(chains, draws))
    sigma2 = rng.gamma(2, 300, size=(chains, draws))
    # the Gaussian family's naive engine draws independently; the engine says so on the posterior
    return Posterior("gaussian", method, {"mu": mu, "sigma2": sigma2}, iid=(method == "naive"),
                     posterior_predictive={"y_new": rng.normal(mu, np.sqrt(sigma2))},
                     attrs={"constrained": True, "seed": 1, "release_json": json.dumps(RELEASE)})


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("report")
    _posterior("gibbs", 0, 1).to_netcdf(d / "post.nc")
    _posterior("naive", 10, 2).to_netcdf(d / "naive.nc")
    rng = np.random.default_rng(3)
    cal = {"family": "binomial", "n": 100, "epsilon": 0.1, "trials": 200, "methods": {
        "gibbs-ss": {"ks": 0.03, "ks_pvalue": 0.7, "coverage": {"0.5": 0.5, "0.9": 0.9, "0.95": 0.95},
                     "ranks": rng.uniform(size=200).tolist()},
        "naive": {"ks": 0.2, "ks_pvalue": 1e-9, "coverage": {"0.5": 0.3, "0.9": 0.6, "0.95": 0.7},
                  "ranks": rng.beta(0.6, 0.6, size=200).tolist()}}}
    (d / "cal.json").write_text(json.dumps(cal))
    return d


def _self_contained(html: str) -> None:
    srcs = re.findall(r'src="([^"]*)"', html)
    assert srcs and all(s.startswith("data:image/png;base64,") for s in srcs)
    assert "<link" not in html and "http://" not in html and "https://" not in html


def test_posterior_report_with_compare(files, tmp_path):
    out = tmp_path / "rep"
    html_path = write_report(files / "post.nc", out, compare=[files / "naive.nc"])
    html = html_path.read_text()
    _self_contained(html)
    for name in ("marginals", "pair", "feasible", "trace", "rank", "predictive"):
        png = out / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
    # HPD table: both posteriors, both variables
    assert "95% HPD" in html and "naive (constrained): mean" in html and ">sigma2<" in html
    assert "Theorem 2" in html and "of draws outside" in html


def test_report_closes_the_files_it_read(files, tmp_path, monkeypatch):
    """``report`` closes the posteriors it read instead of leaving that to the garbage collector: ArviZ 0.x reads
    lazily, so data that outlive the call (here kept in a list; in a process whose collector froze them, a
    reference cycle) would keep the file open, and reopening it for writing fails ("already open for
    read-only")."""
    import h5py

    import dpposterior.report as report

    kept = []
    real = report.load_posterior
    monkeypatch.setattr(report, "load_posterior", lambda *a, **k: kept.append(real(*a, **k)) or kept[-1])
    for name in ("post.nc", "naive.nc"):
        shutil.copy(files / name, tmp_path / name)
    write_report(tmp_path / "post.nc", tmp_path / "rep", compare=[tmp_path / "naive.nc"])
    assert len(kept) == 2
    for name in ("post.nc", "naive.nc"):
        with h5py.File(tmp_path / name, "r+") as fh:
            fh.attrs["touched"] = 1


def test_iid_posterior_has_no_trace_plot(files, tmp_path):
    write_report(files / "naive.nc", tmp_path / "rep")
    assert not (tmp_path / "rep" / "trace.png").exists()
    assert (tmp_path / "rep" / "marginals.png").exists()


def test_calibration_report(files, tmp_path):
    html = write_report(files / "cal.json", tmp_path / "cal").read_text()
    _self_contained(html)
    assert (tmp_path / "cal" / "rank_ecdf.png").exists()
    assert "gibbs-ss" in html and "simultaneous" in html


def test_feasible_region_theorem2():
    # sigma^2 <= (mu - a)(b - mu): 2500 at the centre of [0, 100], 0 at the bounds, undefined outside
    out = feasible_sigma2_max(np.array([0.0, 50.0, 100.0, 25.0, -1.0]), (0.0, 100.0))
    assert np.allclose(out[:4], [0.0, 2500.0, 0.0, 1875.0]) and np.isnan(out[4])


def test_rank_ecdf_band_is_simultaneous():
    # the whole ECDF of N uniform ranks must stay inside the band with probability 0.95.
    # The band is itself fitted on 2000 simulated ECDFs (its coverage has MC SE
    # sqrt(.95 * .05 / 2000) = 0.0049) and checked here on 2000 independent ones (SE 0.0049):
    # combined SE 0.0069, accept within 0.0195 (2.8 SE; fixed seeds, so not flaky).  A pointwise
    # band would cover far less (~0.5 here), so the test fails if the band is not simultaneous.
    n = 200
    x, lower, upper = rank_ecdf_band(n)
    assert np.all(lower <= x) and np.all(upper >= x)
    u = np.sort(np.random.default_rng(0).uniform(size=(2000, n)), axis=1)
    ecdf = np.stack([np.searchsorted(row, x, side="right") for row in u]) / n
    coverage = np.mean(np.all((ecdf >= lower) & (ecdf <= upper), axis=1))
    assert abs(coverage - 0.95) < 0.0195, coverage


def test_components_label_vector_variables():
    post = Posterior("linear-regression", "mcmc-fixeds",
                     {"theta": np.zeros((2, 5, 3)), "sigma2": np.ones((2, 5))},
                     dims={"theta": ["coef"]}, coords={"coef": ["x1", "x2", "x3"]})
    comps = components(post.to_arviz())
    assert list(comps) == ["theta[x1]", "theta[x2]", "theta[x3]", "sigma2"]
    assert comps["theta[x2]"].shape == (2, 5)


def test_calibration_ranks_shapes():
    assert list(calibration_ranks({"ranks": [0.1, 0.2]})) == ["theta"]
    assert list(calibration_ranks({"quantiles": [[0.1, 0.2], [0.3, 0.4]]})) == ["theta[0]", "theta[1]"]
    assert list(calibration_ranks({"ranks": {"mu": [0.5], "sigma2": [0.5]}})) == ["mu", "sigma2"]
    assert calibration_ranks({"ks": 0.1}) == {}


@pytest.mark.parametrize("make, field", [
    (lambda d: d / "missing.nc", "posterior"),
    (lambda d: (d / "garbage.nc").write_text("not netcdf") and d / "garbage.nc", "posterior"),
    (lambda d: (d / "bad.json").write_text("{broken") and d / "bad.json", "posterior"),
    (lambda d: (d / "nomethods.json").write_text('{"family": "x"}') and d / "nomethods.json", "posterior"),
    (lambda d: d, "posterior"),
])
def test_bad_inputs_one_line(tmp_path, make, field, capsys):
    path = make(tmp_path)
    with pytest.raises(InputError) as info:
        write_report(path, tmp_path / "out")
    assert info.value.field == field
    assert main(["report", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {field}:") and err.count("\n") == 1


def test_a_release_given_as_the_posterior_is_named(tmp_path, capsys):
    path = tmp_path / "release.json"
    path.write_text(json.dumps(RELEASE))
    assert main(["report", str(path), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"error: posterior: {path} is a release (dpposterior-release/1), not a posterior")
    assert f"dpposterior infer {path} --out POST.nc" in err


def test_bad_compare_one_line(files, tmp_path, capsys):
    assert main(["report", str(files / "post.nc"), "--compare", str(tmp_path / "nope.nc"),
                 "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err.startswith("error: compare: file not found")


# ------------------------------------------------------------------------------ browser

def _demo_posteriors(tmp: Path) -> list[Path]:
    """The demo's (constrained, unconstrained) posteriors when the demo exists, else []."""
    try:
        from dpposterior.demo import run_demo
    except ImportError:
        return []
    import inspect

    kwargs = {k: v for k, v in {"draws": 1000, "quiet": True}.items()
              if k in inspect.signature(run_demo).parameters}
    run_demo(tmp / "demo", **kwargs)
    ncs = {p.name: p for p in (tmp / "demo").glob("*.nc")}
    main_nc = ncs.get("posterior_constrained.nc") or next(iter(ncs.values()), None)
    others = [p for name, p in ncs.items() if p != main_nc]
    return [main_nc, *others] if main_nc else []


def screenshot(html_path: Path, png: Path, profile: Path, size=(1200, 2400)) -> None:
    cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
           "--disable-background-networking", "--disable-component-update", "--disable-sync",
           f"--user-data-dir={profile}", f"--screenshot={png}", f"--window-size={size[0]},{size[1]}",
           html_path.resolve().as_uri()]
    subprocess.run(cmd, check=True, timeout=120, capture_output=True)


@pytest.mark.browser
@pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium (apt-get install chromium)")
def test_report_renders_in_headless_chromium(files, tmp_path):
    from PIL import Image  # matplotlib depends on pillow

    # the `report` on the demo's output renders (synthetic files if no demo)
    demo = _demo_posteriors(tmp_path)
    post, compare = (demo[0], demo[1:]) if demo else (files / "post.nc", [files / "naive.nc"])
    html_path = write_report(post, tmp_path / "rep", compare=compare)
    png = tmp_path / "shot.png"
    screenshot(html_path, png, tmp_path / "profile")
    img = np.asarray(Image.open(png).convert("RGB")).astype(float)
    assert img.shape[0] >= 1000 and img.shape[1] >= 1000
    # a blank or broken page is (nearly) one colour; a rendered report has text, tables and plots
    non_white = np.mean(img.min(axis=2) < 200)
    assert non_white > 0.03, f"only {non_white:.1%} of the page is drawn"
    colours = len(np.unique((img // 32).reshape(-1, 3), axis=0))
    assert colours >= 20, f"only {colours} colour bins: images did not render"
    # the embedded figures rendered: the plot colours (blue and red curves/points) are on the page
    blue = np.mean((img[..., 2] > 150) & (img[..., 0] < 100))
    assert blue > 0.001


def _sealed_checkpoint(path, fingerprint, units, total):
    """A checkpoint as run_units writes it (format 2: run id and one content hash per unit)."""
    from dpposterior.checkpoint import FORMAT, run_id, unit_hash
    from dpposterior.diagnostics.calibration import study_id

    rid = run_id(fingerprint)
    path.write_text(json.dumps({"format": FORMAT, "run_id": rid, "fingerprint": fingerprint, "total": total,
                                "results": units,
                                "sha256": {k: unit_hash(rid, int(k), v) for k, v in units.items()}}))
    return study_id(fingerprint)


def test_calibration_ranks_read_from_the_checkpoint(tmp_path):
    # `dpposterior calibrate` keeps per-trial quantiles only in its checkpoint <out>.ckpt.json
    rng = np.random.default_rng(5)
    result = {"family": "binomial", "n": 50, "epsilon": 0.5, "trials": 30, "coordinates": ["p"],
              "methods": {"gibbs-ss": {"ks": 0.1, "coverage": {}}, "naive": {"ks": 0.3, "coverage": {}}}}
    units = {str(i): {"ranks": {m: rng.uniform(size=(15, 1)).tolist() for m in result["methods"]}}
             for i in range(2)}
    ck = tmp_path / "cal.json.ckpt.json"
    result["run_id"] = _sealed_checkpoint(ck, {"seed": 1}, units, 2)
    (tmp_path / "cal.json").write_text(json.dumps(result))
    html = write_report(tmp_path / "cal.json", tmp_path / "out").read_text()
    assert (tmp_path / "out" / "rank_ecdf.png").exists() and "checkpoint" in html
    # an unfinished checkpoint is not used (its ranks would not match the summary)
    result["run_id"] = _sealed_checkpoint(ck, {"seed": 1}, units, 3)
    (tmp_path / "cal.json").write_text(json.dumps(result))
    html = write_report(tmp_path / "cal.json", tmp_path / "out2").read_text()
    assert not (tmp_path / "out2" / "rank_ecdf.png").exists() and "unfinished" in html
    # a result without a run id (older dpposterior) cannot be matched to a checkpoint: not used
    del result["run_id"]
    (tmp_path / "cal.json").write_text(json.dumps(result))
    html = write_report(tmp_path / "cal.json", tmp_path / "out3").read_text()
    assert not (tmp_path / "out3" / "rank_ecdf.png").exists() and "no run id" in html

def test_report_does_not_rerun_a_large_small_area_sampler():
    """The naive overlay of a small-area posterior over tens of thousands of areas would rerun the sampler
    (as long as infer took): report names --compare instead; a small table is recomputed."""
    from dpposterior.report import NAIVE_RERUN_MAX_CELL_ITERATIONS, _small_area_rerun_too_big

    attrs = {"options_chains": 4, "options_draws": 1000, "options_warmup": 1000}
    small = {"family": "small-area", "areas": [f"a{i}" for i in range(100)], "cells": ["x", "y"]}
    large = {**small, "areas": [f"a{i}" for i in range(50_000)], "cells": [str(c) for c in range(8)]}
    assert 100 * 2 * 4 * 2000 <= NAIVE_RERUN_MAX_CELL_ITERATIONS
    assert _small_area_rerun_too_big(small, attrs) == ""
    assert "--compare" in _small_area_rerun_too_big(large, attrs)
    assert _small_area_rerun_too_big({"family": "gaussian"}, attrs) == ""
