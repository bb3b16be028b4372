"""Small-area exact-da at scale: wall time and peak memory of one ``infer`` call on a simulated table.

    python benchmarks/small_area_scale.py --G 100000 --C 10 --draws 1000 --warmup 200          # 10^6 cells, serial
    python benchmarks/small_area_scale.py --G 1000000 --C 10 --draws 50 --warmup 25 \\
        --scheduler local --workers 2                                                     # 10^7 cells on Dask

Each run is one fresh process (run the script once per configuration); it appends a JSON row (sizes,
wall seconds of the ``infer`` call, seconds per iteration of the chains, peak RSS of this process and of
the Dask workers, the 1-minute load average before and after, tau and alpha against the truth, the
convergence flags) to ``benchmarks/results/small_area_scale.json``.  The data: ``simulate(SmallAreaPrior(
alpha_mean=1, alpha_sd=1), G, C, sigma=2, rng, exposure=uniform(5, 50), tau=0.5)`` with rng = default_rng(1).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).parent / "results" / "small_area_scale.json"


def _load() -> float:
    return float(open("/proc/loadavg").read().split()[0])


def _worker_peak_gb(client) -> float:
    def peak():
        import resource as r

        return r.getrusage(r.RUSAGE_SELF).ru_maxrss / 1e6

    return float(max(client.run(peak).values()))


def main() -> None:
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser()
    ap.add_argument("--G", type=int, required=True)
    ap.add_argument("--C", type=int, default=10)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--scheduler", default="serial")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--partitions", type=int, default=None)
    ap.add_argument("--out", type=Path, default=None)
    add_update_flag(ap)
    args = ap.parse_args()
    args.out = out_path(args.out, RESULTS.name, args.update_results)

    import dpposterior as dp
    from dpposterior.execution import use_workers
    from dpposterior.families.small_area import SmallAreaPrior, simulate

    load_before = _load()
    rng = np.random.default_rng(1)
    t = time.perf_counter()
    truth, rel = simulate(SmallAreaPrior(alpha_mean=1.0, alpha_sd=1.0), args.G, args.C, 2.0, rng,
                          exposure=rng.uniform(5, 50, size=args.G), tau=0.5)
    release = dp.load_release(rel)
    prep = time.perf_counter() - t
    kw = dict(prior={"alpha_mean": 1.0, "alpha_sd": 1.0}, seed=1, draws=args.draws, warmup=args.warmup,
              chains=args.chains)
    worker_gb = None
    t = time.perf_counter()
    if args.scheduler == "local":
        import logging

        from dask.distributed import Client, LocalCluster

        with LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True, dashboard_address=None,
                          silence_logs=logging.CRITICAL) as lc:
            start = time.perf_counter()
            post = dp.infer(release, scheduler=lc.scheduler_address, partitions=args.partitions, **kw)
            wall = time.perf_counter() - start
            with Client(lc) as client:  # (after infer: a second client in the process would be the actors' default)
                worker_gb = _worker_peak_gb(client)
    else:
        with use_workers(args.workers):
            post = dp.infer(release, scheduler=args.scheduler, **kw)
        wall = time.perf_counter() - t
    row = {"G": args.G, "C": args.C, "cells": args.G * args.C, "chains": args.chains, "draws": args.draws,
           "warmup": args.warmup, "scheduler": args.scheduler, "workers": args.workers if args.scheduler != "serial"
           else None, "partitions": post.attrs.get("partitions"), "prepare_s": round(prep, 2),
           "infer_s": round(wall, 2), "s_per_iteration": round(wall / (args.draws + args.warmup), 4),
           "peak_rss_gb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2),
           "worker_peak_rss_gb": None if worker_gb is None else round(worker_gb, 2),
           "load_before": load_before, "load_after": _load(),
           "tau_mean": float(post.draws("tau").mean()), "tau_true": float(truth["tau"]),
           "alpha_max_abs_error": float(np.abs(post.draws("alpha").mean(0) - truth["alpha"]).max()),
           "warnings": list(post.warnings)[:3], "date": time.strftime("%Y-%m-%d %H:%M")}
    print(json.dumps(row))
    rows = json.loads(args.out.read_text()) if args.out.exists() else []
    rows.append(row)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
