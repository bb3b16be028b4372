"""How far the old analysis (Gibbs-SS: continuous Laplace noise, CLT for the statistic) is from the exact
posterior of an integer-noise count release, at small n and small noise (docs/expfam.md).

For each case a discrete-Laplace release is analysed twice: exactly (engine ``exact``, which knows the
noise is integer and the statistic a count) and as the old engines had to, pretending the noise is
continuous Laplace of the same scale (Gibbs-SS, Bernstein & Sheldon Algorithm 1/2 with the CLT).  The
released value is the one the data most often give (s = round(n * theta) with theta the prior mean,
plus 0 noise), so the table is deterministic apart from Monte Carlo error (20,000 draws each).

    python benchmarks/clt_vs_exact.py [--out FILE] [--update-results]   # prints the table, writes clt_vs_exact.json

(to a scratch folder, or with --update-results to the committed benchmarks/results/: benchmarks/_out.py)
"""

from __future__ import annotations

import argparse
import json

import numpy as np

import warnings

import dpposterior as dp
from _out import add_update_flag, out_path

warnings.simplefilter("ignore", dp.PosteriorWarning)

CASES = [("binomial", n, eps) for n in (5, 20, 100) for eps in (0.5, 2.0, 10.0)] + \
        [("poisson", n, eps) for n in (5, 20, 100) for eps in (0.5, 2.0, 10.0)]


def release(family, n, eps, mechanism):
    if family == "binomial":
        s = round(n * 0.3)
        return {"format": "dpposterior-release/1", "family": "binomial", "n": n,
                "statistics": {"successes": {"value": s, "mechanism": mechanism, "epsilon": eps}}}, \
            {"kind": "beta", "alpha": 3, "beta": 7}, "p"
    s = round(n * 2.0)
    return {"format": "dpposterior-release/1", "family": "poisson", "n": n, "bounds": [0, 6],
            "statistics": {"truncated_sum": {"value": s, "mechanism": mechanism, "epsilon": eps}}}, \
        {"kind": "gamma", "shape": 4, "rate": 2}, "rate"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    add_update_flag(ap)
    args = ap.parse_args()
    out = out_path(args.out, "clt_vs_exact.json", args.update_results)
    rows = []
    for family, n, eps in CASES:
        rel, prior, var = release(family, n, eps, "discrete-laplace")
        exact = dp.infer(rel, prior=prior, method="exact", seed=1).draws(var)
        old_rel, _, _ = release(family, n, eps, "laplace")
        old = dp.infer(old_rel, prior=prior, method="gibbs-ss", seed=1).draws(var)
        row = {"family": family, "n": n, "epsilon": eps, "exact_mean": float(exact.mean()), "exact_sd": float(exact.std()),
               "old_mean": float(old.mean()), "old_sd": float(old.std()),
               "dmean_sd": float((old.mean() - exact.mean()) / exact.std()), "sd_ratio": float(old.std() / exact.std())}
        rows.append(row)
        print(f"| {family} | {n} | {eps:g} | {row['exact_mean']:.4f} ± {row['exact_sd']:.4f} | "
              f"{row['old_mean']:.4f} ± {row['old_sd']:.4f} | {row['dmean_sd']:+.3f} | {row['sd_ratio']:.3f} |",
              flush=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
