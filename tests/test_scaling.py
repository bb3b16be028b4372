"""studies that scale.

* every trial has its own SeedSequence child, so the calibration JSON is identical for any
  unit size, any backend and any worker count;
* units are sized from the work and the workers (>= 4 units per worker);
* a trial that fails is recorded in the JSON instead of ending the study;
* workers start warm: every Gibbs-SS kernel loads from numba's cache in a fresh process;
* ``--workers`` on every command that takes ``--scheduler``.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dpposterior import execution
from dpposterior.cli import main
from dpposterior.diagnostics import calibration
from dpposterior.diagnostics.calibration import calibrate
from dpposterior.errors import InputError
from dpposterior.execution import spawn_seeds, trial_seed, unit_size, use_workers, worker_count

STUDY = dict(family="binomial", n=40, epsilon=0.5, trials=21, methods=["gibbs-ss", "naive", "non-private"],
             seed=12, draws=120)


# ---------------------------------------------------------------- unit sizing

@settings(max_examples=300, deadline=None)
@given(total=st.integers(1, 10**6), workers=st.integers(1, 512))
def test_unit_size_gives_at_least_four_units_per_worker(total, workers):
    size = unit_size(total, workers)
    units = math.ceil(total / size)
    assert 1 <= size <= execution.MAX_UNIT
    if total >= 4 * workers and size < execution.MAX_UNIT:
        assert units >= 4 * workers
    if size == execution.MAX_UNIT:  # capped: then there are even more units than asked for
        assert units >= min(4 * workers, math.ceil(total / execution.MAX_UNIT))
    assert units <= total


def test_default_units_on_this_machine():
    """The issue's 2,000-trial study on 2 workers: 16 units of 125 (8 per worker)."""
    assert unit_size(2000, 2) == 125
    assert unit_size(2000, 16) == 16 and math.ceil(2000 / 16) == 125
    assert unit_size(10, 4) == 1


def test_trial_seed_is_the_spawned_child():
    for t in (0, 5, 99):
        a = np.random.default_rng(trial_seed(3, t)).random(4)
        b = np.random.default_rng(spawn_seeds(3, 100)[t]).random(4)
        assert np.array_equal(a, b)
    assert trial_seed(3, 5, 2).spawn_key == (5, 2)


def test_worker_count_and_use_workers(monkeypatch):
    monkeypatch.delenv("DPPOSTERIOR_WORKERS", raising=False)
    assert worker_count("serial", 7) == 1
    assert worker_count("processes", 3) == 3
    assert worker_count("tcp://127.0.0.1:8786", 5) == 5  # --workers names the cluster size: no connection
    with use_workers(6):
        assert execution.default_workers() == 6 == worker_count("local")
    assert execution.default_workers() >= 1
    with pytest.raises(InputError, match="workers"):
        with use_workers(0):
            pass


# ---------------------------------------------------------------- identical results

def test_calibration_json_identical_across_unit_sizes_and_backends(tmp_path):
    """identical JSON across unit sizes (1, 4, 7, 21, auto) and
    backends (serial; 2 worker processes with units of 3)."""
    texts = {}
    for size in (1, 4, 7, 21, None):
        texts[f"serial/{size}"] = json.dumps(calibrate(**STUDY, chunk=size, scheduler="serial"))
    texts["processes:2/3"] = json.dumps(calibrate(**STUDY, chunk=3, scheduler="processes", workers=2))
    assert len(set(texts.values())) == 1, {k: v[:120] for k, v in texts.items()}
    result = json.loads(texts["serial/None"])
    assert result["trials"] == 21 and result["failed_trials"] == 0 and result["failures"] == []
    assert result["methods"]["gibbs-ss"]["mmd"] is not None and result["methods"]["non-private"]["mmd"] is None


def test_a_trial_does_not_depend_on_the_other_methods():
    """Method m's draws and rank tie-breaks in trial t come from seed paths (t, 2, crc32(m)) and
    (t, 1, crc32(m)): dropping or reordering the other methods leaves its ranks unchanged."""
    both = calibrate(**{**STUDY, "methods": ["naive", "gibbs-ss"]}, return_ranks=True)
    alone = calibrate(**{**STUDY, "methods": ["gibbs-ss"]}, return_ranks=True)
    assert np.array_equal(both["_ranks"]["gibbs-ss"], alone["_ranks"]["gibbs-ss"])
    assert both["methods"]["gibbs-ss"] == alone["methods"]["gibbs-ss"]


def test_resume_keeps_the_checkpoints_unit_size(tmp_path):
    """Units sized automatically depend on the workers; a resumed run with another worker
    count takes the unit size recorded in the checkpoint instead of refusing it."""
    ck = tmp_path / "s.ckpt.json"
    first = calibrate(**STUDY, scheduler="serial", checkpoint=ck)  # 1 worker: units of 3
    state = json.loads(ck.read_text())
    assert state["fingerprint"]["chunk"] == unit_size(21, 1) == 3 and len(state["results"]) == 7
    del state["results"]["2"], state["results"]["5"]
    ck.write_text(json.dumps(state))
    resumed = calibrate(**STUDY, scheduler="processes", workers=2, checkpoint=ck, resume=True)
    assert json.dumps(resumed) == json.dumps(first)


# ---------------------------------------------------------------- failures are recorded

def test_a_failing_trial_is_recorded_not_fatal(monkeypatch):
    from dpposterior.inference import expfam_baselines

    real = expfam_baselines.sample_batch
    calls = {"n": 0}

    def flaky(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 3:
            raise ZeroDivisionError("float division by zero")
        out = real(*args, **kwargs)
        if calls["n"] == 5:
            out["theta"][...] = np.nan
        return out

    monkeypatch.setattr(expfam_baselines, "sample_batch", flaky)
    res = calibrate(**STUDY, scheduler="serial", chunk=4)
    assert res["failed_trials"] == 2
    assert res["failures"] == [
        {"trial": 2, "method": "gibbs-ss", "error": "ZeroDivisionError: float division by zero"},
        {"trial": 4, "method": "gibbs-ss", "error": "FloatingPointError: non-finite posterior draws"}]
    assert res["methods"]["gibbs-ss"]["failed_trials"] == 2
    assert res["methods"]["naive"]["failed_trials"] == 0
    # the other trials and methods are untouched: the same numbers as without the failures
    monkeypatch.setattr(expfam_baselines, "sample_batch", real)
    clean = calibrate(**STUDY, scheduler="serial")
    assert res["methods"]["naive"] == clean["methods"]["naive"]
    assert res["methods"]["gibbs-ss"]["ks"] != clean["methods"]["gibbs-ss"]["ks"]  # 19 of 21 trials


def test_failures_are_printed_in_the_table(monkeypatch, tmp_path, capsys):
    from dpposterior.inference import expfam_baselines

    def broken(*args, **kwargs):
        raise ValueError("boom")

    monkeypatch.setattr(expfam_baselines, "sample_batch", broken)
    code = main(["calibrate", "--family", "binomial", "--n", "20", "--epsilon", "1", "--trials", "5",
                 "--methods", "gibbs-ss,naive", "--draws", "50", "--scheduler", "serial",
                 "--out", str(tmp_path / "c.json")])
    out = capsys.readouterr().out
    assert code == 0
    assert "every trial failed" in out and "5 trial(s) failed" in out
    res = json.loads((tmp_path / "c.json").read_text())
    assert res["failed_trials"] == 5 and res["methods"]["gibbs-ss"]["ks"] is None
    assert res["methods"]["naive"]["failed_trials"] == 0


# ---------------------------------------------------------------- warm workers

WARM = r"""
import numpy as np, numba
from dpposterior.families import get_family
from dpposterior.inference import gibbs_ss as G
for fam, y in (("binomial", [5.0]), ("multinomial", [[3.0, 4.0, 5.0]]), ("exponential", [9.0]), ("poisson", [9.0])):
    prior = get_family(fam).parse_prior(None, None)
    G.sample_batch(fam, np.array(y), 20.0, 1.0, prior, bounds=[0.0, 2.0], warmup=5, draws=5, seed=1)
misses = {name: sum(f.stats.cache_misses.values()) for name, f in vars(G).items()
          if isinstance(f, numba.core.registry.CPUDispatcher)}
hits = {name: sum(f.stats.cache_hits.values()) for name, f in vars(G).items()
        if isinstance(f, numba.core.registry.CPUDispatcher)}
print(sum(misses.values()), sum(hits.values()), {k: v for k, v in misses.items() if v})
"""


def test_workers_start_warm_every_kernel_is_cached():
    """A fresh process (a new worker) compiles no Gibbs-SS kernel: all load from numba's cache
    (the truncated families' kernels used to be uncacheable and took ~6 s per process)."""
    first = subprocess.run([sys.executable, "-c", WARM], capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr  # fills the cache if it was empty
    again = subprocess.run([sys.executable, "-c", WARM], capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr
    misses, hits, which = again.stdout.split(maxsplit=2)
    assert int(misses) == 0, which
    assert int(hits) >= 3


# ---------------------------------------------------------------- --workers on every command with --scheduler

@pytest.mark.parametrize("argv", [
    ["calibrate", "--family", "binomial", "--n", "20", "--epsilon", "1", "--trials", "4", "--workers", "0"],
    ["calibrate", "--family", "binomial", "--n", "20", "--epsilon", "1", "--trials", "4", "--unit-size", "0"],
    ["reproduce", "--list", "--workers", "0"],
])
def test_bad_workers_is_one_line_error(argv, capsys):
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err
    assert "workers" in err or "unit-size" in err


def test_every_command_with_scheduler_takes_workers():
    import typer

    from dpposterior.cli import app

    command = typer.main.get_command(app)
    with_scheduler = [name for name, cmd in command.commands.items()
                      if any("--scheduler" in p.opts for p in cmd.params)]
    assert set(with_scheduler) >= {"infer", "calibrate", "reproduce"}
    for name in with_scheduler:
        assert any("--workers" in p.opts for p in command.commands[name].params), name


def test_calibrate_cli_workers_and_unit_size_same_json(tmp_path):
    outs = []
    for extra in (["--scheduler", "serial"], ["--scheduler", "processes", "--workers", "2", "--unit-size", "2"]):
        out = tmp_path / f"{len(outs)}.json"
        assert main(["calibrate", "--family", "binomial", "--n", "20", "--epsilon", "1", "--trials", "7",
                     "--methods", "gibbs-ss,naive", "--draws", "60", "--seed", "5", "--quiet",
                     "--out", str(out), *extra]) == 0
        outs.append(out.read_text())
    assert outs[0] == outs[1]
