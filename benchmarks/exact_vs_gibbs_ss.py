"""Engine ``exact`` vs Gibbs-SS on Laplace count releases: accuracy against the exact posterior
and min-ESS per second, side by side, each run in a fresh process, methods interleaved, 3 seeds.

The reference is the exact engine itself at 400,000 draws (the engine is validated against brute-force
enumeration in tests/test_exact_counts.py).  Accuracy: |mean - mean_ref| / sd_ref and sd / sd_ref - 1.
Speed: bulk ESS (min over variables; iid draws of `exact` have ESS ~ draws) over the wall time of the
`infer` call, first call in the process (numba cache populated).

    python benchmarks/exact_vs_gibbs_ss.py [--out FILE] [--update-results]   # writes exact_vs_gibbs_ss.json

(to a scratch folder, or with --update-results to the committed benchmarks/results/: benchmarks/_out.py)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

from _out import add_update_flag, out_path

CASES = {
    "binomial n=30 eps=0.5": ({"format": "dpposterior-release/1", "family": "binomial", "n": 30,
                               "statistics": {"successes": {"value": 11.6, "mechanism": "laplace", "epsilon": 0.5}}},
                              {"kind": "beta", "alpha": 2, "beta": 3}, "p"),
    "binomial n=1000 eps=0.1": ({"format": "dpposterior-release/1", "family": "binomial", "n": 1000,
                                 "statistics": {"successes": {"value": 312.4, "mechanism": "laplace", "epsilon": 0.1}}},
                                {"kind": "beta", "alpha": 1, "beta": 1}, "p"),
    "poisson n=20 [0,8] eps=1": ({"format": "dpposterior-release/1", "family": "poisson", "n": 20, "bounds": [0, 8],
                                  "statistics": {"truncated_sum": {"value": 60.3, "mechanism": "laplace",
                                                                   "epsilon": 1.0}}},
                                 {"kind": "gamma", "shape": 2, "rate": 0.5}, "rate"),
    "poisson n=200 [0,10] eps=0.5": ({"format": "dpposterior-release/1", "family": "poisson", "n": 200,
                                      "bounds": [0, 10], "statistics": {"truncated_sum": {
                                          "value": 702.0, "mechanism": "laplace", "epsilon": 0.5}}},
                                     {"kind": "gamma", "shape": 2, "rate": 0.5}, "rate"),
}

CHILD = r"""
import json, sys, time
import numpy as np
release, prior, var, method, seed, draws = json.loads(sys.argv[1])
import dpposterior
try:
    from dpposterior.convergence import ess_bulk
except ImportError:  # an older dpposterior without its own R-hat/ESS
    import arviz
    def ess_bulk(x):
        return float(arviz.ess(np.asarray(x), method="bulk"))
t = time.perf_counter()
post = dpposterior.infer(release, prior=prior, method=method, seed=seed, draws=draws)
wall = time.perf_counter() - t
x = post.posterior[var]
print(json.dumps({"wall": wall, "mean": float(x.mean()), "sd": float(x.std()), "ess": float(ess_bulk(x)),
                  "load": open("/proc/loadavg").read().split()[0]}))
"""


def run(args):
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(args)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    add_update_flag(ap)
    args = ap.parse_args()
    path = out_path(args.out, "exact_vs_gibbs_ss.json", args.update_results)
    rows = []
    for name, (release, prior, var) in CASES.items():
        ref = run([release, prior, var, "exact", 12345, 100000])
        for seed in (0, 1, 2):
            for method in ("exact", "gibbs-ss"):  # interleaved
                r = run([release, prior, var, method, seed, 5000])
                r.update(case=name, method=method, seed=seed, dmean=abs(r["mean"] - ref["mean"]) / ref["sd"],
                         dsd=r["sd"] / ref["sd"] - 1.0, ess_per_s=r["ess"] / r["wall"], ref_mean=ref["mean"],
                         ref_sd=ref["sd"])
                rows.append(r)
                print(f"{name:30s} {method:9s} seed {seed}  |dmean|/sd {r['dmean']:.3f}  sd err {r['dsd']:+.3f}  "
                      f"ESS {r['ess']:8.0f}  wall {r['wall']:.3f} s  ESS/s {r['ess_per_s']:9.0f}  load {r['load']}",
                      flush=True)
    path.write_text(json.dumps(rows, indent=1) + "\n")
    print("wrote", path)


if __name__ == "__main__":
    main()
