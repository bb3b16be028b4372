"""A/B of one default ``infer`` per family between two source trees: the same call in fresh processes, interleaved.

Each case is a small release of one family analysed by its default engine (``method="auto"``), run as
``python -c`` with the tree's ``src`` first on PYTHONPATH, in the order A, B, A, B, ... after one untimed run of
each (numba's cache is keyed by source path, so each tree fills its own entries first).  A row records the
process's wall time, the ``infer`` call's own time inside it, the child's CPU seconds and the 1-minute load.
On a shared machine compare the per-repetition ratios (same load), not the absolute times.

    mkdir /tmp/before && git archive <commit> src | tar -x -C /tmp/before
    python benchmarks/sampler_ab.py /tmp/before . --reps 3                 # ~3 min, prints a table
    python benchmarks/sampler_ab.py /tmp/before . --reps 3 --out ab.json  # and writes the rows
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

#: (name, release or model code, infer keyword arguments): one default analysis per family
CASES = {
    "binomial laplace (gibbs-ss)": (
        '{"format": "dpposterior-release/1", "family": "binomial", "n": 500, '
        '"statistics": {"successes": {"value": 161.3, "mechanism": "laplace", "epsilon": 0.5}}}', {}),
    "binomial discrete-gaussian (exact)": (
        '{"format": "dpposterior-release/1", "family": "binomial", "n": 500, '
        '"statistics": {"successes": {"value": 161, "mechanism": "discrete-gaussian", "sigma": 3.0}}}', {}),
    "multinomial discrete-laplace (exact)": (
        '{"format": "dpposterior-release/1", "family": "multinomial", "n": 60, '
        '"statistics": {"counts": {"value": [14, 29, 17], "mechanism": "discrete-laplace", "epsilon": 1.0}}}', {}),
    "poisson laplace (gibbs-ss)": (
        '{"format": "dpposterior-release/1", "family": "poisson", "n": 200, "bounds": [0, 10], '
        '"statistics": {"truncated_sum": {"value": 611.0, "mechanism": "laplace", "epsilon": 1.0}}}', {}),
    "naive-bayes (vb)": ("examples/releases/naive-bayes-xiong-eps10.json", {}),
    "linreg-ju (default)": ("examples/releases/linreg-ju-eps1.json", {"draws": 1000}),
    "small-area (exact-da)": (
        '{"format": "dpposterior-release/1", "family": "small-area", "areas": ["a", "b", "c", "d", "e", "f"], '
        '"cells": ["x", "y"], "exposure": [1000, 2000, 1500, 1200, 900, 3000], '
        '"statistics": {"counts": {"value": [[13, 5], [27, 12], [14, 4], [10, 6], [8, 3], [31, 10]], '
        '"mechanism": "discrete-gaussian", "sigma": 2.0}}}', {}),
}

CODE = """
import json, sys, time
t0 = time.perf_counter()
import dpposterior as dp
spec, kwargs = sys.argv[1], json.loads(sys.argv[2])
release = json.loads(spec) if spec.startswith("{") else spec
t1 = time.perf_counter()
post = dp.infer(release, seed=1, **kwargs)
t2 = time.perf_counter()
print(json.dumps({"infer_s": t2 - t1, "import_s": t1 - t0, "method": post.method}))
"""


def run_once(tree: Path, case: str) -> dict:
    spec, kwargs = CASES[case]
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), OMP_NUM_THREADS="1", NUMBA_NUM_THREADS="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", CODE, spec, json.dumps(kwargs)], env=env, capture_output=True,
                         text=True, check=True, cwd=str(HERE.parent))
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    row = json.loads(out.stdout.strip().splitlines()[-1])
    row.update(wall_s=wall, cpu_s=(after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
               load1=os.getloadavg()[0])
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", type=Path, help="tree A (the baseline)")
    ap.add_argument("b", type=Path, help="tree B")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    rows = []
    for case in args.cases:
        for tree in (args.a, args.b):
            run_once(tree, case)  # untimed: each tree's numba cache
        for rep in range(args.reps):
            for side, tree in (("A", args.a), ("B", args.b)):
                row = run_once(tree, case)
                row.update(case=case, side=side, rep=rep)
                rows.append(row)
    print("| case | method | A infer s (median) | B infer s (median) | B/A infer | A wall s | B wall s | B/A wall | load |")
    print("|---|---|---|---|---|---|---|---|---|")
    import statistics

    for case in args.cases:
        a = [r for r in rows if r["case"] == case and r["side"] == "A"]
        b = [r for r in rows if r["case"] == case and r["side"] == "B"]
        ratio_i = statistics.median(rb["infer_s"] / ra["infer_s"] for ra, rb in zip(a, b))
        ratio_w = statistics.median(rb["wall_s"] / ra["wall_s"] for ra, rb in zip(a, b))
        load = statistics.median(r["load1"] for r in a + b)
        print(f"| {case} | {b[0]['method']} | {statistics.median(r['infer_s'] for r in a):.3f} | "
              f"{statistics.median(r['infer_s'] for r in b):.3f} | {ratio_i:.3f} | "
              f"{statistics.median(r['wall_s'] for r in a):.2f} | {statistics.median(r['wall_s'] for r in b):.2f} | "
              f"{ratio_w:.3f} | {load:.2f} |")
    if args.out is not None:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
