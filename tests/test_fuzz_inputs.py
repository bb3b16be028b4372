"""No silent wrong answers: a fuzz suite of bad and extreme inputs.

Every case must end in exactly one of two ways:

* **refused** -- exit code 2 (Python: an ``InputError``), one line on stderr naming the field, no
  traceback, and nothing written to ``--out``;
* **answered** -- exit code 0 and a posterior whose draws are all finite (flagged in the terminal
  and the file where it is unreliable).

The cases: release files of every family with each field broken in each way a careless tool
breaks it; the curator's options; ``infer``, ``report`` and ``calibrate`` options and paths; the
Python API; the listed inputs; and a sweep of extreme epsilon, n, values and bounds
over every family (hypothesis adds random extreme numbers on top).
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pytest

import dpposterior
from dpposterior.cli import main
from dpposterior.errors import InputError

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"

#: curator options of each family for the shared CSV below
CURATE = {
    "gaussian": ["--column", "lead", "--bounds", "0", "100"],
    "binomial": ["--column", "b"],
    "multinomial": ["--column", "cat"],
    "exponential": ["--column", "wait", "--bounds", "0", "10"],
    "poisson": ["--column", "count", "--bounds", "0", "10"],
    "naive-bayes": ["--columns", "Y,X1,X2"],
    "loglinear": ["--columns", "Y,X1,X2"],
    "linear-regression": ["--features", "x1,x2", "--response", "y", "--x-norm", "5", "--y-abs", "5"],
    "linreg-ju": ["--features", "x1,x2", "--response", "y"],
}
FAMILIES = [*CURATE, "sir"]
#: families whose default engine is cheap enough to run inside the fuzz suite
FAST_INFER = {"gaussian": [], "binomial": [], "multinomial": [], "exponential": [], "poisson": [],
              "naive-bayes": ["--method", "vb"], "linear-regression": ["--method", "mcmc-normalx"],
              "linreg-ju": ["--method", "smc-abc", "--simulations", "600"],
              "loglinear": ["--method", "smc-abc", "--simulations", "600"],
              "sir": ["--method", "smc-abc", "--simulations", "600"]}


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _refused(argv, capsys, field=None, out=None):
    code, stdout, err = _run(argv, capsys)
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2, f"exit {code}, stderr {err!r}, stdout tail {stdout[-300:]!r}"
    assert len(lines) == 1 and "Traceback" not in err, err
    if field is not None:
        assert field in lines[0], lines[0]
    if out is not None:
        assert not Path(out).exists(), f"{out} was written by a refused command"
    return lines[0]


def _answered_finite(argv, out, capsys):
    code, stdout, err = _run(argv, capsys)
    if code == 2:  # a refusal is an acceptable end too -- one line, nothing written
        lines = [line for line in err.splitlines() if line.startswith("error:")]
        assert len(lines) == 1 and "Traceback" not in err, err
        assert not Path(out).exists()
        return None
    assert code == 0, err
    import arviz as az

    idata = az.from_netcdf(out)
    for name, var in idata.posterior.data_vars.items():
        assert _finite_or_padding(var.values), f"{name} has non-finite draws and exit code 0"
    assert "warnings" in idata.posterior.attrs
    return idata


def _finite_or_padding(values) -> bool:
    """All finite, except NaN padding of a ragged variable (naive Bayes feature_prob): the same cells
    NaN in every draw, never all of them, never infinite."""
    bad = ~np.isfinite(values)
    if not bad.any():
        return True
    if np.isinf(values).any() or values.ndim <= 2:
        return False
    pattern = bad.reshape(-1, *values.shape[2:])
    return bool(np.all(pattern == pattern[0]) and not pattern[0].all())


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A CSV with a column for every family, and one curated release per family (seeded, numpy noise)."""
    root = tmp_path_factory.mktemp("fuzz")
    rng = np.random.default_rng(0)
    n = 60
    x1, x2 = rng.normal(0.9, 1.0, n), rng.normal(-1.17, 1.0, n)
    cols = {
        "lead": np.clip(rng.normal(32, 17, n), 0, 100), "b": (rng.random(n) < 0.4).astype(int),
        "cat": rng.choice(["a", "b", "c"], n), "wait": rng.exponential(2.0, n) + 1e-3,
        "count": rng.poisson(3.0, n), "Y": rng.choice(["y0", "y1"], n), "X1": rng.choice(["u", "v"], n),
        "X2": rng.choice(["p", "q", "r"], n), "x1": x1, "x2": x2,
        "y": 0.5 + 0.3 * x1 - 0.2 * x2 + rng.normal(0, 1.4, n),
    }
    csv = root / "data.csv"
    names = list(cols)
    csv.write_text(",".join(names) + "\n" + "\n".join(
        ",".join(str(cols[c][i]) for c in names) for i in range(n)) + "\n")
    releases = {}
    for family, opts in CURATE.items():
        out = root / f"{family}.json"
        code = main(["release", str(csv), "--family", family, *opts, "--epsilon", "1", "--seed", "3",
                     "--out", str(out)])
        assert code == 0, family
        releases[family] = json.loads(out.read_text())
    releases["sir"] = json.loads((EXAMPLES / "releases" / "sir-eps10.json").read_text())
    return {"root": root, "csv": csv, "releases": releases}


def _records(node, path=()):
    """(path, record dict) of every statistic record (a dict with a 'mechanism') in a release dict."""
    if isinstance(node, dict):
        if "mechanism" in node and "epsilon" in node:
            yield path, node
            return
        for key, value in node.items():
            yield from _records(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _records(value, (*path, i))


def _mutated(workspace, family, mutate, name):
    data = json.loads(json.dumps(workspace["releases"][family]))
    mutate(data)
    path = workspace["root"] / f"mut-{family}-{name}.json"
    path.write_text(json.dumps(data))  # json writes NaN / Infinity, as a careless tool would
    return path


def _first_record(data):
    return next(_records(data))[1]


def _set_first(key, value):
    def mutate(data):
        _first_record(data)[key] = value
    return mutate


def _set_top(key, value):
    def mutate(data):
        data[key] = value
    return mutate


def _delete_first(key):
    def mutate(data):
        del _first_record(data)[key]
    return mutate


#: mutations every family must refuse: (name, mutate, field fragment expected in the error)
ALWAYS_REFUSED = [
    ("format", _set_top("format", "dpposterior-release/9"), "release.format"),
    ("family-unknown", _set_top("family", "weibull"), "release.family"),
    ("family-number", _set_top("family", 3), "release.family"),
    ("extra-field", _set_top("colour", "blue"), "release.colour"),
    ("neighbouring", _set_top("neighbouring", "add-remove"), "neighbouring"),
    ("n-huge", _set_top("n", 10 ** 30), ".n"),
    ("eps-zero", _set_first("epsilon", 0), "epsilon"),
    ("eps-negative", _set_first("epsilon", -1.0), "epsilon"),
    ("eps-nan", _set_first("epsilon", float("nan")), "epsilon"),
    ("eps-inf", _set_first("epsilon", float("inf")), "epsilon"),
    ("eps-tiny", _set_first("epsilon", 1e-300), "epsilon"),
    ("eps-huge", _set_first("epsilon", 1e308), "epsilon"),
    ("eps-1e12", _set_first("epsilon", 1e12), "epsilon"),
    ("eps-string", _set_first("epsilon", "1"), "epsilon"),
    ("eps-bool", _set_first("epsilon", True), "epsilon"),
    ("eps-null", _set_first("epsilon", None), "epsilon"),
    ("eps-missing", _delete_first("epsilon"), "epsilon"),
    ("value-nan", _set_first("value", float("nan")), "value"),
    ("value-inf", _set_first("value", float("inf")), "value"),
    ("value-string", _set_first("value", "12"), "value"),
    ("value-bool", _set_first("value", True), "value"),
    ("value-empty", _set_first("value", []), "value"),
    ("value-missing", _delete_first("value"), "value"),
    ("mechanism-unknown", _set_first("mechanism", "exponential"), "mechanism"),
    ("record-extra", _set_first("colour", 1), "colour"),
]


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name,mutate,field", ALWAYS_REFUSED, ids=[c[0] for c in ALWAYS_REFUSED])
def test_broken_release_refused(workspace, family, name, mutate, field, capsys):
    path = _mutated(workspace, family, mutate, name)
    out = workspace["root"] / f"post-{family}-{name}.nc"
    _refused(["infer", path, "--out", out, "--draws", "10", "--chains", "1", "--quiet"], capsys, field, out)


@pytest.mark.parametrize("family", FAMILIES)
def test_clean_release_loads(workspace, family):
    # the base of every mutation is valid: a refusal above is the mutation's doing
    from dpposterior.release import load_release

    assert load_release(workspace["releases"][family]).family == family


def _map_nested(value, fn):
    """Apply ``fn`` to every number of a (ragged) nested list."""
    if isinstance(value, list):
        return [_map_nested(v, fn) for v in value]
    return fn(float(value))


def _released_far(factor):
    def mutate(data):
        rec = _first_record(data)
        rec["value"] = _map_nested(rec["value"], lambda v: factor)
    return mutate


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("value", [1e9, -1e9, 1e300])
def test_value_far_outside_what_the_data_allow_refused(workspace, family, value, capsys):
    # a released value 1e9 (or -1e9, 1e300) cannot come from bounded data plus this noise
    path = _mutated(workspace, family, _released_far(value), f"far{value:g}")
    out = workspace["root"] / f"far-{family}-{value:g}.nc"
    _refused(["infer", path, "--out", out, "--draws", "10", "--chains", "1", "--quiet"], capsys, "value", out)


# ------------------------------------------------------------------------------ the curator

def _release_argv(workspace, family, *extra, out=None):
    out = out or workspace["root"] / f"rel-{family}.json"
    return ["release", workspace["csv"], "--family", family, *CURATE.get(family, []), "--epsilon", "1",
            "--seed", "1", "--out", out, *extra]


UNUSED_OPTIONS = {
    "gaussian": [["--delta", "1e-6"], ["--x-norm", "1"], ["--scale", "counts"], ["--parties", "2"],
                 ["--intercept"], ["--features", "x1"], ["--population", "100"], ["--design", "d.json"]],
    "binomial": [["--bounds", "0", "1"], ["--epsilon-split", "0.5,0.5"], ["--delta", "1e-6"],
                 ["--mechanism", "gaussian"], ["--y-abs", "1"]],
    "multinomial": [["--epsilon-split", "0.5,0.5"], ["--bounds", "0", "1"], ["--delta", "1e-6"]],
    "exponential": [["--delta", "1e-6"], ["--scale", "counts"], ["--epsilon-split", "0.5,0.5"]],
    "poisson": [["--delta", "1e-6"], ["--parties", "3"]],
    "naive-bayes": [["--bounds", "0", "1"], ["--delta", "1e-6"], ["--column", "lead"]],
    "loglinear": [["--bounds", "0", "1"], ["--delta", "1e-6"]],
    "linear-regression": [["--scale", "counts"], ["--column", "lead"], ["--mechanism", "laplace", "--delta", "1e-6"]],
    "linreg-ju": [["--bounds", "0", "1"], ["--delta", "1e-6"], ["--intercept"], ["--x-norm", "1"]],
}


@pytest.mark.parametrize("family,extra", [(f, e) for f, opts in UNUSED_OPTIONS.items() for e in opts],
                         ids=[f"{f}{''.join(e)}" for f, opts in UNUSED_OPTIONS.items() for e in opts])
def test_curator_refuses_options_it_does_not_use(workspace, family, extra, capsys):
    out = workspace["root"] / f"unused-{family}.json"
    # linear-regression with --mechanism laplace: it is the Gaussian mechanism's --delta that is unused
    field = "delta" if family == "linear-regression" and extra[0] == "--mechanism" else extra[0].lstrip("-")
    _refused(_release_argv(workspace, family, *extra, out=out), capsys, field, out)


@pytest.mark.parametrize("family", list(CURATE))
@pytest.mark.parametrize("epsilon", ["0", "-1", "nan", "inf", "1e-300", "1e-7", "1e10", "1e308"])
def test_curator_refuses_epsilon_out_of_range(workspace, family, epsilon, capsys):
    out = workspace["root"] / f"eps-{family}.json"
    argv = _release_argv(workspace, family, out=out)
    argv[argv.index("--epsilon") + 1] = epsilon
    _refused(argv, capsys, "epsilon", out)


@pytest.mark.parametrize("family", list(CURATE))
@pytest.mark.parametrize("seed", ["-1", "1.5", "abc", str(2 ** 64)])
def test_curator_refuses_bad_seed(workspace, family, seed, capsys):
    out = workspace["root"] / f"seed-{family}.json"
    argv = _release_argv(workspace, family, out=out)
    argv[argv.index("--seed") + 1] = seed
    _refused(argv, capsys, "seed", out)


@pytest.mark.parametrize("family,column", [("gaussian", "lead"), ("exponential", "wait"), ("poisson", "count"),
                                           ("binomial", "b")])
@pytest.mark.parametrize("bad", ["inf", "-inf", "nan", "", "abc"])
def test_curator_refuses_non_finite_records(workspace, family, column, bad, capsys):
    # a second column so that an empty cell is a missing value (pandas skips blank lines)
    csv = workspace["root"] / f"bad-{family}-{bad or 'empty'}.csv"
    csv.write_text(f"{column},other\n1,a\n2,b\n{bad},c\n3,d\n")
    out = workspace["root"] / f"badrec-{family}-{bad or 'empty'}.json"
    argv = ["release", csv, "--family", family, *CURATE[family], "--epsilon", "1", "--seed", "1", "--out", out]
    _refused(argv, capsys, "column", out)


@pytest.mark.parametrize("target", ["missing-folder", "folder", "proc", "empty"])
@pytest.mark.parametrize("command", ["release", "infer"])
def test_unwritable_out_refused_before_any_work(workspace, target, command, capsys, tmp_path):
    out = {"missing-folder": tmp_path / "nope" / "x.out", "folder": tmp_path, "proc": Path("/proc/x.out"),
           "empty": Path("")}[target]
    if command == "release":
        argv = _release_argv(workspace, "gaussian", out=out)
    else:
        path = workspace["root"] / "g-ok.json"
        path.write_text(json.dumps(workspace["releases"]["gaussian"]))
        argv = ["infer", path, "--out", out, "--draws", "10", "--chains", "1", "--quiet"]
    _refused(argv, capsys, "out")


@pytest.mark.parametrize("what", ["folder", "missing", "empty", "binary", "not-json", "json-list"])
def test_bad_release_path_refused(workspace, what, capsys, tmp_path):
    path = {"folder": tmp_path, "missing": tmp_path / "none.json"}.get(what, tmp_path / f"{what}.json")
    if what == "empty":
        path.write_text("")
    elif what == "binary":
        path.write_bytes(b"\x89PNG\x00\xff")
    elif what == "not-json":
        path.write_text("family: gaussian")
    elif what == "json-list":
        path.write_text("[1, 2]")
    out = tmp_path / "p.nc"
    _refused(["infer", path, "--out", out, "--quiet"], capsys, "release", out)


# ------------------------------------------------------------------------------ infer options

INFER_OPTIONS = [
    (["--draws", "0"], "draws"), (["--draws", "-5"], "draws"), (["--draws", "100000000000"], "draws"),
    (["--draws", "ten"], "draws"), (["--chains", "0"], "chains"), (["--chains", "100000000"], "draws"),
    (["--warmup", "-1"], "warmup"), (["--warmup", "100000000000"], "warmup"), (["--seed", "-1"], "seed"),
    (["--seed", str(2 ** 64)], "seed"), (["--method", "nuts"], "method"), (["--method", ""], "method"),
    (["--scheduler", "gpu"], "scheduler"), (["--scheduler", "tcp://127.0.0.1:1"], "scheduler"),
    (["--scheduler", "tcp://nohost"], "scheduler"), (["--workers", "0"], "workers"),
    (["--simulations", "100"], "simulations"), (["--rounds", "2"], "rounds"),
    (["--rqmc-points", "4"], "rqmc"), (["--analysis", "missing.toml"], "analysis"),
]


@pytest.mark.parametrize("extra,field", INFER_OPTIONS, ids=["".join(e) for e, _ in INFER_OPTIONS])
def test_bad_infer_option_refused(workspace, extra, field, capsys, tmp_path):
    path = workspace["root"] / "g-ok.json"
    path.write_text(json.dumps(workspace["releases"]["gaussian"]))
    out = tmp_path / "p.nc"
    base = ["infer", path, "--out", out, "--quiet"]
    if "--draws" not in extra:
        base += ["--draws", "10"]
    _refused(base + extra, capsys, field, out)


@pytest.mark.parametrize("text,field", [("[prior]\nkind = 'flat'\nextra = 1\n", "prior"), ("draws = -1\n", "draws"),
                                        ("method = 'nuts'\n", "method"), ("not toml [", "analysis"),
                                        ("constrained = 'yes'\n", "constrained"), ("chains = 1.5\n", "chains")])
def test_bad_analysis_file_refused(workspace, text, field, capsys, tmp_path):
    path = workspace["root"] / "g-ok.json"
    path.write_text(json.dumps(workspace["releases"]["gaussian"]))
    toml = tmp_path / "a.toml"
    toml.write_text(text)
    out = tmp_path / "p.nc"
    _refused(["infer", path, "--analysis", toml, "--out", out, "--draws", "10", "--quiet"], capsys, field, out)


def test_analysis_path_is_a_folder(workspace, capsys, tmp_path):
    path = workspace["root"] / "g-ok.json"
    path.write_text(json.dumps(workspace["releases"]["gaussian"]))
    _refused(["infer", path, "--analysis", tmp_path, "--out", tmp_path / "p.nc", "--quiet"], capsys, "analysis")


# ------------------------------------------------------------------------------ extreme sweep

@pytest.mark.parametrize("family", list(FAST_INFER))
@pytest.mark.parametrize("epsilon", [1e-6, 1e-3, 1e3, 1e6, 1e9])
def test_extreme_epsilon_refused_or_finite(workspace, family, epsilon, capsys, tmp_path):
    # every statistic at the same extreme epsilon (the value left as released): either a clean
    # refusal or a finite posterior -- never exit 0 with NaN draws
    def mutate(data):
        for _, rec in _records(data):
            rec["epsilon"] = epsilon
            rec.pop("sigma", None)
            rec.pop("sensitivity", None)
    path = _mutated(workspace, family, mutate, f"eps{epsilon:g}")
    out = tmp_path / "p.nc"
    _answered_finite(["infer", path, "--out", out, "--draws", "40", "--warmup", "20", "--chains", "2", "--quiet",
                      "--no-naive", *FAST_INFER[family]], out, capsys)


@pytest.mark.parametrize("family", list(FAST_INFER))
@pytest.mark.parametrize("shift", [-30.0, -3.0, 3.0, 30.0])
def test_values_at_the_edge_of_the_noise_refused_or_finite(workspace, family, shift, capsys, tmp_path):
    # released values pushed `shift` noise scales beyond their feasible range: finite or refused
    from dpposterior.release import load_release

    rel = load_release(workspace["releases"][family])

    def mutate(data):
        for (_, rec), loaded in zip(_records(data), _loaded_records(rel)):
            scale = loaded.noise_scale(loaded.sensitivity) if loaded.mechanism == "laplace" or loaded.sigma else None
            if scale is None:
                continue
            rec["value"] = _map_nested(rec["value"], lambda v: v + shift * scale)
    path = _mutated(workspace, family, mutate, f"shift{shift:g}")
    out = tmp_path / "p.nc"
    _answered_finite(["infer", path, "--out", out, "--draws", "40", "--warmup", "20", "--chains", "2", "--quiet",
                      "--no-naive", *FAST_INFER[family]], out, capsys)


def _loaded_records(release):
    from dpposterior.release import _records as release_records

    # the loader derives omitted sensitivities; visit records in the file's order
    out = list(release_records(release))
    out.reverse()  # release._records walks a stack (last first)
    return out


@pytest.mark.parametrize("n", [2, 3, 10 ** 6, 2 ** 52])
@pytest.mark.parametrize("family", ["gaussian", "binomial", "exponential", "poisson"])
def test_extreme_n_refused_or_finite(workspace, family, n, capsys, tmp_path):
    def mutate(data):
        data["n"] = n
        for _, rec in _records(data):
            rec.pop("sensitivity", None)
    path = _mutated(workspace, family, mutate, f"n{n}")
    out = tmp_path / "p.nc"
    _answered_finite(["infer", path, "--out", out, "--draws", "40", "--warmup", "20", "--chains", "2", "--quiet",
                      "--no-naive"], out, capsys)


@pytest.mark.parametrize("bounds", [[0.0, 1e-12], [-1e150, 1e150], [1e300, 1.0000001e300], [5.0, 5.0],
                                    [10.0, 0.0], [-1e-300, 1e-300]])
def test_extreme_gaussian_bounds_refused_or_finite(workspace, bounds, capsys, tmp_path):
    def mutate(data):
        data["bounds"] = bounds
        for _, rec in _records(data):
            rec.pop("sensitivity", None)
    path = _mutated(workspace, "gaussian", mutate, f"bounds{bounds}")
    out = tmp_path / "p.nc"
    _answered_finite(["infer", path, "--out", out, "--draws", "40", "--warmup", "20", "--chains", "2", "--quiet"],
                     out, capsys)


# ------------------------------------------------------------------------------ the listed inputs

def test_gaussian_mean_far_outside_bounds_refused(workspace, capsys, tmp_path):
    path = _mutated(workspace, "gaussian", lambda d: d["statistics"]["mean"].update(value=1e9), "mean1e9")
    _refused(["infer", path, "--out", tmp_path / "p.nc", "--quiet"], capsys, "statistics.mean.value")


def test_tiny_noise_gaussian_mean_refused(capsys, tmp_path):
    # n * epsilon beyond 1e9: the sampler's arithmetic overflowed (an sd twice too large)
    rel = {"format": "dpposterior-release/1", "family": "gaussian", "n": 43, "bounds": [0.0, 100.0],
           "statistics": {"mean": {"value": 34.3, "mechanism": "laplace", "epsilon": 1e8},
                          "variance": {"value": 2224.07, "mechanism": "laplace", "epsilon": 0.25}}}
    path = tmp_path / "r.json"
    path.write_text(json.dumps(rel))
    _refused(["infer", path, "--out", tmp_path / "p.nc", "--quiet"], capsys, "statistics.mean.epsilon")


def test_smc_abc_that_never_left_the_prior_is_flagged(capsys, tmp_path):
    out = tmp_path / "sir.nc"
    code, stdout, err = _run(["infer", EXAMPLES / "releases" / "sir-eps10.json", "--method", "smc-abc",
                              "--simulations", "1000", "--seed", "1", "--out", out], capsys)
    assert code == 0
    assert "warning: SMC-ABC ran only its first generation" in err
    import arviz as az

    assert "IS the prior" in az.from_netcdf(out).posterior.attrs["warnings"]


def test_regression_noise_variance_without_yty_is_flagged(workspace, tmp_path):
    # the release has x'x and x'y only: sigma2's posterior is its IG(20, 0.5) prior, and says so
    import dpposterior

    post = dpposterior.infer(workspace["releases"]["linear-regression"], method="mcmc-normalx", draws=1500,
                             warmup=500, chains=2, seed=2)
    assert any(w.startswith("sigma2: the posterior is its prior") for w in post.warnings), post.warnings
    assert not any(w.startswith("theta") for w in post.warnings)


def test_curator_default_delta_is_well_below_one_over_n(workspace):
    parties = workspace["releases"]["linear-regression"]["parties"]
    n = workspace["releases"]["linear-regression"]["n"]
    deltas = [rec["delta"] for p in parties for rec in p["statistics"].values() if "delta" in rec]
    assert deltas and max(deltas) <= min(1e-6, 1.0 / n ** 2) * (1 + 1e-12)


def test_linreg_ju_curator_design_file_and_mismatch_warning(workspace, capsys, tmp_path):
    design = tmp_path / "design.json"
    design.write_text(json.dumps({"x_mean": [5.0, 5.0], "x_cov": [[1.0, 0.0], [0.0, 1.0]], "noise_variance": 2.0,
                                  "clamp": 10.0}))
    out = tmp_path / "ju.json"
    code, _, err = _run(_release_argv(workspace, "linreg-ju", "--design", design, out=out), capsys)
    assert code == 0 and json.loads(out.read_text())["design"]["x_mean"] == [5.0, 5.0]
    assert "warning: the data's x mean" in err  # the data were drawn around (0.9, -1.17)
    design.write_text(json.dumps({"x_mean": [1.0], "x_cov": [[1.0]]}))
    _refused(_release_argv(workspace, "linreg-ju", "--design", design, out=tmp_path / "ju2.json"), capsys, "design")


def test_non_finite_posterior_report_refused(tmp_path, capsys):
    from dpposterior.posterior import Posterior

    post = Posterior("gaussian", "gibbs", {"mu": np.array([[1.0, np.nan, 2.0, 3.0]])})
    post.to_netcdf(tmp_path / "nan.nc")
    _refused(["report", tmp_path / "nan.nc", "--out", tmp_path / "rep"], capsys, "posterior")


@pytest.mark.parametrize("what", ["missing", "folder", "not-netcdf"])
def test_bad_report_input_refused(tmp_path, what, capsys):
    path = {"missing": tmp_path / "none.nc", "folder": tmp_path}.get(what, tmp_path / "x.nc")
    if what == "not-netcdf":
        path.write_text("hello")
    _refused(["report", path, "--out", tmp_path / "rep"], capsys, "posterior")


def test_engine_returning_nan_is_refused_and_nothing_written(monkeypatch, tmp_path, capsys):
    # whatever the engine, non-finite draws never reach the file (exit 2, one line)
    from dpposterior.families import get_family
    from dpposterior.posterior import Posterior

    fam = get_family("binomial")

    def broken(model, options):
        return Posterior("binomial", "gibbs-ss", {"p": np.full((options.chains, options.draws), np.nan)})
    from dpposterior.families import EngineSpec

    monkeypatch.setitem(fam.methods, "broken", EngineSpec("tests_fuzz_broken:broken",
                                                          "dpposterior.inference.gibbs_ss:GibbsSSOptions"))
    import sys
    import types

    module = types.ModuleType("tests_fuzz_broken")
    module.broken = broken
    monkeypatch.setitem(sys.modules, "tests_fuzz_broken", module)
    rel = {"format": "dpposterior-release/1", "family": "binomial", "n": 50,
           "statistics": {"successes": {"value": 20.0, "mechanism": "laplace", "epsilon": 1.0}}}
    path = tmp_path / "b.json"
    path.write_text(json.dumps(rel))
    out = tmp_path / "p.nc"
    _refused(["infer", path, "--method", "broken", "--out", out, "--quiet"], capsys, "posterior.p", out)


# ------------------------------------------------------------------------------ calibrate, audit

CALIBRATE_BAD = [
    (["--n", "0"], "n"), (["--n", "-3"], "n"), (["--trials", "0"], "trials"), (["--epsilon", "0"], "epsilon"),
    (["--epsilon", "nan"], "epsilon"), (["--family", "weibull"], "family"), (["--methods", "nuts"], "method"),
    (["--seed", "-1"], "seed"), (["--draws", "0"], "draws"), (["--out", "/proc/c.json"], "out"),
    (["--plot", "/nonexistent/p.png"], "plot"), (["--workers", "0"], "workers"),
]


@pytest.mark.parametrize("extra,field", CALIBRATE_BAD, ids=["".join(e) for e, _ in CALIBRATE_BAD])
def test_bad_calibrate_option_refused(extra, field, capsys):
    base = {"--family": "binomial", "--n": "10", "--epsilon": "1", "--trials": "3", "--scheduler": "serial"}
    argv = ["calibrate"]
    for key, value in base.items():
        if key not in extra:
            argv += [key, value]
    _refused(argv + extra, capsys, field)


# ------------------------------------------------------------------------------ Python API

@pytest.mark.parametrize("release", [42, None, 3.5, [1, 2], b"{}", object()])
def test_python_infer_names_the_release_argument(release):
    import dpposterior

    with pytest.raises(InputError) as exc:
        dpposterior.infer(release)
    assert str(exc.value).startswith(("release", "model"))


@pytest.mark.parametrize("kwargs,field", [
    ({"draws": 0}, "draws"), ({"draws": "10"}, "draws"), ({"chains": -1}, "chains"), ({"seed": -2}, "seed"),
    ({"warmup": -1}, "warmup"), ({"method": 3}, "method"), ({"method": "nuts"}, "method"),
    ({"constrained": "yes"}, "constrained"), ({"draws": 10 ** 9, "chains": 4}, "draws"),
    ({"prior": {"kind": "beta"}}, "prior"), ({"unknown_option": 1}, "unknown_option"),
    ({"scheduler": "gpu"}, "scheduler"),
])
def test_python_infer_bad_arguments(kwargs, field):
    import dpposterior

    rel = {"format": "dpposterior-release/1", "family": "gaussian", "n": 43, "bounds": [0.0, 100.0],
           "statistics": {"mean": {"value": 34.30, "mechanism": "laplace", "epsilon": 0.25},
                          "variance": {"value": 2224.07, "mechanism": "laplace", "epsilon": 0.25}}}
    with pytest.raises(InputError) as exc:
        dpposterior.infer(rel, **kwargs)
    assert field in str(exc.value).split(":")[0], str(exc.value)


def test_summary_prints_whole():
    from dpposterior.posterior import Posterior

    post = Posterior("x", "m", {"theta": np.random.default_rng(0).normal(size=(2, 50, 80))})
    text = str(post.summary())
    assert "..." not in text and len(text.splitlines()) == 81


def test_readme_python_snippets_run_as_written(monkeypatch):
    # every ```python block of the README runs from the repository root, unchanged
    import re

    root = Path(__file__).resolve().parents[1]
    blocks = re.findall(r"```python\n(.*?)```", (root / "README.md").read_text(), flags=re.S)
    assert blocks
    monkeypatch.chdir(root)
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {"__name__": "readme"})


def test_every_cli_option_has_help():
    import typer

    from dpposterior.cli import app

    command = typer.main.get_command(app)
    missing = [f"{name} {param.opts[0]}" for name, sub in command.commands.items() for param in sub.params
               if getattr(param, "help", None) in (None, "") and param.param_type_name == "option"]
    assert not missing, missing


# ------------------------------------------------------------------------------ property-based extremes

def _extreme_floats():
    from hypothesis import strategies as st

    return st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=64),
                     st.sampled_from([0.0, -0.0, 5e-324, 1e-300, 1e-7, 1e-6, 1e9, 1.5e9, 1e300, -1e300]))


def _infer_refused_or_finite(release: dict, **kwargs) -> None:
    import dpposterior

    try:
        post = dpposterior.infer(release, draws=20, warmup=10, chains=2, seed=0, **kwargs)
    except InputError:
        return
    for name, arr in post.posterior.items():
        assert _finite_or_padding(np.asarray(arr)), (name, release)


def test_property_binomial_extremes_refused_or_finite():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(epsilon=_extreme_floats(), value=_extreme_floats(), n=st.integers(min_value=-3, max_value=2 ** 60))
    def check(epsilon, value, n):
        _infer_refused_or_finite({"format": "dpposterior-release/1", "family": "binomial", "n": n,
                                  "statistics": {"successes": {"value": value, "mechanism": "laplace",
                                                               "epsilon": epsilon}}})
    check()


def test_property_gaussian_extremes_refused_or_finite():
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(eps_mean=_extreme_floats(), eps_var=_extreme_floats(), mean=_extreme_floats(), var=_extreme_floats(),
           lo=_extreme_floats(), width=_extreme_floats(), n=st.integers(min_value=-3, max_value=2 ** 60))
    def check(eps_mean, eps_var, mean, var, lo, width, n):
        _infer_refused_or_finite({"format": "dpposterior-release/1", "family": "gaussian", "n": n,
                                  "bounds": [lo, lo + width],
                                  "statistics": {"mean": {"value": mean, "mechanism": "laplace", "epsilon": eps_mean},
                                                 "variance": {"value": var, "mechanism": "laplace",
                                                              "epsilon": eps_var}}})
    check()


@pytest.mark.parametrize("extra,field", [(["--scheduler", "processes"], "scheduler"), (["--workers", "2"], "workers"),
                                         (["--unit-size", "5"], "unit-size"), (["--resume"], "resume"),
                                         (["--prior", "kind=flat"], "prior")])
def test_calibrate_model_refuses_options_it_would_ignore(extra, field, capsys, tmp_path):
    model = Path(__file__).resolve().parents[1] / "examples" / "models" / "poisson_counts.py"
    names = [line.split("=")[0].strip() for line in model.read_text().splitlines()
             if "dpposterior.Model(" in line and "=" in line.split("dpposterior.Model(")[0]]
    argv = ["calibrate", "--model", f"{model}:{names[0]}", "--trials", "3", "--out", tmp_path / "c.json", *extra]
    _refused(argv, capsys, field, tmp_path / "c.json")


def test_stored_draws_beyond_memory_are_refused_before_any_work(monkeypatch, capsys):
    """A multinomial of 10^5 categories at 10^6 draws x 4 chains would store 3.2 TB of draws: refused in one line
    with the estimate, before the engine runs (the check reads the family's ``draw_values``)."""
    import dpposterior.memory as memory
    from dpposterior.api import check_stored_draws
    from dpposterior.errors import RefusedError
    from dpposterior.families import get_family
    from dpposterior.release import load_release

    monkeypatch.setattr(memory, "available_bytes", lambda: 8.0 * 2 ** 30)
    rel = load_release({"format": "dpposterior-release/1", "family": "multinomial", "n": 10 ** 6,
                        "statistics": {"counts": {"value": [10] * 100_000, "mechanism": "laplace", "epsilon": 1.0}}})
    with pytest.raises(RefusedError, match=r"^draws: 1000000 draws x 4 chains of 100,000 values each needs about "
                                           r"5960\.5 GiB of memory, more than the 8\.0 GiB available"):
        dpposterior.infer(rel, method="naive", draws=10 ** 6, chains=4, seed=1)
    fam = get_family("multinomial")
    options = fam.engine_options("naive").from_inference(
        dpposterior.InferenceOptions(method="naive", draws=1000, chains=2, seed=1), "multinomial/naive")
    check_stored_draws(fam, rel, options)  # 1000 x 2 x 10^5 x 16 bytes = 3 GiB: fits in 8


@pytest.mark.parametrize("release,method", [
    ({"format": "dpposterior-release/1", "family": "multinomial", "n": 50,
      "statistics": {"counts": {"value": [9, 21, 11], "mechanism": "discrete-laplace", "epsilon": 1.0,
                                "sensitivity": 2}}}, "auto"),
    ("examples/releases/naive-bayes-xiong-eps10.json", "auto"),
    ("examples/releases/loglinear-eps10.json", "naive"),
])
def test_draw_values_bound_what_a_draw_stores(release, method):
    """Each family's draw_values is at least the values one stored draw holds, and at most twice them."""
    from dpposterior.release import load_release

    rel = load_release(EXAMPLES.parent / release if isinstance(release, str) else release)
    post = dpposterior.infer(rel, method=method, draws=5, chains=1, seed=1)
    per_draw = sum(int(np.prod(v.shape[2:])) for v in post.posterior.values())
    bound = rel.family_entry.hooks["draw_values"](rel)
    assert per_draw <= bound <= 2 * per_draw, (per_draw, bound)
