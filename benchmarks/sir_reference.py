"""A converged reference posterior for examples/releases/sir-eps10.json.

Method: :mod:`dpposterior.diagnostics.sir_reference` (time change tau = gamma t): every exact
Gillespie trajectory simulated at (R0, gamma = 1) gives the release's likelihood at every gamma of
the grid, so the likelihood is estimated without bias on a (log R0, log gamma) grid and the
posterior is prior x likelihood on that grid.  No tolerance, no flow, no MCMC.

Two independent runs (``--runs A,B``: seed streams ``SeedSequence(seed).spawn``) each simulate
``--trajectories`` epidemics per log R0 row, in chunks run through dpposterior's executor
(``--scheduler processes --workers 2``) and checkpointed after every chunk by
:func:`dpposterior.checkpoint.run_units` (rerun the same command to resume; other options are refused).  The convergence check compares the two runs' posterior means and sds (in posterior
sd) and their C2ST; the pooled posterior is written as 200,000 equally weighted draws in
``benchmarks/results/isref_sir-eps10.npz`` (the format of the linreg-ju references, read by
benchmarks/sbi_peer.py) with a JSON summary beside it.

    python benchmarks/sir_reference.py --trajectories 400 --workers 2      # ~25 min on 2 cores
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
PROBLEM = "sir-eps10"
REFERENCE_DRAWS = 200_000


def grid(args):
    log_r0 = np.round(np.arange(args.log_r0[0], args.log_r0[1] + 1e-9, args.log_r0[2]), 6)
    log_gamma = np.round(np.arange(args.log_gamma[0], args.log_gamma[1] + 1e-9, args.log_gamma[2]), 6)
    return log_r0, log_gamma


def chunk_task(task):
    """One chunk: (run, row, chunk, seed sequence, release, log_r0, log_gamma, size) -> sums over its trajectories."""
    from dpposterior.diagnostics.sir_reference import release_log_likelihoods

    run, row, chunk, seed, release, log_r0, log_gamma, size = task
    t0 = time.process_time()
    ll = release_log_likelihoods(release, log_r0, log_gamma, size, np.random.default_rng(seed))
    return {"run": run, "row": row, "chunk": chunk, "n": size, "lse": logsumexp(ll, 0),
            "lse2": logsumexp(2 * ll, 0), "cpu_s": time.process_time() - t0}


def assemble(state, run_names, log_r0, log_gamma, model):
    from dpposterior.diagnostics.sir_reference import grid_posterior

    lse = np.full((len(log_r0), len(log_gamma)), -np.inf)
    lse2 = lse.copy()
    n = np.zeros(len(log_r0))
    for res in state:
        if res["run"] in run_names:
            lse[res["row"]] = np.logaddexp(lse[res["row"]], res["lse"])
            lse2[res["row"]] = np.logaddexp(lse2[res["row"]], res["lse2"])
            n[res["row"]] += res["n"]
    post = grid_posterior(log_r0, log_gamma, lse, n, model.prior)
    ess = np.exp(2 * lse - lse2)   # Kish ESS of the trajectories behind each grid point
    return post, ess


def ess_summary(w, ess):
    """How well the trajectories cover the grid: the Kish ESS behind the cells, weighted by posterior mass
    and its minimum over the cells of the 90% highest-mass region; the mass on the grid's edges."""
    order = np.argsort(-w.ravel())
    top = order[: np.searchsorted(np.cumsum(w.ravel()[order]), 0.9) + 1]
    return {"ess_mass_weighted": float((w * ess).sum()), "ess_min_in_90pct_cells": float(ess.ravel()[top].min()),
            "edge_mass": float(w.sum() - w[1:-1, 1:-1].sum())}


def main():
    from _out import add_update_flag, results_dir

    ap = argparse.ArgumentParser()
    ap.add_argument("--trajectories", type=int, default=400, help="per log R0 row and run")
    ap.add_argument("--chunk", type=int, default=100)
    ap.add_argument("--runs", default="A,B")
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--log-r0", type=float, nargs=3, default=(2.2, 3.04, 0.02), metavar=("LO", "HI", "STEP"))
    ap.add_argument("--log-gamma", type=float, nargs=3, default=(-3.2, -2.8, 0.0025), metavar=("LO", "HI", "STEP"))
    ap.add_argument("--scheduler", default="processes")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--max-disagreement", type=float, default=0.1,
                    help="fail (exit 1) when the two runs' means differ by more than this many posterior sds "
                         "or their sds by more than this fraction")
    ap.add_argument("--checkpoint", default=None, help="default: sir_reference_checkpoint.json beside the results")
    add_update_flag(ap)
    args = ap.parse_args()
    folder = results_dir(args.update_results)
    print(f"(results go to {folder})", flush=True)
    args.checkpoint = args.checkpoint or str(folder / "sir_reference_checkpoint.json")

    import sys

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from sbi_peer import load_model
    from dpposterior.diagnostics.metrics import c2st
    from dpposterior.checkpoint import run_units
    from dpposterior.release import load_release

    model = load_model(PROBLEM)
    release = load_release(ROOT / "examples" / "releases" / f"{PROBLEM}.json")
    log_r0, log_gamma = grid(args)
    runs = args.runs.split(",")
    chunks = -(-args.trajectories // args.chunk)
    seeds = np.random.SeedSequence(args.seed).spawn(len(runs))
    tasks = []
    for ri, run in enumerate(runs):
        row_seeds = seeds[ri].spawn(len(log_r0))
        for row in range(len(log_r0)):
            for c, s in enumerate(row_seeds[row].spawn(chunks)):
                size = min(args.chunk, args.trajectories - c * args.chunk)
                tasks.append((run, row, c, s, release, float(log_r0[row]), log_gamma, size))
    # resumed only by the same grid, seed, chunking and --runs (run streams follow their place in it)
    fingerprint = {"problem": PROBLEM, "log_r0": log_r0, "log_gamma": log_gamma, "seed": args.seed,
                   "trajectories": args.trajectories, "chunk": args.chunk, "runs": args.runs}
    t0 = time.perf_counter()
    from dpposterior.errors import InputError

    try:
        state = run_units(chunk_task, tasks, scheduler=args.scheduler, checkpoint=args.checkpoint, resume=True,
                          fingerprint=fingerprint, quiet=False, description="chunks", workers=args.workers)
    except InputError as exc:   # a checkpoint of other options: one line, no traceback
        raise SystemExit(f"error: {exc} (or pass another --checkpoint)") from None
    wall = time.perf_counter() - t0
    cpu = sum(r["cpu_s"] for r in state)
    trajectories = sum(r["n"] for r in state)

    summary = {"problem": PROBLEM, "method": "time-change grid (dpposterior.diagnostics.sir_reference)",
               "args": {k: v for k, v in vars(args).items() if k != "checkpoint"},
               "trajectories": trajectories, "cpu_s": cpu, "wall_s_this_invocation": wall, "runs": {}}
    posts = {}
    for run in runs:
        post, ess = assemble(state, [run], log_r0, log_gamma, model)
        mean, sd = post.moments()
        posts[run] = post
        w = np.exp(post.log_weight)
        summary["runs"][run] = {"mean": mean.tolist(), "sd": sd.tolist(), **ess_summary(w, ess)}
    pooled, ess = assemble(state, runs, log_r0, log_gamma, model)
    mean, sd = pooled.moments()
    w = np.exp(pooled.log_weight)
    summary["pooled"] = {"mean": mean.tolist(), "sd": sd.tolist(), **ess_summary(w, ess)}
    if len(runs) == 2:
        a, b = (summary["runs"][r] for r in runs)
        rng = np.random.default_rng(0)
        summary["agreement"] = {
            "max_abs_dmean_over_sd": float(np.max(np.abs(np.subtract(a["mean"], b["mean"])) / sd)),
            "max_abs_sd_ratio_minus_1": float(np.max(np.abs(np.divide(a["sd"], b["sd"]) - 1))),
            "c2st": float(c2st(posts[runs[0]].sample(2000, rng), posts[runs[1]].sample(2000, rng), max_samples=2000)),
        }
    print(json.dumps(summary, indent=1))
    agreement = summary.get("agreement")
    if agreement and max(agreement["max_abs_dmean_over_sd"], agreement["max_abs_sd_ratio_minus_1"]) > args.max_disagreement:
        # refused before the reference files are written: a failed check leaves the stored reference as it was
        raise SystemExit(f"the two runs disagree by more than {args.max_disagreement} (means in sd, sds as a "
                         "fraction): not converged -- raise --trajectories")
    draws = pooled.sample(REFERENCE_DRAWS, np.random.default_rng(1))
    np.savez_compressed(folder / f"isref_{PROBLEM}.npz", theta=draws, log_weight=np.zeros(len(draws)),
                        grid_log_r0=log_r0, grid_log_gamma=log_gamma, grid_log_weight=pooled.log_weight)
    (folder / f"isref_{PROBLEM}.json").write_text(json.dumps(summary, indent=1))

if __name__ == "__main__":
    main()
