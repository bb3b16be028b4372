"""A/B of start-up between two source trees: the same command in fresh processes, interleaved.

Source: the processes of ``benchmarks/startup.py`` -- its ``--peer-worker`` (Example 1, dpposterior side, one
thread), its ``POOL_CODE`` (start-up C of a 1-worker forkserver pool) and the ``infer`` command -- run with each
tree's ``src`` on PYTHONPATH, in the order A, B, A, B, ... after one untimed run of each (numba's cache is
keyed by source path, so each tree fills its own entries first).  Every row records the 1-minute load and the
child's CPU seconds (for ``pool``, the parent's only: the forkserver is not its child).  On a
shared machine compare the per-repetition ratios (same load), not the absolute times.

    mkdir /tmp/before && git archive <commit> src benchmarks | tar -x -C /tmp/before
    python benchmarks/startup_ab.py /tmp/before . --kind peer --reps 10      # ~30 s
    python benchmarks/startup_ab.py /tmp/before . --kind pool --reps 10      # ~30 s
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from ppl_peer import SINGLE_THREAD_ENV  # noqa: E402
from startup import POOL_CODE, compile_bytecode  # noqa: E402


def argv_for(kind: str, tree: Path, work: Path) -> list[str]:
    if kind == "peer":
        return [sys.executable, str(tree / "benchmarks" / "startup.py"), "--peer-worker", "example1", "dpposterior",
                "1", str(work / "draws.npz")]
    if kind == "pool":
        return [sys.executable, "-c", POOL_CODE, "1", "forkserver"]
    release = tree / "src" / "dpposterior" / "data" / "blood_lead_release.json"
    return [sys.executable, "-m", "dpposterior", "infer", str(release), "--out", str(work / "p.nc")]


def run_once(kind: str, tree: Path, work: Path, cache: str) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree / "src"), NUMBA_CACHE_DIR=cache)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # each tree's bytecode, as installed (startup.py, compile_bytecode)
    if kind == "peer":
        env.update(SINGLE_THREAD_ENV)
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    out = subprocess.run(argv_for(kind, tree, work), env=env, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    value = json.loads(out.stdout.strip().splitlines()[-1])["startup_s"] if kind == "pool" else wall
    return {"s": value, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "load1": load}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--kind", choices=["peer", "pool", "infer"], default="peer")
    ap.add_argument("--reps", type=int, default=10)
    args = ap.parse_args(argv)
    trees = {"before": args.before.resolve(), "after": args.after.resolve()}
    rows: dict[str, list] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory(prefix="dpposterior-ab-") as tmp:
        work, cache = Path(tmp), str(Path(tmp) / "numba-cache")
        for tree in trees.values():  # untimed: each tree's bytecode and kernels into the caches
            compile_bytecode(tree)
            run_once(args.kind, tree, work, cache)
        for rep in range(args.reps):
            for name, tree in trees.items():
                row = run_once(args.kind, tree, work, cache)
                rows[name].append(row)
                print(f"rep {rep} {name:6s} {row['s']:.3f} s (CPU {row['cpu_s']:.2f}) load {row['load1']:.2f}",
                      flush=True)
    for name, rs in rows.items():
        print(f"{name}: median {np.median([r['s'] for r in rs]):.3f} s, CPU {np.median([r['cpu_s'] for r in rs]):.3f}"
              f" s, load {min(r['load1'] for r in rs):.1f}-{max(r['load1'] for r in rs):.1f}")
    ratios = [b["s"] / a["s"] for b, a in zip(rows["before"], rows["after"])]
    print(f"before / after per repetition: median {np.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})")


if __name__ == "__main__":
    main()
