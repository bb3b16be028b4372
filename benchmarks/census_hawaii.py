"""Coverage and accuracy of the census posterior on Hawaii with the 2020 production budget, beside the GLS
estimate the Census Bureau ships, the naive reading and per-cell flat-prior posteriors (docs/census.md).

Each trial: a noisy-measurement release of the shipped Hawaii 2020 block table (14,732 blocks x 2 x 8 cells)
simulated with the production allocation (``dpposterior.census.simulate(seed=trial)``), the ``da`` posterior,
and, at every level (block, block group, tract, county) for the total, age and ethrace cells and for unions of
50 random blocks within a county: whether each method's 90% interval covers the truth, the interval's width,
and the squared error of the point estimate (posterior median; GLS mean; naive clipped value; flat-prior median);
for the posterior also the mass of its own interval (integer counts: 0.90 or more), the coverage a calibrated
posterior has, and the squared error of its mean.  The posterior's interval is ``dpposterior tabulate``'s default,
the HPD interval (``dpposterior.intervals``); its equal-tailed interval is scored beside (``da_equal_tailed``).

    python benchmarks/census_hawaii.py trial --seed 0 --draws 200 --warmup 200   # one trial -> JSON
    python benchmarks/census_hawaii.py run --trials 20 --workers 16               # trials in processes
    python benchmarks/census_hawaii.py table FILES...                             # the tables of docs/census.md
    python benchmarks/census_hawaii.py bias FILES...                              # errors per query cell
    python benchmarks/census_hawaii.py fit --out FIT.npz                          # hyperparameters on Hawaii
    python benchmarks/census_hawaii.py run --model-truth FIT.npz --folder DIR     # truths drawn from the model
    python benchmarks/census_hawaii.py time                                       # Hawaii, 2 x (500 + 500)
    python benchmarks/census_hawaii.py figure TABLE.md                            # the coverage figure
    python benchmarks/census_hawaii.py gls                                        # GLS's time on Hawaii
    python benchmarks/census_hawaii.py tiled --times 100 --scheduler local        # 100x Hawaii on Dask

Coverage is counted per cell over the trials; its Monte Carlo error (the ± of the table) is that of the trials'
own coverages (their sd over sqrt(trials)), since the cells of one release share its noise and are not
independent coins.  The squared errors of the posterior and of GLS are compared as a paired ratio with a
jackknife standard error over trials.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _out import add_update_flag, loadavg, out_path  # noqa: E402

LEVELS = ("county", "tract", "block_group", "block")
QUERIES = ("total", "age", "ethrace")
UNIONS = 10
UNION_SIZE = 50


def trial(seed: int, draws: int, warmup: int, chains: int, out: Path, model_truth: Path | None = None,
          fixed: bool = False) -> dict:
    import dpposterior.census as dc
    from dpposterior.families.census_strategy import read_truth
    from dpposterior.inference.census_da import CensusDAOptions, census_da
    from dpposterior.inference.census_peers import flat_prior, gls, naive
    from dpposterior.intervals import equal_tailed, hpd

    t0 = time.time()
    geocodes, counts, _ = read_truth()
    order = np.argsort(geocodes, kind="stable")
    truth = counts[order].reshape(len(geocodes), -1)
    if model_truth is not None:  # a truth drawn from the model at hyperparameters fitted to Hawaii
        truth = _model_truth(model_truth, seed)
        release = dc.simulate((geocodes[order], truth), seed=seed)
    else:
        release = dc.simulate(seed=seed)
    s = release.structure
    t1 = time.time()
    opts = CensusDAOptions(draws=draws, warmup=warmup, chains=chains, seed=seed, quiet=True)
    if fixed:  # the conditional of x given the hyperparameters that drew the truth: the exact model, known
        x = _fixed_hyperparameters(release, opts, model_truth, seed)
        post = None
    else:
        post = census_da(release.observation_model(None), opts)
        x = post.posterior["counts"].reshape(-1, s.B, s.C)
    t2 = time.time()
    est = gls(s)
    res = {"seed": seed, "draws": draws, "warmup": warmup, "chains": chains, "sample_s": t2 - t1,
           "setup_s": t1 - t0, "loadavg": loadavg(), "cells": {}, "by_cell": {}}
    z = 1.6448536269514722
    for lv in LEVELS:
        for q in QUERIES:
            true = s.aggregate(truth, lv, q).astype(float)
            agg = s.aggregate(x, lv, q)
            med = np.quantile(agg, 0.5, axis=0, method="inverted_cdf")
            lo, hi = hpd(agg, 0.9)
            m, sd = est.estimate(lv, q)
            entry = {"da": _score(true, med, lo, hi, _mass(agg, lo, hi))}
            elo, ehi = equal_tailed(agg, 0.9)
            entry["da_equal_tailed"] = _score(true, med, elo, ehi, _mass(agg, elo, ehi))
            entry["da"]["sq_error_mean"] = _sq_error(true, agg.mean(axis=0))
            if np.isfinite(m).any():
                entry["gls"] = _score(true, m, m - z * sd, m + z * sd)
            rows, units, cells = s.measured(lv, q)
            if rows.size:
                p, plo, phi = naive(s, lv, q, 0.9)
                entry["naive"] = _score(true, p, plo, phi)
                fm, flo, fhi = flat_prior(s, lv, q, 0.9)
                entry["flat"] = _score(true, fm, flo, fhi)
            res["cells"][f"{lv}/{q}"] = entry
            if lv != "block" and np.isfinite(m).any():
                res["by_cell"][f"{lv}/{q}"] = _by_cell(true, agg, m, sd, s.cell_labels(q))
    # unions of 50 random blocks within a county
    rng = np.random.default_rng(10_000 + seed)
    ci = s.levels.index("county")
    totals, true_totals = [], []
    for _ in range(UNIONS):
        c = rng.integers(len(s.units[ci]))
        members = np.flatnonzero(s.block_unit[ci] == c)
        pick = rng.choice(members, size=min(UNION_SIZE, members.size), replace=False)
        totals.append(x[:, pick].sum(axis=(1, 2)))
        true_totals.append(truth[pick].sum())
    tot, true = np.stack(totals, axis=1), np.array(true_totals, dtype=float)  # (draws, union)
    med = np.quantile(tot, 0.5, axis=0, method="inverted_cdf")
    lo, hi = hpd(tot, 0.9)
    elo, ehi = equal_tailed(tot, 0.9)
    union = {"da": _score(true, med, lo, hi, _mass(tot, lo, hi)),
             "da_equal_tailed": _score(true, med, elo, ehi, _mass(tot, elo, ehi))}
    union["da"]["sq_error_mean"] = _sq_error(true, tot.mean(axis=0))
    res["cells"]["union50/total"] = union
    from dpposterior.convergence import rhat

    scalars = [v for v in ("alpha", "beta", "tau") if post is not None and v in post.posterior]
    res["rhat"] = {v: float(rhat(post.posterior[v])) for v in scalars} if chains > 1 and scalars else None
    res["hyperparameters"] = {v: float(np.mean(post.posterior[v])) for v in scalars} if scalars else None
    if post is not None and "mix_shape" in post.posterior:  # the tract mixes' law: its shape, each cell's rate
        res["mix_shape"] = float(np.mean(post.posterior["mix_shape"]))
        res["mix_rate"] = np.asarray(post.posterior["mix_rate"]).reshape(-1, s.C).mean(axis=0).tolist()
    res["fixed_hyperparameters"] = fixed
    out.write_text(json.dumps(res))
    return res


def fit(out: Path, seed: int, draws: int, warmup: int) -> None:
    """The posterior means of the hyperparameters on one simulated Hawaii release (the production budget), the
    model a model-truth trial draws its truth from."""
    import dpposterior.census as dc
    from dpposterior.inference.census_da import CensusDAOptions, census_da

    release = dc.simulate(seed=seed)
    post = census_da(release.observation_model(None),
                     CensusDAOptions(draws=draws, warmup=warmup, chains=1, seed=seed, quiet=True))
    theta = {k: np.asarray(post.posterior[k], dtype=float).reshape(-1, *np.shape(post.posterior[k])[2:]).mean(0)
             for k in ("alpha", "beta", "tau", "block_group_mean", "tract_mix", "mix_shape", "mix_rate")}
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez(out, seed=seed, draws=draws, warmup=warmup, **theta)
    print(f"wrote {out}: alpha {float(theta['alpha']):.3f}, beta {float(theta['beta']):.2f}, "
          f"tau {float(theta['tau']):.3f}")


def _model_truth(fit_file: Path, seed: int) -> np.ndarray:
    """A block table drawn from the model (``families.census.draw_histograms``) at the fitted hyperparameters, on
    Hawaii's blocks, in geocode order: (blocks, cells)."""
    import dpposterior.census as dc
    from dpposterior.families.census import draw_histograms

    structure = dc.simulate(seed=0).structure
    return draw_histograms(_load_fit(fit_file), structure, np.random.default_rng([20_000, seed]))


def _load_fit(fit_file: Path) -> dict:
    """The hyperparameters a ``fit`` file holds, as ``draw_histograms`` and ``_run_chain(fixed=)`` take them."""
    f = np.load(fit_file)
    return {k: f[k] if f[k].ndim else float(f[k]) for k in ("alpha", "beta", "block_group_mean", "tract_mix")}


def _fixed_hyperparameters(release, opts, fit_file: Path, seed: int) -> np.ndarray:
    """Draws of x (draws, blocks, cells) from the engine's chain with the hyperparameters held at the fit file's
    values (``census_da._run_chain(fixed=)``, the path the brute-force reference test checks), one chain."""
    from dpposterior.families.census import parse_prior
    from dpposterior.inference import census_da as cd

    if opts.chains != 1:
        raise SystemExit("census_hawaii: --fixed-hyperparameters runs one chain")
    prob = cd.Problem(release.structure, parse_prior(None))
    return cd._run_chain(prob, opts, np.random.SeedSequence(seed), fixed=_load_fit(fit_file))[0]


def _by_cell(true, agg, gls_mean, gls_sd, labels) -> dict:
    """Per query cell (summed over the level's geounits where GLS has an estimate): the signed and squared errors
    of the posterior mean and of GLS, and each one's own variance -- where a bias sits, and whether each
    estimate's stated uncertainty matches its error."""
    ok = np.isfinite(gls_mean) & np.isfinite(gls_sd)
    mean, var = agg.mean(axis=0), agg.var(axis=0)

    def cellsum(a):
        return np.where(ok, a, 0.0).sum(axis=0).tolist()

    return {"labels": list(labels), "units": ok.sum(axis=0).tolist(),
            "da_error": cellsum(mean - true), "gls_error": cellsum(gls_mean - true),
            "da_sq_error": cellsum((mean - true) ** 2), "gls_sq_error": cellsum((gls_mean - true) ** 2),
            "da_variance": cellsum(var), "gls_variance": cellsum(gls_sd ** 2)}


def bias(files: list[str]) -> None:
    """Per level, query and query cell, over the trials: the mean signed error per geounit of the posterior mean
    and of GLS, and their paired difference (each with its standard error over trials); their squared-error
    ratio; and each one's squared error over its own stated variance (1 where the uncertainty is right)."""
    results = [json.loads(Path(f).read_text()) for f in files]
    results = [r for r in results if r.get("by_cell")]
    if not results:
        raise SystemExit("census_hawaii bias: no trial file has per-cell errors (rerun the trials)")
    print(f"{len(results)} trials")
    print("| level / query | cell | geounits | posterior-mean error | GLS error | difference | MSE posterior ÷ GLS | "
          "posterior MSE ÷ variance | GLS MSE ÷ variance |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in results[0]["by_cell"]:
        parts = [r["by_cell"][k] for r in results]
        for j, label in enumerate(parts[0]["labels"]):
            units = np.array([p["units"][j] for p in parts], dtype=float)
            if units.sum() == 0:
                continue
            err = {key: np.array([p[key][j] for p in parts]) / np.maximum(units, 1)
                   for key in ("da_error", "gls_error")}
            err["difference"] = err["da_error"] - err["gls_error"]

            def shown(v):  # one trial has no standard error
                return f"{v.mean():+.3f}" + (f" ± {v.std(ddof=1) / np.sqrt(len(v)):.3f}" if len(v) > 1 else "")

            tot = {key: sum(p[key][j] for p in parts) for key in ("da_sq_error", "gls_sq_error", "da_variance",
                                                                   "gls_variance")}
            print(f"| {k} | {label or 'total'} | {int(units[0])} | {shown(err['da_error'])} | "
                  f"{shown(err['gls_error'])} | {shown(err['difference'])} | "
                  f"{tot['da_sq_error'] / tot['gls_sq_error']:.3f} | {tot['da_sq_error'] / tot['da_variance']:.3f} | "
                  f"{tot['gls_sq_error'] / tot['gls_variance']:.3f} |")


def _mass(draws, lo, hi) -> np.ndarray:
    """Each cell's posterior mass of its own interval [lo, hi] (the share of draws in it).  Integer counts make a
    90% interval hold more than 0.90 of its posterior (the ends are whole values; an equal-tailed one at zero
    holds 0.95 or more): a calibrated posterior covers at this mass, not at 0.90."""
    return np.mean((draws >= lo) & (draws <= hi), axis=0)


def _sq_error(true, point) -> float:
    """The squared error summed over the cells where ``point`` is finite."""
    ok = np.isfinite(point)
    return float(np.sum((point[ok] - true[ok]) ** 2))


def _score(true, point, lo, hi, mass=None) -> dict:
    ok = np.isfinite(point) & np.isfinite(lo) & np.isfinite(hi)
    t, p, a, b = true[ok], point[ok], lo[ok], hi[ok]
    out = {"covered": int(np.sum((a <= t) & (t <= b))), "n": int(ok.sum()),
           "median_width": float(np.median(b - a)) if ok.any() else float("nan"),
           "sq_error": float(np.sum((p - t) ** 2))}
    if mass is not None:
        out["mass"] = float(np.sum(mass[ok]))
    return out


def run(trials: int, workers: int, draws: int, warmup: int, chains: int, folder: Path,
        model_truth: Path | None = None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    pending = list(range(trials))
    running: list[subprocess.Popen] = []
    env = {**os.environ, "NUMBA_NUM_THREADS": str(chains)}
    while pending or running:
        while pending and len(running) < workers:
            seed = pending.pop(0)
            cmd = [sys.executable, __file__, "trial", "--seed", str(seed), "--draws", str(draws), "--warmup",
                   str(warmup), "--chains", str(chains), "--out", str(folder / f"trial_{seed:03d}.json"),
                   *(["--model-truth", str(model_truth)] if model_truth else [])]
            running.append(subprocess.Popen(cmd, env=env))
        time.sleep(1.0)
        for p in list(running):
            if p.poll() is not None:
                running.remove(p)
                if p.returncode:
                    print(f"a trial failed with exit code {p.returncode}", file=sys.stderr)
        print(f"{trials - len(pending) - len(running)}/{trials} trials done", flush=True)


def table(files: list[str]) -> None:
    results = [json.loads(Path(f).read_text()) for f in files]
    keys = list(results[0]["cells"])
    methods = ("da", "gls", "flat", "naive")
    et = all("da_equal_tailed" in r["cells"][k] for r in results for k in keys)
    print(f"{len(results)} trials; draws {results[0]['draws']} x {results[0]['chains']} chains after "
          f"{results[0]['warmup']} warm-up; sampling {np.median([r['sample_s'] for r in results]):.0f} s (median)")
    print("| level / query | " + " | ".join(f"{m} coverage" for m in methods) + " | " +
          " | ".join(f"{m} width" for m in methods) + " | " + " | ".join(f"{m} RMSE" for m in methods) +
          " | da interval's posterior mass | da posterior-mean RMSE | da median / GLS MSE | da mean / GLS MSE |"
          + (" da equal-tailed coverage | its width | its posterior mass |" if et else ""))
    print("|---" * (5 + 3 * len(methods) + 3 * et) + "|")
    for k in keys:
        cov, wid, rmse = [], [], []
        for m in methods:
            parts = [r["cells"][k].get(m) for r in results if r["cells"][k].get(m)]
            if not parts:
                cov.append("--"), wid.append("--"), rmse.append("--")
                continue
            cov.append(_coverage(parts) + f" (trials {min(_per_trial(parts)):.2f}-{max(_per_trial(parts)):.2f})")
            wid.append(f"{np.median([p['median_width'] for p in parts]):.1f}")
            rmse.append(f"{np.sqrt(sum(p['sq_error'] for p in parts) / sum(p['n'] for p in parts)):.2f}")
        da = [r["cells"][k]["da"] for r in results]
        held = (f"{sum(p['mass'] for p in da) / sum(p['n'] for p in da):.3f}" if all("mass" in p for p in da)
                else "--")
        mean_rmse = (f"{np.sqrt(sum(p['sq_error_mean'] for p in da) / sum(p['n'] for p in da)):.2f}"
                     if all("sq_error_mean" in p for p in da) else "--")
        ratios = [_mse_ratio(results, k, key) for key in ("sq_error", "sq_error_mean")]
        extra = ""
        if et:
            parts = [r["cells"][k]["da_equal_tailed"] for r in results]
            extra = (f" {_coverage(parts)} | {np.median([p['median_width'] for p in parts]):.1f} | "
                     f"{sum(p['mass'] for p in parts) / sum(p['n'] for p in parts):.3f} |")
        print(f"| {k} | " + " | ".join(cov) + " | " + " | ".join(wid) + " | " + " | ".join(rmse) +
              f" | {held} | {mean_rmse} | " + " | ".join(ratios) + " |" + extra)


def _per_trial(parts: list[dict]) -> list[float]:
    return [p["covered"] / p["n"] for p in parts if p["n"]]


def _coverage(parts: list[dict]) -> str:
    """Coverage over every trial's cells, ± the standard error of the trials' own coverages."""
    per = _per_trial(parts)
    se = np.std(per, ddof=1) / np.sqrt(len(per)) if len(per) > 1 else float("nan")
    return f"{sum(p['covered'] for p in parts) / sum(p['n'] for p in parts):.3f} ± {se:.3f}"


def _mse_ratio(results: list[dict], k: str, key: str) -> str:
    """The posterior's squared error over GLS's, summed over every trial's cells, with its jackknife standard
    error over trials: both estimates see the same noise in a trial, so the ratio is paired, and the trial (not
    the cell, as cells of one release share its noise) is the independent unit."""
    pairs = [(r["cells"][k]["da"].get(key), r["cells"][k].get("gls", {}).get("sq_error")) for r in results]
    if any(a is None or b is None for a, b in pairs) or len(pairs) < 2:
        return "--"
    if any(r["cells"][k]["da"]["n"] != r["cells"][k]["gls"]["n"] for r in results):
        return "-- (GLS leaves cells unidentified: not paired)"
    a, b = np.array(pairs, dtype=float).T
    t = len(a)
    jack = (a.sum() - a) / (b.sum() - b)
    se = np.sqrt((t - 1) / t * np.sum((jack - jack.mean()) ** 2))
    return f"{a.sum() / b.sum():.3f} ± {se:.3f}"


def timing(draws: int, warmup: int, chains: int) -> None:
    """Hawaii's whole default user path, first call included: simulate, save, ``dpposterior infer`` in a fresh
    process (compiled kernels from the cache when present), wall time and peak memory."""
    import tempfile

    import dpposterior.census as dc

    folder = Path(tempfile.mkdtemp())
    dc.save(dc.simulate(seed=0), folder / "hawaii.json")
    before = loadavg()
    t = time.time()
    proc = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-m", "dpposterior", "infer",
                           str(folder / "hawaii.json"), "--draws", str(draws), "--warmup", str(warmup), "--chains",
                           str(chains), "--seed", "1", "--out", str(folder / "post.nc"), "--quiet"],
                          capture_output=True, text=True)
    wall = time.time() - t
    peak = [line for line in proc.stderr.splitlines() if "Maximum resident" in line]
    print(f"RESULT wall_s={wall:.1f} rc={proc.returncode} {peak[0].strip() if peak else ''} "
          f"load_before={before} load_after={loadavg()}")
    if proc.returncode:
        print(proc.stderr[-2000:])


def tiled_structure(times: int, seed: int = 0):
    """Hawaii tiled ``times`` times into one synthetic state: tile i's county codes are Hawaii's + 10 i (so GEOIDs
    stay sorted and every geounit below the state is a copy), the state's measurements those of the whole, every
    row's noise drawn afresh with the production strategy's variance (exact discrete Gaussian), the state total
    invariant.  Built from arrays: reading a release file of 100x Hawaii's 44 million rows would need about 30 GB
    (docs/census.md, "Limits"), which this machine does not have."""
    import dpposterior.census as dc
    from dpposterior.families.census_strategy import read_truth
    from dpposterior.families.census_table import CensusStructure
    from dpposterior.mechanisms.discrete_gaussian import DiscreteGaussian

    geocodes, counts, _ = read_truth()
    order = np.argsort(geocodes, kind="stable")
    truth = counts[order].reshape(len(geocodes), -1)
    s1 = dc.simulate(seed=seed).structure
    true = np.empty(s1.M, dtype=np.int64)
    for li in range(s1.L):
        for qi in range(s1.Q):
            rows, units, cells = s1.measured(li, qi)
            if rows.size:
                true[rows] = s1.aggregate(truth, li, qi)[units, cells]
    top = s1.level == 0
    per = ~top
    n_units = np.array([len(u) for u in s1.units])
    tiles = np.arange(times)[:, None]

    def tiled(a):
        return np.concatenate([a[top], np.tile(a[per], times)])

    unit = np.concatenate([s1.unit[top], (s1.unit[per][None, :] + tiles * n_units[s1.level[per]][None, :]).ravel()])
    level, query, cell, variance, sigma = (tiled(a) for a in (s1.level, s1.query, s1.cell, s1.variance, s1.sigma))
    noisy = np.concatenate([times * true[top], np.tile(true[per], times)])
    rng = np.random.default_rng(seed)
    for sg in np.unique(sigma):
        at = np.flatnonzero(sigma == sg)
        noisy[at] += DiscreteGaussian(float(sg)).draw(at.size, rng)

    def relabel(codes, i):
        return np.array([c[:2] + f"{int(c[2:5]) + 10 * i:03d}" + c[5:] for c in codes]) if i else codes

    units = [s1.units[0]] + [np.concatenate([relabel(s1.units[li], i) for i in range(times)]) for li in range(1, s1.L)]
    block_unit = np.concatenate([np.zeros((1, s1.B * times), dtype=s1.block_unit.dtype),
                                 np.concatenate([s1.block_unit[1:] + i * n_units[1:, None] for i in range(times)],
                                                axis=1)])
    total = int(truth.sum()) * times
    return CensusStructure(s1.attributes, s1.queries, s1.levels, units, block_unit, s1.query_cell, s1.query_sizes,
                           level, unit, query, cell, noisy, variance, sigma,
                           {s1.levels[0]: (np.array([0]), np.array([total]))})


def tiled(times: int, sweeps: int, scheduler: str, partitions: int | None) -> None:
    """The partitioned ``da`` engine on Hawaii tiled ``times`` times: ``sweeps`` sweeps of one chain (warm-up
    ``sweeps`` - 1, one kept draw), seconds per sweep and peak memory; ``scheduler`` serial (the partitioned sweep
    in this process) or local (a Dask LocalCluster, one worker process per core)."""
    import resource

    from dpposterior.execution import use_executor
    from dpposterior.inference.census_da import CensusDAOptions, census_da

    t0 = time.time()
    s = tiled_structure(times)
    t1 = time.time()
    print(f"tiled x{times}: {s.B:,} blocks, {s.B * s.C:,} latent cells, {s.M:,} measurements; built in "
          f"{t1 - t0:.0f} s", flush=True)

    class Release:
        structure = s
        sha256 = f"tiled-{times}"

    from dataclasses import replace

    from dpposterior.families.census import CensusPrior, observation_model

    # the tiled structure has no release file: its model is built on the stand-in and given what
    # release.observation_model would attach (the release and the parsed prior)
    prior = CensusPrior()
    model = observation_model(Release, prior)
    model = replace(model, release=Release, prior=replace(model.prior, spec=prior))

    import dpposterior.inference.census_da as cd

    # time each step of the partitioned sweep (the set-up is the rest)
    spent = {"global": 0.0, "partitions": 0.0, "hyper": 0.0}

    def timed(name, fn):
        def call(*args, **kwargs):
            t = time.perf_counter()
            out = fn(*args, **kwargs)
            spent[name] += time.perf_counter() - t
            return out
        return call

    cd.global_moves = timed("global", cd.global_moves)
    cd.hyper_step = timed("hyper", cd.hyper_step)
    cd.PartRunner.sweep = timed("partitions", cd.PartRunner.sweep)
    before = loadavg()
    opts = CensusDAOptions(draws=1, warmup=sweeps - 1, chains=1, seed=1, partition="county", partitions=partitions)
    workers_gb = None
    with use_executor(scheduler) as ex:
        t2 = time.time()
        census_da(model, opts)
        t3 = time.time()
        client = ex.dask_client()
        if client is not None:
            def peak_rss():
                import resource as r

                return r.getrusage(r.RUSAGE_SELF).ru_maxrss / 1e6

            workers_gb = sorted(round(v, 2) for v in client.run(peak_rss).values())
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    per = {k: round(v / sweeps, 2) for k, v in spent.items()}
    print(f"RESULT times={times} scheduler={scheduler} sweeps={sweeps} engine_s={t3 - t2:.1f} "
          f"setup_s={t3 - t2 - sum(spent.values()):.1f} per_sweep_s={sum(per.values()):.2f} {per} "
          f"peak_rss_GB={peak:.2f} (this process) workers_peak_rss_GB={workers_gb} load_before={before} "
          f"load_after={loadavg()}", flush=True)


def figure(table_md: str, update: bool) -> None:
    """Coverage of the 90% intervals by level and query, each method beside, and the posterior's squared error
    over GLS's, from ``table``'s markdown."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from _out import img_dir

    lines = Path(table_md).read_text().splitlines()
    head = next(line.split("|")[1:-1] for line in lines if line.startswith("| level / query"))
    head = [h.strip() for h in head]
    rows = [line.split("|")[1:-1] for line in lines if line.startswith("| ")
            and "/" in line.split("|")[1] and "coverage" not in line]
    names = [r[0].strip() for r in rows]
    x = np.arange(len(names))

    def value(cell):  # "0.930 ± 0.030 (trials ...)" -> (0.930, 0.030); "--" -> (nan, 0)
        parts = cell.split()
        v = float(parts[0]) if parts and parts[0] != "--" else np.nan
        return v, (float(parts[2]) if len(parts) > 2 and parts[1] == "±" else 0.0)

    methods = ("da", "gls", "flat", "naive")
    labels = {"da": "posterior (da), HPD interval", "gls": "GLS (Census Bureau)", "flat": "per-cell flat prior",
              "naive": "naive"}
    fig, (ax, bx) = plt.subplots(2, 1, figsize=(10, 7.2), sharex=True, gridspec_kw={"height_ratios": [3, 2]})
    for k, m in enumerate(methods):
        ys, ses = zip(*(value(r[1 + k]) for r in rows))
        # the bars: two trial-level standard errors
        ax.errorbar(x + (k - 1.5) * 0.12, ys, yerr=2 * np.array(ses), fmt="o", label=labels[m], ms=5,
                    elinewidth=1, capsize=2)
    if "da equal-tailed coverage" in head:  # the posterior's equal-tailed interval, beside its HPD one
        ys, ses = zip(*(value(r[head.index("da equal-tailed coverage")]) for r in rows))
        ax.errorbar(x - 2.5 * 0.12, ys, yerr=2 * np.array(ses), fmt="o", mfc="none", color="C0", ms=5,
                    elinewidth=1, capsize=2, label="posterior (da), equal-tailed interval")
    ax.axhspan(0.85, 0.95, color="0.9", zorder=0)
    ax.axhline(0.9, color="0.5", lw=0.8)
    ax.set_ylabel("coverage of 90% intervals")
    ax.set_ylim(0.35, 1.0)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title("Hawaii, 2020 production budget (shaded: 0.85-0.95; bars: 2 se over trials)", fontsize=10)
    for k, (col, label) in enumerate((("da median / GLS MSE", "posterior median"),
                                      ("da mean / GLS MSE", "posterior mean"))):
        if col not in head:
            continue
        ys, ses = zip(*(value(r[head.index(col)]) for r in rows))
        bx.errorbar(x + (k - 0.5) * 0.15, ys, yerr=2 * np.array(ses), fmt="o", label=label, ms=5, elinewidth=1,
                    capsize=2)
    bx.axhline(1.0, color="0.5", lw=0.8)
    bx.set_yscale("log")
    ticks = [0.3, 0.4, 0.5, 0.7, 1.0, 1.2]
    bx.set_yticks(ticks, [f"{t:g}" for t in ticks])
    bx.minorticks_off()
    bx.set_ylabel("squared error / GLS's")
    bx.legend(fontsize=8, loc="lower left")
    bx.set_xticks(x)
    bx.set_xticklabels(names, rotation=45, ha="right", fontsize=8)
    fig.tight_layout()
    out = img_dir(update) / "census_coverage.png"
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def gls_time() -> None:
    """GLS (the Bureau's baseline) on the same simulated Hawaii release: wall time of two calls (the first
    compiles unless cached) and the process's peak memory."""
    import resource

    import dpposterior.census as dc
    from dpposterior.inference.census_peers import gls

    s = dc.simulate(seed=0).structure
    before = loadavg()
    times = []
    for _ in range(2):
        t = time.time()
        gls(s).estimate("tract", "total")
        times.append(time.time() - t)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"RESULT gls_s={times[0]:.2f},{times[1]:.2f} peak_rss_mb={peak:.0f} load_before={before} "
          f"load_after={loadavg()}")


def spread(min_persons: int) -> None:
    """How much each cell's share varies between Hawaii's tracts, as a Dirichlet concentration fitted cell by cell
    (method of moments: m (1 - m) / (between-tract variance - mean binomial variance) - 1, tracts of at least
    ``min_persons``), from the shipped truth: the spread a single Dirichlet(gamma m) would have to give every
    cell alike; and the relative spread (sd / mean of the shares), which one shape of the scaled Dirichlet gives
    every cell alike (docs/census.md, "The model and prior")."""
    from dpposterior.families.census_strategy import read_truth

    geocodes, counts, attributes = read_truth()
    x = counts.reshape(len(geocodes), -1)
    tracts, index = np.unique(geocodes.astype(str).astype("U11"), return_inverse=True)  # GEOID prefix: the tract
    X = np.zeros((len(tracts), x.shape[1]))
    np.add.at(X, index, x)
    n = X.sum(axis=1)
    X, n = X[n >= min_persons], n[n >= min_persons]
    p = X / n[:, None]
    m = X.sum(axis=0) / X.sum()
    labels = [f"{a} {e}" for a in attributes["age"] for e in attributes["ethrace"]]
    print(f"{len(n)} tracts of at least {min_persons} persons")
    print("| cell | share | sd between tracts | fitted concentration | relative spread |\n|---|---|---|---|---|")
    for c, label in enumerate(labels):
        excess = p[:, c].var() - np.mean(m[c] * (1 - m[c]) / n)
        conc = m[c] * (1 - m[c]) / excess - 1 if excess > 0 else float("inf")
        relative = np.sqrt(max(excess, 0.0)) / m[c]  # sd / mean of the shares, binomial noise taken out
        print(f"| {label} | {m[c]:.4f} | {p[:, c].std():.4f} | {conc:.1f} | {relative:.2f} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    a = sub.add_parser("trial")
    a.add_argument("--seed", type=int, default=0)
    a.add_argument("--draws", type=int, default=200)
    a.add_argument("--warmup", type=int, default=200)
    a.add_argument("--chains", type=int, default=1)
    a.add_argument("--out", default=None)
    a.add_argument("--model-truth", type=Path, default=None, help="a fit file: the truth is drawn from the model")
    a.add_argument("--fixed-hyperparameters", action="store_true",
                   help="with --model-truth: the posterior of x given the hyperparameters that drew the truth")
    add_update_flag(a)
    ft = sub.add_parser("fit")
    ft.add_argument("--out", type=Path, required=True)
    ft.add_argument("--seed", type=int, default=0)
    ft.add_argument("--draws", type=int, default=300)
    ft.add_argument("--warmup", type=int, default=200)
    r = sub.add_parser("run")
    r.add_argument("--trials", type=int, default=20)
    r.add_argument("--workers", type=int, default=2)
    r.add_argument("--draws", type=int, default=200)
    r.add_argument("--warmup", type=int, default=200)
    r.add_argument("--chains", type=int, default=1)
    r.add_argument("--folder", default=None)
    r.add_argument("--model-truth", type=Path, default=None, help="a fit file: each truth is drawn from the model")
    add_update_flag(r)
    tb = sub.add_parser("table")
    tb.add_argument("files", nargs="+")
    bs = sub.add_parser("bias")
    bs.add_argument("files", nargs="+")
    tm = sub.add_parser("time")
    tm.add_argument("--draws", type=int, default=500)
    tm.add_argument("--warmup", type=int, default=500)
    tm.add_argument("--chains", type=int, default=2)
    sub.add_parser("gls")
    sp = sub.add_parser("spread")
    sp.add_argument("--min-persons", type=int, default=100)
    tl = sub.add_parser("tiled")
    tl.add_argument("--times", type=int, default=100)
    tl.add_argument("--sweeps", type=int, default=3)
    tl.add_argument("--scheduler", default="local")
    tl.add_argument("--partitions", type=int, default=None)
    fg = sub.add_parser("figure")
    fg.add_argument("table_md")
    add_update_flag(fg)
    args = ap.parse_args()
    if args.cmd == "trial":
        out = out_path(args.out, f"census_hawaii_trial_{args.seed:03d}.json", args.update_results)
        if args.fixed_hyperparameters and args.model_truth is None:
            ap.error("--fixed-hyperparameters needs --model-truth (the hyperparameters that drew the truth)")
        trial(args.seed, args.draws, args.warmup, args.chains, Path(out), args.model_truth, args.fixed_hyperparameters)
    elif args.cmd == "fit":
        fit(args.out, args.seed, args.draws, args.warmup)
    elif args.cmd == "run":
        folder = Path(args.folder) if args.folder else out_path(None, "census_hawaii", args.update_results)
        run(args.trials, args.workers, args.draws, args.warmup, args.chains, folder, args.model_truth)
    elif args.cmd == "table":
        table(args.files)
    elif args.cmd == "bias":
        bias(args.files)
    elif args.cmd == "gls":
        gls_time()
    elif args.cmd == "spread":
        spread(args.min_persons)
    elif args.cmd == "figure":
        figure(args.table_md, args.update_results)
    elif args.cmd == "tiled":
        tiled(args.times, args.sweeps, args.scheduler, args.partitions)
    else:
        timing(args.draws, args.warmup, args.chains)


if __name__ == "__main__":
    main()
