"""The ``marginals`` family's ``clt`` engine (central-limit likelihood) against its exact engine ``da`` on the
same releases, as the number of records grows: the approximation's error in every clique cell's posterior mean
(in units of the exact posterior sd) and sd.

Releases: ``families.marginals.simulate`` on the simulation domain (a: 2, b: 3, c: 2; the (a, b) and (b, c) tables
measured), a hyper-Dirichlet prior of concentration 4, discrete Gaussian noise at rho (default 0.05 in all: sigma
6.3 per cell).  Both engines: 4 chains x 2,000 draws after their default warm-ups, the same seed.  The Monte Carlo
error of a difference of means is given beside it (batch means, both chains' errors combined), so an error above
it is the approximation's.

    python benchmarks/marginals_clt_error.py            # n = 300, 3,000, 30,000; seeds 3, 4, 5
"""

from __future__ import annotations

import argparse
import json
import math
import time
import warnings

import numpy as np


def batch_means(x, batches: int = 20):
    x = np.asarray(x, float)
    chains, draws = x.shape[:2]
    b = x[:, : draws // batches * batches].reshape(chains, batches, draws // batches, *x.shape[2:]).mean(axis=2)
    b = b.reshape(chains * batches, *x.shape[2:])
    return x.mean(axis=(0, 1)), b.std(axis=0, ddof=1) / math.sqrt(len(b)), x.std(axis=(0, 1))


def one(n: int, rho: float, seed: int, draws: int) -> dict:
    from dpposterior import infer
    from dpposterior.families import marginals as fm

    prior = {"kind": "hyper-dirichlet", "concentration": 4.0}
    rel = fm.simulate(fm.parse_prior(prior), n, None, np.random.default_rng(seed), mechanism="discrete-gaussian",
                      rho=rho).release
    a = infer(rel, method="clt", seed=seed, draws=draws, prior=prior)
    b = infer(rel, method="da", seed=seed, draws=draws, prior=prior)
    err, mc, ratio = [], [], []
    for name in a.posterior:
        (ma, ea, sa), (mb, eb, sb) = batch_means(a.posterior[name]), batch_means(b.posterior[name])
        err.append(np.abs(ma - mb).ravel() / sb.ravel())
        mc.append(np.sqrt(ea ** 2 + eb ** 2).ravel() / sb.ravel())
        ratio.append((sa / sb).ravel())
    err, mc, ratio = np.concatenate(err), np.concatenate(mc), np.concatenate(ratio)
    return {"n": n, "rho": rho, "seed": seed, "sigma": rel["measurements"][0]["sigma"],
            "max_mean_error_sd": float(err.max()), "mc_error_sd_at_max": float(mc[err.argmax()]),
            "median_mean_error_sd": float(np.median(err)), "sd_ratio_min": float(ratio.min()),
            "sd_ratio_max": float(ratio.max())}


def main(argv=None) -> None:
    from _out import add_update_flag, loadavg, out_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, nargs="+", default=[300, 3000, 30000])
    ap.add_argument("--seeds", type=int, nargs="+", default=[3, 4, 5])
    ap.add_argument("--rho", type=float, default=0.05)
    ap.add_argument("--draws", type=int, default=2000)
    ap.add_argument("--out", default=None)
    add_update_flag(ap)
    args = ap.parse_args(argv)
    warnings.simplefilter("ignore")
    out = out_path(args.out, "marginals_clt_error.json", args.update_results)
    rows, load0, t0 = [], loadavg(), time.time()
    for n in args.n:
        for seed in args.seeds:
            rows.append(one(n, args.rho, seed, args.draws))
            print(json.dumps(rows[-1]), flush=True)
    doc = {"rows": rows, "loadavg": [load0, loadavg()], "seconds": time.time() - t0}
    out.write_text(json.dumps(doc, indent=1))
    print("| n | sigma | max \\|Δmean\\| / sd (MC error there) | median | sd ratio |")
    print("|---|---|---|---|---|")
    for n in args.n:
        rs = [r for r in rows if r["n"] == n]
        print(f"| {n:,} | {rs[0]['sigma']:.1f} | " + ", ".join(f"{r['max_mean_error_sd']:.3f} ({r['mc_error_sd_at_max']:.3f})"
                                                           for r in rs)
              + " | " + ", ".join(f"{r['median_mean_error_sd']:.3f}" for r in rs)
              + f" | {min(r['sd_ratio_min'] for r in rs):.2f}-{max(r['sd_ratio_max'] for r in rs):.2f} |")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
