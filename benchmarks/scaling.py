"""Scaling of one calibration study over the execution backends (docs/scaling.md).

The study: ``dpposterior calibrate --family binomial --n 100 --epsilon 0.1
--trials 2000 --methods gibbs-ss,naive`` (5,000 draws per posterior after the engine's warm-up,
as ``infer`` runs it; the recorded results were measured after 2,000), run through ``diagnostics.calibration.calibrate`` on

* ``serial``                      -- the calling process, no pool;
* ``processes:1``, ``processes:2`` -- a pool of 1 / 2 spawned worker processes;
* ``local:1``, ``local:2``         -- a Dask LocalCluster of 1 / 2 single-threaded workers;
* ``tcp://HOST:PORT``             -- an existing Dask cluster, if ``--scheduler`` names one;
* ``warm:1``, ``warm:2`` (``--warm 1,2``) -- a LocalCluster started and warmed *before* the
  timing and reached through its tcp:// address: a long-lived cluster, whose workers have
  already imported everything (CPU seconds of its workers are not counted).

Units are sized as ``calibrate`` sizes them by default (``execution.unit_size``: about 8
units per worker).  Backends are run in interleaved rounds (``--repeats``), so a burst of
load from other jobs on a shared machine hits every backend alike; every run's JSON is
compared with the serial run's (identical = yes).

The speed-up model, every term measured by this script:

    T(N) = C(N) + (trials / N) t + (units / N) u

* t -- one trial's cost (serial wall time / trials);
* C(N) -- start-up: a pool or cluster of N workers started, their imports and numba cache
  loads, measured as the wall time of a study of N trials in units of 1 trial, minus t;
* u -- one unit's dispatch and return cost, measured as the extra time of ``processes:2``
  with units of 5 trials over the default units (``--unit-cost``), per extra unit and worker.

It prints the model's times beside the measured ones at N = 1 and 2 and its prediction for
N = 4, 8, 16 workers (with C(16) taken as C(2): workers start in parallel, one per core),
for this study and for a 12,000-trial one, and writes everything to ``--json``.

    python benchmarks/scaling.py --repeats 2 --json benchmarks/results/scaling.json
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import time

from dpposterior.diagnostics.calibration import calibrate
from dpposterior.execution import unit_size


def _cpu_seconds() -> float:
    """CPU seconds of this process and its finished (waited-for) children: pool workers and
    LocalCluster workers are counted once the pool / cluster has shut down."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _warm_cluster(n: int, args):
    """A LocalCluster of n single-threaded workers, kept running, warmed by a study of 2n trials:
    the state of a long-lived cluster's workers (imports done, kernels loaded)."""
    import logging

    from dask.distributed import LocalCluster

    from dpposterior.execution import _local_cluster

    cluster = _local_cluster(LocalCluster, n_workers=n, threads_per_worker=1, processes=True,
                             dashboard_address=None, silence_logs=logging.CRITICAL)
    calibrate("binomial", args.n, args.epsilon, 2 * n, ["gibbs-ss", "naive"], seed=args.seed + 1,
              draws=args.draws, scheduler=cluster.scheduler_address, workers=n, chunk=1)
    return cluster, cluster.scheduler_address


def run(backend: str, args, chunk=None, trials=None, workers=None):
    scheduler, _, workers_s = backend.partition(":") if not backend.startswith("tcp://") else (backend, "", "")
    workers = workers or (int(workers_s) if workers_s else None)
    c0, t0 = _cpu_seconds(), time.perf_counter()
    res = calibrate("binomial", args.n, args.epsilon, trials or args.trials, ["gibbs-ss", "naive"], seed=args.seed,
                    draws=args.draws, scheduler=scheduler, workers=workers,
                    chunk=chunk)
    return time.perf_counter() - t0, _cpu_seconds() - c0, json.dumps(res)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=2000)
    ap.add_argument("--n", type=int, default=100)
    ap.add_argument("--epsilon", type=float, default=0.1)
    ap.add_argument("--draws", type=int, default=None, help="posterior draws per trial (default: calibrate's 5000)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeats", type=int, default=2, help="interleaved rounds over all backends")
    ap.add_argument("--backends", default="serial,processes:1,processes:2,local:1,local:2")
    ap.add_argument("--scheduler", default=None, help="also time this tcp://HOST:PORT Dask scheduler")
    ap.add_argument("--unit-cost", action="store_true", help="also time processes:2 with units of 5 trials")
    ap.add_argument("--warm", default="", help="comma-separated worker counts: also time the study on an "
                    "already running (warm) Dask cluster of that many workers, through its tcp:// address")
    ap.add_argument("--json", default=None, help="write the measurements and the fitted model here")
    args = ap.parse_args()
    backends = args.backends.split(",") + ([args.scheduler] if args.scheduler else [])
    print(f"study: binomial n={args.n} eps={args.epsilon} trials={args.trials} methods gibbs-ss,naive "
          f"draws={args.draws or 5000}; units: {unit_size(args.trials, 1)} trials at 1 worker, "
          f"{unit_size(args.trials, 2)} at 2")
    print(f"cpus available: {len(os.sched_getaffinity(0))}; load average before: "
          + " ".join(f"{x:.2f}" for x in os.getloadavg()), flush=True)
    rows, reference = [], None
    clusters = {}
    for n in [int(x) for x in args.warm.split(",") if x]:
        clusters[f"warm:{n}"] = _warm_cluster(n, args)
    extra = [("processes:2/unit5", 5, args.trials)] if args.unit_cost else []
    startup = [(f"{b}/startup", 1, int(b.partition(":")[2])) for b in backends
               if ":" in b and not b.startswith("tcp://")]
    for rep in range(args.repeats):
        for backend, chunk, trials in [(b, None, args.trials) for b in backends + list(clusters)] + extra + startup:
            load = os.getloadavg()[0]
            if backend in clusters:
                wall, cpu, text = run(clusters[backend][1], args, chunk, trials,
                                      workers=int(backend.partition(":")[2]))
            else:
                wall, cpu, text = run(backend.split("/")[0], args, chunk, trials)
            if trials == args.trials:
                reference = reference or (text if backend == "serial" else None)
                same = None if reference is None or backend == "serial" else text == reference
            else:
                same = None
            rows.append({"round": rep, "backend": backend, "trials": trials, "unit_size": chunk, "wall_s": wall,
                         "cpu_s": cpu, "load1_before": load, "identical_to_serial": same})
            print(f"round {rep} {backend:<22} wall {wall:7.1f} s  CPU {cpu:7.1f} s  CPU/wall {cpu / wall:4.2f}  "
                  f"load {load:4.1f}  identical {same}", flush=True)
    mean: dict = {}
    for r in rows:
        mean.setdefault(r["backend"], []).append(r["wall_s"])
    mean = {k: sum(v) / len(v) for k, v in mean.items()}
    serial = mean["serial"]
    t = serial / args.trials
    print("\nmean wall s / speed-up over serial:")
    for k, v in mean.items():
        if not k.endswith("/startup"):
            print(f"  {k:<22} {v:7.1f} s  {serial / v:5.2f}x")
    model: dict = {"per_trial_s": t}
    u = 0.0
    if "processes:2/unit5" in mean:
        units_default = -(-args.trials // unit_size(args.trials, 2))
        units_small = -(-args.trials // 5)
        u = (mean["processes:2/unit5"] - mean["processes:2"]) * 2 / (units_small - units_default)
        model["per_unit_s"] = u
        if u < 0:  # more, smaller units ran faster: the dispatch cost is below the run-to-run noise
            print(f"per-unit cost measured {1000 * u:.1f} ms: below the noise, taken as 0")
            u = 0.0
    print(f"\nmodel T(N) = C(N) + (trials/N) t + (units/N) u:  t = {1000 * t:.1f} ms per trial, "
          f"u = {1000 * u:.1f} ms per unit")
    for kind in ("processes", "local"):
        starts = {n: mean[f"{kind}:{n}/startup"] - t for n in (1, 2) if f"{kind}:{n}/startup" in mean}
        if not starts:
            continue
        model[kind] = {"startup_s": starts, "check": {}, "predicted": {}}
        print(f"{kind}: C(1) = {starts.get(1, float('nan')):.2f} s, C(2) = {starts.get(2, float('nan')):.2f} s")

        def predict(trials, n):
            c = starts.get(n, starts.get(2, starts.get(1)))
            units = -(-trials // unit_size(trials, n))
            return c + trials / n * t + units / n * u

        for n in (1, 2):
            if f"{kind}:{n}" in mean:
                model[kind]["check"][n] = {"model_s": predict(args.trials, n), "measured_s": mean[f"{kind}:{n}"]}
                print(f"  N={n}: model {predict(args.trials, n):6.1f} s, measured {mean[f'{kind}:{n}']:6.1f} s")
        for trials in (args.trials, 12000):
            for n in (4, 8, 16):
                w = predict(trials, n)
                model[kind]["predicted"][f"{trials}x{n}"] = {"wall_s": w, "speedup": t * trials / w}
                print(f"  predicted {trials:>6} trials on {n:>2} workers: {w:6.1f} s = {t * trials / w:5.1f}x serial")
    for cluster, _ in clusters.values():
        cluster.close()
    print("load average after: " + " ".join(f"{x:.2f}" for x in os.getloadavg()))
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"args": vars(args), "runs": rows, "mean_wall_s": mean, "model": model,
                       "cpus": len(os.sched_getaffinity(0)),
                       "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}, fh, indent=2)
        print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
