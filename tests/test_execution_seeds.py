"""Seeds spawned per task do not depend on the backend or on the order tasks run in."""

import numpy as np

from dpposterior.checkpoint import run_units
from dpposterior.execution import spawn_seeds


def draw(seed_seq):
    return float(np.random.default_rng(seed_seq).normal())


def test_spawned_seeds_reproducible_and_distinct():
    a = [draw(s) for s in spawn_seeds(7, 5)]
    b = [draw(s) for s in spawn_seeds(7, 5)]
    assert a == b and len(set(a)) == 5


def test_run_units_serial_matches_direct(tmp_path):
    seeds = spawn_seeds(1, 4)
    out = run_units(draw, seeds, scheduler="serial", checkpoint=tmp_path / "ck.json", fingerprint={"x": 1})
    assert out == [draw(s) for s in seeds]
