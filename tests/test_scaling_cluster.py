"""a real Dask cluster -- ``dask scheduler`` and two ``dask worker`` processes started
as separate processes on 127.0.0.1 -- runs a calibration study through
``--scheduler tcp://127.0.0.1:PORT``.

* one worker is killed (SIGKILL) mid-study: Dask reschedules its units on the other worker
  and the study ends with the JSON of a serial run, byte for byte;
* the client (``dpposterior calibrate``) is killed mid-study: ``--resume`` finishes it from
  the checkpoint, again with the serial run's JSON.

Every process is started in its own session and killed (with its children) at the end, and
every wait is bounded.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from _jobs import kill_group

import pytest

pytest.importorskip("distributed")

from dpposterior.diagnostics.calibration import calibrate_command  # noqa: E402

HOST = "127.0.0.1"
STUDY = ["--family", "binomial", "--n", "50", "--epsilon", "0.5", "--trials", "300",
         "--methods", "gibbs-ss,naive", "--draws", "1000", "--seed", "21", "--unit-size", "10", "--quiet"]
UNITS = 30


def _free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


def _spawn(args, log: Path) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("MALLOC_TRIM_THRESHOLD_", None)
    return subprocess.Popen([sys.executable, *args], stdout=log.open("wb"), stderr=subprocess.STDOUT,
                            start_new_session=True, env=env)




def _wait_for(predicate, timeout: float, what: str, procs=()):
    deadline = time.monotonic() + timeout
    while not predicate():
        for p in procs:
            if p.poll() is not None:
                raise AssertionError(f"{what}: a process ended early (rc {p.returncode})")
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def _n_workers(address: str) -> int:
    from dask.distributed import Client

    with Client(address, timeout=10) as client:
        return len(client.scheduler_info()["workers"])


def _done_units(ck: Path) -> int:
    try:
        return len(json.loads(ck.read_text())["results"])
    except (FileNotFoundError, json.JSONDecodeError, KeyError):
        return 0


@pytest.fixture
def cluster(tmp_path):
    """A scheduler and two single-threaded workers (no nanny: a killed worker stays dead)."""
    port = _free_port()
    address = f"tcp://{HOST}:{port}"
    procs = {"scheduler": _spawn(["-m", "dask", "scheduler", "--host", HOST, "--port", str(port),
                                  "--no-dashboard"], tmp_path / "scheduler.log")}
    try:
        for name in ("w1", "w2"):
            procs[name] = _spawn(["-m", "dask", "worker", address, "--host", HOST, "--nthreads", "1",
                                  "--no-nanny", "--no-dashboard", "--name", name, "--death-timeout", "60"],
                                 tmp_path / f"{name}.log")
        _wait_for(lambda: _safe_count(address) == 2, 90, "two workers to join", procs.values())
        yield address, procs
    finally:
        for proc in procs.values():
            kill_group(proc)


def _safe_count(address: str) -> int:
    try:
        return _n_workers(address)
    except OSError:
        return 0


def test_study_survives_a_killed_worker_and_a_killed_client(cluster, tmp_path):
    address, procs = cluster
    reference = tmp_path / "serial.json"
    calibrate_command("binomial", 50, 0.5, 300, ["gibbs-ss", "naive"], seed=21, draws=1000, out=reference,
                      scheduler="serial", quiet=True, unit_size=10)

    # 1. a worker dies mid-study (SIGKILL): the other one finishes its units, same JSON
    out = tmp_path / "cluster.json"
    ck = tmp_path / "cluster.json.ckpt.json"
    client = _spawn(["-m", "dpposterior", "calibrate", *STUDY, "--scheduler", address, "--out", str(out)],
                    tmp_path / "client1.log")
    try:
        _wait_for(lambda: _done_units(ck) >= 3, 180, "3 units on the cluster", [client])
        done_at_kill = _done_units(ck)
        kill_group(procs["w2"])
        assert done_at_kill < UNITS, "the study ended before the worker could be killed"
        assert client.wait(timeout=300) == 0, (tmp_path / "client1.log").read_text()
    finally:
        kill_group(client)
    assert _n_workers(address) == 1
    assert out.read_text() == reference.read_text()

    # 2. the client dies mid-study (SIGKILL): --resume reruns only the missing units, same JSON
    out2 = tmp_path / "resumed.json"
    ck2 = tmp_path / "resumed.json.ckpt.json"
    args = ["-m", "dpposterior", "calibrate", *STUDY, "--scheduler", address, "--out", str(out2)]
    client = _spawn(args, tmp_path / "client2.log")
    try:
        _wait_for(lambda: _done_units(ck2) >= 2, 180, "2 units before killing the client", [client])
        kill_group(client)
    finally:
        kill_group(client)
    done = _done_units(ck2)
    assert 2 <= done < UNITS and not out2.exists()
    resumed = _spawn([*args, "--resume"], tmp_path / "client3.log")
    try:
        assert resumed.wait(timeout=300) == 0, (tmp_path / "client3.log").read_text()
    finally:
        kill_group(resumed)
    assert out2.read_text() == reference.read_text()
