"""``dpposterior reproduce``: one headline result of each of the five papers, rerun.

Each entry reruns a result with the engines of this package (through their public
functions: ``dpposterior.infer``, the families' ``simulate``/``make_release``, and
``diagnostics.calibration.calibrate``), and writes into ``OUT/NAME/``:

* ``figure.png`` -- the paper's figure, redrawn from our numbers;
* ``table.md``   -- our numbers beside the paper's (the paper's numbers are kept in
  this module, :data:`PAPER`, copied from the texts in ``shared/papers`` and the UCI
  README; where a paper gives a figure only, its stated claims are quoted);
* ``result.json`` -- every number behind the table.

Default scale finishes in minutes on a 2-core machine; ``--full`` is the paper's
scale.  Loops over cells and repeats go through ``checkpoint.run_units`` with the
``--scheduler`` backend and a checkpoint in ``OUT/NAME/``, so an interrupted
``reproduce`` continues where it stopped when rerun with the same options.

Papers: Kazan & Reiter (003, Example 1 and Fig. 2), Bernstein & Sheldon 2018 (001,
Fig. 1a), Karwa, Kifer & Slavkovic (002, Fig. 1), Alparslan, Yildirim & Birbil
(004, Fig. 2 and Table 1), Xiong, Ju & Zhang (000, Tables 2-4 and Fig. 1).
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .errors import InputError

# =============================================================================== the papers' numbers

PAPER: dict[str, Any] = {
    # Kazan & Reiter, Sec. 3.2 (Example 1): 95% HPD intervals, NIG prior mu0 = 12.5, sigma0 = 3.8,
    # kappa0 = nu0 = 1, bounds [0, 100], n = 43, eps1 = eps2 = 0.25; 5,000 Gibbs iterations.
    "kazan-example1": {
        ("mu", True): (1.9, 42.0), ("mu", False): (3.4, 48.2),
        ("sigma", True): (1.0, 39.3), ("sigma", False): (1.2, 50.8),   # sigma^2 HPD = these squared
    },
    # Kazan & Reiter, Sec. 4 / Fig. 2 (flat prior, eps1 = eps2 = 0.1, 10,000 datasets, 20,000 iterations):
    "kazan-coverage": [
        "unconstrained: coverage of the 95% HPD interval of mu about 0.95 at every n",
        "constrained: average interval length < 0.75 at every point",
        "unconstrained: average interval length > 1 for every n <= 50",
        "constrained, small n: coverage below 0.95 when mu = 0.1 (near the boundary), near 1 when mu = 0.5",
        "large n: constrained and unconstrained agree",
    ],
    # Bernstein & Sheldon 2018, Fig. 1a (figure only; claims from Sec. 4):
    "bernstein-calibration": [
        "Gibbs-SS is as calibrated as the non-private posterior (KS within noise) at every n and epsilon",
        "naive is badly miscalibrated when n * epsilon is small, and improves as n grows",
    ],
    # Karwa, Kifer & Slavkovic, Sec. 5 / Fig. 1 (figure only):
    "karwa-mse": [
        "the private VB estimator beats the naive estimator in squared error",
        "the VB error is still higher than the non-private estimator's",
        "gains of VB over naive are largest at very small epsilon and small N",
        "as epsilon grows the three estimators behave alike",
    ],
    # Alparslan, Yildirim & Birbil, Sec. 5.1 / Fig. 2 (n = 1e5; 50 runs):
    "alparslan-simulated": {
        "nonprivate_estimation_mse": {2: 2.92e-5, 5: 1.54e-5},
        "nonprivate_prediction_mse": {2: 9.60e-5, 5: 4.19e-5},
        "claims": [
            "MCMC-fixedS and Bayes-fixedS-fast outperform adaSSP and MCMC-B&S in almost all cases",
            "MCMC-normalX clearly ahead of MCMC-B&S at d = 2",
            "all methods improve as epsilon grows",
        ],
    },
    # Alparslan et al. Table 1 (prediction MSE at eps = 1, mean of 50 runs), via shared/data/uci/README.md
    "alparslan-uci": {
        (1, "PowerPlant"): {"mcmc-normalx": 0.0129, "mcmc-fixeds": 0.0129, "bayes-fixeds-fast": 0.0129,
                            "mcmc-bs": 0.0128, "adassp": 0.0139},
        (1, "BikeSharing"): {"mcmc-normalx": 0.0024, "mcmc-fixeds": 0.0021, "bayes-fixeds-fast": 0.0021,
                             "mcmc-bs": 0.0020, "adassp": 0.0107},
        (1, "AirQuality"): {"mcmc-normalx": 0.0060, "mcmc-fixeds": 0.0057, "bayes-fixeds-fast": 0.0057,
                            "mcmc-bs": 0.0062, "adassp": 0.0066},
        (5, "PowerPlant"): {"mcmc-normalx": 0.0133, "mcmc-fixeds": 0.0134, "bayes-fixeds-fast": 0.0134,
                            "mcmc-bs": 0.0136, "adassp": 0.0235},
        (5, "BikeSharing"): {"mcmc-normalx": 0.0174, "mcmc-fixeds": 0.0045, "bayes-fixeds-fast": 0.0045,
                             "mcmc-bs": 0.0086, "adassp": 0.0382},
        (5, "AirQuality"): {"mcmc-normalx": 0.0142, "mcmc-fixeds": 0.0100, "bayes-fixeds-fast": 0.0099,
                            "mcmc-bs": 0.0130, "adassp": 0.0227},
        (10, "PowerPlant"): {"mcmc-normalx": 0.0142, "mcmc-fixeds": 0.0143, "bayes-fixeds-fast": 0.0143,
                             "mcmc-bs": 0.0143, "adassp": 0.0351},
        (10, "BikeSharing"): {"mcmc-normalx": 0.0812, "mcmc-fixeds": 0.0082, "bayes-fixeds-fast": 0.0082,
                              "mcmc-bs": 0.0137, "adassp": 0.0526},
        (10, "AirQuality"): {"mcmc-normalx": 0.0985, "mcmc-fixeds": 0.0117, "bayes-fixeds-fast": 0.0117,
                             "mcmc-bs": 0.0216, "adassp": 0.0314},
    },
    # Xiong, Ju & Zhang, App. E.2 Tables 2-4: posterior mean (95% interval) of beta_0, beta_1, beta_2
    "xiong-linreg": {
        10.0: {"smc-abc": [(-0.59, -2.28, 0.93), (-2.44, -3.67, -0.38), (0.85, -0.88, 2.77)],
               "sppe": [(-0.51, -2.25, 1.07), (-2.40, -3.61, -0.30), (0.90, -0.89, 2.85)],
               "sple": [(-0.64, -2.31, 0.96), (-2.61, -3.65, -0.98), (0.64, -0.93, 2.48)],
               "da-mcmc": [(-0.62, -2.50, 0.99), (-2.72, -3.74, -0.96), (0.54, -1.06, 2.46)]},
        1.0: {"smc-abc": [(-0.80, -2.74, 1.17), (-0.83, -2.64, 1.23), (0.90, -1.00, 2.58)],
              "sppe": [(-0.93, -2.80, 1.04), (-0.90, -2.62, 0.97), (1.11, -0.71, 2.72)],
              "sple": [(-0.89, -2.69, 1.06), (-1.04, -2.82, 0.91), (1.25, -0.55, 2.88)],
              "da-mcmc": [(-1.00, -2.75, 0.85), (-0.96, -2.66, 0.89), (1.23, -0.76, 2.88)]},
        0.1: {"smc-abc": [(-0.09, -1.97, 1.93), (-0.10, -2.09, 1.95), (0.11, -1.90, 2.22)],
              "sppe": [(-0.12, -2.13, 1.73), (-0.12, -2.11, 1.83), (0.14, -1.81, 2.09)],
              "sple": [(-0.04, -2.01, 1.99), (-0.06, -2.00, 1.85), (0.12, -1.86, 2.09)],
              "da-mcmc": [(-0.12, -1.98, 1.77), (-0.13, -2.13, 1.88), (0.13, -1.91, 2.12)]},
    },
    # Xiong et al. Sec. 4.1 / Fig. 1 and App. Table 1 (SIR, eps = 10, N = 1000 simulations per round)
    "xiong-sir": {
        "truth": {"log_beta": -0.5, "log_gamma": -3.0},
        "claims": [
            "after round 1 SPPE finds the high-probability region; after 5 rounds SPPE and SPLE concentrate "
            "around the posterior mean and capture the beta-gamma correlation",
            "to reach MMD < 0.1 against SMC-ABC: SPPE needs 2.12 +- 0.71 thousand simulations (18.4 min), "
            "SPLE 5.40 +- 0.77 thousand (53.1 min), SMC-ABC 82.85 +- 1.03 thousand (115.4 min)",
        ],
    },
}


# =============================================================================== framework

@dataclass
class Context:
    full: bool
    out: Path
    scheduler: str
    quiet: bool
    seed: int = 20240601

    def say(self, text: str) -> None:
        if not self.quiet:
            print(text, file=sys.stderr, flush=True)


@dataclass
class Result:
    figure: Any                     # a matplotlib Figure
    header: list[str]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)
    data: dict = field(default_factory=dict)


@dataclass
class Entry:
    name: str
    paper: str
    what: str
    default_time: str
    full_time: str
    run: Callable[[Context], Result]


def _run_cells(ctx: Context, fn, units: list, name: str, description: str) -> list:
    """Checkpointed, resumable map of ``fn`` over ``units`` (the checkpoint is removed on success)."""
    from .checkpoint import run_units

    scale = "full" if ctx.full else "default"
    ck = ctx.out / f"checkpoint-{scale}.json"
    fingerprint = {"gallery": name, "scale": scale, "seed": ctx.seed, "units": len(units)}
    try:
        results = run_units(fn, units, scheduler=ctx.scheduler, checkpoint=ck, resume=True,
                            fingerprint=fingerprint, quiet=ctx.quiet, description=description)
    except InputError as exc:
        if exc.field != "resume":
            raise
        ck.unlink(missing_ok=True)  # a stale checkpoint of another version of this entry: start afresh
        results = run_units(fn, units, scheduler=ctx.scheduler, checkpoint=ck, resume=False,
                            fingerprint=fingerprint, quiet=ctx.quiet, description=description)
    ck.unlink(missing_ok=True)
    return results


def _seeds(ctx: Context, n: int):
    from .execution import spawn_seeds

    return spawn_seeds(ctx.seed, n)


def _hdi(x, prob: float = 0.95) -> tuple[float, float]:
    import arviz as az

    lo, hi = az.hdi(np.asarray(x, dtype=float).reshape(-1), hdi_prob=prob)
    return float(lo), float(hi)


def _g(x, digits: int = 3) -> str:
    if x is None:
        return "-"
    if isinstance(x, str):
        return x
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    return f"{x:.{digits}g}"


def _markdown(header, rows) -> str:
    lines = ["| " + " | ".join(str(h) for h in header) + " |", "|" + "---|" * len(header)]
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines) + "\n"


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


# =============================================================================== Kazan & Reiter

KAZAN_PRIOR = {"kind": "normal-inverse-gamma", "mu0": 12.5, "sigma0_sq": 3.8 ** 2, "kappa0": 1.0, "nu0": 1.0}


def run_kazan_example1(ctx: Context) -> Result:
    from .api import infer
    from .families import gaussian

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
    from .diagnostics.gaussian_study import coverage_study

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


# =============================================================================== Bernstein & Sheldon

def run_bernstein_calibration(ctx: Context) -> Result:
    from scipy import stats

    from .diagnostics import calibration

    families = ["binomial", "multinomial", "exponential"]
    ns = [10, 100, 1000, 10000] if ctx.full else [10, 100, 1000]
    epsilons = [0.01, 0.1]
    trials = 1000 if ctx.full else 200
    methods = ["gibbs-ss", "naive", "non-private"]
    data = []
    (ctx.out / "cells").mkdir(exist_ok=True)
    for fam in families:
        for eps in epsilons:
            for n in ns:
                ctx.say(f"bernstein-calibration: {fam}, n={n}, eps={eps}, {trials} trials")
                ck = ctx.out / "cells" / f"{fam}-n{n}-eps{eps}-{'full' if ctx.full else 'default'}.ckpt.json"
                # its own seed per cell; two checkpointed units per cell so two workers share it
                cell_seed = ctx.seed + 1000 * families.index(fam) + 100 * epsilons.index(eps) + ns.index(n)
                res = calibration.calibrate(fam, n, eps, trials, methods, None, cell_seed, None,
                                            scheduler=ctx.scheduler, quiet=ctx.quiet, resume=True, checkpoint=ck,
                                            chunk=math.ceil(trials / 2))
                data.append({"family": fam, "n": n, "epsilon": eps,
                             **{m: res["methods"][m]["ks"] for m in methods}})
    for p in (ctx.out / "cells").glob("*.ckpt.json"):
        p.unlink()
    (ctx.out / "cells").rmdir()
    ks95 = float(stats.kstwo(trials).ppf(0.95))
    rows = [[d["family"], d["n"], d["epsilon"], *(f"{d[m]:.3f}" for m in methods),
             "yes" if d["gibbs-ss"] <= ks95 else "no"] for d in data]
    plt = _plt()
    fig, axes = plt.subplots(len(epsilons), len(families), figsize=(11, 6.5), sharey=True, squeeze=False)
    colors = {"gibbs-ss": "#1f77b4", "naive": "#d62728", "non-private": "#2ca02c"}
    for i, eps in enumerate(epsilons):
        for j, fam in enumerate(families):
            ax = axes[i, j]
            ds = sorted((d for d in data if d["family"] == fam and d["epsilon"] == eps), key=lambda d: d["n"])
            for m in methods:
                ax.plot([d["n"] for d in ds], [d[m] for d in ds], "o-", color=colors[m], label=m, ms=4)
            ax.axhline(ks95, color="0.5", ls=":", label=f"95% null KS (T={trials})")
            ax.set_xscale("log")
            ax.set_title(f"{fam}, eps = {eps}", fontsize=9)
            if j == 0:
                ax.set_ylabel("KS statistic")
            if i == len(epsilons) - 1:
                ax.set_xlabel("n")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"Bernstein & Sheldon Fig. 1a: calibration (KS of posterior quantiles, {trials} trials per point)",
                 fontsize=10)
    fig.tight_layout()
    notes = ["Paper (Fig. 1a, figure only): " + "; ".join(PAPER["bernstein-calibration"]),
             f"'within noise' = KS below the 95% quantile of the KS statistic under exact calibration "
             f"({ks95:.3f} for {trials} trials); even an exact method lands above it in about 1 cell in 20 "
             "(see the non-private column). Headline coordinate: p (binomial), the first category "
             "(multinomial), the rate (exponential)."]
    return Result(fig, ["family", "n", "epsilon", "KS gibbs-ss", "KS naive", "KS non-private",
                        "gibbs-ss within noise"], rows, notes, {"cells": data, "ks95": ks95})


# =============================================================================== Karwa, Kifer & Slavkovic

def _karwa_unit(unit: dict) -> dict:
    from .families.naive_bayes import draw_parameters, draw_tables, parse_prior, release_from_tables
    from .api import infer

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


# =============================================================================== Alparslan, Yildirim & Birbil

ALPARSLAN_METHODS_DEFAULT = ["mcmc-fixeds", "bayes-fixeds-fast", "adassp"]
ALPARSLAN_METHODS_FULL = ["mcmc-normalx", "mcmc-fixeds", "bayes-fixeds-fast", "mcmc-bs", "adassp"]


def _point_estimate(post) -> np.ndarray:
    return np.asarray(post.mean("theta"), dtype=float).reshape(-1)


def _alparslan_sim_unit(unit: dict) -> dict:
    """One run of Sec. 5.1 at every epsilon: theta ~ N(0, I_d), Lambda = V'V (V iid N(0, 1)),
    Sigma_x ~ IW(Lambda, d + 1), x_i ~ N(0, Sigma_x), y = x' theta + N(0, 1); the bounds are the
    data's own maxima; inference with a = 20, b = 0.5, m = 0, C = b/(a-1) I and the same Lambda, kappa."""
    from scipy import stats as sps

    from .families.linear_regression import make_release
    from .api import infer

    rng = np.random.default_rng(unit["seed"])
    d, n = unit["d"], unit["n"]
    theta = rng.standard_normal(d)
    V = rng.standard_normal((d, d))
    lam = V.T @ V
    sigma_x = np.atleast_2d(sps.invwishart.rvs(df=d + 1, scale=lam, random_state=rng))
    X = rng.multivariate_normal(np.zeros(d), sigma_x, size=n)
    y = X @ theta + rng.standard_normal(n)
    parts = np.array_split(np.arange(n), unit["parties"])
    a, b = 20.0, 0.5
    prior = {"theta_mean": [0.0] * d, "theta_cov": (b / (a - 1) * np.eye(d)).tolist(), "a": a, "b": b,
             "iw_scale": lam.tolist(), "iw_df": float(d + 1)}
    out = {}
    for eps in unit["epsilons"]:
        release = make_release([X[p] for p in parts], [y[p] for p in parts], features=[f"x{k + 1}" for k in range(d)],
                               epsilon=eps, delta=1.0 / n, x_norm=float(np.max(np.linalg.norm(X, axis=1))),
                               y_abs=float(np.max(np.abs(y))), rng=rng)
        for m in unit["methods"]:
            post = infer(release, prior=prior, method=m, draws=unit["draws"], warmup=unit["warmup"],
                         chains=1, seed=int(rng.integers(2 ** 31)))
            err = _point_estimate(post) - theta
            # prediction error of the regression mean at x_test ~ N(0, Sigma_x): E[(x'(theta_hat - theta))^2]
            out.setdefault(m, []).append([eps, float(np.mean(err ** 2)), float(err @ sigma_x @ err)])
    return out


def run_alparslan_simulated(ctx: Context) -> Result:
    ds = [2, 5] if ctx.full else [2]
    js = [1, 5, 10] if ctx.full else [1, 5]
    epsilons = [0.1, 0.2, 0.5, 1, 2, 5, 10] if ctx.full else [0.1, 1, 10]
    repeats = 50 if ctx.full else 4
    methods = ALPARSLAN_METHODS_FULL if ctx.full else ALPARSLAN_METHODS_DEFAULT
    draws, warmup = (5000, 1000) if ctx.full else (1000, 300)
    units = [{"d": d, "parties": j, "n": 100_000, "epsilons": epsilons, "methods": methods, "draws": draws,
              "warmup": warmup} for d in ds for j in js for _ in range(repeats)]
    for unit, seed in zip(units, _seeds(ctx, len(units))):
        unit["seed"] = seed
    results = _run_cells(ctx, _alparslan_sim_unit, units, "alparslan-simulated", "alparslan-simulated runs")
    data = []
    for d in ds:
        for j in js:
            for m in methods:
                arr = np.concatenate([np.asarray(r[m]) for u, r in zip(units, results)
                                      if u["d"] == d and u["parties"] == j])
                for eps in epsilons:
                    sel = np.isclose(arr[:, 0], eps)
                    data.append({"d": d, "J": j, "method": m, "epsilon": eps, "mse": float(np.mean(arr[sel, 1])),
                                 "prediction_mse": float(np.mean(arr[sel, 2]))})
    rows = []
    for d in ds:
        for j in js:
            for eps in epsilons:
                cell = {x["method"]: x for x in data if x["d"] == d and x["J"] == j and x["epsilon"] == eps}
                rows.append([d, j, f"{eps:g}", *(f"{_g(cell[m]['mse'])} / {_g(cell[m]['prediction_mse'])}"
                                                 for m in methods)])
    plt = _plt()
    fig, axes = plt.subplots(len(ds), len(js), figsize=(4.5 * len(js), 3.6 * len(ds)), squeeze=False)
    for a, d in enumerate(ds):
        for b, j in enumerate(js):
            ax = axes[a, b]
            for m in methods:
                xs = [x for x in data if x["d"] == d and x["J"] == j and x["method"] == m]
                ax.plot([x["epsilon"] for x in xs], [x["mse"] for x in xs], "o-", label=m, ms=4)
            ax.axhline(PAPER["alparslan-simulated"]["nonprivate_estimation_mse"][d], color="0.5", ls=":",
                       label="paper: non-private")
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_title(f"d = {d}, J = {j}", fontsize=9)
            ax.set_xlabel("epsilon")
            ax.set_ylabel("estimation MSE")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"Alparslan et al. Fig. 2 (estimation): n = 1e5, {repeats} runs per point", fontsize=10)
    fig.tight_layout()
    notes = ["Paper (Sec. 5.1, Fig. 2): " + "; ".join(PAPER["alparslan-simulated"]["claims"])
             + "; non-private estimation MSE 2.92e-5 (d = 2), 1.54e-5 (d = 5).",
             "Cells: estimation MSE (mean over coefficients of (posterior mean - theta)^2) / prediction MSE of the "
             "regression mean, E[(x'(theta_hat - theta))^2] over x ~ N(0, Sigma_x) (exact, from the known Sigma_x). "
             "Data as in Sec. 5.1: theta ~ N(0, I), Lambda = V'V, Sigma_x ~ IW(Lambda, d+1), sigma_y^2 = 1; "
             "bounds = the data's maxima; prior a = 20, b = 0.5, C = b/(a-1) I."]
    return Result(fig, ["d", "J", "epsilon", *(f"{m}: estimation / prediction MSE" for m in methods)], rows, notes,
                  {"cells": data})


UCI_FILES = {"PowerPlant": "power_plant_energy.csv", "BikeSharing": "bike_sharing.csv",
             "AirQuality": "air_quality.csv"}


def uci_data_dir() -> Path:
    """``$DPPOSTERIOR_UCI_DIR`` or the shared copy beside the repository (../shared/data/uci)."""
    import os

    env = os.environ.get("DPPOSTERIOR_UCI_DIR")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "shared" / "data" / "uci"
        if cand.is_dir():
            return cand
    return Path("/work/shared/data/uci")


def load_uci(name: str):
    """(X_train, y_train, X_test, y_test) prepared as the paper's code does (shared/data/uci/README.md)."""
    import pandas as pd

    path = uci_data_dir() / UCI_FILES[name]
    if not path.exists():
        raise InputError("data", f"UCI file not found: {path} (set DPPOSTERIOR_UCI_DIR)")
    frame = pd.read_csv(path, header=None)
    frame = frame.dropna(axis=1, how="all").dropna(axis=0, how="all")  # air_quality's empty fields/lines
    values = frame.to_numpy(dtype=float)
    values = np.nan_to_num(values, nan=0.0)
    X, y = values[:, :-1], values[:, -1]
    sd = X.std(axis=0, ddof=1)
    X = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
    y = y - y.mean()
    y = y / np.max(np.abs(y))
    n_train = math.ceil(0.8 * len(y))
    return X[:n_train], y[:n_train], X[n_train:], y[n_train:]


def _alparslan_uci_unit(unit: dict) -> dict:
    from .families.linear_regression import make_release
    from .api import infer

    Xtr, ytr, Xte, yte = load_uci(unit["dataset"])
    rng = np.random.default_rng(unit["seed"])
    d = Xtr.shape[1]
    a, b = 20.0, 0.5
    prior = {"theta_mean": [0.0] * d, "theta_cov": (b / (a - 1.0) * np.eye(d)).tolist(), "a": a, "b": b}
    parts = np.array_split(np.arange(len(ytr)), unit["parties"])
    release = make_release([Xtr[p] for p in parts], [ytr[p] for p in parts],
                           features=[f"x{k + 1}" for k in range(d)], epsilon=1.0, delta=1.0 / len(ytr),
                           x_norm=float(np.max(np.linalg.norm(Xtr, axis=1))), y_abs=float(np.max(np.abs(ytr))),
                           rng=rng)
    out = {}
    for m in unit["methods"]:
        post = infer(release, prior=prior, method=m, draws=unit["draws"], warmup=unit["warmup"], chains=1,
                     seed=int(rng.integers(2 ** 31)))
        theta = _point_estimate(post)
        out[m] = float(np.mean((yte - Xte @ theta) ** 2))
    return out


def run_alparslan_uci(ctx: Context) -> Result:
    datasets = list(UCI_FILES) if ctx.full else ["PowerPlant", "AirQuality"]
    js = [1, 5, 10]
    runs = 50 if ctx.full else 3
    methods = ALPARSLAN_METHODS_FULL if ctx.full else ALPARSLAN_METHODS_DEFAULT
    draws, warmup = (5000, 1000) if ctx.full else (1000, 300)
    for name in datasets:  # fail early, with one line, if the data are missing
        if not (uci_data_dir() / UCI_FILES[name]).exists():
            raise InputError("data", f"UCI file not found: {uci_data_dir() / UCI_FILES[name]} "
                                     "(set DPPOSTERIOR_UCI_DIR)")
    units = [{"dataset": name, "parties": j, "methods": methods, "draws": draws, "warmup": warmup}
             for j in js for name in datasets for _ in range(runs)]
    for unit, seed in zip(units, _seeds(ctx, len(units))):
        unit["seed"] = seed
    results = _run_cells(ctx, _alparslan_uci_unit, units, "alparslan-uci", "alparslan-uci runs")
    rows, data = [], []
    for j in js:
        for name in datasets:
            rs = [r for u, r in zip(units, results) if u["dataset"] == name and u["parties"] == j]
            paper = PAPER["alparslan-uci"][(j, name)]
            cells = []
            for m in methods:
                ours = float(np.mean([r[m] for r in rs]))
                data.append({"J": j, "dataset": name, "method": m, "mse": ours, "paper": paper[m], "runs": len(rs)})
                cells.append(f"{ours:.4f} ({paper[m]:.4f})")
            rows.append([j, name, *cells])
    plt = _plt()
    fig, axes = plt.subplots(1, len(datasets), figsize=(5 * len(datasets), 3.8), squeeze=False)
    for ax, name in zip(axes.flat, datasets):
        width = 0.8 / len(methods)
        for k, m in enumerate(methods):
            xs = np.arange(len(js)) + k * width
            ours = [x["mse"] for x in data if x["dataset"] == name and x["method"] == m]
            paper = [x["paper"] for x in data if x["dataset"] == name and x["method"] == m]
            ax.bar(xs, ours, width=width, label=m)
            ax.plot(xs, paper, "k_", ms=12, mew=2, label="paper" if k == 0 else None)
        ax.set_xticks(np.arange(len(js)) + 0.4 - width / 2)
        ax.set_xticklabels([f"J = {j}" for j in js])
        ax.set_yscale("log")
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("test prediction MSE")
    axes[0, 0].legend(fontsize=7)
    fig.suptitle(f"Alparslan et al. Table 1 at epsilon = 1 (bars: ours, {runs} runs; black ticks: paper, 50 runs)",
                 fontsize=10)
    fig.tight_layout()
    notes = ["Cells: ours (paper). Data prepared as in shared/data/uci/README.md (z-scored features, "
             "response centred and scaled to |y| <= 1, first 80% of rows for training, delta = 1/n_train, prior "
             "a = 20, b = 0.5, C = b/(a-1) I)."]
    return Result(fig, ["J", "data set", *methods], rows, notes, {"cells": data})


# =============================================================================== Xiong, Ju & Zhang

def _examples_dir() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "examples" / "releases"
        if cand.is_dir():
            return cand
    raise InputError("engine", "the example releases (examples/releases) are not available in this installation")


def _xiong_linreg_unit(unit: dict) -> dict:
    from .api import infer

    path = _examples_dir() / f"linreg-ju-eps{unit['epsilon']:g}.json"
    kwargs = {"simulations": unit["simulations"]}
    if unit["method"] != "smc-abc":
        kwargs["rounds"] = unit["rounds"]
    post = infer(path, method=unit["method"], seed=unit["seed_int"], draws=unit["draws"], **kwargs)
    beta = post.draws("beta")
    out = []
    for k in range(beta.shape[1]):
        lo, hi = np.quantile(beta[:, k], [0.025, 0.975])  # the paper's intervals are equal-tailed
        out.append([float(beta[:, k].mean()), float(lo), float(hi)])
    return {"beta": out}


def run_xiong_linreg(ctx: Context) -> Result:
    epsilons = [10.0, 1.0, 0.1]
    if ctx.full:
        plan = {"smc-abc": {"simulations": 200_000}, "sppe": {"simulations": 1000, "rounds": 10},
                "sple": {"simulations": 1000, "rounds": 10}}
    else:
        plan = {"smc-abc": {"simulations": 20_000}, "sppe": {"simulations": 500, "rounds": 3}}
    units = [{"epsilon": eps, "method": m, "draws": 2000, "rounds": p.get("rounds"),
              "simulations": p["simulations"]} for eps in epsilons for m, p in plan.items()]
    for k, unit in enumerate(units):
        unit["seed_int"] = ctx.seed + k
    results = _run_cells(ctx, _xiong_linreg_unit, units, "xiong-linreg", "xiong-linreg posteriors")
    rows, data = [], []
    for unit, res in zip(units, results):
        paper = PAPER["xiong-linreg"][unit["epsilon"]][unit["method"]]
        diffs = [abs(ours[0] - ref[0]) for ours, ref in zip(res["beta"], paper)]
        data.append({**{k: unit[k] for k in ("epsilon", "method", "simulations", "rounds")}, "beta": res["beta"],
                     "paper": paper, "max_abs_mean_diff": max(diffs)})
        cells = [f"{o[0]:.2f} ({o[1]:.2f}, {o[2]:.2f}) / {p[0]:.2f} ({p[1]:.2f}, {p[2]:.2f})"
                 for o, p in zip(res["beta"], paper)]
        rows.append([f"{unit['epsilon']:g}", unit["method"], *cells, f"{max(diffs):.2f}"])
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharey=True)
    methods = list(plan)
    for ax, eps in zip(axes, epsilons):
        for k, m in enumerate(methods):
            d = next(x for x in data if x["epsilon"] == eps and x["method"] == m)
            for c in range(3):
                y = c * (len(methods) + 1) + k
                ours, ref = d["beta"][c], d["paper"][c]
                ax.errorbar(ours[0], y, xerr=[[ours[0] - ours[1]], [ours[2] - ours[0]]], fmt="o",
                            color=f"C{k}", label=f"{m} (ours)" if c == 0 else None)
                ax.errorbar(ref[0], y + 0.35, xerr=[[ref[0] - ref[1]], [ref[2] - ref[0]]], fmt="s", mfc="none",
                            color=f"C{k}", alpha=0.6, label=f"{m} (paper)" if c == 0 else None)
        ax.set_yticks([c * (len(methods) + 1) + (len(methods) - 1) / 2 for c in range(3)])
        ax.set_yticklabels(["beta_0", "beta_1", "beta_2"])
        ax.set_title(f"epsilon = {eps:g}", fontsize=9)
        ax.axvline(0, color="0.8", lw=0.8)
    axes[0].legend(fontsize=7, loc="lower left")
    fig.suptitle("Xiong et al. Tables 2-4: posterior means and 95% intervals of beta (ours vs paper)", fontsize=10)
    fig.tight_layout()
    notes = ["Cells: ours / paper, mean (2.5%, 97.5%). Budgets: "
             + "; ".join(f"{m}: {p['simulations']} simulations" + (f" x {p['rounds']} rounds" if "rounds" in p else "")
                         for m, p in plan.items())
             + ". The issue's target is |mean difference| <= 0.2 at the paper's budgets (--full)."]
    return Result(fig, ["epsilon", "method", "beta_0 ours / paper", "beta_1 ours / paper", "beta_2 ours / paper",
                        "max abs mean diff"], rows, notes, {"cells": data})


def run_xiong_sir(ctx: Context) -> Result:
    path = _examples_dir() / "sir-eps10.json"
    if not path.exists():
        raise InputError("engine", f"the SIR example release {path} is not available in this version")
    rounds, sims = (10, 1000) if ctx.full else (3, 300)
    t0 = time.perf_counter()
    ctx.say(f"xiong-sir: SPPE, {rounds} rounds x {sims} simulations")
    from .api import infer

    post = infer(path, method="sppe", simulations=sims, rounds=rounds,
                  draws=4000, seed=ctx.seed, quiet=ctx.quiet, scheduler=ctx.scheduler)
    seconds = time.perf_counter() - t0
    truth = PAPER["xiong-sir"]["truth"]
    rows, data = [], {"seconds": seconds, "rounds": rounds, "simulations_per_round": sims}
    for var in ("log_beta", "log_gamma", "R0"):
        if var not in post.posterior:
            continue
        x = post.draws(var).reshape(-1)
        lo, hi = np.quantile(x, [0.025, 0.975])
        ref = truth.get(var)
        if var == "R0":
            ref = math.exp(truth["log_beta"] - truth["log_gamma"])
        data[var] = {"mean": float(x.mean()), "q025": float(lo), "q975": float(hi), "truth": ref}
        rows.append([var, f"{x.mean():.3f} ({lo:.3f}, {hi:.3f})", _g(ref),
                     "yes" if lo <= ref <= hi else "no"])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(6, 5))
    lb, lg = post.draws("log_beta").reshape(-1), post.draws("log_gamma").reshape(-1)
    ax.scatter(lb[::2], lg[::2], s=3, alpha=0.3, label=f"SPPE posterior ({rounds} x {sims} simulations)",
               rasterized=True)
    ax.plot(truth["log_beta"], truth["log_gamma"], "k*", ms=12, label="true parameter")
    ax.set_xlabel("log beta")
    ax.set_ylabel("log gamma")
    ax.legend(fontsize=8)
    ax.set_title("Xiong et al. Fig. 1-A: SIR posterior given the DP trajectory (epsilon = 10)", fontsize=9)
    fig.tight_layout()
    notes = ["Paper (Sec. 4.1, Fig. 1 and App. Table 1): " + "; ".join(PAPER["xiong-sir"]["claims"]),
             f"Ours: SPPE, {rounds} rounds x {sims} simulations, {seconds:.0f} s wall clock. The per-round MMD "
             "against a long SMC-ABC reference (Fig. 1-B) is in benchmarks/sbi_convergence.py (issue 6)."]
    return Result(fig, ["parameter", "ours: mean (95% interval)", "true value", "truth inside"], rows, notes, data)


# Xiong et al. Sec. 4 / Fig. 2 and App. E.1.2: five real outbreaks, released at epsilon = 10
# (M = m = 100, N = 100, L = 10).  Fig. 2-B is a figure only; the text quotes typical R0 ranges.
OUTBREAKS = [("flu", "influenza (boarding school)", "influenza"),
             ("ebola-guinea", "Ebola, Guinea", "ebola"),
             ("ebola-liberia", "Ebola, Liberia", "ebola"),
             ("ebola-sierra-leone", "Ebola, Sierra Leone", "ebola"),
             ("covid-clark", "COVID-19, Clark County NV", "covid")]
PAPER["xiong-outbreaks"] = {
    "r0_ranges": {"ebola": (1.51, 2.53), "covid": (1.5, 3.5), "influenza": (0.9, 2.1)},
    "claims": [
        "SPPE converges faster than SPLE with the same computational resources (Fig. 2-A)",
        "the R0 estimates from the private data are consistent with the typical ranges (Eisenberg 2020): "
        "Ebola 1.51-2.53, COVID-19 1.5-3.5; the exception is the flu outbreak (typical 0.9-2.1), which "
        "should be modelled by the SI model instead of SIR",
        "a non-DP baseline (black stars in Fig. 2-B) from the solution of the ODEs",
    ],
}
OUTBREAK_METHOD_COLORS = {"smc-abc": "0.5", "sppe": "tab:orange", "sple": "tab:red"}


def flu_boarding_school():
    """The public boarding-school influenza data shipped with the package: (days, cases, K)."""
    import pandas as pd

    path = Path(__file__).resolve().parent / "data" / "flu_boarding_school.csv"
    if not path.exists():
        raise InputError("data", f"the boarding-school influenza data ({path}) are not installed")
    frame = pd.read_csv(path, comment="#")
    return frame["day"].to_numpy(float), frame["cases"].to_numpy(float), 763


def sir_ode_fit(times, infected, population: int, initial_infected: float = 1.0) -> dict:
    """Least-squares fit of the deterministic SIR ODE, I(0) = ``initial_infected`` at t = 0, to
    counts ``infected`` at ``times``: dS/dt = -beta S I / K, dI/dt = beta S I / K - gamma I.
    Multi-start (a 4 x 4 grid of log beta, log gamma); returns beta, gamma, R0 and the fitted curve."""
    from scipy.integrate import solve_ivp
    from scipy.optimize import least_squares

    t = np.asarray(times, float)
    y = np.asarray(infected, float)
    k = float(population)

    def curve(p):
        b, g = np.exp(p)
        sol = solve_ivp(lambda _, u: [-b * u[0] * u[1] / k, b * u[0] * u[1] / k - g * u[1]], (0.0, t[-1]),
                        [k - initial_infected, initial_infected], t_eval=t, rtol=1e-8, atol=1e-8,
                        method="LSODA")
        return sol.y[1] if sol.success and sol.y.shape[1] == t.size else np.full(t.size, 1e12)

    best = None
    for lb in np.linspace(-3.0, 1.5, 4):
        for lg in np.linspace(-4.0, 0.5, 4):
            res = least_squares(lambda p: curve(p) - y, [lb, lg])
            if best is None or res.cost < best.cost:
                best = res
    b, g = np.exp(best.x)
    return {"beta": float(b), "gamma": float(g), "R0": float(b / g), "fitted": curve(best.x).tolist(),
            "rmse": float(np.sqrt(np.mean((curve(best.x) - y) ** 2)))}


def _xiong_outbreak_unit(unit: dict) -> dict:
    from .api import infer

    path = _examples_dir() / f"sir-{unit['release']}-eps10.json"
    kwargs = {"simulations": unit["simulations"]}
    if unit["method"] != "smc-abc":
        kwargs["rounds"] = unit["rounds"]
        if unit.get("max_epochs"):
            kwargs["max_epochs"] = unit["max_epochs"]
    t0 = time.perf_counter()
    post = infer(path, method=unit["method"], seed=unit["seed_int"], draws=unit["draws"], chains=1, **kwargs)
    out = {"seconds": time.perf_counter() - t0}
    lb, lg = post.draws("log_beta").reshape(-1), post.draws("log_gamma").reshape(-1)
    for name, x in (("beta", np.exp(lb)), ("gamma", np.exp(lg)), ("R0", post.draws("R0").reshape(-1)),
                    ("log_beta", lb), ("log_gamma", lg)):
        lo, hi = np.quantile(x, [0.025, 0.975])  # equal-tailed, as the paper's intervals
        out[name] = [float(x.mean()), float(lo), float(hi)]
    step = max(1, lb.size // 400)
    out["draws"] = [lb[::step].round(4).tolist(), lg[::step].round(4).tolist()]
    return out


def run_xiong_outbreaks(ctx: Context) -> Result:
    if ctx.full:  # the paper: 10 rounds x 1,000 simulations; SMC-ABC up to 5e5 simulations (Sec. 4.1)
        plan = {"smc-abc": {"simulations": 200_000}, "sppe": {"simulations": 1000, "rounds": 10},
                "sple": {"simulations": 1000, "rounds": 10}}
    else:
        plan = {"smc-abc": {"simulations": OUTBREAK_DEFAULT["smc-abc"]},
                "sppe": {"simulations": OUTBREAK_DEFAULT["sppe"][0], "rounds": OUTBREAK_DEFAULT["sppe"][1]},
                "sple": {"simulations": OUTBREAK_DEFAULT["sple"][0], "rounds": OUTBREAK_DEFAULT["sple"][1]}}
        for m in ("sppe", "sple"):
            plan[m]["max_epochs"] = OUTBREAK_MAX_EPOCHS
    for key, _, _ in OUTBREAKS:
        if not (_examples_dir() / f"sir-{key}-eps10.json").exists():
            raise InputError("engine", f"the outbreak release sir-{key}-eps10.json is not available in this version")
    units = [{"release": key, "method": m, "draws": OUTBREAK_DRAWS if not ctx.full else 4000, "rounds": p.get("rounds"), "simulations": p["simulations"],
              "max_epochs": p.get("max_epochs")} for key, _, _ in OUTBREAKS for m, p in plan.items()]
    for k, unit in enumerate(units):
        unit["seed_int"] = ctx.seed + k
    results = _run_cells(ctx, _xiong_outbreak_unit, units, "xiong-outbreaks", "xiong-outbreaks posteriors")

    # non-private baseline: the deterministic SIR ODE fitted to the public boarding-school counts
    days, cases, k_flu = flu_boarding_school()
    ode = sir_ode_fit(days, cases, k_flu)
    ranges = PAPER["xiong-outbreaks"]["r0_ranges"]
    rows, data = [], {"cells": [], "ode_flu": ode, "plan": plan}
    fmt = lambda v: f"{v[0]:.3g} ({v[1]:.3g}, {v[2]:.3g})"  # noqa: E731
    for unit, res in zip(units, results):
        label, disease = next((lab, dis) for key, lab, dis in OUTBREAKS if key == unit["release"])
        lo, hi = ranges[disease]
        overlap = res["R0"][1] <= hi and res["R0"][2] >= lo
        inside = lo <= res["R0"][0] <= hi
        data["cells"].append({**{k: unit[k] for k in ("release", "method", "simulations", "rounds")}, **res,
                              "typical_r0": [lo, hi], "mean_in_range": inside, "interval_overlaps_range": overlap})
        rows.append([label, unit["method"], fmt(res["beta"]), fmt(res["gamma"]), fmt(res["R0"]),
                     f"{lo}-{hi}", "yes" if inside else "no",
                     f"{ode['R0']:.2f}" if unit["release"] == "flu" else "-"])

    plt = _plt()
    fig = plt.figure(figsize=(15, 7.5))
    grid = fig.add_gridspec(2, len(OUTBREAKS), height_ratios=[1, 1])
    for j, (key, label, _) in enumerate(OUTBREAKS):
        ax = fig.add_subplot(grid[0, j])
        for unit, res in zip(units, results):
            if unit["release"] == key:
                ax.scatter(res["draws"][0], res["draws"][1], s=3, alpha=0.35, color=OUTBREAK_METHOD_COLORS[unit["method"]],
                           label=unit["method"], rasterized=True)
        if key == "flu":
            ax.plot(math.log(ode["beta"]), math.log(ode["gamma"]), "k*", ms=11, label="ODE, public data")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("log beta")
        if j == 0:
            ax.set_ylabel("log gamma")
            ax.legend(fontsize=7, markerscale=1.5)
    ax = fig.add_subplot(grid[1, :])
    methods = list(plan)
    for j, (key, label, disease) in enumerate(OUTBREAKS):
        lo, hi = ranges[disease]
        ax.fill_between([j - 0.4, j + 0.4], lo, hi, color="0.9", label="typical R0 range (paper)" if j == 0 else None)
        for k, m in enumerate(methods):
            res = next(r for u, r in zip(units, results) if u["release"] == key and u["method"] == m)
            x = j + (k - 1) * 0.22
            ax.errorbar(x, res["R0"][0], yerr=[[res["R0"][0] - res["R0"][1]], [res["R0"][2] - res["R0"][0]]],
                        fmt="o", color=OUTBREAK_METHOD_COLORS[m], capsize=3, label=m if j == 0 else None)
        if key == "flu":
            ax.plot(j, ode["R0"], "k*", ms=12, label="non-DP baseline (ODE fit, public counts)")
    ax.set_xticks(range(len(OUTBREAKS)))
    ax.set_xticklabels([lab for _, lab, _ in OUTBREAKS], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("R0 = beta / gamma (mean, 95% interval)")
    ax.legend(fontsize=7, ncol=3)
    scale = "full" if ctx.full else "reduced"
    fig.suptitle(f"Xiong et al. Fig. 2 (ours, {scale} scale): A. posteriors of (log beta, log gamma) given the "
                 "printed private curves (epsilon = 10); B. R0", fontsize=10)
    fig.tight_layout()
    budget = "; ".join(f"{m}: {p['simulations']} simulations" + (f" x {p['rounds']} rounds" if "rounds" in p else "")
                       + (f" (at most {p['max_epochs']} epochs per round)" if p.get("max_epochs") else "")
                       for m, p in plan.items())
    notes = ["Paper (Sec. 4, Fig. 2, App. E.1.2; figure only): " + "; ".join(PAPER["xiong-outbreaks"]["claims"]),
             f"Ours: {budget}; prior of App. E.1 (log beta ~ N(log 0.4, 0.5), log gamma ~ N(log 0.125, 0.2)); "
             "cells: posterior mean (2.5%, 97.5%); 'mean in range' compares the R0 mean with the typical range.",
             f"Non-private baseline (flu): deterministic SIR ODE least-squares fit to the public counts of days 1-14 "
             f"(K = 763, I(0) = 1): beta = {ode['beta']:.3f}/day, gamma = {ode['gamma']:.3f}/day, "
             f"R0 = {ode['R0']:.2f} (RMSE {ode['rmse']:.1f} boys).",
             "The printed flu values are the public counts of days 1-9 divided by K = 763 (3/763, 8/763, 28/763, ...), "
             "not Binomial(100, (I + 100)/963)/100 draws (those are >= ~0.06): under the stated mechanism the flu "
             "release is far outside what the model can produce; see docs/sbi.md."]
    header = ["outbreak", "method", "beta", "gamma", "R0", "typical R0 (paper)", "R0 mean in range",
              "non-DP ODE R0"]
    return Result(fig, header, rows, notes, data)


#: reduced (default) budgets of xiong-outbreaks: SMC-ABC simulations; SPPE/SPLE (simulations per round, rounds)
OUTBREAK_DEFAULT = {"smc-abc": 5_000, "sppe": (200, 2), "sple": (150, 2)}
#: posterior draws kept per fit
OUTBREAK_DRAWS = 1000
#: reduced scale: at most this many training epochs per round (the paper: early stopping only, patience 20)
OUTBREAK_MAX_EPOCHS = 60


# =============================================================================== registry and command

ENTRIES: dict[str, Entry] = {e.name: e for e in [
    Entry("kazan-example1", "Kazan & Reiter, Example 1 / Fig. 1",
          "blood-lead release: 95% HPD of (mu, sigma^2), constrained and not", "~15 s", "~3 min",
          run_kazan_example1),
    Entry("kazan-coverage", "Kazan & Reiter, Fig. 2", "coverage and length of 95% HPD for mu vs n",
          "~5 min", "many hours (10,000 datasets per point)", run_kazan_coverage),
    Entry("bernstein-calibration", "Bernstein & Sheldon 2018, Fig. 1a",
          "KS calibration of Gibbs-SS, naive, non-private vs n and epsilon", "~5 min", "~1 h",
          run_bernstein_calibration),
    Entry("karwa-mse", "Karwa, Kifer & Slavkovic, Fig. 1", "squared error of VB, naive, non-private vs epsilon",
          "~1 min", "~10 min", run_karwa_mse),
    Entry("alparslan-simulated", "Alparslan, Yildirim & Birbil, Fig. 2",
          "estimation MSE vs epsilon, n = 1e5", "~30 s", "several hours", run_alparslan_simulated),
    Entry("alparslan-uci", "Alparslan, Yildirim & Birbil, Table 1", "prediction MSE on UCI data at epsilon = 1",
          "~30 s", "~1-2 h", run_alparslan_uci),
    Entry("xiong-linreg", "Xiong, Ju & Zhang, Tables 2-4", "posterior means and 95% intervals of beta, 3 epsilons",
          "~10 min", "~1-2 h", run_xiong_linreg),
    Entry("xiong-sir", "Xiong, Ju & Zhang, Fig. 1", "SIR posterior from a DP infection trajectory (SPPE)",
          "~3 min", "~30 min", run_xiong_sir),
    Entry("xiong-outbreaks", "Xiong, Ju & Zhang, Fig. 2", "R0 of five real outbreaks from DP infection curves "
          "(SMC-ABC, SPPE, SPLE)", "~12 min", "many hours", run_xiong_outbreaks),
]}


def list_entries() -> str:
    width = max(len(n) for n in ENTRIES)
    lines = [f"{'name':<{width}}  {'default':>8}  {'--full':<38}  reproduces"]
    for e in ENTRIES.values():
        lines.append(f"{e.name:<{width}}  {e.default_time:>8}  {e.full_time:<38}  {e.paper}: {e.what}")
    lines.append("(times: wall clock on a 2-core machine; the defaults were measured while it was shared, "
                 "see docs/gallery.md)")
    return "\n".join(lines)


def run_entry(name: str, out, full: bool = False, scheduler: str = "processes", quiet: bool = True) -> dict:
    """Run one gallery entry; writes OUT/NAME/{figure.png, table.md, result.json}; returns the result dict."""
    from .checkpoint import atomic_write_json
    from .execution import check_scheduler

    if name not in ENTRIES:
        raise InputError("name", f"unknown gallery entry {name!r} (one of: {', '.join(ENTRIES)})")
    check_scheduler(scheduler)
    entry = ENTRIES[name]
    folder = Path(out) / name
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError("out", f"cannot create folder {folder} ({exc.strerror})") from None
    ctx = Context(full=full, out=folder, scheduler=scheduler, quiet=quiet)
    t0 = time.perf_counter()
    result = entry.run(ctx)
    seconds = time.perf_counter() - t0
    plt = _plt()
    result.figure.savefig(folder / "figure.png", dpi=100)
    plt.close(result.figure)
    scale = "full (--full)" if full else "default"
    md = [f"# {entry.name}: {entry.paper}", "", f"{entry.what}. Scale: {scale}; run time {seconds:.0f} s "
          f"(scheduler {scheduler}).", "", "![figure](figure.png)", "", _markdown(result.header, result.rows)]
    md += [f"- {note}" for note in result.notes]
    (folder / "table.md").write_text("\n".join(md) + "\n")
    payload = {"name": name, "paper": entry.paper, "full": full, "seconds": seconds, "header": result.header,
               "rows": [[str(c) for c in row] for row in result.rows], "notes": result.notes, "data": result.data}
    atomic_write_json(folder / "result.json", payload, indent=1)
    return payload


def reproduce_command(name=None, full: bool = False, list_: bool = False, out=Path("dpposterior-gallery"),
                      scheduler: str = "processes", quiet: bool = False) -> None:
    """``dpposterior reproduce``: see :func:`run_entry` and :func:`list_entries`."""
    if list_:
        print(list_entries())
        return
    if name is None:
        raise InputError("name", f"give a gallery entry (one of: {', '.join(ENTRIES)}) or --list")
    payload = run_entry(name, out, full=full, scheduler=scheduler, quiet=quiet)
    folder = Path(out) / name
    if not quiet:
        print(_markdown(payload["header"], payload["rows"]))
    print(f"wrote {folder / 'figure.png'}, {folder / 'table.md'}, {folder / 'result.json'} "
          f"({payload['seconds']:.0f} s)")


def gallery_markdown(folder, image_prefix: str = "") -> str:
    """docs/gallery.md body from ``folder/NAME/table.md`` of every entry that has been run."""
    parts = []
    for name in ENTRIES:
        table = Path(folder) / name / "table.md"
        if not table.exists():
            parts.append(f"## {name}\n\n_Not run here: see the note at the top._\n")
            continue
        text = table.read_text().replace("](figure.png)", f"]({image_prefix}{name}/figure.png)")
        parts.append(text.replace(f"# {name}:", f"## {name}:", 1))
    return "\n".join(parts)
