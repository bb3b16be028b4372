"""Probes behind the start-up analysis (docs/benchmarks.md): the smaller measurements
that explain the start-up numbers of ``benchmarks/startup.py``.  Each part runs fresh processes, in the order
given, repetitions interleaved where two variants are compared, the 1-minute load printed with each line.

* ``bytecode`` -- the Example 1 peer process (``startup.py --peer-worker``) with our modules' bytecode present
  and, interleaved, compiled from source (``__pycache__`` removed, ``-B``): what PYTHONDONTWRITEBYTECODE=1 cost.
* ``floor`` -- a bare process that imports numpy, scipy.special, scipy.linalg and numba and loads numba's
  registries (collector paused during them, then a full collection and a freeze, as ours): what any
  numba-and-scipy process pays before our code.
* ``pool`` -- one one-trial binomial calibration unit on a new 1-worker ``processes`` pool, timed inside the
  processes: the caller's pool set-up, the forkserver's boot, its preload, the fork, the first unit (and the
  second, warm); plus ``python -c "from multiprocessing.forkserver import main"`` alone.
* ``preload`` -- the forkserver's preload, step by step in one process (collector off, as there): numpy,
  scipy.special, pydantic with the release schema, numba's import (with our modules), numba's registries;
  then the first binomial unit and a warm one.
* ``garbage`` -- the objects alive after the forkserver's preload (collector off) and what a full
  collection then finds (count, shallow bytes) and costs.
* ``mmd`` -- ``metrics.mmd`` at 200 draws against the same formula on scipy's ``cdist``/``pdist`` (same
  process, interleaved), and the distance kernel's compile time in an empty numba cache.

    python benchmarks/startup_probes.py                    # all parts
    python benchmarks/startup_probes.py --parts pool mmd --reps 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
from startup import compile_bytecode  # noqa: E402

PY = sys.executable

FLOOR = """
import gc
import numpy, scipy.special, scipy.linalg, numba
gc.disable()
from numba.core.registry import cpu_target
cpu_target.target_context.refresh()
gc.collect(); gc.freeze()
"""

POOL = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
from dpposterior import execution
from dpposterior.diagnostics.calibration import calibration_unit
execution.WORKER_PRELOAD = ("mark_start", "dpposterior.worker_preload", "mark_end")

def unit_timed(u):
    t = time.time()
    calibration_unit(u)
    t1 = time.time()
    calibration_unit(dict(u, start=7))
    return t, t1, time.time()

if __name__ == "__main__":
    unit = {"family": "binomial", "n": 100, "epsilon": 0.1, "prior": None, "methods": ["gibbs-ss", "naive"],
            "draws": None, "seed": 0, "start": 0, "trials": 1}
    t0 = time.time()
    with execution.executor("processes", workers=1) as ex:
        (u0, u1, u2), = ex.map(unit_timed, [unit])
    log = dict(line.split() for line in open(sys.argv[2]))
    s, e = float(log["start"]), float(log["end"])
    print(f"to preload start {s - t0:.3f} s, preload {e - s:.3f} s, fork to unit {u0 - e:.3f} s, "
          f"first unit {u1 - u0:.3f} s, warm unit {u2 - u1:.3f} s, total {u1 - t0:.3f} s")
"""

PRELOAD = """
import gc, time
marks = [("start", time.perf_counter())]
def mark(name):
    marks.append((name, time.perf_counter()))
gc.disable()
import numpy; mark("numpy")
import scipy.special; mark("scipy.special")
from dpposterior import execution, families, release; mark("pydantic + release schema (+ execution, families)")
from dpposterior.diagnostics import calibration, distance_kernels, metrics
from dpposterior.inference import truncated; mark("numba import (+ calibration, kernels' modules)")
from numba.core.registry import cpu_target
cpu_target.target_context.refresh(); mark("numba registries")
gc.freeze(); gc.enable()
from dpposterior.diagnostics.calibration import calibration_unit
unit = {"family": "binomial", "n": 100, "epsilon": 0.1, "prior": None, "methods": ["gibbs-ss", "naive"],
        "draws": None, "seed": 0, "start": 0, "trials": 1}
calibration_unit(unit); mark("first unit")
calibration_unit(dict(unit, start=3)); mark("warm unit")
print(", ".join(f"{name} {t - marks[i][1]:.3f}" for i, (name, t) in enumerate(marks[1:])))
"""

GARBAGE = """
import gc, sys, time
gc.disable()
import dpposterior.worker_preload  # noqa: F401  (its own freeze is undone below, to count)
gc.unfreeze()
n = len(gc.get_objects())
gc.set_debug(gc.DEBUG_SAVEALL)
t = time.perf_counter()
found = gc.collect()
took = time.perf_counter() - t
print(f"{n} tracked objects after the preload; a full collection took {took:.3f} s and found {found} "
      f"unreachable ({sum(sys.getsizeof(o) for o in gc.garbage) / 1e6:.2f} MB shallow)")
"""

MMD = """
import timeit
import numpy as np
from scipy.spatial.distance import cdist, pdist
from dpposterior.diagnostics import metrics

def scipy_mmd(x, y):
    d = pdist(np.vstack([x, y]))
    h = float(np.median(d[d > 0]))
    g = 1.0 / (2.0 * h * h)
    kxx, kyy = np.exp(-g * cdist(x, x, "sqeuclidean")), np.exp(-g * cdist(y, y, "sqeuclidean"))
    kxy = np.exp(-g * cdist(x, y, "sqeuclidean"))
    n, m = len(x), len(y)
    return (kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1)) - 2 * kxy.mean()

rng = np.random.default_rng(0)
for d in (1, 2, 1, 2):
    x, y = rng.normal(size=(200, d)), rng.normal(size=(200, d))
    assert metrics.mmd(x, y) == float(scipy_mmd(x, y))
    ours = min(timeit.repeat(lambda: metrics.mmd(x, y), number=50, repeat=7)) / 50
    theirs = min(timeit.repeat(lambda: scipy_mmd(x, y), number=50, repeat=7)) / 50
    print(f"mmd, 200 draws, d = {d}: ours {ours * 1e3:.2f} ms, scipy's {theirs * 1e3:.2f} ms (equal bit for bit)")
"""

COMPILE = """
import time
import numpy as np
from numba.core.registry import cpu_target
cpu_target.target_context.refresh()
from dpposterior.diagnostics import metrics
x = np.zeros((3, 1))
t = time.perf_counter()
metrics.sq_distances(x, x); metrics.pair_distances(x)
print(f"distance kernel compile (empty numba cache): {time.perf_counter() - t:.3f} s")
"""


def env(**extra) -> dict:
    out = {**os.environ, "PYTHONPATH": str(ROOT / "src"), **extra}
    out.pop("PYTHONDONTWRITEBYTECODE", None)
    return out


def wall(argv, e) -> float:
    t = time.perf_counter()
    subprocess.run(argv, env=e, check=True, capture_output=True)
    return time.perf_counter() - t


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def bytecode(reps: int, cache: str) -> None:
    from ppl_peer import SINGLE_THREAD_ENV

    e = env(NUMBA_CACHE_DIR=cache, **SINGLE_THREAD_ENV)
    argv = [PY, str(ROOT / "benchmarks" / "startup.py"), "--peer-worker", "example1", "dpposterior", "1",
            str(Path(cache) / "w.npz")]
    wall(argv, e)  # untimed: the kernels into the cache
    for rep in range(reps):
        compile_bytecode()
        with_pyc = wall(argv, e)
        for folder in ("src", "benchmarks"):
            for c in (ROOT / folder).rglob("__pycache__"):
                shutil.rmtree(c, ignore_errors=True)
        without = wall([PY, "-B", *argv[1:]], e)
        print(f"rep {rep}: Example 1 process with bytecode {with_pyc:.3f} s, compiled from source {without:.3f} s "
              f"({load()})", flush=True)
    compile_bytecode()


def floor(reps: int, cache: str) -> None:
    for rep in range(reps):
        print(f"rep {rep}: bare numpy + scipy + numba + registries {wall([PY, '-c', FLOOR], env()):.3f} s ({load()})",
              flush=True)


def pool(reps: int, cache: str) -> None:
    marks = Path(cache) / "marks"
    marks.mkdir(exist_ok=True)
    log = marks / "log"
    for name, key in (("mark_start", "start"), ("mark_end", "end")):
        (marks / f"{name}.py").write_text(f"import time\nopen({str(log)!r}, 'a').write(f'{key} {{time.time()}}\\n')\n")
    e = env(NUMBA_CACHE_DIR=cache, PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{marks}")
    subprocess.run([PY, "-c", POOL, str(marks), str(log)], env=e, check=True, capture_output=True)  # warm caches
    for rep in range(reps):
        log.unlink(missing_ok=True)
        out = subprocess.run([PY, "-c", POOL, str(marks), str(log)], env=e, check=True, capture_output=True, text=True)
        boot = wall([PY, "-c", "from multiprocessing.forkserver import main"], env())
        print(f"rep {rep}: {out.stdout.strip()}; forkserver boot alone {boot:.3f} s ({load()})", flush=True)


def preload(reps: int, cache: str) -> None:
    subprocess.run([PY, "-c", PRELOAD], env=env(NUMBA_CACHE_DIR=cache), check=True, capture_output=True)  # caches
    for rep in range(reps):
        out = subprocess.run([PY, "-c", PRELOAD], env=env(NUMBA_CACHE_DIR=cache), check=True, capture_output=True,
                             text=True)
        print(f"rep {rep}: {out.stdout.strip()} s ({load()})", flush=True)


def garbage(reps: int, cache: str) -> None:
    for rep in range(reps):
        out = subprocess.run([PY, "-c", GARBAGE], env=env(NUMBA_CACHE_DIR=cache), check=True, capture_output=True,
                             text=True)
        print(f"rep {rep}: {out.stdout.strip()} ({load()})", flush=True)


def mmd(reps: int, cache: str) -> None:
    out = subprocess.run([PY, "-c", MMD], env=env(NUMBA_CACHE_DIR=cache), check=True, capture_output=True, text=True)
    print(out.stdout.strip(), f"({load()})", flush=True)
    for rep in range(reps):
        with tempfile.TemporaryDirectory() as empty:
            out = subprocess.run([PY, "-c", COMPILE], env=env(NUMBA_CACHE_DIR=empty), check=True, capture_output=True,
                                 text=True)
        print(f"rep {rep}: {out.stdout.strip()} ({load()})", flush=True)


PARTS = {"bytecode": bytecode, "floor": floor, "pool": pool, "preload": preload, "garbage": garbage, "mmd": mmd}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parts", nargs="+", default=list(PARTS), choices=list(PARTS))
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    compile_bytecode()
    with tempfile.TemporaryDirectory(prefix="dpposterior-probes-") as cache:
        for part in args.parts:
            print(f"== {part}", flush=True)
            PARTS[part](args.reps, cache)


if __name__ == "__main__":
    main()
