"""Real data of Alparslan, Yildirim & Birbil (Sec. 5.2, Table 1): prediction MSE at epsilon = 1.

Preprocessing exactly as ../shared/data/uci/README.md describes the authors' code: no header,
right-most column is y; NaN -> 0 (air_quality's empty trailing columns and comma-only lines are
dropped, giving 9357 x 13); first ceil(0.8 n) rows train, rest test, no shuffling; every feature
z-scored over all rows (sample sd); y centred by its mean over all rows and divided by its max |.|;
||X|| = max training row norm, ||Y|| = max training |y|, delta = 1/n_train; training rows to J
parties in order; prior a = 20, b = 0.5, m = 0, C = b/(a-1) I (Lambda = I, kappa = d + 1 for
MCMC-normalX / MCMC-B&S, which the paper does not state for real data).  Prediction MSE =
mean (y_test - x_test' theta_hat)^2, theta_hat = posterior mean (adaSSP: its estimate),
averaged over R runs with fresh noise (paper: 50).  The loader is the gallery's
(``dpposterior.gallery.alparslan.load_uci``): one preparation for both.

    python benchmarks/linreg_uci.py [--repeats 10] [--iters 1000] [--warmup 500] [--J 1 5 10] [--calibration analytic|authors]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from _linreg_bench import METHODS, party_stats, run_all  # noqa: E402

from dpposterior.families.linear_regression import LinRegPrior  # noqa: E402
from dpposterior.gallery.alparslan import UCI_FILES as FILES, load_uci, uci_data_dir  # noqa: E402

#: the paper's Table 1 (epsilon = 1), columns in METHODS order
TABLE1 = {
    (1, "PowerPlant"): (0.0129, 0.0129, 0.0129, 0.0128, 0.0139),
    (1, "BikeSharing"): (0.0024, 0.0021, 0.0021, 0.0020, 0.0107),
    (1, "AirQuality"): (0.0060, 0.0057, 0.0057, 0.0062, 0.0066),
    (5, "PowerPlant"): (0.0133, 0.0134, 0.0134, 0.0136, 0.0235),
    (5, "BikeSharing"): (0.0174, 0.0045, 0.0045, 0.0086, 0.0382),
    (5, "AirQuality"): (0.0142, 0.0100, 0.0099, 0.0130, 0.0227),
    (10, "PowerPlant"): (0.0142, 0.0143, 0.0143, 0.0143, 0.0351),
    (10, "BikeSharing"): (0.0812, 0.0082, 0.0082, 0.0137, 0.0526),
    (10, "AirQuality"): (0.0985, 0.0117, 0.0117, 0.0216, 0.0314),
}


def main(argv=None):
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser()
    ap.add_argument("--data", type=Path, default=uci_data_dir())
    ap.add_argument("--sets", nargs="+", default=list(FILES))
    ap.add_argument("--J", type=int, nargs="+", default=[1, 5, 10])
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    ap.add_argument("--iters", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--calibration", choices=["analytic", "authors"], default="analytic",
                    help="sigma(eps, delta): Balle & Wang's analytic Gaussian (default) or the authors' code's "
                         "smaller value (not DP; only to compare with the paper's numbers)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", type=Path, default=None)
    add_update_flag(ap)
    args = ap.parse_args(argv)
    args.out = out_path(args.out, "linreg_uci.json", args.update_results)
    if not args.data.exists():
        print(f"UCI data not found at {args.data}; skipping")
        return
    root = np.random.SeedSequence(args.seed)
    results = []
    t_start = time.time()
    for name in args.sets:
        Xtr, ytr, Xte, yte = load_uci(name, args.data)
        d = Xtr.shape[1]
        x_norm = float(np.max(np.linalg.norm(Xtr, axis=1)))
        y_abs = float(np.max(np.abs(ytr)))
        delta = 1.0 / len(ytr)
        a, b = 20.0, 0.5
        prior = LinRegPrior(theta_mean=np.zeros(d), theta_cov=b / (a - 1) * np.eye(d), a=a, b=b,
                            iw_scale=np.eye(d), iw_df=d + 1.0)
        ols = np.linalg.lstsq(Xtr, ytr, rcond=None)[0]
        print(f"{name}: n_train={len(ytr)} d={d} ||X||={x_norm:.3g} ||Y||={y_abs:.3g}; "
              f"non-private least-squares test MSE {np.mean((yte - Xte @ ols) ** 2):.4f}", flush=True)
        for J in args.J:
            S, z, u, n_j = party_stats(Xtr, ytr, J)
            R = args.repeats
            rng = np.random.default_rng(root.spawn(1)[0])
            timings = {}
            est = run_all(np.broadcast_to(S, (R,) + S.shape).copy(), np.broadcast_to(z, (R,) + z.shape).copy(),
                          np.broadcast_to(u, (R,) + u.shape).copy(), n_j, np.full(R, x_norm), np.full(R, y_abs),
                          args.eps, delta, prior, rng, args.iters, args.warmup, methods=tuple(args.methods),
                          timings=timings,
                              calibration=args.calibration)
            row = {"set": name, "J": J, "repeats": R, "seconds": timings}
            for m, th in est.items():
                mse = np.mean((yte[None, :] - th @ Xte.T) ** 2, axis=1)
                row[m] = float(mse.mean())
                row[m + "_se"] = float(mse.std(ddof=1) / math.sqrt(R)) if R > 1 else float("nan")
            results.append(row)
            paper = TABLE1.get((J, name))
            print(f"J={J:2d} {name:12s} ours:  " + "  ".join(f"{m}={row[m]:.4f}" for m in METHODS if m in row),
                  flush=True)
            if paper:
                print(f"J={J:2d} {name:12s} paper: " + "  ".join(f"{m}={v:.4f}" for m, v in zip(METHODS, paper)
                                                             if m in row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                                    "results": results}, indent=1))
    print(f"total {time.time() - t_start:.0f} s; wrote {args.out}")


if __name__ == "__main__":
    main()
