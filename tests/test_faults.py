"""Never lose a result, never trust a tampered one.

Each case of the issue's list, as an independent tester found it, is a test here: tampered and
inconsistent checkpoints (refused naming the unit, or recomputed with ``--repair``), a result and
a checkpoint from different runs, concurrent writers to one ``--out``, a full disk (a file-size
limit, ``RLIMIT_FSIZE``, in a real process), a Dask scheduler without workers, a lost scheduler,
a dead worker whose finished units must not be recomputed, and CSV errors naming the row.

Every process is started in its own session and killed in a ``finally``; every wait is bounded.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from _jobs import kill_group

import numpy as np
import pytest

from dpposterior.checkpoint import FORMAT, run_id, unit_hash
from dpposterior.cli import main
from dpposterior.files import TEMP_SUFFIX, atomic_path, write_bytes

HERE = Path(__file__).parent
SRC = HERE.parent / "src"
#: a small calibration study: 12 trials in 4 units of 3, serial (about a second)
STUDY = ["calibrate", "--family", "binomial", "--n", "50", "--epsilon", "0.5", "--trials", "12",
         "--methods", "gibbs-ss,naive", "--draws", "200", "--seed", "3", "--unit-size", "3",
         "--scheduler", "serial", "--quiet"]
#: bound on any one subprocess of these tests (seconds)
LIMIT = 240


def _set(argv, option: str, value) -> list:
    """``argv`` with ``option``'s value replaced."""
    argv = list(argv)
    argv[argv.index(option) + 1] = str(value)
    return argv


def _run(argv, capsys):
    code = main([str(a) for a in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line_refusal(code, err, *fragments):
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert code == 2, err
    assert len(lines) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SRC), str(HERE), env.get("PYTHONPATH", "")])
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    return env


def _cli(args, cwd, preexec_fn=None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dpposterior", *map(str, args)], cwd=cwd, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, preexec_fn=preexec_fn)


def _finish(proc: subprocess.Popen, timeout: float = LIMIT) -> tuple[int, str, str]:
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        kill_group(proc)
    return proc.returncode, out, err




def _temps(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.endswith((TEMP_SUFFIX, ".tmp")))


# ============================================================== checkpoint integrity

@pytest.fixture(scope="module")
def study(tmp_path_factory):
    """The study run once, untouched: its JSON and its checkpoint."""
    folder = tmp_path_factory.mktemp("study")
    assert main([*STUDY, "--out", str(folder / "ref.json")]) == 0
    return (folder / "ref.json").read_text(), json.loads((folder / "ref.json.ckpt.json").read_text())


def _rank_digit(state):
    u = state["results"]["1"]["ranks"]["gibbs-ss"][0][0]
    state["results"]["1"]["ranks"]["gibbs-ss"][0][0] = float(f"{u:.6f}"[:-1] + ("1" if f"{u:.6f}"[-1] != "1" else "2"))


def _rank_nan(state):
    state["results"]["1"]["ranks"]["naive"][2][0] = float("nan")


def _rank_out_of_range(state):
    state["results"]["1"]["ranks"]["gibbs-ss"][1][0] = 1.7


def _mmd_times_1000(state):
    state["results"]["1"]["mmd"]["gibbs-ss"] = [v * 1000 for v in state["results"]["1"]["mmd"]["gibbs-ss"]]


def _deleted_trial(state):
    for m in ("gibbs-ss", "naive"):
        del state["results"]["1"]["ranks"][m][0]


def _unit_copied(state):
    state["results"]["1"] = state["results"]["2"]


def _wrong_type(state):
    state["results"]["1"] = [1, 2, 3]


def _missing_key(state):
    del state["results"]["1"]["ranks"]


TAMPERS = [_rank_digit, _rank_nan, _rank_out_of_range, _mmd_times_1000, _deleted_trial, _unit_copied,
           _wrong_type, _missing_key]


@pytest.mark.parametrize("tamper", TAMPERS, ids=lambda f: f.__name__.strip("_"))
def test_a_tampered_unit_is_refused_naming_it_and_repaired(study, tamper, tmp_path, capsys):
    reference, state = study
    state = json.loads(json.dumps(state))
    tamper(state)
    out = tmp_path / "r.json"
    (tmp_path / "r.json.ckpt.json").write_text(json.dumps(state))
    code, _, err = _run([*STUDY, "--out", out, "--resume"], capsys)
    _one_line_refusal(code, err, "unit 1 (trials 3-5)", "--repair")
    assert not out.exists()
    code, _, err = _run([*STUDY, "--out", out, "--resume", "--repair"], capsys)
    assert code == 0 and "repair: recomputing unit 1 (trials 3-5)" in err, err
    assert out.read_text() == reference  # recomputed: the untampered run's JSON, byte for byte


@pytest.mark.parametrize("tamper", [_rank_nan, _rank_out_of_range, _deleted_trial, _wrong_type, _missing_key],
                         ids=lambda f: f.__name__.strip("_"))
def test_a_forged_hash_does_not_pass_an_inconsistent_unit(study, tamper, tmp_path, capsys):
    """Whoever recomputes the hash still cannot feed the summary a NaN, a rank outside [0, 1], a
    lost trial or a malformed unit: each resumed unit is also checked for consistency."""
    _, state = study
    state = json.loads(json.dumps(state))
    tamper(state)
    state["sha256"]["1"] = unit_hash(state["run_id"], 1, state["results"]["1"])
    (tmp_path / "r.json.ckpt.json").write_text(json.dumps(state))
    code, _, err = _run([*STUDY, "--out", tmp_path / "r.json", "--resume"], capsys)
    _one_line_refusal(code, err, "unit 1 (trials 3-5)")


def test_a_checkpoint_without_hashes_is_refused_then_recomputed(study, tmp_path, capsys):
    reference, state = study
    old = {"fingerprint": state["fingerprint"], "total": state["total"], "results": state["results"]}
    (tmp_path / "r.json.ckpt.json").write_text(json.dumps(old))  # the older format
    code, _, err = _run([*STUDY, "--out", tmp_path / "r.json", "--resume"], capsys)
    _one_line_refusal(code, err, "no valid unit hashes", "--repair")
    code, _, err = _run([*STUDY, "--out", tmp_path / "r.json", "--resume", "--repair"], capsys)
    assert code == 0 and "recomputing every unit" in err
    assert (tmp_path / "r.json").read_text() == reference


@pytest.mark.parametrize("garbage", ["", "{not json", "[1, 2]", '{"results": 3}'])
def test_an_unreadable_checkpoint_is_refused_in_one_line(tmp_path, garbage, capsys):
    (tmp_path / "r.json.ckpt.json").write_text(garbage)
    code, _, err = _run([*STUDY, "--out", tmp_path / "r.json", "--resume"], capsys)
    _one_line_refusal(code, err, "unreadable")


def test_result_records_trials_used_run_id_and_seal(study):
    reference, state = study
    result = json.loads(reference)
    assert all(m["trials_used"] == 12 - m["failed_trials"] for m in result["methods"].values())
    fingerprint = {k: v for k, v in state["fingerprint"].items() if k != "chunk"}
    assert result["run_id"] == run_id(fingerprint) and len(result["sha256"]) == 64
    assert state["format"] == FORMAT and state["run_id"] == run_id(state["fingerprint"])


def test_report_refuses_a_checkpoint_of_another_run(study, tmp_path, capsys):
    reference, _ = study
    (tmp_path / "a.json").write_text(reference)
    assert main([*_set(STUDY, "--seed", 4), "--out", str(tmp_path / "b.json")]) == 0
    shutil.copy(tmp_path / "b.json.ckpt.json", tmp_path / "a.json.ckpt.json")  # seed 4's ranks beside seed 3's table
    capsys.readouterr()
    code, _, err = _run(["report", tmp_path / "a.json", "--out", tmp_path / "rep"], capsys)
    _one_line_refusal(code, err, "belong to different runs")
    # its own checkpoint is used; an edited result (one KS value) is refused
    code, _, err = _run(["report", tmp_path / "b.json", "--out", tmp_path / "rep"], capsys)
    assert code == 0, err
    edited = json.loads((tmp_path / "b.json").read_text())
    edited["methods"]["naive"]["ks"] = 0.01
    (tmp_path / "b.json").write_text(json.dumps(edited))
    code, _, err = _run(["report", tmp_path / "b.json", "--out", tmp_path / "rep2"], capsys)
    _one_line_refusal(code, err, "does not match its sha256")


def test_resume_of_another_runs_checkpoint_is_refused(study, tmp_path, capsys):
    _, state = study
    (tmp_path / "r.json.ckpt.json").write_text(json.dumps(state))
    code, _, err = _run([*_set(STUDY, "--seed", 5), "--out", tmp_path / "r.json", "--resume"], capsys)
    _one_line_refusal(code, err, "belongs to a different run")


# ============================================================== writers

def test_writers_remove_their_temporary_file_on_every_failure(tmp_path, monkeypatch):
    target = tmp_path / "x.bin"
    for exc in (KeyboardInterrupt, OSError(28, "No space left on device"), RuntimeError("boom")):
        with pytest.raises((KeyboardInterrupt, ValueError, RuntimeError)):
            with atomic_path(target) as tmp:
                tmp.write_bytes(b"partial")
                raise exc
        assert list(tmp_path.iterdir()) == []

    def interrupted(*_):
        raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", interrupted)  # interrupted between fsync and rename
    with pytest.raises(KeyboardInterrupt):
        write_bytes(target, b"data")
    assert list(tmp_path.iterdir()) == []


def test_a_full_disk_is_found_before_writing(tmp_path, monkeypatch):
    real = os.statvfs(tmp_path)

    class Full:
        f_bavail, f_frsize = 1, real.f_frsize

    monkeypatch.setattr(os, "statvfs", lambda _: Full)
    with pytest.raises(ValueError, match=r"out: cannot write .*needs 100,000 bytes.*nothing was written"):
        write_bytes(tmp_path / "big.bin", b"x" * 100_000)
    assert list(tmp_path.iterdir()) == []


def test_stale_temporary_files_of_dead_runs_are_removed(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait(timeout=30)
    stale = tmp_path / f".x.json.{dead.pid}.deadbeef{TEMP_SUFFIX}"
    mine = tmp_path / f".x.json.{os.getpid()}.cafecafe{TEMP_SUFFIX}"  # a live writer's: kept
    stale.write_text("half")
    mine.write_text("half")
    (tmp_path / ".x.json.dpposterior-write-test").write_text("")  # the old fixed-name probe
    write_bytes(tmp_path / "x.json", b"{}")
    assert not stale.exists() and mine.exists() and (tmp_path / "x.json").read_text() == "{}"


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """A gaussian release (and its CSV) for the process tests."""
    folder = tmp_path_factory.mktemp("ws")
    rng = np.random.default_rng(0)
    (folder / "data.csv").write_text("x\n" + "\n".join(f"{v:.3f}" for v in rng.uniform(0, 10, 200)) + "\n")
    assert main(["release", str(folder / "data.csv"), "--family", "gaussian", "--column", "x", "--bounds", "0",
                 "10", "--epsilon", "1", "--seed", "1", "--out", str(folder / "rel.json")]) == 0
    return folder


INFER = ["infer", "rel.json", "--method", "grid", "--draws", "500", "--chains", "2", "--no-naive", "--quiet"]


def test_concurrent_infer_runs_on_one_out_both_succeed(workspace):
    procs = [_cli([*INFER, "--seed", str(seed), "--out", "Q.nc"], workspace) for seed in (1, 2)]
    results = [_finish(p) for p in procs]
    assert [r[0] for r in results] == [0, 0], results
    import arviz as az

    idata = az.from_netcdf(workspace / "Q.nc")  # the last complete file wins
    assert idata.posterior.attrs["seed"] in (1, 2) and _temps(workspace) == []


def test_concurrent_release_runs_on_one_out_all_succeed(workspace):
    (workspace / ".R.json.dpposterior-write-test").write_text("")  # stale probe of an older version
    args = ["release", "data.csv", "--family", "gaussian", "--column", "x", "--bounds", "0", "10",
            "--epsilon", "1", "--out", "R.json"]
    procs = [_cli([*args, "--seed", str(seed)], workspace) for seed in range(6)]
    results = [_finish(p) for p in procs]
    assert [r[0] for r in results] == [0] * 6, [r[2][-500:] for r in results]
    assert json.loads((workspace / "R.json").read_text())["family"] == "gaussian"
    assert _temps(workspace) == []


def test_two_calibrate_runs_never_share_a_checkpoint(tmp_path):
    slow = _set(STUDY, "--trials", 400)
    (tmp_path / ".C.json.lock").write_text("")  # left by a killed run: only a held lock counts
    first = _cli([*slow, "--out", "C.json"], tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "C.json.ckpt.json").exists():  # the first run holds the lock by now
            assert first.poll() is None and time.monotonic() < deadline, first.communicate()
            time.sleep(0.05)
        code, _, err = _finish(_cli([*_set(STUDY, "--seed", 9), "--out", "C.json"], tmp_path))
        _one_line_refusal(code, err, "another dpposterior run is writing C.json")
        code, _, err = _finish(first)
        assert code == 0, err
    finally:
        kill_group(first)
    # afterwards the other seed runs (fresh), and resuming it onto the first's checkpoint is refused
    code, _, err = _finish(_cli([*_set(STUDY, "--seed", 9), "--out", "C.json", "--resume"], tmp_path))
    _one_line_refusal(code, err, "belongs to a different run")


def test_report_refuses_a_posterior_whose_draws_were_edited(workspace, tmp_path, capsys):
    out = tmp_path / "P.nc"
    code, _, err = _run([*[workspace / "rel.json" if a == "rel.json" else a for a in INFER], "--seed", "3",
                         "--out", out], capsys)
    assert code == 0, err
    code, _, err = _run(["report", out, "--out", tmp_path / "rep"], capsys)
    assert code == 0, err
    import h5py

    with h5py.File(out, "r+") as fh:  # one draw changed in its last digits
        draws = fh["posterior/mu"][...]
        draws[0, 0] *= 1 + 1e-12
        fh["posterior/mu"][...] = draws
    code, _, err = _run(["report", out, "--out", tmp_path / "rep2"], capsys)
    _one_line_refusal(code, err, "do not match their sha256")


# ============================================================== full disk (RLIMIT_FSIZE)

def _file_size_limit(limit: int):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


@pytest.mark.parametrize("command", ["infer", "release", "calibrate"])
def test_a_full_disk_is_one_line_exit_2_and_no_temporary_file(workspace, tmp_path, command):
    shutil.copy(workspace / "rel.json", tmp_path)
    shutil.copy(workspace / "data.csv", tmp_path)
    args = {"infer": [*INFER, "--seed", "1", "--out", "Q.nc"],
            "release": ["release", "data.csv", "--family", "gaussian", "--column", "x", "--bounds", "0", "10",
                        "--epsilon", "1", "--seed", "1", "--out", "R.json"],
            "calibrate": [*STUDY, "--out", "C.json"]}[command]
    limit = {"infer": 4000, "release": 200, "calibrate": 300}[command]
    before = set(os.listdir(tmp_path))
    code, _, err = _finish(_cli(args, tmp_path, preexec_fn=_file_size_limit(limit)))
    line = _one_line_refusal(code, err, "File too large", "nothing was written")
    assert "Segmentation" not in err and code != -signal.SIGSEGV
    assert set(os.listdir(tmp_path)) - before <= {".C.json.lock"}, os.listdir(tmp_path)
    if command == "infer":
        assert "gives the same draws again" in line  # how to get the lost posterior back
    if command == "calibrate":
        assert "checkpoint" in line


# ============================================================== cluster faults

def _wait_for(*args, **kwargs):
    return _cluster_tools()._wait_for(*args, **kwargs)


def _safe_count(address: str) -> int:
    return _cluster_tools()._safe_count(address)


def _cluster_tools():
    """The process helpers of the cluster test (skips where dask.distributed is missing)."""
    pytest.importorskip("distributed")
    import test_scaling_cluster

    return test_scaling_cluster


@pytest.fixture
def scheduler(tmp_path):
    """A Dask scheduler process on 127.0.0.1 (no workers yet); workers are added by the tests."""
    tools = _cluster_tools()
    HOST, _spawn = tools.HOST, tools._spawn
    port = tools._free_port()
    address = f"tcp://{HOST}:{port}"
    procs = {"scheduler": _spawn(["-m", "dask", "scheduler", "--host", HOST, "--port", str(port),
                                  "--no-dashboard"], tmp_path / "scheduler.log")}

    def add_worker(name):
        env_path = os.pathsep.join([str(SRC), str(HERE)])
        procs[name] = subprocess.Popen(
            [sys.executable, "-m", "dask", "worker", address, "--host", tools.HOST, "--nthreads", "1", "--no-nanny",
             "--no-dashboard", "--name", name, "--death-timeout", "60"],
            stdout=(tmp_path / f"{name}.log").open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
            env={**_env(), "PYTHONPATH": env_path})
        return procs[name]

    try:
        _wait_for(lambda: _safe_count(address) == 0 and procs["scheduler"].poll() is None, 60, "the scheduler")
        yield address, procs, add_worker
    finally:
        for proc in procs.values():
            kill_group(proc)


def test_no_worker_is_one_line_naming_the_scheduler_and_the_checkpoint(scheduler, tmp_path):
    address, _, _ = scheduler
    args = [*_set(STUDY, "--scheduler", address), "--out", "C.json", "--worker-timeout", "3"]
    code, _, err = _finish(_cli(args, tmp_path), timeout=120)
    _one_line_refusal(code, err, f"no Dask worker connected to {address} for 3 s", "holds 0 of 4 units",
                      "--resume")


def _cluster_study(address, out):
    """300 trials in 30 units, not --quiet (progress lines name the connected workers)."""
    args = _set(_set(_set(_set(STUDY, "--trials", 300), "--draws", 1000), "--unit-size", 10), "--scheduler", address)
    return [a for a in args if a != "--quiet"] + ["--out", out]


def _done_units(ck: Path) -> int:
    try:
        return len(json.loads(ck.read_text())["results"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return 0


def test_lost_scheduler_is_one_line_and_resume_finishes(scheduler, tmp_path):
    address, procs, add_worker = scheduler
    add_worker("w1")
    _wait_for(lambda: _safe_count(address) == 1, 90, "a worker to join")
    client = _cli(_cluster_study(address, "L.json"), tmp_path)
    try:
        _wait_for(lambda: _done_units(tmp_path / "L.json.ckpt.json") >= 2, 180, "2 units", [client])
        kill_group(procs["scheduler"])
        code, _, err = _finish(client, timeout=120)
    finally:
        kill_group(client)
    line = _one_line_refusal(code, err, f"lost the Dask scheduler {address}", "rerun with --resume")
    assert "Dask worker connected" in err  # progress named the connected workers
    done = _done_units(tmp_path / "L.json.ckpt.json")
    assert f"holds {done} of 30 units" in line and not (tmp_path / "L.json").exists()
    resume = [*_set(_cluster_study(address, "L.json"), "--scheduler", "serial"), "--resume"]
    code, _, err = _finish(_cli(resume, tmp_path))
    assert code == 0 and f"{done} of 30" in err, err


def test_finished_units_of_a_dead_worker_are_not_recomputed(scheduler, tmp_path):
    address, procs, add_worker = scheduler
    add_worker("w1")
    add_worker("w2")
    _wait_for(lambda: _safe_count(address) == 2, 90, "two workers to join")
    log, ck = tmp_path / "runs.log", tmp_path / "job.ckpt.json"
    job = subprocess.Popen([sys.executable, str(HERE / "_jobs.py"), str(ck), str(tmp_path / "job.json"),
                            "--units", "24", "--sleep", "0.4", "--scheduler", address, "--log", str(log)],
                           env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        _wait_for(lambda: _done_units(ck) >= 6, 120, "6 units done", [job])
        done_before = set(json.loads(ck.read_text())["results"])
        kill_group(procs["w2"])
        out, _ = job.communicate(timeout=LIMIT)
        assert job.returncode == 0, out
    finally:
        kill_group(job)
    runs = [int(line) for line in log.read_text().split()]
    assert sorted(set(runs)) == list(range(24))
    assert all(runs.count(int(k)) == 1 for k in done_before), (done_before, runs)


# ============================================================== CSV errors name the row and column

@pytest.mark.parametrize("family,options", [
    ("gaussian", ["--column", "x", "--bounds", "0", "10"]),
    ("binomial", ["--column", "x"]),
    ("poisson", ["--column", "x", "--bounds", "0", "10"]),
    ("exponential", ["--column", "x", "--bounds", "0", "10"]),
    ("linear-regression", ["--features", "x", "--response", "y", "--x-norm", "1", "--y-abs", "1"]),
])
@pytest.mark.parametrize("cell,words", [("abc", "row 3: 'abc' is not a finite number (column 'x')"),
                                        ("", "row 3 is empty (column 'x')")])
def test_csv_errors_name_the_row_and_column(tmp_path, family, options, cell, words, capsys):
    (tmp_path / "d.csv").write_text(f"x,y\n1,0.5\n0,0.5\n{cell},0.5\n1,0.5\n")
    code, _, err = _run(["release", tmp_path / "d.csv", "--family", family, *options, "--epsilon", "1",
                         "--seed", "1", "--out", tmp_path / "r.json"], capsys)
    _one_line_refusal(code, err, "data.x", words)


def test_csv_with_a_duplicate_column_name_is_refused(tmp_path, capsys):
    (tmp_path / "d.csv").write_text("x,y,x\n1,2,3\n4,5,6\n")
    code, _, err = _run(["release", tmp_path / "d.csv", "--family", "gaussian", "--column", "x", "--bounds", "0",
                         "10", "--epsilon", "1", "--out", tmp_path / "r.json"], capsys)
    _one_line_refusal(code, err, "column 'x' appears twice in the header (columns 1 and 3)")
