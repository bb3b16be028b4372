"""Working-memory estimates of the engines without enumeration windows (dpposterior/memory.py): the Gaussian engines,
Gibbs-SS and the conjugate baselines, naive Bayes, linear regression and the census GLS baseline.

Two kinds of test: a run that would not fit is refused in one line naming the field, before the engine allocates
(``available_bytes`` monkeypatched small; the allocating function replaced by one that fails); and each estimate is
within a factor 2 of the peak measured at a modest size (peak RSS of a fresh process, VmHWM after clear_refs, with
glibc's large allocations mapped so that freed arrays leave the resident set).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import dpposterior
from dpposterior.errors import RefusedError

ROOT = Path(__file__).resolve().parents[1]
SRC = str(ROOT / "src")
GIB = 2.0 ** 30

GAUSSIAN = {"format": "dpposterior-release/1", "family": "gaussian", "n": 100, "bounds": [0, 1],
            "statistics": {"mean": {"value": 0.4, "mechanism": "laplace", "epsilon": 1.0},
                           "variance": {"value": 0.05, "mechanism": "laplace", "epsilon": 1.0}}}
BINOMIAL = {"format": "dpposterior-release/1", "family": "binomial", "n": 1000,
            "statistics": {"successes": {"value": 400, "mechanism": "laplace", "epsilon": 1.0}}}


def multinomial(K: int) -> dict:
    return {"format": "dpposterior-release/1", "family": "multinomial", "n": 1000 * K,
            "statistics": {"counts": {"value": [1000] * K, "mechanism": "laplace", "epsilon": 1.0}}}


def naive_bayes(classes: int, levels: list[int], n: int = 1000) -> dict:
    rng = np.random.default_rng(0)
    tables = [(rng.multinomial(n, np.ones(classes * J) / (classes * J)).reshape(classes, J)
               + rng.laplace(0, 2, (classes, J))).tolist() for J in levels]
    return {"format": "dpposterior-release/1", "family": "naive-bayes", "n": n, "classes": classes,
            "levels": list(levels), "statistics": {"tables": {"value": tables, "mechanism": "laplace",
                                                              "epsilon": 1.0, "sensitivity": 2, "scale": "counts"}}}


def linear_regression(d: int, parties: int = 1, n: int = 1000) -> dict:
    """A release of d features and J parties at the Gaussian noise the curator's bounds need."""
    rng = np.random.default_rng(0)
    sigma = 224.04743182339953  # analytic Gaussian at x_norm = y_abs = 5, epsilon 1, delta 1e-6
    out = []
    for _ in range(parties):
        X = rng.normal(size=(n, d)) / np.sqrt(d)
        y = X.sum(1) + 0.5 * rng.normal(size=n)
        xtx = X.T @ X + sigma * rng.normal(size=(d, d))
        stat = {"mechanism": "gaussian", "epsilon": 1.0, "delta": 1e-6, "sensitivity": 53.033008588991066,
                "sigma": sigma}
        out.append({"n": n, "composition": "joint", "statistics": {
            "xtx": {**stat, "value": ((xtx + xtx.T) / 2).tolist()},
            "xty": {**stat, "value": (X.T @ y + sigma * rng.normal(size=d)).tolist()}}})
    return {"format": "dpposterior-release/1", "family": "linear-regression", "neighbouring": "replace-one",
            "accounting": {"epsilon": 1.0, "delta": 1e-6, "note": "parallel"},
            "features": [f"x{i}" for i in range(d)], "intercept": False, "bounds": {"x_norm": 5.0, "y_abs": 5.0},
            "parties": out, "n": n * parties}


@pytest.fixture
def available(monkeypatch):
    """Set the memory the checks see: ``available(bytes)``."""
    import dpposterior.memory as memory

    def set_(nbytes):
        monkeypatch.setattr(memory, "available_bytes", lambda: float(nbytes))
    return set_


def _never(*args, **kwargs):
    raise AssertionError("allocated before the refusal")


# ------------------------------------------------------------------------------ refused before allocating
def test_gaussian_gibbs_warmup_windows_are_refused_before_any_chain(available, monkeypatch):
    """10,000 chains x a warm-up of 2e7 keep windows of 5e6 iterations each: 2.6 TB, refused naming the warm-up."""
    from dpposterior.inference import gaussian_gibbs

    available(8 * GIB)
    monkeypatch.setattr(gaussian_gibbs, "run_chains", _never)
    with pytest.raises(RefusedError, match=r"^draws: gibbs: 2000 draws x 10000 chains after 20000000 warm-up "
                                           r"iterations needs about [0-9.]+ GiB of memory, more than the 8\.0 GiB "
                                           r"available; fewer --chains or a shorter --warmup$"):
        dpposterior.infer(GAUSSIAN, method="gibbs", draws=2000, chains=10_000, warmup=20_000_000, seed=1)


def test_gaussian_gibbs_draws_say_how_many_fit(available, monkeypatch):
    from dpposterior.inference import gaussian_gibbs

    available(1 * GIB)
    monkeypatch.setattr(gaussian_gibbs, "run_chains", _never)
    with pytest.raises(RefusedError, match=r"at most \d+ draws per chain fit \(--draws \d+\), or fewer --chains"):
        dpposterior.infer(GAUSSIAN, method="gibbs", draws=5_000_000, chains=4, warmup=100, seed=1)


def test_gaussian_grid_and_naive_are_refused_before_allocating(available, monkeypatch):
    from dpposterior.inference import gaussian_grid

    available(100 * 2 ** 20)
    monkeypatch.setattr(gaussian_grid, "grid_draws", _never)
    monkeypatch.setattr(gaussian_grid, "naive_draws", _never)
    with pytest.raises(RefusedError, match=r"^draws: grid: 2000 x 2000 cells and 10 draws x 1 chains .*; a smaller "
                                           r"grid_size, or fewer --chains$"):
        dpposterior.infer(GAUSSIAN, method="grid", draws=10, chains=1, grid_size=2000, seed=1)
    with pytest.raises(RefusedError, match=r"^draws: naive: 5000000 draws x 4 chains .*\(--draws \d+\)"):
        dpposterior.infer(GAUSSIAN, method="naive", draws=5_000_000, chains=4, seed=1)


def test_gibbs_ss_and_baselines_are_refused_before_the_kernel(available, monkeypatch):
    from dpposterior.families._expfam import ExpFamModel
    from dpposterior.inference import expfam_baselines, gibbs_ss

    available(1 * GIB)
    monkeypatch.setattr(gibbs_ss, "sample_batch", _never)
    with pytest.raises(RefusedError, match=r"^draws: gibbs-ss: 5000000 draws x 4 chains of 1 values each"):
        dpposterior.infer(BINOMIAL, method="gibbs-ss", draws=5_000_000, chains=4, warmup=10, seed=1)
    # 10 categories: the stored draws (16 bytes a value, api.check_stored_draws: 320 MB) fit in 450 MB, the
    # kernel's output with the convergence checks (at least 128 bytes a draw more) does not
    available(450e6)
    with pytest.raises(RefusedError, match=r"^draws: gibbs-ss: 500000 draws x 4 chains of 10 values each"):
        dpposterior.infer(multinomial(10), method="gibbs-ss", draws=500_000, chains=4, warmup=10, seed=1)
    available(100 * 2 ** 20)
    monkeypatch.setattr(ExpFamModel, "conjugate_draws", _never)
    with pytest.raises(RefusedError, match=r"^draws: naive: 5000000 draws x 4 chains of 1 values each"):
        dpposterior.infer(BINOMIAL, method="naive", draws=5_000_000, chains=4, seed=1)
    assert expfam_baselines.VALUE_BYTES == 16.0


def test_naive_bayes_exact_enumeration_cumulative_tables_are_refused(available, monkeypatch):
    """n = 100: each draw picks its tables from a (draws x chains, 101) cumulative array -- 5e6 x 4 draws are
    about 35 GiB, where the stored draws (10 values each) are 3 GiB."""
    from dpposterior.inference import naive_bayes_exact

    available(8 * GIB)
    monkeypatch.setattr(naive_bayes_exact, "sample_exact", _never)
    with pytest.raises(RefusedError, match=r"^draws: exact-enumeration: 5000000 draws x 4 chains of 10 table values "
                                           r".* needs about 3[0-9.]+ GiB .*\(--draws \d+\)"):
        dpposterior.infer(ROOT / "examples" / "releases" / "naive-bayes-xiong-eps10.json",
                          method="exact-enumeration", draws=5_000_000, chains=4, seed=1)


def test_naive_bayes_padded_tables_are_refused_before_the_fit(available, monkeypatch):
    """400 binary features and one of 2000 levels pad to 400 x 2 x 2000 cells: the fit is refused, not the draws."""
    from dpposterior.inference import naive_bayes_vb

    release = naive_bayes(2, [2000] + [2] * 399)
    available(60 * 2 ** 20)
    monkeypatch.setattr(naive_bayes_vb.Problem, "from_release", _never)
    for method in ("vb", "naive"):
        with pytest.raises(RefusedError, match=rf"^draws: {method}: 2 draws x 1 chains of 1,602,000 table values "
                                               r"\(padded to the most levels\) .*; fewer --chains; tables of fewer "
                                               r"levels"):
            dpposterior.infer(release, method=method, draws=2, chains=1, seed=1)


def test_linear_regression_moment_matrices_are_refused_before_the_chains(available, monkeypatch):
    """mcmc-bs moves the D = (d + 1)(d + 2)/2 coordinates of vech(w w'): at d = 100 each iteration holds about
    12 (D x D) arrays a chain, 10 GB for 4 chains."""
    from dpposterior.inference import linreg_bs, linreg_normalx

    release = dpposterior.load_release(linear_regression(100))
    available(8 * GIB)
    monkeypatch.setattr(linreg_bs, "run_bs", _never)
    with pytest.raises(RefusedError, match=r"^draws: mcmc-bs: 10 draws x 4 chains of 100 coefficients \(4 chains x 1 "
                                           r"parties of 5,151 x 5,151 moment matrices per iteration\) needs about "
                                           r"[0-9.]+ GiB .*; fewer --chains, or an engine without the d x d moment "
                                           r"matrices"):
        dpposterior.infer(release, method="mcmc-bs", draws=10, chains=4, warmup=10, seed=1)
    # normalx: 64 chains x 17 (d x d) arrays an iteration (87 MB), where the 2 stored draws are 21 MB
    available(50 * 2 ** 20)
    monkeypatch.setattr(linreg_normalx, "run_normalx", _never)
    with pytest.raises(RefusedError, match=r"^draws: mcmc-normalx: 2 draws x 64 chains of 100 coefficients \(64 "
                                           r"chains x 1 parties of 100 x 100 matrices per iteration\)"):
        dpposterior.infer(release, method="mcmc-normalx", draws=2, chains=64, warmup=10, seed=1)


def test_engines_without_sigma_x_are_judged_by_their_own_draws(available):
    """api.check_stored_draws takes an engine's own draw_values: theta and sigma2 (d + 1), not the family's
    d^2 + 2d + 2 of mcmc-normalx -- 20,000 draws of d = 300 fit in 1 GiB as theta, not as Sigma_x."""
    from dpposterior.api import check_stored_draws
    from dpposterior.errors import RefusedError as Refused

    release = dpposterior.load_release(linear_regression(300, n=400))
    family = release.family_entry
    available(1 * GIB)
    for method in ("mcmc-fixeds", "bayes-fixeds-fast", "naive", "mcmc-bs"):
        options = family.engine_options(method).from_inference(
            dpposterior.InferenceOptions(method=method, draws=5000, chains=4, seed=1), method)
        check_stored_draws(family, release, options)
    options = family.engine_options("mcmc-normalx").from_inference(
        dpposterior.InferenceOptions(method="mcmc-normalx", draws=5000, chains=4, seed=1), "mcmc-normalx")
    with pytest.raises(Refused, match=r"^draws: 5000 draws x 4 chains of 90,602 values each"):
        check_stored_draws(family, release, options)


def test_census_gls_is_refused_before_the_information_arrays(available, monkeypatch):
    sys.path.insert(0, str(ROOT / "tests"))
    from test_census_peers import ATTRS, LEVELS, QUERIES, make_rows, random_blocks

    from dpposterior.families.census_table import build_structure
    from dpposterior.inference import census_peers as cp

    rng = np.random.default_rng(7)
    blocks = random_blocks(rng, 6)
    s = build_structure(ATTRS, QUERIES, LEVELS, make_rows(rng, blocks, 0.8), blocks=blocks)
    monkeypatch.setattr(cp, "_information", _never)
    available(1000)
    with pytest.raises(RefusedError) as err:
        cp.gls(s)
    assert err.value.field == "structure" and "geounits x 6 x 6 covariances" in str(err.value)


# ------------------------------------------------------------------------------ estimates against measured peaks
_PEAK = r"""
import json, sys
import dpposterior, dpposterior.memory as memory
case = json.loads(sys.argv[1])
exec(case.get("setup", ""))
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
estimates = []
real = memory.check_fits
memory.check_fits = lambda est, *a: estimates.append(est) or real(est, *a)
if "warm" in case:
    exec(case["warm"])  # imports and compiled kernels, outside the measured peak
    estimates.clear()
base = status("VmRSS")
open("/proc/self/clear_refs", "w").write("5")
exec(case["run"])
print(json.dumps({"peak": status("VmHWM") - base, "estimate": max(estimates) if estimates else None}))
"""


def _infer_case(release, method, **kwargs):
    warm = {k: v for k, v in kwargs.items() if k not in ("draws", "chains", "warmup")}
    warm.update(draws=20, chains=1)
    if "warmup" in kwargs:
        warm["warmup"] = 10
    return {"release": release, "setup": "release = dpposterior.load_release(case['path'])",
            "warm": f"dpposterior.infer(release, method={method!r}, seed=1, **{warm!r})",
            "run": f"dpposterior.infer(release, method={method!r}, seed=1, **{kwargs!r})"}


def _gls_case(ages: int, eths: int):
    build = (f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
             "import numpy as np\n"
             "from test_census_peers import LEVELS, make_rows, random_blocks\n"
             "import test_census_peers as t\n"
             "from dpposterior.families.census_table import build_structure\n"
             "from dpposterior.inference import census_peers as cp\n"
             "def structure(a, e):\n"
             "    t.ATTRS = {'age': [f'a{i}' for i in range(a)], 'eth': [f'e{i}' for i in range(e)]}\n"
             "    rng = np.random.default_rng(7)\n"
             "    blocks = random_blocks(rng, 12)\n"
             "    return build_structure(t.ATTRS, t.QUERIES, LEVELS, make_rows(rng, blocks, 0.9), blocks=blocks)\n")
    return {"setup": build + f"big = structure({ages}, {eths})", "warm": "cp.gls(structure(2, 2))",
            "run": "cp.gls(big)"}


PEAK_CASES = {
    "gaussian gibbs, warm-up windows": _infer_case(GAUSSIAN, "gibbs", draws=100, chains=40, warmup=400_000),
    "gaussian gibbs, draws": _infer_case(GAUSSIAN, "gibbs", draws=250_000, chains=4, warmup=100),
    "gaussian grid, 2000 x 2000 cells": _infer_case(GAUSSIAN, "grid", draws=10, chains=1, grid_size=2000),
    "gaussian naive": _infer_case(GAUSSIAN, "naive", draws=500_000, chains=4),
    "gibbs-ss, binomial": _infer_case(BINOMIAL, "gibbs-ss", draws=250_000, chains=4, warmup=100),
    "gibbs-ss, 10 categories": _infer_case(multinomial(10), "gibbs-ss", draws=50_000, chains=4, warmup=100),
    "naive-bayes exact-enumeration": _infer_case(naive_bayes(2, [2, 2], n=100), "exact-enumeration", draws=25_000,
                                                 chains=4),
    "naive-bayes vb, padded tables": _infer_case(naive_bayes(2, [2000] + [2] * 399), "vb", draws=2, chains=1),
    "linear regression normalx, d = 10": _infer_case(linear_regression(10), "mcmc-normalx", draws=50_000, chains=4,
                                                     warmup=10),
    "linear regression normalx, d = 200": _infer_case(linear_regression(200), "mcmc-normalx", draws=3, chains=8,
                                                      warmup=2),
    "linear regression bs, d = 30": _infer_case(linear_regression(30), "mcmc-bs", draws=3, chains=4, warmup=2),
    "census gls, 150 cells": _gls_case(15, 10),
}


@pytest.mark.parametrize("name", list(PEAK_CASES))
def test_estimate_is_within_a_factor_two_of_the_measured_peak(name, tmp_path):
    case = dict(PEAK_CASES[name])
    if "release" in case:  # (a file: a release of 40,000 numbers is longer than a command line may be)
        case["path"] = str(tmp_path / "release.json")
        Path(case["path"]).write_text(json.dumps(case.pop("release")))
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux's peak-RSS reset (/proc/self/clear_refs)")
    env = {**os.environ, "PYTHONPATH": SRC, "MALLOC_MMAP_THRESHOLD_": "131072", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-c", _PEAK, json.dumps(case)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["estimate"] is not None, "no estimate was made"
    ratio = got["estimate"] / got["peak"]
    assert 0.5 <= ratio <= 2.0, (name, got["estimate"] / 2 ** 20, got["peak"] / 2 ** 20)


# ------------------------------------------------------------------------------ calibrate's batched paths
def _batch(family, method, sims, prior, draws, chains=1):
    from dpposterior.options import InferenceOptions

    run = InferenceOptions(method=method, draws=draws, chains=chains, seed=np.random.SeedSequence(0))
    opts = family.engine_options(method).from_inference(run, f"{family.name}/{method}")
    return family.batch_path(method)(sims, prior, method, opts)


def test_calibration_batches_are_refused_before_their_chains(available, monkeypatch):
    """A batched calibration path runs every chain of its work unit at once: 50 releases x 10^7 draws are refused in
    one line naming the draws and the work unit, before the sampler runs (gaussian gibbs, gibbs-ss, linear
    regression); a batch that fits runs."""
    from dpposterior.families import get_family
    from dpposterior.families import linear_regression as lr
    from dpposterior.families.gaussian import FAMILY as GAUSS, parse_prior as gauss_prior
    from dpposterior.inference import expfam_baselines, gaussian_gibbs, linreg_batch

    available(2 * GIB)
    message = (r"^draws: calibrate's batch of {}: 50 releases x 1 chains x 10000000 draws needs about [0-9.]+ GiB "
               r"of memory, more than the 2\.0 GiB available; .*, or fewer releases per batch$")
    rng = np.random.default_rng(3)
    prior = gauss_prior(None)
    sims = [GAUSS.simulate(prior, 50, 1.0, rng) for _ in range(50)]
    monkeypatch.setattr(gaussian_gibbs, "run_chains", _never)
    with pytest.raises(RefusedError, match=message.format("gibbs")):
        _batch(GAUSS, "gibbs", sims, prior, 10_000_000)
    binomial = get_family("binomial")
    bprior = binomial.parse_prior(None)
    bsims = [binomial.simulate(bprior, 100, 1.0, rng) for _ in range(50)]
    monkeypatch.setattr(expfam_baselines, "sample_batch", _never)
    with pytest.raises(RefusedError, match=message.format("gibbs-ss")):
        _batch(binomial, "gibbs-ss", bsims, bprior, 10_000_000)
    lprior = lr.parse_prior(None)
    lsims = [lr.simulate(lprior, 300, 1.0, rng) for _ in range(50)]
    monkeypatch.setattr(linreg_batch, "run_fixeds", _never)
    with pytest.raises(RefusedError, match=message.format("mcmc-fixeds")):
        _batch(lr.FAMILY, "mcmc-fixeds", lsims, lprior, 10_000_000)
    monkeypatch.undo()
    available(2 * GIB)
    assert _batch(GAUSS, "gibbs", sims[:3], prior, 50).shape == (3, 50, 2)


def test_refusals_cross_a_process_boundary_whole():
    """An input error, a refusal and a memory refusal are rebuilt from their field and reason when unpickled (what a
    process pool or a Dask worker does with an exception), keeping their class."""
    import pickle

    from dpposterior.errors import InputError, MemoryRefusedError

    for cls in (InputError, RefusedError, MemoryRefusedError):
        back = pickle.loads(pickle.dumps(cls("draws", "needs about 60.5 GiB")))
        assert type(back) is cls and back.field == "draws" and back.reason == "needs about 60.5 GiB"
        assert str(back) == "draws: needs about 60.5 GiB"


@pytest.mark.parametrize("scheduler", ["serial", "processes"])
def test_calibrate_stops_on_a_memory_refusal_in_one_line(scheduler, tmp_path):
    """calibrate whose trials would not fit ends in one line naming the field, exit 2, no traceback and no result
    file, on its worker processes as in process: every trial of that size would refuse alike (it was recorded as
    one failure per trial and exited 0)."""
    out = tmp_path / "cal.json"
    proc = subprocess.run([sys.executable, "-m", "dpposterior", "calibrate", "--family", "gaussian", "--n", "50",
                           "--epsilon", "1", "--trials", "3", "--workers", "2", "--draws", "1000000000000",
                           "--scheduler", scheduler, "--quiet", "--out", str(out)],
                          capture_output=True, text=True, env={**os.environ, "PYTHONPATH": SRC}, timeout=300)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: draws: calibrate's batch of gibbs: "), proc.stderr
    assert "of memory, more than the" in lines[0] and "Traceback" not in proc.stderr
    assert not out.exists()
