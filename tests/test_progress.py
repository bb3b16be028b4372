"""Progress of long phases (dpposterior.progress.phase): plain lines every interval when stderr is not a
terminal (a log), nothing for a short phase or with --quiet; the CLI's infer and report show them."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time


from dpposterior import progress

RELEASE = {"format": "dpposterior-release/1", "family": "gaussian", "n": 43, "bounds": [0.0, 100.0],
           "statistics": {"mean": {"value": 34.30, "mechanism": "laplace", "epsilon": 0.25},
                          "variance": {"value": 2224.07, "mechanism": "laplace", "epsilon": 0.25}}}


def test_a_long_phase_prints_plain_lines_in_a_log(monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_INTERVAL_ENV, "0.1")
    log = io.StringIO()  # not a terminal
    with progress.phase("sampling", stream=log):
        progress.status("iteration 3 of 9")
        progress.note("compiling the kernels...")
        time.sleep(0.55)
    lines = log.getvalue().splitlines()
    assert lines[0] == "sampling... (iteration 3 of 9)"  # a note shows at once, after the phase's name
    assert lines[1] == "compiling the kernels..."
    assert any(line.startswith("sampling: iteration 3 of 9, ") for line in lines[2:-1])
    assert lines[-1].startswith("sampling: done in ")


def test_short_and_quiet_phases_print_nothing(monkeypatch):
    monkeypatch.setenv(progress.PROGRESS_INTERVAL_ENV, "5")
    log = io.StringIO()
    with progress.phase("quick", stream=log):
        progress.status("nothing to see")
    with progress.phase("silenced", quiet=True):
        progress.note("not shown")
        time.sleep(0.01)
    progress.note("outside any phase: not shown")
    assert log.getvalue() == ""


def test_compile_notice_when_the_cache_is_cold(monkeypatch, tmp_path):
    class Fake:  # a numba dispatcher's attributes, as progress.compile_notice reads them
        signatures = []

        class _cache:
            class _cache_file:
                _index_path = str(tmp_path / "kernel.nbi")

    monkeypatch.setenv(progress.PROGRESS_INTERVAL_ENV, "5")
    log = io.StringIO()
    with progress.phase("infer", stream=log):
        progress.compile_notice("the samplers", 20, Fake)
        (tmp_path / "kernel.nbi").write_bytes(b"")
        progress.compile_notice("the samplers", 20, Fake)  # warm now: silent
    assert log.getvalue().splitlines() == ["infer...", "compiling the samplers (first run after install, ~20 s)...",
                                           "infer: done in 0 s"]


def _cli(args, tmp_path):
    env = {**os.environ, progress.PROGRESS_INTERVAL_ENV: "0.05"}
    with open(tmp_path / "stderr.log", "w") as err:  # stderr redirected to a file: not a terminal
        proc = subprocess.run([sys.executable, "-m", "dpposterior", *args], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=err, text=True, timeout=600)
    assert proc.returncode == 0, (tmp_path / "stderr.log").read_text()
    return (tmp_path / "stderr.log").read_text().splitlines()


def test_infer_and_report_show_progress_when_stderr_is_a_file(tmp_path):
    (tmp_path / "rel.json").write_text(json.dumps(RELEASE))
    lines = _cli(["infer", "rel.json", "--out", "post.nc", "--seed", "1", "--draws", "300"], tmp_path)
    assert "infer: gaussian..." in lines or any(line.startswith("infer: gaussian... (") for line in lines), lines
    assert any(line.startswith("infer: gaussian: done in ") for line in lines), lines
    lines = _cli(["report", "post.nc", "--out", "report"], tmp_path)
    assert any(line.startswith("report: post.nc...") for line in lines), lines
    assert any(line.startswith("report: post.nc: ") and "s" in line for line in lines[1:]), lines
    assert any(line.startswith("report: post.nc: done in ") for line in lines), lines
