"""Benchmark of the exact Gibbs sampler for the bounded Gaussian (Kazan & Reiter).

Prints
1. chain-iterations per second: 1 chain and 10,000 chains vectorised, for the plain App. D
   sweep and for sweep + joint move (the default);
2. effective samples per second (ArviZ bulk ESS of mu and sigma2, wall time including
   initialisation and warm-up) on Example 1 with the paper's prior, constrained and not,
   and the ratio to the R reference (~2,800 ESS from 400,000 draws at ~10,000 it/s,
   i.e. ~70 ESS/s);
3. Figure 2 at reduced scale: 95% HPD coverage and mean length for mu vs n, truths
   N(0.1, 0.04^2) and N(0.5, 0.2^2), constrained and unconstrained, flat prior,
   eps1 = eps2 = 0.1 (writes a PNG);
4. the calibration study: 2,000 datasets, n = 100, truth N(0.5, 0.2^2), flat prior,
   unconstrained: coverage of mu by the Gibbs posterior and by the naive posterior
   (must lie within 0.95 +- 0.015 and outside it, respectively).

    python benchmarks/gaussian_gibbs.py [--quick] [--out DIR] [--update-results]

``--quick`` shrinks every part (for a loaded machine); the full run takes a few minutes.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

R_REFERENCE_ESS_PER_S = 2800 / (400_000 / 10_000)  # ~70 ESS/s


def chain_iterations(prob, chains, steps, joint, seed=0):
    from dpposterior.inference import gaussian_gibbs as gg

    # the compiled kernel, no warm-up (the initial proposal), one thread; the numpy-vectorised
    # path these rates were first measured with (docs/benchmarks.md) was removed
    gg.run_chains(prob, 1, 2, 0, np.random.default_rng(seed), joint_update=joint, workers=1)  # load the kernels
    start, cpu = time.perf_counter(), time.process_time()
    gg.run_chains(prob, chains, steps, 0, np.random.default_rng(seed), joint_update=joint, workers=1)
    # wall clock, and CPU time of this process (what the rate would be on an idle core)
    return chains * steps / (time.perf_counter() - start), chains * steps / (time.process_time() - cpu)


def ess_per_second(prob, chains, draws, warmup, joint, seed=1):
    import arviz as az

    from dpposterior.inference import gaussian_gibbs as gg

    start, cpu = time.perf_counter(), time.process_time()
    res = gg.run_chains(prob, chains, draws, warmup, np.random.default_rng(seed), joint_update=joint)
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu
    idata = az.from_dict(posterior={"mu": 100 * res["mu"], "sigma2": 1e4 * res["sigma2"]})
    ess = az.ess(idata, method="bulk")
    return float(ess["mu"]), float(ess["sigma2"]), elapsed, cpu


def figure2(ns, datasets, chains, draws, warmup, out_png, seed=7):
    from dpposterior.diagnostics.gaussian_study import coverage_study

    rows = []
    for mu, sigma in ((0.1, 0.04), (0.5, 0.2)):
        for constrained in (False, True):
            for n in ns:
                t = time.perf_counter()
                res = coverage_study(mu, sigma, n, 0.1, 0.1, datasets, constrained=constrained, chains=chains,
                                     draws=draws, warmup=warmup, seed=seed + n)
                rows.append({"mu": mu, "sigma": sigma, "constrained": constrained, "n": n,
                             "coverage": res.coverage, "mean_length": float(res.length.mean()),
                             "naive_coverage": res.naive_coverage, "seconds": time.perf_counter() - t})
                r = rows[-1]
                print(f"  truth N({mu}, {sigma}^2) {'constrained  ' if constrained else 'unconstrained'} n={n:5d}: "
                      f"coverage {r['coverage']:.3f}  mean HPD length {r['mean_length']:.3f}  "
                      f"(naive coverage {r['naive_coverage']:.3f})  {r['seconds']:.1f} s", flush=True)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(6, 7), sharex=True)
    for (mu, sigma), colour in (((0.1, 0.04), "tab:red"), ((0.5, 0.2), "tab:blue")):
        for constrained, style in ((True, "-"), (False, "--")):
            sel = [r for r in rows if r["mu"] == mu and r["constrained"] == constrained]
            label = f"N({mu}, {sigma}^2), {'constrained' if constrained else 'unconstrained'}"
            axes[0].plot([r["n"] for r in sel], [r["coverage"] for r in sel], style, color=colour, marker="o",
                         label=label)
            axes[1].plot([r["n"] for r in sel], [r["mean_length"] for r in sel], style, color=colour, marker="o")
    axes[0].axhline(0.95, color="0.5", lw=0.8)
    axes[0].set_ylabel("coverage of 95% HPD")
    axes[0].legend(fontsize=7)
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("n")
    axes[1].set_ylabel("mean HPD length")
    axes[0].set_title(f"Kazan & Reiter Figure 2, reduced ({datasets} datasets per point)")
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return rows


def main():
    from dpposterior.families.gaussian import make_release, parse_prior
    from dpposterior.inference import gaussian_gibbs as gg
    from dpposterior.diagnostics.gaussian_study import coverage_study

    from _out import add_update_flag, img_dir, results_dir

    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="smaller everything (loaded machine)")
    parser.add_argument("--out", default=None, help="folder for gaussian_gibbs.json")
    parser.add_argument("--figure", default=None, help="Figure 2 PNG")
    add_update_flag(parser)
    args = parser.parse_args()
    args.out = str(args.out or results_dir(args.update_results))
    args.figure = str(args.figure or img_dir(args.update_results) / "gaussian_figure2.png")
    warnings.filterwarnings("ignore", message="More chains")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    quick = args.quick
    figure_path = Path(args.figure)
    figure_path.parent.mkdir(parents=True, exist_ok=True)
    import os

    results: dict = {"quick": quick, "load_average_at_start": os.getloadavg()}
    print(f"load average at start: {os.getloadavg()[0]:.1f} (2 cores); wall-clock rates shrink with it")
    total = time.perf_counter()

    release = make_release(43, (0, 100), 34.30, 47.16**2, 0.25, 0.25)
    prior = parse_prior({"kind": "normal-inverse-gamma", "mu0": 12.5, "sigma0_sq": 3.8**2, "kappa0": 1.0,
                         "nu0": 1.0}, release)
    print("1. chain-iterations per second (Example 1, NIG prior)")
    results["iterations"] = {}
    for constrained in (False, True):
        prob = gg.problem_from_release(release, prior, constrained)
        for joint in (False, True):
            single, single_cpu = chain_iterations(prob, 1, 300 if quick else 2000, joint)
            many, many_cpu = chain_iterations(prob, 10_000, 5 if quick else 20, joint)
            key = f"{'constrained' if constrained else 'unconstrained'}, {'sweep+joint' if joint else 'sweep only'}"
            results["iterations"][key] = {"1 chain": single, "10000 chains": many, "1 chain cpu": single_cpu,
                                          "10000 chains cpu": many_cpu}
            print(f"  {key:34s}: 1 chain {single:>10,.0f} it/s   10,000 chains {many:>12,.0f} chain-it/s   "
                  f"(per CPU-second: {single_cpu:,.0f} / {many_cpu:,.0f})", flush=True)

    print(f"2. ESS per second on Example 1 (R reference ~{R_REFERENCE_ESS_PER_S:.0f} ESS/s)")
    results["ess"] = {}
    chains, draws, warmup = (256, 200, 150) if quick else (1000, 400, 200)
    for constrained in (False, True):
        prob = gg.problem_from_release(release, prior, constrained)
        for joint in (True, False):
            ess_mu, ess_s2, secs, cpu = ess_per_second(prob, chains, draws, warmup, joint)
            rate = min(ess_mu, ess_s2) / secs
            key = f"{'constrained' if constrained else 'unconstrained'}, {'sweep+joint' if joint else 'sweep only'}"
            results["ess"][key] = {"ess_mu": ess_mu, "ess_sigma2": ess_s2, "seconds": secs, "ess_per_s": rate,
                                   "ratio_to_R": rate / R_REFERENCE_ESS_PER_S, "cpu_seconds": cpu, "chains": chains, "draws": draws,
                                   "warmup": warmup}
            print(f"  {key:34s}: ESS mu {ess_mu:>9,.0f}  sigma2 {ess_s2:>9,.0f} in {secs:5.1f} s -> "
                  f"{rate:>9,.0f} ESS/s = {rate / R_REFERENCE_ESS_PER_S:6.0f} x R  (CPU {cpu:.1f} s)", flush=True)

    print("3. Figure 2 at reduced scale (flat prior, eps1 = eps2 = 0.1)")
    ns = (10, 50, 250) if quick else (10, 25, 50, 100, 250, 1000)
    datasets = 100 if quick else 300
    results["figure2"] = figure2(ns, datasets, 2, 400, 200, figure_path)

    print("4. calibration: 2,000 datasets, n = 100, truth N(0.5, 0.2^2), flat prior, unconstrained")
    t = time.perf_counter()
    n_data = 500 if quick else 2000
    res = coverage_study(0.5, 0.2, 100, 0.1, 0.1, n_data, constrained=False, chains=4, draws=2000, warmup=500,
                         seed=2024)
    se = np.sqrt(0.95 * 0.05 / n_data)
    results["calibration"] = {"datasets": n_data, "coverage": res.coverage, "naive_coverage": res.naive_coverage,
                              "binomial_se": se, "seconds": time.perf_counter() - t,
                              "mean_length": float(res.length.mean()), "naive_mean_length": float(res.naive_length.mean())}
    ok = abs(res.coverage - 0.95) <= 0.015
    print(f"  gibbs coverage {res.coverage:.4f} (target 0.95 +- 0.015: {'PASS' if ok else 'FAIL'}; binomial SE "
          f"{se:.4f}), naive coverage {res.naive_coverage:.4f} "
          f"({'fails' if abs(res.naive_coverage - 0.95) > 0.015 else 'passes'} the check), "
          f"{results['calibration']['seconds']:.0f} s")
    results["total_seconds"] = time.perf_counter() - total
    results["load_average_at_end"] = os.getloadavg()
    (out / "gaussian_gibbs.json").write_text(json.dumps(results, indent=2) + "\n")
    print(f"total {results['total_seconds']:.0f} s; wrote {out / 'gaussian_gibbs.json'} and "
          f"{figure_path}")


if __name__ == "__main__":
    main()
