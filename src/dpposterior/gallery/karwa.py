"""Karwa, Kifer & Slavkovic (002): Fig. 1, squared error of VB, naive and non-private vs epsilon."""

from __future__ import annotations


import numpy as np

from ._common import Context, PAPER, Result, _g, _plt, _run_cells, _seeds


# =============================================================================== Karwa, Kifer & Slavkovic

def _karwa_unit(unit: dict) -> dict:
    from ..families.naive_bayes import draw_parameters, draw_tables, parse_prior, release_from_tables
    from ..api import infer

    rng = np.random.default_rng(unit["seed"])
    prior = parse_prior({"kind": "dirichlet", "alpha": 1.0}, None).resolve(2, [2, 2])
    class_prob, feature_prob = draw_parameters(prior, rng)
    tables = draw_tables(class_prob, feature_prob, unit["n"], rng)
    truth = np.concatenate([class_prob, feature_prob.reshape(-1)])
    out = {m: [] for m in unit["methods"]}
    for eps in unit["epsilons"]:
        for _ in range(unit["noise_draws"]):
            release = release_from_tables(tables, [2, 2], unit["n"], eps, rng)
            for m in unit["methods"]:
                kwargs = {"confidential": {"tables": tables.tolist()}} if m == "non-private" else {}
                post = infer(release, prior={"kind": "dirichlet", "alpha": 1.0}, method=m, draws=500, chains=1,
                             seed=int(rng.integers(2 ** 31)), **kwargs)
                est = np.concatenate([post.mean("class_prob").reshape(-1), post.mean("feature_prob").reshape(-1)])
                out[m].append([eps, float(np.sum((est - truth) ** 2))])
    return out


def run_karwa_mse(ctx: Context) -> Result:
    ns = [50, 100, 200, 500] if ctx.full else [50, 500]
    epsilons = [1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    datasets, noise_draws = (10, 5) if ctx.full else (4, 2)
    methods = ["vb", "naive", "non-private"]
    units = [{"n": n, "epsilons": epsilons, "noise_draws": noise_draws, "methods": methods}
             for n in ns for _ in range(datasets)]
    for unit, seed in zip(units, _seeds(ctx, len(units))):
        unit["seed"] = seed
    results = _run_cells(ctx, _karwa_unit, units, "karwa-mse", "karwa-mse datasets")
    data = []
    for n in ns:
        for m in methods:
            arr = np.concatenate([np.asarray(r[m]) for u, r in zip(units, results) if u["n"] == n])
            for eps in epsilons:
                se = arr[np.isclose(arr[:, 0], eps), 1]
                data.append({"n": n, "method": m, "epsilon": eps, "median_se": float(np.median(se)),
                             "mean_se": float(np.mean(se)), "count": int(len(se))})
    rows = []
    for n in ns:
        for eps in epsilons:
            cell = {d["method"]: d for d in data if d["n"] == n and d["epsilon"] == eps}
            rows.append([n, f"{eps:g}", *(_g(cell[m]["median_se"]) for m in methods),
                         "yes" if cell["vb"]["median_se"] <= cell["naive"]["median_se"] else "no"])
    plt = _plt()
    fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 3.8), sharey=True, squeeze=False)
    colors = {"vb": "#1f77b4", "naive": "#d62728", "non-private": "#2ca02c"}
    for ax, n in zip(axes.flat, ns):
        for m in methods:
            ds = [d for d in data if d["n"] == n and d["method"] == m]
            ax.plot([d["epsilon"] for d in ds], [d["median_se"] for d in ds], "o-", color=colors[m], label=m, ms=4)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"N = {n}", fontsize=9)
        ax.set_xlabel("epsilon (per table)")
    axes[0, 0].set_ylabel("median squared error of posterior means")
    axes[0, 0].legend(fontsize=8)
    fig.suptitle(f"Karwa et al. Fig. 1: squared error vs epsilon ({datasets} datasets x {noise_draws} noise draws)",
                 fontsize=10)
    fig.tight_layout()
    notes = ["Paper (Sec. 5, Fig. 1, box plots only): " + "; ".join(PAPER["karwa-mse"]),
             "Naive Bayes with I = K = J = 2, uniform Dirichlet priors, parameters drawn from the prior per dataset, "
             "counts released with Laplace(2/epsilon) per table; squared error = sum over all parameters of "
             "(posterior mean - true value)^2."]
    return Result(fig, ["N", "epsilon", "median SE vb", "median SE naive", "median SE non-private", "vb <= naive"],
                  rows, notes, {"cells": data})
