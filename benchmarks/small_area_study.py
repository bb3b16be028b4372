"""Small-area simulation evidence (the non-timing part): exact-da vs naive vs direct.

In repeated simulation from the model (``families.small_area.simulate``: theta from the prior, counts
y_gc ~ Poisson(E_g exp(alpha_c + u_g)), released with discrete-Gaussian noise of scale ``sigma``), each
trial is analysed three ways:

* ``exact-da``: ``dpposterior.infer(release, prior, method="exact-da")`` -- the noise-aware posterior;
* ``naive``: the same model with the noisy counts taken as true (negatives set to 0);
* ``direct``: each cell on its own, y*/E with variance (max(y*, 0) + Var(noise)) / E^2 and a normal
  interval clipped at 0 (``dpposterior.diagnostics.small_area.direct_estimate``).

Scores, over every rate of every trial: the coverage of the central 50% and 90% intervals of the true
rates (posterior quantiles; normal intervals for direct), their mean width, and the RMSE of the
posterior mean (direct: its estimate).  A trial's rates share parameters, so the Monte Carlo standard
error of a coverage is the sd of the per-trial coverages over sqrt(trials).  SBC (Talts et al. 2018):
the rank of the true alpha_c and tau among 99 draws thinned evenly from one chain of 99 x ``--thin``
(default 990, after ``--warmup`` 300), chi-square over 10 bins; the engines draw from the same prior the
truth came from.  The intervals and means use every draw of that chain.

    python benchmarks/small_area_study.py                 # 200 trials, G = 40, C = 2, sigma = 4
    python benchmarks/small_area_study.py --quick         # 30 trials
    python benchmarks/small_area_study.py --table         # the table of the saved results

Results: benchmarks/results/small_area_study.json (docs/benchmarks.md, "Small-area: coverage, RMSE, SBC").
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results" / "small_area_study.json"
METHODS = ("exact-da", "naive", "direct")
LEVELS = (0.5, 0.9)
KEEP = 99  # SBC: draws kept per trial (one chain of KEEP x --thin draws, evenly thinned)


def _loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().split(" ")[0]
    except OSError:
        return "?"


def trial(t: int, args, prior) -> dict:
    """One simulated table, analysed by the three methods: per method, per level, coverage and width;
    the RMSE; and (exact-da, naive) the SBC ranks of alpha_c and tau."""
    import dpposterior as dp
    from dpposterior.diagnostics.small_area import (direct_estimate, equal_tailed, interval_scores,
                                                    normal_interval, rate_draws, sbc_rank)
    from dpposterior.families.small_area import simulate
    from dpposterior.release import load_release

    rng = np.random.default_rng([args.seed, t])
    truth, release = simulate(prior, args.G, args.C, args.sigma, rng, exposure=rng.uniform(*args.exposure, size=args.G),
                              postprocessing=args.postprocessing)
    rel = load_release(release)
    out: dict = {}
    for method in METHODS[:2]:
        with warnings.catch_warnings():  # a study keeps every trial; the flags are counted, not printed
            warnings.simplefilter("ignore", dp.PosteriorWarning)
            post = dp.infer(rel, prior=prior.model_dump(exclude={"kind"}), method=method, seed=t,
                            draws=args.thin * KEEP, warmup=args.warmup, chains=1)
        draws = rate_draws(post)
        res = {"rmse": float(math.sqrt(np.mean((draws.mean(axis=0) - truth["rate"]) ** 2))),
               "flagged": bool(post.warnings)}
        for level in LEVELS:
            lo, hi = equal_tailed(draws, level)
            res[str(level)] = interval_scores(lo, hi, draws.mean(axis=0), truth["rate"])
        res["ranks"] = {**{f"alpha[{c}]": sbc_rank(post.posterior["alpha"][0, :, c], truth["alpha"][c], KEEP)
                           for c in range(args.C)},
                        "tau": sbc_rank(post.posterior["tau"][0], truth["tau"], KEEP)}
        out[method] = res
    point, sd = direct_estimate(rel)
    res = {"rmse": float(math.sqrt(np.mean((point - truth["rate"]) ** 2)))}
    for level in LEVELS:
        lo, hi = normal_interval(point, sd, level)
        res[str(level)] = interval_scores(lo, hi, point, truth["rate"])
    out["direct"] = res
    return out


def summarise(trials: list[dict]) -> dict:
    from dpposterior.diagnostics.small_area import sbc_pvalue

    T = len(trials)
    out = {}
    for m in METHODS:
        res: dict = {"rmse": float(np.mean([t[m]["rmse"] for t in trials]))}
        for level in LEVELS:
            cov = np.array([t[m][str(level)]["coverage"] for t in trials])
            res[str(level)] = {"coverage": float(cov.mean()), "coverage_se": float(cov.std(ddof=1) / math.sqrt(T)),
                               "width": float(np.mean([t[m][str(level)]["width"] for t in trials]))}
        if "flagged" in trials[0][m]:  # posteriors the checks flagged (ESS, R-hat): kept in every score
            res["flagged_trials"] = int(sum(t[m]["flagged"] for t in trials))
        if "ranks" in trials[0][m]:
            res["sbc_pvalue"] = {k: sbc_pvalue([t[m]["ranks"][k] for t in trials], KEEP)
                                 for k in trials[0][m]["ranks"]}
        out[m] = res
    return out


def table(result: dict) -> str:
    s = result["settings"]
    lines = [f"G = {s['G']}, C = {s['C']}, sigma = {s['sigma']}, exposures uniform on {s['exposure']}, "
             f"{s['trials']} trials, prior {s['prior']}, postprocessing {s['postprocessing']}, one chain of "
             f"{s['draws']} draws after {s['warmup']} warm-up", "",
             "| method | coverage 50% | coverage 90% | mean width 50% | mean width 90% | RMSE (rate) | "
             "SBC p alpha[0] | SBC p alpha[1] | SBC p tau | flagged trials |", "|---|---|---|---|---|---|---|---|---|---|"]
    for m, r in result["summary"].items():
        sbc = r.get("sbc_pvalue", {})
        lines.append(f"| {m} | {r['0.5']['coverage']:.3f} ± {r['0.5']['coverage_se']:.3f} | "
                     f"{r['0.9']['coverage']:.3f} ± {r['0.9']['coverage_se']:.3f} | {r['0.5']['width']:.3f} | "
                     f"{r['0.9']['width']:.3f} | {r['rmse']:.3f} | "
                     + " | ".join(f"{sbc[k]:.2g}" if k in sbc else "-" for k in ("alpha[0]", "alpha[1]", "tau"))
                     + f" | {r.get('flagged_trials', '-')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/_out.py, also when loaded by a test
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=200)
    ap.add_argument("--quick", action="store_true", help="30 trials")
    ap.add_argument("--G", type=int, default=40)
    ap.add_argument("--C", type=int, default=2)
    ap.add_argument("--sigma", type=float, default=4.0)
    ap.add_argument("--exposure", type=float, nargs=2, default=(2.0, 15.0))
    ap.add_argument("--postprocessing", default="none", choices=("none", "nonnegative"))
    ap.add_argument("--seed", type=int, default=2028)
    ap.add_argument("--thin", type=int, default=10, help="draws per chain = 99 x THIN (SBC keeps 99)")
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--out", type=Path, default=None, help="result file (--table: the one to read; default the committed one)")
    add_update_flag(ap)
    ap.add_argument("--table", action="store_true", help="print the table of the saved results and stop")
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads((args.out or RESULTS).read_text())))
        return 0
    args.out = out_path(args.out, RESULTS.name, args.update_results)
    if args.quick:
        args.trials = 30
    from dpposterior.families.small_area import SmallAreaPrior

    # rates near e^1 ~ 2.7 per unit of exposure, area effects of sd ~ 0.4: 5-40 expected counts per cell,
    # against noise of sd 4 -- small populations, where the noise matters
    prior = SmallAreaPrior(alpha_mean=1.0, alpha_sd=0.5, tau_scale=0.5)
    load_before, t0 = _loadavg(), time.perf_counter()
    trials = []
    for t in range(args.trials):
        trials.append(trial(t, args, prior))
        if (t + 1) % 10 == 0:
            print(f"{t + 1}/{args.trials} trials, {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
    seconds = time.perf_counter() - t0
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = "?"
    result = {"command": "python benchmarks/small_area_study.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "settings": {"G": args.G, "C": args.C, "sigma": args.sigma, "exposure": list(args.exposure),
                           "trials": args.trials, "seed": args.seed, "postprocessing": args.postprocessing,
                           "prior": prior.model_dump(exclude={"kind"}), "draws": args.thin * KEEP, "warmup": args.warmup,
                           "chains": 1, "sbc_draws": KEEP},
              "summary": summarise(trials), "seconds": seconds, "loadavg_before": load_before,
              "loadavg_after": _loadavg(), "commit": commit, "python": platform.python_version(),
              "cpus": len(os.sched_getaffinity(0)), "trials": trials}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(table(result))
    print(f"{seconds:.0f} s; load {load_before} -> {result['loadavg_after']}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
