"""Xiong, Ju & Zhang (000): Tables 2-4 (linreg-ju), Fig. 1 (SIR) and Fig. 2 (five real outbreaks).

SPPE runs as the paper's Algorithm 1 (``PAPER_SPPE``: the App. E training, draws from the last flow), not
with the engine's defaults (the importance correction), so these entries reproduce the paper.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import numpy as np

from ..errors import InputError
from ._common import Context, PAPER, Result, _g, _plt, _run_cells


# =============================================================================== Xiong, Ju & Zhang

def _examples_dir() -> Path:
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "examples" / "releases"
        if cand.is_dir():
            return cand
    raise InputError("engine", "the example releases (examples/releases) are not available in this installation")


#: the paper's SPPE (Algorithm 1, App. E) among the engine's options
PAPER_SPPE = {"training": "paper", "correction": "none"}


def _xiong_linreg_unit(unit: dict) -> dict:
    from ..api import infer

    path = _examples_dir() / f"linreg-ju-eps{unit['epsilon']:g}.json"
    kwargs = {"simulations": unit["simulations"]}
    if unit["method"] != "smc-abc":
        kwargs["rounds"] = unit["rounds"]
    if unit["method"] == "sppe":
        kwargs.update(PAPER_SPPE)
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
             + ". The target is |mean difference| <= 0.2 at the paper's budgets (--full)."]
    return Result(fig, ["epsilon", "method", "beta_0 ours / paper", "beta_1 ours / paper", "beta_2 ours / paper",
                        "max abs mean diff"], rows, notes, {"cells": data})


def run_xiong_sir(ctx: Context) -> Result:
    path = _examples_dir() / "sir-eps10.json"
    if not path.exists():
        raise InputError("engine", f"the SIR example release {path} is not available in this version")
    rounds, sims = (10, 1000) if ctx.full else (3, 300)
    t0 = time.perf_counter()
    ctx.say(f"xiong-sir: SPPE, {rounds} rounds x {sims} simulations")
    from ..api import infer

    post = infer(path, method="sppe", simulations=sims, rounds=rounds, **PAPER_SPPE,
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
             "against a long SMC-ABC reference (Fig. 1-B) is in benchmarks/sbi_convergence.py."]
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

    path = Path(__file__).resolve().parent.parent / "data" / "flu_boarding_school.csv"  # dpposterior/data
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
    from ..api import infer

    path = _examples_dir() / f"sir-{unit['release']}-eps10.json"
    kwargs = {"simulations": unit["simulations"]}
    if unit["method"] != "smc-abc":
        kwargs["rounds"] = unit["rounds"]
        if unit.get("max_epochs"):
            kwargs["max_epochs"] = unit["max_epochs"]
    if unit["method"] == "sppe":
        kwargs.update(PAPER_SPPE)
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
