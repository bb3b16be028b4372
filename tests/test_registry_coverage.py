"""Registry-driven coverage: every family in ``FAMILY_MODULES`` and every engine it names
runs, so a new family or engine cannot escape the tests.

* every family x engine runs on the family's example release (its simulator's release from the
  default prior, n = 60, epsilon = 1, fixed seed) with tiny options, and returns draws of the
  requested shape, all finite;
* every family can make that example (a ``simulate``);
* every family's curator is audited: tests/test_privacy.py::test_audit_every_curator, parametrised
  over the same registry (a curator without a ``privacy.SPECS`` entry fails there).

The engine strings resolve and every option is refused where not taken: tests/test_engine_options.py.
This is a smoke test of wiring, not of correctness (each engine's own tests do that), so the options
are the smallest each engine accepts; the SBI engines train for one round of two epochs.
"""

from __future__ import annotations

import numpy as np
import pytest

import dpposterior as dp
from dpposterior.families import FAMILY_MODULES, get_family

from _examples import example

PAIRS = [(name, method) for name in FAMILY_MODULES for method in get_family(name).methods]

#: the smallest run of each option an engine may take (only the options its class has are given)
TINY = {"draws": 20, "chains": 2, "warmup": 20, "simulations": 200, "particles": 20, "rounds": 1, "rqmc_points": 2,
        "max_epochs": 2, "batch_size": 20, "max_iter": 20}

#: the engines whose output has a fixed shape (``takes_draws = False``: draws and chains are not their
#: options), with that shape
FIXED_SHAPE = {("binomial", "ops"): (1, 100),                 # OPS: 100 one-posterior-sample releases at eps/100
               ("linear-regression", "adassp"): (1, 1)}       # a point estimate


@pytest.mark.parametrize("family,method", PAIRS)
def test_every_engine_runs_on_its_familys_example(family, method, monkeypatch):
    """... and receives the release's observation model, built once per run: the engine reads that model and names
    its draws through it, never building another."""
    from dpposterior.release import ReleaseBase

    cls = get_family(family).engine_options(method)
    options = {k: v for k, v in TINY.items() if k in cls.names()}
    sim = example(family)
    if "confidential" in cls.names():
        options["confidential"] = sim.confidential
    built = []
    build = ReleaseBase.observation_model

    def counted(self, *args, **kwargs):
        built.append(self)
        return build(self, *args, **kwargs)

    monkeypatch.setattr(ReleaseBase, "observation_model", counted)
    post = dp.infer(sim.release, method=method, seed=1, quiet=True, **options)
    assert len(built) == 1, f"{family}/{method} built the observation model {len(built)} times"
    assert post.family == family and post.method == method
    for name, draws in post.posterior.items():
        values = np.asarray(draws, float)
        expected = (options["chains"], options["draws"]) if cls.takes_draws else FIXED_SHAPE[family, method]
        assert values.shape[:2] == expected, (name, values.shape)
        assert np.all(np.isfinite(values)), name


@pytest.mark.parametrize("family,method", PAIRS)
def test_every_engine_takes_the_observation_model_and_its_options(family, method):
    """Every registered engine is ``engine(model, options)``: the observation model and its typed options, nothing
    else (docs/architecture.md, "Adding an engine")."""
    import inspect

    engine = get_family(family).engine(method)
    assert list(inspect.signature(engine).parameters) == ["model", "options"], (family, method)
