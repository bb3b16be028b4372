"""Kazan & Reiter (003): Example 1 (blood lead, HPD of (mu, sigma^2)) and Fig. 2 (HPD coverage vs n)."""

from __future__ import annotations

import math

import numpy as np

from ._common import Context, PAPER, Result, _hdi, _plt, _run_cells, _seeds


# =============================================================================== Kazan & Reiter

KAZAN_PRIOR = {"kind": "normal-inverse-gamma", "mu0": 12.5, "sigma0_sq": 3.8 ** 2, "kappa0": 1.0, "nu0": 1.0}


def run_kazan_example1(ctx: Context) -> Result:
    from ..api import infer
    from ..families import gaussian

    release = gaussian.make_release(43, (0.0, 100.0), 34.30, 47.16 ** 2, 0.25, 0.25,
                                    description="Kazan & Reiter Example 1 (blood lead, NHANES)")
    draws = 50_000 if ctx.full else 5_000
    posts = {}
    for constrained in (True, False):
        ctx.say(f"kazan-example1: Gibbs sampler, constrained={constrained}, 4 x {draws} draws")
        posts[constrained] = infer(release, prior=KAZAN_PRIOR,
                                    method="gibbs", constrained=constrained, draws=draws, warmup=1000, chains=4,
                                    seed=ctx.seed)
    rows, data = [], {}
    for constrained in (True, False):
        mu = posts[constrained].draws("mu")
        s2 = posts[constrained].draws("sigma2")
        mu_hdi, s2_hdi = _hdi(mu), _hdi(s2)
        sigma_hdi = tuple(math.sqrt(max(v, 0.0)) for v in s2_hdi)
        tag = "constrained" if constrained else "unconstrained"
        data[tag] = {"mu_hdi": mu_hdi, "sigma2_hdi": s2_hdi, "mu_mean": float(mu.mean()),
                     "sigma2_mean": float(s2.mean())}
        p_mu, p_sigma = PAPER["kazan-example1"][("mu", constrained)], PAPER["kazan-example1"][("sigma", constrained)]
        rows.append([f"mu, {tag}", f"[{mu_hdi[0]:.1f}, {mu_hdi[1]:.1f}]", f"[{p_mu[0]}, {p_mu[1]}]"])
        rows.append([f"sigma^2, {tag}", f"[{sigma_hdi[0]:.1f}^2, {sigma_hdi[1]:.1f}^2]",
                     f"[{p_sigma[0]}^2, {p_sigma[1]}^2]"])
    plt = _plt()
    fig, axes = plt.subplots(2, 1, figsize=(7, 8), sharex=True)
    grid = np.linspace(0, 100, 400)
    for ax, constrained in zip(axes, (True, False)):
        mu, s2 = posts[constrained].draws("mu"), posts[constrained].draws("sigma2")
        step = max(1, len(mu) // 4000)
        ax.fill_between(grid, 0, grid * (100 - grid), color="0.88", label="feasible region (Theorem 2)")
        ax.scatter(mu[::step], s2[::step], s=2, alpha=0.3, color="#1f77b4", rasterized=True, label="posterior draws")
        ax.plot(34.30, 47.16 ** 2, "o", mfc="none", mec="red", ms=9, mew=2, label="released (34.30, 47.16^2)")
        ax.plot(32.08, 16.96 ** 2, "^", color="green", ms=8, label="unreleased (32.08, 16.96^2)")
        ax.plot(12.5, 3.8 ** 2, "s", color="purple", ms=7, label="prior (12.5, 3.8^2)")
        ax.set_ylim(0, 4000)
        ax.set_ylabel("sigma^2")
        ax.set_title("constrained" if constrained else "unconstrained", fontsize=10)
    axes[0].legend(fontsize=7, loc="upper right")
    axes[1].set_xlim(-40, 110)
    axes[1].set_xlabel("mu")
    fig.suptitle("Kazan & Reiter Example 1: joint posterior of (mu, sigma^2) (cf. Fig. 1)", fontsize=10)
    fig.tight_layout()
    notes = [f"NIG prior mu0 = 12.5, sigma0^2 = 3.8^2, kappa0 = nu0 = 1; 4 chains x {draws} draws after 1,000 "
             "warm-up (the paper: one chain of 5,000 iterations).",
             "Our sampler uses the correct sigma^2 full conditional under the stated NIG prior, "
             "IG((n+nu0+1)/2, ... + kappa0 (mu-mu0)^2 / 2); the paper's eqs. (38), (49), (54) drop the +1 and "
             "the kappa0 term (see docs and shared/papers/README.md), so its intervals are a guide, not "
             "the truth; they also come from 5,000 draws of a slowly mixing chain."]
    return Result(fig, ["95% HPD interval", "ours", "paper (Sec. 3.2)"], rows, notes, data)


def _kazan_coverage_unit(unit: dict) -> list:
    """Coverage and length of the 95% HPD interval of mu (Gibbs and naive) for a chunk of datasets,
    through the Gaussian engine's vectorised study (``diagnostics.gaussian_study.coverage_study``)."""
    from ..diagnostics.gaussian_study import coverage_study

    res = coverage_study(unit["mu"], math.sqrt(unit["sigma2"]), unit["n"], unit["epsilon"], unit["epsilon"],
                         unit["datasets"], constrained=unit["constrained"], chains=unit["chains"],
                         draws=unit["draws"], warmup=unit["warmup"],
                         seed=int(unit["seed"].generate_state(1)[0]))
    return np.column_stack([res.covered, res.length, res.naive_covered, res.naive_length]).astype(float).tolist()


def run_kazan_coverage(ctx: Context) -> Result:
    truths = [(0.1, 0.04 ** 2), (0.5, 0.2 ** 2)]
    ns = [10, 25, 50, 100, 250, 500, 1000] if ctx.full else [10, 50, 250, 1000]
    datasets = 10_000 if ctx.full else 400
    chunk = 500 if ctx.full else 200
    chains, draws, warmup = (4, 5_000, 1_000) if ctx.full else (4, 500, 300)
    cells = [(t, n, c) for t in truths for n in ns for c in (True, False)]
    units, index = [], []
    for cell in cells:
        for start in range(0, datasets, chunk):
            units.append({"mu": cell[0][0], "sigma2": cell[0][1], "n": cell[1], "constrained": cell[2],
                          "epsilon": 0.1, "datasets": min(chunk, datasets - start), "draws": draws,
                          "warmup": warmup, "chains": chains})
            index.append(cell)
    for unit, seed in zip(units, _seeds(ctx, len(units))):
        unit["seed"] = seed
    results = _run_cells(ctx, _kazan_coverage_unit, units, "kazan-coverage", "kazan-coverage datasets")
    table: dict = {}
    for cell, res in zip(index, results):
        table.setdefault(cell, []).extend(res)
    rows, data = [], []
    for (truth, n, constrained), res in table.items():
        arr = np.asarray(res)
        cov, length = arr[:, 0].mean(), arr[:, 1].mean()
        se = math.sqrt(max(cov * (1 - cov), 0.95 * 0.05) / len(arr))
        data.append({"mu": truth[0], "sigma2": truth[1], "n": n, "constrained": constrained,
                     "coverage": cov, "coverage_se": se, "length": length, "datasets": len(arr),
                     "naive_coverage": arr[:, 2].mean(), "naive_length": arr[:, 3].mean()})
    for d in sorted(data, key=lambda d: (d["mu"], d["constrained"], d["n"])):
        rows.append([f"mu={d['mu']}, sigma={math.sqrt(d['sigma2']):g}", d["n"],
                     "yes" if d["constrained"] else "no", f"{d['coverage']:.3f} +- {d['coverage_se']:.3f}",
                     f"{d['length']:.3f}", f"{d['naive_coverage']:.3f}"])
    plt = _plt()
    fig, axes = plt.subplots(2, 1, figsize=(7, 7), sharex=True)
    colors = {0.1: "#d62728", 0.5: "#1f77b4"}
    for truth in truths:
        for constrained in (True, False):
            ds = sorted((d for d in data if d["mu"] == truth[0] and d["constrained"] == constrained),
                        key=lambda d: d["n"])
            x = [d["n"] for d in ds]
            kw = {"color": colors[truth[0]], "ls": "-" if constrained else "--", "marker": "o", "ms": 4}
            label = f"N({truth[0]}, {math.sqrt(truth[1]):g}^2), {'constrained' if constrained else 'unconstrained'}"
            axes[0].errorbar(x, [d["coverage"] for d in ds], yerr=[2 * d["coverage_se"] for d in ds],
                             label=label, capsize=2, **kw)
            axes[1].plot(x, [d["length"] for d in ds], **kw)
    axes[0].axhline(0.95, color="k", lw=0.8)
    axes[0].set_ylabel("coverage of 95% HPD for mu")
    axes[0].legend(fontsize=7)
    axes[1].set_xscale("log")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("n")
    axes[1].set_ylabel("average HPD length")
    fig.suptitle(f"Kazan & Reiter Fig. 2 (flat prior, eps1 = eps2 = 0.1; {datasets} datasets per point)",
                 fontsize=10)
    fig.tight_layout()
    notes = ["Paper (Sec. 4, Fig. 2; figure only, 10,000 datasets per point): " + "; ".join(PAPER["kazan-coverage"]),
             f"Ours: {datasets} datasets per point (records N(mu, sigma^2) clamped to [0, 1]), {chains} chains x "
             f"{draws} draws after {warmup} warm-up per dataset; +- is one Monte Carlo standard error (error bars: "
             "two). The naive column ignores the noise (closed-form posterior of the noisy statistics)."]
    return Result(fig, ["truth", "n", "constrained", "coverage (ours)", "mean HPD length (ours)",
                        "naive coverage"], rows, notes, {"cells": data})
