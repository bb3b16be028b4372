"""Seconds per iteration vs d for MCMC-normalX, MCMC-fixedS and MCMC-B&S (Alparslan et al. Fig. 3).

One chain, J data holders (default 1), n = 1e4 rows of x ~ N(0, I_d), eps = 1, delta = 1/n.
Each sampler runs a few warm-up iterations (not timed), then ``--iters`` timed iterations (B&S: 20)
three times, keeping the fastest; B&S at d = 50 runs ``--bs-iters-large`` iterations once (its per-iteration cost is O(d^6):
at d = 50 the normal approximation is over D = 1326 coordinates).  Slopes are least-squares
fits of log(seconds/iteration) on log(d), over all d and over d >= 10 (at small d numpy's
per-call overhead, not the flops, dominates).

    python benchmarks/linreg_scaling.py [--d 2 5 10 20 50] [--iters 20] [--J 1]
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
from _linreg_bench import sym_noise  # noqa: E402

from dpposterior.families.linear_regression import LinRegPrior  # noqa: E402
from dpposterior.inference.linreg_bs import Layout, run_bs  # noqa: E402
from dpposterior.inference.linreg_common import nearest_psd  # noqa: E402
from dpposterior.inference.linreg_fixeds import run_fixeds  # noqa: E402
from dpposterior.inference.linreg_normalx import run_normalx, start_s  # noqa: E402
from dpposterior.mechanisms import analytic_sigma  # noqa: E402


def timed(fn, iters, warm=2, repeats=3):
    """Best of ``repeats`` timings of ``iters`` iterations (the machine is shared: the minimum is
    the least disturbed measurement), in seconds per iteration."""
    fn(warm)
    best = math.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(iters)
        best = min(best, (time.perf_counter() - t0) / iters)
    return best


def main(argv=None):
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser()
    ap.add_argument("--d", type=int, nargs="+", default=[2, 5, 10, 20, 50])
    ap.add_argument("--J", type=int, default=1)
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--bs-iters-large", type=int, default=3)
    ap.add_argument("--bs-max-d", type=int, default=50, help="skip B&S above this d")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", type=Path, default=None)
    add_update_flag(ap)
    args = ap.parse_args(argv)
    args.out = out_path(args.out, "linreg_scaling.json", args.update_results)
    rng = np.random.default_rng(args.seed)
    rows = []
    for d in args.d:
        X = rng.standard_normal((args.n, d))
        theta = rng.standard_normal(d)
        y = X @ theta + rng.standard_normal(args.n)
        idx = np.array_split(np.arange(args.n), args.J)
        S = np.stack([X[i].T @ X[i] for i in idx])[None]
        z = np.stack([X[i].T @ y[i] for i in idx])[None]
        u = np.array([[y[i] @ y[i] for i in idx]])
        n_j = np.array([len(i) for i in idx], float)
        xn, ya = float(np.max(np.linalg.norm(X, axis=1))), float(np.max(np.abs(y)))
        sig = analytic_sigma(1.0, 1.0 / args.n, math.sqrt(xn ** 4 + xn ** 2 * ya ** 2))
        Shat = S + sym_noise(rng, S.shape, np.full((1, args.J), sig))
        zhat = z + sig * rng.standard_normal(z.shape)
        prior = LinRegPrior(theta_mean=np.zeros(d), theta_cov=0.5 / 19 * np.eye(d), iw_scale=np.eye(d),
                            iw_df=d + 1.0)
        s2 = np.array([0.5 / 19])
        th0 = np.zeros((1, d))
        sz2 = np.full((1, args.J), sig ** 2)
        row = {"d": d}
        row["MCMC-fixedS"] = timed(lambda k: run_fixeds(nearest_psd(Shat), zhat, sz2, prior, k, 0, rng, th0, s2),
                                   args.iters)
        row["MCMC-normalX"] = timed(lambda k: run_normalx(Shat, zhat, n_j, sz2, sz2, prior, k, 0, rng, th0, s2,
                                                          start_s(Shat)), args.iters)
        if d <= args.bs_max_d:
            layout = Layout(d, False, True)
            obs = layout.observed_values(Shat, zhat, u + sig * rng.standard_normal(u.shape))
            noise = layout.noise_var(sz2, sz2, sz2)
            sig0 = nearest_psd(Shat.sum(1)) / args.n + 1e-6 * np.eye(d)
            k_bs = min(args.iters, 20) if d < 50 else args.bs_iters_large
            row["MCMC-B&S"] = timed(lambda k: run_bs(layout, obs, n_j, noise, prior, k, 0, rng, th0, s2, sig0, None),
                                    k_bs, warm=1, repeats=3 if d < 50 else 1)
            row["B&S_D"] = layout.D
        rows.append(row)
        print(f"d={d:3d}  " + "  ".join(f"{m}={row[m]:.3e} s/it" for m in ("MCMC-normalX", "MCMC-fixedS", "MCMC-B&S")
                                          if m in row), flush=True)
    slopes = {}
    for m in ("MCMC-normalX", "MCMC-fixedS", "MCMC-B&S"):
        pts = [(r["d"], r[m]) for r in rows if m in r]
        for label, sel in (("all d", pts), ("d >= 10", [p for p in pts if p[0] >= 10])):
            if len(sel) >= 2:
                ld = np.log([p[0] for p in sel])
                lt = np.log([p[1] for p in sel])
                slopes[f"{m} ({label})"] = float(np.polyfit(ld, lt, 1)[0])
    for k, v in slopes.items():
        print(f"log-log slope {k}: {v:.2f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"args": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
                                    "rows": rows, "slopes": slopes}, indent=1))


if __name__ == "__main__":
    main()
