"""Curators of the SBI families ``sir`` (binomial trajectory, Xiong, Ju & Zhang Prop. 4) and
``loglinear`` (Laplace-noised proportion tables, App. E.3): CSV -> release -> inference."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from dpposterior.cli import main
from dpposterior.curator import CurateOptions
from dpposterior.errors import InputError
from dpposterior.mechanisms.noise import seeded_sampler_name
from dpposterior.families import get_family
from dpposterior.inference import infer
from dpposterior.release import load_release

EXAMPLE_DATA = Path(__file__).resolve().parents[1] / "examples" / "data"
#: asymptotic Kolmogorov critical value at level 0.001: P(sqrt(n) D > 1.949) = 0.001 under H0
KS_CRIT_001 = 1.949


def _ks_uniform(u: np.ndarray) -> float:
    return stats.kstest(u, "uniform").statistic


def _randomized_pit(k, trials, p, rng):
    """Randomized probability integral transform of binomial counts: exactly U(0, 1) iff
    k ~ Binomial(trials, p) (u = F(k - 1) + V (F(k) - F(k - 1)), V ~ U(0, 1))."""
    lo = stats.binom.cdf(k - 1, trials, p)
    hi = stats.binom.cdf(k, trials, p)
    return lo + rng.random(len(k)) * (hi - lo)


# -- sir ----------------------------------------------------------------------------------

def _sir_csv(tmp_path, rows, header="time,infected,population", name="sir.csv"):
    path = tmp_path / name
    path.write_text(header + "\n" + "\n".join(",".join(map(str, r)) for r in rows) + "\n")
    return path


PAPER_COUNTS = [1, 31000, 614000, 263000, 123000, 47000, 18000, 9000, 5000, 3000]


def test_sir_round_trip_cli(tmp_path, capsys):
    rows = [(t, c, 1_000_000) for t, c in zip(range(0, 154, 17), PAPER_COUNTS)]
    rows = rows[5:] + rows[:5]                      # any row order: the release sorts by time
    csv = _sir_csv(tmp_path, rows)
    out = tmp_path / "sir.json"
    assert main(["release", str(csv), "--family", "sir", "--epsilon", "10", "--out", str(out), "--seed", "3"]) == 0
    assert "family sir, total epsilon 10" in capsys.readouterr().out
    rel = load_release(out)
    assert rel.family == "sir" and rel.population == 1_000_000 and rel.initial_infected == 1
    assert rel.times == [float(t) for t in range(0, 154, 17)]
    rec = rel.statistics.infected
    # Prop. 4: N = 1000 trials, L = 10 points, m = N L / epsilon = 1000
    assert rec.trials == 1000 and rec.m == pytest.approx(1000.0) and rec.epsilon == 10.0
    assert rel.total_privacy_cost() == (10.0, 0.0)
    mech = rel.mechanism()
    assert mech.privacy_cost() == pytest.approx((10.0, 0.0))
    assert rec.sampler == seeded_sampler_name(3)
    # the values are binomial proportions k/N near (I + m)/(K + 2m); 6 sd covers all 10 w.p. > 1 - 1e-8
    p = (np.array(PAPER_COUNTS) + 1000.0) / (1_000_000 + 2000.0)
    assert np.all(np.abs(rec.array() - p) < 6 * np.sqrt(p * (1 - p) / 1000))
    # no data row in the file: the confidential counts do not appear
    text = out.read_text()
    assert "614000" not in text and "263000" not in text
    # same seed -> same file; no seed -> numpy from OS entropy, said so in the record
    again = tmp_path / "again.json"
    assert main(["release", str(csv), "--family", "sir", "--epsilon", "10", "--out", str(again), "--seed", "3"]) == 0
    assert json.loads(again.read_text()) == json.loads(text)
    assert main(["release", str(csv), "--family", "sir", "--epsilon", "10", "--out", str(again)]) == 0
    sampler = load_release(again).statistics.infected.sampler
    assert "unseeded" in sampler and "no binomial sampler" in sampler


def test_sir_binomial_law_at_many_points():
    """s_i = Binomial(N, (I_i + m)/(K + 2m))/N independently, m = N L / epsilon (Prop. 4).

    L = 4000 points with counts spread over [0, K]; the randomized PIT of each k_i = N s_i under
    the claimed law is U(0, 1) exactly, so the KS distance to U(0, 1) is below 1.949/sqrt(L) except
    with probability 0.001 (asymptotic Kolmogorov quantile; fixed seeds, so the test is
    deterministic).  The same check rejects the offset-free law p = I/K (power).
    """
    K, L, N, eps = 1_000_000, 4000, 1000, 40.0
    rng = np.random.default_rng(11)
    counts = rng.integers(0, K + 1, L)
    frame = pd.DataFrame({"time": np.arange(L, dtype=float), "infected": counts, "population": K})
    rel = load_release(get_family("sir").curate(frame, CurateOptions(family="sir", epsilon=eps, seed=5)))
    rec = rel.statistics.infected
    m = N * L / eps
    assert rec.m == pytest.approx(m) and rel.total_privacy_cost() == (eps, 0.0)
    k = np.rint(rec.array() * N)
    np.testing.assert_allclose(k / N, rec.array(), atol=1e-12)
    p = (counts + m) / (K + 2 * m)
    pit_rng = np.random.default_rng(12)
    d_true = _ks_uniform(_randomized_pit(k, N, p, pit_rng))
    assert d_true < KS_CRIT_001 / np.sqrt(L), d_true
    # standardized residuals: mean within 4/sqrt(L), variance within 4 sqrt(2/L) of 1 (z ~ N(0,1))
    z = (k - N * p) / np.sqrt(N * p * (1 - p))
    assert abs(z.mean()) < 4 / np.sqrt(L) and abs(z.var() - 1) < 4 * np.sqrt(2 / L)
    # power: without the offset m the law is far off
    p_naive = np.clip(counts / K, 1e-9, 1 - 1e-9)
    assert _ks_uniform(_randomized_pit(k, N, p_naive, pit_rng)) > KS_CRIT_001 / np.sqrt(L)


def test_sir_python_options_and_small_inference():
    """Population and trials from ``extra`` (Python API); the release runs SMC-ABC end to end."""
    frame = pd.DataFrame({"time": [0, 17, 34, 51, 68], "cases": [1, 700, 350, 160, 70]})
    opts = CurateOptions(family="sir", epsilon=5.0, column="cases", seed=1,
                         extra={"population": 1000, "trials": 100})
    rel = load_release(get_family("sir").curate(frame, opts))
    rec = rel.statistics.infected
    assert rel.population == 1000 and rec.trials == 100 and rec.m == pytest.approx(100 * 5 / 5.0)
    assert len(rel.times) == 5 and rel.total_privacy_cost() == (5.0, 0.0)
    post = infer(rel, method="smc-abc", simulations=600, particles=200, seed=2, quiet=True, draws=100, chains=1)
    assert set(post.posterior) >= {"log_beta", "log_gamma", "R0"}
    np.testing.assert_allclose(post.posterior["R0"], np.exp(post.posterior["log_beta"] - post.posterior["log_gamma"]))
    with pytest.raises(InputError, match="population: 999 disagrees"):
        get_family("sir").curate(frame.assign(population=1000),
                                 CurateOptions(family="sir", epsilon=1.0, column="cases", extra={"population": 999}))
    with pytest.raises(InputError, match="^trials: must be an integer >= 1"):
        get_family("sir").curate(frame, CurateOptions(family="sir", epsilon=1.0, column="cases",
                                                      extra={"population": 1000, "trials": 0.5}))
    with pytest.raises(InputError, match="^initial_infected: must be <= the population"):
        get_family("sir").curate(frame, CurateOptions(family="sir", epsilon=1.0, column="cases",
                                                      extra={"population": 1000, "initial_infected": 2000}))
    with pytest.raises(InputError, match="^days: not an option of the sir curator"):
        get_family("sir").curate(frame, CurateOptions(family="sir", epsilon=1.0, column="cases",
                                                      extra={"population": 1000, "days": 3}))


SIR_BAD = {
    "no population": ("time,infected\n0,1\n17,5\n", [],
                      "error: population: the public population size K is required"),
    "fractional count": ("time,infected,population\n0,1,100\n17,50.5,100\n", [],
                         "error: data.infected: row 2: 50.5 is not a whole number"),
    "negative count": ("time,infected,population\n0,-1,100\n17,5,100\n", [],
                       "error: data.infected: row 1: -1 infected is outside [0, K]"),
    "count above K": ("time,infected,population\n0,1,100\n17,150,100\n", [],
                      "error: data.infected: row 2: 150 infected is outside [0, K] (K = population = 100)"),
    "missing count": ("time,infected,population\n0,1,100\n17,,100\n", [],
                      "error: data.infected: row 2 is empty"),
    "text count": ("time,infected,population\n0,1,100\n17,many,100\n", [],
                   "error: data.infected: row 2: 'many' is not a finite number"),
    "infinite time": ("time,infected,population\n0,1,100\ninf,5,100\n", [],
                      "error: data.time: row 2: inf is not a finite number"),
    "duplicate time": ("time,infected,population\n0,1,100\n0,5,100\n", [],
                       "error: data.time: time 0 appears twice"),
    "negative time": ("time,infected,population\n-1,1,100\n17,5,100\n", [],
                      "error: data.time: row 1: time -1 is negative"),
    "no time column": ("day,infected,population\n0,1,100\n", [], "error: data: no column 'time'"),
    "no count column": ("time,cases,population\n0,1,100\n", [], "error: column: no column 'infected'"),
    "varying population": ("time,infected,population\n0,1,100\n17,5,200\n", [],
                           "error: data.population: row 2: 200 differs from row 1 (100)"),
    "population too small": ("time,infected,population\n0,1,1\n", [],
                             "error: data.population: must be an integer >= 2"),
    "fractional population": ("time,infected,population\n0,1,100.5\n", [],
                              "error: data.population: must be an integer >= 2"),
    "empty": ("time,infected,population\n", [], "error: data: the CSV has no rows"),
    "laplace": ("time,infected,population\n0,1,100\n", ["--mechanism", "laplace"],
                "error: mechanism: sir trajectories are released by the binomial trajectory mechanism only"),
    "bounds": ("time,infected,population\n0,1,100\n", ["--bounds", "0", "100"],
               "error: bounds: not an option of the sir curator"),
    "delta": ("time,infected,population\n0,1,100\n", ["--delta", "1e-6"],
              "error: delta: not an option of the sir curator"),
    "epsilon": ("time,infected,population\n0,1,100\n", ["--epsilon", "0"], "error: epsilon: must be a finite"),
}


@pytest.mark.parametrize("case", sorted(SIR_BAD))
def test_sir_bad_inputs_exit_2_one_line(tmp_path, capsys, case):
    text, args, message = SIR_BAD[case]
    csv = tmp_path / "d.csv"
    csv.write_text(text)
    out = tmp_path / "r.json"
    argv = ["release", str(csv), "--family", "sir", "--out", str(out), "--seed", "1"]
    if "--epsilon" not in args:
        argv += ["--epsilon", "1"]
    code = main(argv + args)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert not out.exists()


# -- loglinear ----------------------------------------------------------------------------

def _records(n, rng):
    """Naive Bayes records at the true parameters of App. E.3 (class prob 0.8489, ...)."""
    y = np.where(rng.random(n) < 0.8489, "yes", "no")
    p1 = np.where(y == "yes", 0.3887, 0.6534)          # P(X1 = first level | Y)
    p2 = np.where(y == "yes", 0.7537, 0.5834)
    x1 = np.where(rng.random(n) < p1, "low", "high")
    x2 = np.where(rng.random(n) < p2, 0, 1)
    return pd.DataFrame({"Y": y, "X1": x1, "X2": x2})


def test_loglinear_round_trip_and_smc_abc(tmp_path, capsys):
    frame = _records(100, np.random.default_rng(4))
    csv = tmp_path / "nb.csv"
    frame.to_csv(csv, index=False)
    out = tmp_path / "ll.json"
    assert main(["release", str(csv), "--family", "loglinear", "--epsilon", "10", "--columns", "Y,X1,X2",
                 "--out", str(out), "--seed", "7"]) == 0
    assert "family loglinear, total epsilon 10" in capsys.readouterr().out
    rel = load_release(out)
    rec = rel.statistics.tables
    assert rel.n == 100 and rel.classes == 2 and rel.levels == [2, 2]
    assert rel.class_labels == ["no", "yes"] and rel.feature_names == ["X1", "X2"]
    assert rel.level_labels == [["high", "low"], ["0", "1"]]
    # App. E.3: sensitivity 2K/n = 0.04, Laplace scale 2K/(n eps) = 0.004, epsilon the total
    assert rec.scale == "proportions" and rec.sensitivity == pytest.approx(0.04)
    assert rel.total_privacy_cost() == (10.0, 0.0)
    assert rec.sampler == seeded_sampler_name(7)
    true = [pd.crosstab(frame["Y"], frame[c]).to_numpy() / 100 for c in ("X1", "X2")]
    # 8 Laplace(0.004) cells: P(max |noise| > 0.004 log(8000)) = 0.001
    assert np.abs(np.array(rec.value) - np.array(true)).max() < 0.004 * np.log(8 / 0.001)
    nc = tmp_path / "ll.nc"
    assert main(["infer", str(out), "--method", "smc-abc", "--simulations", "2000", "--out", str(nc),
                 "--seed", "1", "--quiet", "--no-naive"]) == 0
    assert nc.exists()
    post = infer(rel, method="smc-abc", simulations=2000, seed=1, quiet=True, draws=200, chains=1)
    assert post.posterior["class_prob"].shape == (1, 200, 2)
    assert post.posterior["feature_prob"].shape == (1, 200, 2, 2, 2)


def test_loglinear_counts_scale_and_opendp(tmp_path):
    frame = _records(60, np.random.default_rng(5))
    opts = CurateOptions(family="loglinear", epsilon=2.0, columns=["Y", "X1", "X2"], scale="counts")
    rel = load_release(get_family("loglinear").curate(frame, opts))
    rec = rel.statistics.tables
    # counts: the K tables together have L1 sensitivity 2K = 4; epsilon is still the total
    assert rec.scale == "counts" and rec.sensitivity == 4.0 and rel.total_privacy_cost() == (2.0, 0.0)
    assert rec.sampler.startswith("opendp-") and "unknown" not in rec.sampler
    true = np.array([pd.crosstab(frame["Y"], frame[c]).to_numpy() for c in ("X1", "X2")])
    # Laplace(2) per cell, 8 cells: P(max |noise| > 2 log(8 / 1e-6)) = 1e-6
    assert np.abs(np.array(rec.value) - true).max() < 2 * np.log(8 / 1e-6)


def test_loglinear_laplace_law_at_many_cells():
    """value - true proportion ~ Laplace(0, 2K/(n eps)) independently in every cell (App. E.3).

    K = 250 binary features -> 1000 cells; KS distance to Laplace(0, b) below 1.949/sqrt(1000)
    (level 0.001, asymptotic Kolmogorov quantile; fixed seeds).  Power: the same check rejects
    the scale 2/(n eps) that forgets the K tables.
    """
    rng = np.random.default_rng(8)
    n, K, eps = 400, 250, 1.0
    data = {"Y": rng.integers(0, 2, n)}
    for k in range(K):
        data[f"X{k}"] = rng.integers(0, 2, n)
    frame = pd.DataFrame(data)
    cols = list(frame.columns)
    opts = CurateOptions(family="loglinear", epsilon=eps, columns=cols, seed=9)
    rel = load_release(get_family("loglinear").curate(frame, opts))
    rec = rel.statistics.tables
    b = 2 * K / (n * eps)
    assert rec.sensitivity == pytest.approx(2 * K / n) and rel.total_privacy_cost() == (eps, 0.0)
    true = np.array([pd.crosstab(frame["Y"], frame[c]).to_numpy() / n for c in cols[1:]])
    noise = (np.array(rec.value) - true).ravel()
    assert noise.size == 4 * K
    d = stats.kstest(noise, "laplace", args=(0.0, b)).statistic
    assert d < KS_CRIT_001 / np.sqrt(noise.size), d
    # mean |noise| / b ~ mean of Exp(1): within 4 / sqrt(1000) of 1
    assert abs(np.abs(noise).mean() / b - 1) < 4 / np.sqrt(noise.size)
    assert stats.kstest(noise, "laplace", args=(0.0, b / K)).statistic > KS_CRIT_001 / np.sqrt(noise.size)


LOGLINEAR_BAD = {
    "no columns": ([], "error: columns: loglinear needs the class column then at least one feature column"),
    "class only": (["--columns", "Y"], "error: columns: loglinear needs the class column"),
    "absent column": (["--columns", "Y,Q"], "error: columns: no column 'Q'"),
    "twice": (["--columns", "Y,X1,X1"], "error: columns: a column is listed twice"),
    "single level": (["--columns", "Y,C"], "error: data.C: a single level ('k')"),
    "missing value": (["--columns", "Y,M"], "error: data.M: row 2 is empty (column 'M')"),
    "bad scale": (["--columns", "Y,X1", "--scale", "percent"],
                  "error: scale: must be 'proportions' or 'counts'"),
    "gaussian": (["--columns", "Y,X1", "--mechanism", "gaussian"],
                 "error: mechanism: loglinear tables are released with the Laplace mechanism only"),
    "delta": (["--columns", "Y,X1", "--delta", "0.01"], "error: delta: not an option of the loglinear curator"),
    "column option": (["--columns", "Y,X1", "--column", "Y"],
                      "error: column: not an option of the loglinear curator"),
}


@pytest.mark.parametrize("case", sorted(LOGLINEAR_BAD))
def test_loglinear_bad_inputs_exit_2_one_line(tmp_path, capsys, case):
    args, message = LOGLINEAR_BAD[case]
    csv = tmp_path / "d.csv"
    csv.write_text("Y,X1,C,M\na,u,k,p\nb,v,k,\na,v,k,q\n")
    out = tmp_path / "r.json"
    code = main(["release", str(csv), "--family", "loglinear", "--epsilon", "1", "--out", str(out), *args])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(message) and err.count("\n") == 1, err
    assert not out.exists()


def test_loglinear_label_fields_are_validated():
    base = json.loads((Path(__file__).resolve().parents[1] / "examples" / "releases"
                       / "loglinear-eps10.json").read_text())
    assert load_release(dict(base, class_labels=["a", "b"], level_labels=[["u", "v"], ["0", "1"]]))
    with pytest.raises(InputError, match="class_labels must have 2 entries"):
        load_release(dict(base, class_labels=["a"]))
    with pytest.raises(InputError, match=r"level_labels\[1\] must have 2 entries"):
        load_release(dict(base, level_labels=[["u", "v"], ["0"]]))


# -- the example CSVs ---------------------------------------------------------------------

@pytest.mark.parametrize("family,name,args", [
    ("sir", "sir-infected.csv", []),
    ("loglinear", "loglinear-records.csv", ["--columns", "Y,X1,X2"]),
])
def test_example_csvs_curate(tmp_path, family, name, args):
    out = tmp_path / f"{family}.json"
    assert main(["release", str(EXAMPLE_DATA / name), "--family", family, "--epsilon", "10",
                 "--out", str(out), "--seed", "1", *args]) == 0
    rel = load_release(out)
    assert rel.family == family and rel.total_privacy_cost() == (10.0, 0.0)
    if family == "sir":
        assert rel.population == 1_000_000 and len(rel.times) == 10
    else:
        assert rel.n == 100 and rel.levels == [2, 2]
