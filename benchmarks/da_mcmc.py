"""Data-augmentation MCMC (Ju, Awan, Gong & Rao 2022): speed of the record sweep and
ESS per second on linreg-ju beside SMC-ABC and SPPE.

1. Record updates per second of the compiled sweep (``inference.da_mcmc.record_sweep``, one
   numba thread) on the contract model (n = 200 Poisson counts clamped to [0, 10],
   Laplace eps = 0.5, sensitivity 10): the kernel alone on pre-drawn proposals, and the whole
   record step (proposals rng.poisson + clamp + uniforms + kernel) per record.
2. linreg-ju (Xiong et al. Tables 2-4, eps = 10, 1, 0.1): DA-MCMC (4 chains) -- bulk ESS per
   second (ArviZ, worst coordinate) and accuracy against the exact pseudo-marginal references
   (benchmarks/results/isref_*: |mean - ref| / ref sd and sd / ref sd, worst coordinate);
   SMC-ABC (50,000 simulations, 1,000 particles: ESS = 1 / sum w^2 of the final population);
   SPPE (a small run, ``--sppe-simulations`` x ``--sppe-rounds``, eps = 1 only by default: its
   draws are independent, so ESS = draws, and the wall time is dominated by training).

    python benchmarks/da_mcmc.py [--draws 5000] [--problems 10,1,0.1] [--sppe-problems 1]

Writes benchmarks/results/da_mcmc.json and prints a table.  Wall times are for the shared
2-core machine and include everything (compiled kernels load from numba's cache).
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
from scipy.special import softmax

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def reference(eps: str):
    z = np.load(RESULTS / f"isref_linreg-ju-eps{eps}.npz")
    w = softmax(z["log_weight"])
    m = w @ z["theta"]
    return m, np.sqrt(w @ (z["theta"] - m) ** 2)


def accuracy(draws: np.ndarray, eps: str) -> dict:
    m, sd = reference(eps)
    dev = (draws.mean(axis=0) - m) / sd
    ratio = draws.std(axis=0) / sd
    return {"mean_dev_sd": dev.round(4).tolist(), "sd_ratio": ratio.round(4).tolist(),
            "max_abs_mean_dev_sd": float(np.abs(dev).max()), "max_abs_sd_ratio_minus_1": float(np.abs(ratio - 1).max())}


def sweep_speed(chains: int = 64, sweeps: int = 20, repeats: int = 5, seed: int = 0) -> dict:
    from dpposterior.inference.da_mcmc import LAPLACE, record_sweep

    n, clamp, scale, observed = 200, 10, 20.0, np.array([1137.5])
    rng = np.random.default_rng(seed)
    lam = 5.7
    t = np.clip(rng.poisson(lam, size=(chains, n, 1)), 0, clamp).astype(float)
    inv = np.array([1.0 / scale])
    last = np.zeros((chains, n), np.int64)
    nacc = np.zeros(chains, np.int64)
    m = n * sweeps
    # compile / load from cache
    record_sweep(t, np.clip(rng.poisson(lam, size=(chains, n, 1)), 0, clamp).astype(float), t.sum(axis=1),
                 rng.random((chains, n)), observed, LAPLACE, inv, last, nacc)
    kernel, full = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        tp = np.clip(rng.poisson(lam, size=(chains, m, 1)), 0, clamp).astype(float)
        u = rng.random((chains, m))
        total = t.sum(axis=1)
        t1 = time.perf_counter()
        record_sweep(t, tp, total, u, observed, LAPLACE, inv, last, nacc)
        t2 = time.perf_counter()
        kernel.append(chains * m / (t2 - t1))
        full.append(chains * m / (t2 - t0))
    return {"chains": chains, "records": n, "sweeps_per_call": sweeps, "updates_per_call": chains * m,
            "kernel_updates_per_second": float(np.median(kernel)),
            "record_step_updates_per_second": float(np.median(full)),
            "acceptance": float(nacc.sum() / (chains * m))}


def da_run(eps: str, draws: int, chains: int, warmup: int, seed: int) -> dict:
    import arviz as az

    import dpposterior

    t0 = time.perf_counter()
    post = dpposterior.infer(ROOT / "examples" / "releases" / f"linreg-ju-eps{eps}.json", method="da-mcmc",
                             draws=draws, chains=chains, warmup=warmup, seed=seed)
    seconds = time.perf_counter() - t0
    ess = az.ess(post.to_arviz(), var_names=["beta"])["beta"].values
    return {"method": "da-mcmc", "seconds": seconds, "draws": draws * chains, "ess": ess.round(1).tolist(),
            "ess_per_second_worst": float(ess.min() / seconds),
            "record_acceptance": post.attrs["record_acceptance_mean"], **accuracy(post.draws("beta"), eps)}


def smc_run(eps: str, seed: int, simulations: int = 50_000, particles: int = 1000) -> dict:
    import dpposterior

    t0 = time.perf_counter()
    post = dpposterior.infer(ROOT / "examples" / "releases" / f"linreg-ju-eps{eps}.json", method="smc-abc",
                             draws=1000, chains=4, seed=seed, simulations=simulations, particles=particles)
    seconds = time.perf_counter() - t0
    w = post.extras["weights"]
    theta = post.extras["population"]
    ess = float(1.0 / np.sum(w ** 2))
    # accuracy from the weighted population itself (no resampling noise)
    m, sd = reference(eps)
    mean = w @ theta
    wsd = np.sqrt(w @ (theta - mean) ** 2)
    return {"method": "smc-abc", "seconds": seconds, "simulations": simulations, "particles": particles,
            "ess": ess, "ess_per_second_worst": ess / seconds,
            "mean_dev_sd": ((mean - m) / sd).round(4).tolist(), "sd_ratio": (wsd / sd).round(4).tolist(),
            "max_abs_mean_dev_sd": float(np.abs((mean - m) / sd).max()),
            "max_abs_sd_ratio_minus_1": float(np.abs(wsd / sd - 1).max())}


def sppe_run(eps: str, seed: int, simulations: int, rounds: int) -> dict:
    import dpposterior

    t0 = time.perf_counter()
    post = dpposterior.infer(ROOT / "examples" / "releases" / f"linreg-ju-eps{eps}.json", method="sppe",
                             draws=1000, chains=4, seed=seed, simulations=simulations, rounds=rounds)
    seconds = time.perf_counter() - t0
    n = post.draws("beta").shape[0]
    return {"method": "sppe", "seconds": seconds, "simulations_per_round": simulations, "rounds": rounds,
            "ess": float(n), "ess_per_second_worst": n / seconds, **accuracy(post.draws("beta"), eps)}


def main():
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--draws", type=int, default=5000)
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--problems", default="10,1,0.1")
    ap.add_argument("--sppe-problems", default="1")
    ap.add_argument("--sppe-simulations", type=int, default=1000)
    ap.add_argument("--sppe-rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default=None)
    add_update_flag(ap)
    args = ap.parse_args()
    args.out = str(out_path(args.out, "da_mcmc.json", args.update_results))

    out = {"machine": f"{os.cpu_count()} cores (shared)", "sweep": sweep_speed(), "linreg_ju": {}}
    s = out["sweep"]
    print(f"record sweep (contract model, {s['chains']} chains x {s['records']} records x {s['sweeps_per_call']} "
          f"sweeps per call): kernel {s['kernel_updates_per_second']:.3g} updates/s, whole record step "
          f"{s['record_step_updates_per_second']:.3g} updates/s, acceptance {s['acceptance']:.3f}")
    for eps in args.problems.split(","):
        rows = [da_run(eps, args.draws, args.chains, args.warmup, args.seed), smc_run(eps, args.seed)]
        if eps in args.sppe_problems.split(","):
            rows.append(sppe_run(eps, args.seed, args.sppe_simulations, args.sppe_rounds))
        out["linreg_ju"][eps] = rows
        for r in rows:
            print(f"linreg-ju eps {eps:>4} {r['method']:<8} {r['seconds']:7.1f} s  ESS(worst) "
                  f"{np.min(r['ess']):8.0f}  ESS/s {r['ess_per_second_worst']:8.1f}  |mean-ref|/sd "
                  f"{r['max_abs_mean_dev_sd']:.3f}  |sd/ref-1| {r['max_abs_sd_ratio_minus_1']:.3f}")
        Path(args.out).write_text(json.dumps(out, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
