"""Checkpoint and resume (checkpoint.py): atomic writes, refusal of foreign checkpoints,
and a job killed with SIGKILL mid-way that resumes to the uninterrupted run's result."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import _jobs
from dpposterior.checkpoint import atomic_write_json, run_units, to_json_value
from dpposterior.errors import InputError
from dpposterior.execution import spawn_seeds

HERE = Path(__file__).parent
UNITS = 12


def _units(n=UNITS, seed=2024):
    return [(s, 0.0) for s in spawn_seeds(seed, n)]


# ---------------------------------------------------------------- atomic writes

class Explodes:
    """Not JSON-serialisable: the dump fails after part of the file is written."""


def test_atomic_write_replaces_whole_file(tmp_path):
    path = tmp_path / "state.json"
    atomic_write_json(path, {"a": 1})
    atomic_write_json(path, {"a": np.float64(0.1), "b": np.arange(3), "c": np.int64(7)})
    assert json.loads(path.read_text()) == {"a": 0.1, "b": [0, 1, 2], "c": 7}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_atomic_write_failure_keeps_old_file_and_no_temp(tmp_path):
    path = tmp_path / "state.json"
    atomic_write_json(path, {"generation": 1})
    # fail in the middle of writing: part of the new content is already in the temporary file
    big = {"generation": 2, "payload": list(range(10000)), "bad": Explodes()}
    with pytest.raises(TypeError):
        atomic_write_json(path, big)
    assert json.loads(path.read_text()) == {"generation": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_float_results_round_trip_exactly():
    values = [0.1, 1 / 3, np.nextafter(1.0, 2.0), 1e-310, -2.5e300]
    assert to_json_value(values) == [float(v) for v in values]


# ---------------------------------------------------------------- resume semantics

def test_resume_skips_completed_units(tmp_path, monkeypatch):
    ck = tmp_path / "ck.json"
    units = _units(6)
    full = run_units(_jobs.draw_unit, units, checkpoint=ck, fingerprint={"k": 1})
    # keep only the first three units in the checkpoint, as if the run had died there
    state = json.loads(ck.read_text())
    state["results"] = {k: v for k, v in state["results"].items() if int(k) < 3}
    ck.write_text(json.dumps(state))
    monkeypatch.setattr(_jobs, "CALLS", 0)
    resumed = run_units(_jobs.draw_unit, units, checkpoint=ck, resume=True, fingerprint={"k": 1})
    assert _jobs.CALLS == 3
    assert resumed == full
    # fresh and resumed values have the same (JSON) types
    assert isinstance(full[0]["quantiles"], list) and isinstance(full[0]["max_index"], int)


def test_without_resume_a_checkpoint_is_overwritten(tmp_path, monkeypatch):
    ck = tmp_path / "ck.json"
    run_units(_jobs.draw_unit, _units(3), checkpoint=ck, fingerprint={"k": 1})
    monkeypatch.setattr(_jobs, "CALLS", 0)
    run_units(_jobs.draw_unit, _units(3), checkpoint=ck, fingerprint={"k": 1})
    assert _jobs.CALLS == 3


def test_resume_without_checkpoint_starts_afresh(tmp_path):
    out = run_units(_jobs.draw_unit, _units(2), checkpoint=tmp_path / "none.json", resume=True)
    assert len(out) == 2


def test_no_checkpoint_returns_results_untouched():
    out = run_units(_jobs.draw_unit, _units(2))
    assert isinstance(out[0]["quantiles"], np.ndarray)


@pytest.mark.parametrize("change", [{"fingerprint": {"k": 2}}, {"units": 5}])
def test_resume_refuses_a_different_run(tmp_path, change):
    ck = tmp_path / "ck.json"
    run_units(_jobs.draw_unit, _units(4), checkpoint=ck, fingerprint={"k": 1})
    with pytest.raises(InputError) as info:
        run_units(_jobs.draw_unit, _units(change.get("units", 4)), checkpoint=ck, resume=True,
                  fingerprint=change.get("fingerprint", {"k": 1}))
    assert info.value.field == "resume" and "different run" in str(info.value)


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"results": [1]}', '{"results": {"x": 1}}'])
def test_resume_refuses_unreadable_checkpoint(tmp_path, content):
    ck = tmp_path / "ck.json"
    ck.write_text(content)
    with pytest.raises(InputError) as info:
        run_units(_jobs.draw_unit, _units(2), checkpoint=ck, resume=True)
    assert info.value.field == "resume" and "\n" not in str(info.value)


# ---------------------------------------------------------------- SIGKILL and resume

def _start_job(args, cwd):
    env = dict(os.environ, PYTHONPATH=str(HERE) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    # its own session, so the kill reaches the job and any worker processes it started
    return subprocess.Popen([sys.executable, str(HERE / "_jobs.py"), *args], cwd=cwd, env=env,
                            start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _done_units(ck: Path) -> int:
    try:
        return len(json.loads(ck.read_text())["results"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):  # not written yet
        return 0


def kill_when(proc, ck: Path, at_least: int, timeout: float = 60.0) -> int:
    """SIGKILL the job's process group once ``ck`` holds ``at_least`` units; return how many it held."""
    deadline = time.monotonic() + timeout
    while _done_units(ck) < at_least:
        if proc.poll() is not None:
            raise AssertionError(f"job ended before it could be killed: {proc.stderr.read().decode()}")
        if time.monotonic() > deadline:
            proc.kill()
            raise AssertionError("job made no progress")
        time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    # the checkpoint is complete JSON at every instant (atomic rename), never half-written
    return len(json.loads(ck.read_text())["results"])


@pytest.mark.parametrize("scheduler", ["serial", "processes"])
def test_sigkill_then_resume_equals_uninterrupted(tmp_path, scheduler):
    reference = to_json_value(run_units(_jobs.draw_unit, _units(), fingerprint={"seed": 2024, "units": UNITS}))
    ck, out = tmp_path / "job.ckpt.json", tmp_path / "job.json"
    proc = _start_job([str(ck), str(out), "--units", str(UNITS), "--sleep", "0.15",
                       "--scheduler", scheduler], tmp_path)
    done = kill_when(proc, ck, at_least=3)
    assert 3 <= done < UNITS and not out.exists()
    proc = _start_job([str(ck), str(out), "--units", str(UNITS), "--scheduler", scheduler, "--resume"], tmp_path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err.decode()
    result = json.loads(out.read_text())
    assert result["results"] == reference
    if scheduler == "serial":
        # only the units missing from the checkpoint were computed again: at most the one in flight was lost
        assert result["computed_here"] == UNITS - done


# ---------------------------------------------------------------- SIGKILL a real calibration run

CALIBRATE = ["calibrate", "--family", "binomial", "--n", "50", "--epsilon", "0.5", "--trials", "500",
             "--methods", "gibbs-ss,naive", "--draws", "100", "--seed", "3", "--scheduler", "serial",
             "--unit-size", "250"]


def test_calibration_killed_with_sigkill_resumes_to_the_same_json(tmp_path):
    """Kill ``dpposterior calibrate`` mid-way (SIGKILL), resume it with
    ``--resume``, and get the JSON of an uninterrupted run (byte for byte)."""
    pytest.importorskip("dpposterior.diagnostics.calibration")
    from dpposterior.cli import main

    reference = tmp_path / "reference.json"
    assert main([*CALIBRATE, "--quiet", "--out", str(reference)]) == 0

    out = tmp_path / "killed.json"
    ck = tmp_path / "killed.json.ckpt.json"  # the calibrate command's checkpoint, beside --out
    cmd = [sys.executable, "-m", "dpposterior", *CALIBRATE, "--quiet", "--out", str(out)]
    proc = subprocess.Popen(cmd, cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    done = kill_when(proc, ck, at_least=1)  # 500 trials = 2 units of 250: killed after the first
    assert done == 1 and not out.exists()

    resumed = subprocess.run([*cmd, "--resume"], cwd=tmp_path, capture_output=True, timeout=300)
    assert resumed.returncode == 0, resumed.stderr.decode()
    assert out.read_text() == reference.read_text()
