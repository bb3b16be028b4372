"""the five real-outbreak releases of Xiong, Ju & Zhang App. E.1.2, the ``sir`` family
reading K / times / N from the release, the curator's ``--population --times --trials``, the
non-private ODE baseline and ``dpposterior reproduce xiong-outbreaks``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from dpposterior import gallery
from dpposterior.cli import main
from dpposterior.errors import InputError
from dpposterior.families.sir import DEFAULT_TIMES, SIRRelease, make_release
from dpposterior.inference import infer
from dpposterior.release import load_release

RELEASES = Path(__file__).resolve().parents[1] / "examples" / "releases"

# App. E.1.2, as printed: (population K, values)
PRINTED = {
    "flu": (763, [0.0010, 0.0039, 0.0105, 0.0367, 0.0996, 0.2910, 0.3840, 0.3368, 0.3106, 0.2516]),
    "ebola-guinea": (100_000, [0.0010, 0.0111, 0.0085, 0.0129, 0.0510, 0.0520, 0.0224, 0.0212, 0.0084, 0.0023]),
    "ebola-liberia": (100_000, [0.0010, 0.0007, 0.0019, 0.0664, 0.2579, 0.0742, 0.0610, 0.0542, 0.0172, 0.0003]),
    "ebola-sierra-leone": (100_000,
                           [0.0010, 0.0079, 0.0434, 0.2156, 0.2054, 0.0928, 0.0549, 0.0366, 0.0237, 0.0232]),
    "covid-clark": (100_000, [0.0010, 0.0281, 0.0566, 0.0978, 0.2108, 0.2443, 0.2574, 0.0864, 0.0434, 0.0263]),
}


@pytest.mark.parametrize("name", list(PRINTED))
def test_outbreak_releases_load_with_paper_settings(name):
    rel = load_release(RELEASES / f"sir-{name}-eps10.json")
    population, values = PRINTED[name]
    rec = rel.statistics.infected
    assert rel.family == "sir" and rel.population == population and rel.off_grid is True
    assert rec.array().tolist() == values
    assert rec.trials == 100 and rec.m == pytest.approx(100.0) and rec.epsilon == 10.0
    times = np.arange(10.0) if name == "flu" else np.asarray(DEFAULT_TIMES)
    assert np.array_equal(rel.times, times)
    mech = rel.mechanism()  # M = m = 100, N = 100, L = 10 -> epsilon = N L / m = 10 (Prop. 4)
    assert (mech.population, mech.trials, mech.points) == (population, 100, 10)
    assert mech.privacy_cost() == pytest.approx((10.0, 0.0))
    assert rel.total_privacy_cost() == pytest.approx((10.0, 0.0))


def test_flu_release_is_the_public_counts_over_k():
    # the printed flu statistic equals epimdr's counts of days 1-9 divided by K = 763 (see docs/sbi.md)
    days, cases, k = gallery.flu_boarding_school()
    assert k == 763 and days.tolist() == list(range(1, 15)) and cases.size == 14
    printed = np.array(PRINTED["flu"][1][1:])
    assert np.array_equal(np.round(cases[:9] / k, 4), printed)


def test_off_grid_values_need_the_flag():
    values = PRINTED["covid-clark"][1]
    rel = make_release(values, 10.0, trials=100, population=100_000)
    with pytest.raises(InputError, match="multiples of 1/trials"):
        load_release(rel)
    assert "off_grid" not in rel  # the default release has no flag, as before
    assert load_release(make_release(values, 10.0, trials=100, population=100_000, off_grid=True)).off_grid
    on_grid = make_release([0.01] * 10, 10.0, trials=100, population=100_000)
    assert load_release(on_grid).off_grid is False


def test_defaults_are_the_old_constants():
    rel = load_release(RELEASES / "sir-eps10.json")
    assert rel.population == 1_000_000 and rel.times == DEFAULT_TIMES and rel.statistics.infected.trials == 1000
    minimal = SIRRelease.model_validate({"format": "dpposterior-release/1", "family": "sir", "statistics": {
        "infected": {"value": [0.001] * 10, "mechanism": "binomial-trajectory", "epsilon": 10.0, "trials": 1000}}})
    assert minimal.population == 1_000_000 and minimal.times == DEFAULT_TIMES and minimal.off_grid is False


def test_the_model_uses_release_k_times_and_trials():
    from dpposterior.families.sir import parse_prior, sbi_model

    rel = load_release(RELEASES / "sir-flu-eps10.json")
    model = sbi_model(rel, parse_prior(None))
    rng = np.random.default_rng(0)
    counts = model.simulate(np.log([[1.7, 0.45]] * 20), rng)
    assert counts.shape == (20, 10) and counts.max() <= 763 and np.all(counts[:, 0] == 1)
    sdp = model.mechanism.sample(counts, rng)
    assert np.allclose(sdp * 100, np.rint(sdp * 100))  # N = 100 trials
    assert model.mechanism.m == pytest.approx(100.0)


@pytest.mark.parametrize("name", list(PRINTED))
def test_infer_smc_abc_writes_r0(name, tmp_path, capsys):
    analysis = tmp_path / "a.toml"
    analysis.write_text("particles = 200\n")
    out = tmp_path / "p.nc"
    assert main(["infer", str(RELEASES / f"sir-{name}-eps10.json"), "--method", "smc-abc", "--simulations", "400",
                 "--draws", "200", "--seed", "1", "--analysis", str(analysis), "--out", str(out), "--no-naive",
                 "--quiet"]) == 0
    post = xr.open_dataset(out, group="posterior")
    for var in ("log_beta", "log_gamma", "R0"):
        assert var in post and np.all(np.isfinite(post[var].values))
    assert np.allclose(post["R0"].values, np.exp(post["log_beta"].values - post["log_gamma"].values))


@pytest.mark.parametrize("method", ["sppe", "sple"])
def test_infer_neural_writes_r0(method, tmp_path, capsys):
    analysis = tmp_path / "a.toml"
    analysis.write_text("max_epochs = 3\n")
    out = tmp_path / "p.nc"
    assert main(["infer", str(RELEASES / "sir-covid-clark-eps10.json"), "--method", method, "--simulations", "60",
                 "--rounds", "1", "--rqmc-points", "2", "--draws", "100", "--seed", "1", "--analysis", str(analysis),
                 "--out", str(out), "--no-naive", "--quiet"]) == 0
    post = xr.open_dataset(out, group="posterior")
    for var in ("log_beta", "log_gamma", "R0"):
        assert var in post and np.all(np.isfinite(post[var].values))


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PRINTED))
@pytest.mark.parametrize("method", ["sppe", "sple"])
def test_infer_neural_writes_r0_every_release(name, method, tmp_path, capsys):
    out = tmp_path / "p.nc"
    assert main(["infer", str(RELEASES / f"sir-{name}-eps10.json"), "--method", method, "--simulations", "200",
                 "--rounds", "1", "--draws", "200", "--seed", "1", "--out", str(out), "--no-naive", "--quiet"]) == 0
    post = xr.open_dataset(out, group="posterior")
    assert all(v in post for v in ("log_beta", "log_gamma", "R0"))


# -- curator -------------------------------------------------------------------------------

FLU_ROWS = [1, 3, 8, 28, 76, 222, 293, 257, 237, 192]


def _counts_csv(tmp_path, header="infected", rows=FLU_ROWS):
    path = tmp_path / "counts.csv"
    path.write_text(header + "\n" + "".join(f"{r}\n" for r in rows))
    return path


def test_curator_population_times_trials_options(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["release", str(_counts_csv(tmp_path)), "--family", "sir", "--epsilon", "10", "--population", "763",
                 "--times", "0,1,2,3,4,5,6,7,8,9", "--trials", "100", "--seed", "2", "--out", str(out)]) == 0
    rel = load_release(out)
    rec = rel.statistics.infected
    assert rel.population == 763 and rel.times == [float(t) for t in range(10)]
    assert rec.trials == 100 and rec.m == pytest.approx(100.0) and rel.off_grid is False
    # the honest release of these counts at m = 100: every success probability is >= 100/963
    p = (np.array(FLU_ROWS) + 100.0) / 963.0
    assert np.all(np.abs(rec.array() - p) < 6 * np.sqrt(p * (1 - p) / 100))
    # the time column and --times may both be given when they agree
    both = tmp_path / "both.csv"
    both.write_text("time,infected\n" + "".join(f"{t},{c}\n" for t, c in zip(range(10), FLU_ROWS)))
    assert main(["release", str(both), "--family", "sir", "--epsilon", "10", "--population", "763",
                 "--times", "0,1,2,3,4,5,6,7,8,9", "--out", str(tmp_path / "b.json"), "--seed", "1"]) == 0
    assert load_release(tmp_path / "b.json").statistics.infected.trials == 1000  # default N


@pytest.mark.parametrize("extra, message", [
    (["--population", "1.5"], "error: population: must be an integer >= 2"),
    (["--population", "abc"], "error: population: must be an integer >= 2"),
    (["--population", "1"], "error: population: must be an integer >= 2"),
    (["--population", "100"], "error: data.infected: row 6: 222 infected is outside [0, K]"),
    (["--trials", "0"], "error: trials: must be an integer >= 1"),
    (["--trials", "ten"], "error: trials: must be an integer >= 1"),
    (["--trials", "2.5"], "error: trials: must be an integer >= 1"),
    (["--times", "0,1,2"], "error: times: 3 time points for 10 data rows"),
    (["--times", "0,2,1,3,4,5,6,7,8,9"], "error: times: must be strictly increasing"),
    (["--times", "0,x,2,3,4,5,6,7,8,9"], "error: times: 'x' is not a number"),
    (["--times=-1,0,1,2,3,4,5,6,7,8"], "error: times: time -1 is negative"),
    (["--times", "0,1,,3"], "error: times: must be comma-separated numbers"),
    (["--times", "0,1,2,3,4,5,6,7,8,inf"], "error: times: must be finite numbers"),
])
def test_curator_bad_options_exit_2_one_line(extra, message, tmp_path, capsys):
    argv = ["release", str(_counts_csv(tmp_path)), "--family", "sir", "--epsilon", "10", "--seed", "1",
            "--out", str(tmp_path / "r.json")]
    defaults = {"--population": "763", "--times": "0,1,2,3,4,5,6,7,8,9"}
    for key, value in defaults.items():
        if not any(a == key or a.startswith(key + "=") for a in extra):
            argv += [key, value]
    assert main(argv + extra) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1
    assert not (tmp_path / "r.json").exists()


def test_curator_times_disagreeing_with_the_column(tmp_path, capsys):
    csv = tmp_path / "t.csv"
    csv.write_text("time,infected\n0,1\n5,3\n")
    assert main(["release", str(csv), "--family", "sir", "--epsilon", "1", "--population", "763",
                 "--times", "0,4", "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: times: row 2: --times gives 4 but the data's time column 5") and err.count("\n") == 1


def test_sir_options_refused_by_other_families(tmp_path, capsys):
    csv = tmp_path / "g.csv"
    csv.write_text("x\n0.1\n0.2\n0.3\n0.4\n0.5\n")
    assert main(["release", str(csv), "--family", "gaussian", "--column", "x", "--bounds", "0", "1", "--epsilon",
                 "1", "--trials", "100", "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: trials: not an option of the gaussian curator") and err.count("\n") == 1


# -- non-private baseline and the gallery entry -------------------------------------------------

def test_sir_ode_fit_recovers_known_parameters():
    from scipy.integrate import solve_ivp

    k, b, g = 763, 1.7, 0.45
    t = np.arange(1.0, 15.0)
    sol = solve_ivp(lambda _, u: [-b * u[0] * u[1] / k, b * u[0] * u[1] / k - g * u[1]], (0, 14), [k - 1, 1],
                    t_eval=t, rtol=1e-10, atol=1e-10)
    fit = gallery.sir_ode_fit(t, sol.y[1], k)
    assert fit["beta"] == pytest.approx(b, rel=1e-4) and fit["gamma"] == pytest.approx(g, rel=1e-4)
    assert fit["R0"] == pytest.approx(b / g, rel=1e-4) and fit["rmse"] < 1e-3


def test_flu_ode_baseline():
    days, cases, k = gallery.flu_boarding_school()
    fit = gallery.sir_ode_fit(days, cases, k)
    # the classic fit of these data: beta ~ 1.7/day, gamma ~ 0.45/day, R0 ~ 3.7-3.9
    assert 1.5 < fit["beta"] < 2.0 and 0.4 < fit["gamma"] < 0.5 and 3.4 < fit["R0"] < 4.2


def test_reproduce_lists_xiong_outbreaks(capsys):
    assert main(["reproduce", "--list"]) == 0
    line = next(l for l in capsys.readouterr().out.splitlines() if l.startswith("xiong-outbreaks "))
    assert "~" in line and "Fig. 2" in line
    ranges = gallery.PAPER["xiong-outbreaks"]["r0_ranges"]
    assert ranges == {"ebola": (1.51, 2.53), "covid": (1.5, 3.5), "influenza": (0.9, 2.1)}


def test_reproduce_xiong_outbreaks_reduced(tmp_path, monkeypatch, capsys):
    # the fast form: one release, tiny budgets; the default-scale run is the slow test below
    monkeypatch.setattr(gallery.xiong, "OUTBREAKS", [gallery.OUTBREAKS[0]])
    monkeypatch.setattr(gallery.xiong, "OUTBREAK_DEFAULT", {"smc-abc": 1000, "sppe": (40, 1), "sple": (40, 1)})
    monkeypatch.setattr(gallery.xiong, "OUTBREAK_MAX_EPOCHS", 2)
    monkeypatch.setattr(gallery.xiong, "OUTBREAK_DRAWS", 100)
    payload = gallery.run_entry("xiong-outbreaks", tmp_path, scheduler="serial")
    folder = tmp_path / "xiong-outbreaks"
    assert (folder / "figure.png").stat().st_size > 0 and (folder / "table.md").exists()
    assert json.loads((folder / "result.json").read_text())["name"] == "xiong-outbreaks"
    cells = payload["data"]["cells"]
    assert len(cells) == 3 and {c["method"] for c in cells} == {"smc-abc", "sppe", "sple"}
    for c in cells:
        mean, lo, hi = c["R0"]
        assert 0 < lo <= mean <= hi
    assert 3.4 < payload["data"]["ode_flu"]["R0"] < 4.2

# the default-scale run is tests/test_gallery.py::test_every_entry_runs_at_default_scale (slow)
