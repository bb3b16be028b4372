"""Scaling of one calibration grid over the execution backends (issue 7, docs/scaling.md).

The grid (binomial family, Gibbs-SS and naive, n x epsilon cells, ``--trials`` per cell)
is cut into the same checkpointed units ``dpposterior calibrate`` uses (250 trials per
unit, one ``SeedSequence`` child each) and run as ONE ``checkpoint.run_units`` study on
each backend:

* ``serial``      -- one process, no pool;
* ``processes:1`` -- a pool of one worker process (the pool's own overhead);
* ``processes:2`` -- two local worker processes;
* ``local:2``     -- a Dask LocalCluster of two single-threaded workers;
* ``tcp://...``   -- an existing Dask cluster, if ``--scheduler`` names one.

It prints wall-clock seconds, the speed-up over ``serial``, the CPU seconds used by the run
and its worker processes (CPU/wall = the parallelism actually obtained) and checks that every
backend returns bit-identical results.  Usage::

    python benchmarks/scaling.py [--trials 1000] [--scheduler tcp://HOST:8786]

The machine's load average is printed too: on a shared machine the ratios are only as
good as the cores that were free.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import time

from dpposterior.checkpoint import run_units
from dpposterior.diagnostics.calibration import DEFAULT_CHUNK, calibration_unit, summarise_ranks
from dpposterior.execution import spawn_seeds

import numpy as np


def grid_units(trials: int, seed: int, ns, epsilons, draws: int):
    units, cells = [], []
    grid = [(n, eps) for n in ns for eps in epsilons]
    for (n, eps), cell_seed in zip(grid, spawn_seeds(seed, len(grid))):
            n_units = math.ceil(trials / DEFAULT_CHUNK)
            for i, ss in enumerate(cell_seed.spawn(n_units)):
                units.append({"family": "binomial", "n": n, "epsilon": eps, "prior": None,
                              "methods": ["gibbs-ss", "naive"], "draws": draws, "seed": ss,
                              "trials": min(DEFAULT_CHUNK, trials - i * DEFAULT_CHUNK)})
                cells.append((n, eps))
    return units, cells


def _cpu_seconds() -> float:
    """CPU seconds used by this process and every finished (waited-for) descendant: worker
    processes and Dask workers are counted once the pool or cluster has shut down."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def run(backend: str, units):
    scheduler, _, workers = backend.partition(":")
    c0, t0 = _cpu_seconds(), time.perf_counter()
    results = run_units(calibration_unit, units, scheduler=scheduler, workers=int(workers) if workers else None,
                        quiet=True)
    return time.perf_counter() - t0, _cpu_seconds() - c0, results


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=1000, help="trials per cell (default 1000)")
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scheduler", default=None, help="also time this tcp://HOST:PORT Dask scheduler")
    ap.add_argument("--backends", default="serial,processes:1,processes:2,local:2")
    args = ap.parse_args()
    ns, epsilons = [100, 1000], [0.1, 1.0]
    units, cells = grid_units(args.trials, args.seed, ns, epsilons, args.draws)
    backends = args.backends.split(",") + ([args.scheduler] if args.scheduler else [])
    print(f"calibration grid: binomial, n in {ns}, epsilon in {epsilons}, {args.trials} trials per cell, "
          f"methods gibbs-ss + naive, {args.draws} draws; {len(units)} units of <= {DEFAULT_CHUNK} trials")
    print(f"cpus available: {len(os.sched_getaffinity(0))}; load average before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    reference, base = None, None
    print(f"{'backend':<16}{'wall s':>8}{'speed-up':>10}{'CPU s':>8}{'CPU/wall':>10}  identical")
    for backend in backends:
        units, cells = grid_units(args.trials, args.seed, ns, epsilons, args.draws)  # fresh units per run
        seconds, cpu, results = run(backend, units)
        text = json.dumps(results, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o))
        same = "-" if reference is None else ("yes" if text == reference else "NO")
        reference = reference or text
        base = base or seconds
        # CPU/wall is the parallelism the run obtained: ~1 serial, up to the worker count when
        # the cores are free (tcp:// workers on other machines are not counted)
        print(f"{backend:<16}{seconds:>8.1f}{base / seconds:>10.2f}{cpu:>8.1f}{cpu / seconds:>10.2f}  {same}",
              flush=True)
    # the science is the same whichever backend ran it: KS of Gibbs-SS per cell
    res = json.loads(reference)
    for cell in sorted(set(cells)):
        u = np.concatenate([np.asarray(r["ranks"]["gibbs-ss"])[:, 0] for r, c in zip(res, cells) if c == cell])
        print(f"  n={cell[0]:<5} eps={cell[1]:<4} gibbs-ss KS = {summarise_ranks(u)['ks']:.3f}")
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))


if __name__ == "__main__":
    main()
