"""Wall time of SPPE on linreg-ju eps = 10 with the paper's defaults (10 rounds x 1,000 simulations).

    python benchmarks/sppe_walltime.py [--rounds 10] [--threads 1]

Prints the wall-clock and CPU time of every round (target: all 10 rounds < 10 min on 2 idle cores).
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    os.environ["DPPOSTERIOR_TORCH_THREADS"] = str(args.threads)
    from dpposterior.families import get_family
    from dpposterior.sbi.sppe import run_sppe
    from dpposterior.release import load_release

    rel = load_release(ROOT / "examples" / "releases" / "linreg-ju-eps10.json")
    fam = get_family(rel.family)
    model = fam.hooks["sbi_model"](rel, fam.parse_prior(None, rel))
    t0, c0 = time.perf_counter(), time.process_time()

    def callback(r, sample, info):
        print(f"round {r:2d}: {info['simulations']} sims, {info['epochs']} epochs, "
              f"wall {time.perf_counter() - t0:7.1f} s, CPU {time.process_time() - c0:7.1f} s "
              f"(train {info['train_seconds']:.1f} s)", flush=True)

    res = run_sppe(model, 1000, args.rounds, 8, True, 5000, args.seed, round_callback=callback)
    print(f"total wall {time.perf_counter() - t0:.1f} s, CPU {time.process_time() - c0:.1f} s; "
          f"posterior mean {res.theta.mean(axis=0).round(2)}")
    # the final posterior beside the paper's SPPE row and the brute-force reference, when cached
    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sbi_convergence import PAPER, importance_reference, summary_rows

    rows = summary_rows(res.theta)
    exact = importance_reference("linreg-ju-eps10", 4000, 0)
    others = {"paper sppe": PAPER["linreg-ju-eps10"]["sppe"]}
    if exact is not None:
        others["exact (IS)"] = summary_rows(exact[0])
    print("ours        " + "  ".join(f"{m:6.2f} ({lo:6.2f}, {hi:5.2f})" for m, lo, hi in rows))
    for name, other in others.items():
        dev = max(abs(a - b) for r1, r2 in zip(rows, other) for a, b in zip(r1, r2))
        print(f"{name:11s} " + "  ".join(f"{m:6.2f} ({lo:6.2f}, {hi:5.2f})" for m, lo, hi in other)
              + f"   max |ours - {name}| = {dev:.2f}")


if __name__ == "__main__":
    main()
