"""Sec. 5.1 of Alparslan, Yildirim & Birbil: estimation and prediction MSE vs epsilon (Figure 2).

Data per repeat: theta ~ N(0, I_d), Sigma_x ~ IW(Lambda, kappa) with kappa = d + 1 and Lambda = V'V
(V iid N(0, 1), drawn once per d), x_i ~ N(0, Sigma_x), sigma_y^2 = 1, n = 1e5 rows split in order
over J parties; ||X||, ||Y|| = maxima over the data set; delta = 1/n.  Prior a = 20, b = 0.5,
m = 0, C = b/(a-1) I, and the same Lambda, kappa.  Each (d, J, eps) cell: R repeats with fresh
noise (the paper: 50; default here 10), MCMC with 1000 warm-up + 2000 kept iterations (paper: 1e4 in all).

Estimation MSE = mean over repeats of ||theta_hat - theta||^2 / d; prediction MSE = mean over
repeats and 1000 test rows of (x'theta_hat - x'theta)^2 (noise-free target, which is what the
paper's non-private values 9.6e-5 / 4.2e-5 imply).

    python benchmarks/linreg_simulated.py [--repeats 10] [--iters 2000] [--warmup 1000] [--d 2 5] [--J 1 5 10]
        [--calibration analytic|authors]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
from scipy import stats

sys.path.insert(0, str(Path(__file__).parent))
from _linreg_bench import METHODS, party_stats, run_all  # noqa: E402

from dpposterior.families.linear_regression import LinRegPrior  # noqa: E402

EPSILONS = (0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0)


def main(argv=None):
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--d", type=int, nargs="+", default=[2, 5])
    ap.add_argument("--J", type=int, nargs="+", default=[1, 5, 10])
    ap.add_argument("--eps", type=float, nargs="+", default=list(EPSILONS))
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=1000)
    ap.add_argument("--calibration", choices=["analytic", "authors"], default="analytic",
                    help="sigma(eps, delta): Balle & Wang's analytic Gaussian (default) or the authors' code's "
                         "smaller value (not DP; only to compare with the paper's numbers)")
    ap.add_argument("--seed", type=int, default=2023)
    ap.add_argument("--out", type=Path, default=None)
    add_update_flag(ap)
    args = ap.parse_args(argv)
    args.out = out_path(args.out, "linreg_simulated.json", args.update_results)
    results = []
    root = np.random.SeedSequence(args.seed)
    t_start = time.time()
    for d in args.d:
        rng_d = np.random.default_rng(root.spawn(1)[0])
        V = rng_d.standard_normal((d, d))
        Lam = V.T @ V
        kappa = d + 1.0
        a, b = 20.0, 0.5
        prior = LinRegPrior(theta_mean=np.zeros(d), theta_cov=b / (a - 1) * np.eye(d), a=a, b=b, iw_scale=Lam,
                            iw_df=kappa)
        # data sets are shared across (J, eps) cells of the same d, like the paper's fixed data per run
        R = args.repeats
        data = []
        for r in range(R):
            rng = np.random.default_rng(root.spawn(1)[0])
            theta = rng.standard_normal(d)
            sig_x = np.atleast_2d(stats.invwishart.rvs(df=kappa, scale=Lam, random_state=rng))
            X = rng.multivariate_normal(np.zeros(d), sig_x, size=args.n)
            y = X @ theta + rng.standard_normal(args.n)
            Xt = rng.multivariate_normal(np.zeros(d), sig_x, size=1000)
            data.append((theta, X, y, Xt))
        theta = np.stack([t for t, *_ in data])
        x_norm = np.array([np.max(np.linalg.norm(X, axis=1)) for _, X, _, _ in data])
        y_abs = np.array([np.max(np.abs(y)) for _, _, y, _ in data])
        # non-private reference: least squares (the posterior mean with exact statistics)
        ols = np.stack([np.linalg.lstsq(X, y, rcond=None)[0] for _, X, y, _ in data])
        np_est = float(np.mean(np.sum((ols - theta) ** 2, 1) / d))
        np_pred = float(np.mean([np.mean((Xt @ (o - t)) ** 2) for (t, _, _, Xt), o in zip(data, ols)]))
        print(f"d={d}: non-private estimation MSE {np_est:.3g}, prediction MSE {np_pred:.3g} "
              f"(paper: {'2.92e-5, 9.60e-5' if d == 2 else '1.54e-5, 4.19e-5'})", flush=True)
        for J in args.J:
            stats_ = [party_stats(X, y, J) for _, X, y, _ in data]
            S = np.stack([s[0] for s in stats_])
            z = np.stack([s[1] for s in stats_])
            u = np.stack([s[2] for s in stats_])
            n_j = stats_[0][3]
            for eps in args.eps:
                rng = np.random.default_rng(root.spawn(1)[0])
                timings = {}
                est = run_all(S, z, u, n_j, x_norm, y_abs, eps, 1.0 / args.n, prior, rng, args.iters,
                              args.warmup, timings=timings,
                              calibration=args.calibration)
                row = {"d": d, "J": J, "eps": eps, "repeats": R}
                for m, th in est.items():
                    row[f"est_{m}"] = float(np.mean(np.sum((th - theta) ** 2, 1) / d))
                    row[f"pred_{m}"] = float(np.mean([np.mean((Xt @ (h - t)) ** 2)
                                                      for (t, _, _, Xt), h in zip(data, th)]))
                row["seconds"] = timings
                results.append(row)
                print(f"d={d} J={J:2d} eps={eps:5.1f} | est " + " ".join(f"{m}={row['est_' + m]:.2e}" for m in METHODS)
                      + " | pred " + " ".join(f"{m}={row['pred_' + m]:.2e}" for m in METHODS), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                                    "results": results}, indent=1))
    summarize(results)
    print(f"total {time.time() - t_start:.0f} s; wrote {args.out}")


def summarize(results):
    """Average rank of each method (1 = smallest MSE) over the cells, per d: Figure 2's ordering."""
    for d in sorted({r["d"] for r in results}):
        for kind in ("est", "pred"):
            ranks = {m: [] for m in METHODS}
            wins_nx_bs = 0
            cells = [r for r in results if r["d"] == d]
            for r in cells:
                vals = sorted(METHODS, key=lambda m: r[f"{kind}_{m}"])
                for i, m in enumerate(vals):
                    ranks[m].append(i + 1)
                wins_nx_bs += r[f"{kind}_MCMC-normalX"] < r[f"{kind}_MCMC-B&S"]
            print(f"d={d} {kind}: mean rank " + ", ".join(f"{m} {np.mean(v):.2f}" for m, v in ranks.items())
                  + f"; normalX beats B&S in {wins_nx_bs}/{len(cells)} cells")


if __name__ == "__main__":
    main()
