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


def _failures(entry, trials) -> list[str]:
    """Where ``entry`` (a method's result) fails the calibration check: in any coordinate a KS p-value below
    1e-3 or a 90% coverage more than 4 standard errors from 0.9."""
    out = []
    for coordinate, stats in entry["by_coordinate"].items():
        if not stats["ks_pvalue"] > 1e-3:
            out.append(f"{coordinate}: KS {stats['ks']:.3f}, p-value {stats['ks_pvalue']:.2g}")
        if not abs(stats["coverage"]["0.9"] - 0.9) < 4 * math.sqrt(0.9 * 0.1 / trials):
            out.append(f"{coordinate}: 90% coverage {stats['coverage']['0.9']:.3f}")
    return out


def _calibrated(entry, trials):
    """``entry`` rests on every trial and passes the check in every coordinate."""
    assert entry["failed_trials"] == 0 and entry["trials_used"] == trials
    assert _failures(entry, trials) == []


#: n = 30 records released through the discrete Gaussian at rho = 0.02 (sigma = Delta_2 / sqrt(2 rho): 5 for the
#: binomial, 7.1 per count for the multinomial, 25 for the poisson's truncated sum over [0, 5]); per family the
#: trials of the reduced study (default run) and of the fuller one (slow), and the prior.  The reduced studies are
#: small; the check still has power there: naive (the noise ignored) fails it at the same settings, in the first
#: coordinate, by its coverage of the 90% interval (0.57, 0.53 and 0.31 in the fuller studies, against the 4-standard-
#: error floors 0.81, 0.78 and 0.71 of the reduced ones) and by its KS statistic (0.18, 0.20, 0.31).  The poisson's
#: trials are fewest because its exact engine integrates a grid (~0.3 s a trial).
DISCRETE_GAUSSIAN_STUDIES = {
    "binomial": {"reduced": 200, "full": 1000, "prior": "kind=beta,alpha=2,beta=3"},
    "multinomial": {"reduced": 100, "full": 500, "prior": "kind=dirichlet,alpha=[1,1,1]"},
    "poisson": {"reduced": 40, "full": 300, "prior": None},
}


@pytest.mark.parametrize("family", list(DISCRETE_GAUSSIAN_STUDIES))
def test_calibrate_discrete_gaussian_exact_passes_and_naive_fails_through_the_cli(family, tmp_path, capsys):
    """``auto`` picks exact for the integer-noise releases, as infer does; exact passes in every coordinate and
    naive fails at the same settings; the JSON names the mechanism and its budget."""
    study = DISCRETE_GAUSSIAN_STUDIES[family]
    out, trials = tmp_path / "sbc.json", study["reduced"]
    prior = ["--prior", study["prior"]] if study["prior"] else []
    code = main(["calibrate", "--family", family, "--n", "30", "--mechanism", "discrete-gaussian", "--rho", "0.02",
                 "--methods", "auto,naive", *prior, "--trials", str(trials), "--draws", "99", "--seed", "3",
                 "--scheduler", "serial", "--quiet", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    result = json.loads(out.read_text())
    assert result["mechanism"] == {"name": "discrete-gaussian", "rho": 0.02}
    assert result["epsilon"] is None
    assert list(result["methods"]) == ["exact", "naive"]
    _calibrated(result["methods"]["exact"], trials)
    naive = _failures(result["methods"]["naive"], trials)
    assert naive and naive[0].startswith(result["coordinates"][0] + ":"), naive


@pytest.mark.slow
@pytest.mark.parametrize("family", list(DISCRETE_GAUSSIAN_STUDIES))
def test_calibrate_discrete_gaussian_exact_full(family):
    """The fuller study (5-8x the trials, another seed): the KS test then sees a miscalibration of about
    1.95 / sqrt(trials) = 0.06 (binomial) to 0.11 (poisson) in the CDF of the ranks."""
    study = DISCRETE_GAUSSIAN_STUDIES[family]
    trials = study["full"]
    result = calibrate(family, 30, None, trials, ["exact", "naive"], study["prior"], seed=2026, draws=99,
                       mechanism="discrete-gaussian", rho=0.02)
    assert result["mechanism"] == {"name": "discrete-gaussian", "rho": 0.02}
    _calibrated(result["methods"]["exact"], trials)
    assert result["methods"]["naive"]["ks_pvalue"] < 1e-6, result["methods"]["naive"]
    assert result["methods"]["naive"]["coverage"]["0.9"] < 0.75, result["methods"]["naive"]


def test_calibrate_exact_binomial_discrete_laplace():
    trials = 200
    result = calibrate("binomial", 30, 0.2, trials, ["exact", "naive"], {"kind": "beta", "alpha": 2, "beta": 3},
                       seed=5, draws=99, mechanism="discrete-laplace")
    assert result["mechanism"] == {"name": "discrete-laplace", "epsilon": 0.2}
    _calibrated(result["methods"]["exact"], trials)
    assert result["methods"]["naive"]["ks_pvalue"] < 1e-4


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
     "error: rho: is the budget of --mechanism discrete-gaussian or skellam only (give --epsilon)"),
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


# --------------------------------------------------------------------------- small-area
@pytest.mark.parametrize("mechanism,budget", [("discrete-gaussian", {"rho": 0.05}),
                                              ("discrete-laplace", {"epsilon": 0.5}),
                                              ("skellam", {"rho": 0.5})])
def test_small_area_simulator_releases_through_the_mechanism_asked_for(mechanism, budget):
    fam = get_family("small-area")
    sim = fam.simulate(fam.parse_prior(None), 30, budget.get("epsilon"), np.random.default_rng(0),
                       mechanism=mechanism, rho=budget.get("rho"))
    rec = sim.release.statistics.counts
    assert rec.mechanism == mechanism
    cost = sim.release.privacy()
    if "rho" in budget:
        assert cost.rho == pytest.approx(budget["rho"], rel=1e-6)
    else:
        assert cost.epsilon == pytest.approx(budget["epsilon"], rel=1e-9)
    noise = np.asarray(rec.value) - sim.confidential["counts"]
    assert np.all(noise == np.round(noise))  # integer noise on integer counts


def test_small_area_default_simulation_is_unchanged_and_states_how_it_reads_epsilon():
    """No --mechanism: the discrete Gaussian at rho = epsilon^2 / 2 (sigma = sqrt 2 at epsilon 1), reproducible from
    the seed, and the result JSON says how --epsilon was read."""
    fam = get_family("small-area")
    sim = fam.simulate(fam.parse_prior(None), 5, 1.0, np.random.default_rng(3))
    rec = sim.release.statistics.counts
    assert rec.mechanism == "discrete-gaussian" and rec.sigma == pytest.approx(math.sqrt(2.0))
    again = fam.simulate(fam.parse_prior(None), 5, 1.0, np.random.default_rng(3))
    assert again.release.statistics.counts.value == rec.value
    result = calibrate("small-area", 6, 1.0, 2, ["naive"], seed=1, draws=20)
    assert result["mechanism"]["name"] == "discrete-gaussian" and result["mechanism"]["rho"] == pytest.approx(0.5)


def test_small_area_calibrates_under_the_discrete_laplace_and_naive_fails():
    """SBC of exact-da on discrete-Laplace small-area releases (alpha_0, 60 trials): calibrated, where naive is not."""
    result = calibrate("small-area", 10, 0.5, 60, ["exact-da", "naive"], seed=3, draws=199,
                       mechanism="discrete-laplace")
    assert result["mechanism"] == {"name": "discrete-laplace", "epsilon": 0.5}
    assert result["methods"]["exact-da"]["ks_pvalue"] > 1e-3
    assert result["methods"]["naive"]["ks_pvalue"] < 1e-3


def test_small_area_refuses_a_continuous_mechanism_in_one_line(capsys):
    code = main(["calibrate", "--family", "small-area", "--n", "5", "--trials", "2", "--mechanism", "laplace",
                 "--epsilon", "1", "--scheduler", "serial"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: mechanism: 'laplace' is not a mechanism of the small-area simulator")
