"""Family ``naive-bayes`` (families/naive_bayes.py): release contract, priors, curator, CLI, simulate hook."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from dpposterior.cli import main
from dpposterior.errors import InputError
from dpposterior.families import get_family
from dpposterior.inference import infer
from dpposterior.release import load_release

CONTRACT = {
    "format": "dpposterior-release/1", "family": "naive-bayes", "n": 100, "classes": 2, "levels": [2, 2],
    "statistics": {"tables": {"value": [[[31.2, 18.5], [24.0, 26.9]], [[41.3, 9.0], [12.4, 37.1]]],
                              "mechanism": "laplace", "epsilon": 1.0, "sensitivity": 2.0, "scale": "counts"}},
}


def _write(tmp_path, data, name="r.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


def test_contract_release_loads_and_reports_total_budget():
    rel = load_release(CONTRACT)
    assert rel.K == 2 and rel.noise_scale_counts() == pytest.approx(2.0)
    assert rel.total_privacy_cost() == (2.0, 0.0)          # epsilon per table, K = 2 tables
    prop = copy.deepcopy(CONTRACT)
    t = prop["statistics"]["tables"]
    t.update(scale="proportions", value=(np.array(t["value"]) / 100).tolist(), sensitivity=0.04, epsilon=10.0)
    rel = load_release(prop)
    assert rel.total_privacy_cost() == (10.0, 0.0)         # epsilon is the total
    assert rel.noise_scale_counts() == pytest.approx(100 * 0.04 / 10)   # 2K/eps on the count scale
    del t["sensitivity"]
    assert load_release(prop).statistics.tables.sensitivity == pytest.approx(0.04)   # derived


def _mutate(path, value):
    data = copy.deepcopy(CONTRACT)
    obj = data
    for key in path[:-1]:
        obj = obj[key]
    if value is KeyError:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value
    return data


BAD = [
    (("n",), -5, "release.n: must be an integer >= 1"),
    (("n",), 10.5, "release.n: must be an integer"),
    (("classes",), 1, "release.classes: the class variable needs at least 2 levels"),
    (("levels",), [2, 0], "release.levels: feature 1 needs at least 2 levels, got 0"),
    (("levels",), [], "release.levels: must be a non-empty list"),
    (("levels",), [2, 2, 2], "release.statistics.tables.value: expected 3 tables"),
    (("levels",), [2, 3], "release.statistics.tables.value[1][0]: expected 3 cells"),
    (("classes",), 3, "release.statistics.tables.value[0]: expected 3 rows"),
    (("statistics", "tables", "sensitivity"), 1.0, "release.statistics.tables.sensitivity: must be 2 per table"),
    (("statistics", "tables", "scale"), "percent", "release.statistics.tables.scale: must be 'counts' or 'proportions'"),
    (("statistics", "tables", "scale"), KeyError, "release.statistics.tables.scale: missing"),
    (("statistics", "tables", "mechanism"), "gaussian", "release.statistics.tables.mechanism: naive-bayes tables"),
    (("statistics", "tables", "epsilon"), 0, "release.statistics.tables.epsilon"),
    (("statistics", "tables", "value"), [[[1, 2], [3]], [[1, 2], [3, 4]]], "release.statistics.tables.value[0][1]: expected 2 cells"),
    (("statistics", "counts"), {}, "release.statistics.counts: unknown field"),
]


@pytest.mark.parametrize("path,value,message", BAD)
def test_bad_release_is_one_line_error(tmp_path, capsys, path, value, message):
    rel = _write(tmp_path, _mutate(path, value))
    code = main(["infer", str(rel), "--out", str(tmp_path / "p.nc"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert message in err, err
    assert not (tmp_path / "p.nc").exists()


@pytest.mark.parametrize("prior,field", [
    ({"kind": "beta"}, "prior.kind"),
    ({"kind": "dirichlet", "alpha": -1}, "prior.alpha"),
    ({"kind": "dirichlet", "alpha": "one"}, "prior.alpha"),
    ({"kind": "dirichlet", "alpha": 1, "beta": 2}, "prior.beta"),
    ({"kind": "dirichlet", "alpha": {"class": [1, 1, 1], "features": [[[1, 1]] * 3] * 2}}, "prior.alpha.class"),
    ({"kind": "dirichlet", "alpha": {"class": [1, 1], "features": [[[1, 1], [1, 1]]]}}, "prior.alpha.features"),
    ({"kind": "dirichlet", "alpha": {"class": [1, 1]}}, "prior.alpha"),
])
def test_bad_prior(prior, field):
    with pytest.raises(InputError) as exc:
        infer(CONTRACT, prior=prior, seed=0)
    assert exc.value.field == field


def test_structured_prior_equals_uniform():
    a = infer(CONTRACT, prior={"kind": "dirichlet", "alpha": 2.0}, seed=3, draws=100, chains=1)
    s = {"class": [2, 2], "features": [[[2, 2], [2, 2]], [[2, 2], [2, 2]]]}
    b = infer(CONTRACT, prior={"kind": "dirichlet", "alpha": s}, seed=3, draws=100, chains=1)
    np.testing.assert_array_equal(a.posterior["class_prob"], b.posterior["class_prob"])


@pytest.mark.parametrize("key,value", [("tol", 0), ("tol", "small"), ("max_iter", 0), ("max_iter", 2.5)])
def test_bad_engine_options(key, value):
    with pytest.raises(InputError) as exc:
        infer(CONTRACT, seed=0, **{key: value})
    assert exc.value.field == key


def test_cli_infer_defaults_to_vb_and_writes_contract_netcdf(tmp_path, capsys):
    import arviz as az

    rel = _write(tmp_path, CONTRACT)
    out = tmp_path / "post.nc"
    analysis = tmp_path / "a.toml"
    analysis.write_text('[prior]\nkind = "dirichlet"\nalpha = 1.0\n[sampling]\ndraws = 300\nchains = 2\nseed = 4\n')
    assert main(["infer", str(rel), "--out", str(out), "--analysis", str(analysis)]) == 0
    text = capsys.readouterr().out
    assert "method vb" in text and "naive" in text
    idata = az.from_netcdf(out)
    assert idata.posterior.attrs["method"] == "vb"
    assert idata.posterior.attrs["release_epsilon"] == pytest.approx(2.0)
    assert idata.posterior["class_prob"].dims == ("chain", "draw", "class")
    assert idata.posterior["feature_prob"].dims == ("chain", "draw", "feature", "class", "level")
    assert idata.posterior["feature_prob"].shape == (2, 300, 2, 2, 2)
    lb = idata.sample_stats["lower_bound"].values.ravel()
    assert len(lb) == idata.posterior.attrs["vb_iterations"] + 1
    assert np.all(np.diff(lb) >= -1e-9 * np.abs(lb).max())


def test_cli_method_option_and_unknown_method(tmp_path, capsys):
    rel = _write(tmp_path, CONTRACT)
    assert main(["infer", str(rel), "--out", str(tmp_path / "e.nc"), "--method", "exact-enumeration",
                 "--seed", "1", "--draws", "100", "--no-naive", "--quiet"]) == 0
    capsys.readouterr()
    assert main(["infer", str(rel), "--out", str(tmp_path / "x.nc"), "--method", "mcmc", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: method: unknown method 'mcmc'") and err.count("\n") == 1


def test_ragged_levels_padded_with_nan():
    rel = {"format": "dpposterior-release/1", "family": "naive-bayes", "n": 60, "classes": 3, "levels": [2, 4],
           "statistics": {"tables": {"value": [[[10, 9], [11, 10], [12, 8]],
                                               [[5, 5, 5, 5], [4, 6, 5, 6], [3, 7, 6, 4]]],
                                     "mechanism": "laplace", "epsilon": 0.5, "scale": "counts"}}}
    for method in ("vb", "naive"):
        post = infer(rel, method=method, seed=1, draws=50, chains=2)
        fp = post.posterior["feature_prob"]
        assert fp.shape == (2, 50, 2, 3, 4)
        assert np.all(np.isnan(fp[:, :, 0, :, 2:])) and not np.any(np.isnan(fp[:, :, 1]))
        np.testing.assert_allclose(np.nansum(fp, axis=-1), 1.0)
        post.to_arviz()


def test_curator_counts_and_proportions(tmp_path, capsys):
    rng = np.random.default_rng(0)
    y = rng.choice(["spam", "ham"], 200)
    x1 = np.where(rng.random(200) < 0.7, y, "other")
    x2 = rng.choice(["a", "b", "c"], 200)
    csv = tmp_path / "d.csv"
    csv.write_text("Y,X1,X2\n" + "\n".join(f"{a},{b},{c}" for a, b, c in zip(y, x1, x2)) + "\n")
    out = tmp_path / "r.json"
    assert main(["release", str(csv), "--family", "naive-bayes", "--epsilon", "0.5", "--columns", "Y,X1,X2",
                 "--out", str(out), "--seed", "3"]) == 0
    assert "total epsilon 1" in capsys.readouterr().out          # 0.5 per table x 2 tables
    rel = load_release(out)
    assert rel.n == 200 and rel.classes == 2 and rel.levels == [3, 3]
    assert rel.class_labels == ["ham", "spam"] and rel.feature_names == ["X1", "X2"]
    assert "(seed 3;" in rel.statistics.tables.sampler and "not for publication" in rel.statistics.tables.sampler
    # noise is Laplace(b = 2/eps = 4) around the true counts: P(max of 6 |noise| > 4 log(6000)) = 0.001
    true = np.zeros((2, 3))
    for a, b in zip(y, x2):
        true[["ham", "spam"].index(a), ["a", "b", "c"].index(b)] += 1
    assert np.abs(np.array(rel.statistics.tables.value[1]) - true).max() < 4 * np.log(6 / 0.001)
    out2 = tmp_path / "p.json"
    assert main(["release", str(csv), "--family", "naive-bayes", "--epsilon", "1", "--columns", "Y,X1,X2",
                 "--scale", "proportions", "--out", str(out2), "--seed", "3"]) == 0
    assert "total epsilon 1" in capsys.readouterr().out
    rel2 = load_release(out2)
    assert rel2.statistics.tables.sensitivity == pytest.approx(2 * 2 / 200)
    assert abs(sum(map(sum, rel2.statistics.tables.value[0])) - 1.0) < 0.5
    # same seed, same release
    assert main(["release", str(csv), "--family", "naive-bayes", "--epsilon", "0.5", "--columns", "Y,X1,X2",
                 "--out", str(tmp_path / "again.json"), "--seed", "3"]) == 0
    assert json.loads((tmp_path / "again.json").read_text()) == json.loads(out.read_text())


@pytest.mark.parametrize("args,message", [
    (["--columns", "Y"], "error: columns: naive-bayes needs the class column"),
    (["--columns", "Y,Z"], "error: columns: no column 'Z'"),
    (["--columns", "Y,X1", "--scale", "percent"], "error: scale: must be 'counts' or 'proportions'"),
    (["--columns", "Y,C"], "error: data.C: a single level ('k')"),
    (["--columns", "Y,X1,X1"], "error: columns: a column is listed twice"),
])
def test_curator_errors(tmp_path, capsys, args, message):
    csv = tmp_path / "d.csv"
    csv.write_text("Y,X1,C\na,u,k\nb,v,k\na,v,k\n")
    code = main(["release", str(csv), "--family", "naive-bayes", "--epsilon", "1", "--out",
                 str(tmp_path / "r.json"), *args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err


def test_simulate_hook_and_nonprivate():
    fam = get_family("naive-bayes")
    sim = fam.simulate(None, 80, 0.5, np.random.default_rng(1))
    assert set(sim.theta) == {"class_prob", "feature_prob"}
    assert sim.release.n == 80 and sim.release.total_privacy_cost() == (1.0, 0.0)
    tables = sim.confidential["tables"]
    assert tables.sum(axis=(1, 2)).tolist() == [80, 80]
    post = infer(sim.release, method="non-private", seed=2, draws=100, chains=1, confidential=sim.confidential)
    assert post.mean("class_prob") == pytest.approx((1 + tables[0].sum(1)) / 82, abs=0.05)
    with pytest.raises(InputError, match="confidential"):
        infer(sim.release, method="non-private", seed=0)
    bad = tables.copy()
    bad[0, 0, 0] += 1
    with pytest.raises(InputError, match="sum to n"):
        infer(sim.release, method="non-private", seed=0, confidential={"tables": bad})
    # a structured prior sets the simulated shape
    shaped = {"kind": "dirichlet", "alpha": {"class": [1, 1, 1], "features": [[[1, 1, 1]] * 3]}}
    sim3 = fam.simulate(shaped, 50, 1.0, np.random.default_rng(2))
    assert sim3.release.classes == 3 and sim3.release.levels == [3]
    assert sim3.theta["feature_prob"].shape == (1, 3, 3)


def test_xiong_example_release_file():
    rel = load_release("examples/releases/naive-bayes-xiong-eps10.json")
    assert rel.scale == "proportions" and rel.total_privacy_cost() == (10.0, 0.0)
    assert rel.noise_scale_counts() == pytest.approx(0.4)     # 2K/eps on the count scale
