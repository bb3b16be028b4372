"""Figure 1-B / Figure 9 and Tables 2-4 of Xiong, Ju & Zhang at this machine's scale.

For one example release: the reference posterior is a long SMC-ABC run (cached in
benchmarks/results/) or, for linreg-ju, the brute-force pseudo-marginal importance sampler of
benchmarks/linreg_ju_reference.py when its draws exist (``--reference auto``: exact up to Monte
Carlo error, no ABC tolerance; the SMC-ABC run is then reported as a method); SPPE and SPLE are run for ``--rounds`` rounds of
``--simulations`` simulations and, after every round, MMD, C2ST (vs the
reference), NLOG (KDE at the true parameter), LMD and the wall-clock are printed.
The final posterior means and 95% equal-tailed intervals are printed beside the
paper's Tables 2-4 rows (linreg-ju).  ``--methods`` also takes "sppe-m1" (same flow,
M = 1, i.e. the noise drawn once inside the simulator) for the RQMC-pays check and
"sppe-combined" (SPPE with ``combined_loss=True``).

    python benchmarks/sbi_convergence.py --problem linreg-ju-eps10 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from dpposterior.diagnostics.metrics import c2st, lmd, mmd, nlog
from dpposterior.families import get_family
from dpposterior.sbi.smc_abc import run_smc_abc
from dpposterior.sbi.sple import run_sple
from dpposterior.sbi.sppe import run_sppe
from dpposterior.release import load_release
from dpposterior.sbi.flows import FlowConfig

ROOT = Path(__file__).resolve().parents[1]
TRUTH = {"linreg-ju": [-1.79, -2.89, -0.66], "sir": [-0.5, -3.0]}
#: Tables 2-4: mean (2.5%, 97.5%) for beta_0..2
PAPER = {
    "linreg-ju-eps10": {"smc-abc": [(-0.59, -2.28, 0.93), (-2.44, -3.67, -0.38), (0.85, -0.88, 2.77)],
                        "sppe": [(-0.51, -2.25, 1.07), (-2.40, -3.61, -0.30), (0.90, -0.89, 2.85)],
                        "sple": [(-0.64, -2.31, 0.96), (-2.61, -3.65, -0.98), (0.64, -0.93, 2.48)]},
    "linreg-ju-eps1": {"smc-abc": [(-0.80, -2.74, 1.17), (-0.83, -2.64, 1.23), (0.90, -1.00, 2.58)],
                       "sppe": [(-0.93, -2.80, 1.04), (-0.90, -2.62, 0.97), (1.11, -0.71, 2.72)],
                       "sple": [(-0.89, -2.69, 1.06), (-1.04, -2.82, 0.91), (1.25, -0.55, 2.88)]},
    "linreg-ju-eps0.1": {"smc-abc": [(-0.09, -1.97, 1.93), (-0.10, -2.09, 1.95), (0.11, -1.90, 2.22)],
                         "sppe": [(-0.12, -2.13, 1.73), (-0.12, -2.11, 1.83), (0.14, -1.81, 2.09)],
                         "sple": [(-0.04, -2.01, 1.99), (-0.06, -2.00, 1.85), (0.12, -1.86, 2.09)]},
}


def summary_rows(theta):
    return [(float(np.mean(c)), float(np.quantile(c, 0.025)), float(np.quantile(c, 0.975))) for c in theta.T]


#: where a newly computed SMC-ABC reference is cached (a scratch folder unless --update-results)
SAVE_DIR = ROOT / "benchmarks" / "results"


def reference(problem, model, sims, particles, seed):
    path = ROOT / "benchmarks" / "results" / f"ref_{problem}_{sims}.npz"
    if not path.exists():
        path = SAVE_DIR / path.name
    if path.exists():
        z = np.load(path)
        return z["theta"], float(z["seconds"])
    t = time.perf_counter()
    res = run_smc_abc(model, simulations=sims, particles=particles, seed=seed)
    seconds = time.perf_counter() - t
    theta = res.resample(particles, np.random.default_rng(seed))
    np.savez(path, theta=theta, weights=res.weights, population=res.theta, seconds=seconds,
             tolerance=res.tolerance)
    print(f"reference SMC-ABC: {res.simulations} sims, {len(res.generations)} generations, "
          f"final tolerance {res.tolerance:.4g}, {seconds:.1f} s", flush=True)
    return theta, seconds


def importance_reference(problem, n, seed):
    """n draws resampled from the weighted proposals of benchmarks/linreg_ju_reference.py, or None."""
    path = ROOT / "benchmarks" / "results" / f"isref_{problem}.npz"
    if not path.exists():
        return None
    z = np.load(path)
    w = np.exp(z["log_weight"] - z["log_weight"].max())
    idx = np.random.default_rng(seed).choice(len(w), size=n, p=w / w.sum())
    return z["theta"][idx], float(z["seconds"])


def exact_rows(problem):
    """The importance-sampling reference's weighted mean (2.5%, 97.5%) rows, or None."""
    path = ROOT / "benchmarks" / "results" / "linreg_ju_reference.json"
    table = json.loads(path.read_text()) if path.exists() else {}
    return table.get(problem, {}).get("rows")


def main():
    from _out import add_update_flag, out_path, results_dir

    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default="linreg-ju-eps10")
    ap.add_argument("--methods", default="sppe,sple")
    ap.add_argument("--simulations", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--rqmc-points", type=int, default=8)
    ap.add_argument("--max-epochs", type=int, default=60)
    ap.add_argument("--reference-sims", type=int, default=1_000_000)
    ap.add_argument("--particles", type=int, default=2000)
    ap.add_argument("--metric-draws", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference", choices=["auto", "smc-abc"], default="auto")
    ap.add_argument("--out", default=None)
    add_update_flag(ap)
    args = ap.parse_args()
    global SAVE_DIR
    SAVE_DIR = results_dir(args.update_results)

    rel = load_release(ROOT / "examples" / "releases" / f"{args.problem}.json")
    fam = get_family(rel.family)
    model = fam.hooks["sbi_model"](rel, fam.parse_prior(None, rel))
    truth = np.asarray(TRUTH.get(rel.family, []), float)
    abc, abc_seconds = reference(args.problem, model, args.reference_sims, args.particles, args.seed)
    exact = importance_reference(args.problem, args.particles, args.seed) if args.reference == "auto" else None
    ref, ref_seconds = exact if exact is not None else (abc, abc_seconds)
    ref_name = "importance sampling (exact)" if exact is not None else "smc-abc (reference)"
    # rows of the weighted IS sample itself, not of the resampled draws (which add resampling noise)
    rows = exact_rows(args.problem) if exact is not None else None
    out = {"problem": args.problem, "args": vars(args), "reference": ref_name, "reference_seconds": ref_seconds,
           "reference_rows": rows or summary_rows(ref), "methods": {}}
    if exact is not None:
        out["methods"]["smc-abc"] = {"final_rows": summary_rows(abc), "rounds": [],
                                     "final_c2st": c2st(abc, ref, max_samples=1000, epochs=200)}
    lmd_n = 200 if rel.family == "sir" else 1000
    path = out_path(args.out, f"sbi_{args.problem}_{args.methods.replace(',', '_')}_r{args.rounds}.json",
                    args.update_results)

    for method in args.methods.split(","):
        rows = []
        t_start = time.perf_counter()

        def callback(r, sample, info):
            t0 = time.perf_counter()
            draws = sample(args.metric_draws)
            sample_seconds = time.perf_counter() - t0
            row = {"round": r, "simulations": info["simulations"], "epochs": info["epochs"],
                   "sim_s": info["sim_seconds"], "train_s": info["train_seconds"], "sample_s": sample_seconds,
                   "wall_s": time.perf_counter() - t_start,
                   "mmd": mmd(draws, ref), "c2st": c2st(draws, ref, max_samples=1000, epochs=200),
                   "nlog": nlog(draws, truth) if truth.size else float("nan"),
                   "lmd": lmd(model, draws, rng=r, n=lmd_n)}
            rows.append(row)
            print(f"{method:8s} round {r:2d} sims {row['simulations']:6d} epochs {row['epochs']:3d} "
                  f"MMD {row['mmd']:.4f} C2ST {row['c2st']:.3f} NLOG {row['nlog']:.3f} LMD {row['lmd']:.3f} "
                  f"sim {row['sim_s']:.1f}s train {row['train_s']:.1f}s wall {row['wall_s']:.0f}s", flush=True)

        config = FlowConfig(max_epochs=args.max_epochs)
        m = 1 if method == "sppe-m1" else args.rqmc_points
        if method.startswith("sppe"):
            res = run_sppe(model, args.simulations, args.rounds, m, True, 2000, args.seed, config=config,
                           round_callback=callback, combined_loss=method == "sppe-combined")
        else:
            res = run_sple(model, args.simulations, args.rounds, m, True, 2000, args.seed, config=config,
                           round_callback=callback)
        final = summary_rows(res.theta)
        out["methods"][method] = {"rounds": rows, "final_rows": final,
                                  "final_c2st": c2st(res.theta, ref, max_samples=1000, epochs=200)}
        print(f"{method} final C2ST (2000 draws vs reference) {out['methods'][method]['final_c2st']:.3f}")
        path.write_text(json.dumps(out, indent=1))  # after every method: a long run killed later keeps it

    def max_dev(rows, other):
        return max(abs(a - b) for r1, r2 in zip(rows, other) for a, b in zip(r1, r2))

    names = [ref_name] + list(out["methods"])
    print("\nposterior mean (2.5%, 97.5%)" + (" | paper" if args.problem in PAPER else ""))
    for name in names:
        rows = out["reference_rows"] if name == ref_name else out["methods"][name]["final_rows"]
        key = "smc-abc" if name.startswith("smc-abc") else name
        cells = [f"{m:6.2f} ({lo:6.2f}, {hi:5.2f})" for m, lo, hi in rows]
        line = f"{name:28s} " + "  ".join(cells)
        if name != ref_name:
            line += f"   max |ours - reference| = {max_dev(rows, out['reference_rows']):.2f}"
        if args.problem in PAPER and key in PAPER[args.problem]:
            line += f"   max |ours - paper| = {max_dev(rows, PAPER[args.problem][key]):.2f}"
        print(line)
    path.write_text(json.dumps(out, indent=1))
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
