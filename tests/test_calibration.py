"""Simulation-based calibration (``dpposterior calibrate``): power, contracts, reproducibility, errors.

Tolerances: with M trials the KS test at level alpha rejects a calibrated method with
probability alpha (fixed seeds make each assertion deterministic; the seeds were not
tuned: any seed passes with probability >= 99%).  A miscalibrated method must be
rejected: naive at n*eps = 10 has KS ~ 0.2 (paper Fig. 1a; our benchmark: 0.21 at
1,000 trials), far above the 1% critical value 1.63/sqrt(M) = 0.094 for M = 300.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpposterior.cli import main
from dpposterior.diagnostics.calibration import calibrate, parse_prior_option, randomized_ranks
from dpposterior.errors import InputError


def test_reduced_calibration_binomial_gibbs_passes_naive_fails():
    res = calibrate("binomial", 100, 0.1, 300, ["gibbs-ss", "naive"], seed=11)
    assert res["methods"]["gibbs-ss"]["ks_pvalue"] > 0.01
    assert res["methods"]["naive"]["ks_pvalue"] < 0.01
    # coverage of the 90% interval: binomial sd sqrt(.9 * .1 / 300) = 0.017 -> 4 sd = 0.07
    assert abs(res["methods"]["gibbs-ss"]["coverage"]["0.9"] - 0.9) < 0.07
    assert res["methods"]["naive"]["coverage"]["0.9"] < 0.75


@pytest.mark.parametrize("family,n", [("exponential", 100), ("multinomial", 100), ("poisson", 100)])
def test_reduced_calibration_other_families(family, n):
    res = calibrate(family, n, 0.1, 200, ["gibbs-ss", "naive"], seed=5, draws=2000)
    assert res["methods"]["gibbs-ss"]["ks_pvalue"] > 0.01
    assert res["methods"]["naive"]["ks_pvalue"] < 0.01


def test_randomized_ranks_are_uniform_for_exchangeable_draws():
    rng = np.random.default_rng(0)
    truth = rng.normal(size=(4000, 1))
    draws = rng.normal(size=(4000, 20, 1))  # truth and draws exchangeable -> U exactly uniform
    u = randomized_ranks(truth, draws, rng)[:, 0]
    from scipy import stats

    assert stats.kstest(u, "uniform").pvalue > 0.01


def test_cli_happy_path_json_and_plot(tmp_path, capsys):
    out, plot = tmp_path / "cal.json", tmp_path / "ecdf.png"
    code = main(["calibrate", "--family", "binomial", "--n", "50", "--epsilon", "0.5", "--trials", "40",
                 "--methods", "auto,naive,non-private,ops", "--draws", "500", "--seed", "2", "--scheduler", "serial",
                 "--out", str(out), "--plot", str(plot), "--prior", "kind=beta,alpha=2,beta=2"])
    assert code == 0
    res = json.loads(out.read_text())
    assert list(res)[:5] == ["family", "n", "epsilon", "trials", "methods"]
    assert (res["family"], res["n"], res["epsilon"], res["trials"]) == ("binomial", 50, 0.5, 40)
    assert list(res["methods"]) == ["gibbs-ss", "naive", "non-private", "ops"]
    for name, entry in res["methods"].items():
        assert set(entry) >= {"ks", "ks_pvalue", "coverage", "mmd"}
        assert set(entry["coverage"]) == {"0.5", "0.9", "0.95"}
        assert 0 <= entry["ks"] <= 1
        assert (entry["mmd"] is None) == (name == "non-private")
    assert res["prior"] == {"kind": "beta", "alpha": 2.0, "beta": 2.0}
    assert plot.exists() and plot.stat().st_size > 1000
    assert "gibbs-ss" in capsys.readouterr().out


def test_serial_and_processes_give_identical_json_and_resume(tmp_path):
    kwargs = dict(family="binomial", n=30, epsilon=0.5, trials=24, methods=["gibbs-ss", "naive"], seed=4,
                  draws=300, chunk=8)
    serial = calibrate(**kwargs, scheduler="serial", checkpoint=tmp_path / "a.ckpt.json")
    procs = calibrate(**kwargs, scheduler="processes")
    assert json.dumps(serial) == json.dumps(procs)
    # resume from a checkpoint that lost a unit: same result
    ckpt = json.loads((tmp_path / "a.ckpt.json").read_text())
    del ckpt["results"]["1"]
    (tmp_path / "a.ckpt.json").write_text(json.dumps(ckpt))
    resumed = calibrate(**kwargs, scheduler="serial", checkpoint=tmp_path / "a.ckpt.json", resume=True)
    assert json.dumps(resumed) == json.dumps(serial)
    with pytest.raises(InputError, match="different run"):
        calibrate(**{**kwargs, "seed": 5}, scheduler="serial", checkpoint=tmp_path / "a.ckpt.json", resume=True)


def test_prior_option_forms(tmp_path):
    assert parse_prior_option("kind=dirichlet,alpha=[1,2,3]") == {"kind": "dirichlet", "alpha": [1, 2, 3]}
    assert parse_prior_option("kind=gamma, shape=2.5, rate=1") == {"kind": "gamma", "shape": 2.5, "rate": 1}
    toml = tmp_path / "prior.toml"
    toml.write_text('[prior]\nkind = "beta"\nalpha = 3\nbeta = 4\n')
    assert parse_prior_option(str(toml)) == {"kind": "beta", "alpha": 3, "beta": 4}
    res = calibrate("multinomial", 20, 1.0, 5, ["naive"], prior="kind=dirichlet,alpha=[1,1,1]", draws=50)
    assert res["coordinates"] == ["p[0]", "p[1]", "p[2]"]


@pytest.mark.parametrize("args,message", [
    (["--family", "nope"], "family: unknown family 'nope'"),
    (["--methods", "gibbs-ss,ops", "--family", "exponential"], "methods: method 'ops' is not available"),
    (["--n", "0"], "n: must be an integer >= 1"),
    (["--trials", "0"], "trials: must be an integer >= 1"),
    (["--epsilon", "-1"], "epsilon: must be a finite number > 0"),
    (["--prior", "kind=beta,alpha=-1"], "prior.alpha"),
    (["--prior", "alpha"], "prior: expected key=value"),
    (["--prior", "missing.toml"], "prior: file not found"),
    (["--scheduler", "gpu"], "scheduler: must be"),
    (["--resume"], "resume: needs --out"),
])
def test_calibrate_bad_inputs_one_line(args, message, capsys):
    base = {"--family": "binomial", "--n": "10", "--epsilon": "1", "--trials": "3", "--scheduler": "serial"}
    argv = ["calibrate"]
    keys = set(args[::2]) if args and args[0].startswith("--") else set()
    for key, value in base.items():
        if key not in keys:
            argv += [key, value]
    code = main(argv + args + ["--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert message in err and err.count("\n") == 1 and "Traceback" not in err


def test_generic_path_through_infer_matches_contract(monkeypatch):
    # without the vectorised hook the command runs every method through dpposterior.infer
    from dpposterior.families import get_family

    fam = get_family("binomial")
    monkeypatch.setattr(fam, "hooks", {})
    res = calibrate("binomial", 20, 1.0, 6, ["gibbs-ss", "non-private"], seed=1, draws=200)
    assert set(res["methods"]) == {"gibbs-ss", "non-private"}
    assert res["methods"]["gibbs-ss"]["mmd"] is not None


@pytest.mark.slow
@pytest.mark.parametrize("family,n,eps", [("binomial", 1000, 0.01), ("multinomial", 1000, 0.01),
                                          ("exponential", 1000, 0.01), ("poisson", 1000, 0.1)])
def test_paper_scale_calibration(family, n, eps):
    # Figure 1b cells at the paper's 1,000 trials: Gibbs-SS passes KS at the 1% level
    # (critical value 1.63/sqrt(1000) = 0.052) and naive fails it.
    res = calibrate(family, n, eps, 1000, ["gibbs-ss", "naive"], seed=2018)
    assert res["methods"]["gibbs-ss"]["ks_pvalue"] > 0.01
    assert res["methods"]["naive"]["ks_pvalue"] < 0.01
