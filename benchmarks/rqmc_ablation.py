"""Figure 7 of Xiong, Ju & Zhang: RMSE of the inner integral I(theta, x) vs M, MC and RQMC.

I(theta, x) = int eta(s_dp | s(x)) log q(s_dp | theta) ds_dp, with q a likelihood flow
trained for a short while (one SPLE round) on the problem; for a few (theta, x)
pairs from the prior predictive, I is estimated with M i.i.d. uniforms (MC) or an
independently scrambled Sobol' set of M points (RQMC), ``--reps`` times each; the
reference is RQMC with 2^14 points.  Prints RMSE per M and the fitted log-log slopes
(paper: ~ -1/2 for MC, ~ -1 for RQMC).

    python benchmarks/rqmc_ablation.py --problem linreg-ju-eps10
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

from dpposterior.families import get_family
from dpposterior.inference.sple import run_sple
from dpposterior.release import load_release
from dpposterior.sbi.flows import FlowConfig
from dpposterior.sbi.rqmc import inner_uniforms

ROOT = Path(__file__).resolve().parents[1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--problem", default="linreg-ju-eps10")
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rel = load_release(ROOT / "examples" / "releases" / f"{args.problem}.json")
    fam = get_family(rel.family)
    model = fam.hooks["sbi_model"](rel, fam.parse_prior(None, rel))
    res = run_sple(model, simulations=500, rounds=1, rqmc_points=8, draws=10, seed=args.seed,
                   config=FlowConfig(max_epochs=15), chains=10, warmup=2)
    flow = res.flow
    rng = np.random.default_rng(args.seed + 1)
    theta = model.prior.sample(args.pairs, rng)
    s = model.statistics(theta, rng)

    @torch.no_grad()
    def estimate(i, u):
        sdp = model.privatize_u(s[i][None, :], u)
        th = torch.as_tensor(np.repeat(theta[i][None, :], len(u), 0), dtype=torch.float32)
        return float(flow.log_prob(torch.as_tensor(sdp, dtype=torch.float32), th).double().mean())

    ms = [2 ** k for k in range(1, 11)]
    exact = [estimate(i, inner_uniforms(1, 2 ** 14, model.stat_dim, rng, rqmc=True)[0]) for i in range(args.pairs)]
    table = {"mc": [], "rqmc": []}
    for kind in table:
        for m in ms:
            err = [estimate(i, inner_uniforms(1, m, model.stat_dim, rng, rqmc=(kind == "rqmc"))[0]) - exact[i]
                   for i in range(args.pairs) for _ in range(args.reps)]
            table[kind].append(float(np.sqrt(np.mean(np.square(err)))))
    print(f"{'M':>6s} {'RMSE MC':>10s} {'RMSE RQMC':>10s}")
    for j, m in enumerate(ms):
        print(f"{m:6d} {table['mc'][j]:10.5f} {table['rqmc'][j]:10.5f}")
    for kind in table:
        slope = np.polyfit(np.log(ms), np.log(table[kind]), 1)[0]
        print(f"log-log slope {kind}: {slope:.2f}")


if __name__ == "__main__":
    main()
