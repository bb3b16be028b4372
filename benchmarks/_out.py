"""Where a benchmark script writes its files.

By default every script writes into a scratch folder (``$DPPOSTERIOR_BENCH_OUT``, else
``<tmp>/dpposterior-benchmarks``), so running a documented command never changes a committed file.
``--update-results`` writes into the committed ``benchmarks/results/`` (figures: ``docs/img/``) instead,
for whoever refreshes the numbers that docs/benchmarks.md quotes; an explicit ``--out`` always wins.
Committed inputs (the reference posteriors ``benchmarks/results/isref_*``, ``ref_*``) are read from
``benchmarks/results/`` either way.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
IMG = ROOT / "docs" / "img"


def scratch() -> Path:
    """The scratch folder (created)."""
    folder = Path(os.environ.get("DPPOSTERIOR_BENCH_OUT") or Path(tempfile.gettempdir()) / "dpposterior-benchmarks")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def add_update_flag(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--update-results", action="store_true",
                    help="write into the committed benchmarks/results/ (figures: docs/img/) instead of a scratch "
                         "folder ($DPPOSTERIOR_BENCH_OUT or <tmp>/dpposterior-benchmarks)")


def results_dir(update: bool) -> Path:
    """benchmarks/results/ with --update-results, else the scratch folder."""
    return RESULTS if update else scratch()


def img_dir(update: bool) -> Path:
    """docs/img/ with --update-results, else the scratch folder."""
    return IMG if update else scratch()


def out_path(out, name: str, update: bool) -> Path:
    """``out`` if given, else ``name`` in :func:`results_dir`; says where it will write."""
    path = Path(out) if out else results_dir(update) / name
    print(f"(results go to {path})", flush=True)
    return path


def loadavg() -> str:
    """``/proc/loadavg`` (recorded before and after every timed run), or "n/a"."""
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "n/a"


def run_worker(cmd: list[str], env: dict, timeout: float, rec: dict, stderr_tail: int = 600) -> dict:
    """Run one worker process and fold its last ``RESULT {json}`` line into ``rec``, with ``status`` ("ok", the
    exit code and the tail of stderr, or the timeout), ``process_seconds`` and the load before and after."""
    import json
    import subprocess
    import time

    rec["loadavg_before"] = loadavg()
    t0 = time.perf_counter()
    try:
        cp = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        rec["process_seconds"] = time.perf_counter() - t0
        line = [ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")]
        if cp.returncode != 0 or not line:
            rec["status"] = f"failed rc={cp.returncode}: {cp.stderr.strip()[-stderr_tail:]}"
        else:
            rec.update(json.loads(line[-1][7:]))
            rec["status"] = "ok"
    except subprocess.TimeoutExpired:
        rec["process_seconds"] = time.perf_counter() - t0
        rec["status"] = f"timeout after {timeout} s"
    rec["loadavg_after"] = loadavg()
    return rec
