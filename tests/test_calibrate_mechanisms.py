"""``dpposterior calibrate --mechanism``: simulation-based calibration of the count families under integer noise.

The simulated releases go through the chosen mechanism with exact integer noise from its own sampler
(``Family.simulate(..., mechanism=, rho=)``); ``exact`` (what ``auto`` picks for them, as ``infer`` does)
must be calibrated and ``naive`` (noise ignored) must not.  Fixed seeds; the tolerances are Monte Carlo
errors: under calibration the randomised quantiles are exactly Uniform(0, 1), so the KS p-value is
uniform (a threshold of 1e-3 fails a correct engine once in a thousand seeds) and the coverage of the
central 90% interval is Binomial(T, 0.9) / T (4 standard errors allowed).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from dpposterior.cli import main
from dpposterior.diagnostics.calibration import calibrate
from dpposterior.errors import InputError
from dpposterior.families import get_family


def _calibrated(entry, trials):
    assert entry["failed_trials"] == 0 and entry["trials_used"] == trials
    assert entry["ks_pvalue"] > 1e-3, entry
    assert abs(entry["coverage"]["0.9"] - 0.9) < 4 * math.sqrt(0.9 * 0.1 / trials), entry


def test_calibrate_exact_binomial_discrete_gaussian_through_the_cli(tmp_path, capsys):
    """200 trials of n = 30 Bernoulli records, discrete Gaussian at rho = 0.02 (sigma = 5): exact passes,
    naive (the noisy count clipped to [0, n] as if exact) fails."""
    out = tmp_path / "sbc.json"
    trials = 200
    code = main(["calibrate", "--family", "binomial", "--n", "30", "--mechanism", "discrete-gaussian", "--rho",
                 "0.02", "--methods", "auto,naive", "--prior", "kind=beta,alpha=2,beta=3", "--trials", str(trials),
                 "--draws", "99", "--seed", "3", "--scheduler", "serial", "--quiet", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["mechanism"] == {"name": "discrete-gaussian", "rho": 0.02}
    assert result["epsilon"] is None
    assert list(result["methods"]) == ["exact", "naive"]  # auto: what infer picks for an integer-noise release
    _calibrated(result["methods"]["exact"], trials)
    assert result["methods"]["naive"]["ks_pvalue"] < 1e-4


def test_calibrate_exact_binomial_discrete_laplace():
    trials = 200
    result = calibrate("binomial", 30, 0.2, trials, ["exact", "naive"], {"kind": "beta", "alpha": 2, "beta": 3},
                       seed=5, draws=99, mechanism="discrete-laplace")
    assert result["mechanism"] == {"name": "discrete-laplace", "epsilon": 0.2}
    _calibrated(result["methods"]["exact"], trials)
    assert result["methods"]["naive"]["ks_pvalue"] < 1e-4


def test_calibrate_exact_multinomial_discrete_gaussian():
    trials = 120
    result = calibrate("multinomial", 30, None, trials, ["exact", "naive"], {"kind": "dirichlet", "alpha": [1, 1, 1]},
                       seed=3, draws=99, mechanism="discrete-gaussian", rho=0.02)
    assert result["coordinates"] == ["p[0]", "p[1]", "p[2]"]
    for coordinate in result["coordinates"]:
        entry = result["methods"]["exact"]["by_coordinate"][coordinate]
        assert entry["ks_pvalue"] > 1e-3 and abs(entry["coverage"]["0.9"] - 0.9) < 4 * math.sqrt(0.09 / trials)
    assert result["methods"]["naive"]["ks_pvalue"] < 1e-3


@pytest.mark.parametrize("family,prior", [("binomial", None), ("multinomial", None), ("poisson", None)])
@pytest.mark.parametrize("mechanism,budget", [("discrete-gaussian", {"rho": 0.5}),
                                              ("discrete-laplace", {"epsilon": 1.0})])
def test_simulated_integer_release_states_its_mechanism(family, prior, mechanism, budget):
    fam = get_family(family)
    eps = budget.get("epsilon")
    sim = fam.simulate(fam.parse_prior(prior), 50, eps, np.random.default_rng(0), mechanism=mechanism,
                       rho=budget.get("rho"))
    rec = sim.release.noisy_record
    assert rec.mechanism == mechanism
    assert all(float(v) == int(v) for v in np.atleast_1d(rec.value))
    cost = sim.release.privacy()
    if mechanism == "discrete-gaussian":
        assert cost.rho == pytest.approx(0.5, rel=1e-9)
    else:
        assert cost.epsilon == pytest.approx(1.0, rel=1e-9)
    assert fam.resolve_method("auto", sim.release) == "exact"


def test_laplace_simulation_is_unchanged_by_the_mechanism_option():
    """``mechanism="laplace"`` and no mechanism are one simulation: the same draws, the same study."""
    fam = get_family("binomial")
    a = fam.simulate(fam.parse_prior(None), 40, 1.0, np.random.default_rng(9))
    b = fam.simulate(fam.parse_prior(None), 40, 1.0, np.random.default_rng(9), mechanism="laplace")
    assert a.release.released.tolist() == b.release.released.tolist() and a.theta == b.theta
    plain = calibrate("binomial", 20, 1.0, 4, ["naive"], seed=1, draws=20)
    named = calibrate("binomial", 20, 1.0, 4, ["naive"], seed=1, draws=20, mechanism="laplace")
    assert plain == named and plain["mechanism"] == {"name": "laplace", "epsilon": 1.0}


@pytest.mark.parametrize("args,message", [
    (["--family", "binomial", "--mechanism", "discrete-gaussian", "--epsilon", "1"],
     "error: epsilon: not a budget of --mechanism discrete-gaussian (give its zCDP budget --rho)"),
    (["--family", "binomial", "--mechanism", "discrete-gaussian"],
     "error: rho: is required with --mechanism discrete-gaussian (its zCDP budget)"),
    (["--family", "binomial", "--mechanism", "discrete-laplace", "--rho", "1"],
     "error: rho: is the budget of --mechanism discrete-gaussian only (give --epsilon)"),
    (["--family", "binomial", "--mechanism", "discrete-laplace"], "error: epsilon: is required"),
    (["--family", "poisson", "--mechanism", "gaussian", "--epsilon", "1"],
     "error: mechanism: 'gaussian' is not a mechanism of the poisson simulator (one of: laplace, discrete-laplace, "
     "discrete-gaussian)"),
    (["--family", "exponential", "--mechanism", "discrete-laplace", "--epsilon", "1"],
     "error: mechanism: the exponential simulator releases through its own mechanism only"),
    (["--family", "binomial", "--mechanism", "discrete-gaussian", "--rho", "0.5", "--methods", "gibbs-ss"],
     "error: methods: 'gibbs-ss' cannot analyse releases of --mechanism discrete-gaussian"),
    (["--model", "m.py:model", "--rho", "0.5"], "error: --model: replaces --family"),
])
def test_calibrate_mechanism_refusals_are_one_line(args, message, capsys):
    code = main(["calibrate", "--n", "20", "--trials", "2", "--scheduler", "serial", *args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err


def test_python_calibrate_refuses_a_missing_budget():
    with pytest.raises(InputError, match="^rho: is required"):
        calibrate("multinomial", 20, None, 2, ["exact"], mechanism="discrete-gaussian")
