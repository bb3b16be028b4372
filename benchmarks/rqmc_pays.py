"""Does the nested RQMC estimator pay?  SPPE at equal simulation budget, three ways.

Xiong, Ju & Zhang's claim (Sec. 3, Figure 7): integrating the public mechanism inside the loss
with M scrambled-Sobol' replicates per simulation beats drawing the noise once inside the
simulator (what a user of sbi would do).  Arms, all with the same flow, seeds and simulations:

* ``rqmc-m8``  M = 8 replicates per simulation from a scrambled Sobol' set (our default);
* ``mc-m8``    M = 8 i.i.d. replicates (separates "RQMC" from "more replicates");
* ``once-m1``  M = 1: the noise drawn once inside the simulator.

Each arm runs ``--rounds`` rounds of ``--simulations`` simulations for every seed; after each
round the C2ST accuracy and MMD of 1,000 posterior draws against the reference are recorded:
the exact posterior of benchmarks/linreg_ju_reference.py where cached, else the long SMC-ABC
run of benchmarks/sbi_convergence.py.  Differences are paired by seed; the
printed standard errors are over seeds.

    python benchmarks/rqmc_pays.py --problem linreg-ju-eps1 --seeds 4 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from dpposterior.diagnostics.metrics import c2st, mmd
from dpposterior.families import get_family
from dpposterior.sbi.sppe import run_sppe
from dpposterior.release import load_release
from dpposterior.sbi.flows import FlowConfig
from sbi_convergence import importance_reference  # same folder

ROOT = Path(__file__).resolve().parents[1]
ARMS = {"rqmc-m8": (8, True), "mc-m8": (8, False), "once-m1": (1, True)}


def main():
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default="linreg-ju-eps1")
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--simulations", type=int, default=1000)
    ap.add_argument("--max-epochs", type=int, default=60)
    ap.add_argument("--reference-sims", type=int, default=1_000_000)
    ap.add_argument("--out", default=None)
    add_update_flag(ap)
    args = ap.parse_args()

    rel = load_release(ROOT / "examples" / "releases" / f"{args.problem}.json")
    fam = get_family(rel.family)
    model = fam.hooks["sbi_model"](rel, fam.parse_prior(None, rel))
    exact = importance_reference(args.problem, 2000, 0)
    ref_path = ROOT / "benchmarks" / "results" / f"ref_{args.problem}_{args.reference_sims}.npz"
    if exact is not None:
        ref = exact[0]
        print("reference: exact posterior (benchmarks/linreg_ju_reference.py)")
    elif ref_path.exists():
        ref = np.load(ref_path)["theta"]
        print(f"reference: SMC-ABC {ref_path.name}")
    else:
        raise SystemExit(f"no reference: run benchmarks/sbi_convergence.py --problem {args.problem} first")
    arms = args.arms.split(",")
    results = {arm: {"c2st": np.full((args.seeds, args.rounds), np.nan), "mmd": np.full((args.seeds, args.rounds), np.nan),
                     "seconds": np.zeros(args.seeds)} for arm in arms}
    for seed in range(args.seeds):
        for arm in arms:
            m, rqmc = ARMS[arm]
            t0 = time.perf_counter()

            def callback(r, sample, info, arm=arm, seed=seed):
                draws = sample(1000)
                results[arm]["c2st"][seed, r - 1] = c2st(draws, ref, max_samples=1000, epochs=200, seed=seed)
                results[arm]["mmd"][seed, r - 1] = mmd(draws, ref)

            run_sppe(model, args.simulations, args.rounds, m, rqmc, 1000, seed,
                     config=FlowConfig(max_epochs=args.max_epochs), round_callback=callback)
            results[arm]["seconds"][seed] = time.perf_counter() - t0
            print(f"seed {seed} {arm:8s} C2ST by round {np.round(results[arm]['c2st'][seed], 3)} "
                  f"MMD {np.round(results[arm]['mmd'][seed], 4)} ({results[arm]['seconds'][seed]:.0f} s)", flush=True)

    print(f"\n{args.problem}: {args.seeds} seeds x {args.rounds} rounds x {args.simulations} simulations; "
          "mean over seeds (s.e.)")
    for metric in ("c2st", "mmd"):
        for arm in arms:
            v = results[arm][metric]
            cells = "  ".join(f"{v[:, r].mean():.3f} ({v[:, r].std(ddof=1) / np.sqrt(args.seeds):.3f})"
                              for r in range(args.rounds))
            print(f"{metric:5s} {arm:8s} {cells}")
    base = "rqmc-m8"
    for arm in arms:
        if arm == base:
            continue
        for metric in ("c2st", "mmd"):
            d = results[arm][metric] - results[base][metric]
            cells = "  ".join(f"{d[:, r].mean():+.3f} ({d[:, r].std(ddof=1) / np.sqrt(args.seeds):.3f}, "
                              f"{int((d[:, r] > 0).sum())}/{args.seeds} seeds worse)" for r in range(args.rounds))
            print(f"{metric} {arm} - {base}: {cells}")
    out = out_path(args.out, f"rqmc_pays_{args.problem}.json", args.update_results)
    out.write_text(json.dumps({"args": vars(args), "results": {a: {k: np.asarray(v).tolist() for k, v in r.items()}
                                                               for a, r in results.items()}}, indent=1))
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
