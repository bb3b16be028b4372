"""Alparslan, Yildirim & Birbil (004): Fig. 2 (simulated, MSE vs epsilon) and Table 1 (UCI data);
the UCI loader (the authors' preparation, ``shared/data/uci/README.md``), also used by the benchmarks."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..errors import InputError
from ._common import Context, PAPER, Result, _g, _plt, _run_cells, _seeds


# =============================================================================== Alparslan, Yildirim & Birbil

ALPARSLAN_METHODS_DEFAULT = ["mcmc-fixeds", "bayes-fixeds-fast", "adassp"]
ALPARSLAN_METHODS_FULL = ["mcmc-normalx", "mcmc-fixeds", "bayes-fixeds-fast", "mcmc-bs", "adassp"]


def _sampling(method: str, unit: dict) -> dict:
    """The unit's draws (one chain) and warm-up, for the engines that take them: the independent-draw ones
    (bayes-fixeds-fast) refuse a warm-up, and adassp, a point estimate, draws and chains too."""
    from ..families import get_family

    takes = get_family("linear-regression").engine_options(method).names()
    wanted = {"draws": unit["draws"], "chains": 1, "warmup": unit["warmup"]}
    return {k: v for k, v in wanted.items() if k in takes}


def _point_estimate(post) -> np.ndarray:
    return np.asarray(post.mean("theta"), dtype=float).reshape(-1)


def _alparslan_sim_unit(unit: dict) -> dict:
    """One run of Sec. 5.1 at every epsilon: theta ~ N(0, I_d), Lambda = V'V (V iid N(0, 1)),
    Sigma_x ~ IW(Lambda, d + 1), x_i ~ N(0, Sigma_x), y = x' theta + N(0, 1); the bounds are the
    data's own maxima; inference with a = 20, b = 0.5, m = 0, C = b/(a-1) I and the same Lambda, kappa."""
    from scipy import stats as sps

    from ..families.linear_regression import make_release
    from ..api import infer

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
            post = infer(release, prior=prior, method=m, seed=int(rng.integers(2 ** 31)), **_sampling(m, unit))
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


def load_uci(name: str, data_dir=None):
    """(X_train, y_train, X_test, y_test) prepared as the paper's code does (shared/data/uci/README.md):
    empty columns and rows dropped, missing values 0, features standardised, y centred and scaled to
    max |y| = 1, the first 80% of rows for training.  ``data_dir``: default :func:`uci_data_dir`."""
    import pandas as pd

    path = Path(data_dir if data_dir is not None else uci_data_dir()) / UCI_FILES[name]
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
    from ..families.linear_regression import make_release
    from ..api import infer

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
        post = infer(release, prior=prior, method=m, seed=int(rng.integers(2 ** 31)), **_sampling(m, unit))
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
