"""What ``dpposterior infer`` costs beyond its engine on a large small-area table, A/B between source trees.

Each run is a fresh process (``python -c`` around ``dpposterior.cli.main(["infer", RELEASE, "--out", P, "--no-naive",
"--draws", D, "--warmup", W, "--chains", K, "--seed", "1", "--quiet"])``) that times the engine
(``dpposterior.inference.small_area._sample``) in-process; the parent times the whole process, imports included.
"Over the engine" is the process's wall time minus the engine's, as a share of the engine's.  Trees run
interleaved (A, B, A, B, ...) after one untimed run each (numba's cache is keyed by source path, so each tree
fills its own entries first); the 1-minute load before each run is recorded.

The release: ``families.small_area.simulate(SmallAreaPrior(alpha_mean=1, alpha_sd=1), G, C, 2.0, rng,
exposure=rng.uniform(5, 50, G), tau=0.5)`` with ``rng = np.random.default_rng(1)``, written once per (G, C) to the
scratch folder (G = 10^6, C = 10: 10^7 cells, a 78 MB file).

    mkdir /tmp/before && git archive <commit> src | tar -x -C /tmp/before
    python benchmarks/infer_overhead.py /tmp/before . --reps 3          # ~10 minutes at 10^7 cells
    python benchmarks/infer_overhead.py . --reps 3 --areas 50000 --cells 8 --draws 1000 --warmup 1000 --chains 4
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _out import add_update_flag, results_dir, scratch  # noqa: E402

CHILD = r"""
import json, sys, time
from dpposterior.inference import small_area
inner = small_area._sample
spent = []
def timed(*args, **kwargs):
    t = time.perf_counter()
    try:
        return inner(*args, **kwargs)
    finally:
        spent.append(time.perf_counter() - t)
small_area._sample = timed
from dpposterior.cli import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    if exc.code:
        raise
print("ENGINE " + json.dumps(sum(spent)))
"""


def make_release(areas: int, cells: int) -> Path:
    path = scratch() / f"infer_overhead_G{areas}_C{cells}.json"
    if not path.exists():
        from dpposterior.families.small_area import SmallAreaPrior, simulate

        rng = np.random.default_rng(1)
        _, release = simulate(SmallAreaPrior(alpha_mean=1, alpha_sd=1), areas, cells, 2.0, rng,
                              exposure=rng.uniform(5, 50, areas), tau=0.5)
        path.write_text(json.dumps(release))
    return path


def run_once(tree: Path, release: Path, args, work: Path) -> dict:
    out = work / f"p_{os.getpid()}.nc"
    out.unlink(missing_ok=True)
    argv = ["infer", str(release), "--out", str(out), "--no-naive", "--draws", str(args.draws), "--warmup",
            str(args.warmup), "--chains", str(args.chains), "--seed", "1", "--quiet"]
    env = dict(os.environ, PYTHONPATH=str(tree.resolve() / "src"))
    load = os.getloadavg()[0]
    t = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", CHILD, *argv], env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    if proc.returncode:
        sys.exit(f"infer_overhead: {tree} failed:\n{proc.stderr[-2000:]}")
    engine = json.loads(proc.stdout.split("ENGINE ")[-1])
    size = out.stat().st_size
    out.unlink()
    return {"wall_s": wall, "engine_s": engine, "over_s": wall - engine, "over": (wall - engine) / engine,
            "load1_before": load, "file_bytes": size}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], allow_abbrev=False)
    ap.add_argument("trees", type=Path, nargs="+", help="source trees (each with src/dpposterior)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--areas", type=int, default=1_000_000)
    ap.add_argument("--cells", type=int, default=10)
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--warmup", type=int, default=25)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--out", type=Path, default=None)
    add_update_flag(ap)
    args = ap.parse_args()
    for tree in args.trees:
        if not (tree / "src" / "dpposterior").is_dir():
            ap.error(f"{tree} has no src/dpposterior")
    release = make_release(args.areas, args.cells)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for tree in args.trees:  # untimed: numba's cache for this tree's path
            run_once(tree, release, args, Path(tmp))
        for rep in range(args.reps):
            for tree in args.trees:
                row = {"tree": str(tree), "rep": rep, **run_once(tree, release, args, Path(tmp))}
                rows.append(row)
                print(f"{tree}: engine {row['engine_s']:.1f} s, whole {row['wall_s']:.1f} s, over "
                      f"{row['over_s']:.1f} s ({100 * row['over']:+.1f}%), load {row['load1_before']:.2f}", flush=True)
    doc = {"meta": {"areas": args.areas, "cells": args.cells, "draws": args.draws, "warmup": args.warmup,
                    "chains": args.chains, "reps": args.reps, "cpus": os.cpu_count(),
                    "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d %H:%M:%S")}, "rows": rows}
    out = args.out or results_dir(args.update_results) / f"infer_overhead_G{args.areas}_C{args.cells}.json"
    out.write_text(json.dumps(doc, indent=1))
    for tree in args.trees:
        over = [r["over"] for r in rows if r["tree"] == str(tree)]
        print(f"{tree}: over the engine {100 * min(over):+.1f}% .. {100 * max(over):+.1f}% ({len(over)} runs)")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
