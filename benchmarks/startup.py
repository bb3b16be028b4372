"""Start-up benchmark: what a user waits for before and around a posterior.

Three parts, each in fresh processes, repetitions interleaved (rep 1 of every row, then rep 2, ...), the
1-minute load average recorded with every row:

* ``commands`` -- wall and CPU (user + system) seconds of ``python -c "import dpposterior"``, ``dpposterior
  --help``, ``release`` (a 43-row CSV, Gaussian family), ``infer`` (the bundled blood-lead release, defaults,
  ``--out``), ``report`` (of that posterior) and ``calibrate`` (binomial, 20 trials, serial) with numba's
  cache populated (a private cache directory, filled by one untimed run) and, for the commands that run
  compiled kernels (infer, calibrate), empty (a new cache directory per run: the first run after install).
* ``pools`` -- start-up C of a ``processes`` pool of 1 and 2 workers: the first wave of one-trial binomial
  calibration units (``diagnostics.calibration.calibration_unit``, one per worker) minus a second wave on
  the same, now warm, workers; for the forkserver the package uses and, for comparison, spawned workers.
* ``peer`` -- the process-level comparison with NumPyro NUTS (``benchmarks/ppl_peer.py``'s models and
  settings: 4 chains of 1,000 warm-up + 5,000 draws, one thread, JAX in float64) on Kazan & Reiter's
  Example 1, the binomial Gibbs-SS release and linear regression fixedS: each process imports its
  libraries, computes one posterior and exits.  min-ESS (bulk ESS, ``dpposterior.convergence``, equal to
  ArviZ's) per second of the first call, and per second of the whole process (interpreter start to exit).
  The NumPyro variant is the one ppl_peer.py found best at the first call (non-centred) unless given.

Every timed process reads our modules' bytecode, written first into ``src``'s and ``benchmarks``' (git-ignored)
``__pycache__`` as ``pip install`` writes an installed package's: the peers' site-packages have theirs.  Where
PYTHONDONTWRITEBYTECODE=1 is set and the package is installed editable, every process compiles our modules from
source; ``--no-bytecode`` measures that.

    python benchmarks/startup.py                       # everything, 5 reps -> startup.json (scratch; --update-results)
    python benchmarks/startup.py --reps 1 --parts commands pools   # quick look
    python benchmarks/startup.py --table benchmarks/results/startup.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
RELEASE = ROOT / "src" / "dpposterior" / "data" / "blood_lead_release.json"
NUMBA_COMMANDS = ("infer", "calibrate")  # the commands that load (or, cache empty, compile) kernels
PEER_CASES = ("example1", "binomial", "linreg")


def commands(work: Path) -> dict[str, list[str]]:
    py = [sys.executable]
    cli = [*py, "-m", "dpposterior"]
    return {
        "import": [*py, "-c", "import dpposterior"],
        "help": [*cli, "--help"],
        "release": [*cli, "release", str(work / "lead.csv"), "--family", "gaussian", "--column", "lead",
                    "--bounds", "0", "100", "--epsilon", "0.5", "--seed", "1", "--out", str(work / "release.json")],
        "infer": [*cli, "infer", str(RELEASE), "--out", str(work / "p.nc")],
        "report": [*cli, "report", str(work / "p.nc"), "--out", str(work / "report")],
        "calibrate": [*cli, "calibrate", "--family", "binomial", "--n", "100", "--epsilon", "0.1", "--trials", "20",
                      "--methods", "gibbs-ss,naive", "--scheduler", "serial", "--quiet",
                      "--out", str(work / "calibration.json")],
    }


#: False (``--no-bytecode``): our modules are compiled from source in every timed process, as they were when
#: PYTHONDONTWRITEBYTECODE=1 (this sandbox sets it) met an editable install with no __pycache__
BYTECODE = True


def compile_bytecode(root: Path = ROOT) -> None:
    """Write the bytecode of ``root``'s ``src`` and ``benchmarks`` (into their ``__pycache__``, git-ignored), as
    ``pip install`` does for an installed package: the peers' site-packages have theirs, and without it every
    timed process of ours compiled our modules from source (~0.05 s of a one-posterior process, measured)."""
    import compileall

    for folder in ("src", "benchmarks"):
        compileall.compile_dir(str(root / folder), quiet=1)


def env_with(cache_dir: str | None = None, single_thread: bool = False) -> dict:
    env = dict(os.environ)
    if BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONPATH"] = str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")
    if cache_dir is not None:
        env["NUMBA_CACHE_DIR"] = cache_dir
    if single_thread:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from ppl_peer import SINGLE_THREAD_ENV

        env.update(SINGLE_THREAD_ENV)
    return env


def timed(argv: list[str], env: dict) -> dict:
    """Wall and CPU seconds of one fresh process, and the load average when it started."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    res = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = {"wall_s": wall, "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
           "load1": load, "returncode": res.returncode}
    if res.returncode != 0:
        out["stderr"] = res.stderr[-1500:]
    return out, res.stdout


# ----------------------------------------------------------------------------- pools (worker side)
POOL_CODE = """
import json, sys, time
from dpposterior import execution
from dpposterior.diagnostics.calibration import calibration_unit

if __name__ == "__main__":
    workers, method = int(sys.argv[1]), sys.argv[2]
    if method == "spawn":
        import multiprocessing as mp
        execution.process_context = lambda: mp.get_context("spawn")
    unit = {"family": "binomial", "n": 100, "epsilon": 0.1, "prior": None, "methods": ["gibbs-ss", "naive"],
            "draws": None, "seed": 0, "start": 0, "trials": 1}
    t0 = time.perf_counter()
    with execution.executor("processes", workers=workers) as ex:
        ex.map(calibration_unit, [dict(unit, start=i) for i in range(workers)])
        t1 = time.perf_counter()
        ex.map(calibration_unit, [dict(unit, start=100 + i) for i in range(workers)])
        t2 = time.perf_counter()
    print(json.dumps({"first_wave_s": t1 - t0, "warm_wave_s": t2 - t1, "startup_s": (t1 - t0) - (t2 - t1)}))
"""


# ----------------------------------------------------------------------------- peer (worker side)
#: the engine module each peer case runs
CASE_ENGINE = {"example1": "gaussian_gibbs", "binomial": "gibbs_ss", "linreg": "linreg_fixeds"}


def peer_worker(case: str, engine: str, seed: int, npz: str) -> None:
    """One fresh process: import, one posterior, save its draws (timed in the parent from start to exit)."""
    t0 = time.perf_counter()
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import ppl_peer

    if case == "linreg":  # the case's data (both engines build it the same way)
        ppl_peer._LINREG_REL.append(ppl_peer.linreg_release())
    if engine == "dpposterior":  # its imports, as NumPyro's side imports jax and numpyro before its call:
        import importlib          # the orchestrator and the one engine this case runs (a user's process
                                  # imports no other engine)
        import dpposterior.api  # noqa: F401
        importlib.import_module(f"dpposterior.inference.{CASE_ENGINE[case]}")

        run = lambda s: ppl_peer._dpposterior_run(case, s)  # noqa: E731
    else:
        run = ppl_peer._numpyro_runner(case, engine.split("-", 1)[1])
    setup = time.perf_counter() - t0
    t = time.perf_counter()
    draws = run(seed)
    first = time.perf_counter() - t
    np.savez(npz, **{k: np.asarray(v, float) for k, v in draws.items()})
    print(json.dumps({"setup_s": setup, "first_call_s": first}))


def min_ess(npz: str) -> float:
    from dpposterior.convergence import ess_bulk

    with np.load(npz) as f:
        return min(ess_bulk(f[k]) for k in f.files)


# ----------------------------------------------------------------------------- orchestration
def run_commands(rep: int, work: Path, warm_cache: str, records: list) -> None:
    cmds = commands(work)
    for name, argv in cmds.items():
        states = ["populated", "empty"] if name in NUMBA_COMMANDS else ["populated"]
        for state in states:
            cache = warm_cache if state == "populated" else tempfile.mkdtemp(prefix="numba-empty-", dir=work)
            rec, _ = timed(argv, env_with(cache))
            rec.update(part="commands", name=name, cache=state, rep=rep)
            records.append(rec)
            if state == "empty":
                shutil.rmtree(cache, ignore_errors=True)
            print(f"rep {rep} {name:10s} cache {state:9s} {rec['wall_s']:7.2f} s wall {rec['cpu_s']:7.2f} s CPU "
                  f"load {rec['load1']:.2f}" + ("  FAILED" if rec["returncode"] else ""), flush=True)


def run_pools(rep: int, work: Path, warm_cache: str, records: list) -> None:
    for method in ("forkserver", "spawn"):
        for workers in (1, 2):
            rec, stdout = timed([sys.executable, "-c", POOL_CODE, str(workers), method], env_with(warm_cache))
            if rec["returncode"] == 0:
                rec.update(json.loads(stdout.strip().splitlines()[-1]))
            rec.update(part="pools", name=f"{method}:{workers}", rep=rep)
            records.append(rec)
            print(f"rep {rep} pool {method:10s} {workers} worker(s): start-up {rec.get('startup_s', math.nan):.2f} s "
                  f"(first wave {rec.get('first_wave_s', math.nan):.2f}, warm {rec.get('warm_wave_s', math.nan):.3f}) "
                  f"load {rec['load1']:.2f}", flush=True)


def run_peer(rep: int, work: Path, warm_cache: str, records: list, cases, variant: str) -> None:
    for case in cases:
        for engine in ("dpposterior", f"numpyro-{variant}"):
            npz = str(work / f"draws-{case}-{engine}.npz")
            seed = 1000 * rep + 1
            rec, stdout = timed([sys.executable, __file__, "--peer-worker", case, engine, str(seed), npz],
                                env_with(warm_cache, single_thread=True))
            if rec["returncode"] == 0:
                rec.update(json.loads(stdout.strip().splitlines()[-1]))
                rec["min_ess"] = min_ess(npz)
                rec["min_ess_per_first_call_s"] = rec["min_ess"] / rec["first_call_s"]
                rec["min_ess_per_process_s"] = rec["min_ess"] / rec["wall_s"]
            rec.update(part="peer", case=case, name=engine, rep=rep)
            records.append(rec)
            print(f"rep {rep} peer {case:9s} {engine:20s} process {rec['wall_s']:6.2f} s (imports "
                  f"{rec.get('setup_s', math.nan):.2f}, first call {rec.get('first_call_s', math.nan):.2f}) "
                  f"min-ESS {rec.get('min_ess', math.nan):7.0f} load {rec['load1']:.2f}"
                  + ("  FAILED " + rec.get("stderr", "")[-300:] if rec["returncode"] else ""), flush=True)


def _median(values):
    values = [v for v in values if v is not None and not (isinstance(v, float) and math.isnan(v))]
    return float(np.median(values)) if values else math.nan


def summarise(records: list) -> dict:
    out: dict = {"commands": {}, "pools": {}, "peer": {}}
    for rec in records:
        if rec["part"] == "commands":
            out["commands"].setdefault(f"{rec['name']} ({rec['cache']} cache)", []).append(rec)
        elif rec["part"] == "pools":
            out["pools"].setdefault(rec["name"], []).append(rec)
        else:
            out["peer"].setdefault(rec["case"], {}).setdefault(rec["name"], []).append(rec)
    summary = {"commands": {}, "pools": {}, "peer": {}}
    for key, recs in out["commands"].items():
        walls = [r["wall_s"] for r in recs if r["returncode"] == 0]
        summary["commands"][key] = {"median_wall_s": _median(walls), "min_wall_s": min(walls, default=math.nan),
                                    "max_wall_s": max(walls, default=math.nan),
                                    "median_cpu_s": _median([r["cpu_s"] for r in recs]), "reps": len(walls),
                                    "load1": [r["load1"] for r in recs]}
    for key, recs in out["pools"].items():
        summary["pools"][key] = {"median_startup_s": _median([r.get("startup_s") for r in recs]),
                                 "startups_s": [r.get("startup_s") for r in recs], "load1": [r["load1"] for r in recs]}
    for method in ("forkserver", "spawn"):  # what each worker beyond the first adds to C
        one, two = summary["pools"].get(f"{method}:1"), summary["pools"].get(f"{method}:2")
        if one and two:
            summary["pools"][f"{method}:per-extra-worker"] = {
                "median_startup_s": two["median_startup_s"] - one["median_startup_s"], "startups_s": [],
                "load1": one["load1"] + two["load1"]}
    for case, engines in out["peer"].items():
        row = {}
        for engine, recs in engines.items():
            ok = [r for r in recs if r["returncode"] == 0]
            row[engine] = {k: _median([r[k] for r in ok]) for k in
                           ("wall_s", "setup_s", "first_call_s", "min_ess", "min_ess_per_first_call_s",
                            "min_ess_per_process_s")}
            row[engine]["reps"] = len(ok)
            row[engine]["load1"] = [r["load1"] for r in recs]
        dp = row.get("dpposterior")
        peers = [v for k, v in row.items() if k.startswith("numpyro")]
        if dp and peers:
            peer = peers[0]
            row["ratio_first_call"] = dp["min_ess_per_first_call_s"] / peer["min_ess_per_first_call_s"]
            row["ratio_process"] = dp["min_ess_per_process_s"] / peer["min_ess_per_process_s"]
            # per repetition (rep k of each engine), so the spread is visible
            by_rep = {}
            for engine, recs in engines.items():
                for r in recs:
                    if r["returncode"] == 0:
                        by_rep.setdefault(r["rep"], {})[engine.split("-")[0]] = r
            row["ratios_by_rep"] = [
                {"rep": k, "first_call": v["dpposterior"]["min_ess_per_first_call_s"] / v["numpyro"]["min_ess_per_first_call_s"],
                 "process": v["dpposterior"]["min_ess_per_process_s"] / v["numpyro"]["min_ess_per_process_s"]}
                for k, v in sorted(by_rep.items()) if len(v) == 2]
        summary["peer"][case] = row
    return summary


def table(result: dict) -> str:
    s = result["summary"]
    lines = []
    if s["commands"]:
        lines += ["| command | median wall s (min-max) | median CPU s | reps | load1 |", "|---|---|---|---|---|"]
        for key, v in s["commands"].items():
            lines.append(f"| {key} | {v['median_wall_s']:.2f} ({v['min_wall_s']:.2f}-{v['max_wall_s']:.2f}) | "
                         f"{v['median_cpu_s']:.2f} | {v['reps']} | {min(v['load1']):.1f}-{max(v['load1']):.1f} |")
    if s["pools"]:
        lines += ["", "| pool | median start-up C s | each rep | load1 |", "|---|---|---|---|"]
        for key, v in s["pools"].items():
            reps = ", ".join(f"{x:.2f}" for x in v["startups_s"] if x is not None)
            lines.append(f"| processes {key} | {v['median_startup_s']:.2f} | {reps or 'C(2) - C(1)'} | "
                         f"{min(v['load1']):.1f}-{max(v['load1']):.1f} |")
    if s["peer"]:
        lines += ["", "| case | engine | process s | imports s | first call s | min-ESS | min-ESS/s first call | "
                      "min-ESS/s process | reps | load1 |", "|---|---|---|---|---|---|---|---|---|---|"]
        for case, row in s["peer"].items():
            for engine, v in row.items():
                if not isinstance(v, dict):
                    continue
                lines.append(f"| {case} | {engine} | {v['wall_s']:.2f} | {v['setup_s']:.2f} | {v['first_call_s']:.2f} | "
                             f"{v['min_ess']:.0f} | {v['min_ess_per_first_call_s']:,.0f} | "
                             f"{v['min_ess_per_process_s']:,.0f} | {v['reps']} | "
                             f"{min(v['load1']):.1f}-{max(v['load1']):.1f} |")
            if "ratio_first_call" in row:
                reps = "; ".join(f"{r['first_call']:.1f}x / {r['process']:.1f}x" for r in row["ratios_by_rep"])
                lines.append(f"| {case} | **dpposterior / NumPyro** | | | | | **{row['ratio_first_call']:.1f}x** | "
                             f"**{row['ratio_process']:.1f}x** | per rep (first / process): {reps} | |")
    return "\n".join(lines)


def main(argv=None) -> None:
    from _out import add_update_flag, out_path

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--parts", nargs="+", default=["commands", "pools", "peer"],
                    choices=["commands", "pools", "peer"])
    ap.add_argument("--cases", nargs="+", default=list(PEER_CASES), choices=list(PEER_CASES))
    ap.add_argument("--numpyro-variant", default="noncentred", help="centred, noncentred (or the case's others)")
    ap.add_argument("--out", default=None)
    add_update_flag(ap)
    ap.add_argument("--table", metavar="RESULT_JSON", help="print a result file's tables")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="time our modules compiled from source in every process (as with PYTHONDONTWRITEBYTECODE=1); "
                         "default: compiled, as installed")
    ap.add_argument("--peer-worker", nargs=4, metavar=("CASE", "ENGINE", "SEED", "NPZ"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return
    if args.peer_worker:
        case, engine, seed, npz = args.peer_worker
        peer_worker(case, engine, int(seed), npz)
        return
    args.out = str(out_path(args.out, "startup.json", args.update_results))
    sys.path.insert(0, str(ROOT / "src"))
    global BYTECODE
    BYTECODE = not args.no_bytecode
    if BYTECODE:
        compile_bytecode()
    else:  # no stale __pycache__ either: each process compiles from source
        for cache in [*(ROOT / "src").rglob("__pycache__"), *(ROOT / "benchmarks").rglob("__pycache__")]:
            shutil.rmtree(cache, ignore_errors=True)
    started = time.time()
    with tempfile.TemporaryDirectory(prefix="dpposterior-startup-") as tmp:
        work = Path(tmp)
        rng = np.random.default_rng(0)
        (work / "lead.csv").write_text("lead\n" + "\n".join(f"{v:.1f}" for v in rng.gamma(4.0, 8.0, 43)) + "\n")
        warm_cache = str(work / "numba-cache")
        # fill the private cache (and make p.nc for report): one untimed run of each numba command
        for name, argv in commands(work).items():
            if name in ("infer", "calibrate"):
                subprocess.run(argv, env=env_with(warm_cache), capture_output=True, check=True)
        if "peer" in args.parts:  # the peer cases' own kernels (fixedS's are not in infer or calibrate)
            for case in args.cases:
                subprocess.run([sys.executable, __file__, "--peer-worker", case, "dpposterior", "0",
                                str(work / "warm.npz")], env=env_with(warm_cache, single_thread=True),
                               capture_output=True, check=True)
        records: list = []
        for rep in range(args.reps):
            if "commands" in args.parts:
                run_commands(rep, work, warm_cache, records)
            if "pools" in args.parts:
                run_pools(rep, work, warm_cache, records)
            if "peer" in args.parts:
                run_peer(rep, work, warm_cache, records, args.cases, args.numpyro_variant)
    result = {"machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0]},
              "bytecode": "compiled (as installed)" if BYTECODE else "compiled from source in every process",
              "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
              "elapsed_s": time.time() - started, "reps": args.reps, "parts": args.parts,
              "records": records, "summary": summarise(records)}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n")
    print()
    print(table(result))
    print(f"\nwrote {out} ({result['elapsed_s']:.0f} s)")


if __name__ == "__main__":
    main()
