"""Repeated-simulation coverage of 90% intervals for measured and unmeasured marginals (family ``marginals``).

Question: when a curator releases noisy two-way marginals (OpenDP contingency tables, MST, Private-PGM), do 90%
intervals for the cell probabilities of a measured marginal, and of marginals nobody measured, cover at 0.90?
Compared:

* ``da``       -- dpposterior's exact data-augmentation posterior (``infer(release, method="da")``), the 5% and
                  95% quantiles of ``post.marginal(attrs)`` (measured or not: the model's marginal);
* ``naive``    -- the same hyper-Dirichlet model with the noisy counts taken as true (``method="naive"``);
* ``noise-only`` -- the interval an OpenDP user builds from ``ContingencyTable.std(attrs)``: for a measured cell
                  ``y/n +- 1.645 sigma/n`` (y the noisy count, sigma the discrete Gaussian's scale -- what
                  ``std`` returns for a clique covered by one identity measurement).  For an unmeasured marginal
                  OpenDP's ``std`` raises ("not covered by the query set"), so here: the *independence-by-separator
                  plug-in* -- the joint  p^(a,b,c,d) = p^(a,b) p^(c|b) p^(d|c)  built from the noisy tables
                  (negative counts set to 0; p^(a,b) = y_ab / sum y_ab, p^(c|b) = y_bc / sum_c y_bc, ...) and
                  marginalised -- with its delta-method sd from the noise alone:
                  sd^2 = sum_m sigma_m^2 |d p^ / d y_m|^2 (gradient by central differences).  Like OpenDP's
                  interval it ignores sampling variation, which is why it can only target the sample.
* ``da-sample`` (measured cells only) -- the da posterior of the *confidential sample's* proportion t/n
                  (``post.extras["clique_counts"]``; t is integer, so coverage uses the randomized PIT
                  u = F(t-1) + V (F(t) - F(t-1)), covered iff 0.05 <= u <= 0.95: the randomized equal-tailed
                  interval).  The sample (a,c) and (a,d) tables are not functions of the clique counts the
                  engine keeps, so da-sample has no unmeasured rows.

Two targets, both reported for every method: the population law's cell probability p_true(x) ("population")
and the confidential sample's marginal proportion t(x)/n ("sample").

Truth (fixed, documented): 4 attributes a, b, c, d of sizes 2, 3, 2, 3, Markov on the chain a - b - c - d
(so the model the measured cliques imply is correctly specified), clique tables one draw of the hyper-Dirichlet
law of total concentration 20 (per-cell pseudo-count 20/6 ~ 3.3: moderately spread) from
``numpy.random.default_rng(3)``; the seed was picked among 1..3 so that no cell of the target marginals is below
5% (smallest: 0.111 of (b,c), 0.115 of (a,c), 0.062 of (a,d)); the tables are written into the JSON.

Each repeat (fresh seeds: ``numpy.random.SeedSequence(seed).spawn(repeats)``): n records from p_true for each n
(the same records for every rho); for each rho, the two-way marginals (a,b), (b,c), (c,d) released through the
discrete Gaussian (exact sampler, ``DiscreteGaussian.numpy_noise``) at rho/3 each (replace-one L2 sensitivity
sqrt 2: sigma = 1/sqrt(rho/3)); the three methods' 90% intervals for every cell of (b,c) (measured), (a,c) and
(a,d) (unmeasured).  Coverage is averaged over the cells of a group within a repeat, then over repeats; its
Monte Carlo sd is the sd of the per-repeat averages / sqrt(repeats) (cells of one repeat are correlated: they
share the records and the noise).

    python benchmarks/marginals_coverage.py --repeats 40                       # small run (minutes on 2 cores)
    python benchmarks/marginals_coverage.py --repeats 400 --workers 16 --out cov.json
    python benchmarks/marginals_coverage.py --n 200 --rhos 0.1 --repeats 50   # the reduced test's setting

What a small run shows (40 repeats, seed 20261126, 400 + 200 draws x 2 chains; tests/test_marginals_coverage.py
has the test setting's larger runs): da covers p_true at 0.88-0.93 in every setting but one, measured and
unmeasured alike; naive fails where the noise is comparable to the sampling error (n = 200, rho = 0.05: 0.62 /
0.69), noise-only fails wherever the sampling error matters (n = 200, rho = 0.5: 0.52-0.58; n = 2000:
0.19-0.55) -- it targets the sample, and covers the sample's measured cells at 0.92-0.94 (its discreteness:
P(|e| <= 1.645 sigma) for integer e).  The
exception is the heaviest noise, n = 200 and rho = 0.05 (noise variance 60 per count against ~25 sampling),
where da covers the measured (b,c) cells at 0.82 +- 0.025 (unmeasured 0.90 +- 0.02), with a total
concentration of 6 instead of 1 at 0.85 +- 0.02 (unmeasured 0.94): a Bayesian interval's frequentist coverage
at one fixed p_true, in a regime where the prior carries much of the answer (the same noise draws put the
noise-only interval's coverage of the sample's measured cells at 0.875 against its 0.917, so part of it is a
fluctuation of these 40 repeats).  Every da fit at that setting is flagged by dpposterior's R-hat / ESS checks
at these chain lengths; longer chains on single releases there give the same intervals to ~0.01.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
import warnings
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from dpposterior import infer  # noqa: E402
from dpposterior.cliques import JunctionTree  # noqa: E402
from dpposterior.families.marginals import SENSITIVITY, MarginalQuery, variable_name  # noqa: E402
from dpposterior.mechanisms.registry import get_mechanism  # noqa: E402

DOMAIN = {"a": 2, "b": 3, "c": 2, "d": 3}
MEASURE = [("a", "b"), ("b", "c"), ("c", "d")]
#: target marginal -> whether it is measured
TARGETS = {("b", "c"): True, ("a", "c"): False, ("a", "d"): False}
GROUPS = {"measured (b,c)": [("b", "c")], "unmeasured (a,c)": [("a", "c")], "unmeasured (a,d)": [("a", "d")],
          "unmeasured (all)": [("a", "c"), ("a", "d")]}
TRUTH_CONCENTRATION = 20.0
TRUTH_SEED = 3
LEVEL = 0.90
Z = 1.6448536269514722  # standard normal 0.95 quantile
METHODS = ("da", "da-sample", "naive", "noise-only")
TRUTHS = ("population", "sample")
MECHANISM = "discrete-gaussian"


def key(attrs) -> str:
    return ",".join(attrs)


def truth():
    """The junction tree of the chain and p_true's clique tables (fixed)."""
    tree = JunctionTree.build(list(DOMAIN), MEASURE, DOMAIN)
    tables = tree.prior_draw(TRUTH_CONCENTRATION, np.random.default_rng(TRUTH_SEED))
    return tree, tables


def sigma_for(rho: float) -> float:
    scale, _ = get_mechanism(MECHANISM).noise_for_budget(SENSITIVITY["L2"], rho=rho / len(MEASURE))
    return float(scale)


# --------------------------------------------------------------------------- the noise-only plug-in
def plugin_tables(tree: JunctionTree, noisy: dict) -> list[np.ndarray]:
    """Noisy clique tables (negatives set to 0, a hair added so an all-zero row gives a uniform conditional),
    each normalised: the junction tree's root table times conditionals is then the independence-by-separator
    plug-in of the joint.  ``noisy``: clique -> count table, with any leading axes (kept)."""
    out = []
    for c in tree.cliques:
        y = np.clip(noisy[c], 0.0, None) + 1e-9
        lead = y.ndim - len(c)
        out.append(y / y.sum(axis=tuple(range(lead, y.ndim)), keepdims=True))
    return out


def noise_only_plugin(tree: JunctionTree, noisy: dict, sigma: float, attrs) -> tuple[np.ndarray, np.ndarray]:
    """The plug-in estimate of the marginal ``attrs`` and its delta-method sd from the noise alone (every
    measured cell carries independent noise of sd ``sigma``; central differences, step 1e-3 count)."""
    cells = [(c, idx) for c in tree.cliques for idx in np.ndindex(*tree.shape(c))]
    m = len(cells)
    h = 1e-3
    stacked = {c: np.repeat(np.asarray(noisy[c], float)[None], 2 * m + 1, axis=0) for c in tree.cliques}
    for j, (c, idx) in enumerate(cells):
        stacked[c][(1 + 2 * j, *idx)] += h
        stacked[c][(2 + 2 * j, *idx)] -= h
    vals = tree.marginal(plugin_tables(tree, stacked), attrs)  # (2m+1, *shape)
    grad = (vals[1::2] - vals[2::2]) / (2 * h)
    sd = sigma * np.sqrt((grad ** 2).sum(axis=0))
    return vals[0], sd


# --------------------------------------------------------------------------- one repeat
def _int_seed(ss: np.random.SeedSequence) -> int:
    return int(ss.generate_state(1, dtype=np.uint32)[0])


def _release(n: int, noisy: dict, sigma: float) -> dict:
    return {"format": "dpposterior-release/1", "family": "marginals", "n": int(n), "domain": dict(DOMAIN),
            "measurements": [{"clique": list(c), "value": noisy[c].astype(int).tolist(), "mechanism": MECHANISM,
                              "sigma": sigma} for c in MEASURE]}


def _quantile_interval(draws: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    flat = draws.reshape(-1, *draws.shape[2:])
    lo, hi = np.quantile(flat, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    return lo, hi


def _randomized_pit_cover(count_draws: np.ndarray, t: np.ndarray, rng) -> np.ndarray:
    """Covered iff the randomized PIT of the integer t under the posterior draws lies in [0.05, 0.95]."""
    flat = count_draws.reshape(-1, *count_draws.shape[2:])
    below = (flat < t[None]).mean(axis=0)
    at = (flat == t[None]).mean(axis=0)
    u = below + rng.random(t.shape) * at
    return ((u >= (1 - LEVEL) / 2) & (u <= (1 + LEVEL) / 2)).astype(float)


def _flag_kind(message: str) -> str:
    """'R-hat 1.043 > 1.01 for p[c,d][1, 1]: ...' -> 'R-hat'; 'bulk ESS 68 < 200 ...' -> 'bulk ESS'."""
    words = []
    for w in message.split():
        if any(ch.isdigit() for ch in w) or w in ("<", ">", "for"):
            break
        words.append(w)
    return " ".join(words) or message[:40]


def run_repeat(job) -> dict:
    """One repeat: every (n, rho) setting.  Returns setting -> method -> truth -> marginal -> (cover, width)
    arrays as lists (cover per cell)."""
    r, ss, ns, rhos, draws, warmup, chains, concentration = job
    prior = None if concentration is None else {"concentration": concentration}
    tree, tables = truth()
    kind = get_mechanism(MECHANISM)
    p_true = {t: tree.marginal(tables, t) for t in TARGETS}
    out = {}
    n_seeds = ss.spawn(len(ns))
    timing = {"da": 0.0, "naive": 0.0}
    for n, n_ss in zip(ns, n_seeds):
        data_ss, *rho_ss = n_ss.spawn(1 + len(rhos))
        records = tree.sample_records(tables, int(n), np.random.default_rng(data_ss))
        counts = {c: MarginalQuery(c, list(DOMAIN), DOMAIN)(records) for c in set(MEASURE) | set(TARGETS)}
        sample = {t: counts[t] / n for t in TARGETS}
        for rho, s in zip(rhos, rho_ss):
            noise_ss, da_ss, naive_ss, pit_ss = s.spawn(4)
            noise_rng = np.random.default_rng(noise_ss)
            sigma = sigma_for(rho)
            noisy = {c: counts[c] + kind.numpy_noise(sigma, counts[c].shape, noise_rng) for c in MEASURE}
            release = _release(n, noisy, sigma)
            t0 = time.perf_counter()
            with warnings.catch_warnings(record=True) as caught:  # R-hat / ESS flags of short chains: counted
                warnings.simplefilter("always")
                da = infer(release, prior, method="da", draws=draws, warmup=warmup, chains=chains,
                           seed=_int_seed(da_ss))
            t1 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                naive = infer(release, prior, method="naive", draws=draws, chains=chains, seed=_int_seed(naive_ss))
            t2 = time.perf_counter()
            flags = sorted({_flag_kind(str(w.message)) for w in caught})
            timing["da"] += t1 - t0
            timing["naive"] += t2 - t1
            intervals = {m: {} for m in METHODS}
            for t, measured in TARGETS.items():
                intervals["da"][t] = _quantile_interval(da.marginal(list(t)).values)
                intervals["naive"][t] = _quantile_interval(naive.marginal(list(t)).values)
                if measured:
                    est, sd = noisy[t] / n, np.full(noisy[t].shape, sigma / n)
                else:
                    est, sd = noise_only_plugin(tree, noisy, sigma, t)
                intervals["noise-only"][t] = (est - Z * sd, est + Z * sd)
            res = {m: {tr: {} for tr in TRUTHS} for m in METHODS}
            for m in ("da", "naive", "noise-only"):
                for t in TARGETS:
                    lo, hi = intervals[m][t]
                    for tr, target in (("population", p_true[t]), ("sample", sample[t])):
                        cover = ((lo <= target) & (target <= hi)).astype(float)
                        res[m][tr][key(t)] = {"cover": cover.ravel().tolist(), "width": (hi - lo).ravel().tolist()}
            # da's posterior of the confidential sample's counts (measured cliques only)
            pit_rng = np.random.default_rng(pit_ss)
            for t, measured in TARGETS.items():
                if not measured:
                    continue
                cd = np.asarray(da.extras["clique_counts"][variable_name(t)])
                cover = _randomized_pit_cover(cd, counts[t].astype(cd.dtype), pit_rng)
                lo, hi = _quantile_interval(cd / n)
                res["da-sample"]["sample"][key(t)] = {"cover": cover.ravel().tolist(),
                                                      "width": (hi - lo).ravel().tolist()}
                pop = ((lo <= p_true[t]) & (p_true[t] <= hi)).astype(float)
                res["da-sample"]["population"][key(t)] = {"cover": pop.ravel().tolist(),
                                                          "width": (hi - lo).ravel().tolist()}
            res["da_warnings"] = flags
            out[f"n={n},rho={rho:g}"] = res
    return {"repeat": r, "results": out, "timing": timing}


# --------------------------------------------------------------------------- aggregation and printing
def summarise(repeats: list[dict]) -> dict:
    """setting -> method -> truth -> group -> {coverage, mc_sd, width, repeats}: coverage the mean over repeats
    of the per-repeat average over the group's cells, mc_sd the sd of those averages / sqrt(repeats)."""
    settings = list(repeats[0]["results"])
    out = {}
    for s in settings:
        out[s] = {}
        for m in METHODS:
            out[s][m] = {}
            for tr in TRUTHS:
                out[s][m][tr] = {}
                for g, members in GROUPS.items():
                    per, width, cells = [], [], []
                    for rep in repeats:
                        cell = rep["results"][s][m][tr]
                        if not all(key(t) in cell for t in members):
                            break
                        cov = np.concatenate([cell[key(t)]["cover"] for t in members])
                        wid = np.concatenate([cell[key(t)]["width"] for t in members])
                        per.append(cov.mean())
                        width.append(wid.mean())
                        cells.append(cov)
                    if len(per) != len(repeats):
                        continue
                    per = np.array(per)
                    sd = float(per.std(ddof=1) / math.sqrt(len(per))) if len(per) > 1 else float("nan")
                    out[s][m][tr][g] = {"coverage": float(per.mean()), "mc_sd": sd, "width": float(np.mean(width)),
                                        "repeats": len(per), "per_repeat": per.tolist(),
                                        # each cell's coverage (C order over the group's marginals)
                                        "per_cell": np.mean(cells, axis=0).tolist()}
    return out


def markdown(summary: dict, truth_name: str = "population") -> str:
    groups = list(GROUPS)
    head = "| setting (sigma/cell) | method | " + " | ".join(groups) + " | mean width (b,c) / (a,d) |"
    lines = [f"Coverage of 90% intervals, target: {truth_name} "
             + ("p_true" if truth_name == "population" else "sample proportion t/n")
             + " (mean over repeats +- Monte Carlo sd)", "", head, "|" + "---|" * (len(groups) + 3)]
    for s, by_m in summary.items():
        rho = float(s.split("rho=")[1])
        label = f"{s} ({sigma_for(rho):.2f})"
        for m, by_t in by_m.items():
            cells = by_t[truth_name]
            if not cells:
                continue
            row = [f"{cells[g]['coverage']:.3f} +- {cells[g]['mc_sd']:.3f}" if g in cells else "--" for g in groups]
            w1 = cells.get("measured (b,c)", {}).get("width")
            w2 = cells.get("unmeasured (a,d)", {}).get("width")
            widths = " / ".join("--" if w is None else f"{w:.3f}" for w in (w1, w2))
            lines.append(f"| {label} | {m} | " + " | ".join(row) + f" | {widths} |")
    return "\n".join(lines)


def run(repeats: int, ns, rhos, draws: int, warmup: int, chains: int, seed: int, workers: int = 1,
        progress: bool = True, concentration: float | None = None) -> dict:
    children = np.random.SeedSequence(seed).spawn(repeats)
    jobs = [(r, children[r], list(ns), list(rhos), draws, warmup, chains, concentration) for r in range(repeats)]
    t0 = time.perf_counter()
    results = []
    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            for res in pool.map(run_repeat, jobs):
                results.append(res)
                if progress:
                    print(f"  repeat {len(results)}/{repeats}  {time.perf_counter() - t0:.0f} s", flush=True)
    else:
        for job in jobs:
            results.append(run_repeat(job))
            if progress:
                print(f"  repeat {len(results)}/{repeats}  {time.perf_counter() - t0:.0f} s", flush=True)
    wall = time.perf_counter() - t0
    tree, tables = truth()
    return {
        "settings": {"repeats": repeats, "n": list(ns), "rhos": list(rhos), "draws": draws, "warmup": warmup,
                     "chains": chains, "seed": seed, "level": LEVEL,
                     "prior_concentration": concentration if concentration is not None else "default (min(largest clique cells, max(1, n/50)))",
                     "mechanism": MECHANISM,
                     "measured": [list(c) for c in MEASURE], "domain": DOMAIN,
                     "sigma_per_cell": {f"{rho:g}": sigma_for(rho) for rho in rhos}},
        "truth": {"concentration": TRUTH_CONCENTRATION, "seed": TRUTH_SEED,
                  "clique_tables": {key(c): t.tolist() for c, t in zip(tree.cliques, tables)},
                  "target_marginals": {key(t): tree.marginal(tables, t).tolist() for t in TARGETS}},
        "summary": summarise(results),
        # share of da fits that dpposterior's own checks flagged (R-hat > 1.01, bulk ESS < 200), by kind
        "da_flagged_fits": {s: {"any": float(np.mean([bool(r["results"][s]["da_warnings"]) for r in results])),
                                **{k: float(np.mean([k in r["results"][s]["da_warnings"] for r in results]))
                                   for k in sorted({k for r in results for k in r["results"][s]["da_warnings"]})}}
                            for s in results[0]["results"]},
        "timing": {"wall_s": wall, "workers": workers,
                   "da_s_per_fit": sum(r["timing"]["da"] for r in results) / (repeats * len(ns) * len(rhos)),
                   "naive_s_per_fit": sum(r["timing"]["naive"] for r in results) / (repeats * len(ns) * len(rhos))},
    }


def main(argv=None) -> dict:
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=40)
    ap.add_argument("--n", default="200,2000", help="comma-separated sample sizes")
    ap.add_argument("--rhos", default="0.05,0.5", help="comma-separated total zCDP budgets (split over 3 tables)")
    ap.add_argument("--draws", type=int, default=400, help="da / naive draws per chain")
    ap.add_argument("--warmup", type=int, default=200, help="da warm-up sweeps per chain")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261126)
    ap.add_argument("--concentration", type=float, default=None,
                    help="the analyst's hyper-Dirichlet total concentration A (da and naive); "
                         "default: the package's (1)")
    ap.add_argument("--workers", type=int, default=1, help="processes over repeats")
    ap.add_argument("--out", default=None, help="JSON to write (default: scratch folder, see _out.py)")
    add_update_flag(ap)
    args = ap.parse_args(argv)
    ns = [int(x) for x in args.n.split(",") if x.strip()]
    rhos = [float(x) for x in args.rhos.split(",") if x.strip()]
    res = run(args.repeats, ns, rhos, args.draws, args.warmup, args.chains, args.seed, args.workers,
              concentration=args.concentration)
    path = out_path(args.out, "marginals_coverage.json", args.update_results)
    path.write_text(json.dumps(res, indent=1))
    for tr in TRUTHS:
        print()
        print(markdown(res["summary"], tr))
    print("\nda fits flagged by dpposterior's own checks (R-hat > 1.01 / bulk ESS < 200):",
          "; ".join(f"{s}: " + ", ".join(f"{k} {v:.0%}" for k, v in flags.items())
                    for s, flags in res["da_flagged_fits"].items()))
    t = res["timing"]
    print(f"\nwall {t['wall_s']:.1f} s ({t['workers']} workers); da {t['da_s_per_fit']:.2f} s / fit, naive "
          f"{t['naive_s_per_fit']:.3f} s / fit")
    return res


if __name__ == "__main__":
    main()
