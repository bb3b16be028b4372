"""Figure 1 of Karwa, Kifer & Slavković: squared error of posterior-mean estimates vs epsilon.

Sec. 5 of the paper: for N in {50, 100, 200, 500} and epsilon from 1e-4 to 1, draw
10 datasets (p ~ Dirichlet(1), tables ~ the naive Bayes model) and 5 Laplace noise
draws per dataset (scale 2/eps per table, counts parameterisation); compare the
squared error between the true parameters and the posterior means of

* naive  -- noisy counts clipped to [0, N], rescaled to total N, Dirichlet(1 + counts),
* VB     -- the variational posterior (``inference/naive_bayes_vb.py``),
* bayes  -- the non-private Dirichlet(1 + n) posterior of the confidential counts.

The squared error is summed over all 10 parameters (p_1, p_2 and the 8 p^k_ij) of the
I = K = J = 2 model (the paper does not state I, K, J for Figure 1; Table 2 and Xiong
et al. App. E.3 use binary variables, two features are assumed here).  For N <= 100
the exact posterior mean (``exact-enumeration``) is also computed, and the distance of
VB and naive from it is reported.  All 450 releases of one N are fitted as one
vectorised VB batch.

Also runs Xiong et al.'s example (App. E.3; ``examples/releases/naive-bayes-xiong-eps10.json``,
Dirichlet(2) priors): VB, naive and exact posterior means side by side.

    python benchmarks/naive_bayes_mse.py               # paper scale (10 datasets x 5 noise draws)
    python benchmarks/naive_bayes_mse.py --datasets 4 --noise 2 --n 50 100   # reduced

Writes naive_bayes_mse.png and naive_bayes_mse.json to a scratch folder, or with --update-results to the
committed docs/img/ and benchmarks/results/ (benchmarks/_out.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from dpposterior import infer  # noqa: E402
from dpposterior.families import naive_bayes as nb  # noqa: E402
from dpposterior.inference import naive_bayes_exact as X  # noqa: E402
from dpposterior.inference import naive_bayes_vb as V  # noqa: E402
from dpposterior.release import load_release  # noqa: E402

EPSILONS = [1e-4, 3e-4, 1e-3, 3e-3, 1e-2, 3e-2, 1e-1, 3e-1, 1.0]
LEVELS = [2, 2]


def _means(a_c, a_f):
    return a_c / a_c.sum(-1, keepdims=True), a_f / a_f.sum(-1, keepdims=True)


def _sq(c, f, tc, tf):
    return ((c - tc) ** 2).sum(-1) + ((f - tf) ** 2).sum(axis=(-1, -2, -3))


def run_cell(N: int, datasets: int, noise: int, epsilons, seed: int) -> dict:
    """All (dataset, eps, noise) releases for one N, fitted as one batch."""
    ss_data, ss_noise = np.random.SeedSequence([seed, N]).spawn(2)
    rng_data, rng_noise = np.random.default_rng(ss_data), np.random.default_rng(ss_noise)
    prior = nb.parse_prior(None).resolve(2, LEVELS)
    truths, tables = [], []
    for _ in range(datasets):
        cp, fp = nb.draw_parameters(prior, rng_data)
        truths.append((cp, fp))
        tables.append(nb.draw_tables(cp, fp, N, rng_data))
    rows = []   # (dataset, eps index)
    m = []
    for d in range(datasets):
        for e, eps in enumerate(epsilons):
            for _ in range(noise):
                m.append(tables[d] + rng_noise.laplace(0.0, 2.0 / eps, size=tables[d].shape))
                rows.append((d, e))
    rows = np.array(rows)
    m = np.array(m)
    B = len(m)
    pb = V.Problem(m=m, mask=np.ones((2, 2, 2), bool), b=np.array([2.0 / epsilons[e] for e in rows[:, 1]]),
                   N=np.full(B, float(N)), alpha_c=prior.class_alpha, alpha_f=prior.feature_alpha_filled())
    t0 = time.perf_counter()
    fit = V.fit_vb(pb)
    vb_seconds = time.perf_counter() - t0
    vc, vf = _means(fit.a_c, fit.a_f)
    cc, fc = V.naive_counts(pb)
    nc, nf = _means(1 + cc, 1 + fc)
    tab = np.array([tables[d] for d in rows[:, 0]])
    bc, bf = _means(1 + tab[:, 0].sum(-1), 1 + tab)
    tc = np.array([truths[d][0] for d in rows[:, 0]])
    tf = np.array([truths[d][1] for d in rows[:, 0]])
    out = {"N": N, "vb_seconds": vb_seconds, "releases": B, "cells": []}
    exact = None
    if N <= X.MAX_N:
        t0 = time.perf_counter()
        exs = [X.enumerate_posterior(m[j], pb.b[j], N, prior.class_alpha, prior.feature_alpha_filled()) for j in range(B)]
        out["exact_seconds"] = time.perf_counter() - t0
        exact = (np.array([x.class_mean for x in exs]), np.array([x.feature_mean for x in exs]))
    for e, eps in enumerate(epsilons):
        sel = rows[:, 1] == e
        cell = {"epsilon": eps,
                "naive": _sq(nc, nf, tc, tf)[sel].tolist(),
                "vb": _sq(vc, vf, tc, tf)[sel].tolist(),
                "bayes": _sq(bc, bf, tc, tf)[sel].tolist(),
                "vb_iterations": fit.iterations[sel].tolist(),
                "vb_converged": int(fit.converged[sel].sum())}
        if exact is not None:
            ec, ef = exact
            cell["exact"] = _sq(ec, ef, tc, tf)[sel].tolist()
            cell["vb_to_exact"] = _sq(vc, vf, ec, ef)[sel].tolist()
            cell["naive_to_exact"] = _sq(nc, nf, ec, ef)[sel].tolist()
        out["cells"].append(cell)
    return out


def xiong_example() -> dict:
    path = ROOT / "examples" / "releases" / "naive-bayes-xiong-eps10.json"
    rel = load_release(path)
    prior = {"kind": "dirichlet", "alpha": 2.0}
    vb = infer(rel, prior=prior, seed=1)
    fit = vb.extras["fit"]
    vc, vf = _means(fit.a_c[0], fit.a_f[0])
    naive = infer(rel, prior=prior, method="naive", seed=1)
    ex = infer(rel, prior=prior, method="exact-enumeration", seed=1).extras["exact"]
    pb = V.Problem.from_release(rel, nb.parse_prior(prior, rel))
    cc, fc = V.naive_counts(pb)
    nc, nf = _means(2 + cc[0], 2 + fc[0])
    names = ["p_1", "p_2"] + [f"p^{k + 1}_{i + 1}{j + 1}" for k in range(2) for i in range(2) for j in range(2)]
    vb_v = np.concatenate([vc, vf.ravel()])
    ex_v = np.concatenate([ex.class_mean, ex.feature_mean.ravel()])
    nv_v = np.concatenate([nc, nf.ravel()])
    ex_sd = np.concatenate([ex.class_sd, ex.feature_sd.ravel()])
    vb_sd = np.concatenate([vb.draws("class_prob").std(0), vb.draws("feature_prob").reshape(-1, 8).std(0)])
    truth = [0.8489, 0.1511, 0.3887, 0.6113, 0.6534, 0.3466, 0.7537, 0.2463, 0.5834, 0.4166]
    return {"names": names, "truth": truth, "vb": vb_v.tolist(), "exact": ex_v.tolist(), "naive": nv_v.tolist(),
            "exact_sd": ex_sd.tolist(), "vb_sd": vb_sd.tolist(), "vb_iterations": int(vb.attrs["vb_iterations"]),
            "lower_bound": float(vb.attrs["vb_lower_bound"]), "log_evidence": float(ex.log_evidence),
            "naive_posterior_mean_check": naive.mean("class_prob").tolist()}


def plot(results: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(results), figsize=(4.2 * len(results), 3.8), sharey=True)
    axes = np.atleast_1d(axes)
    colors = {"naive": "tab:red", "vb": "tab:blue", "bayes": "tab:green"}
    labels = {"naive": "naive", "vb": "bayesVB", "bayes": "bayes (non-private)"}
    for ax, res in zip(axes, results):
        eps = [c["epsilon"] for c in res["cells"]]
        pos = np.arange(len(eps))
        for off, method in zip((-0.27, 0.0, 0.27), ("naive", "vb", "bayes")):
            data = [c[method] for c in res["cells"]]
            bp = ax.boxplot(data, positions=pos + off, widths=0.24, patch_artist=True, showfliers=False,
                            medianprops={"color": "black"})
            for box in bp["boxes"]:
                box.set_facecolor(colors[method])
                box.set_alpha(0.6)
            ax.plot([], [], color=colors[method], lw=6, alpha=0.6, label=labels[method])
        ax.set_xticks(pos)
        ax.set_xticklabels([f"{e:g}" for e in eps], rotation=60)
        ax.set_yscale("log")
        ax.set_title(f"N = {res['N']}")
        ax.set_xlabel("epsilon (per table)")
    axes[0].set_ylabel("squared error of posterior means")
    axes[-1].legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def main(argv=None):
    from _out import add_update_flag, img_dir, out_path

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[50, 100, 200, 500])
    ap.add_argument("--datasets", type=int, default=10)
    ap.add_argument("--noise", type=int, default=5)
    ap.add_argument("--seed", type=int, default=2016)
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    add_update_flag(ap)
    args = ap.parse_args(argv)
    args.json = out_path(args.json, "naive_bayes_mse.json", args.update_results)
    args.plot = args.plot or img_dir(args.update_results) / "naive_bayes_mse.png"
    results = []
    header = (f"{'N':>4} {'eps':>7} | {'naive':>8} {'VB':>8} {'bayes':>8} | {'VB<naive':>8} | "
              f"{'exact':>8} {'VB-ex':>8} {'nv-ex':>8} | {'iters':>9}")
    print("mean squared error (sum over the 10 parameters) of posterior means vs the truth;"
          " VB-ex / nv-ex: squared distance to the exact posterior mean (N <= 100)")
    print(header)
    for N in args.n:
        res = run_cell(N, args.datasets, args.noise, EPSILONS, args.seed)
        results.append(res)
        for c in res["cells"]:
            nv, vb, by = (np.mean(c[k]) for k in ("naive", "vb", "bayes"))
            win = np.mean(np.array(c["vb"]) < np.array(c["naive"]))
            ex = (f"{np.mean(c['exact']):8.4f} {np.mean(c['vb_to_exact']):8.4f} {np.mean(c['naive_to_exact']):8.4f}"
                  if "exact" in c else f"{'-':>8} {'-':>8} {'-':>8}")
            its = np.array(c["vb_iterations"])
            print(f"{N:>4} {c['epsilon']:>7g} | {nv:8.4f} {vb:8.4f} {by:8.4f} | {win:8.2f} | {ex} | "
                  f"{int(np.median(its)):>4}/{its.max():>4}")
        extra = f", exact enumeration {res['exact_seconds']:.1f} s" if "exact_seconds" in res else ""
        print(f"     N = {N}: {res['releases']} releases, VB batch {res['vb_seconds']:.1f} s{extra}; "
              f"not converged: {sum(len(c['vb']) - c['vb_converged'] for c in res['cells'])}")
    xi = xiong_example()
    print("\nXiong et al. App. E.3 (n = 100, proportions, eps = 10, Dirichlet(2) priors): posterior means")
    print(f"{'param':>8} {'truth':>7} {'exact':>7} {'VB':>7} {'VB-ex':>8} {'naive':>7} {'nv-ex':>8} {'sd ex':>7} {'sd VB':>7}")
    for j, name in enumerate(xi["names"]):
        print(f"{name:>8} {xi['truth'][j]:7.4f} {xi['exact'][j]:7.4f} {xi['vb'][j]:7.4f} "
              f"{xi['vb'][j] - xi['exact'][j]:+8.4f} {xi['naive'][j]:7.4f} {xi['naive'][j] - xi['exact'][j]:+8.4f} "
              f"{xi['exact_sd'][j]:7.4f} {xi['vb_sd'][j]:7.4f}")
    print(f"VB iterations {xi['vb_iterations']}, lower bound {xi['lower_bound']:.3f} <= log evidence "
          f"{xi['log_evidence']:.3f} (count scale)")
    plot(results, args.plot)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"settings": vars(args) | {"plot": str(args.plot), "json": str(args.json)},
                                     "epsilons": EPSILONS, "results": results, "xiong": xi}, indent=1))
    print(f"wrote {args.plot} and {args.json}")


if __name__ == "__main__":
    main()
