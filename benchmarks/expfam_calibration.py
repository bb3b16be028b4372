"""Figure 1a/1b of Bernstein & Sheldon (NeurIPS 2018): calibration of Gibbs-SS vs baselines.

For binomial, multinomial and exponential models, n in {10, 100, 1000, 10000} and
eps in {0.01, 0.1}, runs ``dpposterior.diagnostics.calibration.calibrate`` and prints
the KS statistic per method (Fig. 1a), coverage and MMD (Fig. 1c); writes the
rank-ECDF plots at n = 1000, eps = 0.01 (Fig. 1b) and KS-vs-n plots to docs/img/,
and the numbers to benchmarks/results/expfam_calibration.json.  Also times one
binomial posterior (2,000 warm-up + 5,000 draws, one chain) and one 1,000-trial
binomial calibration cell.

    python benchmarks/expfam_calibration.py                # paper scale: 1,000 trials per cell
    python benchmarks/expfam_calibration.py --trials 200   # reduced
    python benchmarks/expfam_calibration.py --timing-only
    python benchmarks/expfam_calibration.py --exact-only   # Gibbs-SS vs the exact binomial posterior

Monte Carlo noise of the KS statistic with M trials: under uniformity KS exceeds
1.36/sqrt(M) with probability 5% (1.63/sqrt(M): 1%), e.g. 0.043 / 0.052 for M = 1000.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dpposterior import infer  # noqa: E402
from dpposterior.diagnostics.calibration import calibrate, plot_rank_ecdf  # noqa: E402

FAMILIES = {
    "binomial": ["gibbs-ss", "naive", "non-private", "ops"],
    "multinomial": ["gibbs-ss", "naive", "non-private"],
    "exponential": ["gibbs-ss", "naive", "non-private"],
    "poisson": ["gibbs-ss", "naive", "non-private"],  # beyond the paper; run with --families poisson
}
PAPER_FAMILIES = ["binomial", "multinomial", "exponential"]
NS = [10, 100, 1000, 10000]
EPSILONS = [0.01, 0.1]


def timing(repeats: int = 20) -> dict:
    release = {"format": "dpposterior-release/1", "family": "binomial", "n": 100,
               "statistics": {"successes": {"value": 37.2, "mechanism": "laplace", "epsilon": 0.1}}}
    infer(release, seed=0, chains=1, warmup=2000, draws=5000)  # compile / load the numba cache
    times = []
    for i in range(repeats):
        t0 = time.perf_counter()
        infer(release, seed=i, chains=1, warmup=2000, draws=5000)
        times.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    calibrate("binomial", 100, 0.1, 1000, ["gibbs-ss"], seed=0, scheduler="serial", chunk=1000)
    cell_gibbs = time.perf_counter() - t0
    t0 = time.perf_counter()
    calibrate("binomial", 100, 0.1, 1000, FAMILIES["binomial"], seed=0, scheduler="serial", chunk=1000)
    cell_all = time.perf_counter() - t0
    return {"one_posterior_median_s": float(np.median(times)), "one_posterior_max_s": float(np.max(times)),
            "cell_1000_gibbs_s": cell_gibbs, "cell_1000_all_methods_s": cell_all}


def exact_check(ns=(10, 30, 100, 300, 1000, 10000), epsilons=(0.1, 1.0), seed=0) -> list[dict]:
    """Gibbs-SS vs the exact binomial posterior (Beta mixture over the n + 1 true counts with
    Laplace weights), as KS distance between the draws' ECDF and the exact CDF.  The
    Monte Carlo floor is the mean KS distance of ESS i.i.d. exact draws, ~0.87/sqrt(ESS)."""
    import arviz as az
    from scipy import special, stats

    rows = []
    for eps in epsilons:
        for n in ns:
            y = 0.3 * n
            release = {"format": "dpposterior-release/1", "family": "binomial", "n": n,
                       "statistics": {"successes": {"value": y, "mechanism": "laplace", "epsilon": eps}}}
            post = infer(release, seed=seed, chains=4, warmup=2000, draws=5000)
            draws = np.sort(post.draws("p"))
            s = np.arange(n + 1)
            logw = stats.betabinom.logpmf(s, n, 1.0, 1.0) - np.abs(y - s) * eps
            w = np.exp(logw - logw.max())
            w /= w.sum()
            cdf = np.zeros(len(draws))
            for start in range(0, n + 1, 500):  # chunks keep the (draws x counts) matrix small
                sl = slice(start, start + 500)
                cdf += (w[sl][None, :] * special.betainc(1.0 + s[sl][None, :], 1.0 + n - s[sl][None, :],
                                                         draws[:, None])).sum(axis=1)
            m = len(draws)
            ks = float(max(np.max(np.arange(1, m + 1) / m - cdf), np.max(cdf - np.arange(m) / m)))
            ess = float(az.ess(post.to_arviz(), var_names=["p"])["p"])
            rows.append({"n": n, "epsilon": eps, "ks": ks, "ess": ess, "floor": 0.87 / math.sqrt(ess)})
            print(f"exact check  n={n:>6} eps={eps:<4g} KS(Gibbs-SS, exact) = {ks:.4f}   "
                  f"MC floor ~ {0.87 / math.sqrt(ess):.4f} (ESS {ess:.0f})")
            sys.stdout.flush()
    return rows


def main(argv=None) -> int:
    from _out import add_update_flag, img_dir, out_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000)
    ap.add_argument("--families", default=",".join(PAPER_FAMILIES))
    ap.add_argument("--ns", default=",".join(map(str, NS)))
    ap.add_argument("--epsilons", default=",".join(map(str, EPSILONS)))
    ap.add_argument("--scheduler", default="serial")
    ap.add_argument("--seed", type=int, default=2018)
    ap.add_argument("--out", default=None)
    ap.add_argument("--img", default=None)
    add_update_flag(ap)
    ap.add_argument("--timing-only", action="store_true")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--exact-only", action="store_true", help="only the exact binomial check")
    args = ap.parse_args(argv)
    args.out = str(out_path(args.out, "expfam_calibration.json", args.update_results))
    args.img = args.img or str(img_dir(args.update_results))
    if args.exact_only:
        exact_check()
        return 0

    t = timing() if not args.no_timing else {}
    if t:
        print(f"one binomial posterior (2000 warm-up + 5000 draws, 1 chain): median {t['one_posterior_median_s'] * 1e3:.1f} ms"
          f" (max {t['one_posterior_max_s'] * 1e3:.1f} ms; target < 50 ms)")
        print(f"1,000-trial binomial cell, n=100, eps=0.1: gibbs-ss only {t['cell_1000_gibbs_s']:.1f} s, "
              f"with naive+non-private+ops {t['cell_1000_all_methods_s']:.1f} s (target < 30 s)")
    if args.timing_only:
        return 0

    families = args.families.split(",")
    ns = [int(v) for v in args.ns.split(",")]
    epsilons = [float(v) for v in args.epsilons.split(",")]
    crit5, crit1 = 1.36 / math.sqrt(args.trials), 1.63 / math.sqrt(args.trials)
    print(f"\n{args.trials} trials per cell; KS critical values 5%: {crit5:.3f}, 1%: {crit1:.3f}")
    rows, ecdf = [], {}
    header = f"{'family':<12}{'n':>6}{'eps':>6}  " + "".join(f"{m:>12}" for m in ["gibbs-ss", "non-private", "naive", "ops"])
    print(header + "   (KS statistic)   gibbs-ss mmd  naive mmd   s/cell")
    for family in families:
        for eps in epsilons:
            for n in ns:
                t0 = time.perf_counter()
                res = calibrate(family, n, eps, args.trials, FAMILIES[family], seed=args.seed,
                                scheduler=args.scheduler, return_ranks=(n == 1000 and eps == 0.01))
                elapsed = time.perf_counter() - t0
                ranks = res.pop("_ranks", None)
                if ranks is not None:
                    ecdf[family] = {m: u[:, 0] for m, u in ranks.items()}
                m = res["methods"]
                ks = {k: m[k]["ks"] if k in m else float("nan") for k in ["gibbs-ss", "non-private", "naive", "ops"]}
                print(f"{family:<12}{n:>6}{eps:>6g}  " + "".join(f"{ks[k]:>12.3f}" for k in ks)
                      + f"   {m['gibbs-ss']['mmd']:>16.4f} {m['naive']['mmd']:>10.4f} {elapsed:>8.1f}")
                sys.stdout.flush()
                rows.append({**res, "seconds": elapsed})
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"trials": args.trials, "timing": t, "cells": rows}, indent=1))
    print(f"wrote {args.out}")
    _plots(rows, ecdf, Path(args.img), args.trials)
    return 0


def _plots(rows, ecdf, img: Path, trials: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    img.mkdir(parents=True, exist_ok=True)
    if ecdf:
        fig, axes = plt.subplots(1, len(ecdf), figsize=(4.3 * len(ecdf), 4.2), squeeze=False)
        for ax, (family, ranks) in zip(axes[0], ecdf.items()):
            plot_rank_ecdf(ranks, None, title=f"{family}, n=1000, eps=0.01", ax=ax)
        fig.tight_layout()
        fig.savefig(img / "expfam_ecdf.png", dpi=100)
        plt.close(fig)
        print(f"wrote {img / 'expfam_ecdf.png'}")
    families = sorted({r["family"] for r in rows}, key=list(FAMILIES).index)
    epsilons = sorted({r["epsilon"] for r in rows})
    fig, axes = plt.subplots(len(epsilons), len(families), figsize=(4 * len(families), 3.2 * len(epsilons)),
                             squeeze=False)
    for i, eps in enumerate(epsilons):
        for j, family in enumerate(families):
            ax = axes[i][j]
            cells = sorted([r for r in rows if r["family"] == family and r["epsilon"] == eps], key=lambda r: r["n"])
            for method in FAMILIES[family]:
                ax.plot([c["n"] for c in cells], [c["methods"][method]["ks"] for c in cells], marker="o", label=method)
            ax.axhline(1.36 / math.sqrt(trials), color="0.5", ls=":", lw=1, label="5% critical value")
            ax.set_xscale("log")
            ax.set_title(f"{family}, eps={eps:g}", fontsize=9)
            ax.set_xlabel("n")
            ax.set_ylabel("KS statistic")
            ax.set_ylim(0, 1)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(img / "expfam_ks.png", dpi=100)
    plt.close(fig)
    print(f"wrote {img / 'expfam_ks.png'}")


if __name__ == "__main__":
    raise SystemExit(main())
