"""CLI contracts: bad input -> one line naming the field, exit code 2, no traceback;
the curator -> analyst happy path writes the netCDF contract (gaussian family)."""

import hashlib
import json

import arviz as az
import numpy as np
import pytest

from dpposterior import __version__
from dpposterior.cli import main

GOOD_RELEASE = {"format": "dpposterior-release/1", "family": "gaussian", "n": 43, "bounds": [0.0, 100.0],
                "statistics": {"mean": {"value": 34.30, "mechanism": "laplace", "epsilon": 0.25},
                               "variance": {"value": 2224.07, "mechanism": "laplace", "epsilon": 0.25}}}


def _release(tmp_path, name="rel.json", **changes):
    data = json.loads(json.dumps(GOOD_RELEASE))
    for dotted, value in changes.items():
        *head, last = dotted.split("__")
        node = data
        for key in head:
            node = node[key]
        if value is _DELETE:
            del node[last]
        else:
            node[last] = value
    path = tmp_path / name
    path.write_text(json.dumps(data))  # json writes NaN for float("nan"), as a careless tool would
    return str(path)


_DELETE = object()


def _toml(tmp_path, text, name="analysis.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _csv(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "data.csv"
    values = np.clip(rng.normal(32, 17, 43), 0, 100)
    path.write_text("lead,other\n" + "\n".join(f"{v:.3f},x" for v in values) + "\n")
    return str(path)


def _release_cmd(tmp_path, *extra, data=None):
    return ["release", data or _csv(tmp_path), "--family", "gaussian", "--column", "lead", "--bounds", "0", "100",
            "--epsilon", "0.5", "--seed", "1", "--out", str(tmp_path / "out.json"), *extra]


def _infer_cmd(tmp_path, release, *extra):
    return ["infer", release, "--out", str(tmp_path / "post.nc"), "--draws", "20", "--warmup", "5", "--chains", "1",
            "--quiet", *extra]


def _replace(args, option, value):
    args = list(args)
    args[args.index(option) + 1] = value
    return args


def _bounds(args, lo, hi):
    i = args.index("--bounds")
    return args[: i + 1] + [lo, hi] + args[i + 3:]


BAD = {
    # curator
    "unknown family": (lambda t: _replace(_release_cmd(t), "--family", "poisson-ish"), "family"),
    "epsilon zero": (lambda t: _replace(_release_cmd(t), "--epsilon", "0"), "epsilon"),
    "epsilon negative": (lambda t: _replace(_release_cmd(t), "--epsilon", "-1"), "epsilon"),
    "bounds reversed (curator)": (lambda t: _bounds(_release_cmd(t), "100", "0"), "bounds"),
    "missing column": (lambda t: _replace(_release_cmd(t), "--column", "nope"), "column"),
    "non-numeric column": (lambda t: _replace(_release_cmd(t), "--column", "other"), "column"),
    "split does not add up": (lambda t: _release_cmd(t, "--epsilon-split", "0.5,0.6"), "epsilon-split"),
    "split out of range": (lambda t: _release_cmd(t, "--epsilon-split", "1.5"), "epsilon-split"),
    "split not a number": (lambda t: _release_cmd(t, "--epsilon-split", "half"), "epsilon-split"),
    "gaussian mechanism for curator": (lambda t: _release_cmd(t, "--mechanism", "gaussian"), "mechanism"),
    "data file missing": (lambda t: _release_cmd(t, data=str(t / "absent.csv")), "data"),
    # release file
    "n <= 3 with flat prior": (lambda t: _infer_cmd(t, _release(t, n=3)), "prior.kind"),
    "n too small": (lambda t: _infer_cmd(t, _release(t, n=1)), "release.n"),
    "missing statistic": (lambda t: _infer_cmd(t, _release(t, statistics__variance=_DELETE)),
                          "release.statistics.variance"),
    "NaN value": (lambda t: _infer_cmd(t, _release(t, statistics__mean__value=float("nan"))),
                  "release.statistics.mean.value"),
    "sensitivity mismatch": (lambda t: _infer_cmd(t, _release(t, statistics__mean__sensitivity=2.0)),
                             "release.statistics.mean.sensitivity"),
    "bounds reversed (release)": (lambda t: _infer_cmd(t, _release(t, bounds=[100.0, 0.0])), "release.bounds"),
    "release epsilon <= 0": (lambda t: _infer_cmd(t, _release(t, statistics__variance__epsilon=0)),
                             "release.statistics.variance.epsilon"),
    "release unknown family": (lambda t: _infer_cmd(t, _release(t, family="nope")), "release.family"),
    "release wrong format": (lambda t: _infer_cmd(t, _release(t, format="v0")), "release.format"),
    "release mechanism unsupported": (lambda t: _infer_cmd(t, _release(t, statistics__mean__mechanism="gaussian")),
                                      "release.statistics.mean.mechanism"),
    "release extra field": (lambda t: _infer_cmd(t, _release(t, rows=[1, 2, 3])), "release.rows"),
    "eps2 too large for the TGM": (lambda t: _infer_cmd(t, _release(t, statistics__variance__epsilon=5.0)),
                                   "release.statistics.variance.epsilon"),
    "release not JSON": (lambda t: _infer_cmd(t, _toml(t, "{nope", "bad.json")), "release"),
    # analysis file / options
    "bad TOML": (lambda t: _infer_cmd(t, _release(t), "--analysis", _toml(t, "method = = 1")), "analysis"),
    "unknown prior kind": (lambda t: _infer_cmd(t, _release(t), "--analysis", _toml(t, '[prior]\nkind = "beta"\n')),
                           "prior.kind"),
    "jeffreys prior": (lambda t: _infer_cmd(t, _release(t), "--analysis", _toml(t, '[prior]\nkind = "jeffreys"\n')),
                       "prior.kind"),
    "NIG missing kappa0": (lambda t: _infer_cmd(t, _release(t), "--analysis", _toml(
        t, '[prior]\nkind = "normal-inverse-gamma"\nmu0 = 1.0\nsigma0_sq = 1.0\nnu0 = 1.0\n')), "prior.kappa0"),
    "NIG negative nu0": (lambda t: _infer_cmd(t, _release(t), "--analysis", _toml(
        t, '[prior]\nkind = "normal-inverse-gamma"\nmu0 = 1.0\nsigma0_sq = 1.0\nkappa0 = 1.0\nnu0 = -1.0\n')),
                         "prior.nu0"),
    # a top-level analysis key is an engine option: refused by the engine that runs
    "unknown analysis key": (lambda t: _infer_cmd(t, _release(t), "--analysis", _toml(t, "colour = 1\n")),
                             "colour: not an option of gaussian/gibbs (options: "),
    "constrained not bool": (lambda t: _infer_cmd(t, _release(t), "--analysis", _toml(t, 'constrained = "yes"\n')),
                             "analysis.constrained"),
    "unknown method": (lambda t: _infer_cmd(t, _release(t), "--method", "hmc"), "method"),
    "bad draws": (lambda t: _infer_cmd(t, _release(t), "--draws", "0"), "draws"),
    "bad chains": (lambda t: _infer_cmd(t, _release(t), "--chains", "0"), "chains"),
    "draws not an integer": (lambda t: _infer_cmd(t, _release(t), "--draws", "many"), "draws"),
    "joint_update not bool": (lambda t: _infer_cmd(t, _release(t), "--analysis", _toml(t, 'joint_update = 3\n')),
                              "joint_update"),
    "grid_size out of range": (lambda t: _infer_cmd(t, _release(t), "--method", "grid", "--analysis",
                                                    _toml(t, 'grid_size = 5\n')), "grid_size"),
    "simulations not a gaussian option": (lambda t: _infer_cmd(t, _release(t), "--simulations", "10"),
                                          "simulations"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2(case, tmp_path, capsys):
    build, field = BAD[case]
    code = main(build(tmp_path))
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert code == 2, (case, err)
    assert "Traceback" not in captured.err + captured.out
    assert len(err.splitlines()) == 1, err
    assert err.startswith("error: ")
    assert field in err, (field, err)
    assert not (tmp_path / "post.nc").exists()


def test_release_then_infer_happy_path(tmp_path, capsys):
    data = _csv(tmp_path)
    rel_path = tmp_path / "out.json"
    assert main(_release_cmd(tmp_path, "--epsilon-split", "0.4", data=data)) == 0
    release = json.loads(rel_path.read_text())
    assert release["family"] == "gaussian" and release["n"] == 43
    assert release["statistics"]["mean"]["epsilon"] == pytest.approx(0.2)
    assert release["statistics"]["variance"]["epsilon"] == pytest.approx(0.3)
    assert release["statistics"]["mean"]["sampler"].startswith("numpy")
    assert release["statistics"]["variance"]["sensitivity"] == pytest.approx(100**2 / 43)
    # never a data row: the only numbers are the statistics, bounds, n and the budget and its accounting
    assert set(release) == {"format", "family", "neighbouring", "n", "bounds", "statistics", "accounting"}
    assert release["accounting"]["epsilon"] == pytest.approx(0.5) and release["accounting"]["delta"] == 0
    assert release["neighbouring"] == "replace-one"
    analysis = _toml(tmp_path, 'method = "auto"\nconstrained = true\n[prior]\nkind = "normal-inverse-gamma"\n'
                               'mu0 = 12.5\nsigma0_sq = 14.44\nkappa0 = 1.0\nnu0 = 1.0\n'
                               '[sampling]\ndraws = 300\nwarmup = 100\nchains = 2\nseed = 1\n')
    out = tmp_path / "post.nc"
    capsys.readouterr()
    assert main(["infer", str(rel_path), "--analysis", analysis, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "hdi_2.5%" in printed and "naive" in printed
    idata = az.from_netcdf(out, engine="h5netcdf")
    assert idata.posterior["mu"].dims == ("chain", "draw") and idata.posterior["mu"].shape == (2, 300)
    assert idata.posterior["sigma2"].shape == (2, 300)
    y = idata.posterior_predictive["y_new"].values
    assert y.shape == (2, 300) and np.all((y >= 0) & (y <= 100))
    attrs = idata.posterior.attrs
    assert attrs["method"] == "gibbs" and attrs["seed"] == 1
    assert attrs["release_sha256"] == hashlib.sha256(rel_path.read_bytes()).hexdigest()
    assert attrs["dpposterior_version"] == __version__
    mu = idata.posterior["mu"].values
    assert np.all((mu >= 0) & (mu <= 100))


def test_release_without_seed_uses_opendp(tmp_path):
    data = _csv(tmp_path)
    args = [a for a in _release_cmd(tmp_path, data=data)]
    i = args.index("--seed")
    del args[i:i + 2]
    assert main(args) == 0
    release = json.loads((tmp_path / "out.json").read_text())
    assert release["statistics"]["mean"]["sampler"].startswith("opendp")


def test_grid_and_naive_methods_from_cli(tmp_path):
    rel = _release(tmp_path)
    for method in ("grid", "naive"):
        out = tmp_path / f"{method}.nc"
        assert main(["infer", rel, "--method", method, "--draws", "200", "--chains", "2", "--seed", "3", "--quiet",
                     "--no-naive", "--out", str(out)]) == 0
        idata = az.from_netcdf(out, engine="h5netcdf")
        assert idata.posterior.attrs["method"] == method
