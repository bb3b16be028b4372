"""The bias that NAPSU-MQ's Adult model carries into the downstream regression, without any noise.

NAPSU-MQ's protocol (benchmarks/marginals_adult.py) fits income ~ age + race + gender on synthetic data from a
model of ten measured two-way marginals. In that model's junction tree age meets race and gender only through
income (the cliques (age, income), (race, gender, income), and age's other cliques with marital-status and
workclass, which touch nothing else), so the model says age is independent of (race, gender) given income (the
global Markov property: income separates them in the graph; Lauritzen 1996, Ch. 3). The real data do not quite obey
this. The regression fitted to the model's own joint law of (age, race, gender, income), built from the *true*
marginals, so with no noise and infinitely many synthetic records, therefore differs from the real-data fit: that
difference is the bias every method sampling this model inherits, whatever its inference. It is computed here two
ways, with the real (race, gender, income) table and with its maximum-entropy version from the three pairs
(iterative proportional fitting; the measured pairs do not fix the three-way interaction), by weighted logistic
regression (Newton's method) on the 100 cells of (age, race, gender, income), checked against the row-level fit.

Given results files of marginals_adult.py, it sets beside it the mean error of the combined estimates (m = 50)
over the repeats at each epsilon, scores the 90% intervals against the real-data fit and against the model's own
regression, and rescores them with a variance for the data set's own regression instead of the population's
(``own_data_rule``: the synthetic-data rule's T less the within variance).

    python benchmarks/adult_model_bias.py [--data adult.csv] [RESULTS.json ...] [--pool] [--update-results]
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import marginals_adult as ma  # noqa: E402
from _out import add_update_flag, out_path  # noqa: E402

ATTRS = ["age", "race", "gender", "income"]


def weighted_fit(weights: np.ndarray, levels: dict) -> np.ndarray:
    """The regression's coefficients (ma.COEFS order) on a table of cell weights over ATTRS."""
    X, y, w = [], [], []
    for cell in itertools.product(*[range(s) for s in weights.shape]):
        if weights[cell] <= 0:
            continue
        a, r, g, i = cell
        race = levels["race"][r]
        X.append([1.0, ma.interval_middle(levels["age"][a])] + [float(race == d) for d in ma.RACE_DUMMIES]
                 + [float(levels["gender"][g] == "Male")])
        y.append(float(levels["income"][i] == "True"))
        w.append(weights[cell])
    X, y, w = np.array(X), np.array(y), np.array(w)
    b = np.zeros(X.shape[1])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-X @ b))
        step = np.linalg.solve(X.T @ (X * (w * p * (1 - p))[:, None]), X.T @ (w * (y - p)))
        b += step
        if np.max(np.abs(step)) < 1e-12:
            break
    return b


def own_data_rule(rows, m: int, level: float, real: np.ndarray) -> dict:
    """The combined intervals rescored with a variance for the data set's own regression instead of the
    population's: T - Ū, the synthetic-data rule's T less the within variance Ū (the sampling variance of n records).

    In the normal linear picture (a flat prior; the population value θ, the data set's value Q = θ + e with e of
    variance U, the release informing Q with noise of variance V), θ | release has variance V + U, which T
    estimates, and Q | release has variance V. Ū is recovered from what the results store: with T > 0 the rule's
    df = (m - 1)(1 - Ū/((1 + 1/m) B))² gives r = Ū/((1 + 1/m) B) = 1 - sqrt(df/(m - 1)), and T = (1 + 1/m) B - Ū
    gives Ū = r T/(1 - r). The interval is q̄ ± z √(T - Ū) with the normal quantile (no degrees of freedom are
    derived for this difference); where T - Ū ≤ 0, or T was already replaced by the non-negative fix, there is no
    interval. The target is the data set the release was made from: each resampled set's own fit
    (``sample_coef``) when the rows have it, else the real-data fit."""
    from scipy import stats

    z = stats.norm.ppf((1 + level) / 2)
    hit = np.full((len(rows), len(ma.COEFS)), np.nan)
    share = np.full(hit.shape, np.nan)
    for k, r in enumerate(rows):
        target = np.asarray(r.get("sample_coef", real), dtype=float)
        for i, c in enumerate(r["combined"][str(m)]):
            T, df, used = c["variance"], c["df"], c["m_used"]
            if c["adjusted"] or not (np.isfinite(T) and np.isfinite(df) and T > 0):
                continue
            ratio = 1.0 - np.sqrt(df / (used - 1))
            within = ratio * T / (1.0 - ratio)
            share[k, i] = within / T
            if T - within > 0:
                hit[k, i] = abs(c["estimate"] - target[i]) <= z * np.sqrt(T - within)
    scored = ma.coverage_summary(hit)
    scored["no_interval"] = int(np.sum(np.isnan(hit)))
    scored["intervals"] = int(hit.size)
    scored["within_share_median"] = dict(zip(ma.COEFS, np.nanmedian(share, 0).tolist()))
    return scored


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=ma.DEFAULT_DATA)
    ap.add_argument("results", nargs="*", type=Path, help="results files of marginals_adult.py (10 attributes)")
    ap.add_argument("--pool", action="store_true", help="pool the results files' rows per epsilon (release sets "
                    "of other seeds, same settings) instead of a column per file")
    ap.add_argument("--out", type=Path, default=None)
    add_update_flag(ap)
    args = ap.parse_args()
    ma.require_data(args.data)
    frame = ma.reduce_adult(ma.load_coded(args.data))
    levels = {a: sorted(set(frame[a])) for a in ATTRS}
    codes = tuple(frame[a].map({v: k for k, v in enumerate(levels[a])}).to_numpy() for a in ATTRS)
    table = np.zeros(tuple(len(levels[a]) for a in ATTRS))
    np.add.at(table, codes, 1.0)
    n = table.sum()
    real = weighted_fit(table, levels)
    row_fit, _ = ma.fit(frame)
    assert np.allclose(real, row_fit, atol=1e-6), (real, row_fit)  # the cell fit is the row-level fit
    rgi = table.sum(0) / n
    ai = table.sum((1, 2)) / n
    age_given_income = ai / ai.sum(0, keepdims=True)
    maxent = np.full(rgi.shape, 1.0 / rgi.size)
    for _ in range(1000):
        maxent *= (rgi.sum(2) / maxent.sum(2))[:, :, None]
        maxent *= (rgi.sum(1) / maxent.sum(1))[:, None, :]
        maxent *= (rgi.sum(0) / maxent.sum(0))[None, :, :]
    model = {"true three-way": weighted_fit(n * rgi[None] * age_given_income[:, None, None, :], levels),
             "maximum-entropy three-way": weighted_fit(n * maxent[None] * age_given_income[:, None, None, :], levels)}
    out = {"real": dict(zip(ma.COEFS, real.tolist())),
           "model_bias": {k: dict(zip(ma.COEFS, (v - real).tolist())) for k, v in model.items()}, "observed": {}}
    groups = [(f.stem.removeprefix("marginals_adult_10_"), [f]) for f in args.results]
    if args.pool:  # one group of every file's rows (release sets made with other --seed values)
        groups = [(" + ".join(name for name, _ in groups), list(args.results))]
    for name, files in groups:
        every = [r for f in files for r in json.loads(f.read_text())["rows"] if r.get("status") == "ok"]
        for eps in sorted({r["epsilon"] for r in every}):
            rows = [r for r in every if r["epsilon"] == eps]
            est = np.array([[c["estimate"] for c in r["combined"]["50"]] for r in rows])
            se = np.sqrt(np.array([[c["variance"] for c in r["combined"]["50"]] for r in rows]))
            label = f"{name}, eps {eps}"
            out["observed"][label] = dict(zip(ma.COEFS, (np.nanmean(est, 0) - real).tolist()))
            # in combined standard errors: the mean error, and the estimates' spread over the releases
            out.setdefault("in_standard_errors", {})[label] = {
                k: {"mean_error": float(np.nanmean((est[:, i] - real[i]) / se[:, i])),
                    "spread": float(np.nanstd(est[:, i]) / np.nanmean(se[:, i]))} for i, k in enumerate(ma.COEFS)}
            # the 90% intervals against the real-data fit and against the model's own regression of the population
            # (the real fit plus the model's bias: what the model would give from the true marginals), the Monte
            # Carlo error over the releases' own means as in marginals_adult.py
            out.setdefault("coverage_0.9", {})[label] = {
                target: ma.coverage_summary(ma.interval_hits(rows, 50, 0.9, [value] * len(rows))[0])
                for target, value in (("real", real), ("model", model["true three-way"]))}
            out.setdefault("own_data_rule_0.9", {})[label] = own_data_rule(rows, 50, 0.9, real)
    print("| coefficient | real | model bias (true three-way) | model bias (maximum entropy) | "
          + " | ".join(f"mean error, {k}" for k in out["observed"]) + " |")
    print("|---" * (4 + len(out["observed"])) + "|")
    for k in ma.COEFS:
        print(f"| {k} | {out['real'][k]:+.4f} | " + " | ".join(f"{out['model_bias'][m][k]:+.4f}" for m in model)
              + "".join(f" | {v[k]:+.4f}" for v in out["observed"].values()) + " |")
    if out.get("in_standard_errors"):
        print("\nIn combined standard errors (m = 50), mean error / spread of the estimates over the releases:\n")
        print("| coefficient | " + " | ".join(out["in_standard_errors"]) + " |")
        print("|---" * (1 + len(out["in_standard_errors"])) + "|")
        for k in ma.COEFS:
            print(f"| {k} | " + " | ".join(f"{v[k]['mean_error']:+.2f} / {v[k]['spread']:.2f}"
                                         for v in out["in_standard_errors"].values()) + " |")
    if out.get("coverage_0.9"):
        print("\n90% coverage (m = 50) of the real-data fit and of the model's own regression (real + model bias, "
              "true three-way), mean ± MC se:\n")
        print("| results, ε | of the real fit | of the model's regression | per coefficient, of the model's: "
              + ", ".join(ma.COEFS) + " |")
        print("|---|---|---|---|")
        for label, sc in out["coverage_0.9"].items():
            r, m = sc["real"], sc["model"]
            print(f"| {label} | {r['coverage_mean']:.3f} ± {r['coverage_mean_se']:.3f} | "
                  f"{m['coverage_mean']:.3f} ± {m['coverage_mean_se']:.3f} | "
                  + ", ".join(f"{m['coverage'][k]:.2f}" for k in ma.COEFS) + " |")
    if out.get("own_data_rule_0.9"):
        print("\n90% coverage (m = 50) of the data set's own regression with the variance T - Ū (own_data_rule), "
              "mean ± MC se; Ū / T, the median over the releases, per coefficient:\n")
        print("| results, ε | coverage | intervals with T - Ū ≤ 0 | per coefficient: " + ", ".join(ma.COEFS)
              + " | Ū / T: " + ", ".join(ma.COEFS) + " |")
        print("|---|---|---|---|---|")
        for label, sc in out["own_data_rule_0.9"].items():
            print(f"| {label} | {sc['coverage_mean']:.3f} ± {sc['coverage_mean_se']:.3f} | "
                  f"{sc['no_interval']} of {sc['intervals']} | "
                  + ", ".join(f"{sc['coverage'][k]:.2f}" for k in ma.COEFS) + " | "
                  + ", ".join(f"{sc['within_share_median'][k]:.2f}" for k in ma.COEFS) + " |")
    path = out_path(args.out, "adult_model_bias.json", args.update_results)
    path.write_text(json.dumps(out, indent=1) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
