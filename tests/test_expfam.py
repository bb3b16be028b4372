"""Families binomial / multinomial / exponential / poisson: releases, priors, curators, baselines, errors."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import dpposterior as dp
from dpposterior.cli import main
from dpposterior.errors import InputError, RefusedError

BINOMIAL = {"format": "dpposterior-release/1", "family": "binomial", "n": 50,
            "statistics": {"successes": {"value": 17.3, "mechanism": "laplace", "epsilon": 0.5, "sensitivity": 1.0}}}


def _with(base, path, value):
    out = json.loads(json.dumps(base))
    obj = out
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value
    return out


def _truncated(family="exponential", bounds=(0.0, 5.0), value=100.0, **extra):
    rec = {"value": value, "mechanism": "laplace", "epsilon": 1.0, **extra}
    return {"format": "dpposterior-release/1", "family": family, "n": 100, "bounds": list(bounds),
            "statistics": {"truncated_sum": rec}}


def test_contract_release_loads_and_sensitivities_are_derived():
    rel = dp.load_release(BINOMIAL)
    assert rel.laplace_scale == pytest.approx(2.0)
    no_sens = _with(BINOMIAL, ["statistics", "successes", "sensitivity"], None)
    del no_sens["statistics"]["successes"]["sensitivity"]
    assert dp.load_release(no_sens).statistics.successes.sensitivity == 1.0
    multi = {"format": "dpposterior-release/1", "family": "multinomial", "n": 10,
             "statistics": {"counts": {"value": [3.2, 7.1], "mechanism": "laplace", "epsilon": 1.0}}}
    assert dp.load_release(multi).statistics.counts.sensitivity == 2.0
    # App. C: max(|a|, |b|, b - a)
    assert dp.load_release(_truncated(bounds=(0.5, 4.0))).statistics.truncated_sum.sensitivity == 4.0
    assert dp.load_release(_truncated("poisson", (0, 7))).statistics.truncated_sum.sensitivity == 7.0


@pytest.mark.parametrize("release,field,reason", [
    (_with(BINOMIAL, ["statistics", "successes", "sensitivity"], 2.0), "release", "sensitivity: must be 1"),
    (_with(BINOMIAL, ["statistics", "successes", "epsilon"], 0.0), "release.statistics.successes.epsilon", "greater"),
    (_with(BINOMIAL, ["statistics", "successes", "epsilon"], -1.0), "release.statistics.successes.epsilon", "greater"),
    (_with(BINOMIAL, ["n"], 0), "release.n", "greater"),
    (_with(BINOMIAL, ["statistics", "successes", "value"], 5000.0), "release", "impossible"),
    (_with(BINOMIAL, ["statistics", "successes", "value"], [1.0, 2.0]), "release", "single number"),
    (_with(BINOMIAL, ["statistics", "successes", "mechanism"], "gaussian"), "release", "laplace"),
    ({"format": "dpposterior-release/1", "family": "multinomial", "n": 10,
      "statistics": {"counts": {"value": [300.0, 500.0], "mechanism": "laplace", "epsilon": 1.0}}}, "release", "sums to"),
    ({"format": "dpposterior-release/1", "family": "multinomial", "n": 10,
      "statistics": {"counts": {"value": [3.0], "mechanism": "laplace", "epsilon": 1.0}}}, "release", "at least 2"),
    ({"format": "dpposterior-release/1", "family": "multinomial", "n": 10, "categories": ["a"],
      "statistics": {"counts": {"value": [3.0, 7.0], "mechanism": "laplace", "epsilon": 1.0}}}, "release", "labels"),
    (_truncated(bounds=(5.0, 2.0)), "release", "a < b"),
    (_truncated(bounds=(-1.0, 2.0)), "release", ">= 0"),
    (_truncated("poisson", (0.2, 0.8)), "release", "excludes every"),
    (_truncated(sensitivity=1.0), "release", "sensitivity: 1 is smaller than the replace-one sensitivity 5"),
    ({k: v for k, v in _truncated().items() if k != "bounds"}, "release.bounds", "missing"),
])
def test_bad_releases_one_line_errors(release, field, reason):
    with pytest.raises(InputError) as info:
        dp.load_release(release)
    assert info.value.field == field
    assert reason in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("family_release,prior,field", [
    (BINOMIAL, {"kind": "beta", "alpha": 0, "beta": 1}, "prior.alpha"),
    (BINOMIAL, {"kind": "beta", "alpha": 1, "beta": -2}, "prior.beta"),
    (BINOMIAL, {"kind": "gamma", "shape": 1, "rate": 1}, "prior.kind"),
    (BINOMIAL, {"kind": "beta", "alpha": 1, "gamma": 1}, "prior.gamma"),
    (BINOMIAL, {"kind": "beta", "alpha": "x"}, "prior.alpha"),
    (_truncated(), {"kind": "gamma", "shape": 1, "rate": 0}, "prior.rate"),
    (_truncated("poisson", (0, 9)), {"kind": "gamma", "shape": float("nan")}, "prior.shape"),
    ({"format": "dpposterior-release/1", "family": "multinomial", "n": 10,
      "statistics": {"counts": {"value": [3.2, 7.1], "mechanism": "laplace", "epsilon": 1.0}}},
     {"kind": "dirichlet", "alpha": [1, 2, 3]}, "prior.alpha"),
    ({"format": "dpposterior-release/1", "family": "multinomial", "n": 10,
      "statistics": {"counts": {"value": [3.2, 7.1], "mechanism": "laplace", "epsilon": 1.0}}},
     {"kind": "dirichlet", "alpha": [1, -2]}, "prior.alpha[1]"),
])
def test_bad_priors(family_release, prior, field):
    with pytest.raises(InputError) as info:
        dp.infer(family_release, prior=prior, draws=10, warmup=0, chains=1, seed=0)
    assert info.value.field == field


def test_dirichlet_prior_number_or_list():
    multi = {"format": "dpposterior-release/1", "family": "multinomial", "n": 10,
             "statistics": {"counts": {"value": [3.2, 3.0, 4.1], "mechanism": "laplace", "epsilon": 1.0}}}
    a = dp.infer(multi, prior={"kind": "dirichlet", "alpha": 2}, draws=50, warmup=10, chains=1, seed=0)
    b = dp.infer(multi, prior={"kind": "dirichlet", "alpha": [2, 2, 2]}, draws=50, warmup=10, chains=1, seed=0)
    np.testing.assert_array_equal(a.posterior["p"], b.posterior["p"])


def test_non_private_and_ops_need_confidential_statistics():
    with pytest.raises(RefusedError, match="only inside simulations"):
        dp.infer(BINOMIAL, method="non-private", seed=0)
    with pytest.raises(RefusedError, match="only inside simulations"):
        dp.infer(BINOMIAL, method="ops", seed=0)
    with pytest.raises(InputError, match="unknown method 'ops'"):
        dp.infer(_truncated(), method="ops", seed=0)
    post = dp.infer(BINOMIAL, method="non-private", seed=0, confidential={"successes": 17})
    # exact Beta(18, 34) posterior
    assert post.mean("p") == pytest.approx(18 / 52, abs=0.005)
    ops = dp.infer(BINOMIAL, method="ops", seed=0, confidential={"successes": 17})
    draws = ops.draws("p")
    assert draws.shape == (100,) and draws.min() >= 0.1 and draws.max() <= 0.9


def test_naive_clips_and_says_whether_it_cheats():
    low = _with(BINOMIAL, ["statistics", "successes", "value"], -3.0)
    post = dp.infer(low, method="naive", seed=0)
    assert post.mean("p") == pytest.approx(1 / 52, abs=0.003)  # Beta(1, 51): clipped to 0 successes
    honest = dp.infer(_truncated(), method="naive", seed=0)
    assert "ignores noise and truncation" in honest.attrs["naive_statistic"]
    cheat = dp.infer(_truncated(), method="naive", seed=0, confidential={"noisy_full_sum": 120.0})
    assert "CHEATING" in cheat.attrs["naive_statistic"]
    assert cheat.mean("rate") == pytest.approx(101 / 121, rel=0.02)  # Gamma(1 + 100, 1 + 120)


def test_auto_is_gibbs_ss_for_every_family():
    from dpposterior.families import get_family

    for family in ("binomial", "multinomial", "exponential", "poisson"):
        assert get_family(family).auto_method == "gibbs-ss"
    assert dp.infer(BINOMIAL, seed=0, draws=20, warmup=5).method == "gibbs-ss"


# --------------------------------------------------------------------------- curators (CLI)
@pytest.fixture
def csvs(tmp_path):
    rng = np.random.default_rng(0)
    paths = {}
    frames = {
        "binomial": pd.DataFrame({"smoker": rng.integers(0, 2, 200)}),
        "multinomial": pd.DataFrame({"colour": rng.choice(["red", "green", "blue"], 200)}),
        "exponential": pd.DataFrame({"wait": rng.exponential(2.0, 200)}),
        "poisson": pd.DataFrame({"visits": rng.poisson(3.0, 200)}),
    }
    for name, frame in frames.items():
        paths[name] = tmp_path / f"{name}.csv"
        frame.to_csv(paths[name], index=False)
    return paths


@pytest.mark.parametrize("family,column,extra,statistic", [
    ("binomial", "smoker", [], "successes"),
    ("multinomial", "colour", [], "counts"),
    ("exponential", "wait", ["--bounds", "0", "10"], "truncated_sum"),
    ("poisson", "visits", ["--bounds", "0", "12"], "truncated_sum"),
])
def test_curator_and_infer_cli(csvs, tmp_path, capsys, family, column, extra, statistic):
    out = tmp_path / f"{family}.json"
    code = main(["release", str(csvs[family]), "--family", family, "--column", column, "--epsilon", "1",
                 "--out", str(out), "--seed", "3", *extra])
    assert code == 0
    rel = json.loads(out.read_text())
    assert rel["family"] == family and statistic in rel["statistics"] and rel["n"] == 200
    assert "numpy" in rel["statistics"][statistic]["sampler"]
    post_path = tmp_path / f"{family}.nc"
    code = main(["infer", str(out), "--out", str(post_path), "--seed", "1", "--draws", "300", "--warmup", "100",
                 "--chains", "2"])
    assert code == 0 and post_path.exists()
    printed = capsys.readouterr().out
    assert "gibbs-ss" in printed and "naive" in printed


@pytest.mark.parametrize("family,column,extra,message", [
    ("binomial", "missing", [], "column: no column"),
    ("exponential", "wait", [], "bounds: the exponential family needs"),
    ("exponential", "wait", ["--bounds", "3", "1"], "bounds:"),
    ("poisson", "visits", ["--bounds", "0", "0.5"], "excludes every"),
])
def test_curator_errors(csvs, tmp_path, capsys, family, column, extra, message):
    code = main(["release", str(csvs[family]), "--family", family, "--column", column, "--epsilon", "1",
                 "--out", str(tmp_path / "r.json"), "--seed", "1", *extra])
    err = capsys.readouterr().err
    assert code == 2 and message in err and err.count("\n") == 1


def test_curator_rejects_non_binary(tmp_path, capsys):
    path = tmp_path / "x.csv"
    pd.DataFrame({"x": [0, 1, 2]}).to_csv(path, index=False)
    code = main(["release", str(path), "--family", "binomial", "--column", "x", "--epsilon", "1",
                 "--out", str(tmp_path / "r.json")])
    assert code == 2 and "0/1" in capsys.readouterr().err


def test_simulate_hooks_give_valid_releases():
    from dpposterior.families import get_family

    rng = np.random.default_rng(1)
    for family in ("binomial", "multinomial", "exponential", "poisson"):
        fam = get_family(family)
        sim = fam.simulate(fam.parse_prior(None, None), 50, 0.5, rng)
        assert sim.release.family == family and sim.release.n == 50
        assert set(sim.theta) == {"rate" if family in ("exponential", "poisson") else "p"}
        assert sim.confidential


def test_ops_refuses_a_release_that_states_no_epsilon():
    """OPS spends the release's epsilon; a discrete-Gaussian (rho-zCDP) release states none: one line, not NaN draws."""
    zcdp = {"format": "dpposterior-release/1", "family": "binomial", "n": 50,
            "statistics": {"successes": {"value": 17, "mechanism": "discrete-gaussian", "sigma": 3.0}}}
    with pytest.raises(RefusedError, match=r"method: ops spends the release's epsilon .* states none \(mechanism "
                                           r"'discrete-gaussian'\)"):
        dp.infer(zcdp, method="ops", seed=0, confidential={"successes": 17})
