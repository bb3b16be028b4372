"""Fixed-seed draws of a few engines, stored so that a refactor can be shown to change no number.

``python tests/golden_draws.py`` rewrites the three files of ``tests/data`` -- do it only for a
deliberate numerical change, and say so in the commit:

* ``golden_draws.npz``: every case's draws (every study's ranks) at the fixed seed;
* ``golden_platform.json``: the fingerprint of the platform that wrote them (CPU, the SIMD paths
  numpy dispatches to, the BLAS core, numba's and torch's CPU targets, library versions);
* ``golden_spread.npz``: per case and per component, the mean and sd of the draws over
  ``REPLICATES`` + 1 runs (the fixed seed and ``REPLICATES`` other inference seeds, same release)
  and the spread of those summaries between the runs -- the Monte Carlo error of the summaries,
  training of learned posteriors included.

``tests/test_bit_identical.py`` recomputes every case.  On the platform of the fingerprint it
compares bit for bit.  Elsewhere the last bits differ (another SIMD path, another BLAS kernel,
FMA contraction) and a chain diverges at the first accept/reject decision that flips, so it
compares by distribution: each summary of the recomputed draws against the replicate runs.
Every option is explicit, so a change of a default does not show up here (that is a numerical
change of its own, tested where it is made).  Writing takes ~12 minutes on the 2-core machine,
most of it the replicates of ``loglinear-sple``.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
import pathlib
import platform
import sys

import numpy as np

DATA = pathlib.Path(__file__).parent / "data"
GOLDEN = DATA / "golden_draws.npz"
FINGERPRINT = DATA / "golden_platform.json"
SPREAD = DATA / "golden_spread.npz"


class GoldenPlatformWarning(UserWarning):
    """The goldens were written on another platform: compared by distribution, not bit for bit.

    Defined here, not in the test module: under pytest-xdist the controller process re-creates each warning a
    worker reports, so the warning's class must be importable there (tests/conftest.py puts this directory on the
    controller's path; test modules themselves are collected only by the workers)."""

#: inference seeds of the replicate runs that give the summaries' Monte Carlo error
REPLICATES = 20
#: familywise false-alarm rate of the distributional check over all cases and studies (each item
#: gets an equal share, split over its comparisons by Bonferroni)
FAMILYWISE_ALPHA = 1e-3

#: (case name, family, method, n, epsilon, engine options); every case is a release simulated from
#: the family's default prior with a fixed seed, then analysed with a fixed seed
CASES = [
    ("gaussian-gibbs", "gaussian", "gibbs", 50, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("gaussian-grid", "gaussian", "grid", 50, 1.0, dict(draws=200, chains=2)),
    ("gaussian-da-mcmc", "gaussian", "da-mcmc", 50, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("binomial-gibbs-ss", "binomial", "gibbs-ss", 100, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("poisson-gibbs-ss", "poisson", "gibbs-ss", 100, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("multinomial-naive", "multinomial", "naive", 100, 1.0, dict(draws=200, chains=2)),
    ("naive-bayes-vb", "naive-bayes", "vb", 200, 1.0, dict(draws=200, chains=2)),
    ("linreg-fixeds", "linear-regression", "mcmc-fixeds", 200, 1.0, dict(draws=200, warmup=100, chains=2)),
    ("linreg-normalx", "linear-regression", "mcmc-normalx", 200, 1.0, dict(draws=100, warmup=100, chains=2)),
    ("linreg-fast", "linear-regression", "bayes-fixeds-fast", 200, 1.0, dict(draws=200, chains=2)),
    ("linreg-ju-smc-abc", "linreg-ju", "smc-abc", 100, 10.0,
     dict(draws=200, chains=1, simulations=400, particles=200)),
    ("linreg-ju-sppe", "linreg-ju", "sppe", 100, 10.0,
     dict(draws=200, chains=1, simulations=200, rounds=1, rqmc_points=2, max_epochs=3, batch_size=50,
          num_atoms=5, proposal="atomic", device="cpu", training="paper", correction="none")),
    ("linreg-ju-sppe-importance", "linreg-ju", "sppe", 100, 1.0,
     dict(draws=200, chains=1, simulations=200, rounds=2, rqmc_points=2, max_epochs=3, batch_size=50,
          num_atoms=5, proposal="atomic", device="cpu", training="fast", correction="importance")),
    ("loglinear-sple", "loglinear", "sple", 100, 10.0,
     dict(draws=100, chains=1, simulations=200, rounds=1, rqmc_points=2, max_epochs=3, device="cpu")),
]

#: calibration studies through the families' batched paths (the `dpposterior calibrate` route)
STUDIES = [
    ("calibrate-gaussian", "gaussian", ["gibbs"], 30, 1.0, 4),
    ("calibrate-poisson", "poisson", ["gibbs-ss", "naive"], 30, 1.0, 4),
    ("calibrate-linreg", "linear-regression", ["mcmc-fixeds"], 100, 1.0, 3),
]

SEED = 20261123
STUDY_SEED = 7


# -- the platform --------------------------------------------------------------------------------

def _cpu() -> dict:
    info = {"machine": platform.machine(), "vendor": "", "model": "", "flags": ""}
    try:
        text = pathlib.Path("/proc/cpuinfo").read_text()
    except OSError:
        info["model"] = platform.processor()
        return info
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "vendor_id" and not info["vendor"]:
            info["vendor"] = value.strip()
        elif key == "model name" and not info["model"]:
            info["model"] = value.strip()
        elif key == "flags" and not info["flags"]:
            # the vector extensions only: the rest (virtualisation, power) does not touch a number
            info["flags"] = " ".join(sorted(f for f in value.split()
                                            if f.startswith(("avx", "fma", "sse", "amx"))))
    return info


def _openblas_core() -> str:
    """The kernel set OpenBLAS picked at load time (DYNAMIC_ARCH builds choose per CPU;
    ``OPENBLAS_CORETYPE`` overrides it)."""
    cores = []
    for pkg in ("numpy", "scipy"):
        mod = __import__(pkg)
        for path in sorted(glob.glob(os.path.join(os.path.dirname(mod.__file__) + ".libs", "*openblas*"))):
            lib = ctypes.CDLL(path)
            for symbol in ("scipy_openblas_get_corename64_", "scipy_openblas_get_corename",
                           "openblas_get_corename64_", "openblas_get_corename"):
                fn = getattr(lib, symbol, None)
                if fn is not None:
                    fn.restype = ctypes.c_char_p
                    cores.append(f"{pkg}:{fn().decode()}")
                    break
    return " ".join(cores) or "unknown"


def fingerprint() -> dict:
    """What decides the last bits of a draw on this machine: the CPU, the SIMD paths numpy
    dispatches to, the BLAS kernels, the CPU numba compiles for, torch's vector path, the
    library versions, and the variables that override any of these."""
    import llvmlite
    import llvmlite.binding as ll
    import numba
    import scipy
    import torch
    from numpy._core import _multiarray_umath as umath

    blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    return {
        "cpu": _cpu(),
        "numpy_cpu_features": sorted(k for k, v in umath.__cpu_features__.items() if v),
        "numpy_cpu_baseline": list(umath.__cpu_baseline__),
        "numpy_cpu_dispatch": list(umath.__cpu_dispatch__),
        "blas": f"{blas.get('name')} {blas.get('version')}",
        "openblas_core": _openblas_core(),
        "numba_cpu": ll.get_host_cpu_name(),
        "torch_cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "versions": {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
                     "numba": numba.__version__, "llvmlite": llvmlite.__version__,
                     "torch": torch.__version__},
        "environment": {k: os.environ.get(k, "") for k in (
            "NPY_DISABLE_CPU_FEATURES", "NPY_ENABLE_CPU_FEATURES", "OPENBLAS_CORETYPE",
            "NUMBA_CPU_NAME", "NUMBA_CPU_FEATURES", "ATEN_CPU_CAPABILITY")},
    }


def fingerprint_differences(stored: dict, here: dict) -> list[str]:
    out = []
    for key in sorted(set(stored) | set(here)):
        a, b = stored.get(key), here.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += [f"{key}.{k}: {a.get(k)!r} -> {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        elif a != b:
            out.append(f"{key}: {a!r} -> {b!r}")
    return out


# -- the cases -----------------------------------------------------------------------------------

def case_posterior(family_name, method, n, epsilon, options, seed=SEED, infer_seed=None) -> dict:
    """The case's draws by variable; the release always comes from ``seed``, the analysis from
    ``infer_seed`` (``seed + 1`` unless given)."""
    from dpposterior import infer
    from dpposterior.families import get_family

    family = get_family(family_name)
    rng = np.random.default_rng(seed)
    prior = family.parse_prior(None, None)
    sim = family.simulate(prior, n, epsilon, rng)
    post = infer(sim.release, None, method, seed=seed + 1 if infer_seed is None else infer_seed, **options)
    return {k: np.asarray(post.posterior[k], float) for k in sorted(post.posterior)}


def case_draws(family_name, method, n, epsilon, options, seed=SEED) -> np.ndarray:
    return flat(case_posterior(family_name, method, n, epsilon, options, seed))


def flat(arrays: dict) -> np.ndarray:
    return np.concatenate([arrays[k].reshape(-1) for k in sorted(arrays)])


def components(post: dict) -> np.ndarray:
    """(draws, components): every scalar of every variable, chains pooled (arrays are
    (chains, draws, *dims))."""
    return np.concatenate([v.reshape(v.shape[0] * v.shape[1], -1) for _, v in sorted(post.items())], axis=1)


def study_rank_arrays(family_name, methods, n, epsilon, trials, seed=STUDY_SEED) -> dict:
    from dpposterior.diagnostics.calibration import calibrate

    out = calibrate(family_name, n, epsilon, trials, methods=methods, seed=seed, draws=100, return_ranks=True)
    return {m: np.asarray(out["_ranks"][m], float) for m in methods}


def study_ranks(family_name, methods, n, epsilon, trials) -> np.ndarray:
    arrays = study_rank_arrays(family_name, methods, n, epsilon, trials)
    return np.concatenate([arrays[m].reshape(-1) for m in methods])


def study_components(arrays: dict) -> np.ndarray:
    """(ranks, methods): one component per method (every method has one rank per trial and parameter)."""
    return np.stack([v.reshape(-1) for _, v in arrays.items()], axis=1)


def summaries(matrix: np.ndarray) -> np.ndarray:
    """(2, components): mean and sd of every component."""
    return np.stack([matrix.mean(axis=0), matrix.std(axis=0, ddof=1)])


def item_components(name: str, seed_offset: int = 0) -> np.ndarray:
    """A case's or a study's components, at the fixed seed (offset 0) or a replicate seed."""
    for case, family, method, n, eps, options in CASES:
        if case == name:
            return components(case_posterior(family, method, n, eps, options,
                                             infer_seed=SEED + 1 + 1000 * seed_offset))
    for study, family, methods, n, eps, trials in STUDIES:
        if study == name:
            return study_components(study_rank_arrays(family, methods, n, eps, trials,
                                                      seed=STUDY_SEED + 1000 * seed_offset))
    raise KeyError(name)


def names() -> list[str]:
    return [c[0] for c in CASES] + [s[0] for s in STUDIES]


# -- the two checks ------------------------------------------------------------------------------

def bitwise_mismatch(draws: np.ndarray, stored: np.ndarray) -> str | None:
    """None when the arrays are equal bit for bit, else what differs."""
    try:
        np.testing.assert_array_equal(draws, stored)
    except AssertionError as err:
        return str(err)
    return None


def distribution_mismatch(name: str, matrix: np.ndarray, spread) -> tuple[str | None, str]:
    """Compare the mean and sd of each component of ``matrix`` with the replicate runs stored in
    ``spread``: (None or the failure, a one-line account of what was compared).

    Under an unchanged sampler a run's summary is one more draw from the distribution of the
    ``runs`` replicate summaries, so (s - mean) / (spread * sqrt(1 + 1/runs)) is Student-t with
    ``runs - 1`` degrees of freedom (normal summaries: the means and sds of a few hundred draws);
    the critical value is Bonferroni over the item's comparisons at its share of
    ``FAMILYWISE_ALPHA``.  The fixed-seed run is one of the replicates and a run on another
    platform starts on its path, so the test errs on the side of passing an unchanged sampler.
    ``detectable`` is the shift of a mean, in sds of its component, that the check flags for
    every component (the least sensitive one decides): a fraction of an sd for the MCMC cases,
    several sds for the learned posteriors, whose training varies with the seed."""
    from scipy import stats

    ref, between, runs = spread[f"{name}/mean"], spread[f"{name}/spread"], int(spread[f"{name}/runs"])
    here = summaries(matrix)
    if here.shape != ref.shape:
        return f"{name}: {here.shape[1]} components, the reference has {ref.shape[1]}", ""
    scale = between * np.sqrt(1.0 + 1.0 / runs)
    alpha = FAMILYWISE_ALPHA / len(names()) / ref.size
    crit = float(stats.t.ppf(1.0 - alpha / 2.0, runs - 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(here - ref) / scale
    # a summary that no seed moves (spread 0) must be reproduced to rounding
    t = np.where(scale > 0, t, np.where(np.isclose(here, ref, rtol=1e-9, atol=0.0), 0.0, np.inf))
    detectable = float(np.max(crit * scale[0] / ref[1]))
    account = (f"{name}: {ref.shape[1]} components x (mean, sd) against {runs} runs, max |t| "
               f"{float(np.max(t)):.2f} <= {crit:.2f} (t_{runs - 1}, alpha {alpha:.1e} each); "
               f"flags a shift of a mean by {detectable:.2f} sd (of that component) or more")
    if np.all(t <= crit):
        return None, account
    bad = [(("mean", "sd")[i], j, float(here[i, j]), float(ref[i, j]), float(scale[i, j]), float(t[i, j]))
           for i, j in zip(*np.nonzero(t > crit))]
    lines = [f"  {stat}[{j}]: {h:.6g} vs replicate mean {r:.6g} (spread {s:.3g}, |t| = {tv:.2f} > {crit:.2f})"
             for stat, j, h, r, s, tv in bad]
    return f"{name}: the draws changed in distribution\n" + "\n".join(lines), account


# -- writing -------------------------------------------------------------------------------------

def compute_all() -> dict[str, np.ndarray]:
    out = {}
    for name, family, method, n, eps, options in CASES:
        out[name] = case_draws(family, method, n, eps, options)
    for name, family, methods, n, eps, trials in STUDIES:
        out[name] = study_ranks(family, methods, n, eps, trials)
    return out


def compute_spread(replicates: int = REPLICATES) -> dict[str, np.ndarray]:
    out = {}
    for name in names():
        runs = np.stack([summaries(item_components(name, k)) for k in range(replicates + 1)])
        out[f"{name}/mean"] = runs.mean(axis=0)
        out[f"{name}/spread"] = runs.std(axis=0, ddof=1)
        out[f"{name}/runs"] = np.array(replicates + 1)
        print(name, "spread / sd of the means:", np.round(out[f"{name}/spread"][0] / out[f"{name}/mean"][1], 3),
              flush=True)
    return out


if __name__ == "__main__":
    import torch

    torch.set_num_threads(1)
    DATA.mkdir(exist_ok=True)
    arrays = compute_all()
    np.savez_compressed(GOLDEN, **arrays)
    FINGERPRINT.write_text(json.dumps(fingerprint(), indent=1) + "\n")
    for k, v in arrays.items():
        print(k, v.shape, float(np.sum(v)), flush=True)
    np.savez_compressed(SPREAD, **compute_spread())
    sys.exit(0)
