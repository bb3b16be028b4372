"""The executor abstraction (execution.py): one result whichever backend runs the tasks.

Backends compared: serial, local worker processes, and a Dask LocalCluster (2 workers,
1 thread each, started once for this module: starting it is the slow part).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from dpposterior import execution
from dpposterior.checkpoint import run_units
from dpposterior.errors import InputError
from dpposterior.execution import check_scheduler, executor, spawn_seeds

from _jobs import draw_unit, fail_unit


def _units(n=8, seed=11):
    return [(s, 0.0) for s in spawn_seeds(seed, n)]


def _as_plain(results):
    return [{k: np.asarray(v).tolist() for k, v in r.items()} for r in results]


@pytest.fixture(scope="module")
def dask_executor():
    with executor("local", workers=2) as ex:
        yield ex


def test_serial_processes_dask_identical(dask_executor):
    units = _units()
    serial = _as_plain(execution.Executor("serial").map(draw_unit, units))
    with executor("processes", workers=2) as ex:
        processes = _as_plain(ex.map(draw_unit, units))
    dask = _as_plain(dask_executor.map(draw_unit, units))
    # bit-identical, not merely close: every task draws from its own spawned seed
    assert serial == processes == dask
    # and the tasks really are independent streams
    assert len({r["mean"] for r in serial}) == len(units)


def test_imap_unordered_yields_every_index_once(dask_executor):
    units = _units(6)
    expected = _as_plain([draw_unit(u) for u in units])
    for ex in (execution.Executor("serial"), dask_executor):
        got = dict(ex.imap_unordered(draw_unit, units))
        assert sorted(got) == list(range(len(units)))
        assert _as_plain([got[i] for i in range(len(units))]) == expected


def test_run_units_same_results_across_backends(tmp_path):
    units = _units(6, seed=5)
    out = {}
    for scheduler in ("serial", "processes"):
        out[scheduler] = run_units(draw_unit, units, scheduler=scheduler, workers=2,
                                   checkpoint=tmp_path / f"{scheduler}.json", fingerprint={"s": 5})
    assert out["serial"] == out["processes"]


@pytest.mark.parametrize("backend", ["serial", "processes", "dask"])
def test_task_errors_propagate(backend, dask_executor):
    if backend == "dask":
        with pytest.raises(ValueError, match="unit 2 is broken"):
            dask_executor.map(fail_unit, range(4))
        return
    with executor(backend, workers=2) as ex:
        with pytest.raises(ValueError, match="unit 2 is broken"):
            ex.map(fail_unit, range(4))


@pytest.mark.parametrize("bad", ["dask", "Serial", "", "tcp://", "tcp://host", "tcp://host:port",
                                 "tcp://:8786", "tcp://host:0", "tcp://host:70000", None, 3])
def test_bad_scheduler_is_one_line_error(bad):
    with pytest.raises(InputError) as info:
        check_scheduler(bad)
    assert info.value.field == "scheduler" and "\n" not in str(info.value)
    with pytest.raises(InputError):
        with executor(bad):
            pass


@pytest.mark.parametrize("good", ["serial", "processes", "local", "tcp://10.0.0.5:8786", "tcp://head-node:8786"])
def test_good_scheduler_strings(good):
    assert check_scheduler(good) == good


def test_bad_workers(monkeypatch):
    with pytest.raises(InputError, match="workers"):
        with executor("processes", workers=0):
            pass
    monkeypatch.setenv("DPPOSTERIOR_WORKERS", "two")
    with pytest.raises(InputError, match="DPPOSTERIOR_WORKERS"):
        execution.default_workers()
    monkeypatch.setenv("DPPOSTERIOR_WORKERS", "3")
    assert execution.default_workers() == 3


def test_unreachable_dask_scheduler_is_one_line_error(monkeypatch):
    monkeypatch.setattr(execution, "CONNECT_TIMEOUT", 1)
    with pytest.raises(InputError) as info:
        with executor("tcp://127.0.0.1:9"):
            pass
    assert info.value.field == "scheduler" and "cannot reach" in str(info.value)


def test_run_units_rejects_bad_scheduler_before_work(tmp_path):
    with pytest.raises(InputError, match="scheduler"):
        run_units(draw_unit, _units(2), scheduler="threads", checkpoint=tmp_path / "c.json")
    assert not (tmp_path / "c.json").exists()


def test_spawn_seeds_independent_of_count():
    # the first k children do not depend on how many are spawned, so growing a study keeps old trials
    a = [np.random.default_rng(s).integers(1 << 30) for s in spawn_seeds(3, 4)]
    b = [np.random.default_rng(s).integers(1 << 30) for s in spawn_seeds(3, 10)][:4]
    assert a == b


# ---------------------------------------------------------------- the calibration command on every backend

def test_calibration_json_identical_across_backends(tmp_path):
    """A small calibration with serial, local processes and a Dask
    LocalCluster gives identical JSON (byte for byte)."""
    pytest.importorskip("dpposterior.diagnostics.calibration")
    from dpposterior.cli import main

    texts = {}
    for scheduler in ("serial", "processes", "local"):
        out = tmp_path / f"{scheduler}.json"
        # 300 trials = 2 checkpointed units (250 + 50), so the backends really split the work
        code = main(["calibrate", "--family", "binomial", "--n", "50", "--epsilon", "0.5", "--trials", "300",
                     "--methods", "gibbs-ss,naive", "--draws", "100", "--seed", "7", "--scheduler", scheduler,
                     "--quiet", "--out", str(out)])
        assert code == 0
        texts[scheduler] = out.read_text()
    assert texts["serial"] == texts["processes"] == texts["local"]
    assert json.loads(texts["serial"])["trials"] == 300


def test_calibrate_bad_scheduler_one_line(tmp_path, capsys):
    pytest.importorskip("dpposterior.diagnostics.calibration")
    from dpposterior.cli import main

    code = main(["calibrate", "--family", "binomial", "--n", "50", "--epsilon", "0.5", "--trials", "10",
                 "--scheduler", "cluster", "--quiet", "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: scheduler:") and err.count("\n") == 1


def gamma_sim(theta, rng):
    """A vectorised toy simulator: one statistic per parameter row."""
    return rng.gamma(theta[:, 0], size=len(theta))[:, None] + theta[:, 1:2]


def test_map_batches_identical_across_backends(dask_executor):
    from dpposterior.execution import map_batches

    theta = np.column_stack([np.linspace(1, 3, 25), np.arange(25.0)])
    serial = map_batches(gamma_sim, theta, seed=4, batch_size=7)
    assert serial.shape == (25, 1)
    with executor("processes", workers=2) as ex:
        procs = map_batches(gamma_sim, theta, seed=4, batch_size=7, ex=ex)
    dask = map_batches(gamma_sim, theta, seed=4, batch_size=7, ex=dask_executor)
    assert np.array_equal(serial, procs) and np.array_equal(serial, dask)
    # batch k (rows 7k..7k+6, in order) draws from the k-th spawned seed
    expected = np.concatenate([gamma_sim(theta[7 * k:7 * k + 7], np.random.default_rng(ss))
                               for k, ss in enumerate(spawn_seeds(4, 4))])
    assert np.array_equal(serial, expected)
    with pytest.raises(InputError, match="batch_size"):
        map_batches(gamma_sim, theta, seed=4, batch_size=0)


def test_sbi_simulation_batches_identical_on_every_backend():
    """SBI simulations run in seeded batches on the executor `infer(..., scheduler=)` makes current."""
    pytest.importorskip("dpposterior.sbi")
    from dpposterior.execution import current_executor, use_executor
    from dpposterior.mechanisms import Laplace
    from dpposterior.sbi import GaussianPrior, SimulatorModel

    # a lambda on purpose: closures must travel to worker processes too (cloudpickle)
    model = SimulatorModel(prior=GaussianPrior([0.0], [[1.0]]), mechanism=Laplace(1.0, 1.0), observed=[0.3],
                           simulate=lambda theta, rng: theta + rng.normal(size=theta.shape))
    theta = np.linspace(-1, 1, 600)[:, None]
    assert current_executor() is None
    with use_executor("serial"):
        serial = model.statistics(theta, np.random.default_rng(9))
    with use_executor("processes", workers=2) as ex:
        procs = model.statistics(theta, np.random.default_rng(9))
        assert ex.kind == "processes"
    assert current_executor() is None
    assert np.array_equal(serial, procs) and serial.shape == (600, 1)
    # outside infer (no current executor) the simulator sees the caller's generator directly
    direct = model.statistics(theta, np.random.default_rng(9))
    assert direct.shape == serial.shape and not np.array_equal(direct, serial)


def test_use_executor_starts_nothing_unless_used():
    from dpposterior.execution import use_executor

    with use_executor("local") as lazy:  # a LocalCluster would take seconds to start
        assert lazy._ex is None
    with pytest.raises(InputError, match="scheduler"):
        with use_executor("nope"):
            pass


@pytest.mark.parametrize("scheduler, in_process, runs_actors", [
    ("serial", True, False), ("processes", False, False), ("local", False, True), ("tcp://127.0.0.1:1", False, True)])
def test_capabilities_are_told_without_starting_the_executor(scheduler, in_process, runs_actors):
    """What an engine asks before choosing its path (small-area: its own compiled loop, or Dask actors) -- the
    lazy executor answers from the scheduler without starting a pool or a cluster, as the started one would."""
    from dpposterior.execution import use_executor

    with use_executor(scheduler) as lazy:
        assert (lazy.in_process, lazy.runs_actors) == (in_process, runs_actors)
        assert lazy._ex is None
    if scheduler in ("serial", "processes"):
        with executor(scheduler, workers=1) as ex:
            assert (ex.in_process, ex.runs_actors, ex.dask_client()) == (in_process, runs_actors, None)


def test_a_dask_executor_runs_actors(dask_executor):
    assert dask_executor.runs_actors and not dask_executor.in_process
    assert dask_executor.dask_client() is not None


def spawn_twice(seed_seq):
    """Mutates its input (spawn advances the SeedSequence's child counter), as calibration units do."""
    return int(np.random.default_rng(seed_seq.spawn(1)[0]).integers(1 << 30))


def test_serial_tasks_get_copies_like_other_backends():
    units = spawn_seeds(8, 3)
    first = execution.Executor("serial").map(spawn_twice, units)
    second = execution.Executor("serial").map(spawn_twice, units)
    with executor("processes", workers=1) as ex:
        third = ex.map(spawn_twice, units)
    assert first == second == third


class _FinishedFuture:
    """A Dask future whose task finished but whose result cannot be fetched, or whose unit raised."""

    def __init__(self, key, error):
        self.key, self._error = key, error

    def done(self):
        return True

    def result(self):
        raise self._error

    def release(self):
        pass


class _Client:
    """Just what Executor._dask_imap asks of a Dask client; ``scheduler_up`` says whether it answers."""

    status = "running"

    def __init__(self, error, scheduler_up):
        self._error, self._up = error, scheduler_up

    def map(self, fn, items, pure=False):
        return [_FinishedFuture(f"k{i}", self._error) for i, _ in enumerate(items)]

    def nthreads(self):
        if not self._up:
            raise ConnectionResetError(104, "Connection reset by peer")
        return {"w1": 1}

    def cancel(self, futures):
        pass


def test_a_result_lost_with_the_scheduler_is_the_one_line_cluster_error():
    """The race tests/test_faults.py met once in CI: a task done, the scheduler killed before its result was
    fetched -- Dask raises CommClosedError (an OSError) from ``result()``.  That is the lost-scheduler
    ClusterError, not a traceback; an OSError the unit itself raised, scheduler up, still propagates."""
    from distributed.comm.core import CommClosedError

    lost = execution.Executor("dask", client=_Client(CommClosedError("in <TCP (closed)>: reset"), False),
                              address="tcp://127.0.0.1:1")
    with pytest.raises(execution.ClusterError, match="lost the Dask scheduler tcp://127.0.0.1:1"):
        list(lost.imap_unordered(abs, [1, 2]))
    own = execution.Executor("dask", client=_Client(FileNotFoundError("units.csv"), True),
                             address="tcp://127.0.0.1:1")
    with pytest.raises(FileNotFoundError, match="units.csv"):
        list(own.imap_unordered(abs, [1, 2]))
